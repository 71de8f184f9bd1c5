//! The shutdown signal: one broadcast, sent once, by SIGTERM, SIGINT or
//! the SHUTDOWN command.
//!
//! Listeners hold a [`Shutdown`] and stop accepting when it fires. Open
//! connections are then told through their registry handle
//! ([`crate::clients::ClientHandle::kill`]), so a connection waits on a
//! single future for both CLIENT KILL and shutdown; the server waits for
//! every connection to finish before it closes the store.

use tokio::sync::broadcast;

/// A receiver of the shutdown signal that remembers having seen it.
#[derive(Debug)]
pub struct Shutdown {
    seen: bool,
    rx: broadcast::Receiver<()>,
}

impl Shutdown {
    /// Listens on `rx`.
    pub fn new(rx: broadcast::Receiver<()>) -> Self {
        Shutdown { seen: false, rx }
    }

    /// Whether the signal has been received.
    pub fn is_shutdown(&self) -> bool {
        self.seen
    }

    /// Waits for the signal (returns at once if already seen).
    pub async fn recv(&mut self) {
        if self.seen {
            return;
        }
        // Lagged or closed both mean the signal was sent (or can no longer
        // be): either way, shut down.
        let _ = self.rx.recv().await;
        self.seen = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn every_listener_sees_one_send() {
        let (tx, _) = broadcast::channel(1);
        let mut a = Shutdown::new(tx.subscribe());
        let mut b = Shutdown::new(tx.subscribe());
        assert!(!a.is_shutdown());
        tx.send(()).unwrap();
        a.recv().await;
        b.recv().await;
        assert!(a.is_shutdown() && b.is_shutdown());
        a.recv().await;
    }

    #[tokio::test]
    async fn a_dropped_sender_also_shuts_down() {
        let (tx, rx) = broadcast::channel::<()>(1);
        let mut s = Shutdown::new(rx);
        drop(tx);
        s.recv().await;
        assert!(s.is_shutdown());
    }
}
