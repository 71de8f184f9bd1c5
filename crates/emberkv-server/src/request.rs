//! Request framing: the client-to-server half of RESP, as Redis reads it.
//!
//! A request is a multibulk (`*<n>\r\n` then `n` bulk strings, what every
//! client library sends) or, when the first byte is not `*`, an inline
//! command: one line of space-separated words with Redis's quoting rules
//! (what a person types into `nc`). The parser answers one of three things
//! for the bytes buffered so far: a whole command ([`Parsed::Command`]),
//! "read more" ([`Parsed::Incomplete`]), or a [`ProtocolError`] with the
//! exact string Redis replies before it closes the connection.
//!
//! A multibulk is parsed incrementally: the parser keeps the arguments
//! found so far and where it stopped, so a command of a million arguments
//! arriving in a thousand reads is scanned once, not a thousand times.
//! Arguments are returned as ranges into the caller's buffer: nothing is
//! copied.
//!
//! Caps: a bulk length above `max_bulk` (Redis's `proto-max-bulk-len`,
//! 512 MB by default) is an error as soon as its header arrives; a count or
//! length line, or an inline command, longer than 64 KiB without a newline
//! is an error. The query-buffer cap (1 GB) is the connection's to enforce.
//! Stricter than Redis: the two bytes after a bulk, and after a CR in a
//! header, must be CRLF (Redis skips them unchecked).

use std::fmt;
use std::ops::Range;

use crate::parse::Args;

/// Longest inline command, or count or length line, without a newline
/// (Redis's `PROTO_INLINE_MAX_SIZE`).
pub const INLINE_MAX: usize = 64 * 1024;

/// A request that is not RESP; the connection replies
/// `-ERR Protocol error: ...` and closes, as Redis does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProtocolError {
    /// The multibulk count is not an integer or is above 2^31 - 1.
    InvalidMultibulkLength,
    /// A bulk length is not an integer, is negative, or is above the cap.
    InvalidBulkLength,
    /// A multibulk element does not start with `$`.
    ExpectedDollar(u8),
    /// No newline within 64 KiB of a multibulk count.
    TooBigMbulkCount,
    /// No newline within 64 KiB of a bulk length.
    TooBigBulkCount,
    /// No newline within 64 KiB of an inline command.
    TooBigInline,
    /// An inline command with an unclosed quote, or a closing quote not
    /// followed by a space.
    UnbalancedQuotes,
    /// A bulk or header line not terminated by CRLF.
    ExpectedCrlf,
    /// A multibulk of more than 10 arguments from a client not yet
    /// authenticated (Redis 7 refuses it, so that a client without the
    /// password cannot make the server hold a large request).
    UnauthenticatedMultibulkLength,
    /// A bulk of more than 16 KiB from a client not yet authenticated.
    UnauthenticatedBulkLength,
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Protocol error: ")?;
        match self {
            ProtocolError::InvalidMultibulkLength => f.write_str("invalid multibulk length"),
            ProtocolError::InvalidBulkLength => f.write_str("invalid bulk length"),
            ProtocolError::ExpectedDollar(b) => {
                write!(f, "expected '$', got '{}'", char::from(*b).escape_default())
            }
            ProtocolError::TooBigMbulkCount => f.write_str("too big mbulk count string"),
            ProtocolError::TooBigBulkCount => f.write_str("too big bulk count string"),
            ProtocolError::TooBigInline => f.write_str("too big inline request"),
            ProtocolError::UnbalancedQuotes => f.write_str("unbalanced quotes in request"),
            ProtocolError::ExpectedCrlf => f.write_str("expected CRLF"),
            ProtocolError::UnauthenticatedMultibulkLength => {
                f.write_str("unauthenticated multibulk length")
            }
            ProtocolError::UnauthenticatedBulkLength => f.write_str("unauthenticated bulk length"),
        }
    }
}

impl std::error::Error for ProtocolError {}

/// What the buffered bytes hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Parsed {
    /// A whole command of `consumed` bytes: read it with
    /// [`RequestParser::args`], then drop those bytes.
    Command {
        /// Bytes the command takes at the start of the buffer.
        consumed: usize,
    },
    /// An empty command (`*0`, `*-1`, a blank line): drop `consumed` bytes.
    Empty {
        /// Bytes to drop.
        consumed: usize,
    },
    /// Read more. `need` is a lower bound on the buffer length at which the
    /// parser can make progress (at least one more byte).
    Incomplete {
        /// Bytes the buffer must hold for progress.
        need: usize,
    },
}

/// Most arguments a multibulk from a client not yet authenticated may
/// announce (10, as Redis 7; `networking.c`).
pub const UNAUTHENTICATED_ARGS: i64 = 10;

/// Largest bulk a client not yet authenticated may send: 16 KiB, as
/// Redis 7.
pub const UNAUTHENTICATED_BULK: usize = 16 << 10;

/// An incremental request parser; one per connection.
#[derive(Debug)]
pub struct RequestParser {
    max_bulk: usize,
    /// Whether the client is authenticated: until it is, a multibulk
    /// holds at most [`UNAUTHENTICATED_ARGS`] arguments of at most
    /// [`UNAUTHENTICATED_BULK`] bytes.
    authenticated: bool,
    /// Arguments of the command being parsed: ranges into the buffer, or
    /// into `inline` for an inline command.
    ranges: Vec<Range<usize>>,
    /// The unquoted arguments of an inline command, concatenated.
    inline: Vec<u8>,
    is_inline: bool,
    /// Arguments the multibulk being parsed announced; 0 between commands.
    argc: usize,
    /// Where parsing resumes in the buffer.
    pos: usize,
}

impl RequestParser {
    /// A parser refusing bulks above `max_bulk` bytes.
    pub fn new(max_bulk: usize) -> Self {
        RequestParser {
            max_bulk,
            authenticated: true,
            ranges: Vec::new(),
            inline: Vec::new(),
            is_inline: false,
            argc: 0,
            pos: 0,
        }
    }

    /// Parses what `buf` holds, resuming where the last call stopped. The
    /// caller must pass the same buffer (grown, never shrunk at the front)
    /// until a command or empty command is returned, and then drop its
    /// `consumed` bytes before the next call.
    ///
    /// # Errors
    /// A [`ProtocolError`]; the connection should reply it and close.
    pub fn parse(&mut self, buf: &[u8]) -> Result<Parsed, ProtocolError> {
        if self.argc == 0 {
            self.ranges.clear();
            self.is_inline = false;
            match buf.first() {
                None => return Ok(Parsed::Incomplete { need: 1 }),
                Some(b'*') => {}
                Some(_) => return self.parse_inline(buf),
            }
            let Some((count, next)) = line_number(buf, 0, ProtocolError::TooBigMbulkCount)? else {
                return Ok(Parsed::Incomplete {
                    need: buf.len() + 1,
                });
            };
            let count = count.ok_or(ProtocolError::InvalidMultibulkLength)?;
            if count > i64::from(i32::MAX) {
                return Err(ProtocolError::InvalidMultibulkLength);
            }
            if count > UNAUTHENTICATED_ARGS && !self.authenticated {
                return Err(ProtocolError::UnauthenticatedMultibulkLength);
            }
            if count <= 0 {
                return Ok(Parsed::Empty { consumed: next });
            }
            self.argc = count as usize;
            self.pos = next;
            self.ranges.reserve(self.argc.min(1024));
        }
        while self.ranges.len() < self.argc {
            let p = self.pos;
            match buf.get(p) {
                None => return Ok(Parsed::Incomplete { need: p + 1 }),
                Some(b'$') => {}
                Some(&other) => return Err(ProtocolError::ExpectedDollar(other)),
            }
            let Some((len, start)) = line_number(buf, p, ProtocolError::TooBigBulkCount)? else {
                return Ok(Parsed::Incomplete {
                    need: buf.len() + 1,
                });
            };
            let len = len
                .filter(|&n| n >= 0 && n as u64 <= self.max_bulk as u64)
                .ok_or(ProtocolError::InvalidBulkLength)? as usize;
            if len > UNAUTHENTICATED_BULK && !self.authenticated {
                return Err(ProtocolError::UnauthenticatedBulkLength);
            }
            let end = start + len;
            if buf.len() < end + 2 {
                return Ok(Parsed::Incomplete { need: end + 2 });
            }
            if &buf[end..end + 2] != b"\r\n" {
                return Err(ProtocolError::ExpectedCrlf);
            }
            self.ranges.push(start..end);
            self.pos = end + 2;
        }
        let consumed = self.pos;
        self.argc = 0;
        self.pos = 0;
        Ok(Parsed::Command { consumed })
    }

    fn parse_inline(&mut self, buf: &[u8]) -> Result<Parsed, ProtocolError> {
        let Some(nl) = memchr::memchr(b'\n', buf) else {
            if buf.len() > INLINE_MAX {
                return Err(ProtocolError::TooBigInline);
            }
            return Ok(Parsed::Incomplete {
                need: buf.len() + 1,
            });
        };
        let line = buf[..nl].strip_suffix(b"\r").unwrap_or(&buf[..nl]);
        let words = split_args(line).ok_or(ProtocolError::UnbalancedQuotes)?;
        if words.is_empty() {
            return Ok(Parsed::Empty { consumed: nl + 1 });
        }
        self.inline.clear();
        for word in words {
            let start = self.inline.len();
            self.inline.extend_from_slice(&word);
            self.ranges.push(start..self.inline.len());
        }
        self.is_inline = true;
        Ok(Parsed::Command { consumed: nl + 1 })
    }

    /// The arguments of the command just returned, `buf` being the buffer
    /// passed to [`RequestParser::parse`].
    pub fn args<'a>(&'a self, buf: &'a [u8]) -> Args<'a> {
        let base = if self.is_inline { &self.inline } else { buf };
        Args::new(base, &self.ranges)
    }

    /// Changes the bulk cap (a `CONFIG SET proto-max-bulk-len`).
    pub fn set_max_bulk(&mut self, max_bulk: usize) {
        self.max_bulk = max_bulk;
    }

    /// Sets whether the client is authenticated (a new parser takes it
    /// for authenticated): until it is, longer multibulks and bulks are
    /// [`ProtocolError::UnauthenticatedMultibulkLength`] and
    /// [`ProtocolError::UnauthenticatedBulkLength`].
    pub fn set_authenticated(&mut self, authenticated: bool) {
        self.authenticated = authenticated;
    }
}

/// Reads the integer line after the type byte at `at`: `Ok(None)` when the
/// line is not complete yet, else the number (`None` if not an integer)
/// and the position after its CRLF.
#[allow(clippy::type_complexity)]
fn line_number(
    buf: &[u8],
    at: usize,
    too_long: ProtocolError,
) -> Result<Option<(Option<i64>, usize)>, ProtocolError> {
    let rest = &buf[at + 1..];
    match memchr::memchr(b'\r', rest) {
        Some(i) if at + 1 + i + 1 < buf.len() => {
            if buf[at + 1 + i + 1] != b'\n' {
                return Err(ProtocolError::ExpectedCrlf);
            }
            Ok(Some((crate::num::parse_i64(&rest[..i]), at + i + 3)))
        }
        _ if buf.len() - at > INLINE_MAX => Err(too_long),
        _ => Ok(None),
    }
}

/// The bytes of `b` before its first NUL: what C reads of it as a string
/// (Redis splits and formats C strings).
pub fn c_str(b: &[u8]) -> &[u8] {
    &b[..memchr::memchr(0, b).unwrap_or(b.len())]
}

/// C's `isspace` in the "C" locale, which `sdssplitargs` separates words
/// and checks closing quotes with: Rust's `is_ascii_whitespace` leaves out
/// the vertical tab (0x0B), so `echo \x0Bhello` echoed the tab and
/// `echo "a"\x0B` was refused as unbalanced quotes (Redis: `hello`, `a`).
fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// Splits a line into words as Redis's `sdssplitargs` does: words are
/// separated by whitespace; `"..."` understands `\n \r \t \b \a \\ \"` and
/// `\xHH`; `'...'` understands `\'`; a closing quote must be followed by
/// whitespace or the end. `None` for unbalanced quotes. Used for inline
/// commands and config files.
pub fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    // Redis splits a C string: a NUL byte ends the line.
    let line = c_str(line);
    let mut words = Vec::new();
    let mut i = 0;
    let n = line.len();
    let hex = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    loop {
        while i < n && is_c_space(line[i]) {
            i += 1;
        }
        if i == n {
            return Some(words);
        }
        let mut word = Vec::new();
        let (mut in_dq, mut in_sq) = (false, false);
        loop {
            if in_dq {
                if i == n {
                    return None;
                }
                match line[i] {
                    b'\\'
                        if i + 3 < n
                            && line[i + 1] == b'x'
                            && hex(line[i + 2]).is_some()
                            && hex(line[i + 3]).is_some() =>
                    {
                        word.push(hex(line[i + 2])? * 16 + hex(line[i + 3])?);
                        i += 3;
                    }
                    b'\\' if i + 1 < n => {
                        i += 1;
                        word.push(match line[i] {
                            b'n' => b'\n',
                            b'r' => b'\r',
                            b't' => b'\t',
                            b'b' => 0x08,
                            b'a' => 0x07,
                            other => other,
                        });
                    }
                    b'"' => {
                        if i + 1 < n && !is_c_space(line[i + 1]) {
                            return None;
                        }
                        i += 1;
                        break;
                    }
                    other => word.push(other),
                }
            } else if in_sq {
                if i == n {
                    return None;
                }
                match line[i] {
                    b'\\' if i + 1 < n && line[i + 1] == b'\'' => {
                        i += 1;
                        word.push(b'\'');
                    }
                    b'\'' => {
                        if i + 1 < n && !is_c_space(line[i + 1]) {
                            return None;
                        }
                        i += 1;
                        break;
                    }
                    other => word.push(other),
                }
            } else {
                if i == n {
                    break;
                }
                match line[i] {
                    b' ' | b'\n' | b'\r' | b'\t' => break,
                    b'"' => in_dq = true,
                    b'\'' => in_sq = true,
                    other => word.push(other),
                }
            }
            i += 1;
        }
        words.push(word);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(buf: &[u8]) -> Result<(Vec<Vec<u8>>, usize), ProtocolError> {
        let mut p = RequestParser::new(512 << 20);
        match p.parse(buf)? {
            Parsed::Command { consumed } => {
                Ok((p.args(buf).iter().map(<[u8]>::to_vec).collect(), consumed))
            }
            other => panic!("{other:?}"),
        }
    }

    fn words(v: &[&str]) -> Vec<Vec<u8>> {
        v.iter().map(|s| s.as_bytes().to_vec()).collect()
    }

    #[test]
    fn multibulk_parses_and_reports_its_length() {
        let wire = b"*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n*1\r\n";
        assert_eq!(one(wire), Ok((words(&["GET", "key"]), 22)));
    }

    #[test]
    fn binary_arguments_are_kept_whole() {
        let wire = b"*2\r\n$3\r\nSET\r\n$5\r\na\r\n\0b\r\n";
        assert_eq!(
            one(wire).unwrap().0,
            vec![b"SET".to_vec(), b"a\r\n\0b".to_vec()]
        );
    }

    #[test]
    fn every_prefix_is_incomplete_and_resumes() {
        let wire = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n";
        // Fresh parser on each prefix.
        for cut in 0..wire.len() {
            let mut p = RequestParser::new(512 << 20);
            assert!(
                matches!(p.parse(&wire[..cut]), Ok(Parsed::Incomplete { .. })),
                "prefix {cut}"
            );
        }
        // One parser fed byte by byte resumes where it stopped.
        let mut p = RequestParser::new(512 << 20);
        for cut in 0..wire.len() {
            let r = p.parse(&wire[..cut]).unwrap();
            let Parsed::Incomplete { need } = r else {
                panic!("{r:?}")
            };
            assert!(need > cut && need <= wire.len(), "need {need} at {cut}");
        }
        assert_eq!(
            p.parse(wire),
            Ok(Parsed::Command {
                consumed: wire.len()
            })
        );
        assert_eq!(p.args(wire).len(), 3);
    }

    #[test]
    fn incomplete_bulk_announces_the_bytes_it_needs() {
        let mut p = RequestParser::new(512 << 20);
        assert_eq!(
            p.parse(b"*1\r\n$100\r\nabc"),
            Ok(Parsed::Incomplete { need: 112 })
        );
    }

    #[test]
    fn empty_multibulks_are_skipped() {
        let mut p = RequestParser::new(512 << 20);
        assert_eq!(p.parse(b"*0\r\n"), Ok(Parsed::Empty { consumed: 4 }));
        assert_eq!(p.parse(b"*-1\r\n"), Ok(Parsed::Empty { consumed: 5 }));
        assert_eq!(p.parse(b"\r\n"), Ok(Parsed::Empty { consumed: 2 }));
        assert_eq!(p.parse(b"   \n"), Ok(Parsed::Empty { consumed: 4 }));
    }

    #[test]
    fn protocol_errors_carry_redis_strings() {
        let err = |buf: &[u8]| RequestParser::new(512 << 20).parse(buf).unwrap_err();
        let cases: Vec<(&[u8], &str)> = vec![
            (b"*x\r\n", "Protocol error: invalid multibulk length"),
            (b"*01\r\n", "Protocol error: invalid multibulk length"),
            (
                b"*2147483648\r\n",
                "Protocol error: invalid multibulk length",
            ),
            (b"*1\r\n:1\r\n", "Protocol error: expected '$', got ':'"),
            (b"*1\r\n$-1\r\n", "Protocol error: invalid bulk length"),
            (b"*1\r\n$abc\r\n", "Protocol error: invalid bulk length"),
            (
                b"*1\r\n$536870913\r\n",
                "Protocol error: invalid bulk length",
            ),
            (b"*1\r\n$3\r\nfooXX", "Protocol error: expected CRLF"),
            (b"*1\rX", "Protocol error: expected CRLF"),
            (
                b"SET \"a\r\n",
                "Protocol error: unbalanced quotes in request",
            ),
            (
                b"SET \"a\"b\r\n",
                "Protocol error: unbalanced quotes in request",
            ),
            (
                b"SET 'a\r\n",
                "Protocol error: unbalanced quotes in request",
            ),
        ];
        for (wire, want) in cases {
            assert_eq!(
                err(wire).to_string(),
                want,
                "{:?}",
                String::from_utf8_lossy(wire)
            );
        }
    }

    #[test]
    fn long_lines_without_newline_are_errors() {
        let mut big = b"*".to_vec();
        big.extend(std::iter::repeat_n(b'1', INLINE_MAX + 1));
        assert_eq!(
            RequestParser::new(512 << 20).parse(&big),
            Err(ProtocolError::TooBigMbulkCount)
        );
        let mut big = b"*1\r\n$".to_vec();
        big.extend(std::iter::repeat_n(b'1', INLINE_MAX + 1));
        assert_eq!(
            RequestParser::new(512 << 20).parse(&big),
            Err(ProtocolError::TooBigBulkCount)
        );
        let big = vec![b'a'; INLINE_MAX + 1];
        assert_eq!(
            RequestParser::new(512 << 20).parse(&big),
            Err(ProtocolError::TooBigInline)
        );
        // Under the cap it is only incomplete.
        let mut p = RequestParser::new(512 << 20);
        assert!(matches!(
            p.parse(&vec![b'a'; 1000]),
            Ok(Parsed::Incomplete { .. })
        ));
    }

    #[test]
    fn bulk_cap_is_configurable() {
        let mut p = RequestParser::new(4);
        assert!(matches!(
            p.parse(b"*1\r\n$4\r\n"),
            Ok(Parsed::Incomplete { .. })
        ));
        let mut p = RequestParser::new(4);
        assert_eq!(
            p.parse(b"*1\r\n$5\r\n"),
            Err(ProtocolError::InvalidBulkLength)
        );
    }

    #[test]
    fn inline_commands_split_like_redis() {
        assert_eq!(one(b"PING\r\n"), Ok((words(&["PING"]), 6)));
        assert_eq!(one(b"set  a  b\n"), Ok((words(&["set", "a", "b"]), 10)));
        assert_eq!(
            one(b"SET \"a b\" 'c d'\r\n").unwrap().0,
            words(&["SET", "a b", "c d"])
        );
        assert_eq!(
            one(b"SET k \"\\x41\\n\\\"\" 'it\\'s'\r\n").unwrap().0,
            vec![
                b"SET".to_vec(),
                b"k".to_vec(),
                b"A\n\"".to_vec(),
                b"it's".to_vec()
            ]
        );
        assert_eq!(one(b"ECHO \"\"\r\n").unwrap().0, words(&["ECHO", ""]));
    }

    #[test]
    fn split_args_edge_cases() {
        assert_eq!(split_args(b""), Some(vec![]));
        assert_eq!(split_args(b"  a\tb  "), Some(words(&["a", "b"])));
        assert_eq!(split_args(b"\"unterminated"), None);
        assert_eq!(split_args(b"\"a\"\"b\""), None);
        assert_eq!(split_args(b"\"\\q\""), Some(words(&["q"])));
        assert_eq!(
            split_args(b"a\0b c"),
            Some(words(&["a"])),
            "NUL ends the line"
        );
        assert_eq!(split_args(b"\0\x01"), Some(vec![]));
        assert_eq!(split_args(b"\"a\0\""), None);
        // The attack's inputs, against redis-server 7.0's replies: the
        // vertical tab separates words and may follow a closing quote, as
        // C's isspace says, but does not end an unquoted word (Redis's
        // switch lists space, \n, \r, \t and NUL only).
        assert_eq!(
            split_args(b"echo \x0bhello"),
            Some(words(&["echo", "hello"]))
        );
        assert_eq!(split_args(b"echo \"a\"\x0b"), Some(words(&["echo", "a"])));
        assert_eq!(split_args(b"a\x0bb"), Some(vec![b"a\x0bb".to_vec()]));
    }

    #[test]
    fn pipelined_commands_parse_one_at_a_time() {
        let wire = b"*1\r\n$4\r\nPING\r\nPING\r\n*2\r\n$4\r\nECHO\r\n$1\r\nx\r\n";
        let mut p = RequestParser::new(512 << 20);
        let mut at = 0;
        let mut seen = Vec::new();
        while at < wire.len() {
            match p.parse(&wire[at..]).unwrap() {
                Parsed::Command { consumed } => {
                    seen.push(p.args(&wire[at..]).len());
                    at += consumed;
                }
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(seen, vec![1, 1, 2]);
    }
}
