//! Running under a supervisor, as redis-server does: `daemonize`, the
//! `pidfile`, and telling systemd or upstart that the server is ready
//! (`supervised`).

use std::path::{Path, PathBuf};

use sd_notify::NotifyState;

use crate::config::{Config, DEFAULT_PIDFILE, Supervised};
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
/// removes its own).
#[derive(Debug)]
pub struct PidFile(PathBuf);

impl PidFile {
    /// Writes this process's id to the configured `pidfile` (with
    /// `daemonize` and none configured, [`DEFAULT_PIDFILE`]); `None` when
    /// neither asks for one. A file that cannot be written is a warning,
    /// not a failure, as in redis-server.
    pub fn create(config: &Config) -> Option<PidFile> {
        let path = match (&config.pidfile, config.daemonize) {
            (Some(path), _) => path.clone(),
            (None, true) => PathBuf::from(DEFAULT_PIDFILE),
            (None, false) => return None,
        };
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
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The supervision `supervised` asks for, `auto` resolved from the
/// environment as redis-server resolves it.
fn mode(supervised: Supervised) -> Supervised {
    match supervised {
        Supervised::Auto if std::env::var_os("NOTIFY_SOCKET").is_some() => Supervised::Systemd,
        Supervised::Auto if std::env::var_os("UPSTART_JOB").is_some() => Supervised::Upstart,
        Supervised::Auto => Supervised::No,
        mode => mode,
    }
}

/// Tells the supervisor that the server is ready: systemd gets `STATUS=`
/// and `READY=1` on `$NOTIFY_SOCKET`; under upstart the process stops
/// itself with `SIGSTOP`, which upstart's `expect stop` waits for (and
/// continues).
pub fn ready(supervised: Supervised) {
    match mode(supervised) {
        Supervised::Systemd => {
            if std::env::var_os("NOTIFY_SOCKET").is_none() {
                warning!("systemd supervision requested, but NOTIFY_SOCKET not found");
                return;
            }
            notice!(
                "Supervised by systemd. Please make sure you set appropriate values for TimeoutStartSec and TimeoutStopSec in your service unit."
            );
            let said = sd_notify::notify(&[
                NotifyState::Status("Ready to accept connections"),
                NotifyState::Ready,
            ]);
            if let Err(e) = said {
                warning!("Cannot tell systemd the server is ready: {e}");
            }
        }
        Supervised::Upstart => {
            if std::env::var_os("UPSTART_JOB").is_none() {
                warning!("upstart supervision requested, but UPSTART_JOB not found");
                return;
            }
            notice!("Supervised by upstart, will stop to signal readiness.");
            if let Err(e) = nix::sys::signal::raise(nix::sys::signal::Signal::SIGSTOP) {
                warning!("Cannot stop to signal readiness to upstart: {e}");
            }
        }
        Supervised::No | Supervised::Auto => {}
    }
}

/// Tells systemd that the server is stopping (`STOPPING=1`).
pub fn stopping(supervised: Supervised) {
    if mode(supervised) == Supervised::Systemd {
        let _ = sd_notify::notify(&[NotifyState::Stopping]);
    }
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
    }

    #[test]
    fn no_pid_file_unless_asked_for_or_daemonized() {
        assert!(PidFile::create(&Config::default()).is_none());
        let unwritable = Config {
            pidfile: Some(PathBuf::from("/nonexistent-dir/emberkv.pid")),
            ..Config::default()
        };
        assert!(PidFile::create(&unwritable).is_none());
    }
}
