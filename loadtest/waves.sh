#!/usr/bin/env bash
# Replays next to live delivery: the steady run without resume waves, then the same run with them, each
# against a fresh gateway (loadtest/local.sh) on a topic of its own. Prints the tool's output of each (its
# summary line; with --json the JSON line too; the run with waves prints the waves' process's summary line
# before its own) and then the ratio of the live readers' p99 with waves to their p99 without, with two
# decimals.
#
#   make build && go build -o .run/bin/loadtest ./loadtest
#   pkg/kafkatest/with-services.sh --no-redis -- loadtest/waves.sh [LOADTEST FLAGS...]
#
# The runs: 1000 readers, 100 records/s for 120 s and, in the second, every 20 s a wave of 120 resumes from
# 48,000 records behind the head, each cut 0.5 s after it dials. The wave clients run in a process of their
# own under nice 19 (--waves-process), which the steady run starts when it starts producing, against the
# same gateway and topic and from the same moment: on a machine the clients share with the gateway they take
# CPU only when nothing else wants it, as clients on other machines would, and the readers' latency is not
# the wave clients' parsing. --waves-process=false here runs them in the tool's own process instead. Before
# the readers connect, each run writes as many records as a wave resumes from (--prefill-records, following
# --wave-behind=N when given here), so that the first wave has them. Flags given here go to both runs after
# these (the last of a flag wins), except that the first run ends with --waves=0. Gateway settings pass
# through the environment as for local.sh: with the default ring (64 MiB) the waves read back from the ring,
# with SSEGATE_RING_BYTES=64KiB from Kafka. Each gateway's log is kept as .run/waves-without-gateway.log and
# .run/waves-with-gateway.log. Each run is bounded at 30 minutes. The exit status is 1 when either run
# failed.
set -uo pipefail

cd "$(dirname "$0")/.."
: "${KAFKA_BROKERS:?KAFKA_BROKERS is not set: run under pkg/kafkatest/with-services.sh}"
behind=48000
for a in "$@"; do
	case $a in
	--wave-behind=*) behind=${a#*=} ;;
	esac
done
args=(--mode=steady --connections=1000 --rate=100 --duration=120s --waves=120 --wave-every=20s
	--wave-behind=48000 --wave-cut=500ms --prefill-records="$behind" --waves-process "$@")
stamp=$(date +%s)
rc=0

# run NAME FLAGS...: one fresh gateway and one run of the tool; prints the tool's output and sets p99 to the
# live readers' p99 from its steady summary line (empty when there is none).
run() {
	local name=$1 out st=0
	shift
	echo "waves: the run $name waves" >&2
	out=$(LOADTEST_TOPIC=waves-$name-$stamp timeout 1800 loadtest/local.sh "$@") || st=$?
	cp .run/loadtest-gateway.log ".run/waves-$name-gateway.log" 2>/dev/null || true
	[ -z "$out" ] || printf '%s\n' "$out"
	if [ "$st" != 0 ]; then
		echo "waves: the run $name waves failed (exit status $st; its errors are above)"
		rc=1
	fi
	p99=$(printf '%s\n' "$out" | sed -n 's/^loadtest mode=steady .* p99=\([0-9.]*\)ms.*/\1/p' | head -n 1)
}

run without "${args[@]}" --waves=0
without=$p99
run with "${args[@]}"
with=$p99
if [ -n "$without" ] && [ -n "$with" ]; then
	awk -v a="$without" -v b="$with" \
		'BEGIN { printf "waves: live p99 without waves %.2fms, with waves %.2fms: ratio %.2f\n", a, b, (a > 0 ? b / a : 0) }'
else
	echo "waves: live p99 without waves ${without:--}, with waves ${with:--}: no ratio"
fi
exit "$rc"
