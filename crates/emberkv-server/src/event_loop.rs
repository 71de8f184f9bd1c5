//! The event loops that serve the clients: one thread each, over one
//! `epoll` instance (through `mio`), in the shape of redis-server's `ae`
//! loop.
//!
//! A round: wait for notifications; accept new clients (the first loop
//! holds the listeners and hands clients to the loops in turn); for each
//! client with something to read, read once and run every whole command;
//! if any ran a write and `appendfsync` is `always`, wait for one
//! fdatasync covering them all ([`crate::commit`]), and if none did, wait
//! until every write they may have read (another loop's, not yet
//! acknowledged) is durable; then write every client's replies, one write
//! each. Replies of a round leave together,
//! as from redis-server's `beforeSleep`, so that a client's next requests
//! tend to arrive together too and one wake-up serves many.
//!
//! Notifications are edge-triggered: a connection remembers that its
//! socket may still have bytes (a read that filled its buffer, or one
//! skipped while 64 MiB of replies wait), or that commands wait in its
//! query buffer behind that mark, and is served again in the next
//! round without waiting. A loop is woken from other threads (a new client
//! handed over, CLIENT KILL, `--timeout`, shutdown) through its
//! [`LoopHandle`].
//!
//! Until 2026-12-04 the server ran on tokio, a task per client. A minimal
//! loop of this shape served 1.2x-1.6x the PINGs of a minimal tokio server
//! of one worker under the same CPU cap (docs/PERFORMANCE.md).

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use mio::net::{TcpListener, UnixListener};
use mio::{Events, Interest, Poll, Token, Waker};
use parking_lot::Mutex;

use crate::clients::{ClientHandle, Slot, Transport};
use crate::connection::{Connection, Next, Stream};
use crate::server::{DENIED, MAX_CLIENTS, Shared, protected_denies};
use crate::{verbose, warning};

/// The token of a loop's waker.
const WAKER: Token = Token(usize::MAX);

/// Tokens of the listeners count down from here.
const LISTENER_BASE: usize = usize::MAX - 1;

/// The loop's read buffer: the most one read takes from a socket.
const READ_BYTES: usize = 256 * 1024;

/// How often a loop with closing connections looks for stalled ones, and
/// tries its listeners again after a failed accept.
const CLOSING_TICK: Duration = Duration::from_millis(100);

/// Most notifications taken from one wait.
const EVENTS: usize = 1024;

/// A listening socket.
#[derive(Debug)]
pub enum Listener {
    /// A TCP address.
    Tcp(TcpListener),
    /// The unix socket, and its path as CLIENT LIST shows it.
    Unix(UnixListener, String),
}

/// A client accepted by one loop for another.
struct Handover {
    stream: Stream,
    handle: Arc<ClientHandle>,
    slot: Slot,
}

/// What other threads hold of a loop: its waker and its inbox.
pub struct LoopHandle {
    waker: Arc<Waker>,
    inbox: Mutex<Vec<Handover>>,
    /// Close every client and take no more (shutdown).
    stopping: AtomicBool,
    /// Return from [`EventLoop::run`].
    exit: AtomicBool,
}

impl LoopHandle {
    /// Tells the loop to close every client and accept no more.
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::Release);
        let _ = self.waker.wake();
    }

    /// Tells the loop to return, dropping what clients it still has.
    pub fn exit(&self) {
        self.exit.store(true, Ordering::Release);
        let _ = self.waker.wake();
    }
}

/// One event loop (see the module docs).
pub struct EventLoop {
    poll: Poll,
    shared: Arc<Shared>,
    me: Arc<LoopHandle>,
    /// Every loop's handle, this one's included, for handing clients out.
    peers: Vec<Arc<LoopHandle>>,
    /// The loop the next accepted client goes to.
    next_peer: usize,
    listeners: Vec<Listener>,
    /// Connections by token.
    conns: Vec<Option<Connection>>,
    /// Tokens free in `conns`.
    free: Vec<usize>,
    /// Connections to serve in this round.
    ready: Vec<usize>,
    /// Connections to serve in the next round without waiting.
    again: Vec<usize>,
    /// Some connection may be closing (waiting for its client to take its
    /// last replies): look for stalled ones.
    closing: bool,
    /// An accept failed (out of descriptors, most likely): the listeners
    /// are tried again at the next tick, since clients already queued on
    /// them bring no new notification.
    accept_failed: bool,
    chunk: Vec<u8>,
}

impl EventLoop {
    /// A loop serving `shared`'s clients.
    pub fn new(shared: Arc<Shared>) -> io::Result<EventLoop> {
        let poll = Poll::new()?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
        Ok(EventLoop {
            poll,
            shared,
            me: Arc::new(LoopHandle {
                waker,
                inbox: Mutex::new(Vec::new()),
                stopping: AtomicBool::new(false),
                exit: AtomicBool::new(false),
            }),
            peers: Vec::new(),
            next_peer: 0,
            listeners: Vec::new(),
            conns: Vec::new(),
            free: Vec::new(),
            ready: Vec::new(),
            again: Vec::new(),
            closing: false,
            accept_failed: false,
            chunk: vec![0; READ_BYTES],
        })
    }

    /// This loop's handle.
    pub fn handle(&self) -> Arc<LoopHandle> {
        Arc::clone(&self.me)
    }

    /// Makes this loop accept on `listeners` and hand the clients to
    /// `peers` in turn.
    pub fn listen(
        &mut self,
        mut listeners: Vec<Listener>,
        peers: Vec<Arc<LoopHandle>>,
    ) -> io::Result<()> {
        for (i, l) in listeners.iter_mut().enumerate() {
            let token = Token(LISTENER_BASE - i);
            match l {
                Listener::Tcp(l) => self
                    .poll
                    .registry()
                    .register(l, token, Interest::READABLE)?,
                Listener::Unix(l, _) => {
                    self.poll
                        .registry()
                        .register(l, token, Interest::READABLE)?
                }
            }
        }
        self.listeners = listeners;
        self.peers = peers;
        Ok(())
    }

    /// Serves until told to exit ([`LoopHandle::exit`]).
    pub fn run(mut self) {
        let mut events = Events::with_capacity(EVENTS);
        loop {
            let timeout = if !self.again.is_empty() {
                Some(Duration::ZERO)
            } else if self.closing || self.accept_failed {
                Some(CLOSING_TICK)
            } else {
                None
            };
            if let Err(e) = self.poll.poll(&mut events, timeout)
                && e.kind() != io::ErrorKind::Interrupted
            {
                warning!("epoll_wait failed: {e}");
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
            let mut woken = false;
            for t in std::mem::take(&mut self.again) {
                self.queue(t);
            }
            for event in events.iter() {
                match event.token() {
                    WAKER => woken = true,
                    Token(t) if t > LISTENER_BASE - self.listeners.len() && t <= LISTENER_BASE => {
                        self.accept(LISTENER_BASE - t)
                    }
                    Token(t) => {
                        if let Some(Some(c)) = self.conns.get_mut(t) {
                            c.ready(
                                event.is_readable() || event.is_error(),
                                event.is_writable() || event.is_write_closed() || event.is_error(),
                                event.is_read_closed(),
                            );
                            self.queue(t);
                        }
                    }
                }
            }
            if woken {
                if self.me.exit.load(Ordering::Acquire) {
                    return;
                }
                self.wake_up();
            }
            if std::mem::take(&mut self.accept_failed) {
                for i in 0..self.listeners.len() {
                    self.accept(i);
                }
            }
            self.round();
            if self.closing {
                self.drop_stalled();
            }
        }
    }

    /// Puts connection `t` on this round's list, once.
    fn queue(&mut self, t: usize) {
        if let Some(Some(c)) = self.conns.get_mut(t)
            && !c.queued
        {
            c.queued = true;
            self.ready.push(t);
        }
    }

    /// Reads and runs every ready connection's commands, waits for the
    /// fdatasync `appendfsync always` asks for, then writes the replies.
    fn round(&mut self) {
        let mut wrote: Vec<usize> = Vec::new();
        let mut served: Vec<usize> = Vec::new();
        for i in 0..self.ready.len() {
            let t = self.ready[i];
            let Some(c) = self.conns[t].as_mut() else {
                continue;
            };
            if c.handle().is_killed() {
                continue;
            }
            let chunk = &mut self.chunk;
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| c.read_and_run(chunk))) {
                Ok(Ok(true)) => wrote.push(t),
                Ok(Ok(false)) => served.push(t),
                Ok(Err(e)) => {
                    verbose!(
                        "Client id={} addr={} closed: {e}",
                        c.handle().id,
                        c.handle().addr
                    );
                    self.remove(t);
                }
                Err(_) => {
                    // The panic hook logged it; the client's connection
                    // ends, the others go on.
                    self.remove(t);
                }
            }
        }
        if self.shared.live.fsync_always.load(Ordering::Relaxed) {
            let shared = &self.shared;
            if !wrote.is_empty() {
                match shared.commit.wait(|| shared.store.sync()) {
                    Ok(()) => shared.stats.changes.store(0, Ordering::Relaxed),
                    Err(e) => {
                        warning!(
                            "fdatasync failed, closing the clients without their replies: {e}"
                        );
                        for t in wrote {
                            self.remove(t);
                        }
                    }
                }
            } else if !served.is_empty()
                && let Err(e) = shared.store.sync_visible()
            {
                // No write here, but a read may have seen another loop's
                // write that waits for its fdatasync: its reply must not
                // tell of a value a crash then loses (redis-server sends
                // every reply of a round after that round's fsync). Until
                // 2026-12-07 it did (a reader saw an APPEND's length that
                // did not survive SIGKILL in 4 of 8 runs). When the sync
                // fails (a full disk), the replies go out all the same:
                // what they may show is a write whose own reply was a
                // closed connection, in doubt, which a later sync may yet
                // make durable; closing every reader would refuse PING,
                // GET of durable keys and SHUTDOWN's error reply until the
                // disk has room (found by an attack helper).
                verbose!("fdatasync for replies to reads failed: {e}");
            }
        }
        let ready = std::mem::take(&mut self.ready);
        for &t in &ready {
            let Some(c) = self.conns[t].as_mut() else {
                continue;
            };
            c.queued = false;
            let next = c.write();
            if next != Next::Close
                && let Some(interest) = c.interest()
                && let Err(e) = self
                    .poll
                    .registry()
                    .reregister(c.stream_mut(), Token(t), interest)
            {
                warning!(
                    "Error registering fd event for client id={}: {e}",
                    c.handle().id
                );
                self.remove(t);
                continue;
            }
            match next {
                Next::Again => self.again.push(t),
                Next::Wait => self.closing |= c.is_closing(),
                Next::Close => self.remove(t),
            }
        }
        self.ready = ready;
        self.ready.clear();
    }

    /// Takes in handed-over clients, stops on shutdown, and closes killed
    /// clients.
    fn wake_up(&mut self) {
        let stopping = self.me.stopping.load(Ordering::Acquire);
        let arrived = std::mem::take(&mut *self.me.inbox.lock());
        for h in arrived {
            if stopping {
                continue;
            }
            self.insert(h);
        }
        if stopping && !self.listeners.is_empty() {
            self.listeners.clear();
        }
        for t in 0..self.conns.len() {
            let Some(c) = self.conns[t].as_mut() else {
                continue;
            };
            if stopping {
                c.handle().kill();
            }
            if c.handle().is_killed() {
                c.kill();
                self.remove(t);
            }
        }
    }

    /// Drops closing connections whose clients stopped taking replies,
    /// and notes whether any is still closing.
    fn drop_stalled(&mut self) {
        let now = Instant::now();
        self.closing = false;
        for t in 0..self.conns.len() {
            match &self.conns[t] {
                Some(c) if c.stalled(now) => self.remove(t),
                Some(c) => self.closing |= c.is_closing(),
                None => {}
            }
        }
    }

    /// Takes a client in: registers its socket and serves it in this
    /// round (bytes may have come before the registration).
    fn insert(&mut self, h: Handover) {
        let t = self.free.pop().unwrap_or_else(|| {
            self.conns.push(None);
            self.conns.len() - 1
        });
        let mut conn = Connection::new(h.stream, Arc::clone(&self.shared), h.handle, h.slot);
        if let Err(e) =
            self.poll
                .registry()
                .register(conn.stream_mut(), Token(t), Interest::READABLE)
        {
            warning!("Error registering fd event for the new client: {e}");
            self.free.push(t);
            return;
        }
        self.conns[t] = Some(conn);
        self.queue(t);
    }

    /// Drops connection `t`.
    fn remove(&mut self, t: usize) {
        if let Some(mut c) = self.conns[t].take() {
            let _ = self.poll.registry().deregister(c.stream_mut());
            self.free.push(t);
        }
    }

    /// Accepts every pending client of listener `i`.
    fn accept(&mut self, i: usize) {
        loop {
            let accepted = match &self.listeners[i] {
                Listener::Tcp(l) => l.accept().map(|(s, peer)| (Stream::Tcp(s), Some(peer))),
                Listener::Unix(l, _) => l.accept().map(|(s, _)| (Stream::Unix(s), None)),
            };
            let (stream, peer) = match accepted {
                Ok(x) => x,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    // Out of descriptors, most likely: tried again at the
                    // next tick.
                    warning!("accept failed: {e}");
                    self.accept_failed = true;
                    return;
                }
            };
            self.admit(i, stream, peer);
        }
    }

    /// Registers an accepted client and hands it to the next loop, or
    /// refuses it (`maxclients`, protected mode).
    fn admit(&mut self, i: usize, stream: Stream, peer: Option<std::net::SocketAddr>) {
        let shared = &self.shared;
        shared.stats.connections.fetch_add(1, Ordering::Relaxed);
        let Some(slot) = shared.clients.admit() else {
            if peer.is_some() {
                warning!(
                    "Error registering fd event for the new client: max number of clients reached"
                );
            }
            refuse(stream, shared, MAX_CLIENTS);
            return;
        };
        let peer_index = self.next_peer % self.peers.len().max(1);
        self.next_peer = self.next_peer.wrapping_add(1);
        let waker = self.peers.get(peer_index).map(|p| Arc::clone(&p.waker));
        let handle = match (&stream, peer, &self.listeners[i]) {
            (Stream::Tcp(s), Some(peer), _) => {
                let (denied, keepalive) = {
                    let config = shared.config.read();
                    (protected_denies(&config, peer.ip()), config.tcp_keepalive)
                };
                if denied {
                    warning!("Refused {peer}: protected mode");
                    refuse(stream, shared, DENIED);
                    return;
                }
                let _ = s.set_nodelay(true);
                if keepalive > 0 {
                    // As redis-server's `anetKeepAlive`: probes after
                    // `keepalive` idle seconds, then every third of that,
                    // the connection dropped after three unanswered.
                    let idle = Duration::from_secs(keepalive);
                    let probes = socket2::TcpKeepalive::new()
                        .with_time(idle)
                        .with_interval((idle / 3).max(Duration::from_secs(1)))
                        .with_retries(3);
                    let _ = socket2::SockRef::from(s).set_tcp_keepalive(&probes);
                }
                let laddr = s.local_addr().map(|a| a.to_string()).unwrap_or_default();
                verbose!("Accepted {peer}");
                shared.clients.register(
                    peer.to_string(),
                    laddr,
                    raw_fd(&stream),
                    Transport::Tcp,
                    waker,
                )
            }
            (_, _, Listener::Unix(_, path)) => {
                verbose!("Accepted connection to {path}");
                let addr = format!("{path}:0");
                shared
                    .clients
                    .register(addr.clone(), addr, raw_fd(&stream), Transport::Unix, waker)
            }
            _ => return,
        };
        let h = Handover {
            stream,
            handle,
            slot,
        };
        match self.peers.get(peer_index) {
            Some(peer) if !Arc::ptr_eq(peer, &self.me) => {
                peer.inbox.lock().push(h);
                let _ = peer.waker.wake();
            }
            _ => self.insert(h),
        }
    }
}

/// The socket's file descriptor (CLIENT LIST's `fd`).
fn raw_fd(stream: &Stream) -> i32 {
    use std::os::fd::AsRawFd;
    match stream {
        Stream::Tcp(s) => s.as_raw_fd(),
        Stream::Unix(s) => s.as_raw_fd(),
    }
}

/// Sends a refused client its error line (one write: the socket is new,
/// its buffer empty) and closes it.
fn refuse(stream: Stream, shared: &Shared, line: &'static str) {
    use std::io::Write;
    shared.stats.rejected.fetch_add(1, Ordering::Relaxed);
    let _ = match stream {
        Stream::Tcp(mut s) => s.write(line.as_bytes()),
        Stream::Unix(mut s) => s.write(line.as_bytes()),
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::store::Store;
    use std::io::{Read, Write};

    /// A loop over a new store in `dir`, running on its own thread.
    fn start(dir: &std::path::Path) -> (Arc<Shared>, Arc<LoopHandle>, std::thread::JoinHandle<()>) {
        let store = Store::open(dir, 8 << 20).unwrap();
        let shared = Arc::new(Shared::new(Config::default(), store, 0));
        let event_loop = EventLoop::new(Arc::clone(&shared)).unwrap();
        let handle = event_loop.handle();
        (shared, handle, std::thread::spawn(move || event_loop.run()))
    }

    /// Hands a client to a loop running on its own thread, as the first
    /// loop hands clients to the others.
    fn hand_over(shared: &Arc<Shared>, to: &LoopHandle) -> std::os::unix::net::UnixStream {
        let (ours, theirs) = mio::net::UnixStream::pair().unwrap();
        let slot = shared.clients.admit().unwrap();
        let handle = shared.clients.register(
            "test:0".into(),
            "test:0".into(),
            -1,
            Transport::Unix,
            Some(Arc::clone(&to.waker)),
        );
        to.inbox.lock().push(Handover {
            stream: Stream::Unix(ours),
            handle,
            slot,
        });
        to.waker.wake().unwrap();
        let theirs = std::os::unix::net::UnixStream::from(std::os::fd::OwnedFd::from(theirs));
        theirs.set_nonblocking(false).unwrap();
        theirs
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        theirs
    }

    fn read_reply(client: &mut std::os::unix::net::UnixStream, want: &[u8]) {
        let mut got = vec![0; want.len()];
        client.read_exact(&mut got).unwrap();
        assert_eq!(got, want);
    }

    #[test]
    fn a_loop_serves_a_handed_over_client_closes_it_on_kill_and_exits() {
        let dir = tempfile::tempdir().unwrap();
        let (shared, handle, thread) = start(dir.path());

        let mut client = hand_over(&shared, &handle);
        // A pipeline in one write: the replies come back in order.
        client
            .write_all(
                b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\nPING\r\n",
            )
            .unwrap();
        read_reply(&mut client, b"+OK\r\n$1\r\nv\r\n+PONG\r\n");
        assert_eq!(shared.clients.len(), 1);

        // CLIENT KILL (or a timeout) from another thread: the loop is
        // woken and closes the connection, and the client leaves the list.
        shared.clients.list()[0].kill();
        let mut rest = Vec::new();
        client.read_to_end(&mut rest).unwrap();
        assert!(rest.is_empty());
        assert!(shared.clients.is_empty());

        // A second client, then shutdown: the loop closes it too.
        let mut second = hand_over(&shared, &handle);
        second.write_all(b"PING\r\n").unwrap();
        read_reply(&mut second, b"+PONG\r\n");
        handle.stop();
        second.read_to_end(&mut rest).unwrap();
        assert!(rest.is_empty());
        assert!(shared.clients.is_empty());
        handle.exit();
        thread.join().unwrap();
    }

    #[test]
    fn replies_larger_than_the_socket_buffer_arrive_whole_and_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let (shared, handle, thread) = start(dir.path());

        let mut client = hand_over(&shared, &handle);
        let value = vec![b'x'; 1 << 20];
        let mut set = format!("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n${}\r\n", value.len()).into_bytes();
        set.extend_from_slice(&value);
        set.extend_from_slice(b"\r\n");
        client.write_all(&set).unwrap();
        read_reply(&mut client, b"+OK\r\n");
        // 8 MiB of replies, far more than a unix socket's buffer: the
        // loop must wait for room (registered for writability) and resume.
        for _ in 0..8 {
            client.write_all(b"GET k\r\n").unwrap();
        }
        client.write_all(b"PING\r\n").unwrap();
        let mut want = format!("${}\r\n", value.len()).into_bytes();
        want.extend_from_slice(&value);
        want.extend_from_slice(b"\r\n");
        for _ in 0..8 {
            read_reply(&mut client, &want);
        }
        read_reply(&mut client, b"+PONG\r\n");
        handle.stop();
        handle.exit();
        thread.join().unwrap();
    }
}
