//! INCRBYFLOAT's numbers: a C `long double` as Redis on x86-64 Linux has
//! it, the x87 80-bit extended format (64-bit significand, 15-bit
//! exponent), so that INCRBYFLOAT parses, adds and prints exactly as
//! redis-server does there, last digit included.
//!
//! Redis 7.0 (`incrbyfloatCommand`, `util.c`) parses both numbers with
//! `strtold`, adds them in `long double`, refuses NaN and infinities, and
//! prints the sum with `"%.17Lf"` less trailing zeros (`ld2string`,
//! `LD_STR_HUMAN`): `5.6 + 1e3` is `1005.59999999999999998`, where a
//! 64-bit `double` would print `1005.6`. The arithmetic is IEEE 754's
//! (round to nearest, ties to even) on the x87 format, done by
//! `rustc_apfloat`, the Rust port of LLVM's APFloat; the decimal output is
//! exact, computed here. The unit tests' expected strings were taken from
//! redis-server 7.0.15 on x86-64 Linux. (On a platform whose `long double`
//! is the 128-bit format, such as aarch64 Linux, redis-server's digits
//! differ from these.)

use num_bigint::BigUint;
use rustc_apfloat::ieee::X87DoubleExtended;
use rustc_apfloat::{Float, Round, Status};

/// A finite or infinite x87 `long double` (never NaN).
#[derive(Clone, Copy, Debug)]
pub struct LongDouble(X87DoubleExtended);

/// Redis's `MAX_LONG_DOUBLE_CHARS`: `string2ld` refuses a string this long
/// or longer.
const MAX_CHARS: usize = 5 * 1024;

/// 10^17, the scale of `"%.17Lf"`.
const SCALE: u128 = 100_000_000_000_000_000;

impl LongDouble {
    /// Zero, the value of a missing key.
    pub const ZERO: LongDouble = LongDouble(X87DoubleExtended::ZERO);

    /// Parses `s` as Redis's `string2ld` does: `strtold`'s syntax (decimal,
    /// hexadecimal `0x1.8p3`, `inf`, `infinity`) consuming the whole
    /// string, no leading space, not NaN, and not out of range (a value
    /// that overflows, or a non-zero one that rounds to zero, is refused;
    /// a denormal is kept). `None` when Redis would reply "value is not a
    /// valid float". Costs at most a few microseconds for the longest
    /// accepted string (5,119 bytes).
    pub fn parse(s: &[u8]) -> Option<LongDouble> {
        if s.is_empty() || s.len() >= MAX_CHARS {
            return None;
        }
        let text = std::str::from_utf8(s).ok()?;
        let (negative, body) = match text.as_bytes()[0] {
            b'-' => (true, &text[1..]),
            b'+' => (false, &text[1..]),
            _ => (false, text),
        };
        if body.eq_ignore_ascii_case("inf") || body.eq_ignore_ascii_case("infinity") {
            let inf = X87DoubleExtended::INFINITY;
            return Some(LongDouble(if negative { -inf } else { inf }));
        }
        let normalized = normalize(body)?;
        let parsed = X87DoubleExtended::from_str_r(&normalized, Round::NearestTiesToEven).ok()?;
        let mut value = parsed.value;
        // strtold's ERANGE cases that string2ld refuses: overflow to an
        // infinity, and a non-zero value that underflows to zero. The
        // status says which (a zero written as zero is exact).
        let status = parsed.status;
        if value.is_infinite()
            || status.intersects(Status::OVERFLOW)
            || (value.is_zero() && status.intersects(Status::INEXACT))
        {
            return None;
        }
        if negative {
            value = -value;
        }
        Some(LongDouble(value))
    }

    /// `self + other` rounded to the x87 format, or `None` when the sum
    /// is NaN or infinite (Redis: "increment would produce NaN or
    /// Infinity").
    pub fn checked_add(self, other: LongDouble) -> Option<LongDouble> {
        let sum = self.0.add_r(other.0, Round::NearestTiesToEven).value;
        (sum.is_finite()).then_some(LongDouble(sum))
    }

    /// The value as `"%.17Lf"` prints it (exactly rounded to 17 decimals,
    /// ties to even, as glibc does), less trailing zeros and a trailing
    /// point, and `-0` as `0`: Redis's `ld2string` with `LD_STR_HUMAN`.
    /// At most 4,933 integer digits (the format's largest value is about
    /// 1.19e4932).
    pub fn to_human_string(self) -> String {
        let bits = self.0.to_bits();
        let negative = (bits >> 79) & 1 == 1;
        let biased = ((bits >> 64) & 0x7FFF) as i32;
        // The x87 significand keeps its integer bit (bit 63) explicitly;
        // a denormal has biased exponent 0 and the exponent of 1.
        let significand = bits as u64;
        let exponent = biased.max(1) - 16383 - 63;
        let mut digits = if exponent >= 0 {
            (BigUint::from(significand) << exponent as u32).to_string()
        } else {
            let scaled = u128::from(significand) * SCALE;
            let shift = exponent.unsigned_abs();
            // significand * 10^17 < 2^121: shifted by 122 or more bits it
            // is below half a unit, so it rounds to 0.
            let rounded = if shift >= 122 {
                0
            } else {
                let quotient = scaled >> shift;
                let remainder = scaled & ((1u128 << shift) - 1);
                let half = 1u128 << (shift - 1);
                let up = remainder > half || (remainder == half && quotient & 1 == 1);
                quotient + u128::from(up)
            };
            let mut text = format!("{}.{:017}", rounded / SCALE, rounded % SCALE);
            text.truncate(text.trim_end_matches('0').trim_end_matches('.').len());
            text
        };
        if negative && digits != "0" {
            digits.insert(0, '-');
        }
        digits
    }
}

/// Checks `body` (a number without its sign) against `strtold`'s grammar
/// for a string it must consume whole, and returns it in the form
/// APFloat's parser takes: a hexadecimal number gets the binary exponent
/// `strtold` lets it omit. `None` for anything else (NaN included).
fn normalize(body: &str) -> Option<String> {
    let bytes = body.as_bytes();
    let hex = bytes.len() > 2 && bytes[0] == b'0' && (bytes[1] | 0x20) == b'x';
    let (digits, exponent_mark, is_digit): (&[u8], u8, fn(&u8) -> bool) = if hex {
        (&bytes[2..], b'p', u8::is_ascii_hexdigit)
    } else {
        (bytes, b'e', u8::is_ascii_digit)
    };
    let mark = digits.iter().position(|b| b | 0x20 == exponent_mark);
    let (mantissa, exponent) = match mark {
        Some(at) => (&digits[..at], Some(&digits[at + 1..])),
        None => (digits, None),
    };
    let (whole, fraction) = match mantissa.iter().position(|&b| b == b'.') {
        Some(at) => (&mantissa[..at], &mantissa[at + 1..]),
        None => (mantissa, &[][..]),
    };
    let mantissa_ok = (!whole.is_empty() || !fraction.is_empty())
        && whole.iter().all(is_digit)
        && fraction.iter().all(is_digit);
    let exponent_ok = exponent.is_none_or(|e| {
        let e = e
            .strip_prefix(b"+")
            .or_else(|| e.strip_prefix(b"-"))
            .unwrap_or(e);
        !e.is_empty() && e.iter().all(u8::is_ascii_digit)
    });
    if !mantissa_ok || !exponent_ok {
        return None;
    }
    let mut out = body.to_string();
    if hex && exponent.is_none() {
        out.push_str("p0");
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// INCRBYFLOAT as the command computes it: `None` for "not a valid
    /// float", `Some(None)` for "would produce NaN or Infinity".
    fn incr(old: Option<&str>, by: &str) -> Option<Option<String>> {
        let old = match old {
            None => LongDouble::ZERO,
            Some(s) => LongDouble::parse(s.as_bytes())?,
        };
        let by = LongDouble::parse(by.as_bytes())?;
        Some(old.checked_add(by).map(LongDouble::to_human_string))
    }

    #[test]
    fn sums_print_as_redis_server_prints_them() {
        // (value before, increment, reply), each from redis-server 7.0.15
        // on x86-64 Linux.
        for (old, by, want) in [
            (None, "0.1", "0.1"),
            (Some("10.5"), "0.1", "10.6"),
            (Some("5.6"), "1e3", "1005.59999999999999998"),
            (Some("1"), "0.3", "1.3"),
            (Some("5.0e3"), "200", "5200"),
            (Some("100"), "0.1", "100.1"),
            (None, "-0", "0"),
            (Some("-0"), "-0", "0"),
            (None, "0.000003814697265625", "0.00000381469726562"),
            (None, "0.000003814697265635", "0.00000381469726563"),
            (None, "1e-20", "0"),
            (None, "-1e-20", "0"),
            (
                None,
                "123456789012345678901234567890",
                "123456789012345678899921813504",
            ),
            (None, "3.6e-4951", "0"),
            (None, "0x1p-3", "0.125"),
            (None, "0x1.8p3", "12"),
            (None, "0X1P3", "8"),
            (None, "0x10", "16"),
            (None, ".5", "0.5"),
            (None, "5.", "5"),
            (None, "+.5e-3", "0.0005"),
            (None, "00012.50", "12.5"),
            (None, "0.1e1", "1"),
            (None, "1E2", "100"),
            (None, "-1.5", "-1.5"),
            (None, "9007199254740993", "9007199254740993"),
            (None, "18446744073709551617", "18446744073709551616"),
            (Some("0.1"), "0.2", "0.3"),
            (Some("1024"), "1e-17", "1024"),
            (Some("1"), "1e-17", "1.00000000000000001"),
            (Some("1"), "5e-18", "1"),
            (Some("1"), "1.5e-17", "1.00000000000000001"),
            (Some("99999999999999999"), "1", "100000000000000000"),
            (Some("-5"), "5", "0"),
            (Some("-5.5"), "2", "-3.5"),
            (Some("12345.6789"), "-0.0001", "12345.67879999999999985"),
            (
                Some("3.14159265358979323846264338327950288"),
                "0",
                "3.14159265358979324",
            ),
            (Some("1e-17"), "0", "0.00000000000000001"),
            (Some("5e-18"), "0", "0"),
            (Some("1.5e-17"), "0", "0.00000000000000002"),
            (Some("2.5e-17"), "0", "0.00000000000000002"),
            (Some("-5e-18"), "0", "0"),
            (Some("1e19"), "1", "10000000000000000001"),
            (Some("1e20"), "1", "100000000000000000000"),
            (Some("0.1"), "-0.1", "0"),
        ] {
            assert_eq!(
                incr(old, by),
                Some(Some(want.to_string())),
                "{old:?} + {by}"
            );
        }
    }

    #[test]
    fn huge_sums_print_every_integer_digit() {
        let sum = incr(Some("1e308"), "1e308").unwrap().unwrap();
        assert_eq!(
            sum,
            "199999999999999999993371759311691291321120199694831134415594095989843469737676\
             123744200253843777078640893494450108026446304269499187921167194841628860392837\
             535918200039206381557326219209014213335878306791577877829121087126122536729803\
             237260434173178506889763247582601711514636284849020905456510092687857156096"
        );
        let max = incr(Some("1.18973149535723176502e4932"), "0")
            .unwrap()
            .unwrap();
        assert_eq!(max.len(), 4933);
        assert!(max.starts_with(
            "1189731495357231765021263853030970205169063322294624200440323733891737005522970722616410290336528882"
        ));
        assert!(max.ends_with(
            "8837777258648564145934262121086647588489260031762345960769508849149662444156604419552086811989770240"
        ));
    }

    #[test]
    fn what_redis_refuses_is_refused() {
        // "value is not a valid float"
        for bad in [
            "1e4933", "1e-4951", "1e-5000", "0x", "0x1p", "nan", "-nan", "NaN", "1e", "1e+", ".",
            "+", "-", " 1", "1 ", "1\t", "1_0", "1,5", "", "abc", "0x.p1", "1..2", "1e1.5", "--1",
            "+-1", "infinit", "0xg",
        ] {
            assert!(incr(None, bad).is_none(), "{bad:?} should be refused");
        }
        assert!(LongDouble::parse(&[b'0'; MAX_CHARS]).is_none());
        assert!(LongDouble::parse(&[b'0'; MAX_CHARS - 1]).is_some());
        // "increment would produce NaN or Infinity"
        for (old, by) in [
            (None, "inf"),
            (None, "-Infinity"),
            (Some("INF"), "1"),
            (Some("inf"), "-inf"),
            (Some("1.18973149535723176502e4932"), "1e4932"),
        ] {
            assert_eq!(incr(old, by), Some(None), "{old:?} + {by}");
        }
    }
}
