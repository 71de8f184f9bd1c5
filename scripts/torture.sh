#!/usr/bin/env bash
# The long torture: runs the SIGKILL crash suite (crates/emberkv/tests/crash.rs,
# 6 scenarios x 8 kill/reopen cycles each) and the linearizability check
# (crates/emberkv/tests/linearizability.rs, 8 threads, about 34,000 operations)
# once per seed, for SEEDS seeds (default 32, i.e. 1,536 kill/reopen cycles),
# and stops at the first failure, printing the seed that reproduces it:
#
#   EMBERKV_CRASH_SEED=<seed> cargo test -p emberkv --test crash
#   EMBERKV_LIN_SEED=<seed> cargo test -p emberkv --test linearizability
#
# Usage: bash scripts/torture.sh [SEEDS] [FIRST_SEED]
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/emberkv/target}"
seeds="${1:-32}"
first="${2:-1000}"
cargo test -p emberkv --test crash --test linearizability --no-run >/dev/null 2>&1
start=$(date +%s)
for ((seed = first; seed < first + seeds; seed++)); do
    lin=""
    if ! out=$(EMBERKV_CRASH_SEED=$seed cargo test -p emberkv --test crash 2>&1) ||
        ! lin=$(EMBERKV_LIN_SEED=$seed cargo test -p emberkv --test linearizability concurrent 2>&1); then
        echo "$out$lin" | grep -E -A12 "panicked|FAILED" | head -40
        echo "torture: FAILED at seed $seed (after $((seed - first)) clean seeds)"
        exit 1
    fi
    echo "seed $seed: ok ($(echo "$out" | grep -o '[0-9]* passed' | head -1), linearizable)"
done
echo "torture: $seeds seeds x 6 scenarios x 8 cycles = $((seeds * 48)) kill/reopen cycles and $seeds linearizability runs, all clean, in $(( $(date +%s) - start )) s"
