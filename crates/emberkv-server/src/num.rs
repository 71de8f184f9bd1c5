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

/// Parses an unsigned 64-bit integer made of digits only (a SCAN cursor).
pub fn parse_u64(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 20 || !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(s).ok()?.parse().ok()
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
    fn cursors_are_unsigned_digits() {
        assert_eq!(parse_u64(b"0"), Some(0));
        assert_eq!(parse_u64(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_u64(b"18446744073709551616"), None);
        assert_eq!(parse_u64(b"-1"), None);
        assert_eq!(parse_u64(b""), None);
        assert_eq!(parse_u64(b"1x"), None);
    }
}
