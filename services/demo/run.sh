#!/usr/bin/env bash
# `make run`: the gateway, a demo producer of order events into topic "orders" (3 partitions) and, per
# customer, into topic "user-activity", and a local Kafka on 127.0.0.1:9092 unless KAFKA_BROKERS points at a
# cluster already. Open http://127.0.0.1:8080/ (every order, public) and http://127.0.0.1:8081/ (a demo login
# and one user's stream, with a token in a cookie). Metrics and health are on the admin port,
# http://127.0.0.1:9090/. Ctrl-C or SIGTERM stops everything and leaves nothing running.
#
# Ports: PORT (8080), ADMIN_PORT (9090), LOGIN_PORT (8081), KAFKA_PORT (9092). DEMO_RATE: orders per second (3).
# LOG_LEVEL (or SSEGATE_LOG_LEVEL): the gateway's and the demo's log level (warn; info shows every start-up step).
set -euo pipefail
cd "$(dirname "$0")/../.."
say() { printf 'ssegate: %s\n' "$*" >&2; }
port=${PORT:-8080} admin=${ADMIN_PORT:-9090} login=${LOGIN_PORT:-8081}

# taken PORT NAME: fails with a line naming the setting when something already listens on the port.
taken() {
	if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then
		say "port $1 is taken ($2): stop what listens there, or choose another, e.g. $2=$(($1 + 100)) make run"
		exit 1
	fi
}

if [ "${1:-}" != --inner ]; then
	taken "$port" PORT
	taken "$admin" ADMIN_PORT
	taken "$login" LOGIN_PORT
	[ -n "${KAFKA_BROKERS:-}" ] || taken "${KAFKA_PORT:-9092}" KAFKA_PORT
	say "building the gateway and the demo producer into .run/bin (the first build takes a minute or two)"
	mkdir -p .run/bin
	go build -o .run/bin/ ./services/gateway ./services/demo
	# DEMO ONLY: the HMAC secret the demo login signs tokens with and the gateway verifies them with.
	secret=.run/demo-hmac-secret
	[ -s "$secret" ] || { head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$secret"; chmod 600 "$secret"; }
	export DEMO_SECRET=$PWD/$secret
	[ -n "${KAFKA_BROKERS:-}" ] || say "starting a local Kafka on 127.0.0.1:${KAFKA_PORT:-9092}"
	exec pkg/kafkatest/with-services.sh --kafka-port "${KAFKA_PORT:-9092}" --no-redis --no-registry -- "$0" --inner
fi

# --inner: Kafka is up (KAFKA_BROKERS); run the demo producer and the gateway until one of them stops or a
# signal comes, then stop both and wait for them.
pids=()
stop() {
	# While stopping, a signal changes nothing: Ctrl-C reaches the demo and the gateway too, and one of
	# them ending first makes this stop run from the wait below, with the shell's own SIGINT still to come.
	trap '' TERM INT
	trap - EXIT
	[ ${#pids[@]} -eq 0 ] || kill -TERM "${pids[@]}" 2>/dev/null || true
	wait 2>/dev/null || true
}
# Ctrl-C and SIGTERM are how a user stops it: a clean stop, exit 0.
trap 'stop; say "stopped"; exit 0' TERM INT
trap stop EXIT

level=${LOG_LEVEL:-${SSEGATE_LOG_LEVEL:-warn}}
say "Kafka is at $KAFKA_BROKERS; what a client sees can be compared with the topic itself:"
say "  kcat -b $KAFKA_BROKERS -C -t orders -o beginning -f '%p-%o %k %s\\n'"
# The topics first, so that the gateway finds them at once (it would warn that they do not exist yet).
.run/bin/demo --topic orders --user-topic user-activity --partitions 3 --create-only --log-level "$level"
.run/bin/demo --topic orders --user-topic user-activity --partitions 3 --rate "${DEMO_RATE:-3}" \
	--login "127.0.0.1:$login" --gateway "http://127.0.0.1:$port" --token-secret-file "$DEMO_SECRET" \
	--log-level "$level" &
pids+=($!)
SSEGATE_TOPICS=orders,user-activity \
	SSEGATE_TOPIC_AUTH=orders=none \
	SSEGATE_AUTH_ALGORITHMS=HS256 \
	SSEGATE_AUTH_HMAC_SECRET_FILE="$DEMO_SECRET" \
	SSEGATE_AUTH_EXPIRY_NOTICE=30s \
	SSEGATE_CORS_ORIGINS="http://127.0.0.1:$login" \
	SSEGATE_CORS_CREDENTIALS=true \
	SSEGATE_LOG_LEVEL=$level \
	.run/bin/gateway --listen "${SSEGATE_LISTEN:-127.0.0.1:$port}" \
	--admin-listen "${SSEGATE_ADMIN_LISTEN:-127.0.0.1:$admin}" &
gateway=$!
pids+=("$gateway")

# The addresses are printed once the stream answers: a page opened earlier would only wait.
(
	for _ in $(seq 1 120); do
		kill -0 "$gateway" 2>/dev/null || exit 0 # it stopped: its own error says why
		if python3 - "http://127.0.0.1:$port/streams/orders" 2>/dev/null <<'PY'; then
import sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=2) as r:
    sys.exit(0 if r.status == 200 and r.read(6) == b"retry:" else 1)
PY
			say "ready. Open http://127.0.0.1:$port/ (every order, public) and http://127.0.0.1:$login/ (one user's stream, signed in)"
			say "  or: curl -N http://127.0.0.1:$port/streams/orders"
			say "  metrics and health on the admin port: http://127.0.0.1:$admin/metrics, /healthz, /readyz"
			say "Ctrl-C stops everything."
			exit 0
		fi
		sleep 0.5
	done
	say "the stream did not answer within a minute: see the logs above"
) &

# Until the demo or the gateway stops (or a signal comes: the traps stop both).
rc=0
wait -n "${pids[@]}" || rc=$?
if [ "$rc" = 0 ]; then say "stopping"; else say "a process stopped (exit $rc); stopping the others"; fi
stop
[ "$rc" != 0 ] || say "stopped"
exit "$rc"
