//! Bitmap commands on string values: SETBIT, GETBIT, BITCOUNT, BITPOS,
//! BITOP. Bit 0 is the most significant bit of byte 0, as in Redis; a
//! missing key reads as an empty string, and bits past a value's end as 0.
//! Ranges follow Redis 7.0's `bitcountCommand` and `bitposCommand`
//! (`bitops.c`), BYTE and BIT units included.

use super::Ctx;
use super::string::{check_length, modify};
use crate::error::{CmdError, CmdResult};
use crate::parse::{Args, int, is};
use crate::store::Write;

/// A bit offset as SETBIT and GETBIT take it: a canonical integer from 0
/// to below `proto-max-bulk-len` bytes' worth of bits.
fn bit_offset(ctx: &Ctx<'_>, arg: &[u8]) -> CmdResult<u64> {
    let max_bytes = ctx
        .shared
        .live
        .max_bulk
        .load(std::sync::atomic::Ordering::Relaxed);
    let err = || CmdError::err("bit offset is not an integer or out of range");
    let offset = crate::num::parse_i64(arg).ok_or_else(err)?;
    if offset < 0 || (offset as u64 >> 3) >= max_bytes {
        return Err(err());
    }
    Ok(offset as u64)
}

/// The bit at `offset` of `value` (0 past its end).
fn bit_at(value: &[u8], offset: u64) -> bool {
    let byte = usize::try_from(offset >> 3).unwrap_or(usize::MAX);
    value
        .get(byte)
        .is_some_and(|b| b & (0x80 >> (offset & 7)) != 0)
}

pub(super) fn setbit(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let offset = bit_offset(ctx, args.get(2))?;
    let on = match crate::num::parse_i64(args.get(3)) {
        Some(0) => false,
        Some(1) => true,
        _ => return Err(CmdError::err("bit is not an integer or out of range")),
    };
    let byte = (offset >> 3) as usize;
    check_length(ctx, byte as u64 + 1)?;
    let old = modify(ctx, args.get(1), |value| {
        let mut v = value.map(<[u8]>::to_vec).unwrap_or_default();
        if v.len() <= byte {
            v.resize(byte + 1, 0);
        }
        let mask = 0x80 >> (offset & 7);
        let old = v[byte] & mask != 0;
        if on {
            v[byte] |= mask;
        } else {
            v[byte] &= !mask;
        }
        Ok((v, old))
    })?;
    ctx.out.int(i64::from(old));
    Ok(())
}

pub(super) fn getbit(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let offset = bit_offset(ctx, args.get(2))?;
    let key = args.get(1);
    let kv = ctx.kv();
    let scratch = &mut ctx.session.scratch;
    let found = kv.read(key, || kv.get_into(key, scratch))?;
    ctx.out
        .int(i64::from(found && bit_at(&ctx.session.scratch, offset)));
    Ok(())
}

/// A range's unit: bytes (the default) or bits.
fn unit_is_bit(arg: &[u8]) -> CmdResult<bool> {
    if is(arg, "BIT") {
        Ok(true)
    } else if is(arg, "BYTE") {
        Ok(false)
    } else {
        Err(CmdError::Syntax)
    }
}

/// Redis's range conversion over `len` units (bytes or bits): negative
/// indexes count from the end, then both are clamped into the value;
/// `None` for an empty range. The result is in bits, inclusive.
fn bit_range(len: i64, start: i64, end: i64, bits: bool) -> Option<(u64, u64)> {
    let total = if bits { len * 8 } else { len };
    let start = if start < 0 { total + start } else { start }.max(0);
    let end = if end < 0 { total + end } else { end }
        .max(0)
        .min(total - 1);
    if start > end {
        return None;
    }
    Some(match bits {
        true => (start as u64, end as u64),
        false => (start as u64 * 8, end as u64 * 8 + 7),
    })
}

/// Reads `key` into the session's scratch buffer; whether it exists.
fn read_value(ctx: &mut Ctx<'_>, key: &[u8]) -> CmdResult<bool> {
    let kv = ctx.kv();
    let scratch = &mut ctx.session.scratch;
    Ok(kv.read(key, || kv.get_into(key, scratch))?)
}

pub(super) fn bitcount(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    // A missing key counts 0 before its range is even parsed, as in Redis.
    if !read_value(ctx, args.get(1))? {
        ctx.out.int(0);
        return Ok(());
    }
    let len = ctx.session.scratch.len() as i64;
    let range = match args.len() {
        2 => bit_range(len, 0, -1, false),
        4 | 5 => {
            let (start, end) = (int(args.get(2))?, int(args.get(3))?);
            if start < 0 && end < 0 && start > end {
                None
            } else {
                let bits = args.len() == 5 && unit_is_bit(args.get(4))?;
                bit_range(len, start, end, bits)
            }
        }
        _ => return Err(CmdError::Syntax),
    };
    let count = range.map_or(0, |(first, last)| {
        count_ones(&ctx.session.scratch, first, last)
    });
    ctx.out.int(count as i64);
    Ok(())
}

/// Set bits from bit `first` to bit `last`, inclusive, both within
/// `value`.
fn count_ones(value: &[u8], first: u64, last: u64) -> u64 {
    let (a, b) = ((first >> 3) as usize, (last >> 3) as usize);
    let whole: u64 = value[a..=b].iter().map(|x| u64::from(x.count_ones())).sum();
    // Take off the bits of the first and last bytes outside the range.
    let before = u64::from((value[a] & !(0xFFu8 >> (first & 7))).count_ones());
    let after = u64::from((value[b] & (0x7Fu8 >> (last & 7))).count_ones());
    whole - before - after
}

pub(super) fn bitpos(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let bit = match int(args.get(2))? {
        0 => false,
        1 => true,
        _ => return Err(CmdError::err("The bit argument must be 1 or 0.")),
    };
    // A missing key is an endless run of 0 bits.
    if !read_value(ctx, args.get(1))? {
        ctx.out.int(if bit { -1 } else { 0 });
        return Ok(());
    }
    let len = ctx.session.scratch.len() as i64;
    let (range, end_given) = match args.len() {
        3 => (bit_range(len, 0, -1, false), false),
        4..=6 => {
            let start = int(args.get(3))?;
            let bits = args.len() == 6 && unit_is_bit(args.get(5))?;
            let end = match args.len() {
                4 => -1,
                _ => int(args.get(4))?,
            };
            (bit_range(len, start, end, bits), args.len() >= 5)
        }
        _ => return Err(CmdError::Syntax),
    };
    let Some((first, last)) = range else {
        ctx.out.int(-1);
        return Ok(());
    };
    let found = find_bit(&ctx.session.scratch, first, last, bit);
    // Looking for a 0 without an end: the value continues with 0 bits.
    let pos = match found {
        Some(i) => i as i64,
        None if !bit && !end_given => last as i64 + 1,
        None => -1,
    };
    ctx.out.int(pos);
    Ok(())
}

/// The first bit equal to `bit` from bit `first` to bit `last`, both
/// within `value`; whole bytes without one are skipped a byte at a time.
fn find_bit(value: &[u8], first: u64, last: u64, bit: bool) -> Option<u64> {
    let skip = if bit { 0x00 } else { 0xFF };
    let mut i = first;
    while i <= last {
        if i & 7 == 0 && i + 7 <= last && value[(i >> 3) as usize] == skip {
            i += 8;
        } else if bit_at(value, i) == bit {
            return Some(i);
        } else {
            i += 1;
        }
    }
    None
}

pub(super) fn bitop(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let op = args.get(1);
    let not = is(op, "NOT");
    let combine: fn(u8, u8) -> u8 = if is(op, "AND") {
        |a, b| a & b
    } else if is(op, "OR") {
        |a, b| a | b
    } else if is(op, "XOR") {
        |a, b| a ^ b
    } else if not {
        if args.len() != 4 {
            return Err(CmdError::err(
                "BITOP NOT must be called with a single source key.",
            ));
        }
        // One source, complemented above: nothing to combine.
        |a, _| a
    } else {
        return Err(CmdError::Syntax);
    };
    let dst = args.get(2);
    let kv = ctx.kv();
    let _locks = kv.lock_all(args.from(2));
    // One source in memory at a time beside the result (a key named many
    // times is read each time): at most twice the largest value, however
    // many sources. Missing keys and bytes past a shorter value read as 0.
    let mut sources = args.from(3);
    let first = sources.next().expect("arity: a source");
    let mut result = kv.get(first)?.unwrap_or_default();
    if not {
        result.iter_mut().for_each(|b| *b = !*b);
    }
    for key in sources {
        let source = kv.get(key)?.unwrap_or_default();
        if source.len() > result.len() {
            result.resize(source.len(), 0);
        }
        for (i, r) in result.iter_mut().enumerate() {
            *r = combine(*r, source.get(i).copied().unwrap_or(0));
        }
    }
    let len = result.len();
    if len == 0 {
        kv.remove(dst)?;
    } else {
        kv.apply(&[(dst, Write::Put(&result, None))])?;
    }
    ctx.out.int(len as i64);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ones_are_counted_within_the_range_only() {
        let v = [0b1111_0000u8, 0xFF, 0b0000_1111];
        assert_eq!(count_ones(&v, 0, 23), 16);
        assert_eq!(count_ones(&v, 2, 5), 2);
        assert_eq!(count_ones(&v, 4, 19), 8);
        assert_eq!(count_ones(&v, 20, 20), 1);
        assert_eq!(count_ones(&v, 8, 8), 1);
    }

    #[test]
    fn bits_are_found_across_skipped_bytes() {
        let v = [0u8, 0, 0b0010_0000, 0xFF, 0xFF, 0b1110_1111];
        assert_eq!(find_bit(&v, 0, 47, true), Some(18));
        assert_eq!(find_bit(&v, 19, 47, true), Some(24));
        assert_eq!(find_bit(&v, 24, 47, false), Some(43));
        assert_eq!(find_bit(&v, 24, 42, false), None);
        assert_eq!(find_bit(&v, 0, 17, true), None);
    }

    #[test]
    fn ranges_convert_as_redis_converts_them() {
        assert_eq!(bit_range(3, 0, -1, false), Some((0, 23)));
        assert_eq!(bit_range(3, 1, 1, false), Some((8, 15)));
        assert_eq!(bit_range(3, -1, 100, true), Some((23, 23)));
        assert_eq!(bit_range(3, 5, 2, true), None);
        assert_eq!(bit_range(0, 0, -1, false), None);
        assert_eq!(bit_range(3, -100, -50, false), Some((0, 7)));
    }
}
