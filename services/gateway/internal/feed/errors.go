package feed

import "errors"

// ErrValueFormat is returned by ParseValueFormat for a name that is not a value format.
var ErrValueFormat = errors.New("feed: unknown value format")
