//! MULTI, EXEC, DISCARD, WATCH, UNWATCH: Redis 7's replies, watched keys
//! changed by other clients, isolation of EXEC from concurrent clients,
//! and EXEC's writes across a SIGKILL. (redis-py's pipeline() and
//! transaction() are exercised by tests/python/client_check.py.)

use std::io::Read;
use std::net::TcpStream;

use crate::common::*;
use emberkv_server::frame::Frame;
use emberkv_server::store::stripe_of;

/// Sends `line` and reads exactly the bytes of `expected` (to tell `*-1`
/// from `$-1`, which frames do not).
fn wire(r: &mut Raw<TcpStream>, line: &str, expected: &[u8]) {
    let words: Vec<&[u8]> = line.split_whitespace().map(str::as_bytes).collect();
    r.cmd(&words);
    let mut got = vec![0; expected.len()];
    r.stream.read_exact(&mut got).expect("a reply");
    assert_eq!(
        String::from_utf8_lossy(&got),
        String::from_utf8_lossy(expected)
    );
}

fn queued() -> Frame {
    simple("QUEUED")
}

/// SAVE and SHUTDOWN are refused after MULTI and fail the transaction,
/// as redis-server 7.0.15 does; SHUTDOWN used to be queued, and EXEC ran
/// the queue and shut the server down (an audit against issue 6).
#[test]
fn save_and_shutdown_are_refused_inside_a_transaction() {
    let s = Server::start(&[]);
    let mut r = s.raw();
    for refused in ["SAVE", "SHUTDOWN", "SHUTDOWN NOSAVE"] {
        assert_eq!(r.q("MULTI"), ok());
        assert_eq!(r.q("SET a 2"), queued());
        assert_eq!(
            r.q(refused),
            error("ERR Command not allowed inside a transaction"),
            "{refused}"
        );
        assert_eq!(
            r.q("EXEC"),
            error("EXECABORT Transaction discarded because of previous errors.")
        );
    }
    assert_eq!(r.q("GET a"), Frame::Null);
    assert_eq!(r.q("MULTI"), ok());
    assert_eq!(r.q("BGSAVE"), queued(), "BGSAVE is queued, as in Redis");
    assert!(matches!(r.q("EXEC"), Frame::Array(_)));
    assert_eq!(r.q("PING"), simple("PONG"), "the server still runs");
}

/// Regression (the `commands` fuzz target, 2026-12-07): COMMAND alone
/// after MULTI looked for a subcommand that was not there and panicked
/// the connection; it is queued and runs at EXEC, as in Redis. A container
/// command's missing or unknown subcommand still fails the transaction.
#[test]
fn a_container_command_alone_is_queued_inside_a_transaction() {
    let s = Server::start(&[]);
    let mut r = s.raw();
    assert_eq!(r.q("MULTI"), ok());
    assert_eq!(r.q("COMMAND"), queued());
    match r.q("EXEC") {
        Frame::Array(replies) => {
            assert_eq!(replies.len(), 1);
            // COMMAND's reply outside a transaction: one entry a command.
            let alone = match r.q("COMMAND") {
                Frame::Array(commands) => commands.len(),
                _ => 0,
            };
            assert!(alone > 10, "COMMAND lists {alone} commands");
            assert!(
                matches!(&replies[0], Frame::Array(commands) if commands.len() == alone),
                "COMMAND inside the transaction replied otherwise"
            );
        }
        _ => panic!("EXEC did not reply with an array"),
    }
    assert_eq!(r.q("MULTI"), ok());
    assert!(matches!(r.q("CONFIG"), Frame::Error(_)));
    assert!(matches!(r.q("COMMAND NOSUCH"), Frame::Error(_)));
    assert_eq!(
        r.q("EXEC"),
        error("EXECABORT Transaction discarded because of previous errors.")
    );
    assert_eq!(r.q("PING"), simple("PONG"), "the connection still runs");
}

#[test]
fn queued_commands_run_at_exec_with_redis_replies() {
    let s = Server::start(&[]);
    let mut r = s.raw();
    assert_eq!(r.q("MULTI"), ok());
    assert_eq!(r.q("SET a 1"), queued());
    assert_eq!(r.q("INCR a"), queued());
    assert_eq!(r.q("GET a"), queued());
    assert_eq!(r.q("EXEC"), array(vec![ok(), int(2), bulk(b"2")]));
    assert_eq!(r.q("EXEC"), error("ERR EXEC without MULTI"));
    assert_eq!(r.q("DISCARD"), error("ERR DISCARD without MULTI"));
    assert_eq!(r.q("MULTI"), ok());
    assert_eq!(r.q("EXEC"), array(vec![]), "an empty transaction");

    // A nested MULTI is refused without failing the transaction.
    assert_eq!(r.q("MULTI"), ok());
    assert_eq!(r.q("MULTI"), error("ERR MULTI calls can not be nested"));
    assert_eq!(r.q("SET b 1"), queued());
    assert_eq!(r.q("EXEC"), array(vec![ok()]));

    // An error at run time is that command's entry; the others run.
    assert_eq!(r.q("MULTI"), ok());
    assert_eq!(r.q("SET s x"), queued());
    assert_eq!(r.q("INCR s"), queued());
    assert_eq!(r.q("SET t 1"), queued());
    assert_eq!(
        r.q("EXEC"),
        array(vec![
            ok(),
            error("ERR value is not an integer or out of range"),
            ok()
        ])
    );
    assert_eq!(r.q("GET t"), bulk(b"1"));

    // Errors while queuing: EXECABORT, nothing runs, MULTI is over.
    assert_eq!(r.q("MULTI"), ok());
    assert_eq!(r.q("SET k v"), queued());
    assert_eq!(
        r.q("NOSUCH x"),
        error("ERR unknown command 'NOSUCH', with args beginning with: 'x' ")
    );
    assert_eq!(
        r.q("SET k"),
        error("ERR wrong number of arguments for 'set' command")
    );
    assert_eq!(r.q("SET k2 v"), queued(), "still queuing");
    assert_eq!(
        r.q("EXEC"),
        error("EXECABORT Transaction discarded because of previous errors.")
    );
    assert_eq!(r.q("EXISTS k k2"), int(0));
    assert_eq!(r.q("EXEC"), error("ERR EXEC without MULTI"));

    // DISCARD drops the queue.
    assert_eq!(r.q("MULTI"), ok());
    assert_eq!(r.q("SET d 1"), queued());
    assert_eq!(r.q("DISCARD"), ok());
    assert_eq!(r.q("GET d"), Frame::Null);

    // WATCH inside MULTI is refused, and does not fail the transaction.
    assert_eq!(r.q("MULTI"), ok());
    assert_eq!(
        r.q("WATCH a"),
        error("ERR WATCH inside MULTI is not allowed")
    );
    assert_eq!(r.q("UNWATCH"), queued(), "UNWATCH is queued, as in Redis");
    assert_eq!(r.q("EXEC"), array(vec![ok()]));
    assert_eq!(
        r.q("WATCH"),
        error("ERR wrong number of arguments for 'watch' command")
    );

    // CLIENT LIST shows a client in MULTI, and inside EXEC.
    assert_eq!(r.q("MULTI"), ok());
    assert_eq!(r.q("PING"), queued());
    assert_eq!(r.q("CLIENT INFO"), queued());
    let mut other = s.raw();
    let list = String::from_utf8(as_bytes(&other.q("CLIENT LIST"))).unwrap();
    assert!(list.contains("flags=x db=0"), "{list}");
    assert!(list.contains("multi=2"), "{list}");
    let replies = as_array(&r.q("EXEC"));
    assert_eq!(replies[0], simple("PONG"));
    let info = String::from_utf8(as_bytes(&replies[1])).unwrap();
    assert!(
        info.contains("multi=2") && info.contains("cmd=exec"),
        "{info}"
    );
    let list = String::from_utf8(as_bytes(&other.q("CLIENT LIST"))).unwrap();
    assert!(
        !list.contains("flags=x") && !list.contains("multi=2"),
        "{list}"
    );

    // Flag d: a key the client watches changed since its WATCH, so its
    // EXEC will fail; shown until EXEC, DISCARD or UNWATCH lets go of the
    // keys (Redis's CLIENT_DIRTY_CAS).
    let id = as_int(&r.q("CLIENT ID"));
    let flags_of_r = |other: &mut Raw<TcpStream>| other.client_field(id, "flags");
    for leave in ["EXEC", "DISCARD", "UNWATCH"] {
        assert_eq!(r.q("WATCH w unchanged"), ok());
        assert_eq!(flags_of_r(&mut other), "N");
        assert_eq!(other.q("SET unwatched 1"), ok());
        assert_eq!(flags_of_r(&mut other), "N", "a write of a key not watched");
        assert_eq!(other.q("SET w 1"), ok());
        assert_eq!(flags_of_r(&mut other), "d");
        if leave != "UNWATCH" {
            assert_eq!(r.q("MULTI"), ok());
            assert_eq!(flags_of_r(&mut other), "xd");
        }
        let reply = r.q(leave);
        assert_eq!(flags_of_r(&mut other), "N", "after {leave}");
        if leave == "EXEC" {
            assert_eq!(reply, Frame::Null, "EXEC of a dirty transaction");
        }
    }
    // A flush marks the watchers of the keys it removed only.
    assert_eq!(r.q("WATCH missing"), ok());
    assert_eq!(other.q("FLUSHDB"), ok());
    assert_eq!(flags_of_r(&mut other), "N", "the watched key did not exist");
    assert_eq!(other.q("SET w 1"), ok());
    assert_eq!(r.q("WATCH w"), ok());
    assert_eq!(flags_of_r(&mut other), "N");
    assert_eq!(other.q("FLUSHDB"), ok());
    assert_eq!(flags_of_r(&mut other), "d");
    assert_eq!(r.q("UNWATCH"), ok());
    // So does an expiry, as redis-server 7.0's deletion of the key.
    assert_eq!(other.q("SET e 1 PX 100"), ok());
    assert_eq!(r.q("WATCH e"), ok());
    while other.q("EXISTS e") == int(1) {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(flags_of_r(&mut other), "d");
    assert_eq!(r.q("UNWATCH"), ok());

    // QUIT inside MULTI closes at once.
    assert_eq!(r.q("MULTI"), ok());
    assert_eq!(r.q("SET q 1"), queued());
    assert_eq!(r.q("QUIT"), ok());
    assert!(r.closed());
    assert_eq!(other.q("EXISTS q"), int(0));
}

#[test]
fn a_transaction_sees_its_own_writes_and_keeps_expiries() {
    let s = Server::start(&[]);
    let mut r = s.raw();
    assert_eq!(r.q("SET old x"), ok());
    assert_eq!(r.q("SET counter 10 EX 1000"), ok());
    assert_eq!(r.q("MULTI"), ok());
    for line in [
        "INCR counter",
        "TTL counter",
        "SET t v EX 500",
        "APPEND t w",
        "GET t",
        "MSET m1 1 m2 2",
        "DEL old m2",
        "MGET old m1 m2",
        "DBSIZE",
        "KEYS m*",
        "PERSIST t",
        "SETNX m1 9",
        "GETDEL m1",
    ] {
        assert_eq!(r.q(line), queued(), "{line}");
    }
    let replies = as_array(&r.q("EXEC"));
    assert_eq!(replies[0], int(11));
    assert!((999..=1000).contains(&as_int(&replies[1])));
    assert_eq!(replies[2], ok());
    assert_eq!(replies[3], int(2));
    assert_eq!(replies[4], bulk(b"vw"));
    assert_eq!(replies[5], ok());
    assert_eq!(replies[6], int(2));
    assert_eq!(
        replies[7],
        array(vec![Frame::Null, bulk(b"1"), Frame::Null])
    );
    assert_eq!(replies[8], int(3), "counter, t, m1");
    assert_eq!(replies[9], bulks(&["m1"]));
    assert_eq!(replies[10], int(1));
    assert_eq!(replies[11], int(0));
    assert_eq!(replies[12], bulk(b"1"));

    assert_eq!(r.q("GET counter"), bulk(b"11"));
    assert!(as_int(&r.q("TTL counter")) > 990, "INCR kept the expiry");
    assert_eq!(r.q("GET t"), bulk(b"vw"));
    assert_eq!(r.q("TTL t"), int(-1));
    assert_eq!(r.q("EXISTS old m1 m2"), int(0));

    // FLUSHDB inside a transaction: later commands see an empty store.
    assert_eq!(r.q("MULTI"), ok());
    assert_eq!(r.q("FLUSHDB"), queued());
    assert_eq!(r.q("GET counter"), queued());
    assert_eq!(r.q("SET after 1"), queued());
    assert_eq!(r.q("DBSIZE"), queued());
    assert_eq!(r.q("EXEC"), array(vec![ok(), Frame::Null, ok(), int(1)]));
    assert_eq!(r.q("KEYS *"), bulks(&["after"]));

    // HELLO inside a transaction: the replies after it are RESP3.
    assert_eq!(r.q("MULTI"), ok());
    assert_eq!(r.q("HELLO 3"), queued());
    assert_eq!(r.q("GET missing"), queued());
    let replies = as_array(&r.q("EXEC"));
    assert!(matches!(replies[0], Frame::Map(_)), "{:?}", replies[0]);
    assert_eq!(replies[1], Frame::Null);
    assert!(matches!(r.q("HELLO"), Frame::Map(_)), "still RESP3");
}

/// Two keys on different stripes, so a write of one never touches the
/// other's version.
fn two_keys_on_two_stripes() -> (&'static str, &'static str) {
    let (w, other) = ("watched", "unrelated");
    assert_ne!(stripe_of(w.as_bytes()), stripe_of(other.as_bytes()));
    (w, other)
}

#[test]
fn watch_aborts_exec_when_another_client_changes_the_key() {
    let s = Server::start(&[]);
    let (w, other_key) = two_keys_on_two_stripes();
    let mut a = s.raw();
    let mut b = s.raw();
    // Each way another client can change the key aborts the EXEC, and the
    // aborted transaction runs nothing.
    let changes = [
        format!("SET {w} 1"),
        format!("DEL {w}"),
        format!("INCR {w}"),
        format!("APPEND {w} x"),
        format!("EXPIRE {w} 1000"),
        format!("PERSIST {w}"),
        format!("MSET x 1 {w} 2"),
        format!("GETDEL {w}"),
        format!("SET {w} 5 PX 100000"),
        "FLUSHDB".to_string(),
        "FLUSHALL".to_string(),
    ];
    for change in &changes {
        b.q(&format!("SET {w} 0 EX 1000"));
        assert_eq!(a.q(&format!("WATCH {w}")), ok());
        assert!(!matches!(b.q(change), Frame::Error(_)), "{change}");
        assert_eq!(a.q("MULTI"), ok());
        assert_eq!(a.q("SET z 1"), queued());
        wire(&mut a, "EXEC", b"*-1\r\n");
        assert_eq!(a.q("EXISTS z"), int(0), "after {change}");
    }

    // A key that did not exist and was created.
    b.q(&format!("DEL {w}"));
    assert_eq!(a.q(&format!("WATCH {w}")), ok());
    assert_eq!(b.q(&format!("SET {w} new")), ok());
    assert_eq!(a.q("MULTI"), ok());
    assert_eq!(a.q("EXEC"), Frame::Null);

    // The watching client's own write counts too (as in Redis).
    assert_eq!(a.q(&format!("WATCH {w}")), ok());
    assert_eq!(a.q(&format!("SET {w} mine")), ok());
    assert_eq!(a.q("MULTI"), ok());
    assert_eq!(a.q("EXEC"), Frame::Null);

    // Not an abort: writes of another key, reads, and writes that change
    // nothing (SET NX refused, DEL of a missing key).
    assert_eq!(a.q(&format!("WATCH {w}")), ok());
    assert_eq!(b.q(&format!("SET {other_key} 1")), ok());
    assert_eq!(b.q(&format!("GET {w}")), bulk(b"mine"));
    assert_eq!(b.q(&format!("SET {w} 2 NX")), Frame::Null);
    assert_eq!(b.q(&format!("PERSIST {w}")), int(0));
    assert_eq!(b.q("DEL nothing-here"), int(0));
    assert_eq!(a.q("MULTI"), ok());
    assert_eq!(a.q(&format!("SET {w} done")), queued());
    assert_eq!(a.q("EXEC"), array(vec![ok()]));
    assert_eq!(b.q(&format!("GET {w}")), bulk(b"done"));
}

/// A write of another key never aborts a watcher, not even of a key that
/// shares the watched key's lock stripe (a false alarm before the watched
/// keys had a table of their own); two clients watching one key each keep
/// their watch when the other lets go of its own.
#[test]
fn watch_counts_only_the_watched_key() {
    let s = Server::start(&[]);
    let w = "watched";
    let neighbour = (0u32..)
        .map(|i| format!("n{i}"))
        .find(|n| stripe_of(n.as_bytes()) == stripe_of(w.as_bytes()))
        .unwrap();
    let mut a = s.raw();
    let mut b = s.raw();
    let mut c = s.raw();
    assert_eq!(a.q(&format!("WATCH {w}")), ok());
    assert_eq!(c.q(&format!("WATCH {w}")), ok());
    assert_eq!(b.q(&format!("SET {neighbour} 1")), ok());
    assert_eq!(b.q(&format!("INCR {neighbour}")), int(2));
    assert_eq!(a.q("MULTI"), ok());
    assert_eq!(a.q("SET z 1"), queued());
    assert_eq!(a.q("EXEC"), array(vec![ok()]), "another key of the stripe");
    // `a` let go of its watch (EXEC); `c` still watches, and a write of
    // the key after that aborts it.
    drop(a);
    assert_eq!(b.q(&format!("SET {w} 1")), ok());
    assert_eq!(c.q("MULTI"), ok());
    assert_eq!(c.q("SET z 2"), queued());
    assert_eq!(c.q("EXEC"), Frame::Null);
    assert_eq!(c.q("GET z"), bulk(b"1"));
}

#[test]
fn watch_aborts_exec_when_the_key_expires() {
    let s = Server::start(&[]);
    let mut a = s.raw();
    let mut b = s.raw();
    assert_eq!(a.q("SET w v PX 200"), ok());
    assert_eq!(a.q("WATCH w"), ok());
    assert!(eventually(10, || b.q("EXISTS w") == int(0)));
    assert_eq!(a.q("MULTI"), ok());
    assert_eq!(a.q("SET z 1"), queued());
    assert_eq!(a.q("EXEC"), Frame::Null);
    assert_eq!(a.q("EXISTS z"), int(0));
}

/// A watched key that expired and was then created again by a BITFIELD
/// whose writes all failed (it grows the value to hold them) is a change:
/// redis-server aborts the EXEC (the expiry signals it); EXEC here found
/// the key existing as at WATCH and ran it before that BITFIELD counted.
#[test]
fn watch_aborts_exec_when_an_expired_key_is_recreated_by_a_failed_bitfield() {
    let s = Server::start(&[]);
    let mut a = s.raw();
    let mut b = s.raw();
    assert_eq!(a.q("SET j a PX 100"), ok());
    assert_eq!(a.q("WATCH j"), ok());
    assert!(eventually(10, || b.q("EXISTS j") == int(0)));
    assert_eq!(
        b.q("BITFIELD j OVERFLOW FAIL INCRBY u8 0 300"),
        array(vec![Frame::Null])
    );
    assert_eq!(a.q("MULTI"), ok());
    assert_eq!(a.q("SET j mine"), queued());
    assert_eq!(a.q("EXEC"), Frame::Null);
    assert_eq!(a.q("GET j"), bulk(b"\0"));
}

#[test]
fn exec_discard_and_unwatch_forget_the_watched_keys() {
    let s = Server::start(&[]);
    let mut a = s.raw();
    let mut b = s.raw();
    let empty = array(vec![]);
    assert_eq!(a.q("WATCH w"), ok());
    assert_eq!(a.q("UNWATCH"), ok());
    assert_eq!(b.q("SET w 1"), ok());
    assert_eq!(a.q("MULTI"), ok());
    assert_eq!(a.q("EXEC"), empty);

    assert_eq!(a.q("WATCH w"), ok());
    assert_eq!(a.q("MULTI"), ok());
    assert_eq!(a.q("DISCARD"), ok());
    assert_eq!(b.q("SET w 2"), ok());
    assert_eq!(a.q("MULTI"), ok());
    assert_eq!(a.q("EXEC"), empty);

    assert_eq!(a.q("WATCH w"), ok());
    assert_eq!(a.q("MULTI"), ok());
    assert_eq!(a.q("EXEC"), empty);
    assert_eq!(b.q("SET w 3"), ok());
    assert_eq!(a.q("MULTI"), ok());
    assert_eq!(a.q("EXEC"), empty, "the last EXEC cleared the watch");

    // EXECABORT clears them too; EXEC without MULTI does not.
    assert_eq!(a.q("WATCH w"), ok());
    assert_eq!(a.q("EXEC"), error("ERR EXEC without MULTI"));
    assert_eq!(b.q("SET w 4"), ok());
    assert_eq!(a.q("MULTI"), ok());
    assert_eq!(a.q("EXEC"), Frame::Null, "still watching");
    assert_eq!(a.q("WATCH w"), ok());
    assert_eq!(a.q("MULTI"), ok());
    assert!(matches!(a.q("NOSUCH"), Frame::Error(_)));
    assert!(matches!(a.q("EXEC"), Frame::Error(_)));
    assert_eq!(b.q("SET w 5"), ok());
    assert_eq!(a.q("MULTI"), ok());
    assert_eq!(a.q("EXEC"), empty);
}

#[test]
fn aborted_exec_is_a_resp3_null() {
    let s = Server::start(&[]);
    let mut a = s.raw();
    let mut b = s.raw();
    assert!(matches!(a.q("HELLO 3"), Frame::Map(_)));
    assert_eq!(a.q("WATCH w"), ok());
    assert_eq!(b.q("SET w 1"), ok());
    assert_eq!(a.q("MULTI"), ok());
    wire(&mut a, "EXEC", b"_\r\n");
}

#[test]
fn the_queue_is_capped_at_the_query_buffer_limit() {
    let s = Server::start(&["--client-query-buffer-limit", "1mb"]);
    let mut r = s.raw();
    let big = vec![b'x'; 600 * 1024];
    assert_eq!(r.q("MULTI"), ok());
    assert_eq!(r.call(&[b"SET", b"a", &big]), queued());
    let refused = r.call(&[b"SET", b"b", &big]);
    assert!(
        matches!(&refused, Frame::Error(e) if e.starts_with(b"ERR the commands queued since MULTI exceed")),
        "{refused:?}"
    );
    assert_eq!(
        r.q("EXEC"),
        error("EXECABORT Transaction discarded because of previous errors.")
    );
    assert_eq!(r.q("EXISTS a b"), int(0));
}

#[test]
fn transaction_commands_in_command_info_and_docs() {
    let s = Server::start(&[]);
    let mut r = s.raw();
    let info = as_array(&r.q("COMMAND INFO multi exec discard watch unwatch"));
    let expect = [
        ("multi", 1, (0, 0, 0)),
        ("exec", 1, (0, 0, 0)),
        ("discard", 1, (0, 0, 0)),
        ("watch", -2, (1, -1, 1)),
        ("unwatch", 1, (0, 0, 0)),
    ];
    for (entry, (name, arity, (first, last, step))) in info.iter().zip(expect) {
        let e = as_array(entry);
        assert_eq!(e[0], bulk(name.as_bytes()));
        assert_eq!(e[1], int(arity), "{name}");
        assert!(sorted(&e[2]).contains(&"noscript".to_string()), "{name}");
        assert_eq!((&e[3], &e[4], &e[5]), (&int(first), &int(last), &int(step)));
        assert!(
            sorted(&e[6]).contains(&"@transaction".to_string()),
            "{name}"
        );
    }
    let docs = as_array(&r.q("COMMAND DOCS watch"));
    assert_eq!(docs[0], bulk(b"watch"));
    assert!(as_array(&docs[1]).contains(&bulk(b"transactions")));
    let list = as_array(&r.q("COMMAND LIST"));
    for name in ["multi", "exec", "discard", "watch", "unwatch"] {
        assert!(list.contains(&bulk(name.as_bytes())), "{name}");
    }
    // COMMAND COUNT counts commands; LIST gives subcommands too.
    let commands = list.iter().filter(|n| !as_bytes(n).contains(&b'|')).count();
    assert_eq!(as_int(&r.q("COMMAND COUNT")) as usize, commands);
}

#[test]
fn exec_runs_without_other_clients_interleaving() {
    let s = Server::start(&[]);
    const CLIENTS: i64 = 4;
    const ROUNDS: i64 = 150;
    const PLAIN: i64 = 300;
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        for _ in 0..CLIENTS {
            let mut r = s.raw();
            scope.spawn(move || {
                for _ in 0..ROUNDS {
                    assert_eq!(r.q("MULTI"), ok());
                    assert_eq!(r.q("INCR k"), queued());
                    assert_eq!(r.q("INCR k"), queued());
                    let replies = as_array(&r.q("EXEC"));
                    let (first, second) = (as_int(&replies[0]), as_int(&replies[1]));
                    assert_eq!(second, first + 1, "the two INCRs are adjacent");
                }
            });
        }
        // Plain INCRs of the same key from another client, meanwhile.
        let mut plain = s.raw();
        scope.spawn(move || {
            for _ in 0..PLAIN {
                plain.q("INCR k");
            }
        });
        // Transactions writing two keys, and a reader that must never see
        // one written without the other.
        let mut writer = s.raw();
        let done = &done;
        scope.spawn(move || {
            for i in 0..300 {
                assert_eq!(writer.q("MULTI"), ok());
                writer.q(&format!("SET pair:a {i}"));
                writer.q(&format!("SET pair:b {i}"));
                assert_eq!(writer.q("EXEC"), array(vec![ok(), ok()]));
            }
            done.store(true, std::sync::atomic::Ordering::Release);
        });
        let mut reader = s.raw();
        scope.spawn(move || {
            let mut reads = 0;
            while !done.load(std::sync::atomic::Ordering::Acquire) || reads == 0 {
                let pair = as_array(&reader.q("MGET pair:a pair:b"));
                assert_eq!(pair[0], pair[1], "half of an EXEC seen");
                let n = as_int(&reader.q("EXISTS pair:a pair:b"));
                assert!(n == 0 || n == 2, "half of an EXEC seen");
                reads += 1;
            }
        });
    });
    let mut r = s.raw();
    assert_eq!(
        r.q("GET k"),
        bulk((2 * CLIENTS * ROUNDS + PLAIN).to_string().as_bytes())
    );
}

#[test]
fn transactions_with_the_redis_crate() -> TestResult {
    let s = Server::start(&[]);
    let mut con = s.conn();
    let (a, b): (String, i64) = redis::pipe()
        .atomic()
        .set("k", "v")
        .ignore()
        .get("k")
        .incr("n", 5)
        .query(&mut con)?;
    assert_eq!((a.as_str(), b), ("v", 5));

    // redis::transaction: WATCH, read, queue, EXEC; retried while another
    // connection changes the key in between.
    let mut other = s.conn();
    let mut attempts = 0;
    let total: (i64,) = redis::transaction(&mut con, &["counter"], |con, pipe| {
        let current: Option<i64> = redis::cmd("GET").arg("counter").query(con)?;
        attempts += 1;
        if attempts < 3 {
            redis::cmd("INCRBY")
                .arg("counter")
                .arg(100)
                .exec(&mut other)?;
        }
        pipe.set("counter", current.unwrap_or(0) + 1)
            .ignore()
            .get("counter")
            .query(con)
    })?;
    assert_eq!(attempts, 3);
    assert_eq!(total, (201,));

    // The same over RESP3.
    let mut con3 = s.conn3();
    let aborted: Option<(String,)> = {
        redis::cmd("WATCH").arg("w").exec(&mut con3)?;
        redis::cmd("SET").arg("w").arg(1).exec(&mut other)?;
        redis::pipe().atomic().get("w").query(&mut con3)?
    };
    assert_eq!(aborted, None);
    Ok(())
}

#[test]
fn exec_writes_are_all_or_nothing_across_sigkill() {
    // Transactions of 20 keys of 1 KiB each, all set to one value, while
    // the server is killed: after the restart the keys agree.
    let keys: Vec<String> = (0..20).map(|i| format!("k{i}")).collect();
    let mut s = Server::start(&[]);
    for round in 0..5 {
        let stop = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|scope| {
            let mut con = s.conn();
            let keys = &keys;
            let stop = &stop;
            let writer = scope.spawn(move || {
                let mut done = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let value = format!("{round}:{done}:{}", "x".repeat(1024));
                    let mut pipe = redis::pipe();
                    pipe.atomic();
                    for k in keys {
                        pipe.set(k, &value).ignore();
                    }
                    if pipe.query::<()>(&mut con).is_err() {
                        break;
                    }
                    done += 1;
                }
                done
            });
            std::thread::sleep(std::time::Duration::from_millis(300));
            s.kill9();
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            assert!(writer.join().unwrap() > 0, "transactions ran");
        });
        s = s.restart();
        let mut r = s.raw();
        let mut mget: Vec<&[u8]> = vec![b"MGET"];
        mget.extend(keys.iter().map(|k| k.as_bytes()));
        let values = as_array(&r.call(&mget));
        assert!(
            values.iter().all(|v| *v == values[0]),
            "round {round}: a transaction survived in part"
        );
    }
}

#[test]
fn an_acknowledged_exec_survives_sigkill_with_appendfsync_always() {
    let mut s = Server::start(&["--appendfsync", "always"]);
    let mut r = s.raw();
    assert_eq!(r.q("MULTI"), ok());
    assert_eq!(r.q("SET a 1"), queued());
    assert_eq!(r.q("SET b 2 EX 1000"), queued());
    assert_eq!(r.q("EXEC"), array(vec![ok(), ok()]));
    s.kill9();
    let s = s.restart();
    let mut r = s.raw();
    assert_eq!(r.q("MGET a b"), bulks(&["1", "2"]));
    assert!(as_int(&r.q("TTL b")) > 990);
}
