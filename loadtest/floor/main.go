// Command floor is the load tool's floor: a bare Go loop that serves one event stream to many loopback
// connections and writes every record to every connection, one 200-byte value in a frame of its own, one
// write system call per frame, with nothing else in the way: no Kafka, no ring, no per-connection goroutine
// or buffer. The load tool's floor mode (loadtest --mode=floor) starts it, reads it with the same clients as
// the gateway, and reports its CPU time per frame delivered, the machine's price of a write per delivery
// against which the gateway's deliveries per CPU-second are judged.
//
//	go build -o .run/bin/floor ./loadtest/floor
//	.run/bin/floor --listen=127.0.0.1:0 --rate=100 --value-bytes=200
//
// It listens on a loopback address and prints the address it got as its first line on stdout. It answers
// each HTTP/1.1 GET (any path) with a 200, Content-Type: text/event-stream, Cache-Control: no-cache and
// Connection: close, no length and no chunked encoding, then the opening block ("retry:", and an id-only
// block at the record before the connection's first), all in one write. A short-lived goroutine reads each
// request; after that a connection is one entry in the list of one of --writers goroutines (default the
// number of CPUs), which write each record's frame, "id: v1:0-<n>\ndata: <value>\n\n" with the load tool's
// value ({"ts":<unix nanos>,"seq":<n>,"pad":"xx..."}, --value-bytes long), to each of their connections
// with one conn.Write. Records are published at --rate a second from the start, whether anyone is connected
// or not.
//
// On SIGTERM (or SIGINT) it stops publishing, lets the writers write what they hold (for up to --drain),
// closes every connection, prints "stopped last=<n> conns=<c> frames=<f> dropped=<d>" on stdout and exits:
// a client open at the stop reads every record up to n, then the end of its stream. The exit status is 0,
// or 1 when the writers had to be cut off, 2 for bad flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"
)

func main() {
	os.Exit(mainStatus(os.Args[1:], os.Stdout, os.Stderr))
}

// mainStatus runs the floor and returns its exit status.
func mainStatus(args []string, stdout, stderr io.Writer) int {
	o, listen, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		_, _ = fmt.Fprintln(stderr, "floor:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", listen)
	if err != nil {
		_, _ = fmt.Fprintln(stderr, "floor:", err)
		return 1
	}
	if _, err := fmt.Fprintln(stdout, ln.Addr()); err != nil {
		_ = ln.Close()
		_, _ = fmt.Fprintln(stderr, "floor:", err)
		return 1
	}
	st, err := serve(ctx, ln, o)
	_, werr := fmt.Fprintf(stdout, "stopped last=%d conns=%d frames=%d dropped=%d\n", st.Last, st.Conns, st.Frames, st.Dropped)
	if err = errors.Join(err, werr); err != nil {
		_, _ = fmt.Fprintln(stderr, "floor:", err)
		return 1
	}
	return 0
}

// parseFlags reads the flags and checks them, including that --listen is on loopback.
func parseFlags(args []string, out io.Writer) (options, string, error) {
	fs := flag.NewFlagSet("floor", flag.ContinueOnError)
	fs.SetOutput(out)
	var o options
	listen := fs.String("listen", "127.0.0.1:0", "loopback address to listen on; the address chosen is printed as the first line on stdout")
	fs.IntVar(&o.writers, "writers", runtime.NumCPU(), "writer goroutines, each writing every record to its share of the connections")
	fs.Float64Var(&o.rate, "rate", 100, "records published per second, more than 0")
	fs.IntVar(&o.valueBytes, "value-bytes", 200, "bytes of each record's value")
	fs.DurationVar(&o.drain, "drain", 10*time.Second, "after SIGTERM, how long the writers get to write what they hold before every connection is closed")
	if err := fs.Parse(args); err != nil {
		return o, "", err
	}
	if fs.NArg() > 0 {
		return o, "", fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if err := checkLoopback(*listen); err != nil {
		return o, "", err
	}
	return o, *listen, o.validate()
}

// checkLoopback refuses a listen address whose host is not "localhost" or a literal loopback address: the
// floor is a load generator's counterpart and is not to be reached from elsewhere.
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--listen %q: want host:port", addr)
	}
	if strings.EqualFold(host, "localhost") {
		return nil
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("--listen %q: refusing an address that is not on loopback (localhost, 127.0.0.0/8, ::1)", addr)
	}
	return nil
}
