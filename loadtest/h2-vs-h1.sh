#!/usr/bin/env bash
# HTTP/2 next to HTTP/1.1, in one session: idle memory per stream and steady deliveries per CPU-second, one
# fresh gateway per run (loadtest/local.sh), the protocols alternating. docs/benchmarks.md ("HTTP/2 next to
# HTTP/1.1") has the figures this printed and what they mean.
#
#   go build -o .run/gateway ./services/gateway && go build -o .run/loadtest ./loadtest
#   pkg/kafkatest/with-services.sh --no-redis -- loadtest/h2-vs-h1.sh 2>&1 | tee .run/h2-vs-h1.log
#
# Every run is bounded (timeout 300 s each, 19 runs, about 12 minutes in all). The gateway's heap profiles
# (idle) and CPU profiles (steady) go to .run/h2-vs-h1/. LOADTEST_GATEWAY and LOADTEST_BIN name the binaries
# (default .run/gateway and .run/loadtest). The exit status is 0 whatever the runs found: read the output.
set -uo pipefail

cd "$(dirname "$0")/.."
: "${KAFKA_BROKERS:?KAFKA_BROKERS is not set: run under pkg/kafkatest/with-services.sh}"
export LOADTEST_GATEWAY=${LOADTEST_GATEWAY:-.run/gateway} LOADTEST_BIN=${LOADTEST_BIN:-.run/loadtest}
export SSEGATE_PPROF=true
out=.run/h2-vs-h1
mkdir -p "$out"

# run PROTO [ENV=VALUE...] -- LOADTEST FLAGS...: one gateway, one run of the tool. h2c turns the gateway's
# h2c on; h2 gives it a throwaway certificate (local.sh then passes an https:// URL and --ca-file).
run() {
	local p=$1 e=()
	shift
	while [ "$1" != -- ]; do
		e+=("$1")
		shift
	done
	shift
	case $p in
	h2c) e+=(SSEGATE_H2C=true) ;;
	h2) e+=(LOADTEST_TLS=1) ;;
	esac
	echo "== $p ${e[*]} $*"
	timeout 300 env "${e[@]}" loadtest/local.sh --proto="$p" --json "$@"
}

freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# (a) Idle: 5000 streams held 10 s; heap profiles before connecting and after the hold. The write timeout is
# raised because the gateway resets an HTTP/2 stream that has not been written to for write-timeout (10 s by
# default, and the heartbeat, off here, is 15 s): see the last runs.
for i in 1 2; do
	for p in h1 h2c h2; do
		run $p SSEGATE_WRITE_TIMEOUT=5m -- --mode=idle --connections=5000 --duration=10s \
			--gateway-heap-profile=$out/heap-$p-$i.pprof
	done
done
run h1 SSEGATE_WRITE_TIMEOUT=5m SSEGATE_WRITERS=0 -- --mode=idle --connections=5000 --duration=10s \
	--gateway-heap-profile=$out/heap-h1-writers0.pprof
for p in h2c h2; do
	run $p SSEGATE_WRITE_TIMEOUT=5m -- --mode=idle --connections=5000 --duration=10s --streams-per-conn=1 \
		--gateway-heap-profile=$out/heap-$p-1-per-conn.pprof
done

# (b) Steady: 1000 streams, 100 records/s for 30 s, default gateway settings.
for i in 1 2; do
	for p in h1 h2c h2; do
		run $p -- --mode=steady --connections=1000 --rate=100 --duration=30s
	done
done

# The gateway's CPU profile: 10 s in the middle of a 20 s steady run.
for p in h1 h2c h2; do
	ap=$(freeport)
	(sleep 12 && curl -s -o $out/cpu-$p.pprof "http://127.0.0.1:$ap/debug/pprof/profile?seconds=10") &
	run $p LOADTEST_ADMIN_PORT="$ap" -- --mode=steady --connections=1000 --rate=100 --duration=20s
	wait
done

# Quiet streams with the default settings (heartbeat 15 s, write timeout 10 s): one record every 20 s.
for p in h1 h2c; do
	run $p -- --mode=steady --connections=20 --rate=0.05 --duration=25s --drain-timeout=5s
done
exit 0
