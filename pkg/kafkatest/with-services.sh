#!/usr/bin/env bash
# Runs a command with a local Kafka (and Redis) started for it, and stops them when it ends.
#
#   pkg/kafkatest/with-services.sh [--kafka-port N] [--no-redis] [--] CMD [ARGS...]
#
# A service whose address is already in the environment (KAFKA_BROKERS, REDIS_ADDR) is used as it is and not
# started. Otherwise the broker and redis-server run with their files under $SSEGATE_STATE (default .run/ in the
# repository) on free loopback ports (the broker on --kafka-port when given), and CMD sees KAFKA_BROKERS,
# KAFKA_SASL_BROKERS, KAFKA_TLS_BROKERS, KAFKA_TLS_CA and REDIS_ADDR. CMD also sees NGINX_BIN, the nginx that
# services/e2e/nginx.sh fetch unpacked into the cache, unless it is set already. The exit status is CMD's.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
kafka_port=0
redis=1
while [ $# -gt 0 ]; do
	case "$1" in
	--kafka-port) kafka_port=$2; shift 2 ;;
	--no-redis) redis=0; shift ;;
	--) shift; break ;;
	*) break ;;
	esac
done
[ $# -gt 0 ] || { echo "usage: with-services.sh [--kafka-port N] [--no-redis] [--] CMD [ARGS...]" >&2; exit 2; }

state=${SSEGATE_STATE:-$repo/.run}/services-$$
mkdir -p "$state"
started_kafka=0
started_redis=0
cleanup() {
	local rc=$?
	[ $started_kafka = 1 ] && "$here/kafka.sh" stop "$state/kafka" || true
	[ $started_redis = 1 ] && "$repo/pkg/redistest/redis.sh" stop "$state/redis" || true
	[ $rc = 0 ] && rm -rf "$state"
	exit $rc
}
trap cleanup EXIT
# CMD runs in the background so that a signal reaches this script at once (bash runs traps only between
# foreground commands); the traps pass it on to CMD as SIGTERM (a background command ignores SIGINT), wait for
# CMD to stop, then stop the services. A CMD that stops cleanly on the signal (exit 0, as `make run` does)
# ends the run cleanly: exit 0, and its files are removed like after any success.
child=
forward() {
	local rc=$1
	if [ -n "$child" ]; then
		kill -TERM "$child" 2>/dev/null
		if wait "$child" 2>/dev/null; then
			rc=0
		fi
	fi
	exit "$rc"
}
trap 'forward 130' INT
trap 'forward 143' TERM

if [ -z "${KAFKA_BROKERS:-}" ]; then
	started_kafka=1
	out=$("$here/kafka.sh" start "$state/kafka" "$kafka_port")
	while IFS= read -r line; do export "$line"; done <<<"$out"
	echo "with-services: Kafka on $KAFKA_BROKERS (logs in $state/kafka)" >&2
fi
if [ $redis = 1 ] && [ -z "${REDIS_ADDR:-}" ]; then
	started_redis=1
	out=$("$repo/pkg/redistest/redis.sh" start "$state/redis")
	while IFS= read -r line; do export "$line"; done <<<"$out"
	echo "with-services: Redis on $REDIS_ADDR" >&2
fi
if [ -z "${NGINX_BIN:-}" ]; then
	out=$("$repo/services/e2e/nginx.sh" path)
	[ -z "$out" ] || export "${out?}"
fi

"$@" &
child=$!
rc=0
wait "$child" || rc=$?
child=
exit "$rc"
