package e2e

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ssegate/ssegate/pkg/kafkatest"
	"github.com/ssegate/ssegate/pkg/proctest"
	"github.com/ssegate/ssegate/pkg/redistest"
)

// TestQuotaSurvivesSIGKILL: two gateway processes count one client address together in Redis. One of them
// is killed with SIGKILL, with streams open, so nothing gives its slots back: they still count right after
// the kill, and are free again within quota-expiry, without anybody cleaning up.
func TestQuotaSurvivesSIGKILL(t *testing.T) {
	brokers := strings.Join(kafkatest.Brokers(t), ",")
	redisAddr := redistest.Addr(t)
	prefix := redistest.Prefix(t)
	const (
		maxPerIP = 3
		expiry   = 3 * time.Second
	)
	bin := buildBinaries(t)
	topic := kafkatest.NewTopic(t, 1, nil)
	type pod struct {
		stream string
		proc   *process
	}
	start := func(name string) pod {
		addr, admin := proctest.FreeAddr(t), proctest.FreeAddr(t)
		p := startProcess(t, name, filepath.Join(bin, "gateway"), brokers,
			"--topics", topic, "--listen", addr, "--admin-listen", admin, "--prefill", "0",
			"--max-streams-per-ip", strconv.Itoa(maxPerIP), "--redis-addr", redisAddr, "--quota-key-prefix", prefix,
			"--quota-expiry", expiry.String(), "--quota-timeout", "500ms")
		waitReady(t, name, "http://"+admin+"/readyz")
		return pod{stream: "http://" + addr + "/streams/" + topic, proc: p}
	}
	a, b := start("gateway a"), start("gateway b")

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	// open requests a stream and returns its status; an admitted stream stays open until the test ends.
	open := func(url string) int {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		if resp.StatusCode != http.StatusOK {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			return resp.StatusCode
		}
		t.Cleanup(func() { _ = resp.Body.Close() })
		if line, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil || !strings.HasPrefix(line, "retry:") {
			t.Fatalf("GET %s: stream opens with %q, %v", url, line, err)
		}
		return resp.StatusCode
	}
	for _, url := range []string{a.stream, a.stream, b.stream} {
		if code := open(url); code != http.StatusOK {
			t.Fatalf("stream %s: %d, want it admitted", url, code)
		}
	}
	if code := open(b.stream); code != http.StatusTooManyRequests {
		t.Fatalf("stream %d of the address: %d, want 429", maxPerIP+1, code)
	}

	a.proc.kill(t)
	killed := time.Now()
	// gateway a refreshed its slots at most expiry/3 (plus jitter) before the kill: they still count for a
	// while.
	code := open(b.stream)
	if since := time.Since(killed); since < expiry/3 && code != http.StatusTooManyRequests {
		t.Fatalf("%v after the kill: %d, want 429 (the dead pod's slots still count)", since, code)
	}
	for code != http.StatusOK {
		if time.Since(killed) > expiry+2*time.Second {
			t.Fatalf("the killed gateway's slots are still taken %v after the kill (expiry %v)", time.Since(killed), expiry)
		}
		time.Sleep(100 * time.Millisecond)
		code = open(b.stream)
	}
	t.Logf("a slot of the killed gateway came back %v after SIGKILL (expiry %v)", time.Since(killed), expiry)
	if code := open(b.stream); code != http.StatusOK {
		t.Fatalf("the second slot of the killed gateway: %d, want it free too", code)
	}
	if code := open(b.stream); code != http.StatusTooManyRequests {
		t.Fatalf("stream %d of the address, all on the surviving gateway: %d, want 429", maxPerIP+1, code)
	}
}
