#!/usr/bin/env bash
# Fuzzing with cargo fuzz (libFuzzer) on the stable toolchain.
#
#   scripts/fuzz.sh TARGET [SECONDS]   fuzz one target (record, recovery,
#                                      resp, commands) for SECONDS
#                                      (default 60)
#   scripts/fuzz.sh cmin TARGET        minimise fuzz/corpus/TARGET together
#                                      with what runs found (fuzz/work/TARGET)
#   scripts/fuzz.sh seed               rewrite the seed inputs from real
#                                      stores, requests and command scripts
#
# A run reads fuzz/corpus/TARGET (committed) and writes the inputs it finds
# to fuzz/work/TARGET (ignored by git); `cmin` folds them into the
# committed corpus, keeping every `seed-*` and `regression-*` file. A crash
# stops the run and leaves the input in fuzz/artifacts/TARGET/.
#
# cargo fuzz passes nightly -Z flags to rustc (sanitizer, coverage);
# RUSTC_BOOTSTRAP=1 makes the stable compiler accept them. One job, since
# the project's machines have two cores.
set -euo pipefail
cd "$(dirname "$0")/.."
export RUSTC_BOOTSTRAP=1
# Workspace builds (seed) go where scripts/test.sh puts them; cargo fuzz
# builds into fuzz/target.
workspace_target="${CARGO_TARGET_DIR:-$HOME/.cache/emberkv/target}"
unset CARGO_TARGET_DIR

targets="record recovery resp commands"

usage() {
    sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

ensure_cargo_fuzz() {
    if ! cargo fuzz --version >/dev/null 2>&1; then
        echo "== installing cargo-fuzz"
        cargo install --locked cargo-fuzz
    fi
}

check_target() {
    case " $targets " in
    *" $1 "*) ;;
    *) echo "unknown target '$1' (one of: $targets)" >&2; exit 2 ;;
    esac
}

# recovery and commands write a store per input and fsync: on tmpfs that
# costs nothing.
if [ -d /dev/shm ]; then
    export TMPDIR=/dev/shm
fi

case "${1:-}" in
"" | -h | --help)
    usage
    ;;
seed)
    export CARGO_TARGET_DIR="$workspace_target"
    cargo test -p emberkv --test fuzz_corpus -- --ignored write_seeds
    cargo test -p emberkv-server --test fuzz_corpus -- --ignored write_seeds
    ;;
cmin)
    target="${2:-}"
    check_target "$target"
    ensure_cargo_fuzz
    corpus="fuzz/corpus/$target"
    work="fuzz/work/$target"
    mkdir -p "$work"
    # Seeds and regressions stay; of the rest, libFuzzer keeps the inputs
    # that cover what they do not, smallest first, among those of at most
    # 4 KiB (larger ones, such as stores with their index checkpoint,
    # would make the committed corpus megabytes).
    merged="$(mktemp -d)"
    candidates="$(mktemp -d)"
    find "$corpus" -maxdepth 1 -type f \( -name 'seed-*' -o -name 'regression-*' \) \
        -exec cp {} "$merged"/ \;
    find "$corpus" "$work" -maxdepth 1 -type f -size -4097c \
        ! -name 'seed-*' ! -name 'regression-*' -exec cp {} "$candidates"/ \;
    # commands: edges only (no hit counts), else its corpus keeps
    # thousands of scripts differing in how often a loop ran (312 KB
    # instead of 56 KB after its first 20 minutes).
    counters=""
    if [ "$target" = commands ]; then
        counters="-use_counters=0"
    fi
    cargo fuzz run "$target" "$merged" "$candidates" -- -merge=1 -timeout=60 $counters
    rm -rf "$corpus" "$work" "$candidates"
    mv "$merged" "$corpus"
    chmod 755 "$corpus"
    echo "== $corpus: $(ls "$corpus" | wc -l) inputs, $(cat "$corpus"/* | wc -c) bytes"
    ;;
*)
    target="$1"
    seconds="${2:-60}"
    check_target "$target"
    ensure_cargo_fuzz
    mkdir -p "fuzz/work/$target"
    # -timeout: an input running for 30 s is reported as a hang.
    cargo fuzz run "$target" "fuzz/work/$target" "fuzz/corpus/$target" -- \
        -max_total_time="$seconds" -timeout=30 -rss_limit_mb=4096 \
        -print_final_stats=1
    ;;
esac
