# Shared by the scripts that run a local service for tests (pkg/kafkatest/kafka.sh, pkg/redistest/redis.sh,
# pkg/registrytest/registry.sh), which source it. Each keeps the process id of its service in DIR/pid. Messages
# go to stderr and begin with the script's name.

# service_wait DIR SECONDS WHAT EXITED LATE [LOG...] -- CHECK [ARG...]: waits until CHECK succeeds (its stderr is
# dropped), saying every 5 seconds that WHAT is still starting. If the process exits first, shows the last lines
# of each LOG, removes DIR/pid and dies with the message EXITED; if SECONDS pass first, stops the process
# (service_stop DIR) and dies with the message LATE.
service_wait() {
	local dir=$1 seconds=$2 what=$3 exited=$4 late=$5 logs=()
	shift 5
	while [ $# -gt 0 ] && [ "$1" != -- ]; do logs+=("$1"); shift; done
	shift
	local pid deadline=$((SECONDS + seconds)) began=$SECONDS said=
	pid=$(cat "$dir/pid")
	until "$@" 2>/dev/null; do
		if ! kill -0 "$pid" 2>/dev/null; then
			[ ${#logs[@]} = 0 ] || tail -n 40 "${logs[@]}" >&2 2>/dev/null || true
			rm -f "$dir/pid"
			echo "${0##*/}: $exited" >&2
			exit 1
		fi
		if [ $SECONDS -ge $deadline ]; then
			service_stop "$dir"
			echo "${0##*/}: $late" >&2
			exit 1
		fi
		sleep 0.1
		if [ $(((SECONDS - began) % 5)) = 4 ] && [ "$said" != $((SECONDS - began)) ]; then
			said=$((SECONDS - began))
			echo "${0##*/}: still starting $what ($((said + 1))s)" >&2
		fi
	done
}

# service_stop DIR: stops the process whose id is in DIR/pid, if there is one: SIGTERM, then SIGKILL if it is
# still running after 20 seconds, and waits for it to exit. Then removes DIR/pid. Nothing to stop is no error.
service_stop() {
	local dir=$1 pid i
	[ -f "$dir/pid" ] || return 0
	pid=$(cat "$dir/pid")
	if kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null || true
		for ((i = 0; i < 200; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		if kill -0 "$pid" 2>/dev/null; then
			kill -KILL "$pid" 2>/dev/null || true
			for ((i = 0; i < 50; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		fi
	fi
	rm -f "$dir/pid"
}

# service_progress PID WHAT: while PID runs, says every 5 seconds that WHAT is still going on.
service_progress() {
	local t=0
	while kill -0 "$1" 2>/dev/null; do
		sleep 1
		t=$((t + 1))
		[ $((t % 5)) = 0 ] && echo "${0##*/}: still $2 (${t}s)" >&2
	done
	return 0
}
