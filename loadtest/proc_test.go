package main

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
)

func TestParseStat(t *testing.T) {
	tests := []struct {
		name string
		stat string
		want float64
		err  bool
	}{
		{"plain", "1 (gateway) S 0 1 1 0 -1 0 0 0 0 0 150 50 0 0 20 0 1 0 1 1 1", 2.0, false},
		{"name with spaces and parens", "7 (a) b (c) R 0 1 1 0 -1 0 0 0 0 0 1 2 0 0 20 0 1 0 1 1 1", 0.03, false},
		{"no name", "1 gateway S 0", 0, true},
		{"truncated", "1 (gateway) S 0 1 1", 0, true},
		{"not a number", "1 (gateway) S 0 1 1 0 -1 0 0 0 0 0 x 50 0", 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseStatCPU([]byte(tc.stat))
			if tc.err {
				if !errors.Is(err, errProcFormat) {
					t.Fatalf("err = %v, want errProcFormat", err)
				}
				return
			}
			if err != nil || math.Abs(got-tc.want) > 1e-9 {
				t.Fatalf("parseStatCPU = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestParseStatusRSS(t *testing.T) {
	if _, err := parseStatusRSS(strings.NewReader("Name:\tkthreadd\nState:\tS\n")); !errors.Is(err, errProcFormat) {
		t.Fatalf("no VmRSS: err = %v", err)
	}
	if _, err := parseStatusRSS(strings.NewReader("VmRSS:\t12 MB\n")); !errors.Is(err, errProcFormat) {
		t.Fatalf("unit MB: err = %v", err)
	}
}

func TestSampleProcsTestdata(t *testing.T) {
	s, err := sampleProcs("testdata/proc", []int{4242})
	if err != nil {
		t.Fatal(err)
	}
	if want := (1234.0 + 567.0) / 100; math.Abs(s.CPUSeconds-want) > 1e-9 || s.RSSBytes != 40420<<10 || s.Writes != 4711 {
		t.Fatalf("sample = %+v, want cpu %v rss %d", s, want, 40420<<10)
	}
	// Two processes add up.
	s, err = sampleProcs("testdata/proc", []int{4242, 4343})
	if err != nil {
		t.Fatal(err)
	}
	if want := (1234.0 + 567 + 50 + 25) / 100; math.Abs(s.CPUSeconds-want) > 1e-9 || s.RSSBytes != (40420+1000)<<10 || s.Writes != 4711+289 {
		t.Fatalf("sample = %+v, want cpu %v rss %d", s, want, (40420+1000)<<10)
	}
	if _, err := sampleProcs("testdata/proc", []int{1}); err == nil {
		t.Fatal("a missing pid gave no error")
	}
}

func TestParseNetstat(t *testing.T) {
	const good = "TcpExt: SyncookiesSent ListenOverflows ListenDrops TCPHPHits\n" +
		"TcpExt: 0 12 30 991\n" +
		"IpExt: InNoRoutes ListenDrops\n" +
		"IpExt: 5 77\n"
	m, err := parseNetstat(strings.NewReader(good), "ListenOverflows", "ListenDrops")
	if err != nil {
		t.Fatal(err)
	}
	if m["ListenOverflows"] != 12 || m["ListenDrops"] != 30 {
		t.Fatalf("counters = %v, want ListenOverflows 12 and ListenDrops 30 from TcpExt", m)
	}
	bad := []struct{ name, text string }{
		{"no TcpExt", "IpExt: A\nIpExt: 1\n"},
		{"names without values", "TcpExt: ListenOverflows ListenDrops\n"},
		{"fewer values", "TcpExt: ListenOverflows ListenDrops\nTcpExt: 1\n"},
		{"missing counter", "TcpExt: ListenOverflows\nTcpExt: 1\n"},
		{"not a number", "TcpExt: ListenOverflows ListenDrops\nTcpExt: 1 x\n"},
	}
	for _, tc := range bad {
		if _, err := parseNetstat(strings.NewReader(tc.text), "ListenOverflows", "ListenDrops"); err == nil {
			t.Errorf("%s: parsed without an error", tc.name)
		}
	}
}

func TestCheckGatewayNoFile(t *testing.T) {
	const limits = "Limit                     Soft Limit           Hard Limit           Units     \n" +
		"Max processes             unlimited            unlimited            processes \n" +
		"Max open files            %s                %s                files     \n"
	tests := []struct {
		name    string
		soft    string
		streams int
		wantErr bool
	}{
		{"room to spare", "131072", 50_000, false},
		{"exactly enough", "20064", 20_000, false},
		{"too few", "20000", 50_000, true},
		{"just short of the reserve", "20000", 19_990, true},
		{"unlimited", "unlimited", 100_000, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			if err := os.MkdirAll(root+"/42", 0o755); err != nil {
				t.Fatal(err)
			}
			text := fmt.Sprintf(limits, tc.soft, tc.soft)
			if err := os.WriteFile(root+"/42/limits", []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
			err := checkGatewayNoFile(root, []int{42}, tc.streams)
			if tc.wantErr != (err != nil) {
				t.Fatalf("err = %v, want an error: %v", err, tc.wantErr)
			}
			if err != nil && (!errors.Is(err, errNoFile) || !strings.Contains(err.Error(), "pid 42")) {
				t.Fatalf("err = %v, want errNoFile naming the pid", err)
			}
		})
	}
	if err := checkGatewayNoFile(t.TempDir(), []int{42}, 10); err == nil {
		t.Fatal("a missing /proc entry passed")
	}
}

func TestParseIOSyscw(t *testing.T) {
	if n, err := parseIOSyscw(strings.NewReader("rchar: 5\nsyscw: 123\n")); err != nil || n != 123 {
		t.Fatalf("syscw = %d, %v; want 123", n, err)
	}
	for _, bad := range []string{"rchar: 5\n", "syscw: many\n"} {
		if _, err := parseIOSyscw(strings.NewReader(bad)); !errors.Is(err, errProcFormat) {
			t.Errorf("%q: err = %v, want errProcFormat", bad, err)
		}
	}
	// A process whose io file cannot be read leaves the count unknown rather than wrong.
	if n := addWrites(10, "testdata/proc/none/io"); n != -1 {
		t.Fatalf("addWrites of a missing file = %d, want -1", n)
	}
}
