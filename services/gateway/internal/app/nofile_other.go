//go:build !unix

package app

// openFilesLimit is unknown off unix.
func openFilesLimit() uint64 { return 0 }
