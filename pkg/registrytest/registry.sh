#!/usr/bin/env bash
# Runs a local schema registry (Apicurio Registry) on 127.0.0.1 for tests.
#
#   pkg/registrytest/registry.sh start DIR [PORT]   start the registry with its files in DIR; PORT 0 (default) picks a
#                                       free one. Prints SCHEMA_REGISTRY_URL=http://127.0.0.1:PORT/apis/ccompat/v7
#                                       on stdout once the registry answers.
#   pkg/registrytest/registry.sh stop DIR           stop the registry started in DIR and wait for it to exit.
#   pkg/registrytest/registry.sh fetch              only download it (into $SSEGATE_CACHE, default ~/.cache/ssegate).
#
# The registry is Apicurio Registry 2.6 (it runs on Java 17), the prebuilt distribution that Apicurio publishes on
# Maven Central (io.apicurio:apicurio-registry-app, classifier "all", a tar.gz), fetched with Maven. It keeps its
# schemas in an in-memory database, so every start begins empty, and has no authentication. Tests use its
# Confluent-compatible API (/apis/ccompat/v7). It listens on 127.0.0.1:PORT; the management interface is off. Its
# transaction manager (Narayana) also binds a random port on 127.0.0.1 and never accepts on it: it uses the port
# as a process id. REGISTRY_HEAP sets the heap (default 160m); its log is DIR/registry.log.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../proctest/service.sh
. "$here/../proctest/service.sh"
cache=${SSEGATE_CACHE:-$HOME/.cache/ssegate}
version=2.6.13.Final
app=$cache/apicurio-registry-$version/quarkus-app
jar=$app/apicurio-registry-app-$version-runner.jar

die() { echo "registry.sh: $*" >&2; exit 1; }

fetch() {
	[ -f "$jar" ] && return 0
	command -v mvn >/dev/null || die "mvn not found: install Maven (and Java 17+)"
	echo "registry.sh: fetching Apicurio Registry $version from Maven Central into $app (once; about 140 MB)" >&2
	local tmp=$cache/apicurio-registry-$version.tmp log=$cache/apicurio-registry-$version.fetch.log rc=0
	rm -rf "$tmp"
	mkdir -p "$tmp"
	# A local Maven repository of its own, removed afterwards, so that the tar.gz is not kept twice.
	mvn -q -B -ntp -Dstyle.color=never -Dmaven.repo.local="$tmp/m2" \
		org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy \
		-Dartifact="io.apicurio:apicurio-registry-app:$version:tar.gz:all" \
		-DoutputDirectory="$tmp/dist" >"$log" 2>&1 &
	local pid=$!
	service_progress $pid "fetching"
	wait $pid || rc=$?
	[ $rc = 0 ] || { tail -n 30 "$log" >&2; die "mvn could not fetch Apicurio Registry (log: $log)"; }
	# The tar.gz holds the application's jar with its lib/ and meta/ folders, at its top level.
	mkdir -p "$tmp/quarkus-app"
	tar xzf "$tmp/dist/apicurio-registry-app-$version-all.tar.gz" -C "$tmp/quarkus-app"
	[ -f "$tmp/quarkus-app/${jar##*/}" ] || die "the distribution has no ${jar##*/}"
	# The folder appears complete or not at all, so a fetch that was cut short is started again.
	rm -rf "$app"
	mkdir -p "${app%/*}"
	mv "$tmp/quarkus-app" "$app"
	rm -rf "$tmp"
}

start() {
	local dir=${1:?usage: registry.sh start DIR [PORT]} port=${2:-0}
	command -v java >/dev/null || die "java not found: install Java 17+"
	command -v curl >/dev/null || die "curl not found: install it (Debian: apt-get install curl)"
	local jv
	jv=$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n 1)
	[ "${jv:-0}" -ge 17 ] || die "Java 17 or newer is needed (java -version says ${jv:-nothing})"
	fetch
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	if [ -f "$dir/pid" ] && kill -0 "$(cat "$dir/pid")" 2>/dev/null; then
		die "a registry started from $dir is already running (pid $(cat "$dir/pid"))"
	fi
	if [ "$port" = 0 ]; then
		port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
	elif (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
		die "port $port on 127.0.0.1 is taken"
	fi
	rm -rf "$dir/tmp" "$dir/registry.log"
	mkdir -p "$dir/tmp"
	# System properties override the application.properties inside the jar. The HTTP server binds 127.0.0.1
	# only; the management interface (its own port) stays off. The database is H2 in memory with a small pool.
	# Java's temporary files (Vert.x's file cache) go under DIR too.
	local heap=${REGISTRY_HEAP:-160m}
	setsid bash -c 'exec "$@"' _ java -Xms"$heap" -Xmx"$heap" -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
		-Djava.awt.headless=true -Djava.io.tmpdir="$dir/tmp" \
		-Dquarkus.http.host=127.0.0.1 -Dquarkus.http.port="$port" \
		-Dquarkus.management.enabled=false -Dquarkus.management.host=127.0.0.1 \
		-Dquarkus.datasource.jdbc.url=jdbc:h2:mem:registry \
		-Dquarkus.datasource.jdbc.initial-size=2 -Dquarkus.datasource.jdbc.min-size=2 \
		-Dquarkus.datasource.jdbc.max-size=20 \
		-Dregistry.rest.artifact.deletion.enabled=true \
		-jar "$jar" >"$dir/registry.log" 2>&1 </dev/null &
	echo $! >"$dir/pid"
	echo "$port" >"$dir/port"
	local url=http://127.0.0.1:$port/apis/ccompat/v7
	local timeout=${REGISTRY_START_TIMEOUT:-90}
	service_wait "$dir" "$timeout" "the registry on 127.0.0.1:$port" \
		"the registry exited during start-up (log in $dir/registry.log)" \
		"the registry did not answer within ${timeout}s (log in $dir/registry.log)" \
		"$dir/registry.log" -- curl -fsS --max-time 2 -o /dev/null "$url/subjects"
	echo "SCHEMA_REGISTRY_URL=$url"
}

case "${1:-}" in
start) shift; start "$@" ;;
stop) shift; service_stop "${1:?usage: registry.sh stop DIR}" ;;
fetch) fetch ;;
*) die "usage: registry.sh start DIR [PORT] | stop DIR | fetch" ;;
esac
