//! The clock used for expiry.
//!
//! Expiry times are wall-clock Unix time in milliseconds
//! ([`std::time::SystemTime`], resolution 1 ms), stored in the record, so a
//! TTL counts down across restarts. A key whose expiry is at or before now
//! is gone. If the system clock is set back, keys live longer; set forward,
//! they expire sooner (as in Redis).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Now, in Unix ms.
pub(crate) fn now_ms() -> u64 {
    to_ms(SystemTime::now())
}

/// `t` in Unix ms (0 before the epoch, saturating far in the future).
pub(crate) fn to_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Unix ms `ttl` from now (rounded up to whole ms, saturating).
pub(crate) fn deadline(ttl: Duration) -> u64 {
    let ms = u64::try_from(ttl.as_micros().div_ceil(1000)).unwrap_or(u64::MAX);
    now_ms().saturating_add(ms)
}

/// Time left until `at` (Unix ms), zero when past.
pub(crate) fn remaining(at: u64) -> Duration {
    Duration::from_millis(at.saturating_sub(now_ms()))
}

/// `at` (Unix ms) as a [`SystemTime`].
pub(crate) fn to_system_time(at: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(at)
}
