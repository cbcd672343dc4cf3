#!/usr/bin/env bash
# Runs a local single-node Apache Kafka (KRaft) on 127.0.0.1 from Maven Central jars.
#
#   pkg/kafkatest/kafka.sh start DIR [PORT]   start a broker with its data in DIR; PORT 0 (default) picks a free one.
#                                       Prints KAFKA_BROKERS=127.0.0.1:PORT and KAFKA_SASL_BROKERS=... on stdout
#                                       once the broker answers. 
#   pkg/kafkatest/kafka.sh stop DIR           stop the broker started in DIR and wait for it to exit.
#   pkg/kafkatest/kafka.sh fetch              only download the jars (into $SSEGATE_CACHE, default ~/.cache/ssegate).
#
# The broker has three listeners: PLAINTEXT on PORT; SASL_PLAINTEXT on PORT+1 with PLAIN user "ssegate" /
# "ssegate-secret", SCRAM-SHA-256/512 enabled (SCRAM users are created through the Admin API by whoever needs
# them) and OAUTHBEARER, which accepts RS256 JWTs signed with a key made at start (KAFKA_OAUTH_KEY, its PEM
# file, is printed; tokens need the audience "ssegate-kafka", a sub and an exp, and connections authenticate
# again every 3 s, so that a token's refresh is seen in a short test); and SSL on PORT+3 with a certificate for 127.0.0.1 signed by a throwaway CA made at start
# (KAFKA_TLS_BROKERS and KAFKA_TLS_CA, the CA's PEM file, are printed too). The controller listens on PORT+2. Auto topic creation is off: a gateway must answer 404
# for a topic that does not exist rather than create it.
#
# A cluster of several brokers (tests of follower fetching): start the first as above, then each other with
# KAFKA_NODE_ID (2, 3, ...), KAFKA_CONTROLLER and KAFKA_CLUSTER_ID from the first's DIR/controller and
# DIR/cluster-id; it runs as a broker only. KAFKA_RACK sets broker.rack (every broker has the rack-aware replica selector), KAFKA_PROPS adds
# lines to server.properties, KAFKA_HEAP sets the heap (default 512m).
#
# KAFKA_CLIENT_ADVERTISED=HOST:PORT adds a fourth client listener, CLIENT (plaintext) on PORT+4, advertised as
# HOST:PORT: a proxy in front of it sees every connection of the clients that reach the cluster through it
# (KAFKA_CLIENT_LISTENER, printed, is where it forwards to), while the brokers replicate over PLAINTEXT.
#
# KAFKA_HOST (default 127.0.0.1) is the address the PLAINTEXT, SASL and SSL listeners bind to and advertise,
# for clients that cannot reach loopback (the test cluster's pods reach the host on its bridge address); the
# controller stays on 127.0.0.1.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../proctest/service.sh
. "$here/../proctest/service.sh"
cache=${SSEGATE_CACHE:-$HOME/.cache/ssegate}
host=${KAFKA_HOST:-127.0.0.1}
version=$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$here/pom.xml")
libs=$cache/kafka-$version/libs

die() { echo "kafka.sh: $*" >&2; exit 1; }

fetch() {
	[ -f "$libs/.complete" ] && return 0
	command -v mvn >/dev/null || die "mvn not found: install Maven (and Java 17+)"
	echo "kafka.sh: fetching the Apache Kafka $version jars from Maven Central into $libs (once; about half a minute)" >&2
	rm -rf "$libs"
	mkdir -p "$cache"
	# Maven's own output (which carries terminal codes even in batch mode) goes to a log, shown on failure.
	local log=$cache/kafka-$version.fetch.log
	mvn -q -B -Dstyle.color=never -f "$here/pom.xml" dependency:copy-dependencies \
		-DoutputDirectory="$libs" -DincludeScope=runtime >"$log" 2>&1 &
	local pid=$! rc=0
	service_progress $pid "fetching"
	wait $pid || rc=$?
	[ $rc = 0 ] || { tail -n 30 "$log" >&2; die "mvn could not fetch the Kafka jars (log: $log)"; }
	touch "$libs/.complete"
}

free_port() {
	# Five consecutive free ports: PLAINTEXT, SASL, the controller, SSL, CLIENT (when asked for).
	python3 - "$host" <<'PY'
import socket, sys
host = sys.argv[1]
for _ in range(200):
    s = socket.socket(); s.bind((host, 0)); p = s.getsockname()[1]
    try:
        others = []
        for d in (1, 2, 3, 4):
            o = socket.socket(); others.append(o); o.bind((host if d != 2 else "127.0.0.1", p + d))
    except OSError:
        s.close(); [o.close() for o in others]; continue
    s.close(); [o.close() for o in others]; print(p); sys.exit(0)
sys.exit(1)
PY
}

# make_jwks DIR: an RSA key (DIR/key.pem) and the JWKS with its public half (DIR/jwks.json, key id
# "kafkatest") that the broker checks OAUTHBEARER tokens against.
make_jwks() {
	local d=$1
	mkdir -p "$d"
	openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$d/key.pem" 2>/dev/null
	openssl rsa -in "$d/key.pem" -noout -modulus | python3 -c '
import base64, json, sys
n = bytes.fromhex(sys.stdin.read().strip().split("=", 1)[1])
b64 = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=").decode()
print(json.dumps({"keys": [{"kty": "RSA", "kid": "kafkatest", "use": "sig", "alg": "RS256", "n": b64(n), "e": b64(bytes([1, 0, 1]))}]}))
' >"$d/jwks.json"
}

# make_certs DIR: a throwaway CA and a broker certificate for 127.0.0.1 / localhost, as a PEM keystore
# (unencrypted PKCS#8 key followed by the certificate) that the broker reads directly.
make_certs() {
	local d=$1
	command -v openssl >/dev/null || die "openssl not found: install it (Debian: apt-get install openssl)"
	mkdir -p "$d"
	openssl req -x509 -newkey rsa:2048 -nodes -days 7 -subj "/CN=ssegate test CA" \
		-keyout "$d/ca.key" -out "$d/ca.pem" 2>/dev/null
	openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" -keyout "$d/broker.key" -out "$d/broker.csr" 2>/dev/null
	printf 'subjectAltName=IP:127.0.0.1,IP:%s,DNS:localhost\n' "$host" >"$d/ext.cnf"
	openssl x509 -req -in "$d/broker.csr" -CA "$d/ca.pem" -CAkey "$d/ca.key" -CAcreateserial -days 7 \
		-extfile "$d/ext.cnf" -out "$d/broker.pem" 2>/dev/null
	cat "$d/broker.key" "$d/broker.pem" >"$d/keystore.pem"
}

java_cmd() {
	local heap=${KAFKA_HEAP:-512m}
	java -Xms"$heap" -Xmx"$heap" -XX:+UseG1GC -XX:TieredStopAtLevel=1 -Xshare:auto \
		-Djava.awt.headless=true -Dlog4j2.configurationFile="$dir/log4j2.yaml" \
		-cp "$libs/*" "$@"
}

# broker_ready PORT: the broker started in $dir has logged that it started and accepts connections on PORT.
broker_ready() {
	grep -q "Kafka Server started" "$dir/server.log" && (exec 3<>"/dev/tcp/$host/$1")
}

start() {
	dir=${1:?usage: kafka.sh start DIR [PORT]}
	local port=${2:-0}
	command -v java >/dev/null || die "java not found: install Java 17+"
	fetch
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	if [ -f "$dir/pid" ] && kill -0 "$(cat "$dir/pid")" 2>/dev/null; then
		die "a broker started from $dir is already running (pid $(cat "$dir/pid"))"
	fi
	if [ "$port" = 0 ]; then
		port=$(free_port)
	else
		local p
		for p in "$port" $((port + 1)) $((port + 2)) $((port + 3)); do
			if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
				die "port $p on 127.0.0.1 is taken (the broker needs $port to $((port + 3))): is another broker or make run still running? (KAFKA_PORT picks others)"
			fi
		done
	fi
	local sasl=$((port + 1)) ctl=$((port + 2)) ssl=$((port + 3)) client=$((port + 4))
	local client_listener= client_advertised=
	if [ -n "${KAFKA_CLIENT_ADVERTISED:-}" ]; then
		client_listener=,CLIENT://$host:$client client_advertised=,CLIENT://$KAFKA_CLIENT_ADVERTISED
	fi
	rm -rf "$dir/data" "$dir/server.log"
	make_certs "$dir/tls"
	make_jwks "$dir/oauth"
	# A node of a cluster of several (KAFKA_CONTROLLER set): a broker only, with the first node's controller.
	local roles=broker,controller voters=1@127.0.0.1:$ctl ctl_listener=,CONTROLLER://127.0.0.1:$ctl
	if [ -n "${KAFKA_CONTROLLER:-}" ]; then
		roles=broker voters=$KAFKA_CONTROLLER ctl_listener=
	fi
	cat >"$dir/server.properties" <<PROPS
process.roles=$roles
node.id=${KAFKA_NODE_ID:-1}
controller.quorum.voters=$voters
listeners=PLAINTEXT://$host:$port,SASL_PLAINTEXT://$host:$sasl$ctl_listener,SSL://$host:$ssl$client_listener
advertised.listeners=PLAINTEXT://$host:$port,SASL_PLAINTEXT://$host:$sasl,SSL://$host:$ssl$client_advertised
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT,SSL:SSL,CLIENT:PLAINTEXT
listener.name.ssl.ssl.keystore.type=PEM
listener.name.ssl.ssl.keystore.location=$dir/tls/keystore.pem
sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER
listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;
listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler
sasl.oauthbearer.jwt.validator.class=org.apache.kafka.common.security.oauthbearer.BrokerJwtValidator
sasl.oauthbearer.jwks.endpoint.url=file://$dir/oauth/jwks.json
sasl.oauthbearer.expected.audience=ssegate-kafka
listener.name.sasl_plaintext.oauthbearer.connections.max.reauth.ms=3000
listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_ssegate="ssegate-secret";
listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
log.dirs=$dir/data
num.partitions=1
auto.create.topics.enable=false
offsets.topic.replication.factor=1
offsets.topic.num.partitions=3
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=3
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
log.retention.check.interval.ms=5000
delete.topic.enable=true
replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector
PROPS
	if [ -n "${KAFKA_RACK:-}" ]; then echo "broker.rack=$KAFKA_RACK" >>"$dir/server.properties"; fi
	if [ -n "${KAFKA_PROPS:-}" ]; then printf '%s\n' "$KAFKA_PROPS" >>"$dir/server.properties"; fi
	cat >"$dir/log4j2.yaml" <<'LOG'
Configuration:
  Appenders:
    File:
      name: file
      fileName: "${sys:kafka.logs.file}"
      PatternLayout:
        pattern: "[%d] %p %m (%c)%n"
  Loggers:
    Root:
      level: WARN
      AppenderRef:
        - ref: file
    Logger:
      - name: kafka.server.KafkaRaftServer
        level: INFO
LOG
	local cluster=${KAFKA_CLUSTER_ID:-}
	# A random id; "--cluster-id=" keeps one that starts with "-" from being read as an option.
	[ -n "$cluster" ] || cluster=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | cut -c1-22)
	java_cmd -Dkafka.logs.file="$dir/format.log" kafka.tools.StorageTool format --cluster-id="$cluster" \
		-c "$dir/server.properties" >"$dir/format.out" 2>&1 ||
		{ cat "$dir/format.out" >&2; die "formatting the storage failed"; }
	# setsid: the broker gets its own process group, so stop can signal all of it and a Ctrl-C in the
	# caller's terminal is handled by the caller's trap, not delivered to the JVM twice.
	setsid bash -c 'exec "$@"' _ java -Xms"${KAFKA_HEAP:-512m}" -Xmx"${KAFKA_HEAP:-512m}" -XX:+UseG1GC \
		-XX:TieredStopAtLevel=1 -Djava.awt.headless=true \
		-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls="file://$dir/oauth/jwks.json" \
		-Dlog4j2.configurationFile="$dir/log4j2.yaml" -Dkafka.logs.file="$dir/server.log" \
		-cp "$libs/*" kafka.Kafka "$dir/server.properties" >"$dir/stdout.log" 2>&1 </dev/null &
	echo $! >"$dir/pid"
	echo "$port" >"$dir/port"
	echo "$cluster" >"$dir/cluster-id"
	echo "${KAFKA_CONTROLLER:-1@127.0.0.1:$ctl}" >"$dir/controller"
	local timeout=${KAFKA_START_TIMEOUT:-90}
	service_wait "$dir" "$timeout" "the broker on 127.0.0.1:$port" \
		"the broker exited during start-up (logs in $dir)" \
		"the broker did not start within ${timeout}s (logs in $dir)" \
		"$dir/stdout.log" "$dir/server.log" -- broker_ready "$port"
	echo "KAFKA_BROKERS=$host:$port"
	echo "KAFKA_SASL_BROKERS=$host:$sasl"
	echo "KAFKA_TLS_BROKERS=$host:$ssl"
	echo "KAFKA_TLS_CA=$dir/tls/ca.pem"
	echo "KAFKA_OAUTH_KEY=$dir/oauth/key.pem"
	if [ -n "$client_listener" ]; then echo "KAFKA_CLIENT_LISTENER=$host:$client"; fi
}

case "${1:-}" in
start) shift; start "$@" ;;
stop) shift; service_stop "${1:?usage: kafka.sh stop DIR}" ;;
fetch) fetch ;;
*) die "usage: kafka.sh start DIR [PORT] | stop DIR | fetch" ;;
esac
