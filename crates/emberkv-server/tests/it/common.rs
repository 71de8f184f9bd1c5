//! The test harness: a server process, connections to it, tool checks.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use emberkv_server::frame::{Frame, FrameError, Limits};

pub type TestResult = Result<(), Box<dyn std::error::Error>>;

/// A running `emberkv-server`.
pub struct Server {
    child: Option<Child>,
    pub port: u16,
    pub sock: PathBuf,
    pub dir: Arc<tempfile::TempDir>,
    args: Vec<String>,
    /// The open files limit (soft and hard) to start it under, if any.
    nofile: Option<u64>,
}

/// A TCP port nobody listens on right now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind an ephemeral port")
}

pub fn binary() -> &'static str {
    env!("CARGO_BIN_EXE_emberkv-server")
}

impl Server {
    /// Starts a server in a new temporary directory with `extra` flags.
    pub fn start(extra: &[&str]) -> Server {
        let dir = Arc::new(tempfile::tempdir().expect("tempdir"));
        Server::start_in(dir, extra)
    }

    /// Starts a server whose store lives in `dir`.
    pub fn start_in(dir: Arc<tempfile::TempDir>, extra: &[&str]) -> Server {
        Server::start_limited(dir, extra, None)
    }

    /// Starts a server with `extra` flags under an open files limit of
    /// `nofile` (soft and hard, set by the shell that starts it).
    pub fn start_with_nofile(nofile: u64, extra: &[&str]) -> Server {
        let dir = Arc::new(tempfile::tempdir().expect("tempdir"));
        Server::start_limited(dir, extra, Some(nofile))
    }

    fn start_limited(dir: Arc<tempfile::TempDir>, extra: &[&str], nofile: Option<u64>) -> Server {
        let args: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        for _ in 0..5 {
            let mut s = Server {
                child: None,
                port: free_port(),
                sock: dir.path().join("emberkv.sock"),
                dir: Arc::clone(&dir),
                args: args.clone(),
                nofile,
            };
            if s.spawn() {
                return s;
            }
        }
        panic!("the server did not start in 5 attempts");
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("server.log")
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// Spawns the process and waits until it accepts; false when the
    /// port was taken meanwhile.
    fn spawn(&mut self) -> bool {
        let mut cmd = match self.nofile {
            None => Command::new(binary()),
            Some(n) => {
                let mut sh = Command::new("sh");
                sh.args([
                    "-c",
                    &format!("ulimit -n {n} && exec \"$0\" \"$@\""),
                    binary(),
                ]);
                sh
            }
        };
        cmd.args(["--port", &self.port.to_string()])
            .args(["--dir", self.dir.path().to_str().unwrap()])
            .args(["--unixsocket", self.sock.to_str().unwrap()])
            .args(["--logfile", self.log_path().to_str().unwrap()])
            .args(["--io-threads", "2"])
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn emberkv-server");
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = child.try_wait().expect("try_wait") {
                let mut err = String::new();
                if let Some(mut e) = child.stderr.take() {
                    let _ = e.read_to_string(&mut err);
                }
                if err.contains("Address already in use") {
                    return false;
                }
                panic!("server exited at start ({status}): {err}\n{}", self.log());
            }
            if TcpStream::connect(("127.0.0.1", self.port)).is_ok() && self.sock.exists() {
                self.child = Some(child);
                return true;
            }
            assert!(
                Instant::now() < deadline,
                "server did not start: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub fn pid(&self) -> i32 {
        self.child.as_ref().expect("running").id() as i32
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// A `redis` crate connection over TCP (RESP2).
    pub fn conn(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .and_then(|c| c.get_connection())
            .expect("connect over TCP")
    }

    /// A `redis` crate connection over TCP speaking RESP3.
    pub fn conn3(&self) -> redis::Connection {
        redis::Client::open(format!("{}?protocol=resp3", self.url()))
            .and_then(|c| c.get_connection())
            .expect("connect over TCP with RESP3")
    }

    /// A `redis` crate connection over the unix socket.
    pub fn unix_conn(&self) -> redis::Connection {
        redis::Client::open(redis::ConnectionAddr::Unix(self.sock.clone()))
            .and_then(|c| c.get_connection())
            .expect("connect over the unix socket")
    }

    /// A raw TCP connection.
    pub fn raw(&self) -> Raw<TcpStream> {
        let s = TcpStream::connect(("127.0.0.1", self.port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        Raw::new(s)
    }

    /// A raw unix-socket connection.
    pub fn raw_unix(&self) -> Raw<UnixStream> {
        let s = UnixStream::connect(&self.sock).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        Raw::new(s)
    }

    /// Sends a signal.
    pub fn signal(&self, sig: i32) {
        // SAFETY: kill(2) on our own child's pid; no memory is involved.
        let rc = unsafe { libc::kill(self.pid(), sig) };
        assert_eq!(rc, 0, "kill failed");
    }

    /// Waits for the process to exit (up to 30 s).
    pub fn wait(&mut self) -> ExitStatus {
        let child = self.child.as_mut().expect("running");
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = child.try_wait().expect("try_wait") {
                self.child = None;
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "server did not exit: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Whether the process has exited (without waiting for it).
    pub fn exited(&mut self) -> bool {
        match &mut self.child {
            Some(child) => child.try_wait().expect("try_wait").is_some(),
            None => true,
        }
    }

    /// SIGTERM, then waits; returns the exit status.
    pub fn terminate(&mut self) -> ExitStatus {
        self.signal(libc::SIGTERM);
        self.wait()
    }

    /// SIGKILL, then waits.
    pub fn kill9(&mut self) {
        self.signal(libc::SIGKILL);
        self.wait();
    }

    /// Starts a new server on the same directory and flags (after this
    /// one has exited).
    pub fn restart(&self) -> Server {
        assert!(self.child.is_none(), "stop the server first");
        let args: Vec<&str> = self.args.iter().map(String::as_str).collect();
        Server::start_in(Arc::clone(&self.dir), &args)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A raw RESP connection: bytes out, frames in.
pub struct Raw<S> {
    pub stream: S,
    buf: Vec<u8>,
}

impl<S: Read + Write> Raw<S> {
    pub fn new(stream: S) -> Self {
        Raw {
            stream,
            buf: Vec::new(),
        }
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("write");
    }

    /// Field `name` (`omem`, `flags`, ...) of client `id`'s line in
    /// CLIENT LIST, asked on this connection.
    pub fn client_field(&mut self, id: i64, name: &str) -> String {
        let list = String::from_utf8(as_bytes(&self.q("CLIENT LIST"))).unwrap();
        let line = list
            .lines()
            .find(|l| l.starts_with(&format!("id={id} ")))
            .unwrap_or_else(|| panic!("client {id} in {list}"));
        let field = line
            .split(' ')
            .find_map(|f| f.strip_prefix(name)?.strip_prefix('='));
        field
            .unwrap_or_else(|| panic!("a {name} field in {line}"))
            .to_owned()
    }

    /// Sends a command as a multibulk.
    pub fn cmd(&mut self, args: &[&[u8]]) {
        let mut out = Vec::new();
        Frame::command(args.iter()).encode(&mut out, false);
        self.send(&out);
    }

    /// Reads one reply frame; `None` when the server closed first.
    pub fn frame(&mut self) -> Option<Frame> {
        loop {
            match Frame::check(&self.buf, Limits::default()) {
                Ok(n) => {
                    let bytes = Bytes::from(self.buf.drain(..n).collect::<Vec<u8>>());
                    return Some(Frame::parse(&bytes, Limits::default()).expect("parse").0);
                }
                Err(FrameError::Incomplete) => {}
                Err(e) => panic!("bad reply {e}: {:?}", String::from_utf8_lossy(&self.buf)),
            }
            let mut chunk = [0u8; 64 * 1024];
            let n = match self.stream.read(&mut chunk) {
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => 0,
                // A signal to this process (a socket with a read timeout
                // is not restarted, signal(7)): read again.
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => panic!("read: {e}"),
            };
            if n == 0 {
                assert!(self.buf.is_empty(), "closed mid-frame: {:?}", self.buf);
                return None;
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// Sends a command and reads its reply.
    pub fn call(&mut self, args: &[&[u8]]) -> Frame {
        self.cmd(args);
        self.frame().expect("a reply")
    }

    /// Sends a command given as space-separated words and reads its reply.
    pub fn q(&mut self, line: &str) -> Frame {
        let words: Vec<&[u8]> = line.split_whitespace().map(str::as_bytes).collect();
        self.call(&words)
    }

    /// Whether the server has closed the connection (after any frames).
    pub fn closed(&mut self) -> bool {
        self.frame().is_none()
    }
}

pub fn bulk(s: &[u8]) -> Frame {
    Frame::Bulk(Bytes::copy_from_slice(s))
}

pub fn simple(s: &str) -> Frame {
    Frame::Simple(Bytes::copy_from_slice(s.as_bytes()))
}

pub fn error(s: &str) -> Frame {
    Frame::Error(Bytes::copy_from_slice(s.as_bytes()))
}

/// Whether an external tool is usable; under `CI=true` a missing tool is
/// a failure, elsewhere a skip with a message.
pub fn require(tool: &str, available: bool) -> bool {
    if available {
        return true;
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{tool} is required under CI=true (scripts/test.sh installs it)");
    }
    eprintln!("SKIPPED: {tool} is not installed (bash scripts/test.sh installs it)");
    false
}

/// Whether `cmd --version`-like probe runs.
pub fn runs(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Polls `f` every 20 ms until it is true or `secs` pass.
pub fn eventually(secs: u64, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    f()
}

pub fn path_str(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

pub fn int(n: i64) -> Frame {
    Frame::Integer(n)
}

pub fn ok() -> Frame {
    simple("OK")
}

pub fn array(items: Vec<Frame>) -> Frame {
    Frame::Array(items)
}

pub fn bulks(items: &[&str]) -> Frame {
    Frame::Array(items.iter().map(|s| bulk(s.as_bytes())).collect())
}

/// The integer of an integer frame.
pub fn as_int(f: &Frame) -> i64 {
    match f {
        Frame::Integer(n) => *n,
        other => panic!("not an integer: {other:?}"),
    }
}

/// The bytes of a bulk or simple string.
pub fn as_bytes(f: &Frame) -> Vec<u8> {
    match f {
        Frame::Bulk(b) | Frame::Simple(b) | Frame::Error(b) => b.to_vec(),
        Frame::Verbatim { text, .. } => text.to_vec(),
        other => panic!("not a string: {other:?}"),
    }
}

/// The number `field` of INFO's `section`, asked of `r`.
pub fn info_number<S: Read + Write>(r: &mut Raw<S>, section: &str, field: &str) -> u64 {
    let info = String::from_utf8(as_bytes(&r.q(&format!("INFO {section}")))).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("INFO {section} has no number {field}: {info}"))
}

/// The elements of an array.
pub fn as_array(f: &Frame) -> Vec<Frame> {
    match f {
        Frame::Array(v) | Frame::Set(v) => v.clone(),
        other => panic!("not an array: {other:?}"),
    }
}

/// Sorted strings of an array of bulks.
pub fn sorted(f: &Frame) -> Vec<String> {
    let mut v: Vec<String> = as_array(f)
        .iter()
        .map(|x| String::from_utf8(as_bytes(x)).unwrap())
        .collect();
    v.sort();
    v
}

/// Kills the child if the test panics first.
pub struct KillOnDrop(pub std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
