//! SQLite (rusqlite, bundled) at its shipped defaults, with one ordinary
//! rowid table `kv(k BLOB PRIMARY KEY, v BLOB)` and one autocommit
//! statement per write. Each client thread has a connection of its own.
//! The harness sets WAL mode (the default is a rollback journal, DELETE),
//! which the benchmark's specification asks of SQLite; a busy timeout,
//! without which concurrent writers fail with `SQLITE_BUSY` instead of
//! waiting their turn; `synchronous = FULL` for FULL durability (the
//! bundled build's default already, set so that FULL does not rest on a
//! build flag); and, in out-of-cache mode, each connection's page cache to
//! its share of the budget.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::{Result, anyhow};
use rusqlite::{Connection, OptionalExtension, params};

use crate::engine::{Durability, Engine, OpenOptions, Visit, human_bytes};

/// The busy timeout the harness sets on every connection, in milliseconds.
const BUSY_TIMEOUT_MS: u64 = 60_000;

struct Sqlite {
    path: PathBuf,
    pragmas: String,
    /// One connection per client thread (opened at its first use), and one
    /// more: a thread uses slot [`thread_slot`] modulo their number, so the
    /// threads of one phase, started together, each lock a slot of their
    /// own, and no lock is shared on the operation path.
    connections: Vec<Mutex<Option<Connection>>>,
    settings: String,
    durability: String,
}

/// A number of this thread's own, from a process-wide counter.
fn thread_slot() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static SLOT: usize = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    SLOT.with(|slot| *slot)
}

/// Opens (creating if needed) the SQLite file `dir/sqlite.db` and its table.
pub fn open(dir: &Path, options: &OpenOptions) -> Result<Box<dyn Engine>> {
    let mut pragmas = format!("PRAGMA busy_timeout = {BUSY_TIMEOUT_MS};");
    let mut set = vec![
        "journal_mode = WAL (default DELETE; the benchmark's specification)".to_owned(),
        format!("busy_timeout = {BUSY_TIMEOUT_MS} ms (default 0: concurrent writers would fail)"),
    ];
    if options.durability == Durability::Full {
        pragmas.push_str("PRAGMA synchronous = FULL;");
        set.push("synchronous = FULL (the bundled build's default too)".to_owned());
    }
    if let Some(budget) = options.resident_budget {
        let per_conn_kib = (budget / options.threads.max(1) as u64 / 1024).max(1);
        pragmas.push_str(&format!("PRAGMA cache_size = -{per_conn_kib};"));
        set.push(format!(
            "cache_size = {} per connection, one connection per client thread \
             (default 2,000 KiB each)",
            human_bytes(per_conn_kib * 1024),
        ));
    }
    let mut engine = Sqlite {
        path: dir.join("sqlite.db"),
        pragmas,
        connections: (0..=options.threads).map(|_| Mutex::new(None)).collect(),
        settings: String::new(),
        durability: String::new(),
    };
    let conn = engine.connect()?;
    let journal: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
    conn.execute(
        "CREATE TABLE IF NOT EXISTS kv (k BLOB PRIMARY KEY, v BLOB)",
        [],
    )?;
    let synchronous: i64 = conn.query_row("PRAGMA synchronous", [], |r| r.get(0))?;
    engine.durability = match synchronous {
        2 | 3 => format!(
            "WAL fsynced at every commit (journal_mode = {journal}, synchronous = {})",
            if synchronous == 2 { "FULL" } else { "EXTRA" }
        ),
        1 => format!(
            "WAL written per commit, fsynced at checkpoints (journal_mode = {journal}, \
             synchronous = NORMAL)"
        ),
        _ => format!("never fsynced (journal_mode = {journal}, synchronous = OFF)"),
    };
    engine.settings = super::describe(
        &format!(
            "SQLite {}, table kv(k BLOB PRIMARY KEY, v BLOB), one autocommit statement per \
             write, one connection per client thread",
            rusqlite::version()
        ),
        &set,
    );
    conn.close().map_err(|(_, e)| e)?;
    Ok(Box::new(engine))
}

impl Sqlite {
    fn connect(&self) -> Result<Connection> {
        let conn = Connection::open(&self.path)?;
        conn.execute_batch(&self.pragmas)?;
        Ok(conn)
    }

    /// Runs `f` on this thread's connection (see `Sqlite::connections`).
    fn with<R>(&self, f: impl FnOnce(&mut Connection) -> Result<R>) -> Result<R> {
        let slot = &self.connections[thread_slot() % self.connections.len()];
        let mut slot = slot.lock().map_err(|_| anyhow!("connection poisoned"))?;
        let conn = match &mut *slot {
            Some(conn) => conn,
            empty => empty.insert(self.connect()?),
        };
        f(conn)
    }
}

const UPSERT: &str = "INSERT INTO kv (k, v) VALUES (?1, ?2) \
                      ON CONFLICT (k) DO UPDATE SET v = excluded.v";

impl Engine for Sqlite {
    fn name(&self) -> &'static str {
        "sqlite"
    }

    fn insert(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.with(|c| {
            c.prepare_cached(UPSERT)?.execute(params![key, value])?;
            Ok(())
        })
    }

    fn get(&self, key: &[u8], buf: &mut Vec<u8>) -> Result<bool> {
        self.with(|c| {
            let mut stmt = c.prepare_cached("SELECT v FROM kv WHERE k = ?1")?;
            let found = stmt
                .query_row([key], |row| {
                    buf.clear();
                    buf.extend_from_slice(row.get_ref(0)?.as_blob()?);
                    Ok(())
                })
                .optional()?;
            Ok(found.is_some())
        })
    }

    fn remove(&self, key: &[u8]) -> Result<()> {
        self.with(|c| {
            c.prepare_cached("DELETE FROM kv WHERE k = ?1")?
                .execute([key])?;
            Ok(())
        })
    }

    fn load_batch(&self, items: &[(Vec<u8>, Vec<u8>)]) -> Result<()> {
        self.with(|c| {
            let txn = c.transaction()?;
            {
                let mut stmt = txn.prepare_cached(UPSERT)?;
                for (k, v) in items {
                    stmt.execute(params![k, v])?;
                }
            }
            txn.commit()?;
            Ok(())
        })
    }

    fn scans(&self) -> bool {
        true
    }

    fn scan(&self, start: &[u8], limit: usize, visit: &mut Visit<'_>) -> Result<usize> {
        self.with(|c| {
            let mut stmt =
                c.prepare_cached("SELECT k, v FROM kv WHERE k >= ?1 ORDER BY k LIMIT ?2")?;
            let mut rows = stmt.query(params![start, i64::try_from(limit)?])?;
            let mut n = 0;
            while let Some(row) = rows.next()? {
                visit(row.get_ref(0)?.as_blob()?, row.get_ref(1)?.as_blob()?)?;
                n += 1;
            }
            Ok(n)
        })
    }

    fn sync(&self) -> Result<()> {
        // Make the WAL durable whatever `synchronous` is: checkpointing
        // syncs the WAL before copying it into the database file.
        self.with(|c| {
            c.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))?;
            Ok(())
        })
    }

    fn settings(&self) -> String {
        self.settings.clone()
    }

    fn durability(&self) -> String {
        self.durability.clone()
    }

    fn close(self: Box<Self>) -> Result<()> {
        for slot in self.connections {
            let conn = slot
                .into_inner()
                .map_err(|_| anyhow!("connection poisoned"))?;
            if let Some(conn) = conn {
                conn.close().map_err(|(_, e)| e)?;
            }
        }
        Ok(())
    }
}
