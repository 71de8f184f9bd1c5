//! emberkv-server: a Redis-protocol server over one emberkv store.
//!
//! It speaks RESP2 and RESP3 (HELLO 3) on TCP and a unix socket, takes
//! redis-server's flags, and implements Redis 7's string and keyspace
//! commands closely enough for redis-cli, redis-benchmark and the common
//! client libraries to work unchanged. Every key is a string, so WRONGTYPE
//! never arises; there is one database (SELECT 0).
//!
//! # Layout
//! - [`frame`]: RESP2/RESP3 values, a complete-check and a parser;
//!   [`request`]: how a request (multibulk or inline) is framed, with
//!   Redis's protocol errors; [`reply`]: replies written straight into the
//!   output buffer; [`parse`]: a command's arguments.
//! - [`connection`]: the per-client loop (pipelining, back-pressure,
//!   `appendfsync always`); [`commit`]: group commit across connections
//!   for `appendfsync always`; [`server`]: listeners, maxclients,
//!   protected mode, the cron task, clean shutdown; [`shutdown`]: the
//!   signal; [`fd_limit`]: the open files limit and maxclients.
//! - [`cmd`]: the command table and one file per command group;
//!   [`store`]: the engine plus per-key write locks and versions;
//!   [`kv`]: the keyspace as a command sees it, directly or under an
//!   EXEC's overlay; [`clients`]: the client registry.
//! - [`config`]: flags, config files and CONFIG GET/SET; [`log`]: a
//!   redis-style logger; [`glob`]: KEYS / SCAN MATCH patterns; [`num`]:
//!   Redis's integer parsing; [`long_double`]: INCRBYFLOAT's x87 `long
//!   double` arithmetic.
//!
//! # Durability
//! `--appendfsync always`: no reply acknowledging a write leaves before an
//! fdatasync covering that write has returned. `everysec` and `no`: the
//! engine's background flush, which makes writes durable within about
//! 100 ms. Either way SIGTERM, SIGINT and SHUTDOWN close the store
//! cleanly, so every acknowledged write survives a clean stop; one whose
//! first sync fails (a full disk) is refused and the server keeps running
//! (SHUTDOWN FORCE exits anyway).

#![warn(missing_docs)]

pub mod clients;
pub mod cmd;
pub mod commit;
pub mod config;
pub mod connection;
pub mod error;
pub mod event_loop;
pub mod fd_limit;
pub mod frame;
#[doc(hidden)]
pub mod fuzzing;
pub mod glob;
pub mod kv;
pub mod log;
pub mod long_double;
pub mod num;
pub mod parse;
pub mod reply;
pub mod request;
pub mod server;
pub mod shutdown;
pub mod stats;
pub mod store;
pub mod supervise;

/// The Redis version whose command set and replies the server follows,
/// reported by HELLO and INFO (`redis_version`) so that clients which
/// check it enable what they should.
pub const REDIS_VERSION: &str = "7.0.0";
