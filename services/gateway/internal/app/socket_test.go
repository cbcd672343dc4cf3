package app

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// TestServiceSockets: the sockets of a service manager count only when LISTEN_PID names this process.
func TestServiceSockets(t *testing.T) {
	pid := os.Getpid()
	for _, tc := range []struct {
		name    string
		env     map[string]string
		want    int
		wantErr bool
	}{
		{"none", nil, 0, false},
		{"another process's", map[string]string{"LISTEN_PID": strconv.Itoa(pid + 1), "LISTEN_FDS": "1"}, 0, false},
		{"ours", map[string]string{"LISTEN_PID": strconv.Itoa(pid), "LISTEN_FDS": "1"}, 1, false},
		{"ours, two", map[string]string{"LISTEN_PID": strconv.Itoa(pid), "LISTEN_FDS": "2"}, 2, false},
		{"ours, not a number", map[string]string{"LISTEN_PID": strconv.Itoa(pid), "LISTEN_FDS": "one"}, 0, true},
		{"ours, negative", map[string]string{"LISTEN_PID": strconv.Itoa(pid), "LISTEN_FDS": "-1"}, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := serviceSockets(configEnv(tc.env), pid)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Fatalf("serviceSockets = %d, %v; want %d, error %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

// TestLoadSocketSettings: Load takes listen-reuse-port and the service manager's socket, and refuses what cannot
// work: more than one socket, or both at once.
func TestLoadSocketSettings(t *testing.T) {
	pid := strconv.Itoa(os.Getpid())
	for _, tc := range []struct {
		name    string
		env     map[string]string
		wantErr string // "" for none
	}{
		{"reuse-port", map[string]string{"SSEGATE_LISTEN_REUSE_PORT": "true"}, ""},
		{"one socket", map[string]string{"LISTEN_PID": pid, "LISTEN_FDS": "1"}, ""},
		{"two sockets", map[string]string{"LISTEN_PID": pid, "LISTEN_FDS": "2"}, "LISTEN_FDS: the service manager passed 2 sockets"},
		{"a socket and reuse-port", map[string]string{"LISTEN_PID": pid, "LISTEN_FDS": "1", "SSEGATE_LISTEN_REUSE_PORT": "true"}, "not with a socket from the service manager"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env["SSEGATE_LISTEN_REUSE_PORT"] != "" && tc.wantErr == "" && runtime.GOOS != "linux" {
				tc.wantErr = "needs Linux"
			}
			c, err := loadConfig(t, nil, withEnv(tc.env), "")
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if c.ListenReusePort != (tc.env["SSEGATE_LISTEN_REUSE_PORT"] == "true") {
					t.Errorf("ListenReusePort = %v", c.ListenReusePort)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Load: %v, want an error with %q", err, tc.wantErr)
			}
		})
	}
}
