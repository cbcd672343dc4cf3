#!/usr/bin/env bash
# Runs the load tool against one local gateway, started here and stopped at the end.
#
#   loadtest/local.sh [LOADTEST FLAGS...]
#
# Needs KAFKA_BROKERS (run it under pkg/kafkatest/with-services.sh) and the binaries .run/bin/gateway and
# .run/bin/loadtest (`make loadtest` builds both). The gateway serves topic $LOADTEST_TOPIC (default
# loadtest) on a free loopback port, or $LOADTEST_PORT (its admin port: $LOADTEST_ADMIN_PORT, or a free one);
# its log goes to .run/loadtest-gateway.log. Extra
# gateway settings can be passed through the environment (SSEGATE_RING_BYTES=1MiB, SSEGATE_WRITE_TIMEOUT=2s,
# ...). The exit status is the tool's.
#
# TLS and HTTP/2: with SSEGATE_TLS_CERT_FILE and SSEGATE_TLS_KEY_FILE set, or LOADTEST_TLS=1 (a throwaway
# self-signed certificate for 127.0.0.1 is made with openssl for the run), the gateway's clients' port speaks
# TLS, and the tool gets an https:// URL, --proto=h2 and --ca-file=$LOADTEST_CA_FILE (default the
# certificate itself) before the flags given here. SSEGATE_H2C=true makes the cleartext port speak h2c too;
# pass --proto=h2c to use it. LOADTEST_GATEWAY and LOADTEST_BIN name other binaries than .run/bin/gateway and
# .run/bin/loadtest.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
: "${KAFKA_BROKERS:?KAFKA_BROKERS is not set: run under pkg/kafkatest/with-services.sh}"
topic=${LOADTEST_TOPIC:-loadtest}
freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
port=${LOADTEST_PORT:-$(freeport)}
admin_port=${LOADTEST_ADMIN_PORT:-$(freeport)}
log=$repo/.run/loadtest-gateway.log
gateway_bin=${LOADTEST_GATEWAY:-$repo/.run/bin/gateway}
tool_bin=${LOADTEST_BIN:-$repo/.run/bin/loadtest}

scheme=http
tls_args=()
tmp=
gw=
cleanup() {
	if [ -n "$gw" ]; then
		kill -TERM "$gw" 2>/dev/null || true
		wait "$gw" 2>/dev/null || true
	fi
	[ -z "$tmp" ] || rm -rf "$tmp"
}
trap cleanup EXIT
if [ "${LOADTEST_TLS:-0}" = 1 ] && [ -z "${SSEGATE_TLS_CERT_FILE:-}" ]; then
	tmp=$(mktemp -d)
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=127.0.0.1 \
		-addext subjectAltName=IP:127.0.0.1 -keyout "$tmp/key.pem" -out "$tmp/cert.pem" 2>/dev/null
	export SSEGATE_TLS_CERT_FILE=$tmp/cert.pem SSEGATE_TLS_KEY_FILE=$tmp/key.pem
fi
if [ -n "${SSEGATE_TLS_CERT_FILE:-}" ]; then
	scheme=https
	tls_args=(--proto=h2 "--ca-file=${LOADTEST_CA_FILE:-$SSEGATE_TLS_CERT_FILE}")
fi

nofile=${LOADTEST_NOFILE:-131072}
hard=$(ulimit -Hn)
if [ "$hard" != unlimited ] && [ "$hard" -lt "$nofile" ]; then
	if [ "$(id -u)" = 0 ] && ulimit -Hn "$nofile" 2>/dev/null; then
		echo "loadtest: raised the open-file hard limit from $hard to $nofile for the gateway and the tool" >&2
	else
		echo "loadtest: the open-file hard limit is $hard and cannot be raised (that needs root with CAP_SYS_RESOURCE): the gateway holds fewer than $hard streams" >&2
	fi
fi
somaxconn=$(cat /proc/sys/net/core/somaxconn 2>/dev/null || echo 4096)
if [ "$somaxconn" -lt 4096 ]; then
	if [ "$(id -u)" = 0 ] && sysctl -q -w net.core.somaxconn=4096 2>/dev/null; then
		echo "loadtest: raised net.core.somaxconn from $somaxconn to 4096 (the gateway's accept queue)" >&2
	else
		echo "loadtest: net.core.somaxconn is $somaxconn (not root, left alone): keep --connect-concurrency below it" >&2
	fi
fi

# With --topics=N among the flags, the gateway serves the N topics the tool streams: T, T-2, ..., T-N.
topics=$topic
n=$(printf '%s\n' "$@" | sed -n 's/^--topics=\([0-9][0-9]*\)$/\1/p' | tail -n 1)
for ((i = 2; i <= ${n:-1}; i++)); do topics=$topics,$topic-$i; done

SSEGATE_TOPICS=$topics SSEGATE_LISTEN=127.0.0.1:$port SSEGATE_ADMIN_LISTEN=127.0.0.1:$admin_port \
	SSEGATE_METADATA_INTERVAL=${SSEGATE_METADATA_INTERVAL:-1s} \
	SSEGATE_DRAIN=${SSEGATE_DRAIN:-0} "$gateway_bin" 2>"$log" &
gw=$!
echo "loadtest: gateway pid $gw on $scheme://127.0.0.1:$port (admin 127.0.0.1:$admin_port), topics $topics (log $log)" >&2

"$tool_bin" --create-topic --topic="$topic" --url="$scheme://127.0.0.1:$port" \
	--admin-url="http://127.0.0.1:$admin_port" --gateway-pid="$gw" ${tls_args[@]+"${tls_args[@]}"} "$@"
