//! The JSON Lines format of `export` and `import`.
//!
//! One object per line: `{"key": K, "value": V, "expires_at_ms": N}`, where
//! `K` and `V` are JSON strings when the bytes are valid UTF-8 and
//! `{"base64": "..."}` (standard alphabet, padded) otherwise, and
//! `expires_at_ms` (Unix time in milliseconds) is present only for a key
//! with an expiry.

use anyhow::{Context, Result, bail};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::Serialize;
use serde_json::{Map, Value};

/// One record of an export: a key, its value and its expiry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// The key's bytes.
    pub key: Vec<u8>,
    /// The value's bytes.
    pub value: Vec<u8>,
    /// When the key expires, in Unix ms; `None` for no expiry.
    pub expires_at_ms: Option<u64>,
}

/// The serialised form of a [`Record`], fields in the documented order.
#[derive(Serialize)]
struct Line<'a> {
    key: Bytes<'a>,
    value: Bytes<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    expires_at_ms: Option<u64>,
}

/// Bytes as JSON: a string when they are UTF-8, else a base64 object.
#[derive(Serialize)]
#[serde(untagged)]
enum Bytes<'a> {
    /// Valid UTF-8, written as a JSON string.
    Text(&'a str),
    /// Anything else, written as `{"base64": "..."}`.
    Base64 {
        /// The standard, padded base64 of the bytes.
        base64: String,
    },
}

impl<'a> Bytes<'a> {
    fn of(bytes: &'a [u8]) -> Bytes<'a> {
        match std::str::from_utf8(bytes) {
            Ok(text) => Bytes::Text(text),
            Err(_) => Bytes::Base64 {
                base64: STANDARD.encode(bytes),
            },
        }
    }
}

impl Record {
    /// The record as one line of JSON, without the newline.
    ///
    /// # Errors
    /// Only what `serde_json` reports; a record always serialises.
    pub fn to_line(&self) -> serde_json::Result<String> {
        serde_json::to_string(&Line {
            key: Bytes::of(&self.key),
            value: Bytes::of(&self.value),
            expires_at_ms: self.expires_at_ms,
        })
    }

    /// Parses one line of the format.
    ///
    /// # Errors
    /// A message saying what is wrong: invalid JSON (with its column), not
    /// an object, a missing, unknown or mistyped field, or bad base64.
    pub fn parse(line: &str) -> Result<Record> {
        let mut object = match serde_json::from_str::<Fields>(line) {
            Ok(Fields(object)) => object,
            Err(e) if e.is_data() && message(&e).ends_with(TWICE) => bail!("{}", message(&e)),
            Err(e) if e.is_data() => bail!("expected a JSON object"),
            Err(e) => bail!("invalid JSON at column {}: {}", e.column(), message(&e)),
        };
        let key = bytes_field(&mut object, "key")?;
        let value = bytes_field(&mut object, "value")?;
        let expires_at_ms = match object.remove("expires_at_ms") {
            None => None,
            Some(n) => Some(n.as_u64().with_context(|| {
                format!("\"expires_at_ms\" must be a non-negative integer, not {n}")
            })?),
        };
        if let Some(unknown) = object.keys().next() {
            bail!("unknown field {unknown:?}");
        }
        Ok(Record {
            key,
            value,
            expires_at_ms,
        })
    }
}

/// The end of [`Fields`]' error for a repeated field.
const TWICE: &str = "appears twice";

/// A JSON object whose fields are all distinct: a repeated one (`{"key":
/// "a", "key": "c"}`) is an error, where a plain map would keep the last.
struct Fields(Map<String, Value>);

impl<'de> serde::Deserialize<'de> for Fields {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Fields;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> std::result::Result<Fields, A::Error> {
                let mut fields = Map::new();
                while let Some((name, value)) = map.next_entry::<String, Value>()? {
                    if fields.contains_key(&name) {
                        return Err(serde::de::Error::custom(format!("field {name:?} {TWICE}")));
                    }
                    fields.insert(name, value);
                }
                Ok(Fields(fields))
            }
        }
        d.deserialize_map(Visitor)
    }
}

/// Removes field `name` from `object` and decodes it as bytes.
fn bytes_field(object: &mut Map<String, Value>, name: &str) -> Result<Vec<u8>> {
    match object.remove(name) {
        None => bail!("missing field {name:?}"),
        Some(Value::String(text)) => Ok(text.into_bytes()),
        Some(Value::Object(mut inner)) => {
            let encoded = match inner.remove("base64") {
                Some(Value::String(encoded)) if inner.is_empty() => encoded,
                _ => bail!("field {name:?} must be a string or {{\"base64\": \"...\"}}"),
            };
            STANDARD
                .decode(encoded)
                .with_context(|| format!("field {name:?} holds invalid base64"))
        }
        Some(_) => bail!("field {name:?} must be a string or {{\"base64\": \"...\"}}"),
    }
}

/// `serde_json`'s message without its " at line L column C" suffix (the
/// caller reports the position in the file).
fn message(e: &serde_json::Error) -> String {
    let full = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    full.strip_suffix(&suffix).unwrap_or(&full).to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(key: &[u8], value: &[u8], expires_at_ms: Option<u64>) -> Record {
        Record {
            key: key.to_vec(),
            value: value.to_vec(),
            expires_at_ms,
        }
    }

    #[test]
    fn writes_text_as_strings_and_binary_as_base64() {
        let text = record(b"user:1", b"Ada \"A\"\n", None);
        assert_eq!(
            text.to_line().unwrap(),
            r#"{"key":"user:1","value":"Ada \"A\"\n"}"#
        );
        let binary = record(b"\xff\x00", b"", Some(1_700_000_000_123));
        assert_eq!(
            binary.to_line().unwrap(),
            r#"{"key":{"base64":"/wA="},"value":"","expires_at_ms":1700000000123}"#
        );
    }

    #[test]
    fn parse_inverts_to_line() {
        for r in [
            record(b"", b"", None),
            record("ключ\r\n\0".as_bytes(), b"\x80\x81", Some(0)),
            record(b"\xc3\x28", b"v", Some(u64::MAX)),
        ] {
            assert_eq!(Record::parse(&r.to_line().unwrap()).unwrap(), r);
        }
    }

    #[test]
    fn parse_accepts_base64_for_text_and_any_field_order() {
        let r = Record::parse(r#"{"value":{"base64":"aGk="},"key":"k"}"#).unwrap();
        assert_eq!(r, record(b"k", b"hi", None));
    }

    #[test]
    fn parse_names_what_is_wrong() {
        let err = |line: &str| format!("{:#}", Record::parse(line).unwrap_err());
        assert_eq!(
            err(r#"{"key":"k","#),
            "invalid JSON at column 11: EOF while parsing a value"
        );
        assert_eq!(err("[1]"), "expected a JSON object");
        assert_eq!(err("\"text\""), "expected a JSON object");
        assert_eq!(
            err(r#"{"key":"a","value":"b","key":"c"}"#),
            "field \"key\" appears twice"
        );
        assert_eq!(err(r#"{"key":"k"}"#), "missing field \"value\"");
        assert_eq!(
            err(r#"{"key":"k","value":"v","ttl":1}"#),
            "unknown field \"ttl\""
        );
        assert_eq!(
            err(r#"{"key":"k","value":"v","expires_at_ms":-1}"#),
            "\"expires_at_ms\" must be a non-negative integer, not -1"
        );
        assert_eq!(
            err(r#"{"key":7,"value":"v"}"#),
            "field \"key\" must be a string or {\"base64\": \"...\"}"
        );
        assert_eq!(
            err(r#"{"key":{"base64":"aGk=","x":1},"value":"v"}"#),
            "field \"key\" must be a string or {\"base64\": \"...\"}"
        );
        assert!(
            err(r#"{"key":{"base64":"!!"},"value":"v"}"#)
                .starts_with("field \"key\" holds invalid base64: ")
        );
    }
}
