//! The wire: pipelining, binary data, inline commands, RESP3, and bad
//! input (each gets Redis's error and a closed connection, and harms
//! nobody else).

use std::io::{Read, Write};
use std::time::Duration;

use crate::common::*;
use emberkv_server::frame::Frame;

#[test]
fn pipeline_of_10000_commands_in_one_write() {
    let s = Server::start(&[]);
    let mut r = s.raw();
    let mut wire = Vec::new();
    let mut expect = Vec::new();
    for i in 0..10_000 {
        let key = format!("k{}", i % 1000);
        let words: Vec<Vec<u8>> = match i % 4 {
            0 => {
                expect.push(ok());
                vec![
                    b"SET".to_vec(),
                    key.into_bytes(),
                    format!("v{i}").into_bytes(),
                ]
            }
            1 => {
                expect.push(bulk(format!("v{}", i - 1).as_bytes()));
                vec![b"GET".to_vec(), format!("k{}", (i - 1) % 1000).into_bytes()]
            }
            2 => {
                expect.push(int((i / 4 + 1) as i64));
                vec![b"INCR".to_vec(), b"counter".to_vec()]
            }
            _ => {
                expect.push(simple("PONG"));
                vec![b"PING".to_vec()]
            }
        };
        Frame::command(words).encode(&mut wire, false);
    }
    // One write_all of the whole pipeline, from another thread, while this
    // one reads: the server must answer without waiting for us.
    let mut writer = r.stream.try_clone().unwrap();
    let len = wire.len();
    let t = std::thread::spawn(move || writer.write_all(&wire).map(|_| len));
    for (i, want) in expect.iter().enumerate() {
        let got = r.frame().expect("a reply");
        assert_eq!(&got, want, "reply {i}");
    }
    assert!(t.join().unwrap().unwrap() > 200_000);
    assert_eq!(r.q("DBSIZE"), int(251), "250 keys set plus the counter");
}

#[test]
fn pipeline_written_before_reading_does_not_deadlock() {
    // A client that writes everything before it reads a byte: the replies
    // (10,000 x 10 KiB = 100 MiB) exceed every socket buffer, so the server
    // must keep reading while its replies wait.
    let s = Server::start(&[]);
    let mut r = s.raw();
    let value = vec![b'x'; 10 * 1024];
    assert_eq!(r.call(&[b"SET", b"big", &value]), ok());
    let mut wire = Vec::new();
    for _ in 0..10_000 {
        Frame::command([&b"GET"[..], b"big"]).encode(&mut wire, false);
    }
    r.send(&wire);
    for _ in 0..10_000 {
        assert_eq!(r.frame().expect("reply"), bulk(&value));
    }
}

/// A client that writes its commands, shuts its side down and reads until
/// the server closes gets its replies and then the close, also when the
/// bytes and the shutdown reach the server together (it was stopped
/// meanwhile, as a busy server would be): the event loop's notification of
/// both was one, its read of the bytes was short, and it never read the
/// end, so the client waited for ever.
#[test]
fn a_client_that_shuts_its_side_down_gets_its_replies_and_the_close() {
    let s = Server::start(&[]);
    for tcp in [false, true] {
        let mut client: Box<dyn ReadWriteShutdown> = if tcp {
            Box::new(std::net::TcpStream::connect(("127.0.0.1", s.port)).unwrap())
        } else {
            Box::new(std::os::unix::net::UnixStream::connect(&s.sock).unwrap())
        };
        client.timeout(Duration::from_secs(20));
        // Served once, so that the server has the connection registered.
        client.write_all(b"PING\r\n").unwrap();
        let mut pong = [0; 7];
        client.read_exact(&mut pong).unwrap();
        s.signal(libc::SIGSTOP);
        client.write_all(b"PING\r\nPING\r\n").unwrap();
        client.shut_write();
        std::thread::sleep(Duration::from_millis(100));
        s.signal(libc::SIGCONT);
        let mut rest = Vec::new();
        client
            .read_to_end(&mut rest)
            .expect("the server closes the connection");
        assert_eq!(rest, b"+PONG\r\n+PONG\r\n", "tcp: {tcp}");
    }
}

/// A socket whose write side can be shut down.
trait ReadWriteShutdown: std::io::Read + Write {
    fn shut_write(&self);
    fn timeout(&self, t: Duration);
}

impl ReadWriteShutdown for std::net::TcpStream {
    fn shut_write(&self) {
        self.shutdown(std::net::Shutdown::Write).unwrap();
    }
    fn timeout(&self, t: Duration) {
        self.set_read_timeout(Some(t)).unwrap();
    }
}

impl ReadWriteShutdown for std::os::unix::net::UnixStream {
    fn shut_write(&self) {
        self.shutdown(std::net::Shutdown::Write).unwrap();
    }
    fn timeout(&self, t: Duration) {
        self.set_read_timeout(Some(t)).unwrap();
    }
}

#[test]
fn binary_keys_and_values_with_crlf_and_nul() {
    let s = Server::start(&[]);
    let mut r = s.raw_unix();
    let key: &[u8] = b"k\r\n\0\xff*";
    let value: &[u8] = b"\r\n$3\r\n\0\0\r\nend\r";
    assert_eq!(r.call(&[b"SET", key, value]), ok());
    assert_eq!(r.call(&[b"GET", key]), bulk(value));
    assert_eq!(r.call(&[b"STRLEN", key]), int(value.len() as i64));
    assert_eq!(
        r.call(&[b"APPEND", key, b"\0"]),
        int(value.len() as i64 + 1)
    );
    assert_eq!(r.call(&[b"KEYS", b"k\r\n*"]), array(vec![bulk(key)]));
    assert_eq!(r.call(&[b"MSET", b"\0", b"\0\0", b"", b"empty-key"]), ok());
    assert_eq!(
        r.call(&[b"MGET", b"\0", b""]),
        array(vec![bulk(b"\0\0"), bulk(b"empty-key")])
    );
    assert_eq!(r.call(&[b"SET", b"e", b""]), ok());
    assert_eq!(r.call(&[b"GET", b"e"]), bulk(b""));

    // The same through the redis crate.
    let mut con = s.conn();
    let got: Vec<u8> = redis::cmd("GET").arg(key).query(&mut con).unwrap();
    assert_eq!(got, [value, b"\0"].concat());
    let _: () = redis::cmd("SET")
        .arg(&b"\x00\r\n"[..])
        .arg(&b"\r\n\x00"[..])
        .query(&mut con)
        .unwrap();
    let got: Vec<u8> = redis::cmd("GET")
        .arg(&b"\x00\r\n"[..])
        .query(&mut con)
        .unwrap();
    assert_eq!(got, b"\r\n\x00");
}

#[test]
fn inline_commands() {
    let s = Server::start(&[]);
    let mut r = s.raw();
    r.send(b"PING\r\n");
    assert_eq!(r.frame(), Some(simple("PONG")));
    r.send(b"SET greeting \"hello world\\n\"\r\nGET greeting\n\r\n   \r\nECHO 'it''s'\r\n");
    assert_eq!(r.frame(), Some(ok()));
    assert_eq!(r.frame(), Some(bulk(b"hello world\n")));
    assert_eq!(
        r.frame(),
        Some(error("ERR Protocol error: unbalanced quotes in request"))
    );
    assert!(r.closed());
}

#[test]
fn resp3_frames_on_the_wire() {
    let s = Server::start(&[]);
    let mut r = s.raw();
    r.send(b"*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n");
    let mut buf = Vec::new();
    // Read the raw bytes of the HELLO reply: it must be a RESP3 map.
    let mut chunk = [0u8; 4096];
    use std::io::Read;
    while !buf.ends_with(b"*0\r\n") {
        let n = r.stream.read(&mut chunk).unwrap();
        assert!(n > 0);
        buf.extend_from_slice(&chunk[..n]);
    }
    assert!(
        buf.starts_with(b"%7\r\n$6\r\nserver\r\n$5\r\nredis\r\n"),
        "{:?}",
        String::from_utf8_lossy(&buf)
    );
    r.send(b"*2\r\n$3\r\nGET\r\n$1\r\nx\r\n");
    let n = r.stream.read(&mut chunk).unwrap();
    assert_eq!(&chunk[..n], b"_\r\n");
}

/// Sends `wire` and expects, in order, `replies`, then `last_error`, then
/// the connection closed.
fn expect_protocol_error(s: &Server, wire: &[u8], replies: &[Frame], last_error: &str) {
    let mut r = s.raw();
    r.send(wire);
    for want in replies {
        assert_eq!(
            r.frame().as_ref(),
            Some(want),
            "{:?}",
            String::from_utf8_lossy(wire)
        );
    }
    assert_eq!(
        r.frame(),
        Some(error(last_error)),
        "{:?}",
        String::from_utf8_lossy(wire)
    );
    assert!(
        r.closed(),
        "closed after {:?}",
        String::from_utf8_lossy(wire)
    );
}

#[test]
fn malformed_resp_gets_a_protocol_error_and_a_close() {
    let s = Server::start(&[]);
    let cases: Vec<(&[u8], &str)> = vec![
        (b"*1\r\n:1\r\n", "ERR Protocol error: expected '$', got ':'"),
        (b"*x\r\n", "ERR Protocol error: invalid multibulk length"),
        (b"*1\r\n$-3\r\n", "ERR Protocol error: invalid bulk length"),
        (b"*1\r\n$abc\r\n", "ERR Protocol error: invalid bulk length"),
        (b"*1\r\n$3\r\nGETXX", "ERR Protocol error: expected CRLF"),
        (
            b"*3000000000\r\n",
            "ERR Protocol error: invalid multibulk length",
        ),
        // A bulk above 512 MB is refused from its header alone.
        (
            b"*2\r\n$3\r\nSET\r\n$536870913\r\n",
            "ERR Protocol error: invalid bulk length",
        ),
    ];
    for (wire, want) in cases {
        expect_protocol_error(&s, wire, &[], want);
    }
    // Commands before the bad one are answered first.
    expect_protocol_error(
        &s,
        b"*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nECHO\r\n$2\r\nhi\r\n*1\r\n?x\r\n",
        &[simple("PONG"), bulk(b"hi")],
        "ERR Protocol error: expected '$', got '?'",
    );
    // A count line with no newline within 64 KiB.
    let mut long = b"*".to_vec();
    long.extend(std::iter::repeat_n(b'1', 70_000));
    expect_protocol_error(
        &s,
        &long,
        &[],
        "ERR Protocol error: too big mbulk count string",
    );
    let long = vec![b'a'; 70_000];
    expect_protocol_error(&s, &long, &[], "ERR Protocol error: too big inline request");
}

#[test]
fn bad_client_does_not_affect_others_or_the_store() {
    let s = Server::start(&[]);
    let mut good = s.raw();
    assert_eq!(good.q("SET k v"), ok());
    for garbage in [
        &b"*1\r\n$-9\r\n"[..],
        b"\x00\x01\x02\r\n\"",
        b"*2\r\n$3\r\nGET",
    ] {
        let mut bad = s.raw();
        bad.send(garbage);
        // The truncated one stays open until it goes away; the others close.
        drop(bad);
        assert_eq!(good.q("GET k"), bulk(b"v"));
    }
    // A client that disconnects mid-bulk.
    let mut bad = s.raw();
    bad.send(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$100\r\npartial");
    drop(bad);
    assert_eq!(good.q("GET k"), bulk(b"v"), "a half-sent SET never applies");
    assert_eq!(good.q("DBSIZE"), int(1));
}

#[test]
fn query_buffer_limit_closes_the_client() {
    let s = Server::start(&["--client-query-buffer-limit", "1mb"]);
    let mut r = s.raw();
    // A 2 MB bulk is a legal length, but the buffer passes 1 MB first.
    r.send(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2000000\r\n");
    let chunk = vec![b'x'; 64 * 1024];
    let mut sent = 0;
    while sent < 1_500_000 {
        if r.stream.write_all(&chunk).is_err() {
            break; // the server closed on us: fine
        }
        sent += chunk.len();
    }
    let reply = r.frame().expect("an error reply");
    let text = String::from_utf8(as_bytes(&reply)).unwrap();
    assert!(
        text.starts_with("ERR Protocol error: query buffer of"),
        "{text}"
    );
    assert!(text.contains("client-query-buffer-limit"));
    let mut other = s.raw();
    assert_eq!(other.q("EXISTS k"), int(0));
}

#[test]
fn proto_max_bulk_len_is_configurable() {
    let s = Server::start(&["--proto-max-bulk-len", "1mb"]);
    expect_protocol_error(
        &s,
        b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1048577\r\n",
        &[],
        "ERR Protocol error: invalid bulk length",
    );
    let mut r = s.raw();
    assert_eq!(r.q("APPEND k x"), int(1));
    assert_eq!(
        r.q("SETRANGE k 1048576 x"),
        error("ERR string exceeds maximum allowed size (proto-max-bulk-len)")
    );
}

#[test]
fn values_above_the_engine_limit_are_refused_cleanly() {
    let s = Server::start(&[]);
    let mut r = s.raw();
    let big = vec![b'v'; (64 << 20) + 1];
    let reply = r.call(&[b"SET", b"big", &big]);
    let text = String::from_utf8(as_bytes(&reply)).unwrap();
    assert!(
        text.starts_with("ERR value of 67108865 bytes exceeds the limit"),
        "{text}"
    );
    assert_eq!(r.q("EXISTS big"), int(0));
    let key = vec![b'k'; (64 << 10) + 1];
    let reply = r.call(&[b"SET", &key, b"v"]);
    assert!(as_bytes(&reply).starts_with(b"ERR key of 65537 bytes"));
    // No such key can exist: reads find nothing and removals remove
    // nothing, in and out of MULTI (DEL and PERSIST answered the key's
    // length error).
    assert_eq!(r.call(&[b"GET", &key]), Frame::Null);
    assert_eq!(r.call(&[b"EXISTS", &key]), int(0));
    assert_eq!(r.call(&[b"DEL", &key]), int(0));
    assert_eq!(r.call(&[b"UNLINK", &key, b"big"]), int(0));
    assert_eq!(r.call(&[b"PERSIST", &key]), int(0));
    assert_eq!(r.call(&[b"GETDEL", &key]), Frame::Null);
    assert_eq!(r.q("MULTI"), ok());
    assert_eq!(r.call(&[b"DEL", &key]), simple("QUEUED"));
    assert_eq!(r.call(&[b"PERSIST", &key]), simple("QUEUED"));
    assert_eq!(r.q("EXEC"), array(vec![int(0), int(0)]));
    assert_eq!(r.q("PING"), simple("PONG"));
}

/// A bulk announced near `i64::MAX` (with `proto-max-bulk-len` raised that
/// far) takes memory only as its bytes arrive: the attack's exact input
/// panicked the connection's task ("capacity overflow") three times, and
/// each left a client behind in INFO's count and CLIENT LIST.
#[test]
fn a_bulk_announced_near_i64_max_is_read_as_it_arrives() {
    let s = Server::start(&[]);
    let mut a = s.raw();
    assert_eq!(
        a.q("CONFIG SET proto-max-bulk-len 9223372036854775807"),
        ok()
    );
    for _ in 0..3 {
        let mut b = s.raw();
        b.send(b"*2\r\n$4\r\necho\r\n$9223372036854775800\r\nabc");
        assert_eq!(a.q("PING"), simple("PONG"));
        drop(b);
    }
    assert!(eventually(5, || {
        String::from_utf8(as_bytes(&a.q("INFO clients")))
            .unwrap()
            .contains("connected_clients:1\r\n")
    }));
    assert_eq!(a.q("ECHO still"), bulk(b"still"));
    assert!(!s.log().contains("panic"), "{}", s.log());
}
