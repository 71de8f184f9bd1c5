//! SQLite (rusqlite, bundled) at its shipped defaults, with one ordinary
//! rowid table `kv(k BLOB PRIMARY KEY, v BLOB)` in WAL mode and one
//! autocommit statement per write. Connections are pooled, one per client
//! thread at most. The harness sets a busy timeout, without which
//! concurrent writers fail with `SQLITE_BUSY` instead of waiting their
//! turn; `synchronous = FULL` for FULL durability; and, in out-of-cache
//! mode, each connection's page cache to its share of the budget.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::{Result, anyhow};
use rusqlite::{Connection, OptionalExtension, params};

use crate::engine::{Durability, Engine, OpenOptions, Visit, human_bytes};

/// The busy timeout the harness sets on every connection, in milliseconds.
const BUSY_TIMEOUT_MS: u64 = 60_000;

struct Sqlite {
    path: PathBuf,
    pragmas: String,
    pool: Mutex<Vec<Connection>>,
    settings: String,
    durability: String,
}

/// Opens (creating if needed) the SQLite file `dir/sqlite.db` and its table.
pub fn open(dir: &Path, options: &OpenOptions) -> Result<Box<dyn Engine>> {
    let mut pragmas = format!("PRAGMA busy_timeout = {BUSY_TIMEOUT_MS};");
    let mut set = vec![format!(
        "busy_timeout = {BUSY_TIMEOUT_MS} ms (default 0: concurrent writers would fail)"
    )];
    if options.durability == Durability::Full {
        pragmas.push_str("PRAGMA synchronous = FULL;");
        set.push("synchronous = FULL".to_owned());
    }
    if let Some(budget) = options.resident_budget {
        let per_conn_kib = (budget / options.threads.max(1) as u64 / 1024).max(1);
        pragmas.push_str(&format!("PRAGMA cache_size = -{per_conn_kib};"));
        set.push(format!(
            "cache_size = {} per connection, {} connections at most (default 2 MiB each)",
            human_bytes(per_conn_kib * 1024),
            options.threads
        ));
    }
    let mut engine = Sqlite {
        path: dir.join("sqlite.db"),
        pragmas,
        pool: Mutex::new(Vec::new()),
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
            "SQLite {}, table kv(k BLOB PRIMARY KEY, v BLOB), journal_mode = WAL as the \
             benchmark specifies, one autocommit statement per write",
            rusqlite::version()
        ),
        &set,
    );
    engine
        .pool
        .lock()
        .map_err(|_| anyhow!("pool poisoned"))?
        .push(conn);
    Ok(Box::new(engine))
}

impl Sqlite {
    fn connect(&self) -> Result<Connection> {
        let conn = Connection::open(&self.path)?;
        conn.execute_batch(&self.pragmas)?;
        Ok(conn)
    }

    /// Runs `f` on a pooled connection (a new one when all are busy).
    fn with<R>(&self, f: impl FnOnce(&mut Connection) -> Result<R>) -> Result<R> {
        let pooled = self
            .pool
            .lock()
            .map_err(|_| anyhow!("pool poisoned"))?
            .pop();
        let mut conn = match pooled {
            Some(conn) => conn,
            None => self.connect()?,
        };
        let out = f(&mut conn);
        self.pool
            .lock()
            .map_err(|_| anyhow!("pool poisoned"))?
            .push(conn);
        out
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
        let conns = std::mem::take(&mut *self.pool.lock().map_err(|_| anyhow!("pool poisoned"))?);
        for conn in conns {
            conn.close().map_err(|(_, e)| e)?;
        }
        Ok(())
    }
}
