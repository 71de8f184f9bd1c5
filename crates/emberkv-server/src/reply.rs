//! Writing replies: straight into the connection's output buffer, in
//! RESP2 or RESP3 as the client negotiated with HELLO.
//!
//! Commands never build a reply value; they call these methods in order.
//! Where RESP2 has no type for a RESP3 one, the method writes what Redis
//! writes to a RESP2 client (a map as a flat array, a null as `$-1`, a
//! verbatim string as a bulk string, a double as a bulk string).

use bytes::BytesMut;

/// A connection's pending output and its protocol version.
#[derive(Debug)]
pub struct Reply {
    buf: BytesMut,
    resp3: bool,
}

impl Default for Reply {
    fn default() -> Self {
        Reply::new()
    }
}

impl Reply {
    /// An empty RESP2 reply buffer.
    pub fn new() -> Self {
        Reply {
            buf: BytesMut::with_capacity(16 * 1024),
            resp3: false,
        }
    }

    /// Whether replies are written in RESP3.
    pub fn resp3(&self) -> bool {
        self.resp3
    }

    /// Switches the protocol (HELLO); applies to the replies written next.
    pub fn set_resp3(&mut self, on: bool) {
        self.resp3 = on;
    }

    /// The bytes written and not yet sent.
    pub fn pending(&self) -> &[u8] {
        &self.buf
    }

    /// Drops `n` bytes that were sent.
    pub fn consume(&mut self, n: usize) {
        bytes::Buf::advance(&mut self.buf, n);
        if self.buf.is_empty() && self.buf.capacity() > 4 << 20 {
            // Give back the memory of a burst of large replies.
            self.buf = BytesMut::with_capacity(16 * 1024);
        }
    }

    /// Whether nothing is pending.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Bytes pending.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Drops what was written after the first `len` pending bytes (a
    /// command's partial reply, written before it failed or retried).
    pub fn truncate(&mut self, len: usize) {
        self.buf.truncate(len);
    }

    /// Appends the replies pending in `other` (EXEC's, gathered aside).
    pub fn append(&mut self, other: &Reply) {
        self.buf.extend_from_slice(other.pending());
    }

    fn head(&mut self, kind: u8, n: impl itoa::Integer) {
        self.buf.extend_from_slice(&[kind]);
        self.buf
            .extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
        self.buf.extend_from_slice(b"\r\n");
    }

    /// `+OK`.
    pub fn ok(&mut self) {
        self.buf.extend_from_slice(b"+OK\r\n");
    }

    /// A simple string; `s` must hold no CR or LF.
    pub fn simple(&mut self, s: &str) {
        debug_assert!(!s.contains(['\r', '\n']));
        self.buf.extend_from_slice(b"+");
        self.buf.extend_from_slice(s.as_bytes());
        self.buf.extend_from_slice(b"\r\n");
    }

    /// An error line (`msg` without the leading `-`), with CR and LF
    /// replaced by spaces as Redis does; any other byte is sent as it is.
    pub fn error(&mut self, msg: impl AsRef<[u8]>) {
        self.buf.extend_from_slice(b"-");
        let start = self.buf.len();
        self.buf.extend_from_slice(msg.as_ref());
        for b in &mut self.buf[start..] {
            if *b == b'\r' || *b == b'\n' {
                *b = b' ';
            }
        }
        self.buf.extend_from_slice(b"\r\n");
    }

    /// An integer.
    pub fn int(&mut self, n: i64) {
        self.head(b':', n);
    }

    /// A bulk string.
    pub fn bulk(&mut self, data: &[u8]) {
        self.head(b'$', data.len());
        self.buf.extend_from_slice(data);
        self.buf.extend_from_slice(b"\r\n");
    }

    /// An integer as a bulk string (TIME, SCAN's cursor).
    pub fn bulk_int(&mut self, n: impl itoa::Integer) {
        let mut b = itoa::Buffer::new();
        let s = b.format(n);
        self.bulk(s.as_bytes());
    }

    /// A null bulk string: `$-1` in RESP2, `_` in RESP3.
    pub fn null(&mut self) {
        if self.resp3 {
            self.buf.extend_from_slice(b"_\r\n");
        } else {
            self.buf.extend_from_slice(b"$-1\r\n");
        }
    }

    /// A null array: `*-1` in RESP2, `_` in RESP3.
    pub fn null_array(&mut self) {
        if self.resp3 {
            self.buf.extend_from_slice(b"_\r\n");
        } else {
            self.buf.extend_from_slice(b"*-1\r\n");
        }
    }

    /// The header of an array of `n` elements.
    pub fn array(&mut self, n: usize) {
        self.head(b'*', n);
    }

    /// The header of a map of `n` pairs (a flat array of `2n` in RESP2).
    pub fn map(&mut self, n: usize) {
        if self.resp3 {
            self.head(b'%', n);
        } else {
            self.head(b'*', 2 * n);
        }
    }

    /// The header of a set of `n` elements (an array in RESP2).
    pub fn set(&mut self, n: usize) {
        self.head(if self.resp3 { b'~' } else { b'*' }, n);
    }

    /// A verbatim text string (INFO, CLIENT LIST): `=` with `txt:` in
    /// RESP3, a bulk string in RESP2.
    pub fn verbatim(&mut self, text: &[u8]) {
        if self.resp3 {
            self.head(b'=', text.len() + 4);
            self.buf.extend_from_slice(b"txt:");
            self.buf.extend_from_slice(text);
            self.buf.extend_from_slice(b"\r\n");
        } else {
            self.bulk(text);
        }
    }

    /// A list of bulk strings.
    pub fn bulks<'a>(&mut self, items: impl ExactSizeIterator<Item = &'a [u8]>) {
        self.array(items.len());
        for item in items {
            self.bulk(item);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn out(resp3: bool, f: impl FnOnce(&mut Reply)) -> Vec<u8> {
        let mut r = Reply::new();
        r.set_resp3(resp3);
        f(&mut r);
        r.pending().to_vec()
    }

    #[test]
    fn resp2_and_resp3_spellings() {
        assert_eq!(out(false, Reply::null), b"$-1\r\n");
        assert_eq!(out(true, Reply::null), b"_\r\n");
        assert_eq!(out(false, Reply::null_array), b"*-1\r\n");
        assert_eq!(out(false, |r| r.map(2)), b"*4\r\n");
        assert_eq!(out(true, |r| r.map(2)), b"%2\r\n");
        assert_eq!(out(true, |r| r.set(1)), b"~1\r\n");
        assert_eq!(out(false, |r| r.verbatim(b"a")), b"$1\r\na\r\n");
        assert_eq!(out(true, |r| r.verbatim(b"a")), b"=5\r\ntxt:a\r\n");
        assert_eq!(
            out(false, |r| r.int(i64::MIN)),
            b":-9223372036854775808\r\n"
        );
        assert_eq!(out(false, |r| r.bulk(b"a\r\n")), b"$3\r\na\r\n\r\n");
    }

    #[test]
    fn errors_never_break_the_line() {
        assert_eq!(out(false, |r| r.error("ERR a\r\nb")), b"-ERR a  b\r\n");
    }

    #[test]
    fn consume_drops_sent_bytes() {
        let mut r = Reply::new();
        r.ok();
        r.int(1);
        r.consume(5);
        assert_eq!(r.pending(), b":1\r\n");
        r.consume(4);
        assert!(r.is_empty());
    }
}
