//! Start-up, listeners, the cron task, and clean shutdown.
//!
//! [`run`] binds every TCP address, opens the store, binds the unix
//! socket, and serves until SIGTERM, SIGINT or SHUTDOWN. Then it stops accepting,
//! tells every connection to close, waits for them, and closes the store
//! (a flush and fdatasync), so nothing acknowledged is lost.

use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::RwLock;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::broadcast;
use tokio::task::JoinSet;

use crate::clients::{Clients, Transport};
use crate::commit::GroupCommit;
use crate::config::{Config, Fsync};
use crate::connection::{self, Stream};
use crate::fd_limit;
use crate::shutdown::Shutdown;
use crate::stats::Stats;
use crate::store::Store;
use crate::{notice, verbose, warning};

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
    shutdown: broadcast::Sender<()>,
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
        let (tx, _) = broadcast::channel(1);
        Shared {
            store,
            live: Live::new(&config),
            clients: Arc::new(Clients::new(config.maxclients)),
            config: RwLock::new(config),
            stats: Stats::default(),
            commit: GroupCommit::default(),
            shutdown: tx,
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

    /// Starts the shutdown (SHUTDOWN, signals).
    pub fn request_shutdown(&self) {
        let _ = self.shutdown.send(());
    }

    fn subscribe(&self) -> Shutdown {
        Shutdown::new(self.shutdown.subscribe())
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
    crate::log::init(config.loglevel, &config.logfile)
        .map_err(|e| format!("cannot open log file '{}': {e}", config.logfile))?;
    config.dir = std::fs::canonicalize(&config.dir)
        .map_err(|e| format!("cannot use --dir '{}': {e}", config.dir.display()))?;
    let threads = match config.io_threads {
        0 => std::thread::available_parallelism().map_or(1, usize::from),
        n => n,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .thread_name("emberkv-io")
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?;

    let path = config.store_path();
    notice!(
        "emberkv-server {} starting, pid={}, store {}",
        env!("CARGO_PKG_VERSION"),
        std::process::id(),
        path.display()
    );
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
    let opened = Instant::now();
    let store = Store::open(&path, config.hot_bytes as usize)
        .map_err(|e| format!("cannot open the store {}: {e}", path.display()))?;
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

    adjust_maxclients(&mut config)?;
    let store = runtime.block_on(serve(config, store, tcp, threads))?;
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
/// descriptors open now (the store's segment files, the listeners, the
/// log), once that limit is raised as far as it goes ([`fd_limit`]), and
/// logs it in Redis's words.
///
/// # Errors
/// Not even one client fits.
fn adjust_maxclients(config: &mut Config) -> Result<(), String> {
    let in_use = fd_limit::open_descriptors().unwrap_or(0);
    let wanted = config.maxclients;
    let before = fd_limit::open_files_limit();
    let fd_limit::Fit {
        clients: fit,
        needed,
        limit,
    } = fd_limit::fit_clients(wanted, in_use);
    if fit == 0 {
        return Err(format!(
            "Your current 'ulimit -n' of {limit} is not enough for the server to start \
             ({in_use} files are open). Please increase your open file limit to at least {needed}."
        ));
    }
    if fit < wanted {
        warning!(
            "You requested maxclients of {wanted} requiring at least {needed} max file descriptors."
        );
        warning!(
            "Current maximum open files is {limit}. maxclients has been reduced to {fit} to \
             compensate for low ulimit. If you need higher maxclients increase 'ulimit -n'."
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
            match bind_tcp(addr, config.port) {
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
async fn serve(
    config: Config,
    store: Store,
    tcp: Vec<std::net::TcpListener>,
    threads: usize,
) -> Result<Result<Store, Arc<Shared>>, String> {
    let tcp = tcp
        .into_iter()
        .map(TcpListener::from_std)
        .collect::<std::io::Result<Vec<_>>>()
        .map_err(|e| format!("cannot listen on TCP: {e}"))?;
    let unix = match &config.unixsocket {
        Some(path) => Some(bind_unix(path, config.unixsocketperm)?),
        None => None,
    };
    let tcp_port = tcp
        .first()
        .and_then(|l| l.local_addr().ok())
        .map_or(0, |a| a.port());

    let shared = Arc::new(Shared::new(config, store, tcp_port));

    // Before the first connection is accepted: a client that sends
    // SIGTERM once it is served must find the handler installed, not the
    // default action (found by `expiry_survives_a_restart`, which failed
    // once in a loaded test run with a non-zero exit after SIGTERM).
    let mut sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| format!("cannot install the SIGTERM handler: {e}"))?;
    let mut sigint = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
        .map_err(|e| format!("cannot install the SIGINT handler: {e}"))?;
    // Subscribed before the first accept too: a SHUTDOWN from an early
    // client must reach this loop.
    let mut shutdown = shared.subscribe();
    let mut listeners = JoinSet::new();
    for l in tcp {
        listeners.spawn(accept_tcp(l, Arc::clone(&shared), shared.subscribe()));
    }
    if let Some(l) = unix {
        if let Some(p) = &shared.config.read().unixsocket {
            notice!("Listening on {} (unix socket)", p.display());
        }
        listeners.spawn(accept_unix(l, Arc::clone(&shared), shared.subscribe()));
    }
    let cron = tokio::spawn(cron(Arc::clone(&shared)));
    notice!("Ready to accept connections ({threads} io threads)");

    tokio::select! {
        _ = sigterm.recv() => notice!("Received SIGTERM scheduling shutdown..."),
        _ = sigint.recv() => notice!("Received SIGINT scheduling shutdown..."),
        _ = shutdown.recv() => notice!("User requested shutdown..."),
    }
    shared.request_shutdown();
    while listeners.join_next().await.is_some() {}
    for client in shared.clients.list() {
        client.kill();
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while !shared.clients.is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    cron.abort();
    let _ = cron.await;
    if let Some(p) = &shared.config.read().unixsocket {
        let _ = std::fs::remove_file(p);
    }
    notice!("Closing the store: flushing and syncing every acknowledged write");
    // Connection tasks drop their handles as they end; give the last ones
    // a moment to be dropped by the runtime.
    let mut shared = shared;
    for _ in 0..200 {
        match Arc::try_unwrap(shared) {
            Ok(s) => return Ok(Ok(s.store)),
            Err(s) => shared = s,
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Ok(Err(shared))
}

/// Binds the unix socket at `path` (replacing a stale socket file) with
/// permissions `mode` when given. With a mode, the socket is bound under
/// a temporary name beside `path`, given its mode, and renamed into place,
/// so that no client ever finds it at `path` with the default mode (a
/// test saw the window between the bind and the chmod).
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

fn bind_unix(path: &std::path::Path, mode: Option<u32>) -> Result<UnixListener, String> {
    let fail = |what: &str, e: std::io::Error| format!("cannot {what} {}: {e}", path.display());
    // A stale socket file from an earlier run would make bind fail.
    let _ = std::fs::remove_file(path);
    let Some(mode) = mode else {
        return UnixListener::bind(path).map_err(|e| fail("listen on unix socket", e));
    };
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".{}.tmp", std::process::id()));
    let temporary = std::path::PathBuf::from(name);
    let _ = std::fs::remove_file(&temporary);
    let listener = UnixListener::bind(&temporary).map_err(|e| fail("listen on unix socket", e))?;
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

fn bind_tcp(addr: &str, port: u16) -> std::io::Result<std::net::TcpListener> {
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
    socket.listen(511)?;
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}

/// Writes a refusal line to a client and closes it, off the accept path.
fn refuse<S>(mut stream: S, shared: &Shared, line: &'static str)
where
    S: tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    shared.stats.rejected.fetch_add(1, Ordering::Relaxed);
    tokio::spawn(async move {
        let _ =
            tokio::time::timeout(Duration::from_secs(1), stream.write_all(line.as_bytes())).await;
    });
}

async fn accept_tcp(listener: TcpListener, shared: Arc<Shared>, mut shutdown: Shutdown) {
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            _ = shutdown.recv() => return,
        };
        let (stream, peer) = match accepted {
            Ok(x) => x,
            Err(e) => {
                warning!("accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        shared.stats.connections.fetch_add(1, Ordering::Relaxed);
        let Some(slot) = shared.clients.admit() else {
            warning!(
                "Error registering fd event for the new client: max number of clients reached"
            );
            refuse(stream, &shared, MAX_CLIENTS);
            continue;
        };
        if protected_denies(&shared.config.read(), peer.ip()) {
            warning!("Refused {peer}: protected mode");
            refuse(stream, &shared, DENIED);
            continue;
        }
        let _ = stream.set_nodelay(true);
        let laddr = stream
            .local_addr()
            .map(|a| a.to_string())
            .unwrap_or_default();
        let handle =
            shared
                .clients
                .register(peer.to_string(), laddr, stream.as_raw_fd(), Transport::Tcp);
        verbose!("Accepted {peer}");
        tokio::spawn(connection::serve(
            Stream::Tcp(stream),
            Arc::clone(&shared),
            handle,
            slot,
        ));
    }
}

async fn accept_unix(listener: UnixListener, shared: Arc<Shared>, mut shutdown: Shutdown) {
    let path = shared
        .config
        .read()
        .unixsocket
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            _ = shutdown.recv() => return,
        };
        let stream = match accepted {
            Ok((s, _)) => s,
            Err(e) => {
                warning!("accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        shared.stats.connections.fetch_add(1, Ordering::Relaxed);
        let Some(slot) = shared.clients.admit() else {
            refuse(stream, &shared, MAX_CLIENTS);
            continue;
        };
        let handle = shared.clients.register(
            format!("{path}:0"),
            format!("{path}:0"),
            stream.as_raw_fd(),
            Transport::Unix,
        );
        verbose!("Accepted connection to {path}");
        tokio::spawn(connection::serve(
            Stream::Unix(stream),
            Arc::clone(&shared),
            handle,
            slot,
        ));
    }
}

/// Every 100 ms: the ops/sec sample; every second: idle-client timeouts.
async fn cron(shared: Arc<Shared>) {
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    let mut last = (Instant::now(), Stats::get(&shared.stats.commands));
    let mut n: u64 = 0;
    loop {
        tick.tick().await;
        n += 1;
        if !n.is_multiple_of(10) {
            continue;
        }
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
