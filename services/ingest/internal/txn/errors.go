package txn

import "errors"

// ErrCheckpoint is returned when the checkpoint topic cannot be read or holds a value that is not a
// checkpoint.
var ErrCheckpoint = errors.New("txn: checkpoint")

// ErrProduce wraps the first error of a record produced in the current transaction.
var ErrProduce = errors.New("txn: produce failed")
