//! A hint to the processor: start loading a line of memory into its
//! caches, so that a load of it soon after does not wait the whole miss.
//! Compaction issues one for the index slot of each record a few records
//! ahead of its lookup (see `compaction::compact_segment`).

/// Asks the processor to start loading the 64-byte line holding the start
/// of `value` into its caches (`prefetcht0`). A hint: it reads and changes
/// nothing the program can observe, and it never faults. Does nothing on
/// targets other than x86-64, or under Miri.
#[inline]
pub(crate) fn prefetch<T>(value: &T) {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        // SAFETY: the pointer comes from a live reference, so it is valid
        // and aligned; a prefetch neither reads nor writes memory as far as
        // the program can observe (Intel SDM, PREFETCHh: it does not fault).
        unsafe { _mm_prefetch::<_MM_HINT_T0>((value as *const T).cast()) };
    }
    #[cfg(not(all(target_arch = "x86_64", not(miri))))]
    let _ = value;
}

#[cfg(test)]
mod tests {
    use super::prefetch;

    #[test]
    fn a_prefetch_changes_nothing() {
        let values: Vec<u64> = (0..1_000).collect();
        for v in &values {
            prefetch(v);
        }
        prefetch(&values);
        prefetch(&());
        assert!(values.iter().enumerate().all(|(i, &v)| v == i as u64));
    }
}
