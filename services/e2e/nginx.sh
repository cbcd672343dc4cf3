#!/usr/bin/env bash
# Debian's nginx for the proxy tests, unpacked into the cache rather than installed.
#
#   services/e2e/nginx.sh fetch   download Debian's nginx package (apt-get download) and unpack it (dpkg -x) into
#                            $SSEGATE_CACHE/nginx-<version>/ (default ~/.cache/ssegate); prints NGINX_BIN=<binary>.
#   services/e2e/nginx.sh path    prints NGINX_BIN=<binary> of the newest unpacked copy, or nothing when there is none.
#
# Why not apt-get install: the package's maintainer scripts start nginx as a system service listening on port
# 80 of every address, which a test machine should not get. The tests run the binary alone, with a
# configuration, prefix, logs and pid file of their own on loopback; the binary needs only libraries every
# Debian system has (libc, libcrypt, libpcre2, libssl, zlib), and nothing from nginx-common.
set -euo pipefail

cache=${SSEGATE_CACHE:-$HOME/.cache/ssegate}

die() { echo "nginx.sh: $*" >&2; exit 1; }

newest() {
	local bin
	bin=$(ls -d "$cache"/nginx-*/.complete 2>/dev/null | sort -V | tail -1) || true
	[ -n "$bin" ] && echo "NGINX_BIN=$(dirname "$bin")/usr/sbin/nginx"
	return 0
}

fetch() {
	command -v apt-get >/dev/null || die "apt-get not found: on a system without Debian's packages, set NGINX_BIN to an nginx binary"
	local version
	version=$(apt-cache show --no-all-versions nginx 2>/dev/null | sed -n 's/^Version: //p' | head -1)
	if [ -z "$version" ]; then
		[ "$(id -u)" = 0 ] || die "apt knows no nginx package; run apt-get update as root"
		apt-get update -qq
		version=$(apt-cache show --no-all-versions nginx | sed -n 's/^Version: //p' | head -1)
	fi
	[ -n "$version" ] || die "apt knows no nginx package"
	local dir=$cache/nginx-${version//[:~]/_}
	if [ ! -f "$dir/.complete" ]; then
		echo "nginx.sh: unpacking Debian's nginx $version into $dir" >&2
		rm -rf "$dir"
		mkdir -p "$dir/deb"
		# apt-get download writes into the current directory; -o quiets its note about the _apt sandbox.
		(cd "$dir/deb" && apt-get download -qq -o APT::Sandbox::User=root "nginx=$version") >&2 ||
			die "apt-get download nginx=$version failed"
		dpkg -x "$dir"/deb/nginx_*.deb "$dir"
		rm -rf "$dir/deb"
		"$dir/usr/sbin/nginx" -v 2>/dev/null || die "the unpacked nginx does not run (a library missing?)"
		touch "$dir/.complete"
	fi
	echo "NGINX_BIN=$dir/usr/sbin/nginx"
}

case "${1:-}" in
fetch) fetch ;;
path) newest ;;
*) echo "usage: nginx.sh fetch|path" >&2; exit 2 ;;
esac
