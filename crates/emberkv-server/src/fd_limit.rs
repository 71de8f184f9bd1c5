//! The open files limit and `maxclients`, as Redis's
//! `adjustOpenFilesLimit` (`server.c`): every client takes a file
//! descriptor, and so does every segment file whose descriptor the store
//! has open (at most [`STORE_FILES`]). Without this, clients past the limit were accepted by
//! the kernel's queue and then failed in `accept` (`EMFILE`), hanging with
//! no reply while the log filled with errors; and until 2026-12-07, when
//! every segment file stayed open, a store that grew competed with the
//! clients for descriptors (writes failed with `EMFILE`).

/// Descriptors kept free beyond the clients, the store's segment files and
/// those open when the server starts (32, Redis's
/// `CONFIG_MIN_RESERVED_FDS`): the store's lock and the files of its
/// checkpoints, a backup's files, the log file being reopened, a segment
/// file a reader still reads after the store closed it.
pub const RESERVED_FDS: u64 = 32;

/// Most segment files whose descriptor the store keeps open
/// (`emberkv::Options::max_open_files`) where the limit allows: 256, 64
/// GiB of the default 256 MiB segments. Past it the store closes those
/// used least recently and opens them again at their next use; GET reads
/// through the segments' maps, which need none. Kept free for the store
/// beside the clients, whatever it holds now (see [`share`]).
pub const STORE_FILES: u64 = 256;

/// How [`share`] split the descriptors at start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Share {
    /// What [`fit_clients`] found for the clients, beside `store_files`.
    pub fit: Fit,
    /// Segment files the store may keep open.
    pub store_files: u64,
}

/// Splits the open files limit between `maxclients` clients and the
/// store's segment files, beside `in_use` descriptors (the store not open
/// yet), raising the soft limit as [`fit_clients`] does: the store gets
/// [`STORE_FILES`] when the limit fits them beside every client; else a
/// quarter of the room the clients and the store share (at least 1, at
/// most `STORE_FILES`), and the clients the rest, at least 1 where there
/// is any room (redis-server, whose data are in memory, would give them
/// all of it). A store with few descriptors still serves GET through its
/// maps; its other reads open descriptors again as they need them.
pub fn share(maxclients: usize, in_use: u64) -> Share {
    let fit = fit_clients(maxclients, in_use.saturating_add(STORE_FILES));
    if fit.clients >= maxclients || fit.limit == 0 {
        return Share {
            fit,
            store_files: STORE_FILES,
        };
    }
    // The clients' and the store's, beside those in use and the reserve.
    let room = fit
        .limit
        .saturating_sub(in_use.saturating_add(RESERVED_FDS));
    let store_files = (room / 4).clamp(1, STORE_FILES);
    let clients = room.saturating_sub(store_files).max(room.min(1));
    Share {
        fit: Fit {
            clients: clients as usize,
            ..fit
        },
        store_files,
    }
}

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
/// beside `in_use` descriptors (those kept for the store's segment files
/// among them) and [`RESERVED_FDS`], up to the hard limit, and returns how
/// many clients fit under the limit then in force.
/// The soft limit is never lowered. Where the limit cannot be read, all
/// `maxclients` fit (nothing to adjust by).
pub fn fit_clients(maxclients: usize, in_use: u64) -> Fit {
    let kept = in_use.saturating_add(RESERVED_FDS);
    let needed = (maxclients as u64).saturating_add(kept);
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
    let room = limit.saturating_sub(kept);
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

    #[test]
    fn the_store_gets_its_files_where_the_limit_allows_and_a_quarter_of_the_room_below() {
        let Some(limit) = open_files_limit() else {
            return;
        };
        let fits = share(1, 0);
        assert_eq!((fits.fit.clients, fits.store_files), (1, STORE_FILES));
        // Past even the hard limit: the room beside those in use and the
        // reserve, a quarter of it to the store.
        let in_use = 10;
        let short = share(usize::MAX / 2, in_use);
        let room = short.fit.limit - in_use - RESERVED_FDS;
        assert!(short.fit.limit >= limit);
        assert_eq!(short.store_files, (room / 4).clamp(1, STORE_FILES));
        assert_eq!(short.fit.clients as u64 + short.store_files, room);
        // A limit that leaves little room: at least one of each (an attack
        // helper found the server refusing to start under `ulimit -n 50`,
        // which had started it before the store had a share).
        let now = short.fit.limit;
        for room in [1, 2, 5, 10, 17] {
            let tight = share(usize::MAX / 2, now - RESERVED_FDS - room);
            assert!(
                tight.fit.clients >= 1 && tight.store_files >= 1,
                "{room}: {tight:?}"
            );
            assert!(
                tight.fit.clients as u64 + tight.store_files <= room.max(2),
                "{room}: {tight:?}"
            );
        }
    }
}
