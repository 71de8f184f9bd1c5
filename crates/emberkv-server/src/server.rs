//! Start-up, listeners, the cron thread, and clean shutdown.
//!
//! [`run`] binds every TCP address, opens the store, binds the unix
//! socket, starts the event loops ([`crate::event_loop`]), and serves
//! until SIGTERM, SIGINT or SHUTDOWN. Then it stops accepting, tells every
//! connection to close, waits for them, and closes the store (a flush and
//! fdatasync), so nothing acknowledged is lost.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::RwLock;

use crate::clients::Clients;
use crate::commit::GroupCommit;
use crate::config::{Config, DEFAULT_PIDFILE, Fsync, Supervised};
use crate::event_loop::{EventLoop, Listener};
use crate::fd_limit;
use crate::shutdown::{Reason, Shutdown};
use crate::stats::Stats;
use crate::store::Store;
use crate::{notice, verbose, warning};
use signal_hook::consts::{SIGINT, SIGTERM};

/// Settings the connection loop reads on every batch, mirrored from
/// [`Config`] into atomics when it changes.
#[derive(Debug)]
pub struct Live {
    /// `appendfsync always`.
    pub fsync_always: AtomicBool,
    /// `proto-max-bulk-len`.
    pub max_bulk: AtomicU64,
    /// `client-query-buffer-limit`.
    pub qbuf_limit: AtomicU64,
    /// `latency-tracking`.
    pub latency_tracking: AtomicBool,
    /// No `requirepass` is set: every client counts as authenticated,
    /// those that connected while one was set too (as in Redis 7, whose
    /// `authRequired` looks at the password now, not at connect).
    pub no_password: AtomicBool,
}

impl Live {
    fn new(c: &Config) -> Live {
        let live = Live {
            fsync_always: AtomicBool::new(false),
            max_bulk: AtomicU64::new(0),
            qbuf_limit: AtomicU64::new(0),
            latency_tracking: AtomicBool::new(false),
            no_password: AtomicBool::new(true),
        };
        live.update(c);
        live
    }

    /// Mirrors `c`.
    pub fn update(&self, c: &Config) {
        self.fsync_always
            .store(c.appendfsync == Fsync::Always, Ordering::Relaxed);
        self.max_bulk.store(c.proto_max_bulk_len, Ordering::Relaxed);
        self.qbuf_limit
            .store(c.client_query_buffer_limit, Ordering::Relaxed);
        self.latency_tracking
            .store(c.latency_tracking, Ordering::Relaxed);
        self.no_password
            .store(c.requirepass.is_none(), Ordering::Relaxed);
    }
}

/// State shared by every connection.
#[derive(Debug)]
pub struct Shared {
    /// The store.
    pub store: Store,
    /// Current settings.
    pub config: RwLock<Config>,
    /// Hot-path mirror of some settings.
    pub live: Live,
    /// Connected clients.
    pub clients: Arc<Clients>,
    /// Counters.
    pub stats: Stats,
    /// `appendfsync always`: one sync at a time for every waiting
    /// connection.
    pub commit: GroupCommit,
    /// The shutdown request (SIGTERM, SIGINT, SHUTDOWN).
    pub shutdown: Arc<Shutdown>,
    /// When the server started.
    pub started: Instant,
    /// A random 40-hex-digit id of this run.
    pub run_id: String,
    /// The TCP port actually bound (0 when TCP is off).
    pub tcp_port: u16,
    /// Path of this executable.
    pub executable: String,
}

impl Shared {
    /// The state of a server serving `store` with `config`, whose TCP
    /// port `tcp_port` is bound (0: none).
    pub fn new(config: Config, store: Store, tcp_port: u16) -> Shared {
        Shared {
            store,
            live: Live::new(&config),
            clients: Arc::new(Clients::new(config.maxclients)),
            config: RwLock::new(config),
            stats: Stats::default(),
            commit: GroupCommit::default(),
            shutdown: Arc::new(Shutdown::default()),
            started: Instant::now(),
            run_id: (0..40)
                .map(|_| char::from_digit(fastrand::u32(0..16), 16).expect("hex digit"))
                .collect(),
            tcp_port,
            executable: std::env::current_exe()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
        }
    }

    /// Starts the shutdown (the SHUTDOWN command).
    pub fn request_shutdown(&self) {
        self.shutdown.request(Reason::Command);
    }

    /// Makes every acknowledged write durable before a shutdown asked for
    /// by `by` (SHUTDOWN, SIGTERM, SIGINT); returns whether it may go
    /// ahead. A store that cannot (a full disk) keeps the server running,
    /// as Redis does when its final save fails, and the failure is logged
    /// (found by an attack: the server exited and lost the writes
    /// acknowledged since its last flush).
    pub fn sync_before_shutdown(&self, by: &str) -> bool {
        match self.store.sync() {
            Ok(()) => true,
            Err(e) => {
                warning!(
                    "{by}: errors trying to shut down the server: the store's sync failed \
                     ({e}); it keeps running so that no acknowledged write is lost"
                );
                false
            }
        }
    }
}

/// Redis 7's reply to a client refused by protected mode.
pub const DENIED: &str = "-DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the default user. In this mode connections are only accepted from the loopback interface. If you want to connect from external computers to Redis you may adopt one of the following solutions: 1) Just disable protected mode sending the command 'CONFIG SET protected-mode no' from the loopback interface by connecting to Redis from the same host the server is running, however MAKE SURE Redis is not publicly accessible from internet if you do so. Use CONFIG REWRITE to make this change permanent. 2) Alternatively you can just disable the protected mode by editing the Redis configuration file, and setting the protected mode option to 'no', and then restarting the server. 3) If you started the server manually just for testing, restart it with the '--protected-mode no' option. 4) Set up an authentication password for the default user. NOTE: You only need to do one of the above things in order for the server to start accepting connections from the outside.\r\n";

/// Redis's reply to a client beyond `maxclients`.
pub const MAX_CLIENTS: &str = "-ERR max number of clients reached\r\n";

/// Whether protected mode refuses a TCP client from `peer`: protected
/// mode is on, no password is set, and the peer is not loopback (a
/// non-loopback peer can only arrive when the bind is not loopback-only).
pub fn protected_denies(config: &Config, peer: IpAddr) -> bool {
    config.protected_mode && config.requirepass.is_none() && !is_loopback(peer)
}

fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

/// Serves `config` until shut down.
///
/// # Errors
/// One line: the store cannot be opened, an address cannot be bound, the
/// log file cannot be opened.
pub fn run(mut config: Config) -> Result<(), String> {
    config.dir = std::fs::canonicalize(&config.dir)
        .map_err(|e| format!("cannot use --dir '{}': {e}", config.dir.display()))?;
    // As redis-server, which changes into `dir` when it reads the setting:
    // a relative `logfile`, `pidfile` or `unixsocket` lies in it.
    std::env::set_current_dir(&config.dir)
        .map_err(|e| format!("cannot use --dir '{}': {e}", config.dir.display()))?;
    crate::log::init(config.loglevel, &config.logfile)
        .map_err(|e| format!("cannot open log file '{}': {e}", config.logfile))?;
    let (supervised, unsupervised) = crate::supervise::resolve(config.supervised);
    if let Some(why) = unsupervised {
        warning!("{why}");
    }
    // Not under a supervisor that waits for this process, as
    // redis-server; before any thread starts: a fork takes only the
    // calling one.
    if config.daemonize && supervised == Supervised::No {
        crate::supervise::daemonize()?;
        // A daemon always has a pid file, as redis-server's.
        if config.pidfile.is_none() {
            config.pidfile = Some(DEFAULT_PIDFILE.into());
        }
    }
    let logfile = config.logfile.clone();
    start(config, supervised).inspect_err(|e| {
        // Standard error may be /dev/null (a daemon) or not kept.
        if !logfile.is_empty() {
            warning!("{e}");
        }
    })
}

/// [`run`] once the process is set up: binds, opens the store, writes the
/// pid file, serves, closes.
fn start(mut config: Config, supervised: Supervised) -> Result<(), String> {
    let threads = match config.io_threads {
        0 => std::thread::available_parallelism().map_or(1, usize::from),
        n => n,
    };

    let path = config.store_path();
    // Before the first log line, so that a signal after it finds them.
    let signals = SignalThread::start()?;
    notice!(
        "emberkv-server {} starting, pid={}, store {}",
        env!("CARGO_PKG_VERSION"),
        std::process::id(),
        path.display()
    );
    if !config.inert.is_empty() {
        let names: Vec<&str> = config.inert.keys().copied().collect();
        notice!(
            "Accepted without effect in emberkv-server: {}",
            names.join(", ")
        );
    }
    if config.databases > 1 {
        warning!(
            "databases {}: emberkv-server serves one database (0); SELECT of any other fails",
            config.databases
        );
    }
    // TCP first: a port in use must not leave a new, empty store behind.
    // The unix socket comes after the store's lock: its stale file is
    // unlinked, and that of a server running on the same store must stay.
    let tcp = bind_tcp_all(&config)?;
    for l in &tcp {
        if let Ok(addr) = l.local_addr() {
            notice!("Listening on {addr} (tcp)");
        }
    }
    // The socket is bound after the store's lock is taken (above), but a
    // path that cannot be bound is refused before the store is created
    // (an audit found an empty store left behind).
    if let Some(socket) = &config.unixsocket {
        check_unix_path(socket)?;
    }
    // Before the store opens: it keeps `fd_limit::STORE_FILES` descriptors
    // for its segment files beside the clients', which the limit must
    // allow for while it replays them.
    adjust_maxclients(&mut config)?;
    let opened = Instant::now();
    let store = Store::open_with(&path, config.engine_options()).map_err(|e| {
        if path.is_file() {
            // A stock redis.conf names redis-server's `dump.rdb`.
            format!(
                "cannot open the store {}: it is a file (redis-server's RDB file?), and \
                     emberkv-server keeps its store in a directory: set dbfilename to another name",
                path.display()
            )
        } else {
            format!("cannot open the store {}: {e}", path.display())
        }
    })?;
    notice!(
        "Store loaded: {} keys in {:.3} seconds",
        store.db().len(),
        opened.elapsed().as_secs_f64()
    );
    if let Ok(stats) = store.db().stats()
        && stats.torn_bytes_cut > 0
    {
        warning!(
            "Opening the store cut {} bytes of a torn write off its newest segment \
             (records the last crash left unfinished, or damage past the durable mark)",
            stats.torn_bytes_cut
        );
    }

    // Written by `serve` once every listener is up, the store's lock held
    // and the signal handlers installed, and removed after the store is
    // closed: a second server that fails to start leaves the first one's
    // pid file alone.
    let mut pidfile = None;
    let store = serve(
        config,
        store,
        tcp,
        threads,
        supervised,
        signals,
        &mut pidfile,
    )?;
    let store = match store {
        Ok(store) => store,
        Err(shared) => {
            // A connection task did not finish in time and still holds the
            // store: sync what was acknowledged; the exit releases the lock.
            shared
                .store
                .sync()
                .map_err(|e| format!("final sync of the store failed: {e}"))?;
            notice!("emberkv-server is now ready to exit, bye bye...");
            return Ok(());
        }
    };
    store
        .close()
        .map_err(|e| format!("closing the store failed: {e}"))?;
    notice!("emberkv-server is now ready to exit, bye bye...");
    Ok(())
}

/// Lowers `maxclients` to what the open files limit allows beside the
/// descriptors open now (the listeners, the log; the store is not open
/// yet) and those kept for the store's segment files, once that limit is
/// raised as far as it goes, and sets how many segment files the store may
/// keep open (`store_files`; [`fd_limit::share`]); logs it in Redis's words.
///
/// # Errors
/// Not even one client fits.
fn adjust_maxclients(config: &mut Config) -> Result<(), String> {
    let in_use = fd_limit::open_descriptors().unwrap_or(0);
    let wanted = config.maxclients;
    let before = fd_limit::open_files_limit();
    let fd_limit::Share {
        fit:
            fd_limit::Fit {
                clients: fit,
                needed,
                limit,
            },
        store_files,
    } = fd_limit::share(wanted, in_use);
    if fit == 0 {
        return Err(format!(
            "Your current 'ulimit -n' of {limit} is not enough for the server to start \
             ({in_use} files are open). Please increase your open file limit to at least \
             {needed}."
        ));
    }
    config.store_files = store_files;
    config.base_fds = in_use;
    if fit < wanted {
        warning!(
            "You requested maxclients of {wanted} requiring at least {needed} max file descriptors."
        );
        warning!(
            "Current maximum open files is {limit}. maxclients has been reduced to {fit} to \
             compensate for low ulimit. If you need higher maxclients increase 'ulimit -n'."
        );
        warning!(
            "The store keeps up to {store_files} segment files' descriptors open (of {} where \
             the limit allows); it closes others and opens them again as needed.",
            fd_limit::STORE_FILES
        );
        config.maxclients = fit;
    } else if let Some(before) = before.filter(|&b| b < limit) {
        notice!(
            "Increased maximum number of open files to {limit} (it was originally set to {before})."
        );
    }
    Ok(())
}

/// Binds every `--bind` address on `--port` (none when it is 0); a
/// failure is an error unless the address is marked optional (`-addr`).
/// The listeners queue connections from then on (up to 511 each), which
/// are accepted once the store is open, as Redis binds before it loads
/// its data (it answers `-LOADING` meanwhile; these clients wait).
fn bind_tcp_all(config: &Config) -> Result<Vec<std::net::TcpListener>, String> {
    let mut tcp = Vec::new();
    if config.port != 0 {
        for addr in &config.bind {
            let (optional, addr) = match addr.strip_prefix('-') {
                Some(a) => (true, a),
                None => (false, addr.as_str()),
            };
            match bind_tcp(addr, config.port, config.tcp_backlog) {
                Ok(l) => tcp.push(l),
                Err(e) if optional => {
                    warning!("could not bind {addr}:{} (optional): {e}", config.port)
                }
                Err(e) => return Err(format!("cannot listen on {addr}:{}: {e}", config.port)),
            }
        }
    }
    Ok(tcp)
}

/// Binds the unix socket, serves on it and on the bound TCP listeners
/// `tcp` until shutdown, and hands back the store (or the shared state,
/// if a connection outlived the grace period).
fn serve(
    config: Config,
    store: Store,
    tcp: Vec<std::net::TcpListener>,
    threads: usize,
    supervised: Supervised,
    signals: SignalThread,
    pidfile: &mut Option<crate::supervise::PidFile>,
) -> Result<Result<Store, Arc<Shared>>, String> {
    let tcp_port = tcp
        .first()
        .and_then(|l| l.local_addr().ok())
        .map_or(0, |a| a.port());
    let mut listeners: Vec<Listener> = tcp
        .into_iter()
        .map(|l| Listener::Tcp(mio::net::TcpListener::from_std(l)))
        .collect();
    if let Some(path) = &config.unixsocket {
        let l = bind_unix(path, config.unixsocketperm)?;
        l.set_nonblocking(true)
            .map_err(|e| format!("cannot listen on unix socket {}: {e}", path.display()))?;
        notice!("Listening on {} (unix socket)", path.display());
        listeners.push(Listener::Unix(
            mio::net::UnixListener::from_std(l),
            path.display().to_string(),
        ));
    }
    let shared = Arc::new(Shared::new(config, store, tcp_port));

    // Before the first connection is accepted (the handlers were installed
    // at start-up): a client that sends SIGTERM once it is served must find
    // the server's, not the default action (found by
    // `expiry_survives_a_restart`, which failed once in a loaded test run
    // with a non-zero exit after SIGTERM).
    signals.serve(Arc::clone(&shared.shutdown));

    let mut loops = (0..threads)
        .map(|_| EventLoop::new(Arc::clone(&shared)))
        .collect::<std::io::Result<Vec<_>>>()
        .map_err(|e| format!("cannot create an event loop: {e}"))?;
    let handles: Vec<_> = loops.iter().map(EventLoop::handle).collect();
    loops[0]
        .listen(listeners, handles.clone())
        .map_err(|e| format!("cannot listen: {e}"))?;
    let mut threads_started = Vec::new();
    for (i, l) in loops.into_iter().enumerate() {
        let shutdown = Arc::clone(&shared.shutdown);
        let thread = std::thread::Builder::new()
            .name(format!("emberkv-io-{i}"))
            .spawn(move || {
                if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| l.run())).is_err() {
                    shutdown.request(Reason::LoopFailed);
                }
            })
            .map_err(|e| format!("cannot start an event loop thread: {e}"))?;
        threads_started.push(thread);
    }
    let cron_thread = {
        let shared = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("emberkv-cron".into())
            .spawn(move || cron(&shared))
            .map_err(|e| format!("cannot start the cron thread: {e}"))?
    };
    *pidfile = crate::supervise::PidFile::create(&shared.config.read());
    notice!("Ready to accept connections ({threads} io threads)");
    crate::supervise::ready(supervised);

    loop {
        let signal = match shared.shutdown.wait() {
            Reason::Terminate => "SIGTERM",
            Reason::Interrupt => "SIGINT",
            Reason::Command => {
                // SHUTDOWN synced the store already (or was forced).
                notice!("User requested shutdown...");
                break;
            }
            Reason::LoopFailed => {
                warning!("An event loop failed, shutting down...");
                break;
            }
        };
        notice!("Received {signal} scheduling shutdown...");
        if shared.sync_before_shutdown(signal) {
            break;
        }
        shared.shutdown.withdraw();
    }
    shared.shutdown.confirm();
    crate::supervise::stopping(supervised);
    for h in &handles {
        h.stop();
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while !shared.clients.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    for h in &handles {
        h.exit();
    }
    for t in threads_started {
        let _ = t.join();
    }
    let _ = cron_thread.join();
    signals.stop();
    if let Some(p) = &shared.config.read().unixsocket {
        let _ = std::fs::remove_file(p);
    }
    notice!("Closing the store: flushing and syncing every acknowledged write");
    Ok(Arc::try_unwrap(shared).map(|s| s.store))
}

/// SIGTERM and SIGINT, handled on a thread of their own from start-up on.
/// Before the server serves, one ends the process at once with exit code
/// 0, logged (the store opens after that as after a crash, which it is
/// built for), as redis-server stops when signalled while it loads; until
/// 2026-12-07 the signal's default action killed it without a line in the
/// log. Once the server serves, one requests a shutdown.
struct SignalThread {
    handle: signal_hook::iterator::Handle,
    thread: std::thread::JoinHandle<()>,
    serving: Arc<std::sync::OnceLock<Arc<Shutdown>>>,
}

impl SignalThread {
    /// Installs the handlers and starts the thread.
    ///
    /// # Errors
    /// The handlers or the thread cannot be had.
    fn start() -> Result<SignalThread, String> {
        let mut signals = signal_hook::iterator::Signals::new([SIGTERM, SIGINT])
            .map_err(|e| format!("cannot install the SIGTERM and SIGINT handlers: {e}"))?;
        let handle = signals.handle();
        let serving: Arc<std::sync::OnceLock<Arc<Shutdown>>> = Arc::default();
        let shutdown = Arc::clone(&serving);
        let thread = std::thread::Builder::new()
            .name("emberkv-signals".into())
            .spawn(move || {
                for signal in signals.forever() {
                    let (reason, name) = if signal == SIGTERM {
                        (Reason::Terminate, "SIGTERM")
                    } else {
                        (Reason::Interrupt, "SIGINT")
                    };
                    match shutdown.get() {
                        Some(shutdown) => shutdown.request(reason),
                        None => {
                            warning!("Received {name} during start-up, exiting now");
                            std::process::exit(0);
                        }
                    }
                }
            })
            .map_err(|e| format!("cannot start the signal thread: {e}"))?;
        Ok(SignalThread {
            handle,
            thread,
            serving,
        })
    }

    /// From now on a signal requests a shutdown through `shutdown`.
    fn serve(&self, shutdown: Arc<Shutdown>) {
        let _ = self.serving.set(shutdown);
    }

    /// Uninstalls the handlers and ends the thread.
    fn stop(self) {
        self.handle.close();
        let _ = self.thread.join();
    }
}

/// Longest unix socket path the kernel takes (`sun_path` holds 108
/// bytes, with the terminating NUL).
const MAX_SOCKET_PATH: usize = 107;

/// Refuses a unix socket path that [`bind_unix`] cannot bind: too long, or
/// in a directory that does not exist.
///
/// # Errors
/// One line naming the path and the reason.
fn check_unix_path(path: &std::path::Path) -> Result<(), String> {
    let len = path.as_os_str().len();
    if len > MAX_SOCKET_PATH {
        return Err(format!(
            "cannot listen on unix socket {}: the path is {len} bytes, more than {MAX_SOCKET_PATH}",
            path.display()
        ));
    }
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => std::path::Path::new("."),
    };
    if !parent.is_dir() {
        return Err(format!(
            "cannot listen on unix socket {}: directory {} does not exist",
            path.display(),
            parent.display()
        ));
    }
    Ok(())
}

/// Binds the unix socket at `path` (replacing a stale socket file) with
/// permissions `mode` when given. With a mode, the socket is bound under
/// a temporary name beside `path`, given its mode, and renamed into place,
/// so that no client ever finds it at `path` with the default mode (a
/// test saw the window between the bind and the chmod).
fn bind_unix(
    path: &std::path::Path,
    mode: Option<u32>,
) -> Result<std::os::unix::net::UnixListener, String> {
    let fail = |what: &str, e: std::io::Error| format!("cannot {what} {}: {e}", path.display());
    // A stale socket file from an earlier run would make bind fail.
    let _ = std::fs::remove_file(path);
    let Some(mode) = mode else {
        return std::os::unix::net::UnixListener::bind(path)
            .map_err(|e| fail("listen on unix socket", e));
    };
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".{}.tmp", std::process::id()));
    let temporary = std::path::PathBuf::from(name);
    let _ = std::fs::remove_file(&temporary);
    let listener = std::os::unix::net::UnixListener::bind(&temporary)
        .map_err(|e| fail("listen on unix socket", e))?;
    let placed = {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&temporary, std::fs::Permissions::from_mode(mode))
            .map_err(|e| fail("chmod", e))
            .and_then(|()| std::fs::rename(&temporary, path).map_err(|e| fail("create", e)))
    };
    if placed.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    placed.map(|()| listener)
}

fn bind_tcp(addr: &str, port: u16, backlog: i32) -> std::io::Result<std::net::TcpListener> {
    let ip: IpAddr = match addr {
        "*" => IpAddr::from([0, 0, 0, 0]),
        "::*" => IpAddr::from([0u16; 8]),
        a => a
            .parse()
            .map_err(|_| std::io::Error::other(format!("'{a}' is not an IP address")))?,
    };
    let sa = SocketAddr::new(ip, port);
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(sa),
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )?;
    if sa.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    socket.set_reuse_address(true)?;
    socket.bind(&sa.into())?;
    socket.listen(backlog)?;
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}

/// Every second until shutdown: the ops/sec sample and idle-client
/// timeouts.
fn cron(shared: &Shared) {
    let mut last = (Instant::now(), Stats::get(&shared.stats.commands));
    while !shared.shutdown.wait_timeout(Duration::from_secs(1)) {
        let now = (Instant::now(), Stats::get(&shared.stats.commands));
        let secs = now.0.duration_since(last.0).as_secs_f64();
        if secs > 0.0 {
            let ops = now.1.saturating_sub(last.1) as f64 / secs;
            shared
                .stats
                .ops_per_sec
                .store(ops.round() as u64, Ordering::Relaxed);
        }
        last = now;
        let timeout = shared.config.read().timeout;
        if timeout > 0 {
            for client in shared.clients.list() {
                if client.idle_secs() > timeout {
                    verbose!("Closing idle client {}", client.addr);
                    client.kill();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protected_mode_refuses_only_remote_clients_without_a_password() {
        let mut c = Config::default();
        let remote: IpAddr = "192.0.2.7".parse().unwrap();
        let local: IpAddr = "127.0.0.1".parse().unwrap();
        let local6: IpAddr = "::1".parse().unwrap();
        let mapped: IpAddr = "::ffff:127.0.0.1".parse().unwrap();
        assert!(protected_denies(&c, remote));
        assert!(!protected_denies(&c, local));
        assert!(!protected_denies(&c, local6));
        assert!(!protected_denies(&c, mapped));
        c.requirepass = Some("x".into());
        assert!(!protected_denies(&c, remote));
        c.requirepass = None;
        c.protected_mode = false;
        assert!(!protected_denies(&c, remote));
    }
}
