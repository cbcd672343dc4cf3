#!/usr/bin/env bash
# Runs a command with a local Kafka (and Redis and a schema registry) started for it, and stops them when it ends.
#
#   pkg/kafkatest/with-services.sh [--kafka-port N] [--no-redis] [--no-registry] [--] CMD [ARGS...]
#
# A service whose address is already in the environment (KAFKA_BROKERS, REDIS_ADDR, SCHEMA_REGISTRY_URL) is used
# as it is and not started. Otherwise the broker, redis-server and the schema registry (pkg/registrytest/registry.sh,
# started alongside the broker) run with their files under $SSEGATE_STATE (default .run/ in the repository) on free
# loopback ports (the broker on --kafka-port when given), and CMD sees KAFKA_BROKERS, KAFKA_SASL_BROKERS,
# KAFKA_TLS_BROKERS, KAFKA_TLS_CA, REDIS_ADDR and SCHEMA_REGISTRY_URL. CMD also sees NGINX_BIN, the nginx that
# services/e2e/nginx.sh fetch unpacked into the cache, unless it is set already. The exit status is CMD's.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
kafka_port=0
redis=1
registry=1
while [ $# -gt 0 ]; do
	case "$1" in
	--kafka-port) kafka_port=$2; shift 2 ;;
	--no-redis) redis=0; shift ;;
	--no-registry) registry=0; shift ;;
	--) shift; break ;;
	*) break ;;
	esac
done
[ $# -gt 0 ] || { echo "usage: with-services.sh [--kafka-port N] [--no-redis] [--no-registry] [--] CMD [ARGS...]" >&2; exit 2; }

state=${SSEGATE_STATE:-$repo/.run}/services-$$
mkdir -p "$state"
started_kafka=0
started_redis=0
registry_pid=
cleanup() {
	local rc=$?
	[ $started_kafka = 1 ] && "$here/kafka.sh" stop "$state/kafka" || true
	[ $started_redis = 1 ] && "$repo/pkg/redistest/redis.sh" stop "$state/redis" || true
	# A registry still starting is let finish first, so that its pid is recorded when it is stopped.
	if [ -n "$registry_pid" ]; then
		wait "$registry_pid" 2>/dev/null || true
		"$repo/pkg/registrytest/registry.sh" stop "$state/registry" || true
	fi
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

# The registry starts in the background while the broker starts; its only stdout line goes to a file.
if [ $registry = 1 ] && [ -z "${SCHEMA_REGISTRY_URL:-}" ]; then
	"$repo/pkg/registrytest/registry.sh" start "$state/registry" >"$state/registry.env" &
	registry_pid=$!
fi
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
if [ -n "$registry_pid" ]; then
	wait "$registry_pid" || { echo "with-services: the schema registry did not start" >&2; exit 1; }
	while IFS= read -r line; do export "$line"; done <"$state/registry.env"
	echo "with-services: schema registry on $SCHEMA_REGISTRY_URL (log in $state/registry)" >&2
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
