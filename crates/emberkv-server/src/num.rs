//! Number parsing and formatting with Redis's exact rules.
//!
//! Redis parses integers with `string2ll`: an optional `-`, then digits
//! with no leading zero (`0` alone is fine), no `+`, no spaces, and the
//! value must fit in a signed 64-bit integer. Floats follow `strtold` as
//! Redis uses it: no leading space, the whole argument consumed, not NaN.

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

/// Parses a float as Redis's `getLongDoubleFromObject` does: no leading
/// space, nothing after the number, not NaN. Infinities are accepted (an
/// increment that produces one is refused later).
pub fn parse_f64(s: &[u8]) -> Option<f64> {
    if s.is_empty() || s.len() > 5 * 1024 || s[0].is_ascii_whitespace() {
        return None;
    }
    let v: f64 = std::str::from_utf8(s).ok()?.parse().ok()?;
    (!v.is_nan()).then_some(v)
}

/// Formats a float the way Redis's INCRBYFLOAT reply reads: the shortest
/// decimal that round-trips, with no exponent and no trailing zeros
/// (`10.5`, `3`, `-0.25`).
pub fn format_f64(v: f64) -> String {
    if v == 0.0 {
        return "0".to_string();
    }
    format!("{v}")
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

    #[test]
    fn floats_follow_strtold_as_redis_uses_it() {
        assert_eq!(parse_f64(b"1.5"), Some(1.5));
        assert_eq!(parse_f64(b"-3"), Some(-3.0));
        assert_eq!(parse_f64(b"5.0e3"), Some(5000.0));
        assert_eq!(parse_f64(b"inf"), Some(f64::INFINITY));
        assert_eq!(parse_f64(b"nan"), None);
        assert_eq!(parse_f64(b" 1"), None);
        assert_eq!(parse_f64(b"1 "), None);
        assert_eq!(parse_f64(b"abc"), None);
        assert_eq!(parse_f64(b""), None);
    }

    #[test]
    fn floats_format_without_exponent_or_trailing_zeros() {
        assert_eq!(format_f64(10.5 + 0.1), "10.6");
        assert_eq!(format_f64(5000.0), "5000");
        assert_eq!(format_f64(-0.0), "0");
        assert_eq!(format_f64(3.0e20), "300000000000000000000");
    }
}
