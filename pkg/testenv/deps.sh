#!/usr/bin/env bash
# What the tests need on the machine, installed when missing: the one list `make test`, `make e2e-k8s` and CI use.
#
#   pkg/testenv/deps.sh install [test|k8s]   install what is missing (Debian packages as root with apt-get; the
#                                            nginx and schema registry the tests run, unpacked into the cache)
#   pkg/testenv/deps.sh check [test|k8s]     say what is missing and the one command that installs it; exit 1 if
#                                            anything is, 0 otherwise; installs nothing
#
# The tier `test` (the default) is what `make test` runs: the broker's tools (Java 17+, Maven, Python 3, openssl),
# redis-server, Node.js with npm and Chromium (the browser tests), kcat, jq and curl (the runbooks), plus nginx
# (the proxy tests) and Apicurio Registry (the schema tests), which are fetched into the cache rather than
# installed (services/e2e/nginx.sh, pkg/registrytest/registry.sh). The tier `k8s` adds what the test node needs
# (iproute2 for its bridge). Go itself is not installed: the Makefile runs on it, and Debian's may be older than
# go.mod asks. Without root or without apt-get, `install` stops at once, before any test starts, naming the
# command to run.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)

die() { echo "deps.sh: $*" >&2; exit 1; }

mode=${1:-}
tier=${2:-test}
case "$mode" in install | check) ;; *) die "usage: deps.sh install|check [test|k8s]" ;; esac
case "$tier" in test | k8s) ;; *) die "unknown tier '$tier' (test or k8s)" ;; esac

# need COMMAND PACKAGE: PACKAGE (a Debian package name) when COMMAND is not found.
missing=()
need() { command -v "$1" >/dev/null 2>&1 || missing+=("$2"); }

need java default-jre-headless
need mvn maven
need python3 python3
need openssl openssl
need redis-server redis-server
need node nodejs
need npm npm
need kcat kcat
need jq jq
need curl curl
# Chromium is looked for where the browser tests launch it (pkg/browsertest).
[ -x /usr/bin/chromium ] || missing+=(chromium)
if [ "$tier" = k8s ]; then
	need ip iproute2
fi

command -v go >/dev/null 2>&1 || die "go not found: install Go $(sed -n 's/^go //p' "$repo/go.mod") or newer (https://go.dev/doc/install), then run make again"

apt_cmd="apt-get install -y --no-install-recommends ${missing[*]:-}"
if [ ${#missing[@]} -gt 0 ]; then
	if [ "$mode" = check ]; then
		echo "deps.sh: missing: ${missing[*]}" >&2
		echo "deps.sh: install them with: $apt_cmd" >&2
		exit 1
	fi
	command -v apt-get >/dev/null 2>&1 ||
		die "missing ${missing[*]}, and this machine has no apt-get: install these packages (Debian names) with its own package manager, then run make again"
	[ "$(id -u)" = 0 ] ||
		die "missing ${missing[*]}: run as root (sudo): apt-get update && $apt_cmd"
	echo "deps.sh: installing ${missing[*]}" >&2
	export DEBIAN_FRONTEND=noninteractive
	# The package lists of a fresh machine are empty or old: update once, and again only if an install fails.
	if ! apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1; then
		apt-get update -qq
		apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
	fi
fi

[ "$mode" = install ] || exit 0

# Fetched into the cache (by version), not installed: each does nothing when its copy is there already.
"$repo/services/e2e/nginx.sh" fetch >/dev/null
"$repo/pkg/registrytest/registry.sh" fetch
