package main

import (
	"errors"
	"io"
	"strings"
	"testing"
)

func TestParseConfigRefusesNonLoopback(t *testing.T) {
	env := func(string) string { return "" }
	tests := []struct {
		name string
		args []string
	}{
		{"remote gateway", []string{"--url=http://10.1.2.3:8080"}},
		{"remote admin port", []string{"--admin-url=http://10.1.2.3:9090"}},
		{"one remote among several", []string{"--url=http://127.0.0.1:8080,http://gw.example.com:8080"}},
		{"remote broker", []string{"--brokers=kafka.example.com:9092"}},
		{"remote broker among several", []string{"--brokers=127.0.0.1:9092,192.168.0.7:9092"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseConfig(tc.args, env, io.Discard)
			if !errors.Is(err, errNotLoopback) {
				t.Fatalf("parseConfig(%v) = %v, want a loopback refusal", tc.args, err)
			}
			if !strings.Contains(err.Error(), "loopback") {
				t.Fatalf("the message does not say why: %v", err)
			}
		})
	}
	// KAFKA_BROKERS from the environment is checked the same way.
	remote := func(k string) string {
		if k == "KAFKA_BROKERS" {
			return "kafka-0.kafka:9092"
		}
		return ""
	}
	if _, err := parseConfig(nil, remote, io.Discard); !errors.Is(err, errNotLoopback) {
		t.Fatalf("remote KAFKA_BROKERS: err = %v", err)
	}
}

func TestParseConfig(t *testing.T) {
	env := func(k string) string {
		if k == "KAFKA_BROKERS" {
			return "127.0.0.1:39092"
		}
		return ""
	}
	c, err := parseConfig([]string{
		"--mode=slow", "--url=http://127.0.0.1:1/,http://[::1]:2", "--admin-url=http://127.0.0.1:3,http://[::1]:4/", "--gateway-pid=10,11",
		"--duration=9s", "--connections=100000",
	}, env, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.URLs) != 2 || c.URLs[0] != "http://127.0.0.1:1" || len(c.AdminURLs) != 2 || c.AdminURLs[1] != "http://[::1]:4" || c.Brokers[0] != "127.0.0.1:39092" ||
		len(c.GatewayPIDs) != 2 || c.SlowAfter != c.Duration/3 {
		t.Fatalf("config = %+v", c)
	}
	for _, args := range [][]string{
		{"--mode=burst"},
		{"--connections=100001"},
		{"--conns-per-source=-1"},
		{"--idle-probe=-1"},
		{"--connections=0"},
		{"--gateway-pid=abc"},
		{"--rate=-1"},
		{"--slow-fraction=1"},
		// TLS needs --proto=h2.
		{"--url=https://127.0.0.1:8443"},
		{"--url=http://127.0.0.1:1,http://127.0.0.1:2"}, // one admin URL (the default) for two gateways
		{"extra"},
	} {
		if _, err := parseConfig(args, env, io.Discard); err == nil {
			t.Errorf("parseConfig(%v) accepted it", args)
		}
	}
}
