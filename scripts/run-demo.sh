#!/usr/bin/env bash
# `make run`: the gateway, a demo producer of order events into topic "orders" (3 partitions) and, per
# customer, into topic "user-activity", and a local Kafka on 127.0.0.1:9092 unless KAFKA_BROKERS points at a
# cluster already. Open http://127.0.0.1:8080/ (every order, public) and http://127.0.0.1:8081/ (a demo login
# and one user's stream, with a token in a cookie). Metrics and health are on the admin port,
# http://127.0.0.1:9090/ (ADMIN_PORT). Ctrl-C stops everything.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .run/bin
go build -o .run/bin/ ./services/gateway ./services/demo
# DEMO ONLY: the HMAC secret the demo login signs tokens with and the gateway verifies them with.
secret=.run/demo-hmac-secret
[ -s "$secret" ] || { head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$secret"; chmod 600 "$secret"; }
export DEMO_SECRET=$PWD/$secret
exec scripts/with-services.sh --kafka-port "${KAFKA_PORT:-9092}" --no-redis -- bash -c '
	set -euo pipefail
	port=${PORT:-8080} login=${LOGIN_PORT:-8081}
	.run/bin/demo --topic orders --user-topic user-activity --partitions 3 --rate "${DEMO_RATE:-3}" \
		--login "127.0.0.1:$login" --gateway "http://127.0.0.1:$port" --token-secret-file "$DEMO_SECRET" &
	demo=$!
	trap "kill $demo 2>/dev/null || true" EXIT
	echo "ssegate: open http://127.0.0.1:$port/ (every order) and http://127.0.0.1:$login/ (one user, signed in); or run: curl -N http://127.0.0.1:$port/streams/orders" >&2
	echo "ssegate: metrics and health on the admin port: http://127.0.0.1:${ADMIN_PORT:-9090}/metrics, /healthz, /readyz" >&2
	SSEGATE_TOPICS=orders,user-activity \
	SSEGATE_TOPIC_AUTH=orders=none \
	SSEGATE_AUTH_ALGORITHMS=HS256 \
	SSEGATE_AUTH_HMAC_SECRET_FILE="$DEMO_SECRET" \
	SSEGATE_AUTH_EXPIRY_NOTICE=30s \
	SSEGATE_CORS_ORIGINS="http://127.0.0.1:$login" \
	SSEGATE_CORS_CREDENTIALS=true \
	.run/bin/gateway --listen "${SSEGATE_LISTEN:-127.0.0.1:$port}" \
		--admin-listen "${SSEGATE_ADMIN_LISTEN:-127.0.0.1:${ADMIN_PORT:-9090}}"
'
