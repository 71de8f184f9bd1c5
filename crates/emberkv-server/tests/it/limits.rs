//! maxclients, timeout, requirepass and AUTH, the unix socket's mode.

use crate::common::*;
use emberkv_server::frame::Frame;

#[test]
fn maxclients_refuses_the_extra_connection() {
    let s = Server::start(&["--maxclients", "2"]);
    let mut a = s.raw();
    // The harness's readiness probe held a slot until the server saw it
    // close.
    assert!(eventually(5, || {
        String::from_utf8(as_bytes(&a.q("INFO clients")))
            .unwrap()
            .contains("connected_clients:1\r\n")
    }));
    let mut b = s.raw_unix();
    assert_eq!(a.q("PING"), simple("PONG"));
    assert_eq!(b.q("PING"), simple("PONG"));
    let mut c = s.raw();
    assert_eq!(c.frame(), Some(error("ERR max number of clients reached")));
    assert!(c.closed());
    drop(b);
    // The slot comes back once the server sees the close.
    assert!(eventually(5, || {
        let mut d = s.raw();
        d.cmd(&[b"PING"]);
        d.frame() == Some(simple("PONG"))
    }));
    let info = String::from_utf8(as_bytes(&a.q("INFO stats"))).unwrap();
    assert!(!info.contains("rejected_connections:0\r\n"), "{info}");
    // Raising the limit at run time admits more.
    assert_eq!(a.q("CONFIG SET maxclients 10"), ok());
    let mut more: Vec<_> = (0..5).map(|_| s.raw()).collect();
    for m in &mut more {
        assert_eq!(m.q("PING"), simple("PONG"));
    }
}

#[test]
fn idle_clients_time_out() {
    let s = Server::start(&["--timeout", "1"]);
    let mut idle = s.raw();
    let mut busy = s.raw();
    assert_eq!(idle.q("PING"), simple("PONG"));
    let start = std::time::Instant::now();
    while start.elapsed() < std::time::Duration::from_millis(2600) {
        assert_eq!(busy.q("PING"), simple("PONG"));
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    assert!(idle.closed(), "the idle client was closed");
    assert_eq!(busy.q("PING"), simple("PONG"), "the busy one was not");
}

#[test]
fn requirepass_and_auth() {
    let s = Server::start(&["--requirepass", "s3cret"]);
    let mut r = s.raw();
    assert_eq!(r.q("GET k"), error("NOAUTH Authentication required."));
    assert_eq!(
        r.q("NOSUCH"),
        error("ERR unknown command 'NOSUCH', with args beginning with: "),
        "unknown commands are reported before NOAUTH, as Redis does"
    );
    assert_eq!(
        r.q("AUTH wrong"),
        error("WRONGPASS invalid username-password pair or user is disabled.")
    );
    assert_eq!(
        r.q("AUTH s3cre"),
        error("WRONGPASS invalid username-password pair or user is disabled.")
    );
    assert_eq!(
        r.q("HELLO 3"),
        error(
            "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time"
        )
    );
    assert_eq!(r.q("AUTH s3cret"), ok());
    assert_eq!(r.q("SET k v"), ok());

    let mut u = s.raw_unix();
    assert_eq!(u.q("GET k"), error("NOAUTH Authentication required."));
    assert!(matches!(
        u.q("HELLO 3 AUTH default s3cret SETNAME n"),
        Frame::Map(_)
    ));
    assert_eq!(u.q("GET k"), bulk(b"v"));
    assert_eq!(u.q("AUTH default s3cret"), ok());
    assert_eq!(
        u.q("AUTH other s3cret"),
        error("WRONGPASS invalid username-password pair or user is disabled.")
    );
    assert_eq!(u.q("AUTH a b c"), error("ERR syntax error"));

    let mut q = s.raw();
    assert_eq!(q.q("QUIT"), ok(), "QUIT needs no AUTH");
    assert!(q.closed());

    // The redis crate with a password in the URL.
    let url = format!("redis://:s3cret@127.0.0.1:{}/", s.port);
    let mut con = redis::Client::open(url).unwrap().get_connection().unwrap();
    let v: String = redis::cmd("GET").arg("k").query(&mut con).unwrap();
    assert_eq!(v, "v");
}

#[test]
fn unix_socket_only_with_permissions() {
    let s = Server::start(&["--unixsocketperm", "600"]);
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&s.sock).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let mut u = s.raw_unix();
    let info = String::from_utf8(as_bytes(&u.q("CLIENT INFO"))).unwrap();
    assert!(info.contains(" flags=U "), "{info}");
}
