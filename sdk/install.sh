#!/usr/bin/env bash
# Installs what the SDKs and the contract checks need, pinned: the Go code generators (into the
# repository's .tools/bin), the Go SDK's modules, and the TypeScript SDK's npm packages from its
# lockfile (protoc-gen-es and buf among them), and redis-server for the tests of the redis memo backend.
# Part of the README's install command.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

for tool in go npm node; do
  command -v "$tool" >/dev/null 2>&1 || { echo "sdk/install.sh: '$tool' is required (Go >= 1.26, Node.js >= 20)" >&2; exit 1; }
done

export GOBIN="$root/.tools/bin"
go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2
(cd "$root/sdk/go" && go mod download)
npm ci --prefix "$root/sdk/typescript" --no-audit --no-fund --loglevel=error
"$root/sdk/install-redis.sh"
