package lease

import "errors"

// ErrNotHeld is returned by Release when the key was no longer this lease's: it expired (and may belong
// to another replica now).
var ErrNotHeld = errors.New("lease: not held")
