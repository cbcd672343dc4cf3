#!/usr/bin/env bash
# Runs a local redis-server on 127.0.0.1 for tests.
#
#   pkg/redistest/redis.sh start DIR [PORT]   start redis-server with its files in DIR; PORT 0 (default) picks a free one.
#                                       Prints REDIS_ADDR=127.0.0.1:PORT once it answers PING.
#   pkg/redistest/redis.sh stop DIR           stop it.
set -euo pipefail

die() { echo "redis.sh: $*" >&2; exit 1; }

start() {
	local dir=${1:?usage: redis.sh start DIR [PORT]} port=${2:-0}
	command -v redis-server >/dev/null || die "redis-server not found: install it (Debian: apt-get install redis-server)"
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	if [ "$port" = 0 ]; then
		port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
	fi
	redis-server --bind 127.0.0.1 --port "$port" --dir "$dir" --save "" --appendonly no \
		--daemonize yes --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" >/dev/null
	for _ in $(seq 1 100); do
		if redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null | grep -q PONG; then
			echo "REDIS_ADDR=127.0.0.1:$port"
			return 0
		fi
		sleep 0.1
	done
	stop "$dir"
	die "redis-server did not answer on port $port (log in $dir/redis.log)"
}

stop() {
	local dir=${1:?usage: redis.sh stop DIR}
	[ -f "$dir/redis.pid" ] || return 0
	local pid
	pid=$(cat "$dir/redis.pid")
	kill -TERM "$pid" 2>/dev/null || true
	for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	rm -f "$dir/redis.pid"
}

case "${1:-}" in
start) shift; start "$@" ;;
stop) shift; stop "$@" ;;
*) die "usage: redis.sh start DIR [PORT] | stop DIR" ;;
esac
