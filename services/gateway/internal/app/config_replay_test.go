package app

import (
	"strings"
	"testing"
)

// TestReplayCacheBytes: replay-cache-bytes comes from a flag, a variable or the file as a byte size, defaults
// to 32MiB, and is refused below 1MiB or when it is no byte size, naming the setting.
func TestReplayCacheBytes(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		yaml string
		want int64
		err  []string
	}{
		{name: "default", env: minimalEnv, want: 32 << 20},
		{name: "flag", args: []string{"--replay-cache-bytes=128MiB"}, env: minimalEnv, want: 128 << 20},
		{name: "variable", env: withEnv(map[string]string{"SSEGATE_REPLAY_CACHE_BYTES": "64MiB"}), want: 64 << 20},
		{name: "file", env: minimalEnv, yaml: "replay-cache-bytes: 16MiB\n", want: 16 << 20},
		{name: "exactly 1MiB", args: []string{"--replay-cache-bytes=1048576"}, env: minimalEnv, want: 1 << 20},
		{name: "below 1MiB", args: []string{"--replay-cache-bytes=1048575"}, env: minimalEnv, err: []string{"replay-cache-bytes", "SSEGATE_REPLAY_CACHE_BYTES", "at least 1MiB"}},
		{name: "zero", env: withEnv(map[string]string{"SSEGATE_REPLAY_CACHE_BYTES": "0"}), err: []string{"replay-cache-bytes", "at least 1MiB"}},
		{name: "no byte size", env: minimalEnv, yaml: "replay-cache-bytes: lots\n", err: []string{"replay-cache-bytes", "lots"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := loadConfig(t, tc.args, tc.env, tc.yaml)
			if len(tc.err) > 0 {
				if err == nil {
					t.Fatalf("Load succeeded with replay-cache-bytes %d, want an error", c.ReplayCacheBytes)
				}
				for _, w := range tc.err {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not contain %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if c.ReplayCacheBytes != tc.want {
				t.Errorf("ReplayCacheBytes = %d, want %d", c.ReplayCacheBytes, tc.want)
			}
		})
	}
}
