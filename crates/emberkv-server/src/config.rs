//! Settings: redis-server's flags and config-file directives, and the
//! table CONFIG GET / CONFIG SET read and write.
//!
//! The command line is `emberkv-server [config-file] [--name value ...]`,
//! as redis-server spells it: the file is read first, then each `--name`
//! flag with the words after it (up to the next `--`) is applied like a
//! line of the file, so a flag overrides the file. An unknown directive or
//! a bad value is one line on stderr and exit code 1.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};

use crate::log::Level;

/// When the server makes acknowledged writes durable (`appendfsync`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fsync {
    /// `always`: a reply that acknowledges a write leaves only after an
    /// fdatasync covering it (one shared by every connection waiting).
    Always,
    /// `everysec`: the engine's background flush (every 100 ms, stricter
    /// than a second).
    EverySec,
    /// `no`: the same background flush (the engine has no looser mode).
    No,
}

impl Fsync {
    fn name(self) -> &'static str {
        match self {
            Fsync::Always => "always",
            Fsync::EverySec => "everysec",
            Fsync::No => "no",
        }
    }
}

/// Every setting of the server.
#[derive(Clone, Debug)]
pub struct Config {
    /// The config file given as the first argument, if any.
    pub config_file: Option<PathBuf>,
    /// TCP port; 0 disables TCP.
    pub port: u16,
    /// Addresses to listen on; a leading `-` marks one whose bind may fail.
    pub bind: Vec<String>,
    /// Unix socket path, if any.
    pub unixsocket: Option<PathBuf>,
    /// Permissions of the unix socket (octal on the command line).
    pub unixsocketperm: Option<u32>,
    /// Directory holding the store.
    pub dir: PathBuf,
    /// Name of the store's directory inside `dir`.
    pub dbfilename: String,
    /// Reported only: the store always persists every write.
    pub appendonly: bool,
    /// Durability of acknowledged writes.
    pub appendfsync: Fsync,
    /// Reported only: the engine has no eviction yet.
    pub maxmemory: u64,
    /// Largest number of connected clients.
    pub maxclients: usize,
    /// Most segment files the store keeps open (not a directive: the
    /// server splits the open files limit between them and the clients at
    /// start, [`crate::fd_limit::share`]).
    pub store_files: u64,
    /// Descriptors open when the server split the open files limit (the
    /// listeners, the log; not a directive): CONFIG SET maxclients counts
    /// them, `store_files` and the reserve as the start did, so the value
    /// the start chose can always be set again.
    pub base_fds: u64,
    /// Seconds after which an idle client is closed; 0 never.
    pub timeout: u64,
    /// The default user's password; `None` means no password.
    pub requirepass: Option<String>,
    /// Refuse non-loopback clients while no password is set.
    pub protected_mode: bool,
    /// Least severe log level written.
    pub loglevel: Level,
    /// Log file; empty for standard output.
    pub logfile: String,
    /// Worker threads of the runtime; 0 for one per available CPU.
    pub io_threads: usize,
    /// Largest bulk string a client may send, in bytes.
    pub proto_max_bulk_len: u64,
    /// Largest query buffer of one client, in bytes.
    pub client_query_buffer_limit: u64,
    /// emberkv's hot tier (the in-memory tail of its log), in bytes; not
    /// a redis-server option.
    pub hot_bytes: u64,
    /// `auto-aof-rewrite-percentage`: how far, in percent of the data's
    /// own size, the files may grow past it before garbage is reclaimed
    /// (redis-server rewrites its AOF once it has grown this much since
    /// the last rewrite; default 100). The engine's space bound,
    /// [`emberkv::Options::max_space_amplification`], is `1 + n / 100`;
    /// 0 sets no bound (redis-server: no automatic rewrite).
    pub aof_rewrite_percentage: u64,
    /// Keep a latency histogram per command, for INFO latencystats.
    pub latency_tracking: bool,
    /// The percentiles INFO latencystats prints, each in `0.0..=100.0`.
    pub latency_percentiles: Vec<f64>,
    /// Detach from the terminal at start (`daemonize yes`), as
    /// redis-server: fork, the parent exits, the child starts a session
    /// with standard input and output on `/dev/null`.
    pub daemonize: bool,
    /// Where the process id is written at start and removed at a clean
    /// exit; a daemon without one is given [`DEFAULT_PIDFILE`] (and
    /// CONFIG GET shows it), as in redis-server.
    pub pidfile: Option<PathBuf>,
    /// How a supervisor is told the server is ready (`supervised`).
    pub supervised: Supervised,
    /// The queue of pending connections of each TCP listener
    /// (`tcp-backlog`; the kernel caps it at `net.core.somaxconn`).
    pub tcp_backlog: i32,
    /// Seconds a client's TCP connection stays idle before keepalive
    /// probes start (`tcp-keepalive`; 0: none): probes every third of
    /// that, the connection dropped after three unanswered, as
    /// redis-server's `anetKeepAlive`.
    pub tcp_keepalive: u64,
    /// `databases` as set (1 to 2^31-1); one database is served whatever
    /// it says, and a start-up warning says so when it is more than one.
    pub databases: u64,
    /// Directives of redis-server that were set and have no effect here
    /// (`inert!` in [`PARAMS`]), by name, with their values as CONFIG GET
    /// prints them.
    pub inert: BTreeMap<&'static str, String>,
}

/// How a supervisor learns that the server is ready (`supervised`, as
/// redis-server's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Supervised {
    /// None is told.
    No,
    /// systemd: `READY=1` (and a `STATUS=` line) to `$NOTIFY_SOCKET`
    /// once serving, `STOPPING=1` at shutdown.
    Systemd,
    /// upstart: the server stops itself with `SIGSTOP` once serving.
    Upstart,
    /// upstart if `$UPSTART_JOB` is set, else systemd if `$NOTIFY_SOCKET`
    /// is, else none (redis-server's order).
    Auto,
}

impl Supervised {
    fn name(self) -> &'static str {
        match self {
            Supervised::No => "no",
            Supervised::Systemd => "systemd",
            Supervised::Upstart => "upstart",
            Supervised::Auto => "auto",
        }
    }
}

/// The pid file of a daemonized server given no `pidfile`, redis-server's.
pub const DEFAULT_PIDFILE: &str = "/var/run/redis.pid";

impl Default for Config {
    fn default() -> Self {
        Config {
            config_file: None,
            port: 6379,
            bind: vec!["127.0.0.1".into()],
            unixsocket: None,
            unixsocketperm: None,
            dir: PathBuf::from("."),
            dbfilename: DEFAULT_DBFILENAME.into(),
            appendonly: false,
            appendfsync: Fsync::EverySec,
            maxmemory: 0,
            maxclients: 10_000,
            store_files: crate::fd_limit::STORE_FILES,
            base_fds: 0,
            timeout: 0,
            requirepass: None,
            protected_mode: true,
            loglevel: Level::Notice,
            logfile: String::new(),
            io_threads: 0,
            proto_max_bulk_len: 512 * 1024 * 1024,
            client_query_buffer_limit: 1024 * 1024 * 1024,
            hot_bytes: 256 * 1024 * 1024,
            aof_rewrite_percentage: 100,
            latency_tracking: true,
            latency_percentiles: vec![50.0, 99.0, 99.9],
            daemonize: false,
            pidfile: None,
            supervised: Supervised::No,
            tcp_backlog: 511,
            tcp_keepalive: 300,
            databases: 1,
            inert: BTreeMap::new(),
        }
    }
}

/// Default name of the store's directory inside `--dir`.
pub const DEFAULT_DBFILENAME: &str = "dump.emberkv";

/// A bad flag, directive or value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

/// What the command line asks for.
#[derive(Debug)]
pub enum Action {
    /// Serve with this configuration.
    Run(Box<Config>),
    /// Print the help text.
    Help,
    /// Print the version.
    Version,
}

type Setter = fn(&mut Config, &[String]) -> Result<(), Invalid>;
type Getter = fn(&Config) -> String;

/// One setting: its directive name, whether CONFIG SET may change it at
/// run time, and how to parse and print it.
pub struct Param {
    /// Directive and flag name (`--name`).
    pub name: &'static str,
    /// Whether CONFIG SET may change it.
    pub mutable: bool,
    set: Setter,
    get: Getter,
}

/// Why a setting refused a value. Displayed for a flag or a config-file
/// line; [`Invalid::redis`] words it as Redis 7 does for CONFIG SET
/// (`config.c`; checked against redis-server 7.0.15), since clients
/// match on those strings.
#[derive(Debug, PartialEq)]
pub enum Invalid {
    /// Not `yes` or `no`.
    YesNo(String),
    /// Not one of these words (listed in Redis's order).
    OneOf(String, &'static [&'static str]),
    /// Not an integer; the second field says what was expected.
    Integer(String, &'static str),
    /// Outside `min..=max`; the first field says so for a flag.
    Range(String, i128, i128),
    /// Not a memory size (bytes, or a number with k, kb, m, mb, g, gb).
    Memory(String),
    /// Anything else, worded the same for both.
    Other(String),
}

impl Invalid {
    /// The reason as Redis 7 words it after `CONFIG SET failed (possibly
    /// related to argument '<name>') - `.
    pub fn redis(&self) -> String {
        match self {
            Invalid::YesNo(_) => "argument must be 'yes' or 'no'".into(),
            Invalid::OneOf(_, words) => format!(
                "argument(s) must be one of the following: {}",
                words.join(", ")
            ),
            Invalid::Integer(..) => "argument couldn't be parsed into an integer".into(),
            Invalid::Range(_, min, max) => {
                format!("argument must be between {min} and {max} inclusive")
            }
            Invalid::Memory(_) => "argument must be a memory value".into(),
            Invalid::Other(why) => why.clone(),
        }
    }
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Invalid::YesNo(v) => write!(f, "'{v}': expected yes or no"),
            Invalid::OneOf(v, words) => match words.split_last() {
                Some((last, rest)) if !rest.is_empty() => {
                    write!(f, "'{v}': expected {} or {last}", rest.join(", "))
                }
                _ => write!(f, "'{v}': expected {}", words.join(", ")),
            },
            Invalid::Integer(v, what) => write!(f, "'{v}': expected {what}"),
            Invalid::Range(why, _, _) => f.write_str(why),
            Invalid::Memory(v) => write!(f, "'{v}': expected a size such as 100mb or 1gb"),
            Invalid::Other(why) => f.write_str(why),
        }
    }
}

impl From<String> for Invalid {
    fn from(why: String) -> Self {
        Invalid::Other(why)
    }
}

impl From<&str> for Invalid {
    fn from(why: &str) -> Self {
        Invalid::Other(why.into())
    }
}

fn one(args: &[String]) -> Result<&str, Invalid> {
    match args {
        [v] => Ok(v),
        _ => Err(format!("expected one value, got {}", args.len()).into()),
    }
}

fn yes_no(args: &[String]) -> Result<bool, Invalid> {
    match one(args)?.to_ascii_lowercase().as_str() {
        "yes" => Ok(true),
        "no" => Ok(false),
        v => Err(Invalid::YesNo(v.into())),
    }
}

/// Percentiles separated by spaces (none is valid), each in
/// `0.0..=100.0`, as Redis 7 checks them.
fn percentiles(args: &[String]) -> Result<Vec<f64>, Invalid> {
    let mut found = Vec::new();
    for word in args.iter().flat_map(|a| a.split_whitespace()) {
        let p: f64 = word
            .parse()
            .ok()
            .filter(|p: &f64| !p.is_nan())
            .ok_or("Invalid latency-tracking-info-percentiles parameters")?;
        if !(0.0..=100.0).contains(&p) {
            return Err(
                "latency-tracking-info-percentiles parameters should sit between [0.0,100.0]"
                    .into(),
            );
        }
        found.push(p);
    }
    Ok(found)
}

fn number<T: std::str::FromStr>(args: &[String], what: &'static str) -> Result<T, Invalid> {
    let v = one(args)?;
    v.parse().map_err(|_| Invalid::Integer(v.into(), what))
}

/// An integer in `min..=max`, parsed as Redis's `string2ll` does (an
/// optional '-', then digits: no '+', no spaces), so that an integer out
/// of range, negative ones included, is refused as out of range rather
/// than as no integer. `what` says what was expected.
fn integer_in(args: &[String], what: &'static str, min: i128, max: i128) -> Result<i128, Invalid> {
    let v = one(args)?;
    let n: i128 = v
        .parse()
        .ok()
        .filter(|_| !v.starts_with('+') && v.len() <= 20)
        // As `string2ll`: no leading zeros, no "-0".
        .filter(|_| {
            let digits = v.strip_prefix('-').unwrap_or(v);
            !(digits.starts_with('0') && (digits.len() > 1 || v.starts_with('-')))
        })
        .filter(|n| i64::try_from(*n).is_ok())
        .ok_or_else(|| Invalid::Integer(v.into(), what))?;
    if !(min..=max).contains(&n) {
        return Err(Invalid::Range(
            format!("'{v}': expected {what} from {min} to {max}"),
            min,
            max,
        ));
    }
    Ok(n)
}

/// Parses a memory size as redis-server does: bytes, or a number with
/// `k`/`m`/`g` (powers of 1000) or `kb`/`mb`/`gb` (powers of 1024), any
/// case.
pub fn parse_memory(v: &str) -> Option<u64> {
    let lower = v.to_ascii_lowercase();
    let split = lower
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(lower.len());
    let (digits, unit) = lower.split_at(split);
    let n: u64 = digits.parse().ok()?;
    let mul: u64 = match unit {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1024,
        "m" => 1000 * 1000,
        "mb" => 1024 * 1024,
        "g" => 1000 * 1000 * 1000,
        "gb" => 1024 * 1024 * 1024,
        _ => return None,
    };
    n.checked_mul(mul)
}

fn memory(args: &[String]) -> Result<u64, Invalid> {
    let v = one(args)?;
    parse_memory(v).ok_or_else(|| Invalid::Memory(v.into()))
}

/// A memory size of at least `min` bytes and at most `i64::MAX`, refused
/// as Redis refuses its bounded memory settings; `name` and `least` word
/// the refusal for a flag.
fn memory_from(args: &[String], name: &str, min: u64, least: &str) -> Result<u64, Invalid> {
    let n = memory(args)?;
    if n < min || n > i64::MAX as u64 {
        return Err(Invalid::Range(
            format!("{name} must be at least {least}"),
            min.into(),
            i64::MAX.into(),
        ));
    }
    Ok(n)
}

/// The values Redis takes for `maxmemory-policy`, in its order; only
/// `noeviction` is supported.
const POLICIES: &[&str] = &[
    "volatile-lru",
    "volatile-lfu",
    "volatile-random",
    "volatile-ttl",
    "allkeys-lru",
    "allkeys-lfu",
    "allkeys-random",
    "noeviction",
];

/// A directive of redis-server accepted without effect here: one that
/// tunes what this server does not have (RDB snapshots, the AOF's own
/// files, replication, the encodings of other types, lazy freeing,
/// jemalloc, the slow log, the latency monitor, redis-server's cron
/// frequency and process title), so that a stock `redis.conf` starts it.
/// Its value is checked by `$check` as redis-server checks it and kept in
/// [`Config::inert`] for CONFIG GET (`$default`, redis-server 7.0's,
/// until set); the server logs at start the ones that were set.
macro_rules! inert {
    ($name:literal, $mutable:expr, $default:literal, $check:expr) => {
        Param {
            name: $name,
            mutable: $mutable,
            set: |c, a| {
                let v = ($check)(a)?;
                c.inert.insert($name, v);
                Ok(())
            },
            get: |c| {
                c.inert
                    .get($name)
                    .map_or_else(|| $default.to_owned(), Clone::clone)
            },
        }
    };
}

/// Every setting, in the order CONFIG GET lists them.
pub static PARAMS: &[Param] = &[
    Param {
        name: "port",
        mutable: false,
        set: |c, a| {
            c.port = number(a, "a port number 0..=65535")?;
            Ok(())
        },
        get: |c| c.port.to_string(),
    },
    Param {
        name: "bind",
        mutable: false,
        set: |c, a| {
            let words: Vec<String> = a
                .iter()
                .flat_map(|s| s.split_whitespace())
                .map(str::to_string)
                .collect();
            if words.is_empty() {
                return Err("expected at least one address".into());
            }
            for w in &words {
                let addr = w.strip_prefix('-').unwrap_or(w);
                if !matches!(addr, "*" | "::*") && addr.parse::<std::net::IpAddr>().is_err() {
                    return Err(format!("'{w}' is not an IP address").into());
                }
            }
            c.bind = words;
            Ok(())
        },
        get: |c| c.bind.join(" "),
    },
    Param {
        name: "unixsocket",
        mutable: false,
        set: |c, a| {
            let v = one(a)?;
            c.unixsocket = (!v.is_empty()).then(|| PathBuf::from(v));
            Ok(())
        },
        get: |c| path_text(c.unixsocket.as_deref()),
    },
    Param {
        name: "unixsocketperm",
        mutable: false,
        set: |c, a| {
            let v = one(a)?;
            let mode = u32::from_str_radix(v, 8)
                .ok()
                .filter(|&m| m <= 0o777)
                .ok_or_else(|| format!("'{v}': expected octal permissions such as 700"))?;
            c.unixsocketperm = (mode != 0).then_some(mode);
            Ok(())
        },
        get: |c| format!("{:o}", c.unixsocketperm.unwrap_or(0)),
    },
    Param {
        name: "dir",
        mutable: false,
        set: |c, a| {
            let v = one(a)?;
            if v.is_empty() {
                return Err("expected a directory".into());
            }
            c.dir = PathBuf::from(v);
            Ok(())
        },
        get: |c| path_text(Some(&c.dir)),
    },
    Param {
        name: "dbfilename",
        mutable: false,
        set: |c, a| {
            let v = one(a)?;
            if v.is_empty() || v.contains('/') {
                return Err(format!("'{v}': expected a file name without '/'").into());
            }
            c.dbfilename = v.to_string();
            Ok(())
        },
        get: |c| c.dbfilename.clone(),
    },
    Param {
        name: "appendonly",
        mutable: true,
        set: |c, a| {
            c.appendonly = yes_no(a)?;
            Ok(())
        },
        get: |c| yes(c.appendonly),
    },
    Param {
        name: "latency-tracking",
        mutable: true,
        set: |c, a| {
            c.latency_tracking = yes_no(a)?;
            Ok(())
        },
        get: |c| yes(c.latency_tracking),
    },
    Param {
        name: "latency-tracking-info-percentiles",
        mutable: true,
        set: |c, a| {
            c.latency_percentiles = percentiles(a)?;
            Ok(())
        },
        get: |c| {
            let words: Vec<String> = c.latency_percentiles.iter().map(f64::to_string).collect();
            words.join(" ")
        },
    },
    Param {
        name: "appendfsync",
        mutable: true,
        set: |c, a| {
            c.appendfsync = match one(a)?.to_ascii_lowercase().as_str() {
                "always" => Fsync::Always,
                "everysec" => Fsync::EverySec,
                "no" => Fsync::No,
                v => return Err(Invalid::OneOf(v.into(), &["everysec", "always", "no"])),
            };
            Ok(())
        },
        get: |c| c.appendfsync.name().to_string(),
    },
    Param {
        name: "maxmemory",
        mutable: true,
        set: |c, a| {
            c.maxmemory = memory(a)?;
            Ok(())
        },
        get: |c| c.maxmemory.to_string(),
    },
    Param {
        name: "maxmemory-policy",
        mutable: true,
        set: |_, a| match one(a)?.to_ascii_lowercase().as_str() {
            "noeviction" => Ok(()),
            v if POLICIES.contains(&v) => {
                Err(format!("'{v}': only noeviction is supported").into())
            }
            v => Err(Invalid::OneOf(v.into(), POLICIES)),
        },
        get: |_| "noeviction".into(),
    },
    Param {
        name: "maxclients",
        mutable: true,
        set: |c, a| {
            let n = integer_in(a, "a number of clients", 1, u32::MAX.into())?;
            c.maxclients = usize::try_from(n).unwrap_or(usize::MAX);
            Ok(())
        },
        get: |c| c.maxclients.to_string(),
    },
    Param {
        name: "timeout",
        mutable: true,
        set: |c, a| {
            let n = integer_in(a, "a number of seconds", 0, i32::MAX.into())?;
            c.timeout = n.try_into().unwrap_or(u64::MAX);
            Ok(())
        },
        get: |c| c.timeout.to_string(),
    },
    Param {
        name: "requirepass",
        mutable: true,
        set: |c, a| {
            let v = one(a)?;
            c.requirepass = (!v.is_empty()).then(|| v.to_string());
            Ok(())
        },
        get: |c| c.requirepass.clone().unwrap_or_default(),
    },
    Param {
        name: "protected-mode",
        mutable: true,
        set: |c, a| {
            c.protected_mode = yes_no(a)?;
            Ok(())
        },
        get: |c| yes(c.protected_mode),
    },
    Param {
        name: "loglevel",
        mutable: true,
        set: |c, a| {
            let v = one(a)?;
            c.loglevel = Level::parse(v).ok_or_else(|| {
                Invalid::OneOf(
                    v.into(),
                    &["debug", "verbose", "notice", "warning", "nothing"],
                )
            })?;
            Ok(())
        },
        get: |c| c.loglevel.name().to_string(),
    },
    Param {
        name: "logfile",
        mutable: false,
        set: |c, a| {
            c.logfile = one(a)?.to_string();
            Ok(())
        },
        get: |c| c.logfile.clone(),
    },
    Param {
        name: "daemonize",
        mutable: false,
        set: |c, a| {
            c.daemonize = yes_no(a)?;
            Ok(())
        },
        get: |c| yes(c.daemonize),
    },
    Param {
        name: "pidfile",
        mutable: false,
        set: |c, a| {
            let v = one(a)?;
            c.pidfile = (!v.is_empty()).then(|| PathBuf::from(v));
            Ok(())
        },
        get: |c| path_text(c.pidfile.as_deref()),
    },
    Param {
        name: "supervised",
        mutable: false,
        set: |c, a| {
            const WORDS: &[&str] = &["upstart", "systemd", "auto", "no"];
            let v = one(a)?.to_ascii_lowercase();
            c.supervised = match v.as_str() {
                "upstart" => Supervised::Upstart,
                "systemd" => Supervised::Systemd,
                "auto" => Supervised::Auto,
                "no" => Supervised::No,
                _ => return Err(Invalid::OneOf(v, WORDS)),
            };
            Ok(())
        },
        get: |c| c.supervised.name().into(),
    },
    Param {
        name: "tcp-backlog",
        mutable: false,
        set: |c, a| {
            c.tcp_backlog = integer_in(a, "a backlog", 0, i32::MAX.into())? as i32;
            Ok(())
        },
        get: |c| c.tcp_backlog.to_string(),
    },
    Param {
        name: "tcp-keepalive",
        mutable: true,
        set: |c, a| {
            c.tcp_keepalive = integer_in(a, "seconds", 0, i32::MAX.into())? as u64;
            Ok(())
        },
        get: |c| c.tcp_keepalive.to_string(),
    },
    Param {
        name: "databases",
        mutable: false,
        set: |c, a| {
            c.databases = integer_in(a, "a number of databases", 1, i32::MAX.into())? as u64;
            Ok(())
        },
        // What is served: SELECT of any other index fails.
        get: |_| "1".into(),
    },
    Param {
        name: "save",
        mutable: true,
        // Checked as Redis does and kept for CONFIG GET, without effect:
        // the store persists every write continuously, there are no
        // snapshots to schedule.
        set: |c, a| {
            let words: Vec<&str> = a.iter().flat_map(|s| s.split_whitespace()).collect();
            let valid = words.len().is_multiple_of(2)
                && words.chunks(2).all(|pair| {
                    let secs = pair[0].parse::<i64>().is_ok_and(|n| n >= 1);
                    let changes = pair[1].parse::<i64>().is_ok_and(|n| n >= 0);
                    secs && changes
                });
            if !valid {
                return Err("Invalid save parameters".into());
            }
            c.inert.insert("save", words.join(" "));
            Ok(())
        },
        get: |c| c.inert.get("save").cloned().unwrap_or_default(),
    },
    Param {
        name: "io-threads",
        mutable: false,
        set: |c, a| {
            c.io_threads = number(a, "a number of threads")?;
            Ok(())
        },
        get: |c| c.io_threads.to_string(),
    },
    Param {
        name: "proto-max-bulk-len",
        mutable: true,
        set: |c, a| {
            c.proto_max_bulk_len = memory_from(a, "proto-max-bulk-len", 1 << 20, "1mb")?;
            Ok(())
        },
        get: |c| c.proto_max_bulk_len.to_string(),
    },
    Param {
        name: "client-query-buffer-limit",
        mutable: true,
        set: |c, a| {
            c.client_query_buffer_limit =
                memory_from(a, "client-query-buffer-limit", 1 << 20, "1mb")?;
            Ok(())
        },
        get: |c| c.client_query_buffer_limit.to_string(),
    },
    Param {
        name: "auto-aof-rewrite-percentage",
        mutable: false,
        set: |c, a| {
            let n = integer_in(a, "a percentage", 0, i64::MAX.into())?;
            if (1..30).contains(&n) {
                return Err(
                    "emberkv holds its files to at least 1.3 times its data: 0 or at least 30"
                        .into(),
                );
            }
            c.aof_rewrite_percentage = n as u64;
            Ok(())
        },
        get: |c| c.aof_rewrite_percentage.to_string(),
    },
    Param {
        name: "hot-bytes",
        mutable: false,
        set: |c, a| {
            let n = memory(a)?;
            if n < 4 * 1024 * 1024 {
                return Err("hot-bytes must be at least 4mb".into());
            }
            c.hot_bytes = n;
            Ok(())
        },
        get: |c| c.hot_bytes.to_string(),
    },
    Param {
        name: "notify-keyspace-events",
        mutable: true,
        set: |_, a| match one(a)? {
            "" => Ok(()),
            v => Err(format!("'{v}': keyspace notifications are not supported (only \"\")").into()),
        },
        get: |_| String::new(),
    },
    Param {
        name: "client-output-buffer-limit",
        mutable: true,
        set: |c, a| {
            let v = output_buffer_limits(c.inert.get("client-output-buffer-limit"), a)?;
            c.inert.insert("client-output-buffer-limit", v);
            Ok(())
        },
        get: |c| {
            c.inert
                .get("client-output-buffer-limit")
                .map_or_else(|| DEFAULT_OUTPUT_BUFFER_LIMITS.to_owned(), Clone::clone)
        },
    },
    inert!("always-show-logo", false, "no", yes_no_text),
    inert!("set-proc-title", false, "yes", yes_no_text),
    inert!(
        "proc-title-template",
        true,
        "{title} {listen-addr} {server-mode}",
        proc_title_template
    ),
    inert!("stop-writes-on-bgsave-error", true, "yes", yes_no_text),
    inert!("rdbcompression", true, "yes", yes_no_text),
    inert!("rdbchecksum", false, "yes", yes_no_text),
    inert!("rdb-del-sync-files", true, "no", yes_no_text),
    inert!("rdb-save-incremental-fsync", true, "yes", yes_no_text),
    inert!("replica-serve-stale-data", true, "yes", yes_no_text),
    inert!("replica-read-only", true, "yes", yes_no_text),
    inert!("repl-diskless-sync", true, "yes", yes_no_text),
    inert!(
        "repl-diskless-sync-delay",
        true,
        "5",
        int_text::<0, { i32::MAX as i64 }>
    ),
    inert!(
        "repl-diskless-sync-max-replicas",
        true,
        "0",
        int_text::<0, { i32::MAX as i64 }>
    ),
    inert!("repl-diskless-load", true, "disabled", repl_diskless_load),
    inert!("repl-disable-tcp-nodelay", true, "no", yes_no_text),
    inert!(
        "replica-priority",
        true,
        "100",
        int_text::<0, { i32::MAX as i64 }>
    ),
    inert!("replica-lazy-flush", true, "no", yes_no_text),
    inert!("acllog-max-len", true, "128", int_text::<0, { i64::MAX }>),
    inert!("lazyfree-lazy-eviction", true, "no", yes_no_text),
    inert!("lazyfree-lazy-expire", true, "no", yes_no_text),
    inert!("lazyfree-lazy-server-del", true, "no", yes_no_text),
    inert!("lazyfree-lazy-user-del", true, "no", yes_no_text),
    inert!("lazyfree-lazy-user-flush", true, "no", yes_no_text),
    inert!("oom-score-adj", true, "no", oom_score_adj),
    inert!(
        "oom-score-adj-values",
        true,
        "0 200 800",
        oom_score_adj_values
    ),
    inert!("disable-thp", false, "yes", yes_no_text),
    inert!("appendfilename", false, "appendonly.aof", append_file_name),
    inert!("appenddirname", false, "appendonlydir", append_dir_name),
    inert!("no-appendfsync-on-rewrite", true, "no", yes_no_text),
    inert!("auto-aof-rewrite-min-size", true, "67108864", memory_text),
    inert!("aof-load-truncated", true, "yes", yes_no_text),
    inert!("aof-use-rdb-preamble", true, "yes", yes_no_text),
    inert!("aof-timestamp-enabled", true, "no", yes_no_text),
    inert!("aof-rewrite-incremental-fsync", true, "yes", yes_no_text),
    inert!(
        "slowlog-log-slower-than",
        true,
        "10000",
        int_text::<-1, { i64::MAX }>
    ),
    inert!("slowlog-max-len", true, "128", int_text::<0, { i64::MAX }>),
    inert!(
        "latency-monitor-threshold",
        true,
        "0",
        int_text::<0, { i64::MAX }>
    ),
    inert!(
        "hash-max-listpack-entries",
        true,
        "512",
        int_text::<0, { i64::MAX }>
    ),
    inert!("hash-max-listpack-value", true, "64", memory_text),
    inert!(
        "list-max-listpack-size",
        true,
        "-2",
        int_text::<{ i32::MIN as i64 }, { i32::MAX as i64 }>
    ),
    inert!(
        "list-compress-depth",
        true,
        "0",
        int_text::<0, { i32::MAX as i64 }>
    ),
    inert!(
        "set-max-intset-entries",
        true,
        "512",
        int_text::<0, { i64::MAX }>
    ),
    inert!(
        "zset-max-listpack-entries",
        true,
        "128",
        int_text::<0, { i64::MAX }>
    ),
    inert!("zset-max-listpack-value", true, "64", memory_text),
    inert!("hll-sparse-max-bytes", true, "3000", memory_text),
    inert!("stream-node-max-bytes", true, "4096", memory_text),
    inert!(
        "stream-node-max-entries",
        true,
        "100",
        int_text::<0, { i64::MAX }>
    ),
    inert!("activerehashing", true, "yes", yes_no_text),
    inert!("hz", true, "10", hz),
    inert!("dynamic-hz", true, "yes", yes_no_text),
    inert!("jemalloc-bg-thread", true, "yes", yes_no_text),
    inert!(
        "busy-reply-threshold",
        true,
        "5000",
        int_text::<0, { i64::MAX }>
    ),
];

/// redis-server 7.0's `client-output-buffer-limit`, as CONFIG GET prints it.
const DEFAULT_OUTPUT_BUFFER_LIMITS: &str =
    "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60";

/// `client-output-buffer-limit`: groups of `<class> <hard> <soft>
/// <seconds>` merged into `current` (or redis-server's defaults), as its
/// `updateClientOutputBufferLimit` checks them. Limits for replicas and
/// pub/sub clients are accepted (there are none here); the normal class
/// only unlimited (`normal 0 0 0`, redis-server's default), since replies
/// are not bounded per client here beyond pausing reads at 64 MiB.
fn output_buffer_limits(current: Option<&String>, args: &[String]) -> Result<String, Invalid> {
    const WRONG: &str = "Wrong number of arguments in buffer limit configuration.";
    let words: Vec<&str> = args.iter().flat_map(|a| a.split_whitespace()).collect();
    if !words.len().is_multiple_of(4) {
        return Err(WRONG.into());
    }
    // No group (`""`) changes nothing, as in redis-server.
    let current = current.map_or(DEFAULT_OUTPUT_BUFFER_LIMITS, String::as_str);
    let mut classes: Vec<[String; 4]> = current
        .split_whitespace()
        .collect::<Vec<_>>()
        .chunks(4)
        .map(|c| [0, 1, 2, 3].map(|i| c[i].to_owned()))
        .collect();
    for group in words.chunks(4) {
        let class = match group[0].to_ascii_lowercase().as_str() {
            "normal" => "normal",
            "slave" | "replica" => "slave",
            "pubsub" => "pubsub",
            _ => {
                return Err("Invalid client class specified in buffer limit configuration.".into());
            }
        };
        let hard = parse_memory(group[1]);
        let soft = parse_memory(group[2]);
        let secs = group[3].parse::<i64>().ok().filter(|&n| n >= 0);
        let (Some(hard), Some(soft), Some(secs)) = (hard, soft, secs) else {
            return Err(
                "Error in hard, soft or soft_seconds setting in buffer limit configuration.".into(),
            );
        };
        if class == "normal" && (hard, soft, secs) != (0, 0, 0) {
            return Err(
                "emberkv-server takes only 'normal 0 0 0' (no limit) for normal clients".into(),
            );
        }
        let slot = classes
            .iter_mut()
            .find(|c| c[0] == class)
            .expect("the three classes");
        *slot = [
            class.to_owned(),
            hard.to_string(),
            soft.to_string(),
            secs.to_string(),
        ];
    }
    Ok(classes.concat().join(" "))
}

fn yes_no_text(args: &[String]) -> Result<String, Invalid> {
    yes_no(args).map(yes)
}

/// `hz`: redis-server keeps it within 1 to 500 (`CONFIG_MIN_HZ`,
/// `CONFIG_MAX_HZ`) and prints what it kept.
fn hz(args: &[String]) -> Result<String, Invalid> {
    let n = integer_in(args, "an integer", 0, i32::MAX.into())?;
    Ok(n.clamp(1, 500).to_string())
}

/// A file name without a directory, as redis-server's
/// `isValidAOFfilename` takes for `appendfilename`.
fn append_file_name(args: &[String]) -> Result<String, Invalid> {
    base_name(args, "appendfilename", "filename")
}

/// A directory name without a path, as redis-server's
/// `isValidAOFdirname` takes for `appenddirname`.
fn append_dir_name(args: &[String]) -> Result<String, Invalid> {
    base_name(args, "appenddirname", "dirname")
}

/// One name without a path (not empty, no `/`, not `.` or `..`), refused
/// in redis-server's words for `setting`, which calls it a `noun`.
fn base_name(args: &[String], setting: &str, noun: &str) -> Result<String, Invalid> {
    match one(args)? {
        "" => Err(format!("{setting} can't be empty").into()),
        v if v.contains('/') || v == "." || v == ".." => {
            Err(format!("{setting} can't be a path, just a {noun}").into())
        }
        v => Ok(v.to_owned()),
    }
}

/// `proc-title-template` as redis-server's `validateProcTitleTemplate`
/// checks it: `{name}` for a known variable, `{{` and `}}` for braces, an
/// unclosed `{` refused, and a template that would expand to nothing
/// refused (it expands `{title}` as empty, so `{title}` alone is).
fn proc_title_template(args: &[String]) -> Result<String, Invalid> {
    const INVALID: &str = "template format is invalid or contains unknown variables";
    /// Whether a variable expands to text when checked (the listening
    /// address and the ports do; the title and the others may not), or
    /// `None` for an unknown one.
    fn expands(name: &str) -> Option<bool> {
        match name {
            "listen-addr" | "port" | "tls-port" | "config-file" => Some(true),
            "title" | "server-mode" | "unixsocket" => Some(false),
            _ => None,
        }
    }
    let v = one(args)?;
    let mut text = false;
    let mut rest = v;
    while let Some(c) = rest.chars().next() {
        if let Some(after) = rest.strip_prefix("{{").or_else(|| rest.strip_prefix("}}")) {
            text = true;
            rest = after;
        } else if let Some(after) = rest.strip_prefix('{') {
            let (name, after) = after.split_once('}').ok_or(INVALID)?;
            text |= expands(name).ok_or(INVALID)?;
            rest = after;
        } else {
            // redis-server trims the expanded title's spaces.
            text |= c != ' ';
            rest = &rest[c.len_utf8()..];
        }
    }
    if !text {
        return Err(INVALID.into());
    }
    Ok(v.to_owned())
}

fn memory_text(args: &[String]) -> Result<String, Invalid> {
    let n = memory(args)?;
    if n > i64::MAX as u64 {
        return Err(Invalid::Range(
            format!("'{}': expected a size up to {}", one(args)?, i64::MAX),
            0,
            i64::MAX.into(),
        ));
    }
    Ok(n.to_string())
}

fn int_text<const MIN: i64, const MAX: i64>(args: &[String]) -> Result<String, Invalid> {
    integer_in(args, "an integer", MIN.into(), MAX.into()).map(|n| n.to_string())
}

fn word_of(args: &[String], words: &'static [&'static str]) -> Result<String, Invalid> {
    let v = one(args)?.to_ascii_lowercase();
    if words.contains(&v.as_str()) {
        Ok(v)
    } else {
        Err(Invalid::OneOf(v, words))
    }
}

fn repl_diskless_load(args: &[String]) -> Result<String, Invalid> {
    word_of(args, &["disabled", "on-empty-db", "swapdb"])
}

/// `relative` is redis-server's other name for `yes`, printed as `yes`.
fn oom_score_adj(args: &[String]) -> Result<String, Invalid> {
    let v = word_of(args, &["no", "yes", "relative", "absolute"])?;
    Ok(if v == "relative" { "yes".into() } else { v })
}

/// Three integers from -2000 to 2000, as redis-server checks them.
fn oom_score_adj_values(args: &[String]) -> Result<String, Invalid> {
    let words: Vec<&str> = args.iter().flat_map(|a| a.split_whitespace()).collect();
    let values: Option<Vec<i64>> = words
        .iter()
        .map(|w| w.parse().ok().filter(|n: &i64| (-2000..=2000).contains(n)))
        .collect();
    if words.len() != 3 {
        return Err("wrong number of arguments".into());
    }
    match values {
        Some(v) => Ok(v.iter().map(i64::to_string).collect::<Vec<_>>().join(" ")),
        None => {
            Err("Invalid oom-score-adj-values, elements must be between -2000 and 2000.".into())
        }
    }
}

/// The server's [`emberkv::Options::compaction_garbage`]: 1.0 (the
/// engine's default is 0.5). No segment's share of garbage reaches 1.0
/// (its header and pads count in its length), so while writes go on
/// compaction works only as the space bound calls for (the engine
/// compacts the segments with the most garbage once the files near it),
/// as redis-server leaves its AOF alone until it has grown by
/// `auto-aof-rewrite-percentage`; with that at 0 (no bound) it does not
/// work at all while writes go on, as redis-server then never rewrites
/// on its own. Once writers are quiet it takes segments two thirds
/// garbage. Under the capped server
/// benchmark this cut the maintenance thread's CPU by a fifth to a
/// quarter under SET and MSET, and the files ran at 1.85-1.98 times the
/// data against 1.33-1.90 (bound 2.0), and came to rest at 1.56-1.66
/// (1.13-1.17 with the engine's default; 1.44 at a bound of 1.5);
/// docs/PERFORMANCE.md, 2026-12-05.
pub const SERVER_COMPACTION_GARBAGE: f64 = 1.0;

impl Config {
    /// The engine options the server opens its store with: the hot tier
    /// and the space bound these settings give, compaction that, while
    /// writes go on, reclaims only what that bound calls for
    /// ([`SERVER_COMPACTION_GARBAGE`]), at most `store_files` segment
    /// files open, and values stored as given (`Compression::None`, not
    /// the engine's default LZ4): compaction compressing on the server's
    /// one CPU made pipelined GETs after a SET run 36% slower with zstd
    /// (0.57x redis-server against 1.15x, `docs/PERFORMANCE.md`,
    /// 2026-12-01), and LZ4 has not been measured on the server yet.
    pub fn engine_options(&self) -> emberkv::Options {
        let bound = match self.aof_rewrite_percentage {
            0 => f64::INFINITY,
            n => 1.0 + n as f64 / 100.0,
        };
        emberkv::Options::default()
            .hot_bytes(usize::try_from(self.hot_bytes).unwrap_or(usize::MAX))
            .max_space_amplification(bound)
            .compaction_garbage(Some(SERVER_COMPACTION_GARBAGE))
            .max_open_files(usize::try_from(self.store_files).unwrap_or(usize::MAX))
            .compression(emberkv::Compression::None)
    }
}

fn yes(b: bool) -> String {
    if b { "yes" } else { "no" }.into()
}

fn path_text(p: Option<&Path>) -> String {
    p.map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The setting named `name` (case-insensitive).
pub fn param(name: &str) -> Option<&'static Param> {
    let name = ALIASES
        .iter()
        .find(|(alias, _)| alias.eq_ignore_ascii_case(name))
        .map_or(name, |&(_, canonical)| canonical);
    PARAMS.iter().find(|p| p.name.eq_ignore_ascii_case(name))
}

/// The older names redis-server 7.0 still takes for settings here (a
/// redis.conf of Redis 6 names them so), with the names they stand for.
pub const ALIASES: &[(&str, &str)] = &[
    ("slave-serve-stale-data", "replica-serve-stale-data"),
    ("slave-read-only", "replica-read-only"),
    ("slave-priority", "replica-priority"),
    ("slave-lazy-flush", "replica-lazy-flush"),
    ("hash-max-ziplist-entries", "hash-max-listpack-entries"),
    ("hash-max-ziplist-value", "hash-max-listpack-value"),
    ("list-max-ziplist-size", "list-max-listpack-size"),
    ("zset-max-ziplist-entries", "zset-max-listpack-entries"),
    ("zset-max-ziplist-value", "zset-max-listpack-value"),
    ("lua-time-limit", "busy-reply-threshold"),
];

impl Param {
    /// The setting's value as CONFIG GET prints it.
    pub fn get(&self, config: &Config) -> String {
        (self.get)(config)
    }

    /// Sets the value from its words.
    ///
    /// # Errors
    /// A message saying what value was expected.
    pub fn set(&self, config: &mut Config, args: &[String]) -> Result<(), Invalid> {
        (self.set)(config, args)
    }
}

impl Config {
    /// Applies one directive (a config-file line or a flag).
    ///
    /// # Errors
    /// For an unknown directive or a bad value.
    pub fn apply(&mut self, name: &str, args: &[String]) -> Result<(), String> {
        let p = param(name).ok_or_else(|| format!("{name}: unknown option"))?;
        p.set(self, args).map_err(|e| format!("{}: {e}", p.name))
    }

    /// Checks the settings together.
    ///
    /// # Errors
    /// When the server would have nothing to listen on.
    pub fn validate(&self) -> Result<(), String> {
        if self.port == 0 && self.unixsocket.is_none() {
            return Err("configured to not listen anywhere (--port 0 and no --unixsocket)".into());
        }
        Ok(())
    }

    /// The directory holding the store: `<dir>/<dbfilename>`.
    pub fn store_path(&self) -> PathBuf {
        self.dir.join(&self.dbfilename)
    }

    /// Reads a config file's directives into `self`.
    ///
    /// # Errors
    /// An unreadable file, an unknown directive or a bad value, with the
    /// file name and line number.
    pub fn load_file(&mut self, path: &Path) -> Result<(), ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError(format!("cannot read config file {}: {e}", path.display())))?;
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let at = |msg: String| ConfigError(format!("{}:{}: {msg}", path.display(), i + 1));
            let words = crate::request::split_args(line.as_bytes())
                .ok_or_else(|| at("unbalanced quotes".into()))?;
            let mut words = words
                .into_iter()
                .map(|w| String::from_utf8(w).map_err(|_| at("not UTF-8".into())));
            let name = words.next().expect("a non-blank line has a word")?;
            let args: Vec<String> = words.collect::<Result<_, _>>()?;
            self.apply(&name, &args).map_err(at)?;
        }
        // Absolute, as INFO prints it (the server changes into `dir`).
        self.config_file = Some(std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()));
        Ok(())
    }
}

/// Parses the command line (without the program name).
///
/// # Errors
/// One line naming the bad flag or value.
pub fn from_args(args: Vec<OsString>) -> Result<Action, ConfigError> {
    let args: Vec<String> = args
        .into_iter()
        .map(|a| {
            a.into_string()
                .map_err(|a| ConfigError(format!("argument {a:?} is not UTF-8")))
        })
        .collect::<Result<_, _>>()?;
    let mut config = Config::default();
    let mut rest = &args[..];
    match rest.first().map(String::as_str) {
        Some("--help" | "-h") => return Ok(Action::Help),
        Some("--version" | "-v") => return Ok(Action::Version),
        Some(first) if !first.starts_with("--") => {
            config.load_file(Path::new(first))?;
            rest = &rest[1..];
        }
        _ => {}
    }
    while let Some((flag, tail)) = rest.split_first() {
        let Some(name) = flag.strip_prefix("--") else {
            return Err(ConfigError(format!(
                "unexpected argument '{flag}' (flags are spelled --name value; see --help)"
            )));
        };
        match name {
            "help" => return Ok(Action::Help),
            "version" => return Ok(Action::Version),
            _ => {}
        }
        let n = tail
            .iter()
            .position(|a| a.starts_with("--"))
            .unwrap_or(tail.len());
        let mut values = tail[..n].to_vec();
        if values.is_empty() {
            values.push(String::new());
        }
        config
            .apply(name, &values)
            .map_err(|e| ConfigError(format!("--{e}")))?;
        rest = &tail[n..];
    }
    config.validate().map_err(ConfigError)?;
    Ok(Action::Run(Box::new(config)))
}

/// The `--help` text.
pub fn help() -> String {
    format!(
        "\
emberkv-server {version}: a Redis-protocol (RESP2 and RESP3) server over one emberkv store

Usage: emberkv-server [/path/to/config.conf] [--option value ...]
       emberkv-server --version | --help

The config file holds the same options as directives, one per line
(`port 6380`); flags given after it override it.

Options (redis-server's names):
  --port <n>                TCP port (default 6379; 0 disables TCP)
  --bind <addr> [addr ...]  addresses to listen on (default 127.0.0.1; a leading
                            '-' lets that bind fail; '*' is every IPv4 address)
  --unixsocket <path>       also listen on this unix socket
  --unixsocketperm <octal>  permissions of the unix socket (e.g. 700)
  --dir <path>              directory holding the store (default .)
  --dbfilename <name>       the store's directory inside --dir (default
                            {dbfilename}); the store is a directory of segment
                            files, not an RDB file
  --appendonly yes|no       reported only: every write is persisted anyway
  --appendfsync <mode>      always: a write is acknowledged only after an
                            fdatasync that covers it (group commit shared by
                            all clients); everysec: the engine's background
                            flush, every 100 ms (stricter than a second);
                            no: the same background flush (there is no looser
                            mode). Default everysec
  --maxmemory <bytes>       accepted and reported by CONFIG GET and INFO, but
                            NOT enforced: the engine has no eviction yet
  --maxclients <n>          refuse clients beyond this many (default 10000)
  --timeout <seconds>       close clients idle this long (default 0: never)
  --requirepass <password>  require AUTH (compared in constant time)
  --protected-mode yes|no   with no password, refuse non-loopback clients
                            (default yes)
  --loglevel <level>        debug, verbose, notice (default), warning, nothing
  --logfile <path>          log to this file (default: standard output)
  --daemonize yes|no        detach into the background (default no)
  --pidfile <path>          write the process id here, removed at exit
                            (daemonized without one: /var/run/redis.pid)
  --supervised <mode>       upstart, systemd, auto or no (default): how a
                            supervisor is told the server is ready
  --tcp-backlog <n>         queue of pending TCP connections (default 511)
  --tcp-keepalive <seconds> keepalive probes on idle TCP clients after this
                            long (default 300; 0: none)
  --databases <n>           accepted; one database (0) is served whatever n is
  --io-threads <n>          event loop threads (default: one per CPU)
  --proto-max-bulk-len <n>  largest bulk string accepted (default 512mb)
  --client-query-buffer-limit <n>
                            largest query buffer of a client (default 1gb)
  --save <...>              accepted and ignored (no snapshots to schedule)
  --latency-tracking yes|no keep per-command latency histograms for INFO
                            latencystats (default yes)
  --latency-tracking-info-percentiles <p ...>
                            the percentiles INFO latencystats prints, each
                            from 0 to 100 (default: 50 99 99.9)
  --auto-aof-rewrite-percentage <n>
                            reclaim garbage before the files grow past the
                            data by n percent (default 100: at most twice the
                            data, as redis-server lets its AOF grow; 0: no
                            bound; else at least 30)
  --hot-bytes <n>           emberkv only: memory for the engine's hot tier, the
                            in-memory tail of its log (default 256mb); older
                            records are read from the segment files
  --version                 print the version and exit
  --help                    print this help and exit

redis-server's directives for what this server does not have (RDB snapshots,
the AOF's own files, replication, encodings of other types, lazy freeing,
jemalloc, the slow log, hz, the process title) are checked and accepted
without effect, so that a stock redis.conf starts it; the log lists those set.
`client-output-buffer-limit` takes only `normal 0 0 0` for normal clients and
`notify-keyspace-events` only \"\".

Sizes take redis-server's units: 1k = 1000, 1kb = 1024, also m, mb, g, gb.
Keys are at most 64 KiB and values at most 64 MiB (the engine's limits).
SIGTERM, SIGINT and SHUTDOWN close the store cleanly: every acknowledged
write is on disk before the process exits.
",
        version = env!("CARGO_PKG_VERSION"),
        dbfilename = DEFAULT_DBFILENAME
    )
}

/// The `--version` line.
pub fn version() -> String {
    format!(
        "emberkv-server v={} (RESP2/RESP3, Redis {} command set)",
        env!("CARGO_PKG_VERSION"),
        crate::REDIS_VERSION
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Action, ConfigError> {
        from_args(args.iter().map(OsString::from).collect())
    }

    fn run(args: &[&str]) -> Config {
        match parse(args) {
            Ok(Action::Run(c)) => *c,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn defaults_match_redis_server() {
        let c = run(&[]);
        assert_eq!(c.port, 6379);
        assert_eq!(c.bind, vec!["127.0.0.1"]);
        assert!(c.protected_mode);
        assert_eq!(c.appendfsync, Fsync::EverySec);
        assert_eq!(c.maxclients, 10_000);
        assert_eq!(c.store_path(), Path::new("./dump.emberkv"));
    }

    #[test]
    fn the_aof_rewrite_percentage_sets_the_space_bound() {
        let bound = |c: &Config| c.engine_options().max_space_amplification;
        assert_eq!(bound(&run(&[])), 2.0);
        assert_eq!(
            run(&[]).engine_options().compaction_garbage,
            Some(SERVER_COMPACTION_GARBAGE)
        );
        assert_eq!(bound(&run(&["--auto-aof-rewrite-percentage", "50"])), 1.5);
        assert_eq!(
            bound(&run(&["--auto-aof-rewrite-percentage", "0"])),
            f64::INFINITY
        );
        assert_eq!(bound(&run(&["--auto-aof-rewrite-percentage", "30"])), 1.3);
        for bad in ["1", "29", "-5", "x"] {
            let parsed = parse(&["--auto-aof-rewrite-percentage", bad]);
            assert!(
                !matches!(parsed, Ok(Action::Run(_))),
                "{bad} accepted: {parsed:?}"
            );
        }
    }

    #[test]
    fn flags_take_the_words_up_to_the_next_flag() {
        let c = run(&[
            "--port",
            "7000",
            "--bind",
            "127.0.0.1",
            "-::1",
            "--appendfsync",
            "always",
            "--maxmemory",
            "100mb",
            "--requirepass",
            "s3cret",
            "--unixsocketperm",
            "700",
        ]);
        assert_eq!(c.port, 7000);
        assert_eq!(c.bind, vec!["127.0.0.1", "-::1"]);
        assert_eq!(c.appendfsync, Fsync::Always);
        assert_eq!(c.maxmemory, 100 * 1024 * 1024);
        assert_eq!(c.requirepass.as_deref(), Some("s3cret"));
        assert_eq!(c.unixsocketperm, Some(0o700));
    }

    #[test]
    fn output_buffer_limits_merge_per_class_as_redis_prints_them() {
        let c = run(&[
            "--client-output-buffer-limit",
            "replica 1mb 512kb 10 pubsub 0 0 0",
        ]);
        let limits = param("client-output-buffer-limit").unwrap().get(&c);
        assert_eq!(limits, "normal 0 0 0 slave 1048576 524288 10 pubsub 0 0 0");
        let mut c = c;
        c.apply("client-output-buffer-limit", &["SLAVE 2gb 1gb 0".into()])
            .unwrap();
        let limits = param("client-output-buffer-limit").unwrap().get(&c);
        assert_eq!(
            limits,
            "normal 0 0 0 slave 2147483648 1073741824 0 pubsub 0 0 0"
        );
        for bad in [
            "normal 0 0",
            "clients 0 0 0",
            "pubsub 1q 0 0",
            "pubsub 0 0 -1",
            "normal 0 0 5",
        ] {
            assert!(
                c.apply("client-output-buffer-limit", &[bad.into()])
                    .is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn inert_directives_check_their_values_and_keep_them_for_config_get() {
        let c = run(&["--hz", "100", "--oom-score-adj-values", "0 -200 2000"]);
        let get = |c: &Config, name: &str| param(name).unwrap().get(c);
        assert_eq!(get(&c, "hz"), "100");
        assert_eq!(get(&c, "save"), "", "no snapshots by default");
        let saves = run(&["--save", "3600  1 300 100"]);
        assert_eq!(get(&saves, "save"), "3600 1 300 100");
        assert_eq!(get(&c, "oom-score-adj-values"), "0 -200 2000");
        assert_eq!(get(&c, "dynamic-hz"), "yes", "redis-server's default");
        assert_eq!(
            c.inert.keys().copied().collect::<Vec<_>>(),
            ["hz", "oom-score-adj-values"],
            "only what was set is logged as without effect"
        );
        for (flag, bad) in [
            ("--hz", "-1"),
            ("--dynamic-hz", "maybe"),
            ("--oom-score-adj-values", "0 200"),
            ("--oom-score-adj-values", "0 200 3000"),
            ("--repl-diskless-load", "sometimes"),
            ("--auto-aof-rewrite-min-size", "64 mb"),
            ("--list-max-listpack-size", "3000000000"),
        ] {
            assert!(
                !matches!(parse(&[flag, bad]), Ok(Action::Run(_))),
                "{flag} {bad}"
            );
        }
    }

    /// What an attack helper found differing from redis-server 7.0.15
    /// (2026-12-07), each now as redis-server has it.
    #[test]
    fn inert_directives_keep_and_refuse_what_redis_server_does() {
        let get = |c: &Config, name: &str| param(name).unwrap().get(c);
        let c = run(&["--hz", "0", "--oom-score-adj", "relative"]);
        assert_eq!(
            (get(&c, "hz"), get(&c, "oom-score-adj")),
            ("1".into(), "yes".into())
        );
        assert_eq!(get(&run(&["--hz", "2147483647"]), "hz"), "500");
        for ok in [
            "x",
            "}",
            "{{title}}",
            "{title} {port}",
            "{listen-addr}",
            "{config-file}",
        ] {
            assert_eq!(
                get(&run(&["--proc-title-template", ok]), "proc-title-template"),
                ok
            );
        }
        for (flag, bad) in [
            ("--proc-title-template", ""),
            ("--proc-title-template", "{title}"),
            ("--proc-title-template", "{foo}"),
            ("--proc-title-template", "{title"),
            ("--proc-title-template", "{title} "),
            ("--proc-title-template", " "),
            ("--hz", "07"),
            ("--replica-priority", "-0"),
            ("--appendfilename", "a/b"),
            ("--appendfilename", ""),
            ("--appenddirname", ".."),
            ("--hash-max-listpack-value", "9223372036854775808"),
            ("--acllog-max-len", "9223372036854775808"),
        ] {
            assert!(
                !matches!(parse(&[flag, bad]), Ok(Action::Run(_))),
                "{flag} {bad:?}"
            );
        }
        let mut c = run(&[]);
        let limits = get(&c, "client-output-buffer-limit");
        c.apply("client-output-buffer-limit", &[String::new()])
            .unwrap();
        assert_eq!(
            get(&c, "client-output-buffer-limit"),
            limits,
            "\"\" changes nothing"
        );
        // Redis 6's names.
        let c = run(&["--slave-read-only", "no", "--lua-time-limit", "100"]);
        assert_eq!(get(&c, "replica-read-only"), "no");
        assert_eq!(get(&c, "slave-read-only"), "no");
        assert_eq!(get(&c, "busy-reply-threshold"), "100");
    }

    #[test]
    fn bad_flags_and_values_are_one_line_errors() {
        for (args, want) in [
            (vec!["--nope", "1"], "--nope: unknown option"),
            (vec!["--port", "x"], "--port: 'x': expected a port number"),
            (vec!["--port", "70000"], "--port: '70000'"),
            (
                vec!["--appendfsync", "sometimes"],
                "--appendfsync: 'sometimes'",
            ),
            (vec!["--daemonize", "maybe"], "--daemonize: 'maybe'"),
            (
                vec!["--client-output-buffer-limit", "normal 1mb 0 0"],
                "--client-output-buffer-limit: emberkv-server takes only",
            ),
            (
                vec!["--notify-keyspace-events", "KEA"],
                "--notify-keyspace-events: 'KEA': keyspace notifications",
            ),
            (vec!["--hz", "x"], "--hz: 'x': expected an integer"),
            (vec!["--databases", "0"], "--databases: '0'"),
            (
                vec!["--protected-mode", "maybe"],
                "--protected-mode: 'maybe'",
            ),
            (vec!["--port", "0"], "configured to not listen anywhere"),
            (
                vec!["--bind", "localhost"],
                "--bind: 'localhost' is not an IP",
            ),
            (vec!["--maxmemory", "12q"], "--maxmemory: '12q'"),
            (
                vec!["--port", "1", "stray"],
                "--port: expected one value, got 2",
            ),
        ] {
            let e = parse(&args).unwrap_err().to_string();
            assert!(e.starts_with(want), "{args:?}: {e}");
            assert!(!e.contains('\n'), "{e}");
        }
    }

    #[test]
    fn help_and_version() {
        assert!(matches!(parse(&["--help"]), Ok(Action::Help)));
        assert!(matches!(
            parse(&["--port", "1", "--version"]),
            Ok(Action::Version)
        ));
        assert!(help().contains("NOT enforced"));
    }

    #[test]
    fn config_file_then_flags() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("e.conf");
        std::fs::write(
            &file,
            "# comment\n\nport 7001\nrequirepass \"a b\"\nbind 127.0.0.1 ::1\n",
        )
        .unwrap();
        let c = run(&[file.to_str().unwrap(), "--port", "7002"]);
        assert_eq!(c.port, 7002);
        assert_eq!(c.requirepass.as_deref(), Some("a b"));
        assert_eq!(c.bind, vec!["127.0.0.1", "::1"]);
        assert_eq!(c.config_file.as_deref(), Some(file.as_path()));

        std::fs::write(&file, "port 1\nbogus 2\n").unwrap();
        let e = parse(&[file.to_str().unwrap()]).unwrap_err().to_string();
        assert!(e.ends_with(":2: bogus: unknown option"), "{e}");
        let e = parse(&["/nonexistent/x.conf"]).unwrap_err().to_string();
        assert!(e.starts_with("cannot read config file"), "{e}");
    }

    #[test]
    fn memory_units() {
        assert_eq!(parse_memory("100"), Some(100));
        assert_eq!(parse_memory("1k"), Some(1000));
        assert_eq!(parse_memory("1KB"), Some(1024));
        assert_eq!(parse_memory("2gb"), Some(2 << 30));
        assert_eq!(parse_memory("1tb"), None);
        assert_eq!(parse_memory(""), None);
    }

    /// Refusals word themselves for a flag, and as redis-server 7.0.15
    /// answered the same CONFIG SET (the differential tests compare the
    /// replies themselves where redis-server is installed).
    #[test]
    fn refusals_are_worded_for_flags_and_as_redis_words_them() {
        let refusal = |name: &str, value: &str| {
            let mut c = Config::default();
            let e = param(name).unwrap().set(&mut c, &[value.to_string()]);
            let e = e.expect_err(value);
            (e.to_string(), e.redis())
        };
        let cases = [
            (
                "timeout",
                "abc",
                "'abc': expected a number of seconds",
                "argument couldn't be parsed into an integer",
            ),
            (
                "timeout",
                "+5",
                "'+5': expected a number of seconds",
                "argument couldn't be parsed into an integer",
            ),
            (
                "timeout",
                "-1",
                "'-1': expected a number of seconds from 0 to 2147483647",
                "argument must be between 0 and 2147483647 inclusive",
            ),
            (
                "timeout",
                "99999999999999999999999",
                "'99999999999999999999999': expected a number of seconds",
                "argument couldn't be parsed into an integer",
            ),
            (
                "maxclients",
                "0",
                "'0': expected a number of clients from 1 to 4294967295",
                "argument must be between 1 and 4294967295 inclusive",
            ),
            (
                "maxmemory",
                "1xb",
                "'1xb': expected a size such as 100mb or 1gb",
                "argument must be a memory value",
            ),
            (
                "appendonly",
                "maybe",
                "'maybe': expected yes or no",
                "argument must be 'yes' or 'no'",
            ),
            (
                "appendfsync",
                "sometimes",
                "'sometimes': expected everysec, always or no",
                "argument(s) must be one of the following: everysec, always, no",
            ),
            (
                "loglevel",
                "loud",
                "'loud': expected debug, verbose, notice, warning or nothing",
                "argument(s) must be one of the following: debug, verbose, notice, warning, nothing",
            ),
            (
                "maxmemory-policy",
                "allkeys-lru",
                "'allkeys-lru': only noeviction is supported",
                "'allkeys-lru': only noeviction is supported",
            ),
            (
                "proto-max-bulk-len",
                "10",
                "proto-max-bulk-len must be at least 1mb",
                "argument must be between 1048576 and 9223372036854775807 inclusive",
            ),
            (
                "client-query-buffer-limit",
                "x",
                "'x': expected a size such as 100mb or 1gb",
                "argument must be a memory value",
            ),
            (
                "save",
                "3600 -1",
                "Invalid save parameters",
                "Invalid save parameters",
            ),
        ];
        for (name, value, flag, redis) in cases {
            assert_eq!(
                refusal(name, value),
                (flag.to_string(), redis.to_string()),
                "{name} {value}"
            );
        }
        let policy = refusal("maxmemory-policy", "foo").1;
        assert!(policy.ends_with("allkeys-random, noeviction"), "{policy}");
        let mut c = Config::default();
        for value in ["", "3600 1", "3600 1 300 100 60 10000"] {
            param("save")
                .unwrap()
                .set(&mut c, &[value.to_string()])
                .unwrap();
        }
        param("timeout")
            .unwrap()
            .set(&mut c, &["2147483647".into()])
            .unwrap();
        assert_eq!(c.timeout, 2_147_483_647);
    }

    #[test]
    fn every_param_round_trips_its_default() {
        let mut c = Config::default();
        for p in PARAMS {
            let v = p.get(&c);
            p.set(&mut c, std::slice::from_ref(&v))
                .unwrap_or_else(|e| panic!("{}={v}: {e}", p.name));
            assert_eq!(p.get(&c), v, "{}", p.name);
        }
    }
}
