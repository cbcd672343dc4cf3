package ring

import "errors"

// ErrBehind is returned by Read when the cursor's next frame has already been evicted from the ring.
var ErrBehind = errors.New("ring: cursor fell behind the oldest frame")
