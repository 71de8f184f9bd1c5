//! Integration tests: each starts the real `emberkv-server` binary on a
//! free TCP port and a unix socket in a temporary directory, and drives it
//! with the `redis` crate, raw sockets, redis-cli and Python's `redis`;
//! `differential` compares its replies with a real redis-server's.
//!
//! redis-cli, redis-server and Python's `redis` are installed by
//! `scripts/test.sh`. When
//! one is missing these tests fail under `CI=true` and are skipped (with a
//! message) otherwise.

mod common;

mod cli;
mod commands;
mod differential;
mod flags;
mod limits;
mod persistence;
mod protocol;
mod python;
mod supervision;
mod transactions;
