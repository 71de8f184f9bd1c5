//! The open files limit and `maxclients`, as Redis's
//! `adjustOpenFilesLimit` (`server.c`): every client takes a file
//! descriptor, and so does every segment file of the store (each stays
//! open until compaction retires it). Without this, clients past the
//! limit were accepted by the kernel's queue and then failed in `accept`
//! (`EMFILE`), hanging with no reply while the log filled with errors, and
//! the store competed with them for descriptors.

/// Descriptors kept free beyond the clients and those open when the server
/// starts (32, Redis's `CONFIG_MIN_RESERVED_FDS`): segment files the store
/// creates later, a backup's files, the log file being reopened.
pub const RESERVED_FDS: u64 = 32;

/// What [`fit_clients`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fit {
    /// Clients that fit under `limit`: the number asked for, or fewer
    /// (possibly 0).
    pub clients: usize,
    /// Descriptors the number asked for needs: the clients, those in use
    /// and [`RESERVED_FDS`].
    pub needed: u64,
    /// The soft limit in force after the call (0 where it cannot be read).
    pub limit: u64,
}

/// Raises the soft `RLIMIT_NOFILE` toward what `maxclients` clients need
/// beside `in_use` descriptors and [`RESERVED_FDS`] more, up to the hard
/// limit, and returns how many clients fit under the limit then in force.
/// The soft limit is never lowered. Where the limit cannot be read, all
/// `maxclients` fit (nothing to adjust by).
pub fn fit_clients(maxclients: usize, in_use: u64) -> Fit {
    let needed = (maxclients as u64)
        .saturating_add(in_use)
        .saturating_add(RESERVED_FDS);
    let Ok((soft, hard)) = rlimit::getrlimit(rlimit::Resource::NOFILE) else {
        return Fit {
            clients: maxclients,
            needed,
            limit: 0,
        };
    };
    let mut limit = soft;
    if soft < needed {
        let target = needed.min(hard);
        if rlimit::setrlimit(rlimit::Resource::NOFILE, target, hard).is_ok() {
            limit = target;
        }
    }
    let room = limit.saturating_sub(in_use.saturating_add(RESERVED_FDS));
    Fit {
        clients: room.min(maxclients as u64) as usize,
        needed,
        limit,
    }
}

/// The soft `RLIMIT_NOFILE` in force, if it can be read.
pub fn open_files_limit() -> Option<u64> {
    rlimit::getrlimit(rlimit::Resource::NOFILE)
        .ok()
        .map(|(soft, _)| soft)
}

/// Descriptors this process has open (the entries of `/proc/self/fd`, less
/// the one reading it), or `None` where that cannot be read.
pub fn open_descriptors() -> Option<u64> {
    let entries = std::fs::read_dir("/proc/self/fd").ok()?;
    Some((entries.count() as u64).saturating_sub(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clients_fit_beside_the_descriptors_in_use_and_the_reserve() {
        let Some(limit) = open_files_limit() else {
            return;
        };
        // Asking for no more than fits changes nothing.
        assert_eq!(fit_clients(1, 0).clients, 1);
        // Past even the hard limit: what is left beside the descriptors in
        // use and the reserve, under the limit then in force.
        let in_use = 100;
        let fit = fit_clients(usize::MAX / 2, in_use);
        let now = open_files_limit().unwrap();
        assert!(now >= limit, "the soft limit was lowered: {limit} -> {now}");
        assert_eq!(fit.limit, now);
        assert_eq!(
            fit.clients as u64,
            now.saturating_sub(in_use + RESERVED_FDS)
        );
        // More in use than the limit allows: no client fits.
        assert_eq!(fit_clients(10, now).clients, 0);
    }
}
