package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"time"
)

// A gateway replaced on the same host (a VM, a fixed set of addresses behind a proxy whose upstream is a static
// list) leaves a moment when nothing listens on its port: between the old process's exit and the new one's
// listen, connections are refused, and a proxy such as nginx, with its default max_fails=1, marks the address
// failed on the first refusal. nginx clears that mark only when a request started after fail_timeout completes,
// and a stream does not complete, so a second restart soon after can leave the proxy with no live upstream
// (docs/kubernetes.md, Proxies and ingress). Two ways of never refusing a connection, so that the old process
// can keep its usual shutdown (unready, the propagation window and the drain with the listener open):
//
//   - A socket from the service manager (systemd socket activation: LISTEN_PID is this process, LISTEN_FDS is 1,
//     the socket is fd 3). The manager holds it open: connections wait in its queue while no process accepts,
//     and an old and a new process may accept from it at once. A process that exits closes only its own copy,
//     so nothing waiting in the queue is lost.
//   - listen-reuse-port (Linux): every process opens its own listener on the port with SO_REUSEPORT, and the
//     kernel gives each new connection to one listener of the port's group. A listener that closes resets the
//     connections still waiting in its own queue (unless the host's net.ipv4.tcp_migrate_req is 1, Linux 5.14
//     and later), so the listener that closes must be one the kernel has stopped giving connections to. A
//     classic BPF program on the group (SO_ATTACH_REUSEPORT_CBPF) picks the listener by its index in the group,
//     which is the order the listeners joined in: with two, 0 is the older and 1 the newer. A process that
//     joins attaches "return 0", so the older keeps every new connection while the newer starts; once the
//     newer is ready it attaches "return 1" and takes them all (takeOverWhenReady). When the older then stops,
//     its queue is empty by the time it closes its listener after its drain, and the newer moves to index 0:
//     an index past the group's end makes the kernel fall back to its hash, which with one listener is that
//     one. Stop the older of the two: a newer one stopped while an older one runs keeps the new connections
//     until it exits, and those in its queue then are reset.

// serviceSocketFD is the first socket a service manager passes (sd_listen_fds(3): SD_LISTEN_FDS_START).
const serviceSocketFD = 3

// serviceSockets returns how many sockets the service manager passed to the process whose id is pid: LISTEN_FDS
// when LISTEN_PID is pid, else 0 (the variables were meant for another process, or are not set).
func serviceSockets(getenv func(string) string, pid int) (int, error) {
	if getenv("LISTEN_PID") != strconv.Itoa(pid) {
		return 0, nil
	}
	n, err := strconv.Atoi(getenv("LISTEN_FDS"))
	if err != nil || n < 0 {
		return 0, fmt.Errorf("LISTEN_FDS: %q is not a number of sockets", getenv("LISTEN_FDS"))
	}
	return n, nil
}

// validateSockets checks the clients' port's settings against the platform and the service manager's sockets.
func (c Config) validateSockets() error {
	switch {
	case c.ListenReusePort && !reusePortSupported:
		return errors.New("invalid setting listen-reuse-port (SSEGATE_LISTEN_REUSE_PORT): needs Linux")
	case c.serviceSockets > 1:
		return fmt.Errorf("LISTEN_FDS: the service manager passed %d sockets; the gateway takes one, the clients' port", c.serviceSockets)
	case c.serviceSockets == 1 && c.ListenReusePort:
		return errors.New("invalid setting listen-reuse-port (SSEGATE_LISTEN_REUSE_PORT): not with a socket from the service manager (LISTEN_FDS), which the old and the new process share already")
	}
	return nil
}

// listenClients opens the clients' port: the socket the service manager passed, else cfg.Listen, shared with
// SO_REUSEPORT when cfg.ListenReusePort. takeOver is nil but for a shared port, where it gives this process
// every new connection of the port. The listener answers net/http's early errors in JSON and a late request
// head with 408, as listen's do.
func listenClients(cfg Config, log *slog.Logger) (ln net.Listener, takeOver func() error, err error) {
	switch {
	case cfg.serviceSockets > 0:
		ln, err = serviceListener()
		if err == nil {
			log.Info("clients' port: the socket from the service manager", "fd", serviceSocketFD, "addr", ln.Addr().String())
		}
	case cfg.ListenReusePort:
		ln, takeOver, err = listenReusePort(cfg.Listen)
		if errors.Is(err, errNoSteering) {
			log.Warn("listen-reuse-port: the kernel does not let the newest process take the port over; new connections are spread over the processes on it, and those waiting for one that closes are reset", "err", err)
			err = nil
		}
	default:
		ln, err = listen(cfg.Listen, headerTimeout)
		return ln, nil, err
	}
	if err != nil {
		return nil, nil, err
	}
	return jsonErrorListener{Listener: ln, maxHeaderBytes: maxHeaderBytes, headerTimeout: headerTimeout}, takeOver, nil
}

// serviceListener returns the listener of the socket the service manager passed as fd 3.
func serviceListener() (net.Listener, error) {
	f := os.NewFile(serviceSocketFD, "LISTEN_FDS socket")
	defer func() { _ = f.Close() }() // FileListener works on a copy
	ln, err := net.FileListener(f)
	if err != nil {
		return nil, fmt.Errorf("LISTEN_FDS: fd 3: %w", err)
	}
	tl, ok := ln.(*net.TCPListener)
	if !ok {
		_ = ln.Close()
		return nil, fmt.Errorf("LISTEN_FDS: fd 3 is a %s socket, not TCP", ln.Addr().Network())
	}
	if err := checkListening(tl); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("LISTEN_FDS: fd 3: %w", err)
	}
	return ln, nil
}

// errNoSteering says the kernel refused the program that lets the newest process take a shared port over: the
// listener works, shared by the kernel's hash.
var errNoSteering = errors.New("app: SO_ATTACH_REUSEPORT_CBPF refused")

// takeOverWhenReady gives this process every new connection of its shared port once it is ready (see the top
// of this file), and returns; it returns at once without a shared port, and without taking over when ctx ends
// first (a stop before ready leaves the connections with the process that has them).
func (a *App) takeOverWhenReady(ctx context.Context) {
	if a.takeOver == nil {
		return
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if ready, _ := a.feed.Ready(); ready && !a.draining.Load() {
			if err := a.takeOver(); err != nil {
				a.log.Warn("listen-reuse-port: could not take the clients' port over; new connections stay with the process that has them", "err", err)
				return
			}
			a.log.Info("listen-reuse-port: ready, taking every new connection of the clients' port", "addr", a.ln.Addr().String())
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
