//! The shutdown signal: requested once, by SIGTERM, SIGINT or the
//! SHUTDOWN command, and waited for by the server's main thread.
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

/// The shutdown request: set once (later requests keep the first reason).
#[derive(Debug, Default)]
pub struct Shutdown {
    reason: Mutex<Option<Reason>>,
    requested: Condvar,
}

impl Shutdown {
    /// Requests the shutdown, unless one was requested already.
    pub fn request(&self, reason: Reason) {
        let mut current = self.reason.lock();
        if current.is_none() {
            *current = Some(reason);
            self.requested.notify_all();
        }
    }

    /// Withdraws the request: the server keeps running (its final sync
    /// failed); the next request starts a shutdown again.
    pub fn withdraw(&self) {
        *self.reason.lock() = None;
    }

    /// Whether a shutdown was requested.
    pub fn is_requested(&self) -> bool {
        self.reason.lock().is_some()
    }

    /// Blocks until a shutdown is requested or `timeout` has passed;
    /// returns whether one was requested.
    pub fn wait_timeout(&self, timeout: std::time::Duration) -> bool {
        let mut reason = self.reason.lock();
        if reason.is_none() {
            let _ = self.requested.wait_for(&mut reason, timeout);
        }
        reason.is_some()
    }

    /// Blocks until a shutdown is requested; returns its reason.
    pub fn wait(&self) -> Reason {
        let mut reason = self.reason.lock();
        loop {
            if let Some(r) = *reason {
                return r;
            }
            self.requested.wait(&mut reason);
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
        assert!(shutdown.wait_timeout(std::time::Duration::from_secs(60)));
        assert!(!Shutdown::default().wait_timeout(std::time::Duration::from_millis(1)));
    }
}
