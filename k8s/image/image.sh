#!/usr/bin/env bash
# Builds the OCI image of each service as a tarball in .run/image/, without a Docker engine.
#
#   k8s/image/image.sh            the host's platform (linux/amd64 on most machines)
#   IMAGE_PLATFORMS=linux/amd64,linux/arm64 k8s/image/image.sh    a multi-arch image (an index)
#
# VERSION (default: the release tag at this commit, else the chart's appVersion, so that `helm install` with
# the chart's default image tag finds these images), REVISION (the commit) and SOURCE_DATE_EPOCH (default: the
# commit's time) go into the image; the same commit gives the same digest. The binaries are static (CGO_ENABLED=0) and
# reproducible (-trimpath, no build id). Prints each tarball and its digest.
set -euo pipefail
cd "$(dirname "$0")/../.."

app=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\} *$/\1/p' helm/ssegate/Chart.yaml)
version=${VERSION:-$(git describe --tags --exact-match 2>/dev/null || echo "$app")}
revision=${REVISION:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}
epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
platforms=${IMAGE_PLATFORMS:-linux/$(go env GOARCH)}
out=.run/image
mkdir -p "$out"
go build -trimpath -o "$out/image-tool" ./k8s/image
for svc in gateway ingest; do
	args=()
	for plat in ${platforms//,/ }; do
		os=${plat%/*} arch=${plat#*/}
		bin=$out/$os-$arch/$svc
		CGO_ENABLED=0 GOOS=$os GOARCH=$arch go build -trimpath -ldflags="-s -w -buildid=" -o "$bin" "./services/$svc"
		args+=(--binary "$os/$arch=$bin")
	done
	"$out/image-tool" --service "$svc" "${args[@]}" --version "$version" --revision "$revision" \
		--created "$epoch" --out "$out/ssegate-$svc-$version.tar"
done
