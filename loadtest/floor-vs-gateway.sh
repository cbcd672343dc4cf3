#!/usr/bin/env bash
# The gateway next to the floor, in one sitting: the floor (loadtest/floor, a bare Go loop writing one frame
# per write system call to every connection), then the gateway's steady mode (loadtest/local.sh, a fresh
# gateway), then the floor again, all at the same connections and rate, every record its own write; then the
# gateway's deliveries per CPU-second, the two floors' frames per CPU-second, and the gateway's figure over
# the floors' mean (the goal is 0.80 or more).
#
#   make build && go build -o .run/bin/loadtest ./loadtest && go build -o .run/bin/floor ./loadtest/floor
#   pkg/kafkatest/with-services.sh --no-redis -- loadtest/floor-vs-gateway.sh
#   pkg/kafkatest/with-services.sh --no-redis -- loadtest/floor-vs-gateway.sh --connections=2000 --rate=50
#
# Each run is --connections=1000 --rate=100 --duration=30s followed by the flags given here (a later flag
# wins), and is bounded by timeout 300 s; the three take about two minutes. LOADTEST_BIN names the tool
# (default .run/bin/loadtest) and LOADTEST_FLOOR the floor program (default .run/bin/floor); local.sh's
# settings (LOADTEST_GATEWAY, SSEGATE_*) apply to the gateway's run. The exit status is 0 when every run
# passed its checks and the ratio could be computed, 1 otherwise.
set -uo pipefail

cd "$(dirname "$0")/.."
: "${KAFKA_BROKERS:?KAFKA_BROKERS is not set: run under pkg/kafkatest/with-services.sh}"
export LOADTEST_BIN=${LOADTEST_BIN:-.run/bin/loadtest}
floor_bin=${LOADTEST_FLOOR:-.run/bin/floor}
common=(--connections=1000 --rate=100 --duration=30s)
status=0

# figure NAME OUTPUT: the number after NAME= on the summary line of OUTPUT, or nothing.
figure() { grep '^loadtest mode=' <<<"$2" | grep -o "$1=[0-9.]*" | head -n1 | cut -d= -f2; }

# measure LABEL COMMAND...: runs one measurement, shows its output, and keeps it in $out; a failed run makes
# the script's status 1.
measure() {
	local label=$1
	shift
	echo "== $label: $* (load $(cut -d' ' -f1-3 /proc/loadavg))"
	out=$(timeout 300 "$@")
	local st=$?
	echo "$out"
	if [ "$st" != 0 ]; then
		echo "floor-vs-gateway: $label exited with status $st" >&2
		status=1
	fi
}

measure floor1 "$LOADTEST_BIN" --mode=floor --floor-bin="$floor_bin" "${common[@]}" "$@"
floor1=$(figure 'floor_frames/cpu_s' "$out")
measure gateway loadtest/local.sh --mode=steady "${common[@]}" "$@"
gateway=$(figure 'deliveries/cpu_s' "$out")
measure floor2 "$LOADTEST_BIN" --mode=floor --floor-bin="$floor_bin" "${common[@]}" "$@"
floor2=$(figure 'floor_frames/cpu_s' "$out")

if [ -z "$gateway" ] || [ -z "$floor1" ] || [ -z "$floor2" ]; then
	echo "floor-vs-gateway: a figure is missing (gateway deliveries/cpu_s=${gateway:--}, floors ${floor1:--} ${floor2:--})" >&2
	exit 1
fi
awk -v g="$gateway" -v a="$floor1" -v b="$floor2" 'BEGIN {
	m = (a + b) / 2
	printf "floor-vs-gateway: gateway deliveries/cpu_s=%.0f floor_frames/cpu_s=%.0f,%.0f (mean %.0f) ratio=%.2f (goal 0.80)\n", g, a, b, m, (m > 0 ? g / m : 0)
}'
exit "$status"
