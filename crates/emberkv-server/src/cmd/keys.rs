//! Keyspace commands: DEL, RENAME, RENAMENX, COPY, EXISTS, TOUCH, expiry,
//! TYPE, DBSIZE, KEYS, SCAN, RANDOMKEY, FLUSHDB.
//!
//! DBSIZE, KEYS, SCAN and RANDOMKEY read the whole keyspace without the
//! isolation from EXEC that reads of named keys get (inside EXEC they see
//! the transaction's writes, and no other client's).

use std::collections::HashSet;

use super::Ctx;
use crate::error::{CmdError, CmdResult};
use crate::num::parse_cursor;
use crate::parse::{Args, int, int32, is};
use crate::store::{Write, now_ms};

pub(super) fn del(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let kv = ctx.kv();
    let removed = if args.len() == 2 {
        let key = args.get(1);
        let _lock = kv.lock(key);
        i64::from(kv.remove(key)?)
    } else {
        // Several keys: one atomic batch, each key counted once.
        let mut seen = HashSet::new();
        let keys: Vec<&[u8]> = args.from(1).filter(|k| seen.insert(*k)).collect();
        let _locks = kv.lock_all(keys.iter().copied());
        let mut ops = Vec::new();
        for key in keys {
            if kv.contains_key(key)? {
                ops.push((key, Write::Remove));
            }
        }
        if !ops.is_empty() {
            kv.apply(&ops)?;
        }
        ops.len() as i64
    };
    ctx.out.int(removed);
    Ok(())
}

/// RENAME and RENAMENX: the value and its expiry move to `dst`, in one
/// atomic batch with the removal of `src`.
fn rename_generic(ctx: &mut Ctx<'_>, args: &Args<'_>, nx: bool) -> CmdResult {
    let (src, dst) = (args.get(1), args.get(2));
    let kv = ctx.kv();
    let _locks = kv.lock_all([src, dst].into_iter());
    let Some((value, expires_at)) = kv.entry(src)? else {
        return Err(CmdError::err("no such key"));
    };
    let moved = if src == dst || (nx && kv.contains_key(dst)?) {
        false
    } else {
        kv.apply(&[(src, Write::Remove), (dst, Write::Put(&value, expires_at))])?;
        true
    };
    match nx {
        true => ctx.out.int(i64::from(moved)),
        false => ctx.out.ok(),
    }
    Ok(())
}

pub(super) fn rename(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    rename_generic(ctx, args, false)
}

pub(super) fn renamenx(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    rename_generic(ctx, args, true)
}

/// `COPY source destination [DB 0] [REPLACE]`: the value and its expiry.
/// emberkv has one database, so DB takes only 0.
pub(super) fn copy(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let (src, dst) = (args.get(1), args.get(2));
    let mut replace = false;
    let mut i = 3;
    while i < args.len() {
        let opt = args.get(i);
        if is(opt, "REPLACE") {
            replace = true;
        } else if is(opt, "DB") && i + 1 < args.len() {
            if int32(args.get(i + 1))? != 0 {
                return Err(CmdError::DbIndexOutOfRange);
            }
            i += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    if src == dst {
        return Err(CmdError::err("source and destination objects are the same"));
    }
    let kv = ctx.kv();
    let _locks = kv.lock_all([src, dst].into_iter());
    let source = kv.entry(src)?;
    ctx.session.local.lookup(source.is_some());
    let copied = match source {
        Some((value, expires_at)) if replace || !kv.contains_key(dst)? => {
            kv.apply(&[(dst, Write::Put(&value, expires_at))])?;
            true
        }
        _ => false,
    };
    ctx.out.int(i64::from(copied));
    Ok(())
}

/// TOUCH: how many of the keys exist (emberkv keeps no access times).
pub(super) fn touch(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    exists(ctx, args)
}

pub(super) fn exists(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let kv = ctx.kv();
    let n = kv.read_all(args.from(1), || -> CmdResult<i64> {
        let mut n = 0;
        for key in args.from(1) {
            n += i64::from(kv.contains_key(key)?);
        }
        Ok(n)
    })?;
    let lookups = args.len() as u64 - 1;
    ctx.session.local.hits += n as u64;
    ctx.session.local.misses += lookups - n as u64;
    ctx.out.int(n);
    Ok(())
}

/// EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT with NX / XX / GT / LT.
fn expire_generic(
    ctx: &mut Ctx<'_>,
    args: &Args<'_>,
    seconds: bool,
    relative: bool,
    cmd: &'static str,
) -> CmdResult {
    let key = args.get(1);
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    for opt in args.from(3) {
        if is(opt, "NX") {
            nx = true;
        } else if is(opt, "XX") {
            xx = true;
        } else if is(opt, "GT") {
            gt = true;
        } else if is(opt, "LT") {
            lt = true;
        } else {
            // Redis's `%s`: up to the first NUL.
            return Err(CmdError::err_quoting("Unsupported option ", opt, ""));
        }
    }
    if nx && (xx || gt || lt) {
        return Err(CmdError::err(
            "NX and XX, GT or LT options at the same time are not compatible",
        ));
    }
    if gt && lt {
        return Err(CmdError::err(
            "GT and LT options at the same time are not compatible",
        ));
    }
    let mut when = int(args.get(2))?;
    if seconds {
        when = when.checked_mul(1000).ok_or(CmdError::InvalidExpire(cmd))?;
    }
    if relative {
        when = when
            .checked_add(now_ms())
            .ok_or(CmdError::InvalidExpire(cmd))?;
    }
    let kv = ctx.kv();
    let _lock = kv.lock(key);
    let Some(current) = kv.expiry(key)? else {
        ctx.out.int(0);
        return Ok(());
    };
    let refused = (nx && current.is_some())
        || (xx && current.is_none())
        || (gt && current.is_none_or(|c| when <= c))
        || (lt && current.is_some_and(|c| when >= c));
    if refused {
        ctx.out.int(0);
        return Ok(());
    }
    let existed = kv.expire_at(key, when)?;
    ctx.out.int(i64::from(existed));
    Ok(())
}

pub(super) fn expire(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    expire_generic(ctx, args, true, true, "expire")
}

pub(super) fn pexpire(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    expire_generic(ctx, args, false, true, "pexpire")
}

pub(super) fn expireat(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    expire_generic(ctx, args, true, false, "expireat")
}

pub(super) fn pexpireat(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    expire_generic(ctx, args, false, false, "pexpireat")
}

/// TTL, PTTL, EXPIRETIME and PEXPIRETIME, as Redis's one
/// `ttlGenericCommand`: -2 absent, -1 no expiry, else the time left, or
/// with `absolute` the Unix time it expires at; in ms, or seconds rounded
/// to nearest (unsigned, as Redis computes it, so that an expiry near
/// i64::MAX ms, which PEXPIREAT takes, rounds without overflowing).
fn ttl_generic(ctx: &mut Ctx<'_>, args: &Args<'_>, ms: bool, absolute: bool) -> CmdResult {
    let key = args.get(1);
    let kv = ctx.kv();
    let expiry = kv.read(key, || kv.expiry(key))?;
    ctx.session.local.lookup(expiry.is_some());
    let reply = match expiry {
        None => -2,
        Some(None) => -1,
        Some(Some(at)) => {
            let value = if absolute { at } else { at - now_ms() }.max(0);
            if ms {
                value
            } else {
                ((value as u64 + 500) / 1000) as i64
            }
        }
    };
    ctx.out.int(reply);
    Ok(())
}

pub(super) fn expiretime(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    ttl_generic(ctx, args, false, true)
}

pub(super) fn pexpiretime(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    ttl_generic(ctx, args, true, true)
}

pub(super) fn ttl(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    ttl_generic(ctx, args, false, false)
}

pub(super) fn pttl(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    ttl_generic(ctx, args, true, false)
}

pub(super) fn persist(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let key = args.get(1);
    let kv = ctx.kv();
    let _lock = kv.lock(key);
    let had = kv.persist(key)?;
    ctx.out.int(i64::from(had));
    Ok(())
}

pub(super) fn type_(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let key = args.get(1);
    let kv = ctx.kv();
    let found = kv.read(key, || kv.contains_key(key))?;
    ctx.session.local.lookup(found);
    ctx.out.simple(if found { "string" } else { "none" });
    Ok(())
}

pub(super) fn dbsize(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    let n = ctx.kv().dbsize()?;
    ctx.out.int(n as i64);
    Ok(())
}

pub(super) fn keys(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let keys = ctx.kv().keys_matching(args.get(1))?;
    ctx.out.bulks(keys.iter().map(Vec::as_slice));
    Ok(())
}

/// Index slots one SCAN visits at least before it answers with fewer keys
/// than COUNT: more than a default-sized empty index holds (81,920), so
/// that a small database is answered whole, as Redis answers it. Visiting
/// an empty slot is one atomic load.
const SCAN_SLOT_BUDGET: usize = 1 << 18;

pub(super) fn scan(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let cursor = parse_cursor(args.get(1)).ok_or(CmdError::InvalidCursor)?;
    let mut count = 10;
    let mut pattern: Option<&[u8]> = None;
    let mut strings = true;
    let mut i = 2;
    while i < args.len() {
        let (opt, value) = (args.get(i), args.opt(i + 1));
        match value {
            Some(v) if is(opt, "COUNT") => {
                count = int(v)?;
                if count < 1 {
                    return Err(CmdError::Syntax);
                }
            }
            Some(v) if is(opt, "MATCH") => pattern = (v != b"*").then_some(v),
            // Every key is a string: TYPE string keeps them all, any other
            // type none.
            Some(v) if is(opt, "TYPE") => strings = is(v, "string"),
            _ => return Err(CmdError::Syntax),
        }
        i += 2;
    }
    // The engine's COUNT is index slots visited, and its index is presized
    // (about 82,000 slots by default), so a small store would answer page
    // after empty page where Redis, whose table is sized to its keys,
    // answers a small database whole with cursor 0. Step on until COUNT
    // keys are found, the scan ends, or SCAN_SLOT_BUDGET slots (or 64 per
    // COUNT) have been visited, doubling the step after each step that
    // found nothing, so that a sparse index takes a few engine calls.
    let count = count.min(1 << 20) as usize;
    let budget = count.saturating_mul(64).max(SCAN_SLOT_BUDGET);
    let (mut keys, mut next, mut visited, mut step) = (Vec::new(), cursor, 0, count);
    loop {
        let (found, after) = ctx.kv().scan(next, step)?;
        let empty = found.is_empty();
        keys.extend(found);
        next = after;
        visited += step;
        if keys.len() >= count || next == 0 || visited >= budget {
            break;
        }
        if empty {
            step = step.saturating_mul(2).min(budget - visited);
        }
    }
    let keep = |k: &Vec<u8>| strings && pattern.is_none_or(|p| crate::glob::matches(p, k));
    let kept: Vec<&[u8]> = keys.iter().filter(|k| keep(k)).map(Vec::as_slice).collect();
    ctx.out.array(2);
    ctx.out.bulk_int(next);
    ctx.out.bulks(kept.into_iter());
    Ok(())
}

pub(super) fn randomkey(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    match ctx.kv().random_key()? {
        Some(key) => ctx.out.bulk(&key),
        None => ctx.out.null(),
    }
    Ok(())
}

fn flush(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    match args.opt(1) {
        None => {}
        Some(mode) if args.len() == 2 && (is(mode, "ASYNC") || is(mode, "SYNC")) => {}
        Some(_) => return Err(CmdError::Syntax),
    }
    ctx.kv().flush()?;
    ctx.out.ok();
    Ok(())
}

pub(super) fn flushdb(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    flush(ctx, args)
}

pub(super) fn flushall(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    flush(ctx, args)
}
