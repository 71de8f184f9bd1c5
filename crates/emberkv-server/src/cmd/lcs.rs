//! LCS: the longest common subsequence of two string values, as Redis
//! 7.0's `lcsCommand` (`t_string.c`) computes it: the textbook dynamic
//! programme over an `(a + 1) x (b + 1)` table of 32-bit lengths, walked
//! back from its last cell, with the same tie-breaking, so that the
//! subsequence and the IDX ranges are the ones Redis returns. Its table
//! may take at most `proto-max-bulk-len` bytes (512 MB by default), as in
//! Redis; the time is O(a x b).

use super::Ctx;
use crate::error::{CmdError, CmdResult};
use crate::parse::{Args, int, is};

/// What LCS replies with.
struct Request {
    len_only: bool,
    idx: bool,
    with_match_len: bool,
    min_match_len: i64,
}

fn parse(args: &Args<'_>) -> CmdResult<Request> {
    let mut r = Request {
        len_only: false,
        idx: false,
        with_match_len: false,
        min_match_len: 0,
    };
    let mut i = 3;
    while i < args.len() {
        let opt = args.get(i);
        if is(opt, "IDX") {
            r.idx = true;
        } else if is(opt, "LEN") {
            r.len_only = true;
        } else if is(opt, "WITHMATCHLEN") {
            r.with_match_len = true;
        } else if is(opt, "MINMATCHLEN") && i + 1 < args.len() {
            r.min_match_len = int(args.get(i + 1))?.max(0);
            i += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    if r.len_only && r.idx {
        return Err(CmdError::err(
            "If you want both the length and indexes, please just use IDX.",
        ));
    }
    Ok(r)
}

/// One matched range: positions in `a` and in `b` (inclusive), and its
/// length.
type Range = ((u32, u32), (u32, u32), u32);

/// The length table of `a` and `b`, row-major with `b.len() + 1` columns.
///
/// # Errors
/// Redis's: a table above `max_bytes`, or memory that cannot be had.
fn table(a: &[u8], b: &[u8], max_bytes: u64) -> CmdResult<Vec<u32>> {
    let cells = (a.len() as u64 + 1) * (b.len() as u64 + 1);
    if cells * 4 > max_bytes {
        return Err(CmdError::err(
            "Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len",
        ));
    }
    let mut t = Vec::new();
    t.try_reserve_exact(cells as usize).map_err(|_| {
        CmdError::err("Insufficient memory, failed allocating transient memory for LCS")
    })?;
    let cols = b.len() + 1;
    t.resize(cells as usize, 0);
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            t[i * cols + j] = if a[i - 1] == b[j - 1] {
                t[(i - 1) * cols + j - 1] + 1
            } else {
                t[(i - 1) * cols + j].max(t[i * cols + j - 1])
            };
        }
    }
    Ok(t)
}

/// Walks the table back from its last cell as Redis does: the common
/// subsequence, and the matched ranges from the end of the strings (those
/// of at least `min_len` bytes when `min_len` is positive).
fn walk(a: &[u8], b: &[u8], t: &[u32], min_len: i64) -> (Vec<u8>, Vec<Range>) {
    let cols = b.len() + 1;
    let at = |i: usize, j: usize| t[i * cols + j];
    let total = at(a.len(), b.len()) as usize;
    let mut result = vec![0u8; total];
    let mut ranges = Vec::new();
    let mut idx = total;
    let (mut i, mut j) = (a.len(), b.len());
    // `a_start == a.len()` marks no range open, as `alen` does in Redis.
    let (mut a_start, mut a_end, mut b_start, mut b_end) = (a.len(), 0, 0, 0);
    while i > 0 && j > 0 {
        let mut emit = false;
        if a[i - 1] == b[j - 1] {
            result[idx - 1] = a[i - 1];
            if a_start == a.len() {
                (a_start, a_end, b_start, b_end) = (i - 1, i - 1, j - 1, j - 1);
            } else if a_start == i && b_start == j {
                a_start -= 1;
                b_start -= 1;
            } else {
                emit = true;
            }
            if a_start == 0 || b_start == 0 {
                emit = true;
            }
            idx -= 1;
            i -= 1;
            j -= 1;
        } else {
            if at(i - 1, j) > at(i, j - 1) {
                i -= 1;
            } else {
                j -= 1;
            }
            if a_start != a.len() {
                emit = true;
            }
        }
        // Computed as Redis's unsigned arithmetic does even with no range
        // open (then unused).
        let match_len = (a_end as u32).wrapping_sub(a_start as u32).wrapping_add(1);
        if emit {
            if min_len == 0 || i64::from(match_len) >= min_len {
                ranges.push((
                    (a_start as u32, a_end as u32),
                    (b_start as u32, b_end as u32),
                    match_len,
                ));
            }
            a_start = a.len();
        }
    }
    (result, ranges)
}

pub(super) fn lcs(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let (key_a, key_b) = (args.get(1), args.get(2));
    let kv = ctx.kv();
    let (a, b) = kv.read_all([key_a, key_b].into_iter(), || -> CmdResult<_> {
        Ok((kv.get(key_a)?, kv.get(key_b)?))
    })?;
    ctx.session.local.lookup(a.is_some());
    ctx.session.local.lookup(b.is_some());
    let (a, b) = (a.unwrap_or_default(), b.unwrap_or_default());
    let request = parse(args)?;
    if a.len() as u64 >= u64::from(u32::MAX - 1) || b.len() as u64 >= u64::from(u32::MAX - 1) {
        return Err(CmdError::err("String too long for LCS"));
    }
    let max_bytes = ctx
        .shared
        .live
        .max_bulk
        .load(std::sync::atomic::Ordering::Relaxed);
    let t = table(&a, &b, max_bytes)?;
    let total = i64::from(t[t.len() - 1]);
    if request.len_only {
        ctx.out.int(total);
        return Ok(());
    }
    let (result, ranges) = walk(&a, &b, &t, request.min_match_len);
    if !request.idx {
        ctx.out.bulk(&result);
        return Ok(());
    }
    ctx.out.map(2);
    ctx.out.bulk(b"matches");
    ctx.out.array(ranges.len());
    for ((a_start, a_end), (b_start, b_end), len) in ranges {
        ctx.out.array(2 + usize::from(request.with_match_len));
        ctx.out.array(2);
        ctx.out.int(i64::from(a_start));
        ctx.out.int(i64::from(a_end));
        ctx.out.array(2);
        ctx.out.int(i64::from(b_start));
        ctx.out.int(i64::from(b_end));
        if request.with_match_len {
            ctx.out.int(i64::from(len));
        }
    }
    ctx.out.bulk(b"len");
    ctx.out.int(total);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_example_of_redis_s_documentation() {
        let (a, b) = (b"ohmytext".as_slice(), b"mynewtext".as_slice());
        let t = table(a, b, 1 << 20).unwrap();
        assert_eq!(t[t.len() - 1], 6);
        let (result, ranges) = walk(a, b, &t, 0);
        assert_eq!(result, b"mytext");
        assert_eq!(ranges, [((4, 7), (5, 8), 4), ((2, 3), (0, 1), 2)]);
        assert_eq!(walk(a, b, &t, 4).1, [((4, 7), (5, 8), 4)]);
    }

    #[test]
    fn a_table_past_the_bulk_limit_is_refused() {
        assert!(table(&[b'a'; 100], &[b'b'; 100], 4 * 101 * 101 - 1).is_err());
        assert!(table(&[b'a'; 100], &[b'b'; 100], 4 * 101 * 101).is_ok());
    }
}
