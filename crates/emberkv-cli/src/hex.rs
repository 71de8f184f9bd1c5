//! Hex text for binary keys and values (`--hex`).

/// The lower-case hex digits of `bytes`, two per byte.
pub fn encode(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Decodes hex digits (either case, an even number of them) into bytes.
///
/// # Errors
/// A message naming the first character that is not a hex digit, or the
/// odd digit count.
pub fn decode(text: &str) -> Result<Vec<u8>, String> {
    let digits = text
        .chars()
        .map(|c| {
            c.to_digit(16)
                .ok_or_else(|| format!("{c:?} is not a hex digit"))
        })
        .collect::<Result<Vec<u32>, String>>()?;
    if digits.len() % 2 != 0 {
        return Err(format!("odd number of hex digits ({})", digits.len()));
    }
    Ok(digits
        .chunks_exact(2)
        .map(|pair| (pair[0] << 4 | pair[1]) as u8)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_byte() {
        let all: Vec<u8> = (0..=255).collect();
        let text = encode(&all);
        assert_eq!(&text[..8], "00010203");
        assert_eq!(&text[text.len() - 4..], "feff");
        assert_eq!(decode(&text).unwrap(), all);
        assert_eq!(decode(&text.to_uppercase()).unwrap(), all);
    }

    #[test]
    fn empty_is_empty() {
        assert_eq!(encode(b""), "");
        assert_eq!(decode("").unwrap(), b"");
    }

    #[test]
    fn rejects_bad_digits_and_odd_length() {
        assert_eq!(decode("0g").unwrap_err(), "'g' is not a hex digit");
        assert_eq!(decode("é0").unwrap_err(), "'é' is not a hex digit");
        assert_eq!(decode("abc").unwrap_err(), "odd number of hex digits (3)");
    }
}
