//! One client connection: read, run every whole command buffered, write
//! the replies in one batch, repeat.
//!
//! # Pipelining and back-pressure
//! Every command found in the read buffer runs in order and appends its
//! reply to the output buffer; the replies go out together (one write for
//! a pipeline, not one per command). Reading goes on while replies are
//! pending, so a client that writes a long pipeline before it reads cannot
//! deadlock against the server; only once 64 MiB of replies wait unsent
//! does the connection stop reading until the client drains them.
//!
//! # Bad input
//! A protocol error gets Redis's `-ERR Protocol error: ...` reply, after
//! the replies of the commands before it, and the connection closes. A
//! query buffer above `client-query-buffer-limit` (1 GB) does the same.
//! A panic in a command ends this connection's task only.
//!
//! # appendfsync always
//! The engine runs with background flushing; when a batch ran a write
//! command and `appendfsync` is `always`, the connection waits, before it
//! sends the batch's replies, for a [`crate::store::Store::sync`] that
//! started after the batch ([`crate::commit`]: one connection at a time
//! runs it on the blocking pool, the others wait for it without a thread
//! each), so a pipeline of writes costs one fdatasync, not one each, and
//! connections waiting at the same moment share one. Replies never leave
//! before the fdatasync covering their writes has returned; if it fails,
//! the connection closes without them.

use std::io;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpStream, UnixStream};

use crate::clients::{ClientHandle, Clients, Slot};
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
/// pending replies (see `Connection::drain`).
const DRAIN_STALL: std::time::Duration = std::time::Duration::from_secs(5);

/// Most the read buffer grows by before one read (64 MiB, the largest
/// value the engine takes): a bulk announced larger is read in steps, its
/// memory taken as its bytes arrive, not at its header. Reserving what the
/// header announced panicked the connection's task at a length near
/// `i64::MAX` (with `proto-max-bulk-len` raised that far) and aborted the
/// process, out of memory, at 10^15 bytes.
const MAX_RESERVE: usize = 64 << 20;

/// A client's socket.
#[derive(Debug)]
pub enum Stream {
    /// TCP.
    Tcp(TcpStream),
    /// The unix socket.
    Unix(UnixStream),
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

struct Connection {
    shared: Arc<Shared>,
    session: Session,
    inbuf: BytesMut,
    out: Reply,
    parser: RequestParser,
    /// The buffer length at which the parser can make progress.
    need: usize,
}

/// Takes a client out of the client list when dropped: when its
/// connection ends, and when its task unwinds from a panic too (a task
/// that panicked left a client in CLIENT LIST and INFO's count for good,
/// and SHUTDOWN waited for it).
struct Registered<'a> {
    clients: &'a Clients,
    id: u64,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.clients.unregister(self.id);
    }
}

/// Serves one client until it leaves, is killed, or the server shuts
/// down; then unregisters it and frees its `maxclients` slot (which
/// happens on a panic's unwinding too).
pub async fn serve(stream: Stream, shared: Arc<Shared>, handle: Arc<ClientHandle>, slot: Slot) {
    let registered = Registered {
        clients: &shared.clients,
        id: handle.id,
    };
    let max_bulk = shared.live.max_bulk.load(Ordering::Relaxed) as usize;
    let mut conn = Connection {
        session: Session::new(Arc::clone(&handle), &shared),
        shared: Arc::clone(&shared),
        inbuf: BytesMut::with_capacity(READ_CHUNK),
        out: Reply::new(),
        parser: RequestParser::new(max_bulk),
        need: 0,
    };
    let result = match stream {
        Stream::Tcp(mut s) => {
            let (r, w) = s.split();
            conn.run(r, w).await
        }
        Stream::Unix(mut s) => {
            let (r, w) = s.split();
            conn.run(r, w).await
        }
    };
    if let Err(e) = result {
        verbose!("Client id={} addr={} closed: {e}", handle.id, handle.addr);
    }
    shared.stats.add(&mut conn.session.local);
    if conn.session.shutdown {
        shared.request_shutdown();
    }
    drop(registered);
    drop(slot);
}

/// What woke the connection.
enum Event {
    Killed,
    Read(io::Result<usize>),
    Wrote(io::Result<usize>),
}

impl Connection {
    async fn run<R, W>(&mut self, mut rd: R, mut wr: W) -> io::Result<()>
    where
        R: AsyncRead + Unpin,
        W: AsyncWrite + Unpin,
    {
        let handle = Arc::clone(&self.session.handle);
        let killed = handle.killed();
        tokio::pin!(killed);
        let mut eof = false;
        loop {
            let close = self.process();
            if self.session.dirty {
                self.session.dirty = false;
                if self.shared.live.fsync_always.load(Ordering::Relaxed) {
                    self.sync().await?;
                }
            }
            self.shared.stats.add(&mut self.session.local);
            handle.omem.store(self.out.len(), Ordering::Relaxed);
            if close || eof || self.session.shutdown {
                self.drain(&mut wr).await;
                let _ = wr.shutdown().await;
                return Ok(());
            }
            self.reserve();
            let reading = self.out.len() < OUT_HIGH_WATER;
            let event = if self.out.is_empty() {
                tokio::select! {
                    biased;
                    _ = &mut killed => Event::Killed,
                    r = rd.read_buf(&mut self.inbuf) => Event::Read(r),
                }
            } else {
                tokio::select! {
                    biased;
                    _ = &mut killed => Event::Killed,
                    w = wr.write(self.out.pending()) => Event::Wrote(w),
                    r = rd.read_buf(&mut self.inbuf), if reading => Event::Read(r),
                }
            };
            match event {
                Event::Killed => {
                    // Best effort: replies already computed go out if the
                    // socket takes them now.
                    let flush = wr.write_all(self.out.pending());
                    let _ =
                        tokio::time::timeout(std::time::Duration::from_millis(100), flush).await;
                    return Ok(());
                }
                Event::Read(r) => {
                    let n = r?;
                    if n == 0 {
                        eof = true;
                        continue;
                    }
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
                        self.inbuf.clear();
                        let _ = tokio::time::timeout(
                            std::time::Duration::from_secs(5),
                            wr.write_all(self.out.pending()),
                        )
                        .await;
                        return Ok(());
                    }
                }
                Event::Wrote(w) => {
                    let n = w?;
                    if n == 0 {
                        return Err(io::ErrorKind::WriteZero.into());
                    }
                    self.session.local.net_out += n as u64;
                    self.out.consume(n);
                    // Taking replies is activity, as in redis-server: a
                    // client reading a large reply slowly is not idle
                    // (`--timeout` closed one 2.5 s into 125 MB).
                    handle.touch();
                }
            }
        }
    }

    /// Sends what is pending before a close, for as long as the client
    /// takes it: a client that takes nothing for [`DRAIN_STALL`] cannot
    /// hold the connection open, but one that reads slowly gets its whole
    /// reply, as from redis-server (a bound of 5 s on the whole send cut
    /// 125 MB of replies before a QUIT at 77 MB).
    async fn drain<W: AsyncWrite + Unpin>(&mut self, wr: &mut W) {
        while !self.out.is_empty() {
            match tokio::time::timeout(DRAIN_STALL, wr.write(self.out.pending())).await {
                Ok(Ok(n)) if n > 0 => {
                    self.session.local.net_out += n as u64;
                    self.out.consume(n);
                }
                _ => return,
            }
        }
    }

    /// Runs every whole command in the read buffer; returns whether the
    /// connection must close once the replies are sent.
    fn process(&mut self) -> bool {
        self.parser
            .set_max_bulk(self.shared.live.max_bulk.load(Ordering::Relaxed) as usize);
        let close = loop {
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
        close
    }

    /// Grows the read buffer before a read: to what the parser needs (a
    /// large bulk is read in few calls), at least [`READ_CHUNK`] free and
    /// at most [`MAX_RESERVE`] more.
    fn reserve(&mut self) {
        let want = self
            .need
            .saturating_sub(self.inbuf.len())
            .clamp(READ_CHUNK, MAX_RESERVE);
        if self.inbuf.capacity() - self.inbuf.len() < want {
            self.inbuf.reserve(want);
        }
    }

    /// appendfsync always: makes the batch's writes durable before its
    /// replies go out.
    async fn sync(&mut self) -> io::Result<()> {
        let shared = Arc::clone(&self.shared);
        match self.shared.commit.wait(move || shared.store.sync()).await {
            Ok(()) => {
                self.shared.stats.changes.store(0, Ordering::Relaxed);
                Ok(())
            }
            Err(e) => {
                warning!("fdatasync failed, closing the client without its replies: {e}");
                Err(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clients::Transport;

    /// A client leaves the list when its task unwinds from a panic, not
    /// only when it ends normally.
    #[test]
    fn a_client_whose_task_panics_leaves_the_list() {
        let clients = Clients::new(10);
        let handle = clients.register("a".into(), "b".into(), 3, Transport::Tcp);
        let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _registered = Registered {
                clients: &clients,
                id: handle.id,
            };
            panic!("a connection task's bug");
        }));
        assert!(unwound.is_err());
        assert!(clients.is_empty());
    }
}
