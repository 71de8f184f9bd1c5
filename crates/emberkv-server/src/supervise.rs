//! Running under a supervisor, as redis-server does: `daemonize`, the
//! `pidfile`, and telling systemd or upstart that the server is ready
//! (`supervised`).

use std::io;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::path::{Path, PathBuf};

use crate::config::{Config, Supervised};
use crate::{notice, warning};

/// Detaches from the terminal as redis-server's `daemonize()` does, by
/// `daemon(3)`: a fork whose parent exits with 0, a new session, standard
/// input, output and error on `/dev/null`; the working directory is
/// kept. Must run while the process has one thread: a fork takes only
/// the calling thread along.
///
/// # Errors
/// The fork or the session failed (the process is still attached).
pub fn daemonize() -> Result<(), String> {
    nix::unistd::daemon(true, false).map_err(|e| format!("cannot daemonize: {e}"))
}

/// The pid file, removed when dropped (at a clean exit, as redis-server
/// removes its own) if it still holds this process's id.
#[derive(Debug)]
pub struct PidFile(PathBuf);

impl PidFile {
    /// Writes this process's id to the configured `pidfile` (a daemon
    /// is given [`crate::config::DEFAULT_PIDFILE`] when none is
    /// configured); `None` when there is none. A file that cannot be written is a warning, not a
    /// failure, as in redis-server.
    pub fn create(config: &Config) -> Option<PidFile> {
        let path = config.pidfile.clone()?;
        match std::fs::write(&path, format!("{}\n", std::process::id())) {
            Ok(()) => Some(PidFile(path)),
            Err(e) => {
                warning!("Failed to write PID file {}: {e}", path.display());
                None
            }
        }
    }

    /// Where the pid was written.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for PidFile {
    /// Removes the file if it still holds this process's id: another
    /// server may have written its own there since.
    fn drop(&mut self) {
        let ours = format!("{}\n", std::process::id());
        if std::fs::read_to_string(&self.0).is_ok_and(|held| held == ours) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
}

/// The supervision `supervised` asks for, as redis-server's
/// `redisIsSupervised` resolves it: `auto` is upstart when `$UPSTART_JOB`
/// is set, else systemd when `$NOTIFY_SOCKET` is, else none; a mode whose
/// variable is missing is none, with the warning to log.
pub fn resolve(supervised: Supervised) -> (Supervised, Option<&'static str>) {
    let upstart = std::env::var_os("UPSTART_JOB").is_some();
    let systemd = std::env::var_os("NOTIFY_SOCKET").is_some();
    match supervised {
        Supervised::Auto if upstart => (Supervised::Upstart, None),
        Supervised::Auto if systemd => (Supervised::Systemd, None),
        Supervised::Upstart if !upstart => (
            Supervised::No,
            Some("upstart supervision requested, but UPSTART_JOB not found!"),
        ),
        Supervised::Systemd if !systemd => (
            Supervised::No,
            Some(
                "systemd supervision requested or auto-detected, but appropriate environment variable (NOTIFY_SOCKET) not found!",
            ),
        ),
        Supervised::Auto => (Supervised::No, None),
        mode => (mode, None),
    }
}

/// Tells the supervisor (`mode`, from [`resolve`]) that the server is
/// ready: systemd gets `STATUS=` and `READY=1` on `$NOTIFY_SOCKET`; under
/// upstart the process stops itself with `SIGSTOP`, which upstart's
/// `expect stop` waits for (and continues).
pub fn ready(mode: Supervised) {
    match mode {
        Supervised::Systemd => {
            notice!(
                "Supervised by systemd. Please make sure you set appropriate values for TimeoutStartSec and TimeoutStopSec in your service unit."
            );
            if let Err(e) = notify_systemd("STATUS=Ready to accept connections\nREADY=1\n") {
                warning!("Cannot tell systemd the server is ready: {e}");
            }
        }
        Supervised::Upstart => {
            notice!("Supervised by upstart, will stop to signal readiness.");
            if let Err(e) = nix::sys::signal::raise(nix::sys::signal::Signal::SIGSTOP) {
                warning!("Cannot stop to signal readiness to upstart: {e}");
            }
        }
        Supervised::No | Supervised::Auto => {}
    }
}

/// Tells systemd that the server is stopping (`STOPPING=1`).
pub fn stopping(mode: Supervised) {
    if mode == Supervised::Systemd {
        let _ = notify_systemd("STOPPING=1\n");
    }
}

/// Sends `message` in one datagram to `$NOTIFY_SOCKET`, a path or, with a
/// leading `@`, a name in Linux's abstract namespace (sd_notify(3)).
fn notify_systemd(message: &str) -> io::Result<()> {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        return Ok(());
    };
    let socket = UnixDatagram::unbound()?;
    match path.as_bytes().strip_prefix(b"@") {
        Some(name) => {
            socket.send_to_addr(message.as_bytes(), &SocketAddr::from_abstract_name(name)?)?
        }
        None => socket.send_to(message.as_bytes(), &path)?,
    };
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pid_file_holds_the_pid_and_goes_with_its_guard() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("server.pid");
        let config = Config {
            pidfile: Some(path.clone()),
            ..Config::default()
        };
        let pid = PidFile::create(&config).expect("written");
        assert_eq!(pid.path(), path);
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            format!("{}\n", std::process::id())
        );
        drop(pid);
        assert!(!path.exists());
        // Another server's since: left alone.
        let pid = PidFile::create(&config).expect("written");
        std::fs::write(&path, "1\n").unwrap();
        drop(pid);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "1\n");
    }

    #[test]
    fn no_pid_file_unless_asked_for() {
        assert!(PidFile::create(&Config::default()).is_none());
        let unwritable = Config {
            pidfile: Some(PathBuf::from("/nonexistent-dir/emberkv.pid")),
            ..Config::default()
        };
        assert!(PidFile::create(&unwritable).is_none());
    }
}
