//! The command line: --version, --help, bad flags (one line, exit 1),
//! config files, listening on a unix socket only.

use std::process::{Command, Stdio};

use crate::common::*;

fn run(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(binary())
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run emberkv-server");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn version_and_help() {
    let (code, out, _) = run(&["--version"]);
    assert_eq!(code, 0);
    assert!(out.starts_with("emberkv-server v="), "{out}");
    let (code, out, _) = run(&["--help"]);
    assert_eq!(code, 0);
    for flag in [
        "--port",
        "--bind",
        "--unixsocket",
        "--unixsocketperm",
        "--dir",
        "--dbfilename",
        "--appendonly",
        "--appendfsync",
        "--maxmemory",
        "--maxclients",
        "--timeout",
        "--requirepass",
        "--protected-mode",
        "--loglevel",
        "--logfile",
        "--daemonize",
    ] {
        assert!(out.contains(flag), "--help mentions {flag}");
    }
    assert!(
        out.contains("NOT enforced"),
        "--help is honest about maxmemory"
    );
}

#[test]
fn bad_flags_print_one_line_and_exit_1() {
    for args in [
        vec!["--nosuch", "1"],
        vec!["--port", "http"],
        vec!["--appendfsync", "sometimes"],
        vec!["--daemonize", "maybe"],
        vec!["--loglevel", "loud"],
        vec!["--port", "0"],
        vec!["stray.conf.that.does.not.exist"],
        vec!["--port", "7000", "extra"],
    ] {
        let (code, out, err) = run(&args);
        assert_eq!(code, 1, "{args:?}: {err}");
        assert!(out.is_empty(), "{args:?}: {out}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("emberkv-server: "), "{err}");
    }
}

#[test]
fn a_port_in_use_is_one_line_and_exit_1() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let dir = tempfile::tempdir().unwrap();
    let (code, _, err) = run(&[
        "--port",
        &port,
        "--dir",
        path_str(dir.path()),
        "--loglevel",
        "warning",
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("cannot listen on 127.0.0.1"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    // The port is bound before the store is opened: nothing is created
    // (a newcomer found an empty store left behind).
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
}

/// A unix socket path that cannot be bound is one line and exit 1, and
/// leaves no store behind (an audit found an empty store directory
/// created before the bind failed).
#[test]
fn a_bad_unix_socket_path_is_one_line_and_exit_1() {
    let long = format!("/tmp/{}.sock", "s".repeat(120));
    for socket in ["/nonexistent/dir/emberkv.sock", long.as_str()] {
        let dir = tempfile::tempdir().unwrap();
        let (code, _, err) = run(&[
            "--port",
            "0",
            "--unixsocket",
            socket,
            "--dir",
            path_str(dir.path()),
        ]);
        assert_eq!(code, 1, "{socket}: {err}");
        assert!(err.contains("cannot listen on unix socket"), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert!(left.is_empty(), "{socket}: {left:?}");
    }
}

#[test]
fn a_missing_dir_is_one_line_and_exit_1() {
    let (code, _, err) = run(&[
        "--dir",
        "/nonexistent/emberkv",
        "--port",
        "0",
        "--unixsocket",
        "/tmp/x.sock",
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("cannot use --dir"), "{err}");
}

#[test]
fn config_file_with_flag_overrides() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("emberkv.conf");
    let sock = dir.path().join("only.sock");
    std::fs::write(
        &conf,
        format!(
            "# a redis.conf-style file\nport 0\nunixsocket {}\nunixsocketperm 700\ndbfilename mystore\nrequirepass \"from file\"\nmaxmemory 2mb\n",
            sock.display()
        ),
    )
    .unwrap();
    let log = dir.path().join("log");
    let child = Command::new(binary())
        .arg(&conf)
        .args([
            "--dir",
            path_str(dir.path()),
            "--requirepass",
            "fromflag",
            "--logfile",
            path_str(&log),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut child = KillOnDrop(child);
    assert!(eventually(10, || sock.exists()), "the unix socket appears");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&sock).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700);
    let stream = std::os::unix::net::UnixStream::connect(&sock).unwrap();
    let mut r = Raw::new(stream);
    assert_eq!(r.q("GET k"), error("NOAUTH Authentication required."));
    assert_eq!(
        r.call(&[b"AUTH", b"from file"]),
        error("WRONGPASS invalid username-password pair or user is disabled."),
        "the file's password is overridden"
    );
    assert_eq!(r.q("AUTH fromflag"), ok(), "the flag overrides the file");
    assert_eq!(as_array(&r.q("CONFIG GET maxmemory"))[1], bulk(b"2097152"));
    assert_eq!(as_array(&r.q("CONFIG GET port"))[1], bulk(b"0"));
    let cf = as_array(&r.q("CONFIG GET dbfilename"));
    assert_eq!(cf[1], bulk(b"mystore"));
    assert_eq!(r.q("SET k v"), ok());
    assert!(
        dir.path().join("mystore").is_dir(),
        "the store lives in <dir>/<dbfilename>"
    );
    let info = String::from_utf8(as_bytes(&r.q("INFO server"))).unwrap();
    assert!(
        info.contains(&format!("config_file:{}", conf.display())),
        "{info}"
    );
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(child.0.id() as i32, libc::SIGTERM) };
    assert!(child.0.wait().unwrap().success());
}
