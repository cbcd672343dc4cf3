#!/usr/bin/env bash
# Fetches the Debian packages a test cluster runs (etcd, containerd, runc, the CNI plugins) and unpacks them
# into a cache folder, without installing them: no system service is started or configured.
#
#   scripts/kube/debs.sh        unpack into $SSEGATE_CACHE/kube-$KUBE_VERSION/debs unless already there;
#                               prints that folder on stdout (binaries under usr/bin, usr/sbin, usr/lib/cni).
set -euo pipefail

cache=${SSEGATE_CACHE:-$HOME/.cache/ssegate}
version=${KUBE_VERSION:-v1.34.4}
root=$cache/kube-$version/debs
packages=(etcd-server containerd runc containernetworking-plugins)

die() { echo "kube/debs.sh: $*" >&2; exit 1; }

if [ -f "$root/.complete" ]; then echo "$root"; exit 0; fi
command -v apt-get >/dev/null || die "apt-get not found: the cluster's etcd, containerd, runc and CNI plugins come from Debian packages"
rm -rf "$root"
mkdir -p "$root/archives"
(
	cd "$root/archives"
	if ! apt-get download "${packages[@]}" >&2; then
		[ "$(id -u)" = 0 ] || die "apt-get download failed (an apt-get update as root may help)"
		apt-get update -qq >&2
		apt-get download "${packages[@]}" >&2 || die "apt-get download ${packages[*]} failed"
	fi
)
for deb in "$root"/archives/*.deb; do
	dpkg -x "$deb" "$root"
done
for b in usr/bin/etcd usr/bin/containerd usr/bin/containerd-shim-runc-v2 usr/bin/ctr usr/sbin/runc \
	usr/lib/cni/bridge usr/lib/cni/host-local usr/lib/cni/loopback; do
	[ -x "$root/$b" ] || die "$b missing from the unpacked packages"
done
rm -rf "$root/archives"
touch "$root/.complete"
echo "$root"
