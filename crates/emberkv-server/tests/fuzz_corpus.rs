//! Replays the committed fuzz corpus `fuzz/corpus/resp` through the body
//! of the `resp` fuzz target (`emberkv_server::fuzzing::resp`), so that
//! every input the fuzzer kept, and every input that once crashed, is
//! checked by `cargo test` on a stable toolchain. `write_seeds` (ignored;
//! `scripts/fuzz.sh seed` runs it) writes the seed inputs.

use std::fs;
use std::path::{Path, PathBuf};

use emberkv_server::frame::Frame;
use emberkv_server::fuzzing;

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/resp")
}

#[test]
fn resp_corpus_replays() {
    let mut inputs: Vec<PathBuf> = fs::read_dir(corpus_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    inputs.sort();
    assert!(!inputs.is_empty(), "the resp corpus is empty");
    for path in inputs {
        eprintln!("{}", path.display());
        fuzzing::resp(&fs::read(&path).unwrap());
    }
}

/// Requests as clients send them (multibulk, pipelined, inline with
/// Redis's quoting) and replies of every RESP2 and RESP3 type.
fn seeds() -> Vec<Vec<u8>> {
    let mut seeds: Vec<Vec<u8>> = [
        &b"*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n"[..],
        b"*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nECHO\r\n$0\r\n\r\n",
        b"*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n",
        b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$6\r\na\r\n\0\rb\r\n",
        b"*0\r\n*-1\r\n\r\n",
        b"PING\r\nSET \"a b\" 'it\\'s' \"\\x41\\n\"\r\n  \n",
        b"+OK\r\n",
        b"-ERR unknown command\r\n",
        b"!9\r\nERR x\r\ny\r\n",
        b":-9223372036854775808\r\n",
        b"$-1\r\n",
        b"_\r\n",
        b"%2\r\n+first\r\n:1\r\n$6\r\nsecond\r\n~2\r\n#t\r\n#f\r\n",
        b">2\r\n$7\r\nmessage\r\n,-1.5e300\r\n",
        b"*4\r\n,inf\r\n,nan\r\n(-12345678901234567890\r\n=8\r\ntxt:abcd\r\n",
        b"|1\r\n+ttl\r\n:3600\r\n*1\r\n$1\r\nv\r\n",
        b"*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*0\r\n",
        b"$5\r\nhello\r\n$3\r\nfoo",
    ]
    .iter()
    .map(|s| s.to_vec())
    .collect();
    let mut encoded = Vec::new();
    Frame::command(["MSET", "a", "1", "b", "2"]).encode(&mut encoded, false);
    seeds.push(encoded);
    seeds
}

#[test]
#[ignore = "writes fuzz/corpus; run by scripts/fuzz.sh seed"]
fn write_seeds() {
    for (i, seed) in seeds().into_iter().enumerate() {
        fuzzing::resp(&seed);
        fs::write(corpus_dir().join(format!("seed-{i:02}")), seed).unwrap();
    }
}
