//! The registry of connected clients: what CLIENT LIST shows, what CLIENT
//! KILL, `--timeout` and shutdown use to close a connection, and the
//! `--maxclients` semaphore.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use parking_lot::Mutex;

/// How a client is connected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// TCP.
    Tcp,
    /// The unix socket.
    Unix,
}

/// What the server knows about one connected client, shared between its
/// connection task and the rest of the server.
#[derive(Debug)]
pub struct ClientHandle {
    /// CLIENT ID.
    pub id: u64,
    /// Peer address (`ip:port`, or `/path:0` for the unix socket).
    pub addr: String,
    /// Local address.
    pub laddr: String,
    /// The socket's file descriptor.
    pub fd: i32,
    /// How it is connected.
    pub transport: Transport,
    created: Instant,
    /// Milliseconds after `created` of the last command.
    last_active_ms: AtomicU64,
    /// CLIENT SETNAME.
    pub name: Mutex<Option<String>>,
    /// CLIENT SETINFO LIB-NAME / LIB-VER.
    pub lib: Mutex<(String, String)>,
    /// Protocol version (2 or 3).
    pub resp: AtomicU8,
    /// Index of the last command in the command table, plus one (0: none).
    pub last_cmd: AtomicUsize,
    /// The container (upper case) and the subcommand of the last container
    /// command run (CLIENT LIST shows `cmd=client|list`, as Redis 7);
    /// shown only while the last command is that container.
    pub last_sub: Mutex<(&'static str, &'static str)>,
    /// Commands queued since MULTI, or -1 outside MULTI.
    pub multi: AtomicI64,
    /// Bytes in the query buffer at the last read.
    pub qbuf: AtomicUsize,
    /// Bytes of replies not yet sent.
    pub omem: AtomicUsize,
    /// CLIENT NO-EVICT ON (shown as flag `e`; nothing is evicted here).
    pub no_evict: AtomicBool,
    /// A key the client watches changed since its WATCH, so its EXEC will
    /// fail (flag `d`); set by the writer ([`crate::store::Watches`]),
    /// cleared when the client lets go of its watched keys.
    pub dirty_cas: Arc<AtomicBool>,
    killed: AtomicBool,
    /// Wakes the event loop that serves the client, so that it sees a
    /// kill at once (`None` in tests without a loop).
    waker: Option<Arc<mio::Waker>>,
}

impl ClientHandle {
    /// Seconds since the client connected.
    pub fn age_secs(&self) -> u64 {
        self.created.elapsed().as_secs()
    }

    /// Seconds since its last command.
    pub fn idle_secs(&self) -> u64 {
        let active = self.last_active_ms.load(Ordering::Relaxed);
        (self.created.elapsed().as_millis() as u64).saturating_sub(active) / 1000
    }

    /// Records activity now.
    pub fn touch(&self) {
        self.last_active_ms
            .store(self.created.elapsed().as_millis() as u64, Ordering::Relaxed);
    }

    /// Asks the connection to close (CLIENT KILL, timeout, shutdown): its
    /// event loop is woken and closes it before its next read.
    pub fn kill(&self) {
        self.killed.store(true, Ordering::Release);
        if let Some(waker) = &self.waker {
            // A loop that cannot be woken has stopped, and its clients
            // with it.
            let _ = waker.wake();
        }
    }

    /// Whether [`ClientHandle::kill`] was called.
    pub fn is_killed(&self) -> bool {
        self.killed.load(Ordering::Acquire)
    }
}

/// Connected clients and the `--maxclients` limit.
#[derive(Debug)]
pub struct Clients {
    map: Mutex<BTreeMap<u64, Arc<ClientHandle>>>,
    next_id: AtomicU64,
    /// Places free among `maxclients`.
    free: AtomicUsize,
    /// Places owed after a CONFIG SET lowered maxclients below the number
    /// connected: places given back pay this debt before they are free.
    owed: AtomicUsize,
}

/// A connection's place among `--maxclients`; given back when dropped.
#[derive(Debug)]
pub struct Slot {
    clients: Arc<Clients>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let paid = self
            .clients
            .owed
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
        if paid.is_err() {
            self.clients.free.fetch_add(1, Ordering::AcqRel);
        }
    }
}

impl Clients {
    /// An empty registry admitting `max` clients.
    pub fn new(max: usize) -> Self {
        Clients {
            map: Mutex::new(BTreeMap::new()),
            next_id: AtomicU64::new(1),
            free: AtomicUsize::new(max),
            owed: AtomicUsize::new(0),
        }
    }

    /// A slot for one more client, or `None` when `maxclients` are
    /// connected.
    pub fn admit(self: &Arc<Self>) -> Option<Slot> {
        self.free
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
            .ok()
            .map(|_| Slot {
                clients: Arc::clone(self),
            })
    }

    /// Changes the limit from `old` to `new`.
    pub fn resize(&self, old: usize, new: usize) {
        if new > old {
            let mut more = new - old;
            // Cancel debt first.
            while more > 0 {
                let paid = self
                    .owed
                    .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
                if paid.is_err() {
                    break;
                }
                more -= 1;
            }
            self.free.fetch_add(more, Ordering::AcqRel);
        } else if old > new {
            let fewer = old - new;
            let mut taken = 0;
            let _ = self
                .free
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                    taken = n.min(fewer);
                    Some(n - taken)
                });
            self.owed.fetch_add(fewer - taken, Ordering::AcqRel);
        }
    }

    /// Registers a new client and returns its handle; `waker` wakes the
    /// event loop that will serve it.
    pub fn register(
        &self,
        addr: String,
        laddr: String,
        fd: i32,
        transport: Transport,
        waker: Option<Arc<mio::Waker>>,
    ) -> Arc<ClientHandle> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let handle = Arc::new(ClientHandle {
            id,
            addr,
            laddr,
            fd,
            transport,
            created: Instant::now(),
            last_active_ms: AtomicU64::new(0),
            name: Mutex::new(None),
            lib: Mutex::new((String::new(), String::new())),
            resp: AtomicU8::new(2),
            last_cmd: AtomicUsize::new(0),
            last_sub: Mutex::new(("", "")),
            multi: AtomicI64::new(-1),
            qbuf: AtomicUsize::new(0),
            omem: AtomicUsize::new(0),
            no_evict: AtomicBool::new(false),
            dirty_cas: Arc::new(AtomicBool::new(false)),
            killed: AtomicBool::new(false),
            waker,
        });
        self.map.lock().insert(id, Arc::clone(&handle));
        handle
    }

    /// Removes a client that disconnected.
    pub fn unregister(&self, id: u64) {
        self.map.lock().remove(&id);
    }

    /// Every connected client, by id.
    pub fn list(&self) -> Vec<Arc<ClientHandle>> {
        self.map.lock().values().cloned().collect()
    }

    /// Number of connected clients.
    pub fn len(&self) -> usize {
        self.map.lock().len()
    }

    /// Whether no client is connected.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admit_respects_the_limit_and_resizes() {
        let clients = Arc::new(Clients::new(2));
        let a = clients.admit().unwrap();
        let b = clients.admit().unwrap();
        assert!(clients.admit().is_none());
        clients.resize(2, 3);
        let c = clients.admit().unwrap();
        assert!(clients.admit().is_none());
        // Lower to 1 with 3 connected: two releases are owed.
        clients.resize(3, 1);
        drop(a);
        assert!(clients.admit().is_none());
        drop(b);
        assert!(clients.admit().is_none());
        drop(c);
        let d = clients.admit().unwrap();
        assert!(clients.admit().is_none());
        drop(d);
    }

    #[test]
    fn kill_wakes_the_clients_event_loop() {
        let mut poll = mio::Poll::new().unwrap();
        let waker = Arc::new(mio::Waker::new(poll.registry(), mio::Token(7)).unwrap());
        let clients = Clients::new(10);
        let h = clients.register("a".into(), "b".into(), 3, Transport::Tcp, Some(waker));
        assert_eq!(clients.len(), 1);
        h.kill();
        assert!(h.is_killed());
        let mut events = mio::Events::with_capacity(4);
        poll.poll(&mut events, Some(std::time::Duration::from_secs(10)))
            .unwrap();
        assert!(events.iter().any(|e| e.token() == mio::Token(7)));
        clients.unregister(h.id);
        assert!(clients.is_empty());
    }
}
