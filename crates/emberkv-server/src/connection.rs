//! One client connection, driven by its event loop ([`crate::event_loop`]):
//! read, run every whole command buffered, write the replies in one batch.
//!
//! # Pipelining and back-pressure
//! Every command found in the read buffer runs in order and appends its
//! reply to the output buffer; the replies go out together, after every
//! ready connection of the loop's round has run its commands (one write
//! for a pipeline, not one per command; redis-server's `beforeSleep`).
//! Reading goes on while replies are pending, so a client that writes a
//! long pipeline before it reads cannot deadlock against the server; only
//! once 64 MiB of replies wait unsent does the connection stop reading
//! until the client drains them. The same mark stops the commands of one
//! read: those after it wait in the query buffer until the client has
//! taken replies below the mark, so one read of small commands cannot
//! queue gigabytes of replies (200 GETs of a 1 MiB value queued 200 MiB).
//!
//! # Bad input
//! A protocol error gets Redis's `-ERR Protocol error: ...` reply, after
//! the replies of the commands before it, and the connection closes. A
//! query buffer above `client-query-buffer-limit` (1 GB) does the same.
//! A panic in a command ends this connection only (its loop catches it).
//!
//! # appendfsync always
//! The engine runs with background flushing; when a round of the loop ran
//! a write command and `appendfsync` is `always`, the loop waits, before it
//! sends the round's replies, for a [`crate::store::Store::sync`] that
//! started after the round's commands ([`crate::commit`]), so a pipeline
//! of writes costs one fdatasync, not one each, and the clients served in
//! one round share one. Replies never leave before the fdatasync covering
//! their writes has returned; if it fails, the round's writers are closed
//! without them.

use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use bytes::{Buf, BytesMut};
use mio::net::{TcpStream, UnixStream};

use crate::clients::{ClientHandle, Slot};
use crate::cmd::{self, Ctx};
use crate::reply::Reply;
use crate::request::{Parsed, RequestParser};
use crate::server::{Live, Shared};
use crate::stats::Local;
use crate::{verbose, warning};

/// Replies pending beyond which the connection stops reading.
const OUT_HIGH_WATER: usize = 64 << 20;

/// Free room below which the read buffer grows before a read.
const READ_CHUNK: usize = 16 * 1024;

/// Longest a closing connection waits for the client to take any of its
/// pending replies (see [`Connection::stalled`]).
const DRAIN_STALL: std::time::Duration = std::time::Duration::from_secs(5);

/// Most the read buffer grows by before one read (64 MiB, the largest
/// value the engine takes): a bulk announced larger is read in steps, its
/// memory taken as its bytes arrive, not at its header. Reserving what the
/// header announced panicked the connection's task at a length near
/// `i64::MAX` (with `proto-max-bulk-len` raised that far) and aborted the
/// process, out of memory, at 10^15 bytes.
const MAX_RESERVE: usize = 64 << 20;

/// A read buffer grown past this many bytes (1 MiB) for a large request is
/// replaced by one of [`READ_CHUNK`] once it is empty again.
const SHRINK_ABOVE: usize = 1 << 20;

/// A client's socket (non-blocking).
#[derive(Debug)]
pub enum Stream {
    /// TCP.
    Tcp(TcpStream),
    /// The unix socket.
    Unix(UnixStream),
}

impl Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            Stream::Unix(s) => s.read(buf),
        }
    }

    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            Stream::Unix(s) => s.write(buf),
        }
    }

    fn shutdown(&self) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.shutdown(Shutdown::Write),
            Stream::Unix(s) => s.shutdown(Shutdown::Write),
        }
    }
}

impl Stream {
    /// The socket as `mio` registers it.
    fn source(&mut self) -> &mut dyn mio::event::Source {
        match self {
            Stream::Tcp(s) => s,
            Stream::Unix(s) => s,
        }
    }
}

impl mio::event::Source for Stream {
    fn register(
        &mut self,
        registry: &mio::Registry,
        token: mio::Token,
        interests: mio::Interest,
    ) -> io::Result<()> {
        self.source().register(registry, token, interests)
    }

    fn reregister(
        &mut self,
        registry: &mio::Registry,
        token: mio::Token,
        interests: mio::Interest,
    ) -> io::Result<()> {
        self.source().reregister(registry, token, interests)
    }

    fn deregister(&mut self, registry: &mio::Registry) -> io::Result<()> {
        self.source().deregister(registry)
    }
}

/// Per-connection state the commands read and change.
#[derive(Debug)]
pub struct Session {
    /// The client's registry entry.
    pub handle: Arc<ClientHandle>,
    /// Whether the client authenticated (AUTH, HELLO AUTH), or connected
    /// while the server had no password; see [`Session::authenticated`].
    pub authed: bool,
    /// Close once the pending replies are sent (QUIT, CLIENT KILL of
    /// itself).
    pub close_after_reply: bool,
    /// SHUTDOWN was called: close without reply and stop the server.
    pub shutdown: bool,
    /// A write command ran since the replies were last sent.
    pub dirty: bool,
    /// A reusable value buffer.
    pub scratch: Vec<u8>,
    /// The commands queued since MULTI; `None` outside MULTI.
    pub multi: Option<cmd::multi::Multi>,
    /// The keys WATCHed since the last EXEC, DISCARD or UNWATCH.
    pub watched: cmd::multi::Watched,
    /// Counters not yet added to the server's.
    pub local: Local,
    /// The subcommand the running command dispatched to, and whether it
    /// was refused (its arity), for INFO commandstats; set by
    /// `cmd::dispatch_sub`, read once the command has run.
    pub ran_sub: Option<(usize, bool)>,
}

impl Session {
    /// Whether the client may run commands: it authenticated, or the
    /// server has no password now (a client that connected while one was
    /// set runs commands once it is removed, and waits for AUTH again if
    /// one is set again, as in Redis 7).
    pub fn authenticated(&self, live: &Live) -> bool {
        self.authed || live.no_password.load(Ordering::Relaxed)
    }

    /// The state of a client just registered as `handle`: authenticated
    /// when the server has no password, outside MULTI, nothing watched.
    pub fn new(handle: Arc<ClientHandle>, shared: &Shared) -> Session {
        Session {
            handle,
            authed: shared.live.no_password.load(Ordering::Relaxed),
            close_after_reply: false,
            shutdown: false,
            dirty: false,
            scratch: Vec::new(),
            multi: None,
            watched: cmd::multi::Watched::default(),
            local: Local::default(),
            ran_sub: None,
        }
    }
}

/// One client's connection: its socket, buffers and session. Dropping it
/// closes the socket, adds its counters to the server's, takes the client
/// out of the list and frees its `maxclients` slot (also when its loop
/// drops it after a panic in one of its commands).
pub struct Connection {
    shared: Arc<Shared>,
    session: Session,
    stream: Stream,
    inbuf: BytesMut,
    /// `inbuf` was grown past [`SHRINK_ABOVE`] (see [`Connection::process`]).
    inbuf_grown: bool,
    out: Reply,
    parser: RequestParser,
    /// The buffer length at which the parser can make progress.
    need: usize,
    /// The socket may have bytes to read: readiness was reported (the
    /// loop's notifications are edge-triggered) and no read since came
    /// back short or would have blocked.
    readable: bool,
    /// The socket may take bytes: as `readable`, for writes.
    writable: bool,
    /// The client shut its side down (the loop saw a read-closed
    /// notification): reads go on until one returns the end, even after a
    /// short one, since the notification of the bytes and of the end may
    /// have been one (a client that wrote, shut down and waits for the
    /// server's close waited for ever).
    read_closed: bool,
    /// The socket is registered for writability too, not only for
    /// reading: only while replies wait for room in it, since a socket
    /// registered for both wakes its loop each time its client takes a
    /// reply (4 % of a PING run's samples in `unix_write_space`, and a
    /// wake-up of the loop for nothing).
    polls_writable: bool,
    /// Whole commands may wait in the query buffer: the last run stopped
    /// at the replies' high-water mark ([`OUT_HIGH_WATER`]), and runs
    /// them once the client has taken replies below it, without a read.
    held: bool,
    /// The client closed its side, or the connection closes once its
    /// pending replies are sent (QUIT, a protocol error, SHUTDOWN).
    closing: bool,
    /// While closing: when the client last took any of the pending
    /// replies (or when the closing began).
    progress: Instant,
    /// Whether the connection is on its loop's list for the round.
    pub queued: bool,
    _slot: Slot,
}

/// What the loop does with a connection after writing its replies.
#[derive(Debug, PartialEq, Eq)]
pub enum Next {
    /// Keep it, and serve it again in the next round without waiting for
    /// a notification (it may have more to read).
    Again,
    /// Keep it until its socket's next notification.
    Wait,
    /// Drop it (closed, killed, or done closing).
    Close,
}

impl Drop for Connection {
    fn drop(&mut self) {
        // Out of the list before the client sees its socket close, so that
        // a client told of the close finds it gone from CLIENT LIST.
        self.shared.stats.add(&mut self.session.local);
        self.shared.clients.unregister(self.session.handle.id);
        let _ = self.stream.shutdown();
        if self.session.shutdown {
            self.shared.request_shutdown();
        }
    }
}

impl Connection {
    /// A connection for a client registered as `handle`, holding its
    /// `maxclients` place `slot`.
    pub fn new(stream: Stream, shared: Arc<Shared>, handle: Arc<ClientHandle>, slot: Slot) -> Self {
        let max_bulk = shared.live.max_bulk.load(Ordering::Relaxed) as usize;
        Connection {
            session: Session::new(handle, &shared),
            shared,
            stream,
            inbuf: BytesMut::with_capacity(READ_CHUNK),
            inbuf_grown: false,
            out: Reply::new(),
            parser: RequestParser::new(max_bulk),
            need: 0,
            readable: true,
            writable: true,
            read_closed: false,
            polls_writable: false,
            held: false,
            closing: false,
            progress: Instant::now(),
            queued: false,
            _slot: slot,
        }
    }

    /// The socket, to register with the loop (for reading: see
    /// [`Connection::interest`]).
    pub fn stream_mut(&mut self) -> &mut Stream {
        &mut self.stream
    }

    /// The notifications the connection needs from its loop now, if they
    /// changed since the last call: writability too while replies wait
    /// for room in the socket, readability alone otherwise. The loop
    /// registers the socket for them.
    pub fn interest(&mut self) -> Option<mio::Interest> {
        let blocked = !self.writable && !self.out.is_empty();
        if blocked == self.polls_writable {
            return None;
        }
        self.polls_writable = blocked;
        Some(if blocked {
            mio::Interest::READABLE | mio::Interest::WRITABLE
        } else {
            mio::Interest::READABLE
        })
    }

    /// The client's registry entry.
    pub fn handle(&self) -> &Arc<ClientHandle> {
        &self.session.handle
    }

    /// Notes readiness the loop reported for the socket: bytes (or an
    /// error) to read, room to write, the client's side shut down.
    pub fn ready(&mut self, readable: bool, writable: bool, read_closed: bool) {
        self.readable |= readable || read_closed;
        self.writable |= writable;
        self.read_closed |= read_closed;
    }

    /// Reads once into `chunk` (the loop's buffer, at least 1 byte), if
    /// the socket may have bytes and the connection is reading, appends
    /// what came to the query buffer, and runs its whole commands up to
    /// the replies' high-water mark; commands held back at the mark run
    /// first, without a read. Returns whether a write command ran since
    /// the last call (for `appendfsync always`), or the socket's error,
    /// after which the connection must be dropped.
    pub fn read_and_run(&mut self, chunk: &mut [u8]) -> io::Result<bool> {
        if self.closing || self.out.len() >= OUT_HIGH_WATER {
            return Ok(false);
        }
        if self.held {
            return Ok(self.run());
        }
        if !self.readable {
            return Ok(false);
        }
        self.reserve();
        let room = chunk
            .len()
            .min(self.inbuf.capacity() - self.inbuf.len())
            .max(1);
        let n = match self.stream.read(&mut chunk[..room]) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                self.readable = false;
                return Ok(false);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(false),
            Err(e) => return Err(e),
        };
        if n < room && !self.read_closed {
            // A short read took everything there was: more bytes bring a
            // new notification.
            self.readable = false;
        }
        if n == 0 {
            self.begin_close();
            return Ok(false);
        }
        self.inbuf.extend_from_slice(&chunk[..n]);
        let handle = &self.session.handle;
        self.session.local.net_in += n as u64;
        handle.touch();
        handle.qbuf.store(self.inbuf.len(), Ordering::Relaxed);
        let limit = self.shared.live.qbuf_limit.load(Ordering::Relaxed);
        if self.inbuf.len() as u64 > limit {
            warning!(
                "Closing client id={} addr={}: query buffer of {} bytes is above the limit of {limit}",
                handle.id,
                handle.addr,
                self.inbuf.len()
            );
            let line = format!(
                "ERR Protocol error: query buffer of {} bytes exceeds the limit of {limit} bytes (client-query-buffer-limit)",
                self.inbuf.len()
            );
            self.session.local.error(&line);
            self.out.error(&line);
            self.inbuf = BytesMut::new();
            self.begin_close();
            return Ok(false);
        }
        Ok(self.run())
    }

    /// Runs the buffered commands ([`Connection::process`]) and begins
    /// the close one of them asked for; returns whether a write command
    /// ran since the last call.
    fn run(&mut self) -> bool {
        if self.process() {
            self.begin_close();
            if self.session.shutdown {
                // Now, not once the client has taken the replies before
                // it: a client reading them slowly held the server up for
                // as long as it kept reading (35 s for 300 MB).
                self.shared.request_shutdown();
            }
        }
        std::mem::take(&mut self.session.dirty)
    }

    /// Writes the pending replies while the socket takes them, and says
    /// what the loop does next with the connection.
    pub fn write(&mut self) -> Next {
        self.shared.stats.add(&mut self.session.local);
        if self.session.handle.is_killed() {
            return self.kill();
        }
        while self.writable && !self.out.is_empty() {
            match self.stream.write(self.out.pending()) {
                Ok(0) => return Next::Close,
                Ok(n) => {
                    self.session.local.net_out += n as u64;
                    self.out.consume(n);
                    self.progress = Instant::now();
                    // Taking replies is activity, as in redis-server: a
                    // client reading a large reply slowly is not idle
                    // (`--timeout` closed one 2.5 s into 125 MB).
                    self.session.handle.touch();
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.writable = false,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    verbose!(
                        "Client id={} addr={} closed: {e}",
                        self.session.handle.id,
                        self.session.handle.addr
                    );
                    return Next::Close;
                }
            }
        }
        self.session
            .handle
            .omem
            .store(self.out.len(), Ordering::Relaxed);
        if self.closing {
            if self.out.is_empty() {
                Next::Close
            } else {
                Next::Wait
            }
        } else if (self.readable || self.held) && self.out.len() < OUT_HIGH_WATER {
            Next::Again
        } else {
            Next::Wait
        }
    }

    /// Closes a killed client: replies already computed go out if the
    /// socket takes them now (one write, best effort).
    pub fn kill(&mut self) -> Next {
        if !self.out.is_empty() {
            let _ = self.stream.write(self.out.pending());
        }
        Next::Close
    }

    /// Whether the connection is closing and its client has taken none of
    /// its pending replies for 5 s (`DRAIN_STALL`): a client that takes
    /// nothing cannot hold the connection open, but one that reads slowly
    /// gets its whole reply, as from redis-server (a bound of 5 s on the
    /// whole send cut 125 MB of replies before a QUIT at 77 MB).
    pub fn stalled(&self, now: Instant) -> bool {
        self.closing && now.duration_since(self.progress) >= DRAIN_STALL
    }

    /// Whether the connection closes once its client takes its pending
    /// replies.
    pub fn is_closing(&self) -> bool {
        self.closing
    }

    fn begin_close(&mut self) {
        if !self.closing {
            self.closing = true;
            self.progress = Instant::now();
        }
    }

    /// Runs the whole commands in the read buffer until the pending
    /// replies reach [`OUT_HIGH_WATER`] (the rest are held for a later
    /// run); returns whether the connection must close once the replies
    /// are sent.
    fn process(&mut self) -> bool {
        self.parser
            .set_max_bulk(self.shared.live.max_bulk.load(Ordering::Relaxed) as usize);
        self.held = false;
        let close = loop {
            if self.out.len() >= OUT_HIGH_WATER {
                self.held = !self.inbuf.is_empty();
                break false;
            }
            if self.inbuf.len() < self.need {
                break false;
            }
            // Per command: an AUTH earlier in the same read lifts the
            // limits on what an unauthenticated client may send.
            self.parser
                .set_authenticated(self.session.authenticated(&self.shared.live));
            match self.parser.parse(&self.inbuf) {
                Ok(Parsed::Incomplete { need }) => {
                    self.need = need;
                    break false;
                }
                Ok(Parsed::Empty { consumed }) => {
                    self.inbuf.advance(consumed);
                    self.need = 0;
                }
                Ok(Parsed::Command { consumed }) => {
                    let args = self.parser.args(&self.inbuf);
                    let mut ctx = Ctx {
                        shared: &self.shared,
                        session: &mut self.session,
                        out: &mut self.out,
                        tx: None,
                    };
                    cmd::dispatch(&mut ctx, &args);
                    self.inbuf.advance(consumed);
                    self.need = 0;
                    if self.session.close_after_reply || self.session.shutdown {
                        break true;
                    }
                }
                Err(e) => {
                    let line = format!("ERR {e}");
                    self.session.local.error(&line);
                    self.out.error(&line);
                    warning!(
                        "Protocol error from client id={} addr={}: {e}",
                        self.session.handle.id,
                        self.session.handle.addr
                    );
                    break true;
                }
            }
        };
        if self.session.scratch.capacity() > 1 << 20 {
            self.session.scratch = Vec::new();
        }
        // Found by an attack (2026-12-07): each idle connection kept the
        // memory of its largest request (60 MiB each after one large SET;
        // redis-server shrinks its idle clients' query buffers).
        if self.inbuf_grown && self.inbuf.is_empty() {
            self.inbuf = BytesMut::with_capacity(READ_CHUNK);
            self.inbuf_grown = false;
        }
        close
    }

    /// Grows the read buffer before a read: to what the parser needs (a
    /// large bulk's memory is taken once, not copied as the buffer
    /// doubles), at least [`READ_CHUNK`] free and at most [`MAX_RESERVE`]
    /// more.
    fn reserve(&mut self) {
        let want = self
            .need
            .saturating_sub(self.inbuf.len())
            .clamp(READ_CHUNK, MAX_RESERVE);
        if self.inbuf.capacity() - self.inbuf.len() < want {
            self.inbuf.reserve(want);
            self.inbuf_grown |= self.inbuf.capacity() > SHRINK_ABOVE;
        }
    }
}
