#!/usr/bin/env bash
# Runs the concurrency tests of the index (insert / overwrite / remove /
# grow under lock-free readers), of the log (appenders, the flusher,
# group commit, eviction and readers) and of a whole store (writers,
# compaction and checkpoints) under shuttle's random and PCT
# schedulers: the crate is built with `--cfg shuttle`, which swaps its
# locks, atomics and ArcSwap for shuttle's (crates/emberkv/src/sync.rs).
#
#   bash scripts/shuttle.sh                                     # CI: 5,000 (index), 300 (log) and 60 (store) per scheduler
#   EMBERKV_SHUTTLE_ITERATIONS=100000 bash scripts/shuttle.sh index::shuttle_tests   # one module, long
#
# The build goes to its own target directory beside the usual one: the
# `--cfg` flag would otherwise invalidate the cached normal build.
set -euo pipefail
cd "$(dirname "$0")/.."
base="${CARGO_TARGET_DIR:-$HOME/.cache/emberkv/target}"
export CARGO_TARGET_DIR="$base-shuttle"
export RUSTFLAGS="--cfg shuttle"
echo "== shuttle: index, log and store schedules"
cargo test -p emberkv --lib -- "${1:-shuttle_tests}"
