#!/usr/bin/env bash
# Fetches the Debian packages a test cluster runs and unpacks them into a cache folder, without installing
# them: no system service is started or configured.
#
#   k8s/cluster/debs.sh           etcd, containerd, runc and the CNI plugins, unpacked into
#                                  $SSEGATE_CACHE/kube-$KUBE_VERSION/debs unless already there; prints that
#                                  folder on stdout (binaries under usr/bin, usr/sbin, usr/lib/cni).
#   k8s/cluster/debs.sh nftables  nft and the libraries it links (kube-proxy's nftables mode), unpacked into
#                                  $SSEGATE_CACHE/kube-$KUBE_VERSION/nftables; prints that folder. FOLDER/bin/nft
#                                  runs the unpacked nft with its libraries (LD_LIBRARY_PATH).
# Each set has its own folder, so that adding one never unpacks again a folder a running cluster uses.
set -euo pipefail

cache=${SSEGATE_CACHE:-$HOME/.cache/ssegate}
version=${KUBE_VERSION:-v1.34.4}
set=${1:-base}
case "$set" in
base)
	root=$cache/kube-$version/debs
	packages=(etcd-server containerd runc containernetworking-plugins)
	binaries=(usr/bin/etcd usr/bin/containerd usr/bin/containerd-shim-runc-v2 usr/bin/ctr usr/sbin/runc
		usr/lib/cni/bridge usr/lib/cni/host-local usr/lib/cni/loopback)
	;;
nftables)
	root=$cache/kube-$version/nftables
	# nft and every library it needs beyond libc and the editline's own (libbsd, libtinfo): a fresh machine
	# may lack any of them, and the unpacked ones are used only through LD_LIBRARY_PATH.
	packages=(nftables libnftables1 libnftnl11 libmnl0 libjansson4 libxtables12 libgmp10 libedit2)
	binaries=(usr/sbin/nft)
	;;
*) echo "kube/debs.sh: unknown set $set (base or nftables)" >&2; exit 2 ;;
esac

die() { echo "kube/debs.sh: $*" >&2; exit 1; }

if [ -f "$root/.complete" ]; then echo "$root"; exit 0; fi
# One unpacking at a time, whoever starts it: a second caller waits, then finds the folder complete.
mkdir -p "$(dirname "$root")"
exec 9>"$root.lock"
flock 9
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
for b in "${binaries[@]}"; do
	[ -x "$root/$b" ] || die "$b missing from the unpacked packages"
done
if [ "$set" = nftables ]; then
	lib=$(find "$root/usr/lib" -name 'libnftables.so.1*' -print -quit)
	[ -n "$lib" ] || die "libnftables missing from the unpacked packages"
	mkdir -p "$root/bin"
	printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' "$(dirname "$lib")" "$root/usr/sbin/nft" >"$root/bin/nft"
	chmod +x "$root/bin/nft"
	"$root/bin/nft" --version >&2 || die "the unpacked nft does not run"
fi
rm -rf "$root/archives"
touch "$root/.complete"
echo "$root"
