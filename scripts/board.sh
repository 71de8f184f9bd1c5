#!/usr/bin/env bash
# The main job: the benchmark board with every peer, RocksDB included.
#
#   bash scripts/board.sh                 # the quick board (2 s cells, one repetition)
#   bash scripts/board.sh --durability FULL
#   bash scripts/board.sh --full          # 5 s cells, 3 repetitions (46 minutes with RocksDB on 2026-12-07)
#
# Any other flags go to `emberkv-bench board` (`--help` lists them). RocksDB
# is behind the harness's `rocksdb` cargo feature: its C++ library compiles
# for about 16 minutes on 2 cores the first time (then the build is cached
# in ~/.cache/emberkv/target), and its bindings need libclang (Debian's
# `libclang-dev`), installed here when missing. Without libclang the board
# runs without RocksDB and says so, rather than not at all.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/emberkv/target}"

# The unversioned libclang.so that the -dev packages install (libclang-cpp
# and the runtime's libclang-14.so.1 alone come without the headers that
# the bindings' build needs), or a LIBCLANG_PATH given by the caller.
has_libclang() {
    [ -n "${LIBCLANG_PATH:-}" ] \
        || compgen -G '/usr/lib/llvm-*/lib/libclang.so' >/dev/null \
        || ldconfig -p 2>/dev/null | grep -q '[[:space:]]libclang\.so[[:space:]]'
}
if ! has_libclang; then
    echo "== installing libclang-dev (for RocksDB's bindings)"
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libclang-dev; } \
        >/dev/null 2>&1 || echo "warning: could not install libclang-dev" >&2
fi
features=()
if has_libclang; then
    features=(--features rocksdb)
else
    echo "warning: no libclang: the board runs without RocksDB (its cells read 'not run')" >&2
fi

quick=(--quick)
args=()
for arg in "$@"; do
    if [ "$arg" = "--full" ]; then
        quick=()
    else
        args+=("$arg")
    fi
done
exec cargo run --release -p emberkv-bench "${features[@]}" -- board "${quick[@]}" "${args[@]}"
