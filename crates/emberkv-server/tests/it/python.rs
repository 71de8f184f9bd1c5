//! Python's redis package (redis-py) against the server: the script in
//! tests/python/client_check.py, over TCP, the unix socket and RESP3.

use std::process::Command;

use crate::common::*;

#[test]
fn python_redis_client() {
    if !require(
        "python3 with the redis package",
        runs("python3", &["-c", "import redis"]),
    ) {
        return;
    }
    let s = Server::start(&[]);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/client_check.py");
    let out = Command::new("python3")
        .arg(script)
        .arg(s.port.to_string())
        .arg(&s.sock)
        .output()
        .expect("run python3");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}\n{}", s.log());
    assert_eq!(stdout.trim(), "ok");
}
