//! Bitmap commands on string values: SETBIT, GETBIT, BITCOUNT, BITPOS,
//! BITOP, BITFIELD and BITFIELD_RO. Bit 0 is the most significant bit of
//! byte 0, as in Redis; a missing key reads as an empty string, and bits
//! past a value's end as 0. Ranges follow Redis 7.0's `bitcountCommand`
//! and `bitposCommand` (`bitops.c`), BYTE and BIT units included, and
//! BITFIELD its `bitfieldGeneric` with the overflow rules of
//! `checkSignedBitfieldOverflow` and `checkUnsignedBitfieldOverflow`.

use super::Ctx;
use super::string::{check_length, modify_if};
use crate::error::{CmdError, CmdResult};
use crate::parse::{Args, int, is};
use crate::store::Write;

/// A bit offset as SETBIT and GETBIT take it: a canonical integer from 0
/// to below `proto-max-bulk-len` bytes' worth of bits.
fn bit_offset(ctx: &Ctx<'_>, arg: &[u8]) -> CmdResult<u64> {
    let offset = crate::num::parse_i64(arg).ok_or_else(offset_error)?;
    checked_offset(ctx, offset)
}

fn offset_error() -> CmdError {
    CmdError::err("bit offset is not an integer or out of range")
}

/// `offset` if it is a bit offset Redis takes: from 0 to below
/// `proto-max-bulk-len` bytes' worth of bits.
fn checked_offset(ctx: &Ctx<'_>, offset: i64) -> CmdResult<u64> {
    let max_bytes = ctx
        .shared
        .live
        .max_bulk
        .load(std::sync::atomic::Ordering::Relaxed);
    if offset < 0 || (offset as u64 >> 3) >= max_bytes {
        return Err(offset_error());
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
    let old = modify_if(ctx, args.get(1), |value| {
        let mut v = value.map(<[u8]>::to_vec).unwrap_or_default();
        // Created or grown: a change whatever the bit (as Redis 7.0).
        let grown = value.is_none_or(|value| value.len() <= byte);
        if grown {
            v.resize(byte + 1, 0);
        }
        let mask = 0x80 >> (offset & 7);
        let old = v[byte] & mask != 0;
        if on {
            v[byte] |= mask;
        } else {
            v[byte] &= !mask;
        }
        Ok((v, old, grown || old != on))
    })?;
    ctx.out.int(i64::from(old));
    Ok(())
}

pub(super) fn getbit(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let offset = bit_offset(ctx, args.get(2))?;
    let found = read_value(ctx, args.get(1))?;
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
    let found = kv.read(key, || kv.get_into(key, scratch))?;
    ctx.session.local.lookup(found);
    Ok(found)
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
    let local = &mut ctx.session.local;
    let mut read = |key: &[u8]| -> CmdResult<Vec<u8>> {
        let value = kv.get(key)?;
        local.lookup(value.is_some());
        Ok(value.unwrap_or_default())
    };
    let mut result = read(first)?;
    if not {
        result.iter_mut().for_each(|b| *b = !*b);
    }
    for key in sources {
        let source = read(key)?;
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

/// What a BITFIELD operation does.
#[derive(Clone, Copy, PartialEq, Eq)]
enum FieldOp {
    Get,
    Set,
    IncrBy,
}

/// BITFIELD's OVERFLOW behaviour for the SET and INCRBY after it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Overflow {
    Wrap,
    Sat,
    Fail,
}

/// One parsed BITFIELD operation on an integer of `bits` bits (1 to 64
/// signed, 1 to 63 unsigned) at bit `offset`.
#[derive(Clone, Copy)]
struct Field {
    op: FieldOp,
    signed: bool,
    bits: u32,
    offset: u64,
    /// The value of a SET, the increment of an INCRBY.
    value: i64,
    overflow: Overflow,
}

/// A BITFIELD type: `i1`..`i64` or `u1`..`u63`.
fn field_type(arg: &[u8]) -> CmdResult<(bool, u32)> {
    let err = || {
        CmdError::err(
            "Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.",
        )
    };
    let (signed, max) = match arg.first() {
        Some(b'i') => (true, 64),
        Some(b'u') => (false, 63),
        _ => return Err(err()),
    };
    match crate::num::parse_i64(&arg[1..]) {
        Some(bits) if (1..=max).contains(&bits) => Ok((signed, bits as u32)),
        _ => Err(err()),
    }
}

/// A BITFIELD offset: in bits, or with `#` in units of the type's width
/// (multiplied as Redis's C does, wrapping), below `proto-max-bulk-len`
/// bytes' worth of bits.
fn field_offset(ctx: &Ctx<'_>, arg: &[u8], bits: u32) -> CmdResult<u64> {
    let Some(units) = arg.strip_prefix(b"#") else {
        return bit_offset(ctx, arg);
    };
    let units = crate::num::parse_i64(units).ok_or_else(offset_error)?;
    checked_offset(ctx, units.wrapping_mul(i64::from(bits)))
}

/// Parses BITFIELD's operations (arguments 2 on), in Redis's order: each
/// operation's type, offset, then value.
fn parse_fields(ctx: &Ctx<'_>, args: &Args<'_>) -> CmdResult<Vec<Field>> {
    let mut fields = Vec::new();
    let mut overflow = Overflow::Wrap;
    let mut i = 2;
    while i < args.len() {
        let left = args.len() - i - 1;
        let sub = args.get(i);
        let op = if is(sub, "GET") && left >= 2 {
            FieldOp::Get
        } else if is(sub, "SET") && left >= 3 {
            FieldOp::Set
        } else if is(sub, "INCRBY") && left >= 3 {
            FieldOp::IncrBy
        } else if is(sub, "OVERFLOW") && left >= 1 {
            let kind = args.get(i + 1);
            overflow = if is(kind, "WRAP") {
                Overflow::Wrap
            } else if is(kind, "SAT") {
                Overflow::Sat
            } else if is(kind, "FAIL") {
                Overflow::Fail
            } else {
                return Err(CmdError::err("Invalid OVERFLOW type specified"));
            };
            i += 2;
            continue;
        } else {
            return Err(CmdError::Syntax);
        };
        let (signed, bits) = field_type(args.get(i + 1))?;
        let offset = field_offset(ctx, args.get(i + 2), bits)?;
        let value = match op {
            FieldOp::Get => 0,
            _ => int(args.get(i + 3))?,
        };
        fields.push(Field {
            op,
            signed,
            bits,
            offset,
            value,
            overflow,
        });
        i += if op == FieldOp::Get { 3 } else { 4 };
    }
    Ok(fields)
}

/// The `bits`-bit unsigned integer at bit `offset` of `value`, most
/// significant bit first (bits past the end read 0).
fn get_unsigned(value: &[u8], offset: u64, bits: u32) -> u64 {
    (offset..offset + u64::from(bits)).fold(0, |acc, i| acc << 1 | u64::from(bit_at(value, i)))
}

/// The same, sign-extended from its top bit.
fn get_signed(value: &[u8], offset: u64, bits: u32) -> i64 {
    let raw = get_unsigned(value, offset, bits);
    match bits < 64 && raw >> (bits - 1) & 1 == 1 {
        true => (raw | u64::MAX << bits) as i64,
        false => raw as i64,
    }
}

/// Writes the low `bits` bits of `field` at bit `offset` of `value`, which
/// holds them.
fn set_bits(value: &mut [u8], offset: u64, bits: u32, field: u64) {
    for j in 0..u64::from(bits) {
        let on = field >> (u64::from(bits) - 1 - j) & 1 == 1;
        let (byte, mask) = (((offset + j) >> 3) as usize, 0x80u8 >> ((offset + j) & 7));
        if on {
            value[byte] |= mask;
        } else {
            value[byte] &= !mask;
        }
    }
}

/// Redis's `checkUnsignedBitfieldOverflow`: whether `value + incr`
/// leaves a `bits`-bit unsigned integer, and if so the value that WRAP
/// or SAT stores.
fn unsigned_overflow(value: u64, incr: i64, bits: u32, how: Overflow) -> Option<u64> {
    let max = if bits == 64 {
        u64::MAX
    } else {
        (1 << bits) - 1
    };
    let max_incr = max.wrapping_sub(value) as i64;
    let min_incr = value.wrapping_neg() as i64;
    let wrapped = || value.wrapping_add(incr as u64) & !(u64::MAX << bits);
    if value > max || (incr > 0 && incr > max_incr) {
        Some(if how == Overflow::Sat { max } else { wrapped() })
    } else if incr < 0 && incr < min_incr {
        Some(if how == Overflow::Sat { 0 } else { wrapped() })
    } else {
        None
    }
}

/// Redis's `checkSignedBitfieldOverflow`, as [`unsigned_overflow`].
fn signed_overflow(value: i64, incr: i64, bits: u32, how: Overflow) -> Option<i64> {
    let max = if bits == 64 {
        i64::MAX
    } else {
        (1 << (bits - 1)) - 1
    };
    let min = -max - 1;
    let max_incr = (max as u64).wrapping_sub(value as u64) as i64;
    let min_incr = min.wrapping_sub(value);
    let wrapped = || {
        let c = (value as u64).wrapping_add(incr as u64);
        if bits == 64 {
            c as i64
        } else if c >> (bits - 1) & 1 == 1 {
            (c | u64::MAX << bits) as i64
        } else {
            (c & !(u64::MAX << bits)) as i64
        }
    };
    if value > max || (bits != 64 && incr > max_incr) || (value >= 0 && incr > 0 && incr > max_incr)
    {
        Some(if how == Overflow::Sat { max } else { wrapped() })
    } else if value < min
        || (bits != 64 && incr < min_incr)
        || (value < 0 && incr < 0 && incr < min_incr)
    {
        Some(if how == Overflow::Sat { min } else { wrapped() })
    } else {
        None
    }
}

/// Runs one SET or INCRBY on `value` (long enough to hold it); its reply:
/// the old value for SET, the new one for INCRBY, `None` when OVERFLOW
/// FAIL refused it (nothing written).
fn write_field(value: &mut [u8], f: &Field) -> Option<i64> {
    let (old, new, overflowed) = if f.signed {
        let old = get_signed(value, f.offset, f.bits);
        let (base, incr) = match f.op {
            FieldOp::IncrBy => (old, f.value),
            _ => (f.value, 0),
        };
        let limit = signed_overflow(base, incr, f.bits, f.overflow);
        let new = limit.unwrap_or_else(|| base.wrapping_add(incr));
        (old, new as u64, limit.is_some())
    } else {
        let old = get_unsigned(value, f.offset, f.bits);
        let (base, incr) = match f.op {
            FieldOp::IncrBy => (old, f.value),
            _ => (f.value as u64, 0),
        };
        let limit = unsigned_overflow(base, incr, f.bits, f.overflow);
        let new = limit.unwrap_or_else(|| base.wrapping_add(incr as u64));
        (old as i64, new, limit.is_some())
    };
    if overflowed && f.overflow == Overflow::Fail {
        return None;
    }
    set_bits(value, f.offset, f.bits, new);
    Some(match f.op {
        FieldOp::IncrBy => new as i64,
        _ => old,
    })
}

/// A GET of `f` from `value`.
fn read_field(value: &[u8], f: &Field) -> i64 {
    match f.signed {
        true => get_signed(value, f.offset, f.bits),
        false => get_unsigned(value, f.offset, f.bits) as i64,
    }
}

fn bitfield_generic(ctx: &mut Ctx<'_>, args: &Args<'_>, read_only: bool) -> CmdResult {
    let fields = parse_fields(ctx, args)?;
    let key = args.get(1);
    let replies: Vec<Option<i64>> = if fields.iter().all(|f| f.op == FieldOp::Get) {
        let found = read_value(ctx, key)?;
        let value: &[u8] = if found { &ctx.session.scratch } else { b"" };
        fields.iter().map(|f| Some(read_field(value, f))).collect()
    } else {
        if read_only {
            return Err(CmdError::err(
                "BITFIELD_RO only supports the GET subcommand",
            ));
        }
        // The value grows to hold the farthest bit written, even when
        // OVERFLOW FAIL then refuses every write (as in Redis).
        let last_bit = fields
            .iter()
            .filter(|f| f.op != FieldOp::Get)
            .map(|f| f.offset + u64::from(f.bits) - 1)
            .max()
            .unwrap_or(0);
        // Redis checks the offsets only (a field may end a few bytes past
        // proto-max-bulk-len); the engine's value limit still applies.
        let len = (last_bit >> 3) as usize + 1;
        if len > emberkv::MAX_VALUE_BYTES {
            return Err(CmdError::Store(emberkv::Error::ValueTooLarge {
                len,
                max: emberkv::MAX_VALUE_BYTES,
            }));
        }
        modify_if(ctx, key, |old| {
            let mut v = old.map(<[u8]>::to_vec).unwrap_or_default();
            let grown = old.is_none_or(|old| old.len() < len);
            if grown {
                v.resize(len, 0);
            }
            // A change for WATCH: a write done (not refused by OVERFLOW
            // FAIL) that changed its field's bits, as Redis 7.0 counts
            // one, or a value created or grown, which Redis counts only
            // with a write done. Redis still aborts a watcher of a key
            // created so and then flushed, or re-created so after it
            // expired, where EXEC here would find it as it was at WATCH:
            // counting the growth aborts those, at the cost of aborting a
            // watcher of a key created so and left alone, which Redis
            // does not.
            let mut changed = grown;
            let replies = fields
                .iter()
                .map(|f| match f.op {
                    FieldOp::Get => Some(read_field(&v, f)),
                    _ => {
                        let before = get_unsigned(&v, f.offset, f.bits);
                        let reply = write_field(&mut v, f);
                        let after = get_unsigned(&v, f.offset, f.bits);
                        changed |= reply.is_some() && before != after;
                        reply
                    }
                })
                .collect();
            Ok((v, replies, changed))
        })?
    };
    ctx.out.array(replies.len());
    for reply in replies {
        match reply {
            Some(n) => ctx.out.int(n),
            None => ctx.out.null(),
        }
    }
    Ok(())
}

pub(super) fn bitfield(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    bitfield_generic(ctx, args, false)
}

pub(super) fn bitfield_ro(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    bitfield_generic(ctx, args, true)
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
    fn bitfield_overflow_wraps_saturates_or_fails() {
        use Overflow::{Sat, Wrap};
        assert_eq!(unsigned_overflow(2, 1, 2, Wrap), None);
        assert_eq!(unsigned_overflow(3, 1, 2, Wrap), Some(0));
        assert_eq!(unsigned_overflow(3, 1, 2, Sat), Some(3));
        assert_eq!(unsigned_overflow(0, -1, 2, Wrap), Some(3));
        assert_eq!(unsigned_overflow(0, -1, 2, Sat), Some(0));
        assert_eq!(unsigned_overflow(5, -5, 8, Sat), None);
        // SET of -1 into a u8: the value, read unsigned, is past the top.
        assert_eq!(unsigned_overflow(u64::MAX, 0, 8, Sat), Some(255));
        assert_eq!(unsigned_overflow(u64::MAX, 0, 8, Wrap), Some(255));
        assert_eq!(signed_overflow(100, 27, 8, Wrap), None);
        assert_eq!(signed_overflow(100, 28, 8, Wrap), Some(-128));
        assert_eq!(signed_overflow(100, 28, 8, Sat), Some(127));
        assert_eq!(signed_overflow(-100, -28, 8, Sat), None);
        assert_eq!(signed_overflow(-100, -29, 8, Wrap), Some(127));
        assert_eq!(signed_overflow(-100, -29, 8, Sat), Some(-128));
        assert_eq!(signed_overflow(i64::MAX, 1, 64, Wrap), Some(i64::MIN));
        assert_eq!(signed_overflow(i64::MIN, -1, 64, Sat), Some(i64::MIN));
        assert_eq!(signed_overflow(200, 0, 8, Sat), Some(127));
    }

    #[test]
    fn bitfields_read_and_write_most_significant_bit_first() {
        let mut v = vec![0u8; 3];
        set_bits(&mut v, 4, 8, 0xAB);
        assert_eq!(v, [0x0A, 0xB0, 0]);
        assert_eq!(get_unsigned(&v, 4, 8), 0xAB);
        assert_eq!(get_signed(&v, 4, 8), 0xABu8 as i8 as i64);
        assert_eq!(get_signed(&v, 4, 4), -6);
        assert_eq!(get_unsigned(&v, 20, 16), 0, "bits past the end read 0");
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
