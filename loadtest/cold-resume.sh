#!/usr/bin/env bash
# Resumes from Kafka as a client that connects for each resume sees them, from the first resume after the
# gateway started on: for 1, 3 and 12 partitions, a fresh gateway each (loadtest/local.sh) with a ring too
# small to serve the resumes and no prefill, a topic of its own, and the resume mode with a new connection
# dialed inside the timing of each resume (--resume-conn=fresh). cold_first in each line is the first resume
# the gateway served.
#
#   make build && go build -o .run/bin/loadtest ./loadtest
#   pkg/kafkatest/with-services.sh --no-redis -- loadtest/cold-resume.sh [LOADTEST FLAGS...]
#
# Flags given here go to every resume run after the script's own (--resume-count=5, --json, ...). The topic
# is made, with its partitions, by a short idle run on a gateway of its own before the measured gateway
# starts, as in a deployment whose topics exist when a gateway starts: a gateway warms its replay clients for
# a topic that appears later only at its next refresh, up to 20 s later, and a resume before that would pay
# for the topic's metadata and a connection to its leader. Each measured gateway's log is kept as
# .run/cold-resume-p<P>-gateway.log. Prints the tool's summary line for each partition count, or a line
# saying that a run failed; the exit status is 1 when any run failed. COLD_RESUME_PARTITIONS (default "1 3
# 12") picks the partition counts.
set -uo pipefail

cd "$(dirname "$0")/.."
: "${KAFKA_BROKERS:?KAFKA_BROKERS is not set: run under pkg/kafkatest/with-services.sh}"
export SSEGATE_RING_BYTES=64KiB SSEGATE_PREFILL=0
rc=0
for p in ${COLD_RESUME_PARTITIONS:-1 3 12}; do
	topic=resume-p$p-$(date +%s)
	echo "cold-resume: $p partitions, topic $topic" >&2
	if ! LOADTEST_TOPIC=$topic timeout 120 loadtest/local.sh --mode=idle --partitions="$p" --connections=1 \
		--duration=100ms --idle-probe=0 >/dev/null; then
		echo "cold-resume: $p partitions: the short run before the measured one failed; the resume run makes the topic itself" >&2
	fi
	st=0
	LOADTEST_TOPIC=$topic timeout 900 loadtest/local.sh --mode=resume --resume-conn=fresh --partitions="$p" --create-topic "$@" || st=$?
	cp .run/loadtest-gateway.log ".run/cold-resume-p$p-gateway.log" 2>/dev/null || true
	if [ "$st" != 0 ]; then
		echo "cold-resume: $p partitions: the run failed (exit status $st; its errors are above)"
		rc=1
	fi
done
exit "$rc"
