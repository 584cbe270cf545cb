#!/usr/bin/env bash
# Builds the replicated log's server, NATS JetStream's nats-server, from the Go module proxy for the
# multi-machine tests (tests/test_replicated.py), and prints the folder that holds it.
#
#   tests/engine/build.sh
#
# go/go.mod pins github.com/nats-io/nats-server/v2 as a tool (go.sum pins every module). A cold build
# takes ~30 s on 2 cores once the modules are downloaded, so the binary is cached under
# ${PODFIT_ENGINE_CACHE:-~/.cache/podfit/engine}/<version>-<key>, the key being a hash of go.mod, go.sum
# and the Go toolchain, as tests/controlplane/build.sh caches the control plane. Concurrent callers wait
# on one lock.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
module="$here/go"
command -v go >/dev/null 2>&1 || { echo "build.sh: 'go' is required (Go >= 1.26)" >&2; exit 1; }
version="$(awk '$1 == "github.com/nats-io/nats-server/v2" {print $2}' "$module/go.mod")"
[ -n "$version" ] || { echo "build.sh: no nats-server version in $module/go.mod" >&2; exit 2; }
key="$( (cat "$module/go.mod" "$module/go.sum"; go version) | sha256sum | cut -c1-16)"
root="${PODFIT_ENGINE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/podfit/engine}"
cache="$root/nats-server-$version-$key"
mkdir -p "$cache/bin"

exec 9>"$cache/.lock"
flock 9
if [ ! -x "$cache/bin/nats-server" ]; then
  echo "build.sh: building nats-server $version into $cache/bin (once per version)" >&2
  started=$SECONDS
  # -mod=readonly: the committed go.sum pins every module; the build never resolves anew.
  (cd "$module" && GOFLAGS=-mod=readonly go build -trimpath -o "$cache/bin/.nats-server.partial" github.com/nats-io/nats-server/v2)
  mv "$cache/bin/.nats-server.partial" "$cache/bin/nats-server"
  echo "build.sh: built nats-server $version in $((SECONDS - started)) s" >&2
fi
echo "$cache/bin"
