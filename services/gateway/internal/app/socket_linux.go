//go:build linux

package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// reusePortSupported says listen-reuse-port works here.
const reusePortSupported = true

// listenReusePort listens on addr with SO_REUSEPORT, leaving the port's new connections with the listener that
// joined its group first (index 0), and returns takeOver, which gives them to the newest (index 1). See the top
// of socket.go. With errNoSteering the listener is returned all the same, without takeOver.
func listenReusePort(addr string) (net.Listener, func() error, error) {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
		}); err != nil {
			return err
		}
		return serr
	}}
	// Linux takes no reuseport program on a Multipath TCP listener, which Go opens by default.
	lc.SetMultipathTCP(false)
	ln, err := lc.Listen(context.Background(), "tcp", addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil, nil, fmt.Errorf("listen on %s with SO_REUSEPORT: %w (every process sharing the port needs listen-reuse-port, and the same user)", addr, err)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("listen on %s with SO_REUSEPORT: %w", addr, err)
	}
	tl := ln.(*net.TCPListener) //nolint:forcetypeassert // "tcp" listens with a *net.TCPListener
	if err := steer(tl, 0); err != nil {
		if errors.Is(err, errNoSteering) {
			return ln, nil, err
		}
		_ = ln.Close()
		return nil, nil, err
	}
	return ln, func() error { return steer(tl, 1) }, nil
}

// steer attaches to ln's reuseport group a classic BPF program that gives every new connection to the
// listener at index: "return index". An index past the group's end makes the kernel fall back to its hash.
func steer(ln *net.TCPListener, index uint32) error {
	rc, err := ln.SyscallConn()
	if err != nil {
		return err
	}
	prog := []unix.SockFilter{{Code: unix.BPF_RET | unix.BPF_K, K: index}}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptSockFprog(int(fd), unix.SOL_SOCKET, unix.SO_ATTACH_REUSEPORT_CBPF,
			&unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]})
	}); err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("%w: %w", errNoSteering, serr)
	}
	return nil
}

// checkListening says whether ln's socket listens (a socket passed by a service manager may only be bound).
func checkListening(ln *net.TCPListener) error {
	rc, err := ln.SyscallConn()
	if err != nil {
		return err
	}
	var on int
	var gerr error
	if err := rc.Control(func(fd uintptr) {
		on, gerr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_ACCEPTCONN)
	}); err != nil {
		return err
	}
	if gerr != nil {
		return gerr
	}
	if on == 0 {
		return errors.New("the socket does not listen")
	}
	return nil
}
