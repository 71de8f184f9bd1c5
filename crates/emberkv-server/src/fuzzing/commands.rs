//! The body of the `commands` fuzz target: a short script of commands run
//! through the server's own dispatcher over a fresh store, with every
//! reply checked as RESP and the string commands checked against a model.

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::OnceLock;
use std::sync::atomic::Ordering;

use bytes::Bytes;

use crate::clients::Transport;
use crate::cmd::{self, COMMANDS, Ctx};
use crate::config::Config;
use crate::connection::Session;
use crate::frame::{Frame, Limits};
use crate::parse::Args;
use crate::reply::Reply;
use crate::request::c_str;
use crate::server::Shared;
use crate::store::Store;

/// Commands run per input, at most.
const MAX_COMMANDS: usize = 24;
/// Arguments per command (the name included), at most.
const MAX_ARGS: usize = 16;
/// Bytes per argument, at most.
const MAX_ARG: usize = 64;
/// SETRANGE offsets (bytes) between this and 2^32 are taken modulo it.
const MAX_BYTE_OFFSET: u64 = 512;
/// SETBIT and BITFIELD bit offsets between this and 2^32 are taken
/// modulo it (`#n` offsets: `n` modulo a 64th of it).
const MAX_BIT_OFFSET: u64 = 4096;
/// The hot tier of the store (the smallest `--hot-bytes`).
const HOT_BYTES: usize = 4 << 20;
/// emberkv's largest value ([`emberkv::MAX_VALUE_BYTES`]).
const MAX_VALUE: u64 = emberkv::MAX_VALUE_BYTES as u64;

const NOT_INTEGER: &str = "ERR value is not an integer or out of range";
const SYNTAX: &str = "ERR syntax error";
const TOO_LONG: &str = "ERR string exceeds maximum allowed size (proto-max-bulk-len)";

/// Runs a script of commands, decoded from arbitrary bytes, through
/// [`cmd::dispatch`] (what a connection runs for each parsed command)
/// with a client session registered as the server registers one, and
/// checks:
/// - no command panics;
/// - each command writes exactly one reply (none only for SHUTDOWN),
///   which [`Frame::parse`] reads whole; on a RESP2 connection it uses
///   RESP2's types only; its RESP3 encoding parses back to the same
///   encoding and its RESP2 encoding parses;
/// - the modelled commands reply as Redis 7.0 does, by a model of the
///   keyspace (key to value bytes), and after each of them every key of
///   the model holds the model's value with no expiry, the command's keys
///   the model lacks are absent, and the store counts no other key
///   ([`emberkv::Db::len`]) but volatile or lapsed ones (below).
///
/// The input: a flags byte (bit 0: HELLO 3 first), then commands split at
/// `\n`, arguments at ` `. A one-byte name of 0x80 or more names the
/// command of that index (modulo their number) in [`COMMANDS`]. A key
/// argument (by the command's key positions in [`COMMANDS`]) of one byte
/// is folded onto `a`, `b`, `c` or `d`, so that commands meet on keys.
/// The work is bounded: `MAX_COMMANDS` commands of `MAX_ARGS`
/// arguments of `MAX_ARG` bytes; large SETRANGE, SETBIT and BITFIELD
/// offsets are folded below a few KiB (those of 2^32 or more, which fail,
/// are kept).
///
/// Modelled (Redis 7.0 semantics, the arity and argument errors
/// included): GET, SET (NX, XX, GET, KEEPTTL; an expiry option makes it
/// unmodelled), SETNX, GETSET, GETDEL, MGET, MSET, MSETNX, DEL, UNLINK,
/// EXISTS, TOUCH, APPEND, STRLEN, GETRANGE, SUBSTR, SETRANGE, INCR, DECR,
/// INCRBY, DECRBY, RENAME, RENAMENX, COPY (without DB), DBSIZE, FLUSHDB,
/// TYPE, TTL, PTTL, EXPIRETIME, PEXPIRETIME, PERSIST, PING, ECHO. Every
/// other command (expiry, SCAN, CONFIG, INCRBYFLOAT, the bit commands,
/// CLIENT, MULTI/EXEC, ...) runs unchecked but for its reply's RESP, and
/// so does a modelled command inside MULTI, on a connection that is not
/// authenticated, or touching a key with an expiry (which may lapse at
/// any moment): after it the model is reloaded from the store (so that
/// command itself is not checked against the model), each key with an
/// expiry marked volatile, and the keys the store counts beyond those it
/// holds noted as lapsed (an expired key counts until a write touches
/// it). Volatile keys are left out of the comparison, modelled commands
/// touching them are not compared, and DBSIZE is not compared while there
/// are volatile or lapsed keys, until a reload finds none or FLUSHDB.
///
/// A script stops at SHUTDOWN, QUIT or a CLIENT KILL of itself, as the
/// connection closes.
///
/// The server state is the process's: one store, opened at the first
/// input in a new directory under the temporary directory (opening and
/// closing a store took some 50 ms of every input in a debug build). Each
/// input starts from the default configuration and a FLUSHDB run by its
/// own client (checked as a modelled command), so that it starts from an
/// empty keyspace; only the engine's layout and the server's counters
/// carry over.
pub fn commands(data: &[u8]) {
    let Some((&flags, script)) = data.split_first() else {
        return;
    };
    let script = decode(script);
    let shared = shared();
    reset(shared);
    let mut client = Client::new(shared);
    let flushed = client.run(&[b"FLUSHDB".to_vec()]);
    assert!(flushed, "FLUSHDB closed the connection");
    if flags & 1 != 0 {
        client.run(&[b"HELLO".to_vec(), b"3".to_vec()]);
    }
    for args in &script {
        if !client.run(args) {
            break;
        }
    }
}

/// Splits the input into commands and arguments, within the bounds.
fn decode(data: &[u8]) -> Vec<Vec<Vec<u8>>> {
    data.split(|&b| b == b'\n')
        .take(MAX_COMMANDS)
        .map(|line| {
            let mut args: Vec<Vec<u8>> = line
                .split(|&b| b == b' ')
                .take(MAX_ARGS)
                .map(|a| a[..a.len().min(MAX_ARG)].to_vec())
                .collect();
            if let [b] = args[0][..]
                && b >= 0x80
            {
                let spec = &COMMANDS[usize::from(b - 0x80) % COMMANDS.len()];
                args[0] = spec.name.as_bytes().to_vec();
            }
            fold_keys(&mut args);
            bound_offsets(&mut args);
            args
        })
        .collect()
}

/// The indexes of `args`'s key arguments, by the key positions of its
/// command in [`COMMANDS`] (none for an unknown command).
fn key_positions(args: &[Vec<u8>]) -> impl Iterator<Item = usize> {
    let (first, last, step) = cmd::lookup(&args[0]).map_or((0, 0, 0), |(_, spec)| spec.keys);
    let n = args.len() as i32;
    let last = if last < 0 { n + last } else { last.min(n - 1) };
    // A command without keys (first 0), or unknown, yields none.
    let first = if first > 0 && step > 0 { first } else { n };
    (first..=last)
        .step_by(step.max(1) as usize)
        .map(|j| j as usize)
}

/// Folds one-byte key arguments onto `a` to `d`.
fn fold_keys(args: &mut [Vec<u8>]) {
    for j in key_positions(args).collect::<Vec<_>>() {
        if let [b] = args[j][..]
            && !(b'a'..=b'd').contains(&b)
        {
            args[j] = vec![b'a' + b % 4];
        }
    }
}

/// Folds the offsets that would make SETRANGE, SETBIT or BITFIELD build a
/// large value below a few KiB.
fn bound_offsets(args: &mut [Vec<u8>]) {
    let name = args[0].to_ascii_lowercase();
    let (from, to, max) = match &name[..] {
        b"setrange" => (2, 3, MAX_BYTE_OFFSET),
        b"setbit" => (2, 3, MAX_BIT_OFFSET),
        b"bitfield" => (2, args.len(), MAX_BIT_OFFSET),
        _ => return,
    };
    for arg in args.iter_mut().take(to).skip(from) {
        let (prefix, digits, max) = match arg.split_first() {
            Some((b'#', rest)) => ("#", rest, max / 64),
            _ => ("", &arg[..], max),
        };
        let Some(n) = std::str::from_utf8(digits)
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
        else {
            continue;
        };
        if n >= max && n < 1 << 32 {
            *arg = format!("{prefix}{}", n % max).into_bytes();
        }
    }
}

/// Prefix of the store directories, followed by the process id.
const DIR_PREFIX: &str = "emberkv-fuzz-commands-";

/// The process's server state, over a store in
/// `TMPDIR/emberkv-fuzz-commands-PID` (statics are never dropped, so the
/// directories of processes that have exited are removed here).
fn shared() -> &'static Shared {
    static SHARED: OnceLock<Shared> = OnceLock::new();
    SHARED.get_or_init(|| {
        let tmp = std::env::temp_dir();
        remove_stale_dirs(&tmp);
        let dir = tmp.join(format!("{DIR_PREFIX}{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create the store directory");
        let store = Store::open(&dir, HOT_BYTES).expect("a store in a new directory opens");
        Shared::new(Config::default(), store, 0)
    })
}

/// Removes the store directories of processes that no longer run.
fn remove_stale_dirs(tmp: &Path) {
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.strip_prefix(DIR_PREFIX)) else {
            continue;
        };
        if !Path::new("/proc").join(pid).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// Puts back what an input may have changed outside the keyspace: the
/// configuration (CONFIG SET) and the process's log level.
fn reset(shared: &Shared) {
    let default = Config::default();
    let mut config = shared.config.write();
    if config.maxclients != default.maxclients {
        shared.clients.resize(config.maxclients, default.maxclients);
    }
    crate::log::set_level(default.loglevel);
    shared.live.update(&default);
    *config = default;
}

/// One client: its session and output as a connection holds them, the
/// model of the keyspace, and the key arguments seen.
struct Client<'a> {
    shared: &'a Shared,
    session: Session,
    out: Reply,
    model: Model,
    /// Every key argument of the commands run so far: where the model
    /// looks for keys after a command it does not follow (listing every
    /// key of the store scans the whole index, which took most of the
    /// time of an input).
    seen: BTreeSet<Vec<u8>>,
}

impl<'a> Client<'a> {
    fn new(shared: &'a Shared) -> Client<'a> {
        let handle = shared.clients.register(
            "127.0.0.1:40000".into(),
            "127.0.0.1:6379".into(),
            -1,
            Transport::Tcp,
            None,
        );
        Client {
            shared,
            session: Session::new(handle, shared),
            out: Reply::new(),
            model: Model::default(),
            seen: BTreeSet::new(),
        }
    }

    /// Runs one command and checks its reply; returns whether the
    /// connection would go on.
    fn run(&mut self, args: &[Vec<u8>]) -> bool {
        let mut base = Vec::new();
        let mut ranges = Vec::with_capacity(args.len());
        for a in args {
            let start = base.len();
            base.extend_from_slice(a);
            ranges.push(start..base.len());
        }
        let keys: Vec<&Vec<u8>> = key_positions(args).map(|j| &args[j]).collect();
        self.seen.extend(keys.iter().map(|k| k.to_vec()));
        let max_bulk = self.shared.live.max_bulk.load(Ordering::Relaxed);
        let predicted = if self.session.multi.is_none() && self.session.authed {
            self.model.predict(args, max_bulk)
        } else {
            None
        };
        let mut ctx = Ctx {
            shared: self.shared,
            session: &mut self.session,
            out: &mut self.out,
            tx: None,
        };
        cmd::dispatch(&mut ctx, &Args::new(&base, &ranges));
        let reply = Bytes::copy_from_slice(self.out.pending());
        self.out.consume(reply.len());
        let shown = Shown(args);
        let frame = check_reply(&reply, self.out.resp3(), self.session.shutdown, &shown);
        match (predicted, frame) {
            (Some((expected, next)), Some(frame)) => {
                assert_eq!(frame, expected, "the reply to {shown}");
                self.model = next;
                self.model.check(&self.shared.store, &keys, &shown);
            }
            _ => self.model.reload(&self.shared.store, &self.seen),
        }
        !(self.session.close_after_reply
            || self.session.shutdown
            || self.session.handle.is_killed())
    }
}

impl Drop for Client<'_> {
    fn drop(&mut self) {
        self.shared.clients.unregister(self.session.handle.id);
    }
}

/// A command's arguments, shown as text for assertion messages.
struct Shown<'a>(&'a [Vec<u8>]);

impl std::fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, a) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            write!(f, "{:?}", String::from_utf8_lossy(a))?;
        }
        Ok(())
    }
}

/// Checks one command's reply as RESP; returns its frame (none after
/// SHUTDOWN).
fn check_reply(reply: &Bytes, resp3: bool, shutdown: bool, shown: &Shown<'_>) -> Option<Frame> {
    if reply.is_empty() {
        assert!(shutdown, "no reply to {shown}");
        return None;
    }
    let (frame, len) = Frame::parse(reply, Limits::default())
        .unwrap_or_else(|e| panic!("the reply to {shown} does not parse: {e:?} in {reply:?}"));
    assert_eq!(
        len,
        reply.len(),
        "more than one reply to {shown}: {reply:?}"
    );
    if !resp3 {
        assert!(
            is_resp2(&frame),
            "the reply to {shown} on a RESP2 connection: {reply:?}"
        );
    }
    super::encodings_round_trip(&frame);
    Some(frame)
}

/// Whether a frame uses RESP2's types only.
fn is_resp2(frame: &Frame) -> bool {
    match frame {
        Frame::Simple(_) | Frame::Error(_) | Frame::Integer(_) | Frame::Bulk(_) | Frame::Null => {
            true
        }
        Frame::Array(items) => items.iter().all(is_resp2),
        _ => false,
    }
}

fn ok() -> Frame {
    Frame::Simple(Bytes::from_static(b"OK"))
}

fn error(text: &str) -> Frame {
    Frame::Error(Bytes::copy_from_slice(text.as_bytes()))
}

fn bulk(v: &[u8]) -> Frame {
    Frame::Bulk(Bytes::copy_from_slice(v))
}

fn bulk_or_null(v: Option<&Vec<u8>>) -> Frame {
    v.map_or(Frame::Null, |v| bulk(v))
}

/// Redis's `string2ll`: a canonical signed 64-bit decimal (no sign but
/// `-`, no leading zero, no space).
fn string2ll(s: &[u8]) -> Option<i64> {
    let digits = s.strip_prefix(b"-").unwrap_or(s);
    let canonical = match digits {
        [b'0'] => s.len() == 1,
        [b'1'..=b'9', rest @ ..] => rest.iter().all(u8::is_ascii_digit),
        _ => false,
    };
    if !canonical {
        return None;
    }
    std::str::from_utf8(s).ok()?.parse().ok()
}

/// The keyspace as the modelled commands leave it.
#[derive(Clone, Debug, Default)]
struct Model {
    values: BTreeMap<Vec<u8>, Vec<u8>>,
    /// Keys the store held with an expiry at the last reload: their
    /// values and presence are unknown.
    volatile: BTreeSet<Vec<u8>>,
    /// Keys the store counted at the last reload beyond those it held:
    /// keys whose expiry lapsed, which count until a write touches them.
    lapsed: usize,
}

/// The modelled commands: Redis 7.0's arity and key positions (first,
/// last, step; last negative from the end).
fn modelled(name: &[u8]) -> Option<(i32, (i32, i32, i32))> {
    const ONE: (i32, i32, i32) = (1, 1, 1);
    const ALL: (i32, i32, i32) = (1, -1, 1);
    const TWO: (i32, i32, i32) = (1, 2, 1);
    const NONE: (i32, i32, i32) = (0, 0, 0);
    Some(match name {
        b"get" | b"strlen" | b"getdel" | b"incr" | b"decr" | b"type" | b"ttl" | b"pttl"
        | b"expiretime" | b"pexpiretime" | b"persist" => (2, ONE),
        b"set" => (-3, ONE),
        b"setnx" | b"getset" | b"append" | b"incrby" | b"decrby" => (3, ONE),
        b"getrange" | b"substr" | b"setrange" => (4, ONE),
        b"del" | b"unlink" | b"exists" | b"touch" | b"mget" => (-2, ALL),
        b"mset" | b"msetnx" => (-3, (1, -1, 2)),
        b"rename" | b"renamenx" => (3, TWO),
        b"copy" => (-3, TWO),
        b"dbsize" => (1, NONE),
        b"flushdb" | b"ping" => (-1, NONE),
        b"echo" => (2, NONE),
        _ => return None,
    })
}

impl Model {
    /// The reply Redis 7.0 gives to `args` and the keyspace after it, or
    /// `None` for a command the model does not follow.
    fn predict(&self, args: &[Vec<u8>], max_bulk: u64) -> Option<(Frame, Model)> {
        let name = args[0].to_ascii_lowercase();
        let (arity, (first, last, step)) = modelled(&name)?;
        let name = std::str::from_utf8(&name).expect("a modelled name is ASCII");
        let n = args.len();
        let arity_ok = if arity >= 0 {
            n == arity as usize
        } else {
            n >= arity.unsigned_abs() as usize
        };
        if !arity_ok {
            let text = format!("ERR wrong number of arguments for '{name}' command");
            return Some((error(&text), self.clone()));
        }
        if first > 0 {
            let last = if last < 0 { n as i32 + last } else { last };
            let touched = (first..=last).step_by(step as usize);
            if touched
                .into_iter()
                .any(|j| self.volatile.contains(&args[j as usize]))
            {
                return None;
            }
        }
        let mut next = self.clone();
        let reply = next.apply(name, args, max_bulk)?;
        Some((reply, next))
    }

    /// Runs a modelled command whose arity is right and whose keys are not
    /// volatile.
    fn apply(&mut self, name: &str, args: &[Vec<u8>], max_bulk: u64) -> Option<Frame> {
        let v = &mut self.values;
        let key = args.get(1).cloned().unwrap_or_default();
        Some(match name {
            "get" => bulk_or_null(v.get(&key)),
            "set" => return self.set(args),
            "setnx" => match v.entry(key) {
                Entry::Occupied(_) => Frame::Integer(0),
                Entry::Vacant(e) => {
                    e.insert(args[2].clone());
                    Frame::Integer(1)
                }
            },
            "getset" => bulk_or_null(v.insert(key, args[2].clone()).as_ref()),
            "getdel" => bulk_or_null(v.remove(&key).as_ref()),
            "mget" => Frame::Array(args[1..].iter().map(|k| bulk_or_null(v.get(k))).collect()),
            "mset" | "msetnx" => {
                if args.len().is_multiple_of(2) {
                    let text = format!("ERR wrong number of arguments for '{name}' command");
                    return Some(error(&text));
                }
                let nx = name == "msetnx";
                if nx && args[1..].iter().step_by(2).any(|k| v.contains_key(k)) {
                    return Some(Frame::Integer(0));
                }
                for pair in args[1..].chunks(2) {
                    v.insert(pair[0].clone(), pair[1].clone());
                }
                if nx { Frame::Integer(1) } else { ok() }
            }
            "del" | "unlink" => {
                Frame::Integer(args[1..].iter().filter(|k| v.remove(*k).is_some()).count() as i64)
            }
            "exists" | "touch" => {
                Frame::Integer(args[1..].iter().filter(|k| v.contains_key(*k)).count() as i64)
            }
            "append" => {
                let old = v.get(&key);
                let len = old.map_or(0, Vec::len) as u64 + args[2].len() as u64;
                if old.is_some() && len > max_bulk {
                    return Some(error(TOO_LONG));
                }
                if len > MAX_VALUE {
                    return None;
                }
                let value = v.entry(key).or_default();
                value.extend_from_slice(&args[2]);
                Frame::Integer(value.len() as i64)
            }
            "strlen" => Frame::Integer(v.get(&key).map_or(0, Vec::len) as i64),
            "getrange" | "substr" => {
                let (Some(start), Some(end)) = (string2ll(&args[2]), string2ll(&args[3])) else {
                    return Some(error(NOT_INTEGER));
                };
                let value = v.get(&key).map_or(&[][..], |x| &x[..]);
                bulk(getrange(value, start, end))
            }
            "setrange" => {
                let Some(offset) = string2ll(&args[2]) else {
                    return Some(error(NOT_INTEGER));
                };
                if offset < 0 {
                    return Some(error("ERR offset is out of range"));
                }
                let patch = &args[3];
                if patch.is_empty() {
                    return Some(Frame::Integer(v.get(&key).map_or(0, Vec::len) as i64));
                }
                let end = offset as u64 + patch.len() as u64;
                if end > max_bulk {
                    return Some(error(TOO_LONG));
                }
                if end > MAX_VALUE {
                    return None;
                }
                let value = v.entry(key).or_default();
                let (offset, end) = (offset as usize, end as usize);
                if value.len() < end {
                    value.resize(end, 0);
                }
                value[offset..end].copy_from_slice(patch);
                Frame::Integer(value.len() as i64)
            }
            "incr" | "decr" | "incrby" | "decrby" => {
                let delta = match name {
                    "incr" => 1,
                    "decr" => -1,
                    _ => {
                        let Some(d) = string2ll(&args[2]) else {
                            return Some(error(NOT_INTEGER));
                        };
                        if name == "incrby" {
                            d
                        } else if d == i64::MIN {
                            return Some(error("ERR decrement would overflow"));
                        } else {
                            -d
                        }
                    }
                };
                let current = match v.get(&key) {
                    None => 0,
                    Some(x) => match string2ll(x) {
                        Some(n) => n,
                        None => return Some(error(NOT_INTEGER)),
                    },
                };
                let Some(n) = current.checked_add(delta) else {
                    return Some(error("ERR increment or decrement would overflow"));
                };
                v.insert(key, n.to_string().into_bytes());
                Frame::Integer(n)
            }
            "rename" | "renamenx" => {
                let nx = name == "renamenx";
                let dst = args[2].clone();
                if !v.contains_key(&key) {
                    return Some(error("ERR no such key"));
                }
                if key == dst {
                    return Some(if nx { Frame::Integer(0) } else { ok() });
                }
                if nx && v.contains_key(&dst) {
                    return Some(Frame::Integer(0));
                }
                let value = v.remove(&key).expect("checked above");
                v.insert(dst, value);
                if nx { Frame::Integer(1) } else { ok() }
            }
            "copy" => {
                let mut replace = false;
                for opt in &args[3..] {
                    if c_str(opt).eq_ignore_ascii_case(b"REPLACE") {
                        replace = true;
                    } else if c_str(opt).eq_ignore_ascii_case(b"DB") {
                        // Databases other than 0 do not exist here.
                        return None;
                    } else {
                        return Some(error(SYNTAX));
                    }
                }
                let dst = args[2].clone();
                if key == dst {
                    return Some(error("ERR source and destination objects are the same"));
                }
                let Some(value) = v.get(&key).cloned() else {
                    return Some(Frame::Integer(0));
                };
                if v.contains_key(&dst) && !replace {
                    return Some(Frame::Integer(0));
                }
                v.insert(dst, value);
                Frame::Integer(1)
            }
            "dbsize" => {
                if !self.volatile.is_empty() || self.lapsed > 0 {
                    return None;
                }
                Frame::Integer(v.len() as i64)
            }
            "flushdb" => {
                let flag_ok = match args.len() {
                    1 => true,
                    2 => {
                        c_str(&args[1]).eq_ignore_ascii_case(b"SYNC")
                            || c_str(&args[1]).eq_ignore_ascii_case(b"ASYNC")
                    }
                    _ => false,
                };
                if !flag_ok {
                    return Some(error(SYNTAX));
                }
                v.clear();
                self.volatile.clear();
                self.lapsed = 0;
                ok()
            }
            "type" => {
                let t: &'static [u8] = if v.contains_key(&key) {
                    b"string"
                } else {
                    b"none"
                };
                Frame::Simple(Bytes::from_static(t))
            }
            "ttl" | "pttl" | "expiretime" | "pexpiretime" => {
                Frame::Integer(if v.contains_key(&key) { -1 } else { -2 })
            }
            "persist" => Frame::Integer(0),
            "ping" => match args.len() {
                1 => Frame::Simple(Bytes::from_static(b"PONG")),
                2 => bulk(&args[1]),
                _ => return Some(error("ERR wrong number of arguments for 'ping' command")),
            },
            "echo" => bulk(&args[1]),
            _ => unreachable!("{name} is modelled"),
        })
    }

    /// SET without an expiry option (with one: `None`).
    fn set(&mut self, args: &[Vec<u8>]) -> Option<Frame> {
        let (mut nx, mut xx, mut get) = (false, false, false);
        for opt in &args[3..] {
            // Redis compares options as C strings: up to a NUL.
            let opt = c_str(opt).to_ascii_uppercase();
            match &opt[..] {
                b"NX" if !xx => nx = true,
                b"XX" if !nx => xx = true,
                b"GET" => get = true,
                b"KEEPTTL" => {}
                b"EX" | b"PX" | b"EXAT" | b"PXAT" => return None,
                _ => return Some(error(SYNTAX)),
            }
        }
        let key = &args[1];
        let old = self.values.get(key).cloned();
        let found = old.is_some();
        if (nx && found) || (xx && !found) {
            return Some(if get {
                bulk_or_null(old.as_ref())
            } else {
                Frame::Null
            });
        }
        self.values.insert(key.clone(), args[2].clone());
        Some(if get {
            bulk_or_null(old.as_ref())
        } else {
            ok()
        })
    }

    /// Checks that the store holds the model's keys and values, without
    /// expiry, that `keys` (the command's) the model does not hold are
    /// absent, and that the store counts no other key but volatile ones.
    fn check(&self, store: &Store, keys: &[&Vec<u8>], shown: &Shown<'_>) {
        let read = |key: &[u8]| store.entry(key).expect("read a key");
        let mut fixed = 0;
        for (key, value) in &self.values {
            if self.volatile.contains(key) {
                continue;
            }
            fixed += 1;
            assert_eq!(
                read(key),
                Some((value.clone(), None)),
                "key {:?} after {shown}",
                String::from_utf8_lossy(key)
            );
        }
        for key in keys {
            if !self.values.contains_key(*key) && !self.volatile.contains(*key) {
                assert_eq!(
                    read(key),
                    None,
                    "key {:?} after {shown}",
                    String::from_utf8_lossy(key)
                );
            }
        }
        let len = store.db().len();
        assert!(
            len >= fixed && len <= fixed + self.volatile.len() + self.lapsed,
            "{len} keys after {shown}: {fixed} known, {} volatile, {} lapsed",
            self.volatile.len(),
            self.lapsed
        );
    }

    /// Reloads the model from the store, after a command it does not
    /// follow: the keys among `seen` and the model's, and, when the store
    /// counts more keys than those, all of them; what it still counts
    /// beyond the keys it holds is lapsed.
    fn reload(&mut self, store: &Store, seen: &BTreeSet<Vec<u8>>) {
        let mut keys: BTreeSet<Vec<u8>> = std::mem::take(&mut self.values).into_keys().collect();
        keys.extend(seen.iter().cloned());
        self.volatile.clear();
        self.load(store, keys);
        self.lapsed = 0;
        if store.db().len() > self.values.len() {
            let all = store.all_keys().expect("list the keys");
            self.load(store, all);
            self.lapsed = store.db().len().saturating_sub(self.values.len());
        }
    }

    /// Reads `keys` from the store into the model, each with an expiry
    /// marked volatile.
    fn load(&mut self, store: &Store, keys: impl IntoIterator<Item = Vec<u8>>) {
        for key in keys {
            if let Some((value, expiry)) = store.entry(&key).expect("read a key") {
                if expiry.is_some() {
                    self.volatile.insert(key.clone());
                }
                self.values.insert(key, value);
            }
        }
    }
}

/// Redis 7.0's GETRANGE of `value`.
fn getrange(value: &[u8], start: i64, end: i64) -> &[u8] {
    if start < 0 && end < 0 && start > end {
        return b"";
    }
    let len = value.len() as i64;
    let start = if start < 0 { len + start } else { start }.max(0);
    let mut end = if end < 0 { len + end } else { end }.max(0);
    if end >= len {
        end = len - 1;
    }
    if start > end || len == 0 {
        return b"";
    }
    &value[start as usize..=end as usize]
}
