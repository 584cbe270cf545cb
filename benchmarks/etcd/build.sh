#!/usr/bin/env bash
# Builds etcd's server from the Go module proxy for benchmarks/log_engines_bench.py (JetStream and etcd
# measured side by side, README "Why JetStream"), and prints the folder that holds it. Benchmark only: no
# test needs etcd.
#
#   benchmarks/etcd/build.sh
#
# go/go.mod pins go.etcd.io/etcd/server/v3 as a tool (go.sum pins every module). A cold build takes ~40 s
# on 2 cores once the modules are downloaded, so the binary is cached under
# ${PODFIT_ENGINE_CACHE:-~/.cache/podfit/engine}/etcd-<version>-<key>, the key a hash of go.mod, go.sum
# and the Go toolchain, as tests/engine/build.sh caches nats-server. Concurrent callers wait on one lock.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
module="$here/go"
command -v go >/dev/null 2>&1 || { echo "build.sh: 'go' is required (Go >= 1.26)" >&2; exit 1; }
version="$(awk '$1 == "go.etcd.io/etcd/server/v3" {print $2}' "$module/go.mod")"
[ -n "$version" ] || { echo "build.sh: no etcd server version in $module/go.mod" >&2; exit 2; }
key="$( (cat "$module/go.mod" "$module/go.sum"; go version) | sha256sum | cut -c1-16)"
root="${PODFIT_ENGINE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/podfit/engine}"
cache="$root/etcd-$version-$key"
mkdir -p "$cache/bin"

exec 9>"$cache/.lock"
flock 9
if [ ! -x "$cache/bin/etcd" ]; then
  echo "build.sh: building etcd $version into $cache/bin (once per version)" >&2
  started=$SECONDS
  # -mod=readonly: the committed go.sum pins every module; the build never resolves anew.
  (cd "$module" && GOFLAGS=-mod=readonly go build -trimpath -o "$cache/bin/.etcd.partial" go.etcd.io/etcd/server/v3)
  mv "$cache/bin/.etcd.partial" "$cache/bin/etcd"
  echo "build.sh: built etcd $version in $((SECONDS - started)) s" >&2
fi
echo "$cache/bin"
