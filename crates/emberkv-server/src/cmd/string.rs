//! String commands: GET, SET and its variants, MGET/MSET, counters,
//! APPEND, ranges.
//!
//! Every write holds the key's stripe lock (see [`crate::store`]); reads
//! run isolated from EXEC. Commands that change a value and keep its
//! expiry (INCR, APPEND, SETRANGE, KEEPTTL) use [`crate::kv::Kv::update`]
//! (the engine's [`emberkv::Db::update`], whose closure runs under the
//! engine's shard lock): its closure computes the new value and records
//! any error for the reply.

use super::Ctx;
use crate::error::{CmdError, CmdResult};
use crate::long_double::LongDouble;
use crate::num::parse_i64;
use crate::parse::{Args, float, int, is};
use crate::store::{Expiry, Write, now_ms};

/// An expiry option of SET and GETEX.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Unit {
    /// Seconds from now.
    Ex,
    /// Milliseconds from now.
    Px,
    /// A Unix time in seconds.
    ExAt,
    /// A Unix time in milliseconds.
    PxAt,
}

impl Unit {
    fn of(opt: &[u8]) -> Option<Unit> {
        Some(match opt.to_ascii_uppercase().as_slice() {
            b"EX" => Unit::Ex,
            b"PX" => Unit::Px,
            b"EXAT" => Unit::ExAt,
            b"PXAT" => Unit::PxAt,
            _ => return None,
        })
    }

    fn in_seconds(self) -> bool {
        matches!(self, Unit::Ex | Unit::ExAt)
    }

    fn relative(self) -> bool {
        matches!(self, Unit::Ex | Unit::Px)
    }
}

/// The deadline (Unix ms) an expiry option names, with Redis's checks:
/// the number must be positive, and neither the conversion to ms nor the
/// addition of now may overflow.
pub(super) fn deadline(unit: Unit, arg: &[u8], cmd: &'static str) -> CmdResult<i64> {
    let n = int(arg)?;
    if n <= 0 || (unit.in_seconds() && n > i64::MAX / 1000) {
        return Err(CmdError::InvalidExpire(cmd));
    }
    let ms = if unit.in_seconds() { n * 1000 } else { n };
    if unit.relative() {
        ms.checked_add(now_ms()).ok_or(CmdError::InvalidExpire(cmd))
    } else {
        Ok(ms)
    }
}

/// The options of SET (from argument 3) or GETEX (from argument 2).
#[derive(Default)]
struct Extended<'a> {
    nx: bool,
    xx: bool,
    get: bool,
    keepttl: bool,
    persist: bool,
    expire: Option<(Unit, &'a [u8])>,
}

/// Parses SET / GETEX options with Redis's compatibility rules; a
/// conflicting or unknown option is a syntax error.
fn extended<'a>(args: &Args<'a>, from: usize, for_set: bool) -> CmdResult<Extended<'a>> {
    let mut e = Extended::default();
    let mut j = from;
    while j < args.len() {
        let opt = args.get(j);
        let next = args.opt(j + 1);
        if for_set && is(opt, "NX") && !e.xx {
            e.nx = true;
        } else if for_set && is(opt, "XX") && !e.nx {
            e.xx = true;
        } else if for_set && is(opt, "GET") {
            e.get = true;
        } else if for_set && is(opt, "KEEPTTL") && !e.persist && e.expire.is_none() {
            e.keepttl = true;
        } else if !for_set && is(opt, "PERSIST") && e.expire.is_none() && !e.keepttl {
            e.persist = true;
        } else if let (Some(unit), Some(value)) = (Unit::of(opt), next)
            && !e.keepttl
            && !e.persist
            && e.expire.is_none_or(|(u, _)| u == unit)
        {
            e.expire = Some((unit, value));
            j += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    Ok(e)
}

pub(super) fn get(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let key = args.get(1);
    let kv = ctx.kv();
    let scratch = &mut ctx.session.scratch;
    let found = kv.read(key, || kv.get_into(key, scratch))?;
    ctx.session.local.lookup(found);
    if found {
        ctx.out.bulk(&ctx.session.scratch);
    } else {
        ctx.out.null();
    }
    Ok(())
}

fn reply_opt(ctx: &mut Ctx<'_>, value: Option<&[u8]>) {
    match value {
        Some(v) => ctx.out.bulk(v),
        None => ctx.out.null(),
    }
}

pub(super) fn set(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let (key, value) = (args.get(1), args.get(2));
    let e = extended(args, 3, true)?;
    let expiry = match e.expire {
        Some((unit, arg)) => Expiry::AtMs(deadline(unit, arg, "set")?),
        None if e.keepttl => Expiry::Keep,
        None => Expiry::Never,
    };
    let kv = ctx.kv();
    let _lock = kv.lock(key);
    let old = if e.get { Some(kv.get(key)?) } else { None };
    if let Some(old) = &old {
        ctx.session.local.lookup(old.is_some());
    }
    if e.nx || e.xx {
        let found = match &old {
            Some(v) => v.is_some(),
            None => kv.contains_key(key)?,
        };
        if (e.nx && found) || (e.xx && !found) {
            match old {
                Some(v) => reply_opt(ctx, v.as_deref()),
                None => ctx.out.null(),
            }
            return Ok(());
        }
    }
    kv.put(key, value, expiry)?;
    match old {
        Some(v) => reply_opt(ctx, v.as_deref()),
        None => ctx.out.ok(),
    }
    Ok(())
}

pub(super) fn setnx(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let (key, value) = (args.get(1), args.get(2));
    let kv = ctx.kv();
    let _lock = kv.lock(key);
    if kv.contains_key(key)? {
        ctx.out.int(0);
    } else {
        kv.put(key, value, Expiry::Never)?;
        ctx.out.int(1);
    }
    Ok(())
}

fn set_with_expiry(ctx: &mut Ctx<'_>, args: &Args<'_>, unit: Unit, cmd: &'static str) -> CmdResult {
    let key = args.get(1);
    let at = deadline(unit, args.get(2), cmd)?;
    let kv = ctx.kv();
    let _lock = kv.lock(key);
    kv.put(key, args.get(3), Expiry::AtMs(at))?;
    ctx.out.ok();
    Ok(())
}

pub(super) fn setex(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    set_with_expiry(ctx, args, Unit::Ex, "setex")
}

pub(super) fn psetex(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    set_with_expiry(ctx, args, Unit::Px, "psetex")
}

pub(super) fn getset(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let (key, value) = (args.get(1), args.get(2));
    let kv = ctx.kv();
    let _lock = kv.lock(key);
    let old = kv.get(key)?;
    ctx.session.local.lookup(old.is_some());
    kv.put(key, value, Expiry::Never)?;
    reply_opt(ctx, old.as_deref());
    Ok(())
}

pub(super) fn getdel(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let key = args.get(1);
    let kv = ctx.kv();
    let _lock = kv.lock(key);
    let old = kv.get(key)?;
    if old.is_some() {
        kv.remove(key)?;
        ctx.session.local.hits += 1;
    } else {
        ctx.session.local.misses += 1;
    }
    reply_opt(ctx, old.as_deref());
    Ok(())
}

pub(super) fn getex(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let key = args.get(1);
    let e = extended(args, 2, false)?;
    if e.expire.is_none() && !e.persist {
        return get(ctx, args);
    }
    let kv = ctx.kv();
    let _lock = kv.lock(key);
    let Some(value) = kv.get(key)? else {
        ctx.session.local.misses += 1;
        ctx.out.null();
        return Ok(());
    };
    // The expiry's value is checked once the key is found, as in Redis
    // 7.0 (`GETEX missing EX x` is a null, not an error).
    match e.expire {
        Some((unit, arg)) => {
            kv.expire_at(key, deadline(unit, arg, "getex")?)?;
        }
        None => {
            kv.persist(key)?;
        }
    }
    ctx.session.local.hits += 1;
    ctx.out.bulk(&value);
    Ok(())
}

pub(super) fn mget(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let kv = ctx.kv();
    let (out, session) = (&mut *ctx.out, &mut *ctx.session);
    let mark = out.len();
    let counts = kv.read_all(args.from(1), || -> CmdResult<(u64, u64)> {
        // A second run (see `Store::read_all`) replaces the first's reply.
        out.truncate(mark);
        out.array(args.len() - 1);
        let (mut hits, mut misses) = (0, 0);
        for key in args.from(1) {
            if kv.get_into(key, &mut session.scratch)? {
                hits += 1;
                out.bulk(&session.scratch);
            } else {
                misses += 1;
                out.null();
            }
        }
        Ok((hits, misses))
    });
    match counts {
        Ok((hits, misses)) => {
            session.local.hits += hits;
            session.local.misses += misses;
            Ok(())
        }
        Err(e) => {
            // No half-written array before the error.
            out.truncate(mark);
            Err(e)
        }
    }
}

/// MSET and MSETNX: one atomic batch under every key's stripe.
fn mset_generic(ctx: &mut Ctx<'_>, args: &Args<'_>, nx: bool) -> CmdResult {
    let name = if nx { "msetnx" } else { "mset" };
    if args.len().is_multiple_of(2) {
        return Err(CmdError::WrongArity(name.into()));
    }
    let kv = ctx.kv();
    let keys = || args.from(1).step_by(2);
    let _locks = kv.lock_all(keys());
    if nx {
        for key in keys() {
            if kv.contains_key(key)? {
                ctx.out.int(0);
                return Ok(());
            }
        }
    }
    let mut ops = Vec::with_capacity(args.len() / 2);
    let mut pairs = args.from(1);
    while let (Some(k), Some(v)) = (pairs.next(), pairs.next()) {
        ops.push((k, Write::Put(v, None)));
    }
    kv.apply(&ops)?;
    if nx {
        ctx.out.int(1);
    } else {
        ctx.out.ok();
    }
    Ok(())
}

pub(super) fn mset(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    mset_generic(ctx, args, false)
}

pub(super) fn msetnx(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    mset_generic(ctx, args, true)
}

/// Atomically replaces the value of `key` with `f(current)`, keeping its
/// expiry; the key counts as changed for WATCH. When `f` fails nothing
/// changes (the engine writes nothing for a value handed back unchanged)
/// and the error is returned.
pub(super) fn modify<T>(
    ctx: &mut Ctx<'_>,
    key: &[u8],
    f: impl FnOnce(Option<&[u8]>) -> CmdResult<(Vec<u8>, T)>,
) -> CmdResult<T> {
    modify_if(ctx, key, |old| f(old).map(|(new, t)| (new, t, true)))
}

/// As [`modify`], for a command whose call counts as a change of its key
/// for WATCH only when the third result of `f` says so (SETBIT and
/// BITFIELD, which Redis 7.0 counts only when a bit changed or the value
/// was created or grew).
pub(super) fn modify_if<T>(
    ctx: &mut Ctx<'_>,
    key: &[u8],
    f: impl FnOnce(Option<&[u8]>) -> CmdResult<(Vec<u8>, T, bool)>,
) -> CmdResult<T> {
    let kv = ctx.kv();
    let _lock = kv.lock(key);
    let mut outcome = None;
    kv.update(key, |old| match f(old) {
        Ok((new, t, changed)) => {
            outcome = Some(Ok(t));
            (Some(new), changed)
        }
        Err(e) => {
            outcome = Some(Err(e));
            (old.map(<[u8]>::to_vec), false)
        }
    })?;
    outcome.expect("update runs its closure exactly once")
}

fn incr_by(ctx: &mut Ctx<'_>, key: &[u8], delta: i64) -> CmdResult {
    let n = modify(ctx, key, |old| {
        let cur = match old {
            None => 0,
            Some(v) => parse_i64(v).ok_or(CmdError::NotInteger)?,
        };
        let n = cur.checked_add(delta).ok_or(CmdError::Overflow)?;
        Ok((itoa::Buffer::new().format(n).as_bytes().to_vec(), n))
    })?;
    ctx.out.int(n);
    Ok(())
}

pub(super) fn incr(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    incr_by(ctx, args.get(1), 1)
}

pub(super) fn decr(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    incr_by(ctx, args.get(1), -1)
}

pub(super) fn incrby(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let delta = int(args.get(2))?;
    incr_by(ctx, args.get(1), delta)
}

pub(super) fn decrby(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let delta = int(args.get(2))?;
    if delta == i64::MIN {
        return Err(CmdError::err("decrement would overflow"));
    }
    incr_by(ctx, args.get(1), -delta)
}

pub(super) fn incrbyfloat(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let incr = float(args.get(2))?;
    let text = modify(ctx, args.get(1), |old| {
        let cur = match old {
            None => LongDouble::ZERO,
            Some(v) => LongDouble::parse(v).ok_or(CmdError::NotFloat)?,
        };
        let text = cur
            .checked_add(incr)
            .ok_or(CmdError::NanOrInfinity)?
            .to_human_string();
        Ok((text.as_bytes().to_vec(), text))
    })?;
    ctx.out.bulk(text.as_bytes());
    Ok(())
}

/// Redis's `checkStringLength`: a string may not grow past
/// `proto-max-bulk-len`; and emberkv's own value limit.
pub(super) fn check_length(ctx: &Ctx<'_>, len: u64) -> CmdResult {
    let max = ctx
        .shared
        .live
        .max_bulk
        .load(std::sync::atomic::Ordering::Relaxed);
    if len > max {
        return Err(CmdError::StringTooLong);
    }
    if len > emberkv::MAX_VALUE_BYTES as u64 {
        return Err(CmdError::Store(emberkv::Error::ValueTooLarge {
            len: len as usize,
            max: emberkv::MAX_VALUE_BYTES,
        }));
    }
    Ok(())
}

pub(super) fn append(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let (key, suffix) = (args.get(1), args.get(2));
    let max = ctx
        .shared
        .live
        .max_bulk
        .load(std::sync::atomic::Ordering::Relaxed);
    let len = modify(ctx, key, |old| {
        let old = old.unwrap_or_default();
        let len = old.len() + suffix.len();
        if len as u64 > max {
            return Err(CmdError::StringTooLong);
        }
        let mut v = Vec::with_capacity(len);
        v.extend_from_slice(old);
        v.extend_from_slice(suffix);
        Ok((v, len))
    })?;
    ctx.out.int(len as i64);
    Ok(())
}

pub(super) fn strlen(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let key = args.get(1);
    let kv = ctx.kv();
    let scratch = &mut ctx.session.scratch;
    let found = kv.read(key, || kv.get_into(key, scratch))?;
    ctx.session.local.lookup(found);
    let len = if found { ctx.session.scratch.len() } else { 0 };
    ctx.out.int(len as i64);
    Ok(())
}

/// Redis 7.0's GETRANGE index arithmetic: the byte range of a string of
/// `len` bytes that `start..=end` selects, or `None` for the empty string.
fn range(len: usize, start: i64, end: i64) -> Option<(usize, usize)> {
    let len = len as i64;
    if start < 0 && end < 0 && start > end {
        return None;
    }
    let mut start = if start < 0 { len + start } else { start };
    let mut end = if end < 0 { len + end } else { end };
    start = start.max(0);
    end = end.max(0);
    if end >= len {
        end = len - 1;
    }
    if start > end || len == 0 {
        return None;
    }
    Some((start as usize, end as usize))
}

pub(super) fn getrange(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let start = int(args.get(2))?;
    let end = int(args.get(3))?;
    let key = args.get(1);
    let kv = ctx.kv();
    let scratch = &mut ctx.session.scratch;
    let found = kv.read(key, || kv.get_into(key, scratch))?;
    ctx.session.local.lookup(found);
    let value: &[u8] = if found { &ctx.session.scratch } else { b"" };
    match range(value.len(), start, end) {
        Some((s, e)) => ctx.out.bulk(&value[s..=e]),
        None => ctx.out.bulk(b""),
    }
    Ok(())
}

pub(super) fn setrange(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let key = args.get(1);
    let offset = int(args.get(2))?;
    if offset < 0 {
        return Err(CmdError::OffsetOutOfRange);
    }
    let patch = args.get(3);
    if patch.is_empty() {
        return strlen(ctx, args);
    }
    check_length(ctx, offset as u64 + patch.len() as u64)?;
    let offset = offset as usize;
    let len = modify(ctx, key, |old| {
        let mut v = old.map(<[u8]>::to_vec).unwrap_or_default();
        let end = offset + patch.len();
        if v.len() < end {
            v.resize(end, 0);
        }
        v[offset..end].copy_from_slice(patch);
        let len = v.len();
        Ok((v, len))
    })?;
    ctx.out.int(len as i64);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn getrange_matches_redis_7_0() {
        let s = b"Hello World";
        let r = |a, b| range(s.len(), a, b).map(|(x, y)| &s[x..=y]);
        assert_eq!(r(0, 4), Some(&b"Hello"[..]));
        assert_eq!(r(-5, -1), Some(&b"World"[..]));
        assert_eq!(r(0, -1), Some(&s[..]));
        assert_eq!(r(0, 100), Some(&s[..]));
        assert_eq!(r(5, 3), None);
        assert_eq!(r(-1, -5), None);
        assert_eq!(r(0, -100), Some(&b"H"[..]), "Redis 7.0 clamps end to 0");
        assert_eq!(range(0, 0, -1), None);
    }

    #[test]
    fn deadlines_check_sign_and_overflow() {
        assert!(matches!(
            deadline(Unit::Ex, b"0", "set"),
            Err(CmdError::InvalidExpire("set"))
        ));
        assert!(matches!(
            deadline(Unit::Px, b"-5", "set"),
            Err(CmdError::InvalidExpire(_))
        ));
        assert!(matches!(
            deadline(Unit::Ex, b"x", "set"),
            Err(CmdError::NotInteger)
        ));
        assert!(matches!(
            deadline(Unit::Ex, b"9223372036854775", "set"),
            Err(CmdError::InvalidExpire(_))
        ));
        assert!(matches!(
            deadline(Unit::Px, b"9223372036854775807", "set"),
            Err(CmdError::InvalidExpire(_))
        ));
        assert_eq!(deadline(Unit::PxAt, b"5", "set").unwrap(), 5);
        assert_eq!(deadline(Unit::ExAt, b"5", "set").unwrap(), 5000);
        let d = deadline(Unit::Ex, b"10", "set").unwrap();
        assert!((d - now_ms() - 10_000).abs() < 1000);
    }
}
