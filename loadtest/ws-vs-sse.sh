#!/usr/bin/env bash
# WebSocket next to SSE, in one session: idle memory per stream and steady deliveries per CPU-second, SSE over
# HTTP/1.1 (the writer pool) and WebSocket (GET /ws/{topic}, without and with acknowledgements), one fresh
# gateway per run (loadtest/local.sh), the variants alternating; and, when $CENTRIFUGO names a Centrifugo
# binary, the same two measurements of Centrifugo's WebSocket (loadtest/centrifugo) between them.
# docs/benchmarks.md ("WebSocket next to SSE") has the figures this printed and what they mean.
#
#   go build -o .run/gateway ./services/gateway && go build -o .run/loadtest ./loadtest && go build -o .run/cfload ./loadtest/centrifugo
#   GOBIN=$PWD/.run/centrifugo-bin GOFLAGS=-mod=mod go install github.com/centrifugal/centrifugo/v6@v6.9.1   # optional
#   CENTRIFUGO=.run/centrifugo-bin/centrifugo pkg/kafkatest/with-services.sh --no-redis -- loadtest/ws-vs-sse.sh 2>&1 | tee .run/ws-vs-sse.log
#
# Sections (arguments; default idle steady profile): idle (a), steady (b), profile (the gateway's CPU
# profiles) and quiet (c, steady at a fifth of the rate, where two cores are not saturated). Every run is
# bounded (timeout 300 s each; 15 runs in the default sections, 21 with Centrifugo, about 9 minutes; quiet
# adds 8, 10 with Centrifugo, about 5 minutes). The gateway's heap profiles (idle) and CPU profiles go to
# .run/ws-vs-sse/. LOADTEST_GATEWAY, LOADTEST_BIN and CFLOAD name the binaries (default .run/gateway,
# .run/loadtest, .run/cfload). The exit status is 0 whatever the runs found: read the output.
set -uo pipefail

cd "$(dirname "$0")/.."
: "${KAFKA_BROKERS:?KAFKA_BROKERS is not set: run under pkg/kafkatest/with-services.sh}"
export LOADTEST_GATEWAY=${LOADTEST_GATEWAY:-.run/gateway} LOADTEST_BIN=${LOADTEST_BIN:-.run/loadtest}
export SSEGATE_PPROF=true
cfload=${CFLOAD:-.run/cfload}
centrifugo=${CENTRIFUGO:-}
out=.run/ws-vs-sse
mkdir -p "$out"
sections=" ${*:-idle steady profile} "
want() { [[ $sections == *" $1 "* ]]; }

# run VARIANT [ENV=VALUE...] -- LOADTEST FLAGS...: one gateway, one run of the tool. VARIANT is h1 (SSE over
# HTTP/1.1), ws (WebSocket), ws-ack1 (WebSocket, every message acknowledged) or ws-ack10 (every tenth).
run() {
	local v=$1 e=() a=()
	shift
	while [ "$1" != -- ]; do
		e+=("$1")
		shift
	done
	shift
	case $v in
	h1) a=(--proto=h1) ;;
	ws) a=(--proto=ws) ;;
	ws-ack1) a=(--proto=ws --ws-acks=1) ;;
	ws-ack10) a=(--proto=ws --ws-acks=10) ;;
	esac
	echo "== $v ${e[*]} ${a[*]} $* (load $(cut -d' ' -f1-3 /proc/loadavg))"
	timeout 300 env ${e[@]+"${e[@]}"} loadtest/local.sh "${a[@]}" --json "$@"
}

freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# cf CFLOAD FLAGS...: one fresh Centrifugo (memory broker, anonymous subscribers on channel loadtest, the HTTP
# API without a key, /metrics and /debug/pprof on), one run of loadtest/centrifugo against it.
cf() {
	[ -n "$centrifugo" ] || return 0
	local port conf pid
	port=$(freeport)
	conf=$out/centrifugo.json
	cat >"$conf" <<EOF
{
  "http_server": {"address": "127.0.0.1", "port": $port},
  "client": {"allow_anonymous_connect_without_token": true},
  "channel": {"without_namespace": {"allow_subscribe_for_anonymous": true, "allow_subscribe_for_client": true}},
  "http_api": {"insecure": true},
  "prometheus": {"enabled": true},
  "debug": {"enabled": true},
  "usage_stats": {"disabled": true},
  "log": {"level": "warn"}
}
EOF
	"$centrifugo" -c "$conf" 2>"$out/centrifugo.log" &
	pid=$!
	for _ in $(seq 50); do
		curl -sf -o /dev/null "http://127.0.0.1:$port/metrics" && break
		sleep 0.1
	done
	echo "== centrifugo $* (load $(cut -d' ' -f1-3 /proc/loadavg))"
	timeout 300 "$cfload" --url="http://127.0.0.1:$port" --pid="$pid" "$@"
	kill -TERM "$pid"
	wait "$pid" 2>/dev/null
}

# (a) Idle: 5000 streams held 10 s, default gateway settings; heap profiles before connecting and after the
# hold.
want idle && for i in 1 2; do
	for v in h1 ws; do
		run $v -- --mode=idle --connections=5000 --duration=10s --gateway-heap-profile=$out/heap-$v-$i.pprof
	done
	cf --mode=idle --connections=5000 --duration=10s
done

# (b) Steady: 1000 streams, 100 records/s for 30 s, default gateway settings.
want steady && for i in 1 2; do
	for v in h1 ws ws-ack1 ws-ack10; do
		run $v -- --mode=steady --connections=1000 --rate=100 --duration=30s
	done
	cf --mode=steady --connections=1000 --rate=100 --duration=30s
done

# The gateway's CPU profile: 10 s in the middle of a 20 s steady run.
want profile && for v in h1 ws ws-ack1; do
	ap=$(freeport)
	(sleep 12 && curl -s -o $out/cpu-$v.pprof "http://127.0.0.1:$ap/debug/pprof/profile?seconds=10") &
	run $v LOADTEST_ADMIN_PORT="$ap" -- --mode=steady --connections=1000 --rate=100 --duration=20s
	wait
done

# (c) Quiet: 1000 streams, 20 records/s for 30 s (20,000 deliveries/s), where the gateway, the tool and Kafka
# together stay below two cores over WebSocket too: latency without a saturated machine.
want quiet && for i in 1 2; do
	for v in h1 ws ws-ack1 ws-ack10; do
		run $v -- --mode=steady --connections=1000 --rate=20 --duration=30s
	done
	cf --mode=steady --connections=1000 --rate=20 --duration=30s
done
exit 0
