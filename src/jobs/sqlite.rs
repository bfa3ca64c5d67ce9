//! The `sqlite` backend: a durable lease queue in one file, shared by any number of worker
//! processes on one host.
//!
//! WAL mode with `synchronous=NORMAL` by default (an acknowledged job survives a crash of the
//! process; a power cut may lose the last transactions) or `FULL` (`?synchronous=full`: each
//! commit synced; see [`SqliteSync`]). A claim is one `BEGIN IMMEDIATE` transaction
//! that takes the oldest queued rows (a batch of up to N; an acknowledgement deletes a batch
//! in one transaction too) through the index `(queue, state, run_at, id)`, which
//! matches the claim's `WHERE queue = ? AND state = 0 ORDER BY run_at, id` (without it the
//! claim sorts and throughput collapses). A claimed row carries its worker and a lease; the
//! worker's heartbeat thread renews its leases, and leases (30 s by default) are far longer
//! than any lock wait (busy timeout 10 s), so a live worker does not lose its jobs to the
//! reaper, which returns rows whose lease expired (a dead worker's) to their queue.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rusqlite::{params, Connection, TransactionBehavior};

use super::{
    now, Backend, Claimed, FailedSet, SqliteSync, Stats, DEAD_MAX_JOBS, DEAD_TIMEOUT, DEFAULT_LEASE,
};
use crate::base::error::{Error, Result};

const QUEUED: i64 = 0;
const BUSY: i64 = 1;
const RETRY: i64 = 2;
const DEAD: i64 = 3;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS jobs(
    id INTEGER PRIMARY KEY,
    queue TEXT NOT NULL,
    state INTEGER NOT NULL,      -- 0 queued, 1 busy, 2 retry, 3 dead
    run_at REAL NOT NULL,        -- queued: order; retry: when due; dead: when it died
    payload TEXT NOT NULL,
    worker TEXT,
    lease_until REAL
);
CREATE INDEX IF NOT EXISTS jobs_claim ON jobs(queue, state, run_at, id);
CREATE INDEX IF NOT EXISTS jobs_state ON jobs(state, run_at);
CREATE INDEX IF NOT EXISTS jobs_busy ON jobs(worker) WHERE state = 1;
CREATE TABLE IF NOT EXISTS counters(name TEXT PRIMARY KEY, value INTEGER NOT NULL);
INSERT OR IGNORE INTO counters VALUES ('processed', 0), ('failed', 0);
CREATE TABLE IF NOT EXISTS workers(id TEXT PRIMARY KEY, lease_until REAL NOT NULL);
";

/// A job queue in an SQLite file.
pub struct Sqlite {
    path: PathBuf,
    /// Idle connections (rusqlite connections are used by one thread at a time).
    pool: Mutex<Vec<Connection>>,
    /// The lease given to claims, milliseconds (the last heartbeat's).
    lease_ms: AtomicU64,
    /// When commits reach the disk.
    sync: SqliteSync,
    /// Serialises this process's writers: SQLite's busy handler sleeps (1, 2, 5, 10... ms)
    /// when threads race for the write lock, so they queue here instead; other processes
    /// still meet the busy timeout.
    write_lock: Mutex<()>,
}

fn db_err(path: &Path) -> impl Fn(rusqlite::Error) -> Error + '_ {
    move |e| Error::Internal(format!("sqlite {}: {e}", path.display()))
}

/// `path` with `suffix` added to its file name (SQLite's `-wal` and `-shm` files).
fn with_suffix(path: &Path, suffix: &str) -> std::path::PathBuf {
    let mut name = path.as_os_str().to_os_string();
    name.push(suffix);
    name.into()
}

/// Refuses a queue file (or its journal) that another user owns or that others may write: its
/// jobs are specs that this process runs, so whoever can write the file chooses them, and a
/// database planted by another user may hold triggers that rewrite them.
fn check_owned(queue: &Path, file: &Path) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = std::fs::symlink_metadata(file) else {
        return Ok(());
    };
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    let why = if meta.file_type().is_symlink() {
        Some("is a symbolic link".to_string())
    } else if meta.uid() != me {
        Some(format!(
            "belongs to user {}, not to this process's user {me}",
            meta.uid()
        ))
    } else if meta.mode() & 0o022 != 0 {
        Some(format!(
            "may be written by other users (mode {:o})",
            meta.mode() & 0o777
        ))
    } else {
        None
    };
    match why {
        Some(why) => Err(Error::usage(format!(
            "bad backend 'sqlite:{}': {} {why} (allowed: a queue file of this user's own that only it may write)",
            queue.display(),
            file.display()
        ))),
        None => Ok(()),
    }
}

/// Refuses a queue file that holds triggers (concur's schema has none).
fn check_no_triggers(path: &Path) -> Result<()> {
    let bad =
        |e: rusqlite::Error| Error::usage(format!("bad backend 'sqlite:{}': {e}", path.display()));
    let c = Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .map_err(bad)?;
    let triggers: i64 = c
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'trigger'",
            [],
            |r| r.get(0),
        )
        .map_err(bad)?;
    if triggers > 0 {
        return Err(Error::usage(format!(
            "bad backend 'sqlite:{}': the file holds {triggers} trigger(s), which concur's queues never have (allowed: a queue concur made)",
            path.display()
        )));
    }
    Ok(())
}

impl Sqlite {
    /// Opens (and creates) the queue file, creating its directory if needed. A file that
    /// another user owns or may write, or that holds triggers, is refused.
    pub fn open(path: &Path, sync: SqliteSync) -> Result<Self> {
        // SQLite would open a device and write its journal beside it (`/dev/null-journal`).
        if path.exists() && !path.is_file() {
            return Err(Error::usage(format!(
                "bad backend 'sqlite:{}': not a regular file (a queue needs a file of its own)",
                path.display()
            )));
        }
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| {
                Error::usage(format!(
                    "bad backend 'sqlite:{}': cannot create {}: {e}",
                    path.display(),
                    dir.display()
                ))
            })?;
        }
        let s = Sqlite {
            path: path.to_path_buf(),
            pool: Mutex::new(Vec::new()),
            lease_ms: AtomicU64::new(DEFAULT_LEASE.as_millis() as u64),
            write_lock: Mutex::new(()),
            sync,
        };
        for file in [
            path.to_path_buf(),
            with_suffix(path, "-wal"),
            with_suffix(path, "-shm"),
        ] {
            check_owned(path, &file)?;
        }
        // Before anything is written (the WAL switch is a write): a queue with triggers would
        // run someone else's SQL inside every claim.
        if path.exists() {
            check_no_triggers(path)?;
        }
        let conn = s
            .connect()
            .map_err(|e| Error::usage(format!("bad backend 'sqlite:{}': {e}", path.display())))?;
        s.put(conn);
        Ok(s)
    }

    fn connect(&self) -> rusqlite::Result<Connection> {
        let c = Connection::open(&self.path)?;
        c.busy_timeout(Duration::from_secs(10))?;
        c.pragma_update(None, "journal_mode", "WAL")?;
        c.pragma_update(None, "synchronous", self.sync.pragma())?;
        c.execute_batch(SCHEMA)?;
        Ok(c)
    }

    fn put(&self, c: Connection) {
        self.pool.lock().unwrap_or_else(|p| p.into_inner()).push(c);
    }

    /// Runs `f` on an idle connection (a new one when none is idle).
    fn with<T>(&self, f: impl FnOnce(&mut Connection) -> rusqlite::Result<T>) -> Result<T> {
        let idle = self.pool.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let mut c = match idle {
            Some(c) => c,
            None => self.connect().map_err(db_err(&self.path))?,
        };
        let out = f(&mut c).map_err(db_err(&self.path));
        self.put(c);
        out
    }

    /// Runs `f` in one `BEGIN IMMEDIATE` transaction (the write lock from the start, so the
    /// busy timeout applies instead of a failed lock upgrade).
    fn write<T>(&self, f: impl FnOnce(&rusqlite::Transaction) -> rusqlite::Result<T>) -> Result<T> {
        let _one_writer = self.write_lock.lock().unwrap_or_else(|p| p.into_inner());
        self.with(|c| {
            let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let out = f(&tx)?;
            tx.commit()?;
            Ok(out)
        })
    }

    fn lease(&self) -> f64 {
        self.lease_ms.load(Ordering::Relaxed) as f64 / 1000.0
    }

    /// Claims up to `max` jobs of the first queue of `queues` that has any, oldest first, in
    /// one transaction.
    fn claim(&self, worker: &str, queues: &[String], max: usize) -> Result<Vec<Claimed>> {
        let lease_until = now() + self.lease();
        self.write(|tx| {
            let mut pick = tx.prepare_cached(
                "SELECT id, payload FROM jobs WHERE queue = ?1 AND state = 0 ORDER BY run_at, id LIMIT ?2",
            )?;
            let mut take = tx.prepare_cached(
                "UPDATE jobs SET state = 1, worker = ?2, lease_until = ?3 WHERE id = ?1",
            )?;
            for q in queues {
                let rows = pick
                    .query_map(params![q, max.max(1) as i64], |r| {
                        Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?))
                    })?
                    .collect::<rusqlite::Result<Vec<_>>>()?;
                if rows.is_empty() {
                    continue;
                }
                let mut claimed = Vec::with_capacity(rows.len());
                for (id, raw) in rows {
                    take.execute(params![id, worker, lease_until])?;
                    claimed.push(Claimed {
                        queue: q.clone(),
                        raw,
                        token: id,
                        refused: None,
                    });
                }
                return Ok(claimed);
            }
            Ok(vec![])
        })
    }
}

fn state_of(set: FailedSet) -> i64 {
    match set {
        FailedSet::Retry => RETRY,
        FailedSet::Dead => DEAD,
    }
}

fn bump(tx: &rusqlite::Transaction, name: &str, by: usize) -> rusqlite::Result<()> {
    tx.prepare_cached("UPDATE counters SET value = value + ?2 WHERE name = ?1")?
        .execute(params![name, by as i64])?;
    Ok(())
}

impl Backend for Sqlite {
    fn describe(&self) -> String {
        match self.sync {
            SqliteSync::Normal => format!("sqlite:{}", self.path.display()),
            SqliteSync::Full => format!("sqlite:{}?synchronous=full", self.path.display()),
        }
    }

    fn enqueue(&self, queue: &str, payloads: &[String]) -> Result<()> {
        let t = now();
        self.write(|tx| {
            let mut ins = tx.prepare_cached(
                "INSERT INTO jobs(queue, state, run_at, payload) VALUES (?1, 0, ?2, ?3)",
            )?;
            for p in payloads {
                ins.execute(params![queue, t, p])?;
            }
            Ok(())
        })
    }

    fn fetch(&self, worker: &str, queues: &[String], wait: Duration) -> Result<Option<Claimed>> {
        Ok(self.fetch_batch(worker, queues, 1, wait)?.pop())
    }

    fn fetch_batch(
        &self,
        worker: &str,
        queues: &[String],
        max: usize,
        wait: Duration,
    ) -> Result<Vec<Claimed>> {
        // SQLite cannot block on a row appearing: poll, backing off from 1 ms to 50 ms.
        let deadline = Instant::now() + wait;
        let mut pause = Duration::from_millis(1);
        loop {
            let got = self.claim(worker, queues, max)?;
            if !got.is_empty() {
                return Ok(got);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(got);
            }
            std::thread::sleep(pause.min(left));
            pause = (pause * 2).min(Duration::from_millis(50));
        }
    }

    fn ack(&self, worker: &str, job: &Claimed) -> Result<()> {
        self.ack_batch(worker, std::slice::from_ref(job))
    }

    fn ack_batch(&self, _worker: &str, jobs: &[Claimed]) -> Result<()> {
        if jobs.is_empty() {
            return Ok(());
        }
        // Deleted whoever holds them now: they ran, so a second run is not needed.
        self.write(|tx| {
            let mut delete =
                tx.prepare_cached("DELETE FROM jobs WHERE id = ?1 AND state IN (0, 1)")?;
            let mut n = 0;
            for job in jobs {
                n += delete.execute(params![job.token])?;
            }
            if n > 0 {
                bump(tx, "processed", n)?;
            }
            Ok(())
        })
    }

    fn retry(&self, _worker: &str, job: &Claimed, payload: &str, at: f64) -> Result<()> {
        self.write(|tx| {
            tx.prepare_cached(
                "UPDATE jobs SET state = 2, run_at = ?2, payload = ?3, worker = NULL, lease_until = NULL WHERE id = ?1",
            )?
            .execute(params![job.token, at, payload])?;
            bump(tx, "failed", 1)
        })
    }

    fn kill(&self, _worker: &str, job: &Claimed, payload: Option<&str>) -> Result<()> {
        let t = now();
        self.write(|tx| {
            match payload {
                Some(p) => {
                    tx.prepare_cached(
                        "UPDATE jobs SET state = 3, run_at = ?2, payload = ?3, worker = NULL, lease_until = NULL WHERE id = ?1",
                    )?
                    .execute(params![job.token, t, p])?;
                    let cutoff = t - DEAD_TIMEOUT.as_secs_f64();
                    tx.execute(
                        "DELETE FROM jobs WHERE state = 3 AND run_at < ?1",
                        params![cutoff],
                    )?;
                    let n: i64 =
                        tx.query_row("SELECT count(*) FROM jobs WHERE state = 3", [], |r| {
                            r.get(0)
                        })?;
                    if n as usize > DEAD_MAX_JOBS {
                        tx.execute(
                            "DELETE FROM jobs WHERE id IN (SELECT id FROM jobs WHERE state = 3 ORDER BY run_at, id LIMIT ?1)",
                            params![n - DEAD_MAX_JOBS as i64],
                        )?;
                    }
                }
                None => {
                    tx.execute("DELETE FROM jobs WHERE id = ?1", params![job.token])?;
                }
            }
            bump(tx, "failed", 1)
        })
    }

    fn heartbeat(&self, worker: &str, lease: Duration) -> Result<()> {
        self.lease_ms
            .store(lease.as_millis() as u64, Ordering::Relaxed);
        let until = now() + lease.as_secs_f64();
        self.write(|tx| {
            tx.prepare_cached("UPDATE jobs SET lease_until = ?2 WHERE worker = ?1 AND state = 1")?
                .execute(params![worker, until])?;
            tx.prepare_cached("INSERT OR REPLACE INTO workers(id, lease_until) VALUES (?1, ?2)")?
                .execute(params![worker, until])?;
            Ok(())
        })
    }

    fn reap(&self) -> Result<usize> {
        let t = now();
        self.write(|tx| {
            let n = tx.execute(
                "UPDATE jobs SET state = 0, worker = NULL, lease_until = NULL WHERE state = 1 AND lease_until < ?1",
                params![t],
            )?;
            tx.execute("DELETE FROM workers WHERE lease_until < ?1", params![t])?;
            Ok(n)
        })
    }

    fn promote(&self) -> Result<usize> {
        let t = now();
        self.write(|tx| {
            tx.execute(
                "UPDATE jobs SET state = 0 WHERE state = 2 AND run_at <= ?1",
                params![t],
            )
        })
    }

    fn claimed_by(&self, worker: &str) -> Result<Vec<Claimed>> {
        self.with(|c| {
            let mut q = c.prepare_cached(
                "SELECT id, queue, payload FROM jobs WHERE worker = ?1 AND state = 1 ORDER BY id",
            )?;
            let rows = q.query_map(params![worker], |r| {
                Ok(Claimed {
                    token: r.get(0)?,
                    queue: r.get(1)?,
                    raw: r.get(2)?,
                    refused: None,
                })
            })?;
            rows.collect()
        })
    }

    fn release(&self, worker: &str) -> Result<usize> {
        self.write(|tx| {
            let n = tx.execute(
                "UPDATE jobs SET state = 0, worker = NULL, lease_until = NULL WHERE worker = ?1 AND state = 1",
                params![worker],
            )?;
            tx.execute("DELETE FROM workers WHERE id = ?1", params![worker])?;
            Ok(n)
        })
    }

    fn stats(&self) -> Result<Stats> {
        let t = now();
        self.with(|c| {
            let mut s = Stats::default();
            let mut q = c.prepare("SELECT state, count(*) FROM jobs GROUP BY state")?;
            let rows = q.query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)))?;
            for row in rows {
                let (state, n) = row?;
                let n = n as u64;
                match state {
                    QUEUED => s.enqueued = n,
                    BUSY => s.busy = n,
                    RETRY => s.retry = n,
                    DEAD => s.dead = n,
                    _ => {}
                }
            }
            let counter = |name: &str| -> rusqlite::Result<u64> {
                c.query_row(
                    "SELECT value FROM counters WHERE name = ?1",
                    params![name],
                    |r| r.get::<_, i64>(0),
                )
                .map(|v| v as u64)
            };
            s.processed = counter("processed")?;
            s.failed = counter("failed")?;
            s.workers_alive = c.query_row(
                "SELECT count(*) FROM workers WHERE lease_until >= ?1",
                params![t],
                |r| r.get::<_, i64>(0),
            )? as u64;
            Ok(s)
        })
    }

    fn list(&self, set: FailedSet, limit: usize) -> Result<Vec<String>> {
        let state = state_of(set);
        self.with(|c| {
            let mut q = c.prepare(
                "SELECT payload FROM jobs WHERE state = ?1 ORDER BY run_at, id LIMIT ?2",
            )?;
            let rows = q.query_map(params![state, limit as i64], |r| r.get(0))?;
            rows.collect()
        })
    }

    fn requeue(&self, set: FailedSet) -> Result<usize> {
        let state = state_of(set);
        let t = now();
        self.write(|tx| {
            tx.execute(
                "UPDATE jobs SET state = 0, run_at = ?2 WHERE state = ?1",
                params![state, t],
            )
        })
    }
}
