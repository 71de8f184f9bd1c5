//! Integer parsing with Redis's exact rules.
//!
//! Redis parses integers with `string2ll`: an optional `-`, then digits
//! with no leading zero (`0` alone is fine), no `+`, no spaces, and the
//! value must fit in a signed 64-bit integer. Floats (INCRBYFLOAT's) are
//! in `long_double.rs`.

/// Parses `s` as Redis's `string2ll` does; `None` when it is not a
/// canonical signed 64-bit integer.
pub fn parse_i64(s: &[u8]) -> Option<i64> {
    let (negative, digits) = match s {
        [] => return None,
        [b'0'] => return Some(0),
        [b'-', rest @ ..] => (true, rest),
        _ => (false, s),
    };
    match digits.first() {
        Some(b'1'..=b'9') => {}
        _ => return None,
    }
    if digits.len() > 19 {
        return None;
    }
    // Accumulate as a negative number so that i64::MIN fits.
    let mut value: i64 = 0;
    for &b in digits {
        if !b.is_ascii_digit() {
            return None;
        }
        value = value.checked_mul(10)?.checked_sub(i64::from(b - b'0'))?;
    }
    if negative {
        Some(value)
    } else {
        value.checked_neg()
    }
}

/// Parses an unsigned 64-bit integer made of digits only (the digits of a
/// SCAN cursor, see [`parse_cursor`]).
pub fn parse_u64(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 20 || !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(s).ok()?.parse().ok()
}

/// Parses a SCAN cursor as Redis 7.0 does (`strtoul`, base 10, no leading
/// space, the whole argument): digits with an optional sign, where `-n`
/// wraps to 2^64 - n as C's conversion does and the empty string is 0;
/// `None` past u64::MAX or for anything else.
pub fn parse_cursor(s: &[u8]) -> Option<u64> {
    let (negative, digits) = match s {
        [] => return Some(0),
        [b'-', rest @ ..] => (true, rest),
        [b'+', rest @ ..] => (false, rest),
        _ => (false, s),
    };
    // Leading zeros may make a valid number longer than u64::MAX's 20
    // digits.
    let digits = match digits.iter().position(|&b| b != b'0') {
        Some(first) => &digits[first..],
        None if digits.is_empty() => return None,
        None => &digits[digits.len() - 1..],
    };
    let n = parse_u64(digits)?;
    Some(if negative { n.wrapping_neg() } else { n })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_follow_string2ll() {
        for (s, v) in [
            ("0", Some(0)),
            ("1", Some(1)),
            ("-1", Some(-1)),
            ("9223372036854775807", Some(i64::MAX)),
            ("-9223372036854775808", Some(i64::MIN)),
            ("9223372036854775808", None),
            ("-9223372036854775809", None),
            ("", None),
            ("-", None),
            ("-0", None),
            ("01", None),
            ("+1", None),
            (" 1", None),
            ("1 ", None),
            ("1a", None),
            ("12345678901234567890", None),
        ] {
            assert_eq!(parse_i64(s.as_bytes()), v, "{s:?}");
        }
    }

    #[test]
    fn scan_cursors_follow_strtoul() {
        for (s, v) in [
            ("0", Some(0)),
            ("", Some(0)),
            ("+5", Some(5)),
            ("-0", Some(0)),
            ("-1", Some(u64::MAX)),
            ("007", Some(7)),
            ("00000000000000000000000000001", Some(1)),
            ("18446744073709551615", Some(u64::MAX)),
            ("-18446744073709551615", Some(1)),
            ("18446744073709551616", None),
            ("-", None),
            ("+", None),
            (" 1", None),
            ("1 ", None),
            ("0x10", None),
        ] {
            assert_eq!(parse_cursor(s.as_bytes()), v, "{s:?}");
        }
    }

    #[test]
    fn cursors_are_unsigned_digits() {
        assert_eq!(parse_u64(b"0"), Some(0));
        assert_eq!(parse_u64(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_u64(b"18446744073709551616"), None);
        assert_eq!(parse_u64(b"-1"), None);
        assert_eq!(parse_u64(b""), None);
        assert_eq!(parse_u64(b"1x"), None);
    }
}
