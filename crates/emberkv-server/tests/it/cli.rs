//! redis-cli (Debian package redis-tools) against the server, over TCP
//! and the unix socket.

use std::io::Write;
use std::process::{Command, Stdio};

use emberkv_server::frame::Frame;

use crate::common::*;

fn have_cli() -> bool {
    require("redis-cli", runs("redis-cli", &["--version"]))
}

/// Runs redis-cli with `args`, feeding `stdin`; returns stdout.
fn cli(args: &[&str], stdin: &[u8]) -> String {
    let mut child = Command::new("redis-cli")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn redis-cli");
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "redis-cli {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn sorted_lines(s: &str) -> Vec<String> {
    let mut v: Vec<String> = s.lines().map(String::from).collect();
    v.sort();
    v
}

#[test]
fn redis_cli_commands_over_tcp_and_unix() {
    if !have_cli() {
        return;
    }
    let s = Server::start(&[]);
    let port = s.port.to_string();
    let tcp = ["-p", port.as_str()];
    let sock = ["-s", path_str(&s.sock)];
    let run = |target: &[&str], cmd: &[&str]| {
        let mut args = target.to_vec();
        args.extend_from_slice(cmd);
        cli(&args, b"")
    };
    assert_eq!(run(&tcp, &["PING"]), "PONG\n");
    assert_eq!(run(&tcp, &["SET", "greeting", "hello world"]), "OK\n");
    assert_eq!(run(&sock, &["GET", "greeting"]), "hello world\n");
    assert_eq!(run(&tcp, &["INCRBY", "n", "5"]), "5\n");
    assert_eq!(
        run(&tcp, &["GET", "missing"]),
        "\n",
        "nil prints as an empty line"
    );
    assert_eq!(run(&sock, &["MSET", "a", "1", "b", "2"]), "OK\n");
    assert_eq!(run(&tcp, &["MGET", "a", "b", "c"]), "1\n2\n\n");
    assert_eq!(run(&tcp, &["DBSIZE"]), "4\n");
    let keys = sorted_lines(&run(&tcp, &["KEYS", "*"]));
    assert_eq!(keys, ["a", "b", "greeting", "n"]);
    let scanned = sorted_lines(&run(&sock, &["--scan", "--pattern", "*"]));
    assert_eq!(scanned, keys);
    assert_eq!(run(&tcp, &["EXPIRE", "a", "100"]), "1\n");
    assert_eq!(run(&tcp, &["TTL", "a"]), "100\n");
    assert_eq!(run(&tcp, &["TYPE", "a"]), "string\n");
    assert!(run(&tcp, &["INFO", "server"]).contains("redis_version:7.0.0"));
    assert_eq!(
        run(&tcp, &["CONFIG", "GET", "appendfsync"]),
        "appendfsync\neverysec\n"
    );
    let hello = run(&tcp, &["-3", "HELLO", "3"]);
    assert!(hello.contains("proto") && hello.contains('3'), "{hello}");
    let err = run(&tcp, &["NOSUCH", "x"]);
    assert!(err.starts_with("ERR unknown command 'NOSUCH'"), "{err}");
    assert_eq!(run(&tcp, &["FLUSHALL"]), "OK\n");
    assert_eq!(run(&tcp, &["DBSIZE"]), "0\n");
}

#[test]
fn redis_cli_binary_values_and_pipe_mode() {
    if !have_cli() {
        return;
    }
    let s = Server::start(&[]);
    let port = s.port.to_string();
    // -x reads the last argument from stdin, bytes as they are.
    assert_eq!(cli(&["-p", &port, "-x", "SET", "bin"], b"a\r\n\0b"), "OK\n");
    assert_eq!(
        cli(&["-p", &port, "--no-raw", "GET", "bin"], b""),
        "\"a\\r\\n\\x00b\"\n"
    );
    assert_eq!(cli(&["-p", &port, "STRLEN", "bin"], b""), "5\n");

    // --pipe: 10,000 commands in RESP, as a mass insert.
    let mut wire = Vec::new();
    for i in 0..10_000 {
        let k = format!("pipe:{i}");
        emberkv_server::frame::Frame::command([&b"SET"[..], k.as_bytes(), b"\r\n\0v"])
            .encode(&mut wire, false);
    }
    let out = cli(&["-s", path_str(&s.sock), "--pipe"], &wire);
    assert!(out.contains("errors: 0, replies: 10000"), "{out}");
    let mut r = s.raw();
    assert_eq!(r.q("DBSIZE"), int(10_001));
    assert_eq!(r.q("GET pipe:9999"), bulk(b"\r\n\0v"));
}

#[test]
fn redis_cli_multi_exec() {
    if !have_cli() {
        return;
    }
    let s = Server::start(&[]);
    let port = s.port.to_string();
    let out = cli(&["-p", &port], b"MULTI\nSET a 1\nINCR a\nGET a\nEXEC\n");
    assert_eq!(out, "OK\nQUEUED\nQUEUED\nQUEUED\nOK\n2\n2\n");
    let out = cli(&["-p", &port], b"MULTI\nNOSUCH\nINCR a\nEXEC\nGET a\n");
    assert_eq!(
        out,
        "OK\nERR unknown command 'NOSUCH', with args beginning with: \n\nQUEUED\nEXECABORT Transaction discarded because of previous errors.\n\n2\n"
    );
}

/// redis-benchmark (Debian package redis-tools, like redis-cli) runs its
/// SET, GET, INCR and MSET tests against the server unchanged, plain and
/// pipelined, and what it wrote is there after (its counts only: the rates
/// are `scripts/bench-server.sh`'s business, never a test's).
#[test]
fn redis_benchmark_runs_against_the_server() {
    if !require("redis-benchmark", runs("redis-benchmark", &["--version"])) {
        return;
    }
    let s = Server::start(&[]);
    for pipeline in ["1", "16"] {
        let out = Command::new("redis-benchmark")
            .args(["-s", path_str(&s.sock), "-c", "10", "-n", "2000"])
            .args(["-r", "500", "-d", "64", "-P", pipeline, "--csv"])
            .args(["-t", "set,get,incr,mset"])
            .stdin(Stdio::null())
            .output()
            .expect("spawn redis-benchmark");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "redis-benchmark -P {pipeline}: {}{stdout}",
            String::from_utf8_lossy(&out.stderr)
        );
        for test in ["SET", "GET", "INCR", "MSET (10 keys)"] {
            assert!(
                stdout
                    .lines()
                    .any(|l| l.starts_with(&format!("\"{test}\","))),
                "no {test} row with -P {pipeline}: {stdout}"
            );
        }
    }
    let mut r = s.raw();
    let keys = as_array(&r.q("KEYS key:*"));
    assert!(!keys.is_empty() && keys.len() <= 500, "{} keys", keys.len());
    let Frame::Bulk(key) = &keys[0] else {
        panic!("{:?}", keys[0])
    };
    assert_eq!(r.call(&[b"STRLEN", key]), int(64));
    assert!(matches!(r.q("KEYS counter:*"), Frame::Array(c) if !c.is_empty()));
}
