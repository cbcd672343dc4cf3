#!/usr/bin/env bash
# Builds the Kubernetes control-plane and node binaries the cluster tests run, from the Go module
# k8s.io/kubernetes, and caches them by version.
#
#   k8s/cluster/build.sh [BINARY...]   build the named binaries (default: all five) into
#                                       $SSEGATE_CACHE/kube-$KUBE_VERSION/bin unless already there.
#                                       Prints the bin folder on stdout.
#
# BINARY is one of kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kube-proxy. k8s.io/kubernetes
# cannot be required as is (its go.mod replaces its staging modules with folders of its own repository), so a
# scratch module requires it and replaces each staging module with the published v0.x release of the same
# version. Builds run one at a time under `nice`; the apiserver alone takes about 11 minutes cold on two cores.
set -euo pipefail

cache=${SSEGATE_CACHE:-$HOME/.cache/ssegate}
version=${KUBE_VERSION:-v1.34.4}
root=$cache/kube-$version
bin=$root/bin
all=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy)

die() { echo "kube/build.sh: $*" >&2; exit 1; }

command -v go >/dev/null || die "go not found"
[ $# -gt 0 ] || set -- "${all[@]}"
for b in "$@"; do
	case " ${all[*]} " in *" $b "*) ;; *) die "unknown binary $b (one of ${all[*]})" ;; esac
done

todo=()
for b in "$@"; do [ -x "$bin/$b" ] || todo+=("$b"); done
if [ ${#todo[@]} -eq 0 ]; then echo "$bin"; exit 0; fi

# One build at a time on the machine, whoever starts it: a second caller waits, then finds the binaries.
mkdir -p "$root"
exec 9>"$root/.build.lock"
flock 9
todo=()
for b in "$@"; do [ -x "$bin/$b" ] || todo+=("$b"); done
if [ ${#todo[@]} -eq 0 ]; then echo "$bin"; exit 0; fi

minor=${version#v1.}
minor=${minor%%.*}
staging_version=v0.${version#v1.}
mod=$root/module
mkdir -p "$mod" "$bin"

# The scratch module: the staging modules are the ones k8s.io/kubernetes replaces with ./staging folders.
if [ ! -f "$mod/.complete" ]; then
	echo "kube/build.sh: preparing a module for k8s.io/kubernetes $version" >&2
	rm -rf "$mod" && mkdir -p "$mod"
	(
		cd "$mod"
		cat >go.mod <<MOD
module ssegate.test/kube

go 1.24.0

require k8s.io/kubernetes $version
MOD
		printf 'package kube\n\nimport _ "k8s.io/kubernetes/cmd/kube-apiserver/app"\n' >tools.go
		gomod=$(go mod download -json "k8s.io/kubernetes@$version" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
		[ -f "$gomod" ] || die "could not download k8s.io/kubernetes@$version"
		staging=$(sed -n 's:^[[:space:]]*\(k8s.io/[^ ]*\) => ./staging/.*:\1:p' "$gomod")
		[ -n "$staging" ] || die "no staging modules found in k8s.io/kubernetes@$version's go.mod"
		for m in $staging; do
			go mod edit -replace "$m=$m@$staging_version"
		done
		echo "kube/build.sh: replaced $(echo "$staging" | wc -l) staging modules with $staging_version" >&2
		GOFLAGS=-mod=mod go mod tidy >&2 || die "go mod tidy failed in $mod"
	)
	touch "$mod/.complete"
fi

ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$version -X k8s.io/component-base/version.gitMajor=1"
ldflags+=" -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/client-go/pkg/version.gitVersion=$version"
ldflags+=" -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=$minor"
ldflags+=" -X k8s.io/component-base/version.gitTreeState=clean"
for b in "${todo[@]}"; do
	echo "kube/build.sh: building $b $version (slow: one binary at a time, under nice)" >&2
	start=$(date +%s)
	(cd "$mod" && CGO_ENABLED=0 GOFLAGS=-mod=mod nice -n 10 go build -trimpath -ldflags "$ldflags" \
		-o "$bin/$b.tmp" "k8s.io/kubernetes/cmd/$b") || die "building $b failed"
	mv "$bin/$b.tmp" "$bin/$b"
	echo "kube/build.sh: $b built in $(($(date +%s) - start))s" >&2
done
echo "$bin"
