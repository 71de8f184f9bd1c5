#!/usr/bin/env bash
# Runs every test of the workspace: unit, integration, crash (real SIGKILL),
# corruption, property and doc tests, then the shuttle schedules and Miri.
# Builds go to a cache folder outside the checkout so that reruns reuse them.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/emberkv/target}"

# emberkv-server's integration tests drive the server with redis-cli (Debian
# package redis-tools) and Python's redis package, and compare its replies
# with a real redis-server's (Debian package redis-server; the tests start
# their own on a free port and need no system service). Install them only
# when missing, quietly; the tests fail under CI=true if they are still
# missing.
if ! command -v redis-cli >/dev/null 2>&1 || ! command -v redis-server >/dev/null 2>&1; then
    echo "== installing redis-server and redis-tools (redis-cli)"
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server redis-tools; } \
        >/dev/null 2>&1 || echo "warning: could not install redis-server and redis-tools" >&2
fi
if ! python3 -c 'import redis' >/dev/null 2>&1; then
    echo "== installing the Python redis package"
    python3 -m pip install -q redis >/dev/null 2>&1 \
        || python3 -m pip install -q --break-system-packages redis >/dev/null 2>&1 \
        || echo "warning: could not install the Python redis package" >&2
fi

cargo test --workspace

# Concurrency schedules (shuttle) and undefined-behaviour checks (Miri) of
# the engine's lock-free and unsafe code; each builds in its own folder.
bash scripts/shuttle.sh
bash scripts/miri.sh
