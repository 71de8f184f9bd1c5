//! The shutdown signal: requested by SIGTERM, SIGINT or the SHUTDOWN
//! command, and waited for by the server's main thread, which withdraws a
//! signal's request when the store's sync fails (the server keeps
//! running) and otherwise confirms it (which stops the cron thread).
//!
//! The main thread then stops the listeners and tells every open
//! connection to close through its registry handle
//! ([`crate::clients::ClientHandle::kill`]), waits for the connections to
//! finish, and closes the store.

use parking_lot::{Condvar, Mutex};

/// Why the server shuts down.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// SIGTERM.
    Terminate,
    /// SIGINT.
    Interrupt,
    /// The SHUTDOWN command.
    Command,
    /// An event loop's thread panicked outside any command (a bug): its
    /// clients are gone, and if it held the listeners no client would be
    /// accepted again, so the server stops cleanly instead.
    LoopFailed,
}

/// The shutdown request: set once (later requests keep the first reason),
/// withdrawn when the server refuses it, and confirmed when the server
/// goes ahead.
#[derive(Debug, Default)]
pub struct Shutdown {
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Debug, Default)]
struct State {
    /// The pending request's reason.
    reason: Option<Reason>,
    /// The server goes ahead with the shutdown ([`Shutdown::confirm`]).
    stopping: bool,
}

impl Shutdown {
    /// Requests the shutdown, unless one was requested already.
    pub fn request(&self, reason: Reason) {
        let mut state = self.state.lock();
        if state.reason.is_none() {
            state.reason = Some(reason);
            self.changed.notify_all();
        }
    }

    /// Withdraws the request: the server keeps running (its final sync
    /// failed); the next request starts a shutdown again.
    pub fn withdraw(&self) {
        self.state.lock().reason = None;
    }

    /// The server goes ahead with the requested shutdown: wakes
    /// [`Shutdown::wait_timeout`].
    pub fn confirm(&self) {
        self.state.lock().stopping = true;
        self.changed.notify_all();
    }

    /// Whether a shutdown was requested (and not withdrawn).
    pub fn is_requested(&self) -> bool {
        self.state.lock().reason.is_some()
    }

    /// Blocks until the shutdown is confirmed or `timeout` has passed;
    /// returns whether it was confirmed (a request alone does not count:
    /// it may be withdrawn).
    pub fn wait_timeout(&self, timeout: std::time::Duration) -> bool {
        let mut state = self.state.lock();
        if !state.stopping {
            let _ = self.changed.wait_for(&mut state, timeout);
        }
        state.stopping
    }

    /// Blocks until a shutdown is requested; returns its reason.
    pub fn wait(&self) -> Reason {
        let mut state = self.state.lock();
        loop {
            if let Some(r) = state.reason {
                return r;
            }
            self.changed.wait(&mut state);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_waiter_sees_the_first_request_only() {
        let shutdown = Arc::new(Shutdown::default());
        assert!(!shutdown.is_requested());
        let waiter = {
            let shutdown = Arc::clone(&shutdown);
            std::thread::spawn(move || shutdown.wait())
        };
        shutdown.request(Reason::Command);
        shutdown.request(Reason::Terminate);
        assert_eq!(waiter.join().unwrap(), Reason::Command);
        assert!(shutdown.is_requested());
        assert_eq!(shutdown.wait(), Reason::Command);
        assert!(!shutdown.wait_timeout(std::time::Duration::from_millis(1)));
        shutdown.confirm();
        assert!(shutdown.wait_timeout(std::time::Duration::from_secs(60)));
        assert!(!Shutdown::default().wait_timeout(std::time::Duration::from_millis(1)));
    }

    /// A withdrawn request (a stop whose sync failed) is no request, and
    /// the next one is waited for again.
    #[test]
    fn a_withdrawn_request_leaves_the_server_running() {
        let shutdown = Shutdown::default();
        shutdown.request(Reason::Terminate);
        shutdown.withdraw();
        assert!(!shutdown.is_requested());
        assert!(!shutdown.wait_timeout(std::time::Duration::from_millis(1)));
        shutdown.request(Reason::Interrupt);
        assert_eq!(shutdown.wait(), Reason::Interrupt);
    }
}
