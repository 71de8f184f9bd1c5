#!/usr/bin/env bash
# Runs the unit tests of the modules with `unsafe` code (log::page, the hot
# tier's page buffer; prefetch, a cache hint) under Miri, which checks them
# for undefined behaviour: out-of-bounds or aliasing violations and data
# races between the threads of the tests. Needs the nightly toolchain with the miri and rust-src
# components; installs them with rustup when missing, and skips with a
# message when they cannot be had (no network to the Rust toolchain host).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/emberkv/target}"

if ! rustup component list --toolchain nightly --installed 2>/dev/null | grep -q '^miri'; then
    echo "== installing the nightly toolchain with miri"
    if ! rustup toolchain install nightly --profile minimal --component miri,rust-src >/dev/null 2>&1; then
        echo "miri: SKIPPED (the nightly toolchain with miri could not be installed here)"
        exit 0
    fi
fi
if ! rustup component list --toolchain nightly --installed 2>/dev/null | grep -q '^rust-src'; then
    rustup component add rust-src --toolchain nightly >/dev/null 2>&1 || {
        echo "miri: SKIPPED (the rust-src component could not be installed here)"
        exit 0
    }
fi
# Building Miri's standard library needs crates.io and a matching nightly;
# a failure here is the machine's, not the code's.
if ! cargo +nightly miri setup >/dev/null 2>&1; then
    echo "miri: SKIPPED (cargo miri setup failed on this toolchain)"
    exit 0
fi
# Miri's test binary is a stub that compiles the crate again when run, from
# the directory it was built in; with a target directory shared between
# checkouts (a clean clone for CI beside a working tree), cargo may find that
# stub fresh and test another checkout's sources. Forget the crate's own
# Miri build (its dependencies stay) so this checkout's code is what runs.
host=$(rustc +nightly -vV | sed -n 's/^host: //p')
cargo +nightly clean -q -p emberkv --target-dir "$CARGO_TARGET_DIR/miri" --target "$host"
echo "== miri: log::page"
cargo +nightly miri test -p emberkv --lib log::page
echo "== miri: prefetch"
cargo +nightly miri test -p emberkv --lib prefetch::
