#!/usr/bin/env bash
# `make run`: the gateway, a demo producer of order events into topic "orders" (3 partitions), and a local
# Kafka on 127.0.0.1:9092 unless KAFKA_BROKERS points at a cluster already. Open http://127.0.0.1:8080/; metrics
# and health are on the admin port, http://127.0.0.1:9090/ (ADMIN_PORT).
# Ctrl-C stops everything.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .run/bin
go build -o .run/bin/ ./services/gateway ./services/demo
exec scripts/with-services.sh --kafka-port "${KAFKA_PORT:-9092}" --no-redis -- bash -c '
	set -euo pipefail
	.run/bin/demo --topic orders --partitions 3 --rate "${DEMO_RATE:-3}" &
	demo=$!
	trap "kill $demo 2>/dev/null || true" EXIT
	echo "ssegate: open http://127.0.0.1:${PORT:-8080}/ or run: curl -N http://127.0.0.1:${PORT:-8080}/streams/orders" >&2
	echo "ssegate: metrics and health on the admin port: http://127.0.0.1:${ADMIN_PORT:-9090}/metrics, /healthz, /readyz" >&2
	SSEGATE_TOPICS=orders .run/bin/gateway --listen "${SSEGATE_LISTEN:-127.0.0.1:${PORT:-8080}}" \
		--admin-listen "${SSEGATE_ADMIN_LISTEN:-127.0.0.1:${ADMIN_PORT:-9090}}"
'
