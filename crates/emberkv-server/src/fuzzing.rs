//! The bodies of the `resp` and `commands` fuzz targets in the
//! repository's `fuzz/` directory, as ordinary functions: each cargo fuzz
//! target is a one-line wrapper around one, and `tests/fuzz_corpus.rs`
//! replays the committed corpora through them on a stable toolchain. They
//! panic when a property fails. Not part of the API: hidden from the docs,
//! and they may change with any release.

use std::ops::Range;

use bytes::Bytes;

use crate::frame::{Frame, FrameError, Limits};
use crate::request::{Parsed, ProtocolError, RequestParser};

mod commands;

pub use commands::commands;

/// Small caps, so that inputs reach every limit check.
const SMALL: Limits = Limits {
    max_bulk: 16,
    max_elements: 8,
    max_depth: 4,
    max_line: 32,
};

/// The bulk cap of the request parser (Redis's default
/// `proto-max-bulk-len`, as the server starts with).
const MAX_BULK: usize = 512 << 20;

/// Sizes of the reads the incremental request parse is fed, in turn.
const READS: [usize; 6] = [1, 2, 3, 7, 16, 61];

/// Parses arbitrary bytes as the server and its clients do and checks:
/// - [`Frame::check`] and [`Frame::parse`], with the default [`Limits`]
///   and with small ones, give the same length or the same error, and
///   never panic;
/// - every strict prefix of a whole frame is [`FrameError::Incomplete`];
/// - a parsed frame encodes (RESP3) to bytes that parse back to the same
///   encoding, and its RESP2 encoding parses;
/// - the server's [`RequestParser`] finds the same commands, the same
///   empty commands and the same final outcome whether the bytes arrive at
///   once or in small reads, keeps its `need` promise, and a multibulk
///   command it accepts is the array of bulks [`Frame::parse`] reads.
pub fn resp(data: &[u8]) {
    let bytes = Bytes::copy_from_slice(data);
    for limits in [Limits::default(), SMALL] {
        frames(&bytes, limits);
    }
    requests(data);
}

fn frames(bytes: &Bytes, limits: Limits) {
    let checked = Frame::check(bytes, limits);
    let parsed = Frame::parse(bytes, limits);
    let frame = match (checked, parsed) {
        (Ok(n), Ok((frame, m))) => {
            assert_eq!(n, m, "check and parse disagree on the length");
            frame
        }
        (Err(a), Err(b)) => {
            assert_eq!(a, b, "check and parse disagree on the error");
            return;
        }
        (c, p) => panic!("check gave {c:?}, parse gave {p:?}"),
    };
    let n = Frame::check(bytes, limits).expect("checked above");
    let step = (n / 16).max(1);
    for cut in (0..n).step_by(step).chain([n - 1]) {
        assert_eq!(
            Frame::check(&bytes[..cut], limits),
            Err(FrameError::Incomplete),
            "a prefix of {cut} bytes of a whole frame of {n}"
        );
    }
    encodings_round_trip(&frame);
}

/// Checks that `frame`'s RESP3 encoding parses back, whole, to a frame
/// with the same encoding, and that its RESP2 encoding parses (both
/// targets check every frame they meet this way). Skipped for a frame
/// holding an error with a CR, which has no simple-error encoding.
fn encodings_round_trip(frame: &Frame) {
    if has_cr_in_error(frame) {
        return;
    }
    let mut resp3 = Vec::new();
    frame.encode(&mut resp3, true);
    let resp3 = Bytes::from(resp3);
    let (again, len) = Frame::parse(&resp3, Limits::default())
        .unwrap_or_else(|e| panic!("the RESP3 encoding of {frame:?} does not parse: {e:?}"));
    assert_eq!(len, resp3.len());
    let mut twice = Vec::new();
    again.encode(&mut twice, true);
    assert_eq!(twice, resp3, "the RESP3 encoding does not round-trip");
    let mut resp2 = Vec::new();
    frame.encode(&mut resp2, false);
    assert_eq!(
        Frame::check(&resp2, Limits::default()),
        Ok(resp2.len()),
        "the RESP2 encoding of {frame:?}"
    );
}

fn has_cr_in_error(frame: &Frame) -> bool {
    match frame {
        Frame::Error(text) => text.contains(&b'\r'),
        Frame::Array(items) | Frame::Set(items) | Frame::Push(items) => {
            items.iter().any(has_cr_in_error)
        }
        Frame::Map(pairs) => pairs
            .iter()
            .any(|(k, v)| has_cr_in_error(k) || has_cr_in_error(v)),
        _ => false,
    }
}

/// What the request parser made of a stream, command by command.
#[derive(Debug, PartialEq)]
enum Outcome {
    Command(Vec<Vec<u8>>, usize),
    Empty(usize),
    Incomplete,
    Error(ProtocolError),
}

fn requests(data: &[u8]) {
    let at_once = parse_requests(data, &mut [data.len()].into_iter());
    let in_reads = parse_requests(data, &mut READS.into_iter().cycle());
    assert_eq!(
        at_once, in_reads,
        "reads of other sizes change the commands"
    );
    let mut at = 0;
    for outcome in &at_once {
        let (args, consumed) = match outcome {
            Outcome::Command(args, consumed) => (args, *consumed),
            Outcome::Empty(consumed) => {
                at += consumed;
                continue;
            }
            _ => break,
        };
        let rest = &data[at..at + consumed];
        if rest.first() == Some(&b'*') {
            let as_frame = Frame::parse(&Bytes::copy_from_slice(rest), Limits::default());
            let bulks = args.iter().map(|a| Frame::Bulk(Bytes::copy_from_slice(a)));
            assert_eq!(
                as_frame,
                Ok((Frame::Array(bulks.collect()), consumed)),
                "a multibulk command is not the array of bulks RESP reads"
            );
        }
        at += consumed;
    }
}

/// Feeds `data` to a fresh parser as a connection does, in reads of the
/// sizes `reads` yields, until the data runs out or an error.
fn parse_requests(data: &[u8], reads: &mut impl Iterator<Item = usize>) -> Vec<Outcome> {
    let mut parser = RequestParser::new(MAX_BULK);
    let mut outcomes = Vec::new();
    // The unconsumed bytes received so far: `data[window]`.
    let mut window: Range<usize> = 0..0;
    let mut need = 0;
    loop {
        let buf = &data[window.clone()];
        let parsed = parser.parse(buf);
        if buf.len() < need {
            assert!(
                matches!(parsed, Ok(Parsed::Incomplete { .. })),
                "{parsed:?} before the {need} bytes promised"
            );
        }
        match parsed {
            Ok(Parsed::Command { consumed }) => {
                assert!(consumed > 0 && consumed <= buf.len());
                let args = parser.args(buf).iter().map(<[u8]>::to_vec).collect();
                outcomes.push(Outcome::Command(args, consumed));
                window.start += consumed;
                need = 0;
            }
            Ok(Parsed::Empty { consumed }) => {
                assert!(consumed > 0 && consumed <= buf.len());
                outcomes.push(Outcome::Empty(consumed));
                window.start += consumed;
                need = 0;
            }
            Ok(Parsed::Incomplete { need: n }) => {
                assert!(n > buf.len(), "need {n} with {} bytes held", buf.len());
                need = n;
                if window.end == data.len() {
                    outcomes.push(Outcome::Incomplete);
                    return outcomes;
                }
                let read = reads.next().unwrap_or(data.len());
                window.end = (window.end + read).min(data.len());
            }
            Err(e) => {
                outcomes.push(Outcome::Error(e));
                return outcomes;
            }
        }
    }
}
