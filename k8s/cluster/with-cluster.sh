#!/usr/bin/env bash
# Runs a command with a throwaway Kubernetes started for it (k8s/cluster/cluster.sh), and stops and removes
# the cluster when the command ends, however it ends.
#
#   k8s/cluster/with-cluster.sh [--node] [--] CMD [ARGS...]
#
# Without --node: etcd and kube-apiserver on loopback; CMD sees SSEGATE_KUBECONFIG.
# With --node (root): a whole node, the service images of `make image` imported into its containerd, and a
# Kafka broker (pkg/kafkatest/kafka.sh) listening on the node's bridge address, where the pods reach it; CMD also
# sees KAFKA_BROKERS (that broker), KUBE_NODE_GATEWAY (the bridge address), SSEGATE_KUBE_NODE=1 and
# SSEGATE_IMAGE_TAG (the images' tag).
# Files and logs go under $SSEGATE_STATE (default .run/ in the repository) and are removed when CMD succeeds.
# The exit status is CMD's.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
mode=api
while [ $# -gt 0 ]; do
	case "$1" in
	--node) mode=node; shift ;;
	--) shift; break ;;
	*) break ;;
	esac
done
[ $# -gt 0 ] || { echo "usage: with-cluster.sh [--node] [--] CMD [ARGS...]" >&2; exit 2; }

state=${SSEGATE_STATE:-$repo/.run}/kube-$$
mkdir -p "$state"
state=$(cd "$state" && pwd)
started_kafka=0
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	[ $started_kafka = 1 ] && "$repo/pkg/kafkatest/kafka.sh" stop "$state/kafka" || true
	"$here/cluster.sh" stop "$state/cluster" || true
	if [ $rc = 0 ]; then rm -rf "$state"; else echo "with-cluster: logs kept in $state" >&2; fi
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

t0=$SECONDS
out=$("$here/cluster.sh" start "$state/cluster" "$mode")
while IFS= read -r line; do export "${line?}"; done <<<"$out"
export SSEGATE_KUBECONFIG=$KUBECONFIG
unset KUBECONFIG

if [ $mode = node ]; then
	# The node's pods reach the host only on the bridge: the broker listens there, not on loopback.
	unset KAFKA_BROKERS KAFKA_SASL_BROKERS KAFKA_TLS_BROKERS KAFKA_TLS_CA
	started_kafka=1
	out=$(KAFKA_HOST=$KUBE_NODE_GATEWAY "$repo/pkg/kafkatest/kafka.sh" start "$state/kafka")
	while IFS= read -r line; do export "${line?}"; done <<<"$out"
	echo "with-cluster: Kafka on $KAFKA_BROKERS" >&2
	tag=
	while read -r tar _; do
		"$here/cluster.sh" import "$state/cluster" "$tar"
		tag=$(basename "$tar" .tar)
		tag=${tag#ssegate-*-}
	done < <(cd "$repo" && k8s/image/image.sh | sed "s:^\([^/]\):$repo/\1:")
	[ -n "$tag" ] || { echo "with-cluster: make image wrote no image" >&2; exit 1; }
	export SSEGATE_KUBE_NODE=1 SSEGATE_IMAGE_TAG=$tag
fi
echo "with-cluster: $mode cluster up in $((SECONDS - t0))s" >&2

"$@"
