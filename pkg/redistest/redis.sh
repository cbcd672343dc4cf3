#!/usr/bin/env bash
# Runs a local redis-server on 127.0.0.1 for tests.
#
#   pkg/redistest/redis.sh start DIR [PORT]   start redis-server with its files in DIR; PORT 0 (default) picks a free one.
#                                       Prints REDIS_ADDR=127.0.0.1:PORT once it answers PING.
#   pkg/redistest/redis.sh stop DIR           stop it and wait for it to exit.
#
# Its log is DIR/redis.log.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../proctest/service.sh
. "$here/../proctest/service.sh"

die() { echo "redis.sh: $*" >&2; exit 1; }

# redis_ready PORT: redis-server on PORT answers PING.
redis_ready() {
	redis-cli -h 127.0.0.1 -p "$1" ping | grep -q PONG
}

start() {
	local dir=${1:?usage: redis.sh start DIR [PORT]} port=${2:-0}
	command -v redis-server >/dev/null || die "redis-server not found: install it (Debian: apt-get install redis-server)"
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	if [ "$port" = 0 ]; then
		port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
	fi
	# Not daemonized but in the background in a session of its own (setsid), so that its pid is known at once;
	# it logs to its stdout (--logfile "").
	setsid redis-server --bind 127.0.0.1 --port "$port" --dir "$dir" --save "" --appendonly no \
		--logfile "" >"$dir/redis.log" 2>&1 </dev/null &
	echo $! >"$dir/pid"
	service_wait "$dir" 10 "redis-server on 127.0.0.1:$port" \
		"redis-server exited during start-up (log in $dir/redis.log)" \
		"redis-server did not answer on port $port (log in $dir/redis.log)" \
		"$dir/redis.log" -- redis_ready "$port"
	echo "REDIS_ADDR=127.0.0.1:$port"
}

case "${1:-}" in
start) shift; start "$@" ;;
stop) shift; service_stop "${1:?usage: redis.sh stop DIR}" ;;
*) die "usage: redis.sh start DIR [PORT] | stop DIR" ;;
esac
