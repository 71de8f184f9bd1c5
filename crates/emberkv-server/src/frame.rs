//! RESP2 and RESP3 frames: a complete-check that allocates nothing, a
//! parser, and an encoder.
//!
//! The server reads requests with [`crate::request`] (multibulk and
//! inline, with Redis's exact error strings) and writes replies with
//! [`crate::reply`] straight into its output buffer; this module is the
//! general RESP value type, used to decode replies (the integration tests
//! read every RESP3 type the server writes with it) and to build frames.
//!
//! As in mini-redis, [`Frame::check`] first decides whether a whole frame
//! is buffered, keeping "incomplete, read more" ([`FrameError::Incomplete`])
//! apart from "this is not RESP" ([`FrameError::Protocol`]); only then does
//! [`Frame::parse`] build it. Unlike mini-redis, integers are signed 64-bit,
//! lengths and nesting are capped by [`Limits`], and every protocol error
//! is a typed [`ProtocolError`].
//!
//! RESP3 attributes (`|`) are checked and skipped: the frame they annotate
//! is returned.

use std::fmt;

use bytes::Bytes;

/// One RESP2 or RESP3 value.
#[derive(Clone, Debug, PartialEq)]
pub enum Frame {
    /// `+text`: a simple string.
    Simple(Bytes),
    /// `-text` or `!len`: an error (simple or blob).
    Error(Bytes),
    /// `:n`: a signed 64-bit integer.
    Integer(i64),
    /// `$len`: a bulk string.
    Bulk(Bytes),
    /// `$-1`, `*-1` (RESP2) or `_` (RESP3): null.
    Null,
    /// `*n`: an array.
    Array(Vec<Frame>),
    /// `%n`: a map of `n` key-value pairs, in wire order.
    Map(Vec<(Frame, Frame)>),
    /// `~n`: a set.
    Set(Vec<Frame>),
    /// `>n`: an out-of-band push.
    Push(Vec<Frame>),
    /// `,x`: a double.
    Double(f64),
    /// `#t` / `#f`: a boolean.
    Boolean(bool),
    /// `(digits`: a big number, kept as its digits.
    BigNumber(Bytes),
    /// `=len`: a verbatim string with its three-byte format (`txt`, `mkd`).
    Verbatim {
        /// The format, such as `txt`.
        format: Bytes,
        /// The text after `format:`.
        text: Bytes,
    },
}

/// Caps on what a frame may claim, checked before anything is allocated.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Largest bulk, blob error or verbatim string, in bytes (Redis's
    /// `proto-max-bulk-len`, 512 MB by default).
    pub max_bulk: usize,
    /// Largest element count of one aggregate.
    pub max_elements: usize,
    /// Deepest nesting of aggregates.
    pub max_depth: usize,
    /// Longest line of a simple string, error, number or header.
    pub max_line: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bulk: 512 * 1024 * 1024,
            max_elements: i32::MAX as usize,
            max_depth: 128,
            max_line: 64 * 1024,
        }
    }
}

/// Why a buffer does not yet, or cannot, hold a frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FrameError {
    /// The bytes so far are a valid prefix of a frame: read more.
    Incomplete,
    /// The bytes are not RESP (or break a [`Limits`] cap).
    Protocol(ProtocolError),
}

/// A violation of the RESP grammar or of a [`Limits`] cap.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProtocolError {
    /// The type byte is none of RESP2's or RESP3's.
    UnknownType(u8),
    /// An integer, length or count that is not a canonical signed 64-bit
    /// integer.
    InvalidInteger,
    /// A negative length other than the RESP2 null `-1`.
    InvalidLength,
    /// A bulk above `max_bulk`.
    BulkTooLarge {
        /// The length claimed.
        len: u64,
        /// The cap.
        max: usize,
    },
    /// An aggregate above `max_elements`.
    TooManyElements {
        /// The count claimed.
        count: u64,
        /// The cap.
        max: usize,
    },
    /// Aggregates nested deeper than `max_depth`.
    TooDeep,
    /// A line longer than `max_line` with no CRLF yet.
    LineTooLong,
    /// A CR not followed by LF, or a bulk not followed by CRLF.
    MissingCrlf,
    /// A double that does not parse.
    InvalidDouble,
    /// A boolean other than `#t` or `#f`.
    InvalidBoolean,
    /// A big number that is not an optional sign and digits.
    InvalidBigNumber,
    /// A verbatim string without its `fmt:` prefix.
    InvalidVerbatim,
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProtocolError::UnknownType(b) => {
                write!(f, "unknown type byte {:?}", char::from(*b))
            }
            ProtocolError::InvalidInteger => f.write_str("invalid integer"),
            ProtocolError::InvalidLength => f.write_str("invalid length"),
            ProtocolError::BulkTooLarge { len, max } => {
                write!(f, "bulk of {len} bytes is above the limit of {max}")
            }
            ProtocolError::TooManyElements { count, max } => {
                write!(
                    f,
                    "aggregate of {count} elements is above the limit of {max}"
                )
            }
            ProtocolError::TooDeep => f.write_str("aggregates nested too deep"),
            ProtocolError::LineTooLong => f.write_str("line too long"),
            ProtocolError::MissingCrlf => f.write_str("expected CRLF"),
            ProtocolError::InvalidDouble => f.write_str("invalid double"),
            ProtocolError::InvalidBoolean => f.write_str("invalid boolean"),
            ProtocolError::InvalidBigNumber => f.write_str("invalid big number"),
            ProtocolError::InvalidVerbatim => f.write_str("invalid verbatim string"),
        }
    }
}

impl std::error::Error for ProtocolError {}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::Incomplete => f.write_str("incomplete frame"),
            FrameError::Protocol(e) => write!(f, "protocol error: {e}"),
        }
    }
}

impl std::error::Error for FrameError {}

impl From<ProtocolError> for FrameError {
    fn from(e: ProtocolError) -> Self {
        FrameError::Protocol(e)
    }
}

type Result<T> = std::result::Result<T, FrameError>;

/// What a frame's first line says.
enum Head {
    /// A simple string, error, big number or double: the line's bytes.
    Line(u8, usize, usize),
    Integer(i64),
    Boolean(bool),
    Null,
    /// A bulk, blob error or verbatim string of this many bytes.
    Blob(u8, usize),
    /// An aggregate of this many frames (a map counts two per entry).
    Aggregate(u8, usize),
    /// An attribute of this many key-value pairs, then the frame it
    /// annotates.
    Attribute(usize),
}

/// A read position over a buffer.
struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
    limits: Limits,
}

impl<'a> Cursor<'a> {
    /// The bytes up to the next CRLF, consuming the CRLF.
    fn line(&mut self) -> Result<(usize, usize)> {
        let start = self.pos;
        let rest = &self.buf[start..];
        match memchr::memchr(b'\r', rest) {
            Some(i) if start + i + 1 < self.buf.len() => {
                if self.buf[start + i + 1] != b'\n' {
                    return Err(ProtocolError::MissingCrlf.into());
                }
                if i > self.limits.max_line {
                    return Err(ProtocolError::LineTooLong.into());
                }
                self.pos = start + i + 2;
                Ok((start, start + i))
            }
            Some(i) if i > self.limits.max_line => Err(ProtocolError::LineTooLong.into()),
            None if rest.len() > self.limits.max_line => Err(ProtocolError::LineTooLong.into()),
            _ => Err(FrameError::Incomplete),
        }
    }

    fn integer(&mut self) -> Result<i64> {
        let (s, e) = self.line()?;
        crate::num::parse_i64(&self.buf[s..e]).ok_or(ProtocolError::InvalidInteger.into())
    }

    /// A length line: `Ok(None)` for the RESP2 null `-1`.
    fn length(&mut self) -> Result<Option<u64>> {
        match self.integer()? {
            -1 => Ok(None),
            n if n < 0 => Err(ProtocolError::InvalidLength.into()),
            n => Ok(Some(n as u64)),
        }
    }

    fn head(&mut self) -> Result<Head> {
        let Some(&kind) = self.buf.get(self.pos) else {
            return Err(FrameError::Incomplete);
        };
        self.pos += 1;
        let limits = self.limits;
        let count = |n: u64, per: u64| -> Result<usize> {
            if n > limits.max_elements as u64 {
                return Err(ProtocolError::TooManyElements {
                    count: n,
                    max: limits.max_elements,
                }
                .into());
            }
            Ok((n * per) as usize)
        };
        Ok(match kind {
            b'+' | b'-' | b',' | b'(' => {
                let (s, e) = self.line()?;
                Head::Line(kind, s, e)
            }
            b':' => Head::Integer(self.integer()?),
            b'_' => {
                let (s, e) = self.line()?;
                if s != e {
                    return Err(ProtocolError::MissingCrlf.into());
                }
                Head::Null
            }
            b'#' => {
                let (s, e) = self.line()?;
                match &self.buf[s..e] {
                    b"t" => Head::Boolean(true),
                    b"f" => Head::Boolean(false),
                    _ => return Err(ProtocolError::InvalidBoolean.into()),
                }
            }
            b'$' | b'!' | b'=' => match self.length()? {
                None if kind == b'$' => Head::Null,
                None => return Err(ProtocolError::InvalidLength.into()),
                Some(n) if n > limits.max_bulk as u64 => {
                    return Err(ProtocolError::BulkTooLarge {
                        len: n,
                        max: limits.max_bulk,
                    }
                    .into());
                }
                Some(n) => Head::Blob(kind, n as usize),
            },
            b'*' | b'~' | b'>' | b'%' => match self.length()? {
                None if kind == b'*' => Head::Null,
                None => return Err(ProtocolError::InvalidLength.into()),
                Some(n) => Head::Aggregate(kind, count(n, if kind == b'%' { 2 } else { 1 })?),
            },
            b'|' => match self.length()? {
                Some(n) => Head::Attribute(count(n, 2)?),
                None => return Err(ProtocolError::InvalidLength.into()),
            },
            other => return Err(ProtocolError::UnknownType(other).into()),
        })
    }

    /// The `n` bytes of a blob and its CRLF.
    fn blob(&mut self, n: usize) -> Result<(usize, usize)> {
        let start = self.pos;
        let end = start + n;
        if self.buf.len() < end + 2 {
            return Err(FrameError::Incomplete);
        }
        if &self.buf[end..end + 2] != b"\r\n" {
            return Err(ProtocolError::MissingCrlf.into());
        }
        self.pos = end + 2;
        Ok((start, end))
    }

    /// Skips one whole frame, allocating nothing.
    fn skip(&mut self, depth: usize) -> Result<()> {
        if depth > self.limits.max_depth {
            return Err(ProtocolError::TooDeep.into());
        }
        match self.head()? {
            Head::Line(kind, s, e) => validate_line(kind, &self.buf[s..e])?,
            Head::Integer(_) | Head::Boolean(_) | Head::Null => {}
            Head::Blob(kind, n) => {
                let (s, e) = self.blob(n)?;
                if kind == b'=' {
                    verbatim_split(&self.buf[s..e])?;
                }
            }
            Head::Aggregate(_, n) => {
                for _ in 0..n {
                    self.skip(depth + 1)?;
                }
            }
            Head::Attribute(n) => {
                for _ in 0..n {
                    self.skip(depth + 1)?;
                }
                // The annotated frame counts as one level deeper, so that a
                // chain of attributes is capped like nested aggregates.
                self.skip(depth + 1)?;
            }
        }
        Ok(())
    }

    /// Reads one frame; `bytes` is the same buffer as `self.buf`, shared.
    fn read(&mut self, bytes: &Bytes, depth: usize) -> Result<Frame> {
        if depth > self.limits.max_depth {
            return Err(ProtocolError::TooDeep.into());
        }
        Ok(match self.head()? {
            Head::Line(kind, s, e) => {
                let text = &self.buf[s..e];
                validate_line(kind, text)?;
                match kind {
                    b'+' => Frame::Simple(bytes.slice(s..e)),
                    b'-' => Frame::Error(bytes.slice(s..e)),
                    b'(' => Frame::BigNumber(bytes.slice(s..e)),
                    _ => Frame::Double(parse_double(text)?),
                }
            }
            Head::Integer(n) => Frame::Integer(n),
            Head::Boolean(b) => Frame::Boolean(b),
            Head::Null => Frame::Null,
            Head::Blob(kind, n) => {
                let (s, e) = self.blob(n)?;
                match kind {
                    b'$' => Frame::Bulk(bytes.slice(s..e)),
                    b'!' => Frame::Error(bytes.slice(s..e)),
                    _ => {
                        verbatim_split(&self.buf[s..e])?;
                        Frame::Verbatim {
                            format: bytes.slice(s..s + 3),
                            text: bytes.slice(s + 4..e),
                        }
                    }
                }
            }
            Head::Aggregate(kind, n) => {
                let mut items = Vec::with_capacity(n.min(1024));
                for _ in 0..n {
                    items.push(self.read(bytes, depth + 1)?);
                }
                match kind {
                    b'*' => Frame::Array(items),
                    b'~' => Frame::Set(items),
                    b'>' => Frame::Push(items),
                    _ => {
                        let mut pairs = Vec::with_capacity(items.len() / 2);
                        let mut it = items.into_iter();
                        while let (Some(k), Some(v)) = (it.next(), it.next()) {
                            pairs.push((k, v));
                        }
                        Frame::Map(pairs)
                    }
                }
            }
            Head::Attribute(n) => {
                for _ in 0..n {
                    self.skip(depth + 1)?;
                }
                self.read(bytes, depth + 1)?
            }
        })
    }
}

fn validate_line(kind: u8, text: &[u8]) -> Result<()> {
    match kind {
        b',' => parse_double(text).map(drop),
        b'(' => {
            let digits = text.strip_prefix(b"-").unwrap_or(text);
            let digits = digits.strip_prefix(b"+").unwrap_or(digits);
            if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
                return Err(ProtocolError::InvalidBigNumber.into());
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

fn parse_double(text: &[u8]) -> Result<f64> {
    let s = std::str::from_utf8(text).map_err(|_| ProtocolError::InvalidDouble)?;
    match s {
        "inf" => Ok(f64::INFINITY),
        "-inf" => Ok(f64::NEG_INFINITY),
        "nan" => Ok(f64::NAN),
        _ => s.parse().map_err(|_| ProtocolError::InvalidDouble.into()),
    }
}

fn verbatim_split(text: &[u8]) -> Result<()> {
    if text.len() < 4 || text[3] != b':' {
        return Err(ProtocolError::InvalidVerbatim.into());
    }
    Ok(())
}

impl Frame {
    /// Whether `buf` starts with one whole frame; returns its length in
    /// bytes. Allocates nothing.
    ///
    /// # Errors
    /// [`FrameError::Incomplete`] when `buf` is a valid prefix of a frame,
    /// [`FrameError::Protocol`] when it cannot become one.
    pub fn check(buf: &[u8], limits: Limits) -> Result<usize> {
        let mut cursor = Cursor {
            buf,
            pos: 0,
            limits,
        };
        cursor.skip(0)?;
        Ok(cursor.pos)
    }

    /// Parses the frame at the start of `buf` (after [`Frame::check`] has
    /// found it whole); returns it and its length. Bulk strings share
    /// `buf`'s memory.
    ///
    /// # Errors
    /// As for [`Frame::check`].
    pub fn parse(buf: &Bytes, limits: Limits) -> Result<(Frame, usize)> {
        let mut cursor = Cursor {
            buf,
            pos: 0,
            limits,
        };
        let frame = cursor.read(buf, 0)?;
        Ok((frame, cursor.pos))
    }

    /// A request: an array of bulk strings.
    pub fn command<I, A>(args: I) -> Frame
    where
        I: IntoIterator<Item = A>,
        A: AsRef<[u8]>,
    {
        Frame::Array(
            args.into_iter()
                .map(|a| Frame::Bulk(Bytes::copy_from_slice(a.as_ref())))
                .collect(),
        )
    }

    /// Appends this frame's encoding to `out`: RESP3 when `resp3`, else
    /// RESP2 (maps and sets become arrays, null becomes `$-1`, doubles and
    /// verbatim strings become bulk strings, booleans integers).
    pub fn encode(&self, out: &mut Vec<u8>, resp3: bool) {
        fn head(out: &mut Vec<u8>, kind: u8, n: impl itoa::Integer) {
            out.push(kind);
            out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        fn blob(out: &mut Vec<u8>, kind: u8, data: &[u8]) {
            head(out, kind, data.len());
            out.extend_from_slice(data);
            out.extend_from_slice(b"\r\n");
        }
        match self {
            Frame::Simple(s) => {
                out.push(b'+');
                out.extend_from_slice(s);
                out.extend_from_slice(b"\r\n");
            }
            Frame::Error(s) => {
                out.push(b'-');
                out.extend_from_slice(s);
                out.extend_from_slice(b"\r\n");
            }
            Frame::Integer(n) => head(out, b':', *n),
            Frame::Bulk(b) => blob(out, b'$', b),
            Frame::Null if resp3 => out.extend_from_slice(b"_\r\n"),
            Frame::Null => out.extend_from_slice(b"$-1\r\n"),
            Frame::Array(items) | Frame::Set(items) | Frame::Push(items) => {
                let kind = match self {
                    Frame::Set(_) if resp3 => b'~',
                    Frame::Push(_) if resp3 => b'>',
                    _ => b'*',
                };
                head(out, kind, items.len());
                for item in items {
                    item.encode(out, resp3);
                }
            }
            Frame::Map(pairs) => {
                if resp3 {
                    head(out, b'%', pairs.len());
                } else {
                    head(out, b'*', pairs.len() * 2);
                }
                for (k, v) in pairs {
                    k.encode(out, resp3);
                    v.encode(out, resp3);
                }
            }
            Frame::Double(d) if resp3 => {
                out.push(b',');
                out.extend_from_slice(format_double(*d).as_bytes());
                out.extend_from_slice(b"\r\n");
            }
            Frame::Double(d) => blob(out, b'$', format_double(*d).as_bytes()),
            Frame::Boolean(b) if resp3 => {
                out.extend_from_slice(if *b { b"#t\r\n" } else { b"#f\r\n" })
            }
            Frame::Boolean(b) => head(out, b':', i64::from(*b)),
            Frame::BigNumber(n) if resp3 => {
                out.push(b'(');
                out.extend_from_slice(n);
                out.extend_from_slice(b"\r\n");
            }
            Frame::BigNumber(n) => blob(out, b'$', n),
            Frame::Verbatim { format, text } if resp3 => {
                head(out, b'=', format.len() + 1 + text.len());
                out.extend_from_slice(format);
                out.push(b':');
                out.extend_from_slice(text);
                out.extend_from_slice(b"\r\n");
            }
            Frame::Verbatim { text, .. } => blob(out, b'$', text),
        }
    }
}

/// A double as RESP3 writes it: `inf`, `-inf`, `nan`, or the shortest
/// round-trip decimal.
pub fn format_double(d: f64) -> String {
    if d.is_nan() {
        "nan".into()
    } else if d.is_infinite() {
        if d > 0.0 { "inf".into() } else { "-inf".into() }
    } else {
        format!("{d}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(s: &[u8]) -> Result<usize> {
        Frame::check(s, Limits::default())
    }

    fn parse(s: &[u8]) -> Result<Frame> {
        let bytes = Bytes::copy_from_slice(s);
        let n = Frame::check(&bytes, Limits::default())?;
        let (frame, m) = Frame::parse(&bytes, Limits::default())?;
        assert_eq!(n, m, "check and parse agree on the length");
        Ok(frame)
    }

    fn bulk(s: &str) -> Frame {
        Frame::Bulk(Bytes::copy_from_slice(s.as_bytes()))
    }

    /// Every strict prefix of a valid frame is Incomplete, never an error.
    fn assert_prefixes_incomplete(frame: &[u8]) {
        for cut in 0..frame.len() {
            assert_eq!(
                check(&frame[..cut]),
                Err(FrameError::Incomplete),
                "prefix {:?}",
                String::from_utf8_lossy(&frame[..cut])
            );
        }
        assert_eq!(check(frame), Ok(frame.len()));
    }

    #[test]
    fn every_type_parses() {
        let cases: Vec<(&[u8], Frame)> = vec![
            (b"+OK\r\n", Frame::Simple("OK".into())),
            (b"-ERR bad\r\n", Frame::Error("ERR bad".into())),
            (b"!5\r\nERR x\r\n", Frame::Error("ERR x".into())),
            (b":-42\r\n", Frame::Integer(-42)),
            (b":9223372036854775807\r\n", Frame::Integer(i64::MAX)),
            (b":-9223372036854775808\r\n", Frame::Integer(i64::MIN)),
            (b"$3\r\nfoo\r\n", bulk("foo")),
            (b"$0\r\n\r\n", bulk("")),
            (b"$-1\r\n", Frame::Null),
            (b"*-1\r\n", Frame::Null),
            (b"_\r\n", Frame::Null),
            (b"*0\r\n", Frame::Array(vec![])),
            (
                b"*2\r\n$1\r\na\r\n:1\r\n",
                Frame::Array(vec![bulk("a"), Frame::Integer(1)]),
            ),
            (
                b"%1\r\n+k\r\n$1\r\nv\r\n",
                Frame::Map(vec![(Frame::Simple("k".into()), bulk("v"))]),
            ),
            (b"~1\r\n:1\r\n", Frame::Set(vec![Frame::Integer(1)])),
            (
                b">1\r\n+x\r\n",
                Frame::Push(vec![Frame::Simple("x".into())]),
            ),
            (b",1.5\r\n", Frame::Double(1.5)),
            (b",inf\r\n", Frame::Double(f64::INFINITY)),
            (b",-inf\r\n", Frame::Double(f64::NEG_INFINITY)),
            (b"#t\r\n", Frame::Boolean(true)),
            (b"#f\r\n", Frame::Boolean(false)),
            (b"(-123\r\n", Frame::BigNumber("-123".into())),
            (
                b"=8\r\ntxt:abcd\r\n",
                Frame::Verbatim {
                    format: "txt".into(),
                    text: "abcd".into(),
                },
            ),
            (b"|1\r\n+a\r\n:1\r\n:7\r\n", Frame::Integer(7)),
        ];
        for (wire, want) in cases {
            assert_eq!(parse(wire), Ok(want), "{:?}", String::from_utf8_lossy(wire));
            assert_prefixes_incomplete(wire);
        }
        assert!(matches!(parse(b",nan\r\n"), Ok(Frame::Double(d)) if d.is_nan()));
    }

    #[test]
    fn binary_bulk_with_crlf_and_nul() {
        let wire = b"$6\r\na\r\n\0\rb\r\n";
        assert_eq!(
            parse(wire),
            Ok(Frame::Bulk(Bytes::from_static(b"a\r\n\0\rb")))
        );
        assert_prefixes_incomplete(wire);
    }

    #[test]
    fn nested_aggregates_and_trailing_bytes() {
        let wire = b"*2\r\n*1\r\n%1\r\n$1\r\nk\r\n~0\r\n_\r\nEXTRA";
        assert_eq!(check(wire), Ok(wire.len() - 5));
        assert_eq!(
            parse(&wire[..wire.len() - 5]),
            Ok(Frame::Array(vec![
                Frame::Array(vec![Frame::Map(vec![(bulk("k"), Frame::Set(vec![]))])]),
                Frame::Null,
            ]))
        );
    }

    #[test]
    fn protocol_errors_are_not_incomplete() {
        let proto = |s: &[u8]| match check(s) {
            Err(FrameError::Protocol(e)) => e,
            other => panic!("{:?}: {other:?}", String::from_utf8_lossy(s)),
        };
        assert_eq!(proto(b"?x\r\n"), ProtocolError::UnknownType(b'?'));
        assert_eq!(proto(b":abc\r\n"), ProtocolError::InvalidInteger);
        assert_eq!(proto(b":+1\r\n"), ProtocolError::InvalidInteger);
        assert_eq!(proto(b":01\r\n"), ProtocolError::InvalidInteger);
        assert_eq!(
            proto(b":9223372036854775808\r\n"),
            ProtocolError::InvalidInteger
        );
        assert_eq!(proto(b"$-2\r\n"), ProtocolError::InvalidLength);
        assert_eq!(proto(b"%-1\r\n"), ProtocolError::InvalidLength);
        assert_eq!(proto(b"!-1\r\n"), ProtocolError::InvalidLength);
        assert_eq!(proto(b"$3\r\nfooXY"), ProtocolError::MissingCrlf);
        assert_eq!(proto(b"+OK\rX"), ProtocolError::MissingCrlf);
        assert_eq!(proto(b"_x\r\n"), ProtocolError::MissingCrlf);
        assert_eq!(proto(b"#x\r\n"), ProtocolError::InvalidBoolean);
        assert_eq!(proto(b",1.2.3\r\n"), ProtocolError::InvalidDouble);
        assert_eq!(proto(b"(12a\r\n"), ProtocolError::InvalidBigNumber);
        assert_eq!(proto(b"=3\r\ntxt\r\n"), ProtocolError::InvalidVerbatim);
        // An error deep inside an aggregate is still an error.
        assert_eq!(proto(b"*2\r\n:1\r\n:x\r\n"), ProtocolError::InvalidInteger);
    }

    #[test]
    fn caps_are_enforced_before_data_arrives() {
        let limits = Limits {
            max_bulk: 10,
            max_elements: 3,
            max_depth: 2,
            max_line: 8,
        };
        let proto = |s: &[u8]| Frame::check(s, limits);
        assert_eq!(
            proto(b"$11\r\n"),
            Err(FrameError::Protocol(ProtocolError::BulkTooLarge {
                len: 11,
                max: 10
            }))
        );
        assert_eq!(proto(b"$10\r\n"), Err(FrameError::Incomplete));
        assert_eq!(
            proto(b"*4\r\n"),
            Err(FrameError::Protocol(ProtocolError::TooManyElements {
                count: 4,
                max: 3
            }))
        );
        // A map's cap counts entries, not frames: 2 entries are 4 frames.
        assert_eq!(proto(b"%2\r\n"), Err(FrameError::Incomplete));
        assert!(matches!(
            proto(b"%4\r\n"),
            Err(FrameError::Protocol(ProtocolError::TooManyElements {
                count: 4,
                ..
            }))
        ));
        assert_eq!(
            proto(b"*1\r\n*1\r\n*1\r\n*0\r\n"),
            Err(FrameError::Protocol(ProtocolError::TooDeep))
        );
        assert_eq!(proto(b"*1\r\n*1\r\n*0\r\n"), Ok(12));
        assert_eq!(
            proto(b"+123456789"),
            Err(FrameError::Protocol(ProtocolError::LineTooLong))
        );
        assert_eq!(proto(b"+1234567"), Err(FrameError::Incomplete));
        // The default bulk cap is Redis's 512 MB.
        assert_eq!(check(b"$536870912\r\n"), Err(FrameError::Incomplete));
        assert!(matches!(
            check(b"$536870913\r\n"),
            Err(FrameError::Protocol(ProtocolError::BulkTooLarge { .. }))
        ));
    }

    /// Regression: each attribute of a chain used to annotate its frame at
    /// the same depth, so `|1 k v |1 k v ...` recursed once per attribute
    /// past `max_depth`; 200,000 of them overflowed the stack of
    /// `Frame::check` (found with the `resp` fuzz target's binary).
    #[test]
    fn attribute_chains_count_toward_the_depth_cap() {
        let chain = |n: usize| {
            let mut wire = b"|1\r\n_\r\n_\r\n".repeat(n);
            wire.extend_from_slice(b":7\r\n");
            Bytes::from(wire)
        };
        let limits = Limits::default();
        let ok = chain(limits.max_depth);
        assert_eq!(Frame::check(&ok, limits), Ok(ok.len()));
        assert_eq!(Frame::parse(&ok, limits), Ok((Frame::Integer(7), ok.len())));
        for n in [limits.max_depth + 1, 200_000] {
            let deep = chain(n);
            let too_deep = Err(FrameError::Protocol(ProtocolError::TooDeep));
            assert_eq!(Frame::check(&deep, limits), too_deep);
            assert_eq!(Frame::parse(&deep, limits).map(|(_, n)| n), too_deep);
        }
    }

    #[test]
    fn encode_round_trips_in_resp3_and_downgrades_in_resp2() {
        let frame = Frame::Array(vec![
            Frame::Simple("OK".into()),
            Frame::Error("ERR x".into()),
            Frame::Integer(i64::MIN),
            bulk("a\r\nb"),
            Frame::Null,
            Frame::Map(vec![(bulk("k"), Frame::Double(2.5))]),
            Frame::Set(vec![Frame::Boolean(true)]),
            Frame::BigNumber("12345678901234567890".into()),
            Frame::Verbatim {
                format: "txt".into(),
                text: "hi".into(),
            },
        ]);
        let mut out = Vec::new();
        frame.encode(&mut out, true);
        assert_eq!(parse(&out), Ok(frame.clone()));

        let mut out2 = Vec::new();
        frame.encode(&mut out2, false);
        assert_eq!(
            parse(&out2),
            Ok(Frame::Array(vec![
                Frame::Simple("OK".into()),
                Frame::Error("ERR x".into()),
                Frame::Integer(i64::MIN),
                bulk("a\r\nb"),
                Frame::Null,
                Frame::Array(vec![bulk("k"), bulk("2.5")]),
                Frame::Array(vec![Frame::Integer(1)]),
                bulk("12345678901234567890"),
                bulk("hi"),
            ]))
        );
    }

    #[test]
    fn command_builds_an_array_of_bulks() {
        let mut out = Vec::new();
        Frame::command(["SET", "k", "v"]).encode(&mut out, false);
        assert_eq!(out, b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n");
    }
}
