#!/usr/bin/env bash
# Runs every test of the workspace: unit, integration, crash (real SIGKILL),
# corruption, property and doc tests. Builds go to a cache folder outside
# the checkout so that reruns on the same machine reuse them.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/emberkv/target}"
cargo test --workspace
