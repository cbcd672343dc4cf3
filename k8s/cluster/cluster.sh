#!/usr/bin/env bash
# Runs a throwaway single-node Kubernetes for the chart's tests, as root, without a container registry.
#
#   k8s/cluster/cluster.sh start DIR api    etcd and kube-apiserver on loopback: objects are stored and
#                                            validated, nothing runs them.
#   k8s/cluster/cluster.sh start DIR node   the same plus kube-controller-manager, kube-scheduler, containerd
#                                            (runc), a kubelet whose pods sit on a CNI bridge, and kube-proxy
#                                            (nftables) so that Services' cluster IPs work.
#   k8s/cluster/cluster.sh stop DIR         stop everything started from DIR and remove what it set up on the
#                                            machine: containers, mounts, pod network namespaces, kube-proxy's
#                                            nftables tables, the bridge (and with it its route).
#   k8s/cluster/cluster.sh import DIR TAR   import an OCI image tarball into the node's containerd.
#
# start prints KUBECONFIG=DIR/kubeconfig on stdout once the API server answers (node: once the node is Ready),
# and for a node also KUBE_NODE_GATEWAY, the bridge's address, which pods reach and the host owns.
#
# The API server and its helpers listen on free loopback ports. The pod network is the documentation range
# $KUBE_POD_RANGE (default 198.51.100.0/25): its addresses exist only on the bridge ($KUBE_BRIDGE, default
# ssegate0, gateway .1, which holds the whole /24) and in the pods' network namespaces, and the pods get no
# default route, so they reach nothing but each other and the host's bridge address. Service addresses come
# from the other half of that documentation range ($KUBE_SERVICE_RANGE, default 198.51.100.128/25), never from
# a range the machine may reach beyond itself (its package mirrors can sit in other documentation ranges):
# on a node, kube-proxy in nftables mode translates them to pod
# addresses, in its own tables (ip and ip6 "kube-proxy") and nowhere else. That range is routed on the bridge
# alone, from the host (source address the bridge's) and from the pods (through the bridge's address), and the
# bridge alone forwards (net.ipv4.conf.BRIDGE.forwarding; the machine's ip_forward is left as it is) and hands
# its bridged frames to netfilter (the bridge's nf_call_iptables), so that a reply from a pod to a pod is
# translated back: a cluster IP without a Service goes nowhere beyond the bridge. Binaries come from
# k8s/cluster/build.sh (the Kubernetes binaries) and k8s/cluster/debs.sh (etcd, containerd, runc, CNI
# plugins; nft); the pause image is built from k8s/cluster/pause with k8s/image.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
pod_range=${KUBE_POD_RANGE:-198.51.100.0/25}
bridge=${KUBE_BRIDGE:-ssegate0}
service_range=${KUBE_SERVICE_RANGE:-198.51.100.128/25}
node_name=ssegate-node
pause_ref=docker.io/ssegate/pause:local

die() { echo "kube/cluster.sh: $*" >&2; exit 1; }
log() { echo "kube/cluster.sh: $*" >&2; }

# net_prefix: the first three octets of the pod range (within one /24, whose .1 is the bridge's).
net_prefix() { local p=${pod_range%/*}; echo "${p%.*}"; }

free_ports() {
	# N distinct free loopback ports.
	python3 - "$1" <<'PY'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
PY
}

# spawn NAME CMD...: run CMD in its own session with its output in DIR/NAME.log, remember its pid.
spawn() {
	local name=$1
	shift
	setsid bash -c 'exec "$@"' _ "$@" >"$dir/$name.log" 2>&1 </dev/null &
	echo $! >"$dir/$name.pid"
}

# wait_for WHAT SECONDS CMD...: poll CMD until it succeeds; die with the logs when a process of DIR died.
wait_for() {
	local what=$1 secs=$2
	shift 2
	local deadline=$((SECONDS + secs))
	until "$@" >/dev/null 2>&1; do
		for p in "$dir"/*.pid; do
			[ -f "$p" ] || continue
			if ! kill -0 "$(cat "$p")" 2>/dev/null; then
				tail -n 30 "${p%.pid}.log" >&2 || true
				die "$(basename "${p%.pid}") exited while waiting for $what (logs in $dir)"
			fi
		done
		[ $SECONDS -lt $deadline ] || die "$what not ready within ${secs}s (logs in $dir)"
		sleep 0.5
	done
}

# nft_ ARGS...: the unpacked nft (k8s/cluster/debs.sh nftables).
nft_() { "$(cat "$dir/nftables")/bin/nft" "$@"; }

api_get() { curl -sf --cacert "$dir/pki/ca.pem" -H "Authorization: Bearer $(cat "$dir/token")" "https://127.0.0.1:$(cat "$dir/api.port")$1"; }

make_pki() {
	local d=$dir/pki
	mkdir -p "$d"
	openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=ssegate test cluster CA" \
		-keyout "$d/ca.key" -out "$d/ca.pem" 2>/dev/null
	openssl req -newkey rsa:2048 -nodes -subj "/CN=kube-apiserver" -keyout "$d/apiserver.key" -out "$d/apiserver.csr" 2>/dev/null
	printf 'subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default.svc\n' >"$d/ext.cnf"
	openssl x509 -req -in "$d/apiserver.csr" -CA "$d/ca.pem" -CAkey "$d/ca.key" -CAcreateserial -days 2 \
		-extfile "$d/ext.cnf" -out "$d/apiserver.pem" 2>/dev/null
	openssl genrsa -out "$d/sa.key" 2048 2>/dev/null
	openssl rsa -in "$d/sa.key" -pubout -out "$d/sa.pub" 2>/dev/null
	head -c 24 /dev/urandom | base64 | tr -d '/+=' >"$dir/token"
	# One token in system:masters for the test and every component: a throwaway cluster on loopback.
	printf '%s,admin,admin,system:masters\n' "$(cat "$dir/token")" >"$d/tokens.csv"
}

write_kubeconfig() {
	cat >"$dir/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
  - name: test
    cluster:
      server: https://127.0.0.1:$(cat "$dir/api.port")
      certificate-authority: $dir/pki/ca.pem
users:
  - name: admin
    user:
      token: $(cat "$dir/token")
contexts:
  - name: test
    context: {cluster: test, user: admin, namespace: default}
current-context: test
EOF
	chmod 600 "$dir/kubeconfig"
}

start_control_plane() {
	local bin=$1 debs=$2
	local etcd_client etcd_peer api
	read -r etcd_client etcd_peer api < <(free_ports 3)
	echo "$api" >"$dir/api.port"
	make_pki
	spawn etcd "$debs/usr/bin/etcd" --name test --data-dir "$dir/etcd" \
		--listen-client-urls "http://127.0.0.1:$etcd_client" --advertise-client-urls "http://127.0.0.1:$etcd_client" \
		--listen-peer-urls "http://127.0.0.1:$etcd_peer" --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer" \
		--initial-cluster "test=http://127.0.0.1:$etcd_peer" --log-level warn --logger zap
	wait_for etcd 30 curl -sf "http://127.0.0.1:$etcd_client/health"
	spawn kube-apiserver "$bin/kube-apiserver" \
		--etcd-servers "http://127.0.0.1:$etcd_client" \
		--bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$api" \
		--tls-cert-file "$dir/pki/apiserver.pem" --tls-private-key-file "$dir/pki/apiserver.key" \
		--client-ca-file "$dir/pki/ca.pem" \
		--service-account-issuer https://kubernetes.default.svc.cluster.local \
		--service-account-key-file "$dir/pki/sa.pub" --service-account-signing-key-file "$dir/pki/sa.key" \
		--service-cluster-ip-range "$service_range" \
		--token-auth-file "$dir/pki/tokens.csv" --authorization-mode RBAC \
		--disable-admission-plugins ServiceAccount --enable-priority-and-fairness=false \
		--endpoint-reconciler-type none --profiling=false --v 1
	wait_for kube-apiserver 90 api_get /readyz
	write_kubeconfig
}

# The pause image: a static binary that waits for a signal, in an image built like the services' images.
build_pause() {
	local out=$dir/images
	mkdir -p "$out"
	(cd "$repo" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -buildid=" -o "$out/pause" ./k8s/cluster/pause &&
		go build -trimpath -o "$out/image-tool" ./k8s/image &&
		"$out/image-tool" --service pause --binary "linux/$(go env GOARCH)=$out/pause" --version local \
			--out "$out/pause.tar" >/dev/null) || die "building the pause image failed"
}

ctr_() { "$(cat "$dir/debs")/usr/bin/ctr" --address "$dir/containerd/containerd.sock" --namespace k8s.io "$@"; }

import_image() {
	ctr_ images import "$1" >&2 || die "importing $1 failed"
}

start_node() {
	local bin=$1 debs=$2 prefix
	prefix=$(net_prefix)
	[ "$(id -u)" = 0 ] || die "a node needs root (containers, mounts, network namespaces)"
	if ip link show "$bridge" >/dev/null 2>&1; then die "a link named $bridge already exists: another cluster is running, or stop it first"; fi
	local kubelet_port kubelet_health
	read -r kubelet_port kubelet_health < <(free_ports 2)

	# The bridge first, so that the host's address on it exists before anything binds to it (Kafka, the
	# kubelet). The CNI bridge plugin finds and uses it.
	[ -d /var/run/netns ] || touch "$dir/netns-folder-made"
	# nf_call_iptables: frames bridged from pod to pod pass netfilter, where kube-proxy's translation of a
	# cluster IP is undone on the reply. A setting of this bridge, gone with it.
	ip link add "$bridge" type bridge nf_call_iptables 1
	echo "$bridge" >"$dir/bridge"
	ip addr add "$prefix.1/24" dev "$bridge"
	ip link set "$bridge" up
	# Cluster IPs: forwarded by the bridge alone, routed to the bridge alone, from the bridge's address.
	echo 1 >"/proc/sys/net/ipv4/conf/$bridge/forwarding"
	ip route add "$service_range" dev "$bridge" src "$prefix.1"

	mkdir -p "$dir/cni/net.d" "$dir/cni/ipam" "$dir/containerd" "$dir/kubelet" "$dir/pod-logs"
	cat >"$dir/cni/net.d/10-ssegate.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "ssegate",
  "plugins": [
    {
      "type": "bridge", "bridge": "$bridge", "isGateway": false, "ipMasq": false, "hairpinMode": true,
      "ipam": {
        "type": "host-local", "dataDir": "$dir/cni/ipam",
        "ranges": [[{"subnet": "$pod_range", "rangeStart": "$prefix.10", "rangeEnd": "$prefix.120", "gateway": "$prefix.1"}]],
        "routes": [{"dst": "$service_range", "gw": "$prefix.1"}]
      }
    },
    {"type": "loopback"}
  ]
}
EOF
	cat >"$dir/containerd/config.toml" <<EOF
version = 2
root = "$dir/containerd/root"
state = "$dir/containerd/state"
plugin_dir = ""
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]
[grpc]
  address = "$dir/containerd/containerd.sock"
[ttrpc]
  address = "$dir/containerd/containerd.sock.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "$dir/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$pause_ref"
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "$debs/usr/sbin/runc"
        Root = "$dir/runc"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$debs/usr/lib/cni"
    conf_dir = "$dir/cni/net.d"
    max_conf_num = 1
EOF
	echo "$debs" >"$dir/debs"
	PATH=$debs/usr/bin:$debs/usr/sbin:$PATH spawn containerd "$debs/usr/bin/containerd" --config "$dir/containerd/config.toml"
	wait_for containerd 30 ctr_ version

	build_pause
	import_image "$dir/images/pause.tar"

	spawn kube-controller-manager "$bin/kube-controller-manager" --kubeconfig "$dir/kubeconfig" \
		--leader-elect=false --secure-port 0 --use-service-account-credentials=false \
		--service-account-private-key-file "$dir/pki/sa.key" --root-ca-file "$dir/pki/ca.pem" \
		--controllers '*,-serviceaccount-token' --allocate-node-cidrs=false --v 1
	spawn kube-scheduler "$bin/kube-scheduler" --kubeconfig "$dir/kubeconfig" --leader-elect=false \
		--secure-port 0 --v 1

	cat >"$dir/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $prefix.1
port: $kubelet_port
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $kubelet_health
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
containerRuntimeEndpoint: unix://$dir/containerd/containerd.sock
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
failSwapOn: false
resolvConf: ""
podLogsDir: $dir/pod-logs
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "1Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
localStorageCapacityIsolation: false
syncFrequency: 10s
EOF
	PATH=$debs/usr/bin:$debs/usr/sbin:$PATH spawn kubelet "$bin/kubelet" --kubeconfig "$dir/kubeconfig" \
		--config "$dir/kubelet/config.yaml" --root-dir "$dir/kubelet" --cert-dir "$dir/kubelet/pki" \
		--hostname-override "$node_name" --node-ip "$prefix.1" --v 1
	wait_for "node $node_name" 120 node_ready
	start_proxy "$bin"
}

# kube-proxy in nftables mode, with a PATH that holds nft alone: at start it also removes what an iptables or
# IPVS kube-proxy left on the machine, through iptables, modprobe and ipvsadm, which it then does not find
# (the IPVS clean-up would flush every IPVS rule of the machine). Its tables are its own: ip and ip6
# "kube-proxy", which nothing else may hold; stop deletes them.
start_proxy() {
	local bin=$1 prefix health metrics nftdir
	prefix=$(net_prefix)
	nftdir=$("$here/debs.sh" nftables)
	echo "$nftdir" >"$dir/nftables"
	local fam
	for fam in ip ip6; do
		if nft_ list table "$fam" kube-proxy >/dev/null 2>&1; then
			die "an nftables table $fam kube-proxy already exists: another kube-proxy runs on this machine"
		fi
	done
	read -r health metrics < <(free_ports 2)
	echo "$health" >"$dir/kube-proxy.healthz"
	mkdir -p "$dir/kube-proxy"
	cat >"$dir/kube-proxy/config.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
clientConnection:
  kubeconfig: $dir/kubeconfig
hostnameOverride: $node_name
bindAddress: $prefix.1
healthzBindAddress: 127.0.0.1:$health
metricsBindAddress: 127.0.0.1:$metrics
clusterCIDR: $pod_range
detectLocalMode: ClusterCIDR
nodePortAddresses: ["$prefix.1/32"]
oomScoreAdj: 0
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
  udpTimeout: 0s
  udpStreamTimeout: 0s
EOF
	# From here on stop deletes the tables, whether kube-proxy made them yet or not.
	touch "$dir/nftables-owned"
	spawn kube-proxy env PATH="$nftdir/bin" "$bin/kube-proxy" --config "$dir/kube-proxy/config.yaml" --v 1
	wait_for kube-proxy 60 proxy_ready
}

proxy_ready() {
	curl -sf "http://127.0.0.1:$(cat "$dir/kube-proxy.healthz")/healthz" && nft_ list table ip kube-proxy
}

node_ready() {
	api_get "/api/v1/nodes/$node_name" | python3 -c '
import json, sys
n = json.load(sys.stdin)
ready = any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"].get("conditions", []))
tainted = any(t["key"] == "node.kubernetes.io/not-ready" for t in n["spec"].get("taints", []))
sys.exit(0 if ready and not tainted else 1)'
}

start() {
	dir=${1:?usage: cluster.sh start DIR api|node}
	local mode=${2:-api}
	case "$mode" in api | node) ;; *) die "mode must be api or node, not $mode" ;; esac
	command -v curl >/dev/null || die "curl not found"
	command -v openssl >/dev/null || die "openssl not found"
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	[ ! -f "$dir/kube-apiserver.pid" ] || ! kill -0 "$(cat "$dir/kube-apiserver.pid")" 2>/dev/null ||
		die "a cluster started from $dir is running"
	local bin debs
	if [ "$mode" = api ]; then
		bin=$("$here/build.sh" kube-apiserver)
	else
		bin=$("$here/build.sh")
	fi
	debs=$("$here/debs.sh")
	local t0=$SECONDS
	start_control_plane "$bin" "$debs"
	[ "$mode" = node ] && start_node "$bin" "$debs"
	log "$mode ready in $((SECONDS - t0))s (logs in $dir)"
	echo "KUBECONFIG=$dir/kubeconfig"
	[ "$mode" = node ] && echo "KUBE_NODE_GATEWAY=$(net_prefix).1"
	return 0
}

# stop_pid NAME: TERM, then KILL after a while, the process started as NAME.
stop_pid() {
	local f=$dir/$1.pid pid
	[ -f "$f" ] || return 0
	pid=$(cat "$f")
	if kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null || true
		for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
		kill -KILL "$pid" 2>/dev/null || true
	fi
	rm -f "$f"
}

stop() {
	dir=${1:?usage: cluster.sh stop DIR}
	[ -d "$dir" ] || return 0
	dir=$(cd "$dir" && pwd)
	stop_pid kube-proxy
	# kube-proxy leaves its rules when it stops: its tables go now, and with them every rule it made.
	if [ -f "$dir/nftables-owned" ]; then
		local fam
		for fam in ip ip6; do
			if nft_ list table "$fam" kube-proxy >/dev/null 2>&1; then
				nft_ delete table "$fam" kube-proxy || log "could not delete the nftables table $fam kube-proxy"
			fi
		done
		rm -f "$dir/nftables-owned"
	fi
	stop_pid kubelet
	stop_pid kube-scheduler
	stop_pid kube-controller-manager
	# The pods' network namespaces, named in their sandboxes' runtime specs, before the specs go.
	local netns=()
	if [ -d "$dir/containerd/state" ]; then
		while IFS= read -r ns; do netns+=("$ns"); done < <(
			grep -rhoE '"/(var/)?run/netns/cni-[0-9a-f-]+"' "$dir/containerd/state" --include config.json 2>/dev/null |
				tr -d '"' | sort -u
		)
	fi
	# Containers: killed and deleted through runc, whose state for this node is in DIR alone.
	if [ -f "$dir/debs" ] && [ -d "$dir/runc/k8s.io" ]; then
		local runc ids
		runc="$(cat "$dir/debs")/usr/sbin/runc"
		ids=$("$runc" --root "$dir/runc/k8s.io" list -q 2>/dev/null || true)
		for id in $ids; do "$runc" --root "$dir/runc/k8s.io" kill --all "$id" KILL 2>/dev/null || true; done
		for id in $ids; do "$runc" --root "$dir/runc/k8s.io" delete --force "$id" 2>/dev/null || true; done
	fi
	stop_pid containerd
	# containerd's shims outlive it: end those whose command line names this node's socket.
	local p
	if [ -f "$dir/debs" ]; then
		for p in /proc/[0-9]*; do
			if { tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null | grep -q -- "-address $dir/containerd/containerd.sock"; then
				kill -KILL "${p#/proc/}" 2>/dev/null || true
			fi
		done
	fi
	stop_pid kube-apiserver
	stop_pid etcd
	# Mounts under DIR (container root file systems, volumes), deepest first.
	local m
	for _ in 1 2 3; do
		while IFS= read -r m; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; done < <(
			awk -v d="$dir/" 'index($2, d) == 1 {print $2}' /proc/mounts | sort -r
		)
	done
	for m in "${netns[@]}"; do
		umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
		rm -f "$m"
	done
	# containerd makes the folder of named network namespaces when there is none: remove it if it did.
	[ ! -f "$dir/netns-folder-made" ] || rmdir /var/run/netns 2>/dev/null || true
	if [ -f "$dir/bridge" ]; then
		ip link del "$(cat "$dir/bridge")" 2>/dev/null || true
		rm -f "$dir/bridge"
	fi
}

case "${1:-}" in
start) shift; start "$@" ;;
stop) shift; stop "$@" ;;
import) shift; dir=$(cd "${1:?usage: cluster.sh import DIR TAR}" && pwd); import_image "${2:?usage: cluster.sh import DIR TAR}" ;;
*) die "usage: cluster.sh start DIR api|node | stop DIR | import DIR TAR" ;;
esac
