//! Replays the committed fuzz corpora `fuzz/corpus/resp` and
//! `fuzz/corpus/commands` through the bodies of the `resp` and `commands`
//! fuzz targets (`emberkv_server::fuzzing::resp` and `::commands`), so
//! that every input the fuzzer kept, and every input that once crashed,
//! is checked by `cargo test` on a stable toolchain. `write_seeds`
//! (ignored; `scripts/fuzz.sh seed` runs it) writes the seed inputs.

use std::fs;
use std::path::{Path, PathBuf};

use emberkv_server::frame::Frame;
use emberkv_server::fuzzing;

fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target)
}

/// Runs every file of `fuzz/corpus/TARGET` through `body`.
fn replay(target: &str, body: fn(&[u8])) {
    let mut inputs: Vec<PathBuf> = fs::read_dir(corpus_dir(target))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    inputs.sort();
    assert!(!inputs.is_empty(), "the {target} corpus is empty");
    for path in inputs {
        eprintln!("{}", path.display());
        body(&fs::read(&path).unwrap());
    }
}

#[test]
fn resp_corpus_replays() {
    replay("resp", fuzzing::resp);
}

#[test]
fn commands_corpus_replays() {
    replay("commands", fuzzing::commands);
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

/// Scripts for `commands`: a flags byte (bit 0: HELLO 3 first), then
/// commands split at newlines and arguments at spaces.
fn command_seeds() -> Vec<Vec<u8>> {
    [
        &b"\0SET a 1\nGET a\nINCR a\nINCRBY a -5\nDECRBY a 3\nDECR a\nGET a\nDEL a b\nEXISTS a a b"[..],
        b"\x01SET a hello\nAPPEND a _world\nSTRLEN a\nGETRANGE a 0 4\nGETRANGE a -5 -1\nSUBSTR a 3 -100\nSETRANGE a 20 xyz\nGET a\nSETRANGE b 3 q\nGETRANGE b 0 -1",
        b"\0MSET a 1 b 2 c 3\nMGET a b c d\nMSETNX c 9 d 4\nMSETNX d 4 e 5\nDBSIZE\nGETSET a x\nGETDEL b\nGETDEL b\nSETNX b y\nSETNX b z\nTYPE b\nTYPE zz\nFLUSHDB\nDBSIZE",
        b"\x01SET a v\nRENAME a b\nRENAME a b\nRENAMENX b b\nSET c w\nRENAMENX b c\nCOPY b d\nCOPY b c\nCOPY b c REPLACE\nCOPY b b\nCOPY b d DB 0\nKEYS *",
        b"\0SET a 1 NX\nSET a 2 XX GET\nSET b 3 XX\nSET b 3 NX GET\nSET a 4 KEEPTTL\nSET a 5 NX XX\nSET a 6 EX 100\nTTL a\nSET c 7 PX 1\nPERSIST a\nGET a\nSET a 8\nTTL a\nPTTL a",
        b"\0INCR a\nINCRBY a 9223372036854775806\nINCR a\nDECRBY a -9223372036854775808\nSET b 01\nINCR b\nSET b -0\nINCR b\nSET b 1.5\nINCRBYFLOAT b 1e3\nINCR b\nGETRANGE b x 1",
        b"\x01MULTI\nSET a 1\nINCR a\nGET nokey\nEXEC\nWATCH a\nSET a 2\nMULTI\nGET a\nEXEC\nUNWATCH\nDISCARD",
        b"\0SETBIT a 7 1\nGETBIT a 7\nBITCOUNT a\nBITPOS a 1\nBITFIELD a SET u8 #1 255 GET u4 0 INCRBY i8 100 1\nBITOP OR c a b\nLCS a c\nSCAN 0 COUNT 10\nRANDOMKEY\nEXPIRE c 100\nEXPIRETIME c\nGETEX c PERSIST\nTTL c",
        b"\0PING\nPING hi\nECHO x\nHELLO 3\nCLIENT SETNAME fz\nCLIENT GETNAME\nCLIENT INFO\nCONFIG GET maxclients\nCOMMAND COUNT\nINFO keyspace\nHELLO 2\nDBSIZE\nNOPE x\nGET\nQUIT\nGET a",
    ]
    .iter()
    .map(|s| s.to_vec())
    .collect()
}

#[test]
#[ignore = "writes fuzz/corpus; run by scripts/fuzz.sh seed"]
fn write_seeds() {
    for (i, seed) in seeds().into_iter().enumerate() {
        fuzzing::resp(&seed);
        fs::write(corpus_dir("resp").join(format!("seed-{i:02}")), seed).unwrap();
    }
    fs::create_dir_all(corpus_dir("commands")).unwrap();
    for (i, seed) in command_seeds().into_iter().enumerate() {
        fuzzing::commands(&seed);
        fs::write(corpus_dir("commands").join(format!("seed-{i:02}")), seed).unwrap();
    }
}
