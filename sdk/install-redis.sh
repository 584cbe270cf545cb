#!/usr/bin/env bash
# Installs Debian's redis-server, which the test suite starts on a free loopback port to check the redis
# decision-memo backend under concurrency (tests/test_memo_backends.py). Called by sdk/install.sh.
# Idempotent: does nothing when redis-server is already on PATH; needs apt-get (and root or sudo) otherwise.
set -euo pipefail

if command -v redis-server >/dev/null 2>&1; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "sdk/install-redis.sh: redis-server is missing and apt-get is not available: install redis-server" >&2
  exit 1
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 || { echo "sdk/install-redis.sh: run as root (or install sudo) to install redis-server" >&2; exit 1; }
  sudo="sudo"
fi
$sudo apt-get update -q
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends redis-server
