#!/usr/bin/env bash
# Builds upstream's kube-apiserver, kube-scheduler and etcd of one Kubernetes version from the Go module
# proxy, for the real-control-plane tests, and prints the folder that holds them.
#
#   tests/controlplane/build.sh v1.37.2 [kube-apiserver kube-scheduler etcd]
#
# go/<version>/go.mod requires k8s.io/kubernetes at that version and replaces each staging module with
# its published v0.x release; go/cmd/ holds the mains (the three components, and kube-scheduler-loop, the
# benchmark yardstick). A cold build takes ~15 minutes on 2 cores
# (and ~1.5 GB of modules), so the binaries are cached under
# ${PODFIT_CONTROLPLANE_CACHE:-~/.cache/podfit/controlplane}/<version>-<key>, the key being a hash of
# go.mod, go.sum and the Go toolchain, and each binary stamped with its main's hash: a machine pays once
# per version, and a change builds afresh only what it touches. Concurrent callers wait on one lock.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
version="${1:?usage: build.sh VERSION [COMMAND...]}"
shift
commands=("$@")
[ ${#commands[@]} -gt 0 ] || commands=(kube-apiserver kube-scheduler etcd)
module="$here/go/$version"
[ -f "$module/go.mod" ] || { echo "build.sh: no module for $version (expected $module/go.mod)" >&2; exit 2; }
command -v go >/dev/null 2>&1 || { echo "build.sh: 'go' is required (Go >= 1.26)" >&2; exit 1; }
for command in "${commands[@]}"; do
  [ -f "$here/go/cmd/$command/main.go" ] || { echo "build.sh: unknown command $command" >&2; exit 2; }
done

key="$( (cat "$module/go.mod" "$module/go.sum"; go version) | sha256sum | cut -c1-16)"
root="${PODFIT_CONTROLPLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/podfit/controlplane}"
cache="$root/$version-$key"
mkdir -p "$cache/bin"

# Each binary is stamped with the hash of its own main: changing one main rebuilds that binary alone.
main_sum() { sha256sum < "$here/go/cmd/$1/main.go" | cut -c1-16; }
missing() {
  local command
  for command in "${commands[@]}"; do
    [ -x "$cache/bin/$command" ] && [ "$(cat "$cache/bin/.$command.main" 2>/dev/null)" = "$(main_sum "$command")" ] ||
      echo "$command"
  done
}

exec 9>"$cache/.lock"
flock 9
todo=($(missing))
if [ ${#todo[@]} -gt 0 ]; then
  src="$(mktemp -d)"
  trap 'rm -rf "$src"' EXIT
  cp "$module/go.mod" "$module/go.sum" "$src/"
  for command in "${todo[@]}"; do mkdir -p "$src/cmd/$command" && cp "$here/go/cmd/$command/main.go" "$src/cmd/$command/"; done
  echo "build.sh: building ${todo[*]} $version into $cache/bin (once per version; ~15 minutes cold)" >&2
  started=$SECONDS
  for command in "${todo[@]}"; do
    # -mod=readonly: the committed go.sum pins every module; the build never resolves anew.
    (cd "$src" && GOFLAGS=-mod=readonly go build -trimpath -o "$cache/bin/.$command.partial" "./cmd/$command")
    mv "$cache/bin/.$command.partial" "$cache/bin/$command"
    main_sum "$command" > "$cache/bin/.$command.main"
  done
  echo "build.sh: built ${todo[*]} $version in $((SECONDS - started)) s" >&2
fi
echo "$cache/bin"
