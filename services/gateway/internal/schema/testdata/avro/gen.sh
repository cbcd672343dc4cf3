#!/usr/bin/env bash
# Regenerates the Avro fixtures in this folder with Apache Avro (Java): see README.md.
# Needs a JDK (17 or later) and Maven. Downloads go to ${SSEGATE_CACHE:-$HOME/.cache/ssegate}/m2.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${SSEGATE_CACHE:-$HOME/.cache/ssegate}"

mvn -q -B -Dstyle.color=never \
  -f "$here/gen/pom.xml" \
  -Dmaven.repo.local="$cache/m2" \
  -Dgen.build.dir="$cache/avro-fixture-gen/target" \
  -Dgen.out="$here" \
  compile exec:java

echo "wrote $(wc -l <"$here/cases.txt") cases to $here"
