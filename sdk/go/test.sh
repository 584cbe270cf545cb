#!/usr/bin/env bash
# The Go SDK's checks: gofmt, go vet, and the tests, which start a real podfit-server (from the PATH)
# on a loopback port. A missing toolchain or server fails loudly: nothing is skipped.
#   PATH=$PWD/.venv/bin:$PATH sdk/go/test.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

if ! command -v go >/dev/null 2>&1; then
  echo "sdk/go/test.sh: 'go' is not on the PATH: the Go SDK needs Go >= 1.26 (https://go.dev/dl/)" >&2
  exit 1
fi
if ! command -v podfit-server >/dev/null 2>&1; then
  echo "sdk/go/test.sh: 'podfit-server' is not on the PATH: run the README's install command, then" \
    "e.g. PATH=\$PWD/.venv/bin:\$PATH sdk/go/test.sh" >&2
  exit 1
fi

unformatted="$(gofmt -l .)"
if [ -n "$unformatted" ]; then
  echo "sdk/go/test.sh: not gofmt-formatted (run gofmt -w):" >&2
  echo "$unformatted" >&2
  exit 1
fi
go vet ./...
go test -count=1 ./...
