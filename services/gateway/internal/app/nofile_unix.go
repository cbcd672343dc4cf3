//go:build unix

package app

import "syscall"

// openFilesLimit is the process's limit of open files (RLIMIT_NOFILE, which Go raises to the hard limit at
// start): every stream holds one, so it bounds the streams a pod can serve. 0 when it cannot be read.
func openFilesLimit() uint64 {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0
	}
	return r.Cur
}
