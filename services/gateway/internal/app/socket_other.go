//go:build !linux

package app

import (
	"errors"
	"net"
)

// reusePortSupported says listen-reuse-port works here: only on Linux.
const reusePortSupported = false

// listenReusePort is Linux's alone (Validate refuses the setting elsewhere).
func listenReusePort(string) (net.Listener, func() error, error) {
	return nil, nil, errors.New("app: listen-reuse-port needs Linux")
}

// checkListening cannot tell elsewhere; a socket that does not listen fails at its first accept.
func checkListening(*net.TCPListener) error { return nil }
