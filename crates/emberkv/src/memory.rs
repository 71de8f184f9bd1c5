//! What the store asks of the machine's memory at once: tables allocated
//! whole (the index's, the read cache's, a checkpoint's), reserved
//! fallibly and held to the machine's physical memory, so that an option
//! or a file asking for too much gets an error instead of an abort, or a
//! process killed by the kernel as it fills memory that overcommit
//! granted.

use crate::error::{Error, Result};

/// This machine's physical memory in bytes (`MemTotal` in
/// `/proc/meminfo`), or `None` when it cannot be read.
pub(crate) fn physical() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// Refuses `bytes` of tables that an option asks to be allocated at open
/// (described by `what`, such as "key_capacity = 17179869184: its index
/// tables") when they exceed this machine's physical memory
/// ([`physical`]; not checked where it cannot be read). Such an
/// allocation would not fail at once: with the kernel's overcommit, tables
/// allocated piece by piece are granted, and the process is killed as it
/// fills them.
///
/// # Errors
/// [`Error::InvalidOptions`] naming `what`, its bytes and the memory.
pub(crate) fn check_fits(what: &str, bytes: u64) -> Result<()> {
    match physical() {
        Some(memory) if bytes > memory => Err(Error::InvalidOptions(format!(
            "{what} ({bytes} bytes) exceed this machine's memory ({memory} bytes)"
        ))),
        _ => Ok(()),
    }
}

/// `len` elements made by `fill`, or `None` when their memory cannot be
/// allocated (reserved before any is made).
pub(crate) fn try_filled<T>(len: usize, fill: impl FnMut() -> T) -> Option<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(len).ok()?;
    v.extend(std::iter::repeat_with(fill).take(len));
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_beyond_this_machines_memory_are_refused() {
        let memory = physical().expect("Linux has /proc/meminfo");
        assert!(memory > 1 << 20, "{memory}");
        assert!(check_fits("tables", memory).is_ok());
        match check_fits("key_capacity = 7: its index tables", memory + 1) {
            Err(Error::InvalidOptions(why)) => {
                assert!(
                    why.starts_with("key_capacity = 7: its index tables ("),
                    "{why}"
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_fill_beyond_the_address_space_is_none_not_an_abort() {
        assert_eq!(try_filled(3, || 7u32), Some(vec![7, 7, 7]));
        assert!(try_filled(usize::MAX / 2, || 0u64).is_none());
    }
}
