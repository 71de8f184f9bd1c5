//! Transactions: MULTI, EXEC, DISCARD, WATCH, UNWATCH.
//!
//! After MULTI, [`super::dispatch`] checks each command as usual (name,
//! arity, authentication) and queues it (`queue`) instead of running it; a
//! command refused then marks the transaction failed, and its EXEC replies
//! EXECABORT. EXEC runs the queued commands as one exclusive section of
//! the store ([`crate::store::Store::exclusive`]): it locks the stripes of
//! every key they name and of every watched key (every stripe when one of
//! them reads or writes the whole keyspace), checks the watched keys,
//! runs the commands against a [`crate::kv::Overlay`] and commits the
//! overlay as one atomic batch. No other client's command on those keys
//! runs in between, and a read-only command sees the keys before or after
//! the EXEC, never in between.
//!
//! WATCH registers each key in the store's table of watched keys
//! ([`Watches`]), noting the count of its changes and whether it exists.
//! EXEC finds a watched key changed when its count moved (a write of it)
//! or when it existed at WATCH and is gone since (expired, or removed by a
//! FLUSHDB: as in Redis 7.0, a flush changes only the watched keys that
//! existed); then it runs nothing and replies a null array. A write that
//! changes nothing (a failed INCR, a SETBIT or BITFIELD that leaves every
//! bit as it was) counts nothing, as it signals no change in Redis 7.0.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::{COMMANDS, Ctx, Spec, flag};
use crate::error::{CmdError, CmdResult};
use crate::kv::Overlay;
use crate::parse::Args;
use crate::reply::Reply;
use crate::store::{Store, Watches, stripe_of, unix_ms};

/// The commands queued since MULTI.
#[derive(Debug, Default)]
pub struct Multi {
    /// The queued commands' arguments, back to back.
    bytes: Vec<u8>,
    /// Each argument's range in `bytes`.
    ranges: Vec<Range<usize>>,
    /// Each command: its index in [`COMMANDS`] and its arguments' range in
    /// `ranges`.
    commands: Vec<(usize, Range<usize>)>,
    /// The stripes of the keys the commands name.
    stripes: Vec<usize>,
    /// A command reads or writes every key: EXEC locks every stripe.
    everything: bool,
    /// A command was refused while queuing: EXEC aborts.
    failed: bool,
}

impl Multi {
    /// Marks the transaction failed (a command was refused).
    pub fn fail(&mut self) {
        self.failed = true;
    }
}

/// One watched key: its stripe, the count of its changes at WATCH, and
/// whether it existed.
#[derive(Debug)]
struct Watch {
    stripe: usize,
    changes: u64,
    existed: bool,
}

/// The keys a client watches, each registered in the store's
/// [`Watches`] until this is dropped (UNWATCH, EXEC, DISCARD, RESET, or
/// the connection's end, however it ends).
#[derive(Debug, Default)]
pub struct Watched {
    keys: HashMap<Vec<u8>, Watch>,
    /// Where the keys are registered, and the client's flag `d` they were
    /// registered with (its `ClientHandle::dirty_cas`); `None` before the
    /// first WATCH.
    watches: Option<(Watches, Arc<AtomicBool>)>,
}

impl Drop for Watched {
    /// Releases the keys, then clears the flag `d`: no change counted
    /// after that reaches this client (as Redis clears `CLIENT_DIRTY_CAS`
    /// at UNWATCH, EXEC and DISCARD).
    fn drop(&mut self) {
        if let Some((watches, dirty)) = &self.watches {
            for key in self.keys.keys() {
                watches.release(key, dirty);
            }
            dirty.store(false, Ordering::Relaxed);
        }
    }
}

impl Watched {
    /// Whether every watched key is as it was at WATCH; the caller holds
    /// their stripes.
    fn intact(&self, store: &Store) -> emberkv::Result<bool> {
        let Some((watches, _)) = &self.watches else {
            return Ok(true); // nothing was ever watched
        };
        for (key, w) in &self.keys {
            if watches.changes(key) != w.changes {
                return Ok(false);
            }
            // No counted write of the key since WATCH: a key gone since
            // has expired or was flushed.
            if w.existed && !store.db().contains_key(key)? {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// The keys a command names, from its table entry's key positions.
fn keys<'a>(spec: &Spec, args: &Args<'a>) -> impl Iterator<Item = &'a [u8]> {
    let (first, last, step) = spec.keys;
    let argc = args.len() as i64;
    let last = if last < 0 {
        argc + i64::from(last)
    } else {
        i64::from(last)
    };
    let (first, step) = (i64::from(first), i64::from(step).max(1));
    let range = if first > 0 {
        first..last.min(argc - 1) + 1
    } else {
        0..0
    };
    let args = *args;
    range
        .step_by(step as usize)
        .map(move |i| args.get(i as usize))
}

/// Queues command `index` of [`COMMANDS`] after MULTI and replies QUEUED.
///
/// # Errors
/// The queue would grow past `client-query-buffer-limit`.
pub(super) fn queue(ctx: &mut Ctx<'_>, index: usize, args: &Args<'_>) -> CmdResult {
    let limit = ctx.shared.live.qbuf_limit.load(Ordering::Relaxed);
    let multi = ctx.session.multi.as_mut().expect("queue runs after MULTI");
    let size: usize = args.iter().map(<[u8]>::len).sum();
    if (multi.bytes.len() + size) as u64 > limit {
        return Err(CmdError::err(format_args!(
            "the commands queued since MULTI exceed client-query-buffer-limit ({limit} bytes)"
        )));
    }
    let spec = &COMMANDS[index];
    if spec.flags & flag::KEYSPACE != 0 {
        multi.everything = true;
    }
    multi.stripes.extend(keys(spec, args).map(stripe_of));
    let from = multi.ranges.len();
    for arg in args.iter() {
        let start = multi.bytes.len();
        multi.bytes.extend_from_slice(arg);
        multi.ranges.push(start..multi.bytes.len());
    }
    multi.commands.push((index, from..multi.ranges.len()));
    let queued = multi.commands.len() as i64;
    ctx.session.handle.multi.store(queued, Ordering::Relaxed);
    ctx.out.simple("QUEUED");
    Ok(())
}

pub(super) fn multi(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    if ctx.session.multi.is_some() {
        return Err(CmdError::err("MULTI calls can not be nested"));
    }
    ctx.session.multi = Some(Multi::default());
    ctx.session.handle.multi.store(0, Ordering::Relaxed);
    ctx.out.ok();
    Ok(())
}

/// Leaves MULTI: returns the queued commands (`None` outside MULTI) and,
/// in MULTI, the watched keys, which it forgets.
fn end(ctx: &mut Ctx<'_>) -> Option<(Multi, Watched)> {
    let multi = ctx.session.multi.take()?;
    ctx.session.handle.multi.store(-1, Ordering::Relaxed);
    Some((multi, std::mem::take(&mut ctx.session.watched)))
}

/// Leaves MULTI (if in it) for an EXEC refused before it ran (`e`: wrong
/// arity, or not authenticated), and returns its reply: Redis 7's EXECABORT with
/// the reason, which names no error code when the refusal's own line
/// adds `ERR` to a bare message (arity) and keeps it otherwise (NOAUTH).
pub(super) fn abort(ctx: &mut Ctx<'_>, e: &CmdError) -> CmdError {
    // In MULTI or not, as Redis's `execCommandAbort`: the transaction,
    // if any, is discarded and the watched keys forgotten.
    forget(ctx);
    let line = e.to_string();
    let reason = match e {
        CmdError::WrongArity(_) => line.strip_prefix("ERR ").unwrap_or(&line),
        _ => &line,
    };
    CmdError::Msg(format!(
        "EXECABORT Transaction discarded because of: {reason}"
    ))
}

pub(super) fn discard(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    if end(ctx).is_none() {
        return Err(CmdError::err("DISCARD without MULTI"));
    }
    ctx.out.ok();
    Ok(())
}

pub(super) fn exec(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    let Some((multi, watched)) = end(ctx) else {
        return Err(CmdError::err("EXEC without MULTI"));
    };
    if multi.failed {
        return Err(CmdError::Msg(
            "EXECABORT Transaction discarded because of previous errors.".into(),
        ));
    }
    let shared = ctx.shared;
    let store = &shared.store;
    let section = if multi.everything {
        store.exclusive_all()
    } else {
        let watched_stripes = watched.keys.values().map(|w| w.stripe);
        store.exclusive(multi.stripes.iter().copied().chain(watched_stripes))
    };
    let intact = watched.intact(store)?;
    // Let go of the keys while they are locked, as Redis unwatches before
    // it runs the commands: the transaction's own writes, or another
    // client's just after it, must not show this client as flag `d`.
    drop(watched);
    if !intact {
        drop(section);
        ctx.out.null_array();
        return Ok(());
    }
    let overlay = RefCell::new(Overlay::default());
    let mut replies = Reply::new();
    replies.set_resp3(ctx.out.resp3());
    // While the commands run, CLIENT LIST shows the client in MULTI, as
    // Redis does (and its command as EXEC: see `execute`).
    let queued = multi.commands.len();
    ctx.session
        .handle
        .multi
        .store(queued as i64, Ordering::Relaxed);
    let mut inner = Ctx {
        shared,
        session: &mut *ctx.session,
        out: &mut replies,
        tx: Some(&overlay),
    };
    for (index, range) in &multi.commands {
        let args = Args::new(&multi.bytes, &multi.ranges[range.clone()]);
        super::execute(&mut inner, *index, &args);
    }
    ctx.session.handle.multi.store(-1, Ordering::Relaxed);
    let committed = overlay.into_inner().commit(store);
    drop(section);
    // HELLO inside the transaction switched the protocol of the replies
    // after it.
    let resp3 = replies.resp3();
    if let Err(e) = committed {
        ctx.out.set_resp3(resp3);
        return Err(e.into());
    }
    ctx.out.array(queued);
    ctx.out.append(&replies);
    ctx.out.set_resp3(resp3);
    Ok(())
}

pub(super) fn watch(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    if ctx.session.multi.is_some() {
        return Err(CmdError::err("WATCH inside MULTI is not allowed"));
    }
    let store = &ctx.shared.store;
    for key in args.from(1) {
        if ctx.session.watched.keys.contains_key(key) {
            continue;
        }
        let stripe = stripe_of(key);
        // Under the stripe, no write of the key is half done.
        let _lock = store.lock(key);
        let at_watch = store.db().expiry(key)?;
        let existed = at_watch.is_some();
        let expires_at = at_watch.flatten().map(unix_ms);
        let watched = &mut ctx.session.watched;
        let (watches, dirty) = watched
            .watches
            .get_or_insert_with(|| (store.watches(), Arc::clone(&ctx.session.handle.dirty_cas)));
        let changes = watches.register(key, dirty, expires_at);
        let watch = Watch {
            stripe,
            changes,
            existed,
        };
        watched.keys.insert(key.to_vec(), watch);
    }
    ctx.out.ok();
    Ok(())
}

/// Leaves MULTI without running it, if in it, and forgets the watched
/// keys (RESET).
pub(super) fn forget(ctx: &mut Ctx<'_>) {
    end(ctx);
    ctx.session.watched = Watched::default();
}

pub(super) fn unwatch(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    ctx.session.watched = Watched::default();
    ctx.out.ok();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::lookup;

    fn names<'a>(name: &str, args: &Args<'a>) -> Vec<&'a [u8]> {
        let (_, spec) = lookup(name.as_bytes()).expect("a command");
        keys(spec, args).collect()
    }

    #[test]
    fn keys_follow_the_table() {
        let base = b"MSETk1v1k2v2";
        let ranges = [0..4, 4..6, 6..8, 8..10, 10..12];
        let args = Args::new(base, &ranges);
        assert_eq!(names("mset", &args), vec![&b"k1"[..], b"k2"]);
        assert_eq!(names("del", &args).len(), 4);
        assert_eq!(
            names("get", &Args::new(base, &ranges[..2])),
            vec![&b"k1"[..]]
        );
        assert!(names("ping", &args).is_empty());
        // A malformed MSET (an odd count) names no key past the end.
        assert_eq!(names("mset", &Args::new(base, &ranges[..4])).len(), 2);
    }
}
