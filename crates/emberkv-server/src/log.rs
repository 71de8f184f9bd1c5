//! A small logger in redis-server's format:
//! `pid:M 01 Jan 2025 12:00:00.000 * message`, to standard output or a
//! file, filtered by level (changeable at run time with CONFIG SET).

use std::fmt;
use std::io::Write;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;

/// Log levels, least to most severe, as redis-server names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Everything.
    Debug = 0,
    /// Per-connection events.
    Verbose = 1,
    /// Start, stop, and what an operator should know.
    Notice = 2,
    /// Problems.
    Warning = 3,
    /// Nothing at all.
    Nothing = 4,
}

impl Level {
    /// The level named `s` (case-insensitive).
    pub fn parse(s: &str) -> Option<Level> {
        Some(match s.to_ascii_lowercase().as_str() {
            "debug" => Level::Debug,
            "verbose" => Level::Verbose,
            "notice" => Level::Notice,
            "warning" => Level::Warning,
            "nothing" => Level::Nothing,
            _ => return None,
        })
    }

    /// The level's name.
    pub fn name(self) -> &'static str {
        match self {
            Level::Debug => "debug",
            Level::Verbose => "verbose",
            Level::Notice => "notice",
            Level::Warning => "warning",
            Level::Nothing => "nothing",
        }
    }

    fn mark(self) -> char {
        match self {
            Level::Debug => '.',
            Level::Verbose => '-',
            Level::Notice => '*',
            Level::Warning | Level::Nothing => '#',
        }
    }
}

static LEVEL: AtomicU8 = AtomicU8::new(Level::Notice as u8);
static SINK: OnceLock<Mutex<Box<dyn Write + Send>>> = OnceLock::new();

/// Sets where the log goes (empty `logfile`: standard output) and its
/// level. Called once, at start.
///
/// # Errors
/// When the log file cannot be opened for appending.
pub fn init(level: Level, logfile: &str) -> std::io::Result<()> {
    set_level(level);
    let sink: Box<dyn Write + Send> = if logfile.is_empty() {
        Box::new(std::io::stdout())
    } else {
        Box::new(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(logfile)?,
        )
    };
    let _ = SINK.set(Mutex::new(sink));
    log_panics();
    Ok(())
}

/// Writes every panic to the log too, at warning level, before the
/// default hook prints it to standard error: a connection task that
/// panics ends only that client, and its panic would otherwise go
/// unseen when standard error is not kept. (Skipped when the panic
/// struck while the log was being written.)
fn log_panics() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if let Some(mut sink) = SINK.get().and_then(Mutex::try_lock) {
            let line = line(Level::Warning, format_args!("panic: {info}"));
            let _ = sink.write_all(line.as_bytes());
            let _ = sink.flush();
        }
        previous(info);
    }));
}

/// Changes the level (CONFIG SET loglevel).
pub fn set_level(level: Level) {
    LEVEL.store(level as u8, Ordering::Relaxed);
}

/// Whether messages of `level` are written.
pub fn enabled(level: Level) -> bool {
    level != Level::Nothing && level as u8 >= LEVEL.load(Ordering::Relaxed)
}

/// Writes one message at `level`; before [`init`], to standard error.
pub fn write(level: Level, args: fmt::Arguments<'_>) {
    if !enabled(level) {
        return;
    }
    let line = line(level, args);
    match SINK.get() {
        Some(sink) => {
            let mut sink = sink.lock();
            let _ = sink.write_all(line.as_bytes());
            let _ = sink.flush();
        }
        None => eprint!("{line}"),
    }
}

/// One line of the log, as redis-server writes it: process id, role,
/// time, level mark, message.
fn line(level: Level, args: fmt::Arguments<'_>) -> String {
    format!(
        "{}:M {} {} {}\n",
        std::process::id(),
        timestamp(SystemTime::now()),
        level.mark(),
        args
    )
}

/// `01 Jan 2025 12:00:00.000`, in UTC.
fn timestamp(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let (y, m, day) = civil_from_days((secs / 86_400) as i64);
    let rem = secs % 86_400;
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    format!(
        "{day:02} {} {y} {:02}:{:02}:{:02}.{:03}",
        MONTHS[(m - 1) as usize],
        rem / 3600,
        rem / 60 % 60,
        rem % 60,
        d.subsec_millis()
    )
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard
/// Hinnant's `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// Logs at notice level.
#[macro_export]
macro_rules! notice {
    ($($t:tt)*) => { $crate::log::write($crate::log::Level::Notice, format_args!($($t)*)) };
}

/// Logs at warning level.
#[macro_export]
macro_rules! warning {
    ($($t:tt)*) => { $crate::log::write($crate::log::Level::Warning, format_args!($($t)*)) };
}

/// Logs at verbose level.
#[macro_export]
macro_rules! verbose {
    ($($t:tt)*) => { $crate::log::write($crate::log::Level::Verbose, format_args!($($t)*)) };
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn timestamps_are_civil_utc() {
        let t = UNIX_EPOCH + Duration::from_millis(1_700_000_000_123);
        assert_eq!(timestamp(t), "14 Nov 2023 22:13:20.123");
        assert_eq!(timestamp(UNIX_EPOCH), "01 Jan 1970 00:00:00.000");
        assert_eq!(civil_from_days(19_782), (2024, 2, 29));
    }

    #[test]
    fn levels_parse_and_order() {
        assert_eq!(Level::parse("WARNING"), Some(Level::Warning));
        assert_eq!(Level::parse("loud"), None);
        assert!(Level::Debug < Level::Notice);
        for l in [
            Level::Debug,
            Level::Verbose,
            Level::Notice,
            Level::Warning,
            Level::Nothing,
        ] {
            assert_eq!(Level::parse(l.name()), Some(l));
        }
    }
}
