//! The command table and dispatch. Each command is a function that reads
//! its arguments, runs against the store, and writes its reply; the files
//! of this module group them as Redis's documentation does.
//!
//! Dispatch follows Redis's order: unknown command, then arity, then
//! authentication (a refusal marks a MULTI transaction failed), then,
//! after MULTI, queuing; else the command itself, which validates its
//! options before it touches the store.

use std::cell::RefCell;
use std::time::Instant;

use crate::connection::Session;
use crate::error::{CmdError, CmdResult};
use crate::kv::{Kv, Overlay};
use crate::parse::{Args, is_name};
use crate::reply::Reply;
use crate::server::Shared;

mod admin;
mod bitmap;
mod client;
mod command;
mod conn;
mod docs;
mod keys;
mod lcs;
pub mod multi;
mod string;

/// What a command runs with.
pub struct Ctx<'a> {
    /// Server-wide state.
    pub shared: &'a Shared,
    /// The client's state.
    pub session: &'a mut Session,
    /// Where the reply goes.
    pub out: &'a mut Reply,
    /// The running EXEC's writes, inside EXEC.
    pub tx: Option<&'a RefCell<Overlay>>,
}

impl<'a> Ctx<'a> {
    fn fail(&mut self, e: &CmdError) {
        let line = e.line();
        self.session.local.error(&line);
        self.out.error(&line);
    }

    /// A refusal before the command runs: the error, and a MULTI
    /// transaction marked failed.
    fn refuse(&mut self, e: &CmdError) {
        self.fail(e);
        if let Some(multi) = &mut self.session.multi {
            multi.fail();
        }
    }

    /// The keyspace the command reads and writes.
    pub fn kv(&self) -> Kv<'a> {
        Kv::new(&self.shared.store, self.tx)
    }
}

/// A command's implementation.
pub type Handler = fn(&mut Ctx<'_>, &Args<'_>) -> CmdResult;

/// Command flags, as COMMAND INFO reports them.
pub mod flag {
    /// Writes the keyspace.
    pub const WRITE: u16 = 1;
    /// Only reads.
    pub const READONLY: u16 = 1 << 1;
    /// May grow memory.
    pub const DENYOOM: u16 = 1 << 2;
    /// Administrative.
    pub const ADMIN: u16 = 1 << 3;
    /// Not for scripts.
    pub const NOSCRIPT: u16 = 1 << 4;
    /// Allowed while loading.
    pub const LOADING: u16 = 1 << 5;
    /// Allowed on a stale replica.
    pub const STALE: u16 = 1 << 6;
    /// O(1) or O(log n).
    pub const FAST: u16 = 1 << 7;
    /// Allowed before AUTH.
    pub const NO_AUTH: u16 = 1 << 8;
    /// Runs at once after MULTI instead of being queued (not reported).
    pub const NO_QUEUE: u16 = 1 << 9;
    /// Reads or writes every key: an EXEC holding it locks every stripe
    /// (not reported).
    pub const KEYSPACE: u16 = 1 << 10;
    /// Refused after MULTI ("Command not allowed inside a transaction"),
    /// which then fails the transaction: SAVE and SHUTDOWN, as Redis 7.
    pub const NO_MULTI: u16 = 1 << 11;
    /// Kept out of Redis's slow log (reported only).
    pub const SKIP_SLOWLOG: u16 = 1 << 12;
    /// Refused by Redis while it loads a replica's data in the background
    /// (reported only).
    pub const NO_ASYNC_LOADING: u16 = 1 << 13;
    /// Allowed by Redis while a script runs too long (reported only).
    pub const ALLOW_BUSY: u16 = 1 << 14;

    /// The names of the flags set in `f`, in Redis's order.
    pub fn names(f: u16) -> Vec<&'static str> {
        [
            (WRITE, "write"),
            (READONLY, "readonly"),
            (DENYOOM, "denyoom"),
            (ADMIN, "admin"),
            (NOSCRIPT, "noscript"),
            (LOADING, "loading"),
            (STALE, "stale"),
            (SKIP_SLOWLOG, "skip_slowlog"),
            (FAST, "fast"),
            (NO_AUTH, "no_auth"),
            (NO_ASYNC_LOADING, "no_async_loading"),
            (NO_MULTI, "no_multi"),
            (ALLOW_BUSY, "allow_busy"),
        ]
        .into_iter()
        .filter(|(bit, _)| f & bit != 0)
        .map(|(_, name)| name)
        .collect()
    }
}

use flag::*;

/// One command: what COMMAND reports, and its handler.
pub struct Spec {
    /// Lower-case name.
    pub name: &'static str,
    /// Redis arity: `n` exactly `n` arguments (name included), `-n` at
    /// least `n`.
    pub arity: i32,
    /// [`flag`] bits.
    pub flags: u16,
    /// First key, last key (negative: from the end), step.
    pub keys: (i32, i32, i32),
    /// Documentation group.
    pub group: &'static str,
    /// Redis version that introduced it.
    pub since: &'static str,
    /// One-line summary.
    pub summary: &'static str,
    /// The implementation.
    pub run: Handler,
}

// One row of the table: its columns are its arguments.
#[allow(clippy::too_many_arguments)]
const fn spec(
    name: &'static str,
    arity: i32,
    flags: u16,
    keys: (i32, i32, i32),
    group: &'static str,
    since: &'static str,
    summary: &'static str,
    run: Handler,
) -> Spec {
    Spec {
        name,
        arity,
        flags,
        keys,
        group,
        since,
        summary,
        run,
    }
}

const NONE: (i32, i32, i32) = (0, 0, 0);
const ONE: (i32, i32, i32) = (1, 1, 1);
const ALL: (i32, i32, i32) = (1, -1, 1);
const PAIRS: (i32, i32, i32) = (1, -1, 2);

/// Every command, sorted by name (for binary search).
pub static COMMANDS: &[Spec] = &[
    spec(
        "append",
        3,
        WRITE | DENYOOM | FAST,
        ONE,
        "string",
        "2.0.0",
        "Appends a string to the value of a key. Creates the key if it doesn't exist.",
        string::append,
    ),
    spec(
        "auth",
        -2,
        NOSCRIPT | LOADING | STALE | FAST | NO_AUTH | ALLOW_BUSY,
        NONE,
        "connection",
        "1.0.0",
        "Authenticates the connection.",
        conn::auth,
    ),
    spec(
        "bgrewriteaof",
        1,
        ADMIN | NOSCRIPT | NO_ASYNC_LOADING,
        NONE,
        "server",
        "1.0.0",
        "Makes every acknowledged write durable (emberkv has no AOF to rewrite).",
        admin::bgrewriteaof,
    ),
    spec(
        "bgsave",
        -1,
        ADMIN | NOSCRIPT | NO_ASYNC_LOADING,
        NONE,
        "server",
        "1.0.0",
        "Makes every acknowledged write durable (emberkv has no snapshot to fork).",
        admin::bgsave,
    ),
    spec(
        "bitcount",
        -2,
        READONLY,
        ONE,
        "bitmap",
        "2.6.0",
        "Counts the number of set bits (population counting) in a string.",
        bitmap::bitcount,
    ),
    spec(
        "bitfield",
        -2,
        WRITE | DENYOOM,
        ONE,
        "bitmap",
        "3.2.0",
        "Performs arbitrary bitfield integer operations on strings.",
        bitmap::bitfield,
    ),
    spec(
        "bitfield_ro",
        -2,
        READONLY | FAST,
        ONE,
        "bitmap",
        "6.0.0",
        "Performs arbitrary read-only bitfield integer operations on strings.",
        bitmap::bitfield_ro,
    ),
    spec(
        "bitop",
        -4,
        WRITE | DENYOOM,
        (2, -1, 1),
        "bitmap",
        "2.6.0",
        "Performs bitwise operations on multiple strings, and stores the result.",
        bitmap::bitop,
    ),
    spec(
        "bitpos",
        -3,
        READONLY,
        ONE,
        "bitmap",
        "2.8.7",
        "Finds the first set (1) or clear (0) bit in a string.",
        bitmap::bitpos,
    ),
    spec(
        "client",
        -2,
        0,
        NONE,
        "connection",
        "2.4.0",
        "A container for client connection commands.",
        client::client,
    ),
    spec(
        "command",
        -1,
        LOADING | STALE,
        NONE,
        "server",
        "2.8.13",
        "Returns detailed information about all commands.",
        command::command,
    ),
    spec(
        "config",
        -2,
        0,
        NONE,
        "server",
        "2.0.0",
        "A container for server configuration commands.",
        admin::config,
    ),
    spec(
        "copy",
        -3,
        WRITE | DENYOOM,
        (1, 2, 1),
        "generic",
        "6.2.0",
        "Copies the value of a key to a new key.",
        keys::copy,
    ),
    spec(
        "dbsize",
        1,
        READONLY | FAST | KEYSPACE,
        NONE,
        "server",
        "1.0.0",
        "Returns the number of keys in the database.",
        keys::dbsize,
    ),
    spec(
        "decr",
        2,
        WRITE | DENYOOM | FAST,
        ONE,
        "string",
        "1.0.0",
        "Decrements the integer value of a key by one. Uses 0 as initial value if the key doesn't exist.",
        string::decr,
    ),
    spec(
        "decrby",
        3,
        WRITE | DENYOOM | FAST,
        ONE,
        "string",
        "1.0.0",
        "Decrements a number from the integer value of a key. Uses 0 as initial value if the key doesn't exist.",
        string::decrby,
    ),
    spec(
        "del",
        -2,
        WRITE,
        ALL,
        "generic",
        "1.0.0",
        "Deletes one or more keys.",
        keys::del,
    ),
    spec(
        "discard",
        1,
        NOSCRIPT | LOADING | STALE | FAST | NO_QUEUE | ALLOW_BUSY,
        NONE,
        "transactions",
        "2.0.0",
        "Discards a transaction.",
        multi::discard,
    ),
    spec(
        "echo",
        2,
        LOADING | STALE | FAST,
        NONE,
        "connection",
        "1.0.0",
        "Returns the given string.",
        conn::echo,
    ),
    spec(
        "exec",
        1,
        NOSCRIPT | LOADING | STALE | SKIP_SLOWLOG | NO_QUEUE,
        NONE,
        "transactions",
        "1.2.0",
        "Executes all commands in a transaction.",
        multi::exec,
    ),
    spec(
        "exists",
        -2,
        READONLY | FAST,
        ALL,
        "generic",
        "1.0.0",
        "Determines whether one or more keys exist.",
        keys::exists,
    ),
    spec(
        "expire",
        -3,
        WRITE | FAST,
        ONE,
        "generic",
        "1.0.0",
        "Sets the expiration time of a key in seconds.",
        keys::expire,
    ),
    spec(
        "expireat",
        -3,
        WRITE | FAST,
        ONE,
        "generic",
        "1.2.0",
        "Sets the expiration time of a key to a Unix timestamp.",
        keys::expireat,
    ),
    spec(
        "expiretime",
        2,
        READONLY | FAST,
        ONE,
        "generic",
        "7.0.0",
        "Returns the expiration time of a key as a Unix timestamp.",
        keys::expiretime,
    ),
    spec(
        "flushall",
        -1,
        WRITE | KEYSPACE,
        NONE,
        "server",
        "1.0.0",
        "Removes all keys from all databases.",
        keys::flushall,
    ),
    spec(
        "flushdb",
        -1,
        WRITE | KEYSPACE,
        NONE,
        "server",
        "1.0.0",
        "Remove all keys from the current database.",
        keys::flushdb,
    ),
    spec(
        "get",
        2,
        READONLY | FAST,
        ONE,
        "string",
        "1.0.0",
        "Returns the string value of a key.",
        string::get,
    ),
    spec(
        "getbit",
        3,
        READONLY | FAST,
        ONE,
        "bitmap",
        "2.2.0",
        "Returns a bit value by offset.",
        bitmap::getbit,
    ),
    spec(
        "getdel",
        2,
        WRITE | FAST,
        ONE,
        "string",
        "6.2.0",
        "Returns the string value of a key after deleting the key.",
        string::getdel,
    ),
    spec(
        "getex",
        -2,
        WRITE | FAST,
        ONE,
        "string",
        "6.2.0",
        "Returns the string value of a key after setting its expiration time.",
        string::getex,
    ),
    spec(
        "getrange",
        4,
        READONLY,
        ONE,
        "string",
        "2.4.0",
        "Returns a substring of the string stored at a key.",
        string::getrange,
    ),
    spec(
        "getset",
        3,
        WRITE | DENYOOM | FAST,
        ONE,
        "string",
        "1.0.0",
        "Returns the previous string value of a key after setting it to a new value.",
        string::getset,
    ),
    spec(
        "hello",
        -1,
        NOSCRIPT | LOADING | STALE | FAST | NO_AUTH | ALLOW_BUSY,
        NONE,
        "connection",
        "6.0.0",
        "Handshakes with the Redis server.",
        conn::hello,
    ),
    spec(
        "incr",
        2,
        WRITE | DENYOOM | FAST,
        ONE,
        "string",
        "1.0.0",
        "Increments the integer value of a key by one. Uses 0 as initial value if the key doesn't exist.",
        string::incr,
    ),
    spec(
        "incrby",
        3,
        WRITE | DENYOOM | FAST,
        ONE,
        "string",
        "1.0.0",
        "Increments the integer value of a key by a number. Uses 0 as initial value if the key doesn't exist.",
        string::incrby,
    ),
    spec(
        "incrbyfloat",
        3,
        WRITE | DENYOOM | FAST,
        ONE,
        "string",
        "2.6.0",
        "Increment the floating point value of a key by a number. Uses 0 as initial value if the key doesn't exist.",
        string::incrbyfloat,
    ),
    spec(
        "info",
        -1,
        LOADING | STALE,
        NONE,
        "server",
        "1.0.0",
        "Returns information and statistics about the server.",
        admin::info,
    ),
    spec(
        "keys",
        2,
        READONLY | KEYSPACE,
        NONE,
        "generic",
        "1.0.0",
        "Returns all key names that match a pattern.",
        keys::keys,
    ),
    spec(
        "lastsave",
        1,
        LOADING | STALE | FAST,
        NONE,
        "server",
        "1.0.0",
        "Returns the Unix timestamp of the last successful save to disk.",
        admin::lastsave,
    ),
    spec(
        "lcs",
        -3,
        READONLY,
        (1, 2, 1),
        "string",
        "7.0.0",
        "Finds the longest common substring.",
        lcs::lcs,
    ),
    spec(
        "mget",
        -2,
        READONLY | FAST,
        ALL,
        "string",
        "1.0.0",
        "Atomically returns the string values of one or more keys.",
        string::mget,
    ),
    spec(
        "mset",
        -3,
        WRITE | DENYOOM,
        PAIRS,
        "string",
        "1.0.1",
        "Atomically creates or modifies the string values of one or more keys.",
        string::mset,
    ),
    spec(
        "msetnx",
        -3,
        WRITE | DENYOOM,
        PAIRS,
        "string",
        "1.0.1",
        "Atomically modifies the string values of one or more keys only when all keys don't exist.",
        string::msetnx,
    ),
    spec(
        "multi",
        1,
        NOSCRIPT | LOADING | STALE | FAST | NO_QUEUE | ALLOW_BUSY,
        NONE,
        "transactions",
        "1.2.0",
        "Starts a transaction.",
        multi::multi,
    ),
    spec(
        "persist",
        2,
        WRITE | FAST,
        ONE,
        "generic",
        "2.2.0",
        "Removes the expiration time of a key.",
        keys::persist,
    ),
    spec(
        "pexpire",
        -3,
        WRITE | FAST,
        ONE,
        "generic",
        "2.6.0",
        "Sets the expiration time of a key in milliseconds.",
        keys::pexpire,
    ),
    spec(
        "pexpireat",
        -3,
        WRITE | FAST,
        ONE,
        "generic",
        "2.6.0",
        "Sets the expiration time of a key to a Unix milliseconds timestamp.",
        keys::pexpireat,
    ),
    spec(
        "pexpiretime",
        2,
        READONLY | FAST,
        ONE,
        "generic",
        "7.0.0",
        "Returns the expiration time of a key as a Unix milliseconds timestamp.",
        keys::pexpiretime,
    ),
    spec(
        "ping",
        -1,
        FAST,
        NONE,
        "connection",
        "1.0.0",
        "Returns the server's liveliness response.",
        conn::ping,
    ),
    spec(
        "psetex",
        4,
        WRITE | DENYOOM,
        ONE,
        "string",
        "2.6.0",
        "Sets both string value and expiration time in milliseconds of a key. The key is created if it doesn't exist.",
        string::psetex,
    ),
    spec(
        "pttl",
        2,
        READONLY | FAST,
        ONE,
        "generic",
        "2.6.0",
        "Returns the expiration time in milliseconds of a key.",
        keys::pttl,
    ),
    spec(
        "quit",
        -1,
        NOSCRIPT | LOADING | STALE | FAST | NO_AUTH | NO_QUEUE | ALLOW_BUSY,
        NONE,
        "connection",
        "1.0.0",
        "Closes the connection.",
        conn::quit,
    ),
    spec(
        "randomkey",
        1,
        READONLY | KEYSPACE,
        NONE,
        "generic",
        "1.0.0",
        "Returns a random key name from the database.",
        keys::randomkey,
    ),
    spec(
        "rename",
        3,
        WRITE,
        (1, 2, 1),
        "generic",
        "1.0.0",
        "Renames a key and overwrites the destination.",
        keys::rename,
    ),
    spec(
        "renamenx",
        3,
        WRITE | FAST,
        (1, 2, 1),
        "generic",
        "1.0.0",
        "Renames a key only when the target key name doesn't exist.",
        keys::renamenx,
    ),
    spec(
        "reset",
        1,
        NOSCRIPT | LOADING | STALE | FAST | NO_AUTH | NO_QUEUE | ALLOW_BUSY,
        NONE,
        "connection",
        "6.2.0",
        "Resets the connection: leaves MULTI, unwatches, clears the name, back to RESP2 and to the authentication of a new connection.",
        conn::reset,
    ),
    spec(
        "save",
        1,
        ADMIN | NOSCRIPT | NO_ASYNC_LOADING | NO_MULTI,
        NONE,
        "server",
        "1.0.0",
        "Synchronously makes every acknowledged write durable.",
        admin::save,
    ),
    spec(
        "scan",
        -2,
        READONLY | KEYSPACE,
        NONE,
        "generic",
        "2.8.0",
        "Iterates over the key names in the database.",
        keys::scan,
    ),
    spec(
        "select",
        2,
        LOADING | STALE | FAST,
        NONE,
        "connection",
        "1.0.0",
        "Changes the selected database (only database 0 exists).",
        conn::select,
    ),
    spec(
        "set",
        -3,
        WRITE | DENYOOM,
        ONE,
        "string",
        "1.0.0",
        "Sets the string value of a key, ignoring its type. The key is created if it doesn't exist.",
        string::set,
    ),
    spec(
        "setbit",
        4,
        WRITE | DENYOOM,
        ONE,
        "bitmap",
        "2.2.0",
        "Sets or clears the bit at offset of the string value. Creates the key if it doesn't exist.",
        bitmap::setbit,
    ),
    spec(
        "setex",
        4,
        WRITE | DENYOOM,
        ONE,
        "string",
        "2.0.0",
        "Sets the string value and expiration time of a key. Creates the key if it doesn't exist.",
        string::setex,
    ),
    spec(
        "setnx",
        3,
        WRITE | DENYOOM | FAST,
        ONE,
        "string",
        "1.0.0",
        "Set the string value of a key only when the key doesn't exist.",
        string::setnx,
    ),
    spec(
        "setrange",
        4,
        WRITE | DENYOOM,
        ONE,
        "string",
        "2.2.0",
        "Overwrites a part of a string value with another by an offset. Creates the key if it doesn't exist.",
        string::setrange,
    ),
    spec(
        "shutdown",
        -1,
        ADMIN | NOSCRIPT | LOADING | STALE | NO_MULTI | ALLOW_BUSY,
        NONE,
        "server",
        "1.0.0",
        "Closes the store cleanly and shuts down the server.",
        admin::shutdown,
    ),
    spec(
        "strlen",
        2,
        READONLY | FAST,
        ONE,
        "string",
        "2.2.0",
        "Returns the length of a string value.",
        string::strlen,
    ),
    spec(
        "substr",
        4,
        READONLY,
        ONE,
        "string",
        "1.0.0",
        "Returns a substring from a string value.",
        string::getrange,
    ),
    spec(
        "time",
        1,
        LOADING | STALE | FAST,
        NONE,
        "server",
        "2.6.0",
        "Returns the server time.",
        admin::time,
    ),
    spec(
        "touch",
        -2,
        READONLY | FAST,
        ALL,
        "generic",
        "3.2.1",
        "Returns the number of existing keys out of those specified after updating the time they were last accessed.",
        keys::touch,
    ),
    spec(
        "ttl",
        2,
        READONLY | FAST,
        ONE,
        "generic",
        "1.0.0",
        "Returns the expiration time in seconds of a key.",
        keys::ttl,
    ),
    spec(
        "type",
        2,
        READONLY | FAST,
        ONE,
        "generic",
        "1.0.0",
        "Determines the type of value stored at a key.",
        keys::type_,
    ),
    spec(
        "unlink",
        -2,
        WRITE | FAST,
        ALL,
        "generic",
        "4.0.0",
        "Asynchronously deletes one or more keys.",
        keys::del,
    ),
    spec(
        "unwatch",
        1,
        NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY,
        NONE,
        "transactions",
        "2.2.0",
        "Forgets about watched keys of a transaction.",
        multi::unwatch,
    ),
    spec(
        "watch",
        -2,
        NOSCRIPT | LOADING | STALE | FAST | NO_QUEUE | ALLOW_BUSY,
        ALL,
        "transactions",
        "2.2.0",
        "Monitors changes to keys to determine the execution of a transaction.",
        multi::watch,
    ),
];

/// The command named `name` (any case) and its index in [`COMMANDS`].
pub fn lookup(name: &[u8]) -> Option<(usize, &'static Spec)> {
    let mut buf = [0u8; 16];
    if name.len() > buf.len() {
        return None;
    }
    let lower = &mut buf[..name.len()];
    lower.copy_from_slice(name);
    lower.make_ascii_lowercase();
    let i = COMMANDS
        .binary_search_by(|s| s.name.as_bytes().cmp(lower))
        .ok()?;
    Some((i, &COMMANDS[i]))
}

fn arity_ok(arity: i32, argc: usize) -> bool {
    if arity >= 0 {
        argc == arity as usize
    } else {
        argc >= arity.unsigned_abs() as usize
    }
}

/// Runs one command and writes its reply; after MULTI, queues it.
pub fn dispatch(ctx: &mut Ctx<'_>, args: &Args<'_>) {
    let name = args.get(0);
    let Some((i, spec)) = lookup(name) else {
        ctx.refuse(&CmdError::unknown_command(name, args.from(1)));
        return;
    };
    if !arity_ok(spec.arity, args.len()) {
        ctx.session.local.rejected(i);
        reject(ctx, spec, &CmdError::WrongArity(spec.name.to_string()));
        return;
    }
    if !ctx.session.authenticated(&ctx.shared.live) && spec.flags & NO_AUTH == 0 {
        ctx.session.local.rejected(i);
        reject(ctx, spec, &CmdError::NoAuth);
        return;
    }
    if ctx.session.multi.is_some() && spec.flags & NO_MULTI != 0 {
        ctx.session.local.rejected(i);
        ctx.refuse(&CmdError::err("Command not allowed inside a transaction"));
        return;
    }
    if ctx.session.multi.is_some() && spec.flags & NO_QUEUE == 0 {
        // Redis looks a container's subcommand up, and checks its arity,
        // before it queues it: a refusal fails the transaction. A container
        // named alone (COMMAND, whose arity allows it) is queued as it is:
        // looking for its subcommand panicked the connection (found by the
        // `commands` fuzz target, 2026-12-07).
        if !subcommands(spec.name).is_empty()
            && args.len() > 1
            && let Err((e, sub)) = find_sub(args, spec.name)
        {
            if let Some(at) = sub {
                ctx.session.local.rejected(sub_bases()[i] + at);
            }
            ctx.refuse(&e);
            return;
        }
        if let Err(e) = multi::queue(ctx, i, args) {
            ctx.refuse(&e);
        }
        return;
    }
    execute(ctx, i, args);
}

/// Refuses a command before it runs (see `Ctx::refuse`); a refused EXEC
/// discards the transaction, if any, forgets the watched keys and
/// replies EXECABORT with the reason, in MULTI or not, as Redis 7's
/// `execCommandAbort` (in MULTI it left the client there, so the commands
/// after it were queued).
fn reject(ctx: &mut Ctx<'_>, spec: &Spec, e: &CmdError) {
    if spec.name == "exec" {
        let abort = multi::abort(ctx, e);
        ctx.fail(&abort);
    } else {
        ctx.refuse(e);
    }
}

/// Runs command `i` of [`COMMANDS`], its name, arity and authentication
/// checked, and writes its reply. Inside EXEC the client's last command
/// (CLIENT LIST) stays EXEC.
#[inline]
fn execute(ctx: &mut Ctx<'_>, i: usize, args: &Args<'_>) {
    let spec = &COMMANDS[i];
    if ctx.tx.is_none() {
        ctx.session
            .handle
            .last_cmd
            .store(i + 1, std::sync::atomic::Ordering::Relaxed);
    }
    ctx.session.local.commands += 1;
    ctx.session.ran_sub = None;
    let started = Instant::now();
    let result = (spec.run)(ctx, args);
    let nanos = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
    count(ctx, i, nanos, result.is_err());
    match result {
        Ok(()) => {
            if spec.flags & WRITE != 0 {
                ctx.session.dirty = true;
                ctx.session.local.changes += 1;
            }
        }
        Err(e) => ctx.fail(&e),
    }
}

/// Counts a run of command `i` for INFO commandstats, as Redis 7 does: a
/// container command (CLIENT, COMMAND, CONFIG) under the subcommand it ran
/// (`config|get`), refused if the subcommand's arity was wrong, and not
/// at all when the subcommand is unknown (Redis finds no command then);
/// and, while `latency-tracking` is on, its run time for INFO
/// latencystats (runs that failed too, not refusals, as Redis).
fn count(ctx: &mut Ctx<'_>, i: usize, nanos: u64, failed: bool) {
    let local = &mut ctx.session.local;
    let bases = sub_bases();
    let slot = match ctx.session.ran_sub.take() {
        Some((sub, true)) => {
            local.rejected(bases[i] + sub);
            return;
        }
        Some((sub, false)) => bases[i] + sub,
        None if bases[i] == bases[i + 1] => i,
        None => return,
    };
    local.ran(slot, nanos, failed);
    if ctx
        .shared
        .live
        .latency_tracking
        .load(std::sync::atomic::Ordering::Relaxed)
    {
        local.timed(slot, nanos);
    }
}

/// INFO commandstats' counters have one slot per command (its index in
/// [`COMMANDS`]), then one per subcommand of each container command. For
/// command `i`, entry `i` is the first slot of its subcommands and entry
/// `i + 1` the end of them (equal for a command without subcommands);
/// the last entry is the number of slots.
fn sub_bases() -> &'static [usize] {
    static BASES: std::sync::OnceLock<Vec<usize>> = std::sync::OnceLock::new();
    BASES.get_or_init(|| {
        let mut bases = vec![COMMANDS.len()];
        for spec in COMMANDS {
            bases.push(bases[bases.len() - 1] + subcommands(spec.name).len());
        }
        bases
    })
}

/// Slots of INFO commandstats' counters: one per command, and one per
/// subcommand of a container command.
pub fn stat_slots() -> usize {
    sub_bases()[COMMANDS.len()]
}

/// The name INFO commandstats gives slot `slot` (`get`, `config|get`);
/// empty past the last.
pub fn stat_name(slot: usize) -> String {
    if let Some(spec) = COMMANDS.get(slot) {
        return spec.name.to_string();
    }
    // The last command whose subcommands start at or before `slot`: the
    // container whose range holds it.
    let bases = sub_bases();
    let i = bases.partition_point(|&base| base <= slot) - 1;
    COMMANDS
        .get(i)
        .and_then(|spec| {
            let sub = subcommands(spec.name).get(slot - bases[i])?;
            Some(format!("{}|{}", spec.name, sub.name))
        })
        .unwrap_or_default()
}

/// A subcommand of a container command (CLIENT, CONFIG, COMMAND).
pub struct Sub {
    /// Lower-case name.
    pub name: &'static str,
    /// One-line summary, as COMMAND DOCS gives it.
    pub summary: &'static str,
    /// Redis version that introduced it.
    pub since: &'static str,
    /// Arity, counting the container and the subcommand.
    pub arity: i32,
    /// [`flag`] bits, as COMMAND INFO reports them (the container's are
    /// the ones dispatch goes by).
    pub flags: u16,
    /// The implementation.
    pub run: Handler,
}

/// The subcommands of container command `name` (none for others).
fn subcommands(name: &str) -> &'static [Sub] {
    match name {
        "client" => client::SUBS,
        "command" => command::SUBS,
        "config" => admin::CONFIG_SUBS,
        _ => &[],
    }
}

/// The subcommand of container command `container` (CLIENT, COMMAND,
/// CONFIG, by its table name) that `name` names, and its index there;
/// every byte compared ([`is_name`]).
fn sub_named(container: &str, name: &[u8]) -> Option<(usize, &'static Sub)> {
    subcommands(container)
        .iter()
        .enumerate()
        .find(|(_, s)| is_name(name, s.name))
}

/// The subcommand of container command `container` (by its table name)
/// that argument 1 names, and its index in [`subcommands`], its arity
/// checked. A refusal comes with the subcommand's index when there is
/// one (wrong arity), for INFO commandstats.
fn find_sub(
    args: &Args<'_>,
    container: &str,
) -> Result<(usize, &'static Sub), (CmdError, Option<usize>)> {
    let Some((at, sub)) = sub_named(container, args.get(1)) else {
        let e = CmdError::unknown_subcommand(args.get(1), container_name(container));
        return Err((e, None));
    };
    if !arity_ok(sub.arity, args.len()) {
        let e = CmdError::WrongArity(format!("{container}|{}", sub.name));
        return Err((e, Some(at)));
    }
    Ok((at, sub))
}

/// A container command's name as its errors spell it.
fn container_name(name: &str) -> &'static str {
    match name {
        "client" => "CLIENT",
        "command" => "COMMAND",
        _ => "CONFIG",
    }
}

/// Runs the subcommand of container command `name` (CLIENT, COMMAND,
/// CONFIG) named by argument 1.
fn dispatch_sub(ctx: &mut Ctx<'_>, args: &Args<'_>, name: &str) -> CmdResult {
    let (at, sub) = match find_sub(args, name) {
        Ok(found) => found,
        Err((e, at)) => {
            if let Some(at) = at {
                ctx.session.ran_sub = Some((at, true));
            }
            return Err(e);
        }
    };
    ctx.session.ran_sub = Some((at, false));
    if ctx.tx.is_none() {
        *ctx.session.handle.last_sub.lock() = (container_name(name), sub.name);
    }
    (sub.run)(ctx, args)
}

/// Writes a HELP reply: one simple string per line.
fn help(ctx: &mut Ctx<'_>, lines: &[&str]) {
    ctx.out.array(lines.len());
    for line in lines {
        ctx.out.simple(line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every command and subcommand has a slot of its own, named as INFO
    /// commandstats names it.
    #[test]
    fn commandstats_slots_name_every_command_and_subcommand_once() {
        let names: Vec<String> = (0..stat_slots()).map(stat_name).collect();
        let mut unique = names.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), names.len());
        assert!(names.iter().all(|n| !n.is_empty()));
        let (config, _) = lookup(b"config").unwrap();
        let get = subcommands("config").iter().position(|s| s.name == "get");
        assert_eq!(stat_name(sub_bases()[config] + get.unwrap()), "config|get");
        assert!(names.contains(&"client|setname".to_string()));
        assert!(names.contains(&"get".to_string()));
        assert_eq!(stat_name(stat_slots()), "");
    }

    #[test]
    fn table_is_sorted_and_lookup_ignores_case() {
        for w in COMMANDS.windows(2) {
            assert!(w[0].name < w[1].name, "{} before {}", w[0].name, w[1].name);
        }
        assert_eq!(lookup(b"GET").map(|(_, s)| s.name), Some("get"));
        assert_eq!(
            lookup(b"IncrByFloat").map(|(_, s)| s.name),
            Some("incrbyfloat")
        );
        assert!(lookup(b"nope").is_none());
        assert!(lookup(&[b'a'; 40]).is_none());
    }

    #[test]
    fn arity_rules() {
        assert!(arity_ok(2, 2));
        assert!(!arity_ok(2, 3));
        assert!(arity_ok(-2, 2));
        assert!(arity_ok(-2, 5));
        assert!(!arity_ok(-3, 2));
    }

    #[test]
    fn flag_names() {
        assert_eq!(flag::names(WRITE | FAST), vec!["write", "fast"]);
    }
}
