//! The `emberkv` binary, driven as a user would: real processes, real
//! stores in temporary directories, exit codes and output checked.

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use emberkv::{Db, Options};

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// Runs `emberkv STORE ARGS...` with RUST_BACKTRACE=1 (so that a backtrace,
/// were one printed, would show) and `stdin` as its standard input.
fn run_with_input<I, S>(store: &Path, args: I, stdin: &[u8]) -> std::io::Result<Output>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut child = Command::new(env!("CARGO_BIN_EXE_emberkv"))
        .arg(store)
        .args(args)
        .env("RUST_BACKTRACE", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    child
        .stdin
        .take()
        .ok_or_else(|| std::io::Error::other("no stdin pipe"))?
        .write_all(stdin)?;
    child.wait_with_output()
}

/// Runs `emberkv STORE ARGS...` with empty standard input.
fn run<I, S>(store: &Path, args: I) -> std::io::Result<Output>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    run_with_input(store, args, b"")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Asserts the exit code, showing the output when it differs.
fn assert_code(out: &Output, code: i32) {
    assert_eq!(
        out.status.code(),
        Some(code),
        "stdout: {}\nstderr: {}",
        stdout(out),
        stderr(out)
    );
}

/// Asserts that the command failed with exit code 2 and exactly one line
/// on stderr, `error: ...` containing `needle`, with no panic or backtrace.
fn assert_error(out: &Output, needle: &str) {
    assert_code(out, 2);
    let err = stderr(out);
    assert!(err.starts_with("error: "), "{err}");
    assert_eq!(err.lines().count(), 1, "more than one line: {err}");
    assert!(err.contains(needle), "{needle:?} not in {err}");
    assert!(
        !err.contains("panicked") && !err.contains("acktrace"),
        "{err}"
    );
}

/// A store of 3,000 keys with 1,000-byte values in 1 MiB segments (so
/// three or more segment files), every tenth key removed again.
fn build_segmented_store(dir: &Path) -> TestResult {
    // No background compaction: the tests count records and segments.
    let db = Db::open(
        dir,
        Options::default()
            .segment_bytes(1 << 20)
            .compaction_garbage(None),
    )?;
    for i in 0..3_000u32 {
        db.insert(&i.to_le_bytes(), &vec![(i % 251) as u8; 1_000])?;
    }
    for i in (0..3_000u32).step_by(10) {
        db.remove(&i.to_le_bytes())?;
    }
    db.close()?;
    assert!(
        dir.join("000000000002.seg").is_file(),
        "fewer than 3 segments"
    );
    Ok(())
}

/// [`build_segmented_store`] with one byte flipped in the middle of its
/// oldest segment (a value byte of a live key); returns that segment's
/// path and its bytes as damaged.
fn build_damaged_store(
    dir: &Path,
) -> Result<(std::path::PathBuf, Vec<u8>), Box<dyn std::error::Error>> {
    build_segmented_store(dir)?;
    let seg = dir.join("000000000000.seg");
    let mut bytes = std::fs::read(&seg)?;
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x40;
    std::fs::write(&seg, &bytes)?;
    Ok((seg, bytes))
}

/// The lines of an export, as a set (exports are in no particular order).
fn line_set(bytes: &[u8]) -> BTreeSet<String> {
    String::from_utf8_lossy(bytes)
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn insert_get_remove_round_trip() -> TestResult {
    let dir = tempfile::tempdir()?;
    let store = dir.path().join("store");
    assert_code(&run(&store, ["insert", "greeting", "hello world"])?, 0);
    let got = run(&store, ["get", "greeting"])?;
    assert_code(&got, 0);
    assert_eq!(got.stdout, b"hello world", "raw value, no newline added");

    assert_code(&run(&store, ["insert", "greeting", "-5"])?, 0);
    assert_eq!(run(&store, ["get", "greeting"])?.stdout, b"-5");

    // Regression (an attack on the CLI, 2026-12-02): a mistyped option
    // was stored as the value. Keys and values that start with '-' go
    // after '--'.
    let typo = run(&store, ["insert", "greeting", "--bogus"])?;
    assert_code(&typo, 2);
    assert!(stderr(&typo).contains("'-- --bogus'"), "{}", stderr(&typo));
    assert_eq!(run(&store, ["get", "greeting"])?.stdout, b"-5");
    assert_code(&run(&store, ["insert", "--", "-k", "--v"])?, 0);
    assert_eq!(run(&store, ["get", "--", "-k"])?.stdout, b"--v");
    assert_code(&run(&store, ["remove", "--", "-k"])?, 0);

    assert_code(&run(&store, ["remove", "greeting"])?, 0);
    let gone = run(&store, ["get", "greeting"])?;
    assert_code(&gone, 1);
    assert!(gone.stdout.is_empty());
    assert_eq!(stderr(&gone), "key not found: greeting\n");
    let again = run(&store, ["remove", "greeting"])?;
    assert_code(&again, 1);
    assert_eq!(stderr(&again), "key not found: greeting\n");
    Ok(())
}

#[test]
fn hex_keys_and_values_carry_nul_cr_and_lf() -> TestResult {
    let dir = tempfile::tempdir()?;
    let store = dir.path();
    let key = [0x00, 0x0d, 0x0a, 0xff, 0x0a];
    let value = [0x0a, 0x00, 0x0d, 0x80];
    assert_code(
        &run(store, ["insert", "--hex", "000D0AFF0A", "0a000d80"])?,
        0,
    );
    // A UTF-8 key ("bin") holding the same binary value, read back raw.
    assert_code(&run(store, ["insert", "--hex", "62696e", "0a000d80"])?, 0);

    let got = run(store, ["get", "--hex", "000d0aff0a"])?;
    assert_code(&got, 0);
    assert_eq!(stdout(&got), "0a000d80\n");
    assert_eq!(run(store, ["get", "bin"])?.stdout, value);
    assert_code(&run(store, ["get", "--hex", "000d0aff"])?, 1);

    let db = Db::open(store, Options::default())?;
    assert_eq!(db.get(&key)?.as_deref(), Some(&value[..]));
    assert_eq!(db.len(), 2);
    db.close()?;

    assert_code(&run(store, ["remove", "--hex", "000d0aff0a"])?, 0);
    assert_code(&run(store, ["get", "--hex", "000d0aff0a"])?, 1);
    assert_error(
        &run(store, ["get", "--hex", "0x00"])?,
        "KEY is not valid hex: 'x' is not a hex digit",
    );
    assert_error(
        &run(store, ["insert", "--hex", "00", "abc"])?,
        "VALUE is not valid hex: odd number of hex digits (3)",
    );
    Ok(())
}

#[test]
fn insert_with_ttl_sets_the_expiry() -> TestResult {
    let dir = tempfile::tempdir()?;
    let store = dir.path();
    let before = SystemTime::now();
    assert_code(&run(store, ["insert", "--ttl", "3600", "session", "s"])?, 0);
    let after = SystemTime::now();
    assert_code(&run(store, ["insert", "plain", "p"])?, 0);
    let rejected = run(store, ["insert", "--ttl", "0", "k", "v"])?;
    assert_code(&rejected, 2);
    assert!(stderr(&rejected).contains("--ttl"), "{}", stderr(&rejected));

    let db = Db::open(store, Options::default())?;
    let hour = Duration::from_secs(3600);
    let Some(Some(at)) = db.expiry(b"session")? else {
        panic!("session has no expiry");
    };
    assert!(at >= before + hour - Duration::from_millis(1), "{at:?}");
    assert!(at <= after + hour + Duration::from_millis(1), "{at:?}");
    assert_eq!(db.expiry(b"plain")?, Some(None));
    assert_eq!(db.expiry(b"k")?, None);
    Ok(())
}

#[test]
fn stats_reports_the_key_count() -> TestResult {
    let dir = tempfile::tempdir()?;
    let store = dir.path();
    for key in ["a", "b", "c"] {
        assert_code(&run(store, ["insert", key, "value"])?, 0);
    }
    let text = run(store, ["stats"])?;
    assert_code(&text, 0);
    let text = stdout(&text);
    let keys = text
        .lines()
        .find_map(|l| l.strip_prefix("keys:"))
        .ok_or("no keys line")?;
    assert_eq!(keys.trim(), "3", "{text}");
    assert!(text.contains("disk bytes:"), "{text}");

    let json = run(store, ["stats", "--json"])?;
    assert_code(&json, 0);
    let json: serde_json::Value = serde_json::from_slice(&json.stdout)?;
    assert_eq!(json["keys"], 3);
    assert_eq!(json["expiring_keys"], 0);
    assert_eq!(json["logical_bytes"], 3 * ("a".len() + "value".len()));
    assert!(json["disk_bytes"].as_u64().ok_or("no disk_bytes")? > 0);
    // Both forms give the same counters.
    let fields = json.as_object().ok_or("not an object")?.len();
    assert_eq!(text.lines().count(), fields, "{text}\n{json}");
    Ok(())
}

#[test]
fn check_passes_a_sound_store() -> TestResult {
    let dir = tempfile::tempdir()?;
    build_segmented_store(dir.path())?;
    let out = run(dir.path(), ["check"])?;
    assert_code(&out, 0);
    let text = stdout(&out);
    assert!(text.contains("2700 keys"), "{text}");
    assert_eq!(text.lines().last(), Some("sound"), "{text}");
    Ok(())
}

#[test]
fn check_finds_a_flipped_byte_in_an_older_segment() -> TestResult {
    let dir = tempfile::tempdir()?;
    let (seg, bytes) = build_damaged_store(dir.path())?;

    let out = run(dir.path(), ["check"])?;
    assert_code(&out, 1);
    let text = stdout(&out);
    assert!(text.contains("problem: corruption at offset"), "{text}");
    assert!(text.contains("sealed segment"), "{text}");
    let last = text.lines().last().unwrap_or_default();
    assert!(
        (last.ends_with(" problems") || last == "1 problem") && last != "0 problems",
        "{text}"
    );
    assert_eq!(std::fs::read(&seg)?, bytes, "check changed the segment");
    Ok(())
}

/// One flipped byte in an older segment: `export` stops at it (exit 2),
/// `export --skip-damaged` names it, exports every other live key and
/// exits 1 (a newcomer found no way to salvage a damaged store).
#[test]
fn export_skip_damaged_salvages_every_other_record() -> TestResult {
    let dir = tempfile::tempdir()?;
    build_damaged_store(dir.path())?;

    let out = run(dir.path(), ["export"])?;
    assert_error(&out, "corruption at offset");

    let out = run(dir.path(), ["export", "--skip-damaged"])?;
    assert_code(&out, 1);
    let err = stderr(&out);
    assert_eq!(
        err.matches("skipped a damaged record: corruption at offset")
            .count(),
        1,
        "{err}"
    );
    // 2,700 live keys, one of them damaged.
    assert_eq!(line_set(&out.stdout).len(), 2_699, "{err}");
    assert!(
        err.contains("exported 2699 records to stdout; skipped 1 damaged records"),
        "{err}"
    );
    Ok(())
}

/// One flipped byte in the newest segment, in records long since synced
/// (below its durable mark): open refuses the store, so `export` cannot
/// run; `salvage` reads the segment files directly, names the damaged
/// bytes, and writes every other key (at most the damaged record and the
/// one after it differ from a clean export), which imports into a new
/// store.
#[test]
fn salvage_exports_a_store_that_open_refuses() -> TestResult {
    let dir = tempfile::tempdir()?;
    let store = dir.path().join("store");
    build_segmented_store(&store)?;
    let clean = run(&store, ["export"])?;
    assert_code(&clean, 0);
    let newest = (0..)
        .map(|n| store.join(format!("{n:012}.seg")))
        .take_while(|p| p.is_file())
        .last()
        .ok_or("no segment")?;
    let mut bytes = std::fs::read(&newest)?;
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x40;
    std::fs::write(&newest, &bytes)?;
    // Without the checkpoint the clean close left, open replays the log
    // (as after a crash) and meets the damage.
    std::fs::remove_file(store.join("CHECKPOINT"))?;

    assert_error(&run(&store, ["export"])?, "durable mark");
    let out = run(&store, ["salvage"])?;
    assert_code(&out, 1);
    let err = stderr(&out);
    assert_eq!(err.matches("damaged: ").count(), 1, "{err}");
    let (clean, salvaged) = (line_set(&clean.stdout), line_set(&out.stdout));
    assert!(clean.difference(&salvaged).count() <= 2, "{err}");
    assert!(salvaged.difference(&clean).count() <= 2, "{err}");
    assert!(salvaged.len() >= 2_698, "{err}");
    assert_eq!(
        std::fs::read(&newest)?,
        bytes,
        "salvage changed the segment"
    );

    let file = dir.path().join("salvaged.jsonl");
    std::fs::write(&file, &out.stdout)?;
    let copy = dir.path().join("copy");
    assert_code(&run(&copy, [OsStr::new("import"), file.as_os_str()])?, 0);
    assert_code(&run(&copy, ["check"])?, 0);
    Ok(())
}

/// A torn write past the durable mark is read past by the commands that
/// only read, which leave the file as it is, and cut off by the next that
/// writes, as documented; each says so on stderr instead of going on
/// silently, and `check` lists it as a repair, not a problem.
#[test]
fn a_torn_tail_is_read_past_then_cut_with_a_warning() -> TestResult {
    let dir = tempfile::tempdir()?;
    let store = dir.path();
    assert_code(&run(store, ["insert", "kept", "value"])?, 0);
    let seg = store.join("000000000000.seg");
    let mut bytes = std::fs::read(&seg)?;
    bytes.extend_from_slice(&[0x5a; 40]);
    std::fs::write(&seg, &bytes)?;
    std::fs::remove_file(store.join("CHECKPOINT"))?;
    for args in [&["get", "kept"][..], &["stats"], &["export"]] {
        let out = run(store, args)?;
        assert_code(&out, 0);
        let err = stderr(&out);
        assert!(
            err.contains("ends in 40 bytes of a torn write"),
            "{args:?}: {err}"
        );
        assert_eq!(std::fs::read(&seg)?, bytes, "{args:?} changed the segment");
    }
    assert_eq!(run(store, ["get", "kept"])?.stdout, b"value");
    // What a crash leaves is no problem: check lists it as the repair the
    // next open makes, and exits 0.
    let out = run(store, ["check"])?;
    assert_code(&out, 0);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("repaired by the next open: ") && text.contains("torn"),
        "{text}"
    );
    assert!(
        text.trim_end()
            .ends_with("sound; the next open repairs what is listed"),
        "{text}"
    );
    assert_eq!(std::fs::read(&seg)?, bytes, "check changed the segment");
    let out = run(store, ["insert", "other", "value"])?;
    assert_code(&out, 0);
    let err = stderr(&out);
    assert!(
        err.contains("warning: opening") && err.contains("cut 40 bytes"),
        "{err}"
    );
    let again = run(store, ["get", "kept"])?;
    assert!(stderr(&again).is_empty(), "{}", stderr(&again));
    assert_eq!(again.stdout, b"value");
    Ok(())
}

#[test]
fn export_import_export_reproduces_every_record() -> TestResult {
    let dir = tempfile::tempdir()?;
    let source = dir.path().join("source");
    let expires = UNIX_EPOCH + Duration::from_millis(4_102_444_800_123);
    let db = Db::open(&source, Options::default())?;
    db.insert(b"user:1", b"Ada")?;
    db.insert(b"\xff\xfe\x00binary key", b"text value")?;
    db.insert(b"binary value", b"\x00\x80\r\n")?;
    db.insert(b"", b"empty key")?;
    db.insert(b"empty value", b"")?;
    db.insert("quote \" backslash \\ newline \n ключ".as_bytes(), b"{}")?;
    db.insert_with_expiry(b"expiring", b"soon", expires)?;
    db.insert_with_expiry(b"\x80expiring binary", b"\xc3\x28", expires)?;
    db.insert_with_expiry(b"expired", b"gone", UNIX_EPOCH + Duration::from_secs(1))?;
    db.close()?;

    let first = dir.path().join("first.jsonl");
    let exported = run(&source, [OsStr::new("export"), first.as_os_str()])?;
    assert_code(&exported, 0);
    assert_eq!(
        stderr(&exported),
        format!("exported 8 records to {}\n", first.display())
    );
    let first_bytes = std::fs::read(&first)?;
    let first_lines = line_set(&first_bytes);
    assert_eq!(first_lines.len(), 8, "{first_lines:#?}");
    assert!(first_lines.contains(r#"{"key":"user:1","value":"Ada"}"#));
    assert!(
        first_lines.contains(r#"{"key":{"base64":"//4AYmluYXJ5IGtleQ=="},"value":"text value"}"#)
    );
    assert!(
        first_lines.contains(r#"{"key":"expiring","value":"soon","expires_at_ms":4102444800123}"#)
    );

    let copy = dir.path().join("copy");
    let imported = run_with_input(&copy, ["import"], &first_bytes)?;
    assert_code(&imported, 0);
    assert_eq!(
        stderr(&imported),
        "imported 8 records from stdin (0 already expired)\n"
    );
    let second = run(&copy, ["export"])?;
    assert_code(&second, 0);
    assert_eq!(line_set(&second.stdout), first_lines);

    let db = Db::open(&copy, Options::default())?;
    assert_eq!(db.len(), 8);
    assert_eq!(db.expiry(b"\x80expiring binary")?, Some(Some(expires)));
    assert_eq!(
        db.get(b"binary value")?.as_deref(),
        Some(&b"\x00\x80\r\n"[..])
    );
    assert_eq!(db.expiry(b"user:1")?, Some(None));
    Ok(())
}

#[test]
fn a_store_held_by_another_handle_is_reported_locked() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), Options::default())?;
    db.insert(b"k", b"v")?;
    db.sync()?;
    for args in [
        &["get", "k"][..],
        &["insert", "k", "w"],
        &["stats"],
        &["check"],
        &["export"],
    ] {
        let out = run(dir.path(), args)?;
        assert_error(&out, "is locked by another process");
        assert!(out.stdout.is_empty(), "{args:?}: {}", stdout(&out));
    }
    assert_eq!(db.get(b"k")?.as_deref(), Some(&b"v"[..]));
    db.close()?;
    assert_eq!(run(dir.path(), ["get", "k"])?.stdout, b"v");
    Ok(())
}

#[test]
fn usage_errors_exit_2_with_clap_messages() -> TestResult {
    let dir = tempfile::tempdir()?;
    let store = dir.path();
    let cases: [(&[&str], &str); 4] = [
        (&["frobnicate"], "unexpected argument 'frobnicate' found"),
        (&["compact", "now"], "unexpected argument 'now' found"),
        (&["get"], "required arguments were not provided"),
        (&["insert", "k"], "required arguments were not provided"),
    ];
    for (args, message) in cases {
        let out = run(store, args)?;
        assert_code(&out, 2);
        let err = stderr(&out);
        assert!(
            err.starts_with("error: ") && err.contains(message),
            "{args:?}: {err}"
        );
        assert!(err.contains("Usage: emberkv <STORE_DIR> "), "{err}");
    }
    let bare = Command::new(env!("CARGO_BIN_EXE_emberkv")).output()?;
    assert_code(&bare, 2);
    assert!(stderr(&bare).contains("Usage: emberkv <STORE_DIR> <COMMAND>"));
    assert_eq!(
        std::fs::read_dir(store)?.count(),
        0,
        "a usage error wrote files"
    );
    Ok(())
}

#[test]
fn malformed_import_names_the_line_and_imports_nothing() -> TestResult {
    let dir = tempfile::tempdir()?;
    let store = dir.path().join("store");
    assert_code(&run(&store, ["insert", "keep", "me"])?, 0);
    let input = dir.path().join("bad.jsonl");
    std::fs::write(
        &input,
        concat!(
            "{\"key\":\"a\",\"value\":\"1\"}\n",
            "\n",
            "{\"key\":\"b\",\"value\":\"2\"}\n",
            "{\"key\":\"c\",\"value\":}\n",
            "{\"key\":\"d\",\"value\":\"4\"}\n",
        ),
    )?;
    let out = run(&store, [OsStr::new("import"), input.as_os_str()])?;
    assert_error(
        &out,
        &format!(
            "{} line 4: invalid JSON at column 20: expected value",
            input.display()
        ),
    );

    let bad_base64 =
        "{\"key\":\"a\",\"value\":\"1\"}\n{\"key\":{\"base64\":\"!\"},\"value\":\"2\"}\n";
    let out = run_with_input(&store, ["import"], bad_base64.as_bytes())?;
    assert_error(&out, "stdin line 2: field \"key\" holds invalid base64");

    let db = Db::open(&store, Options::default())?;
    assert_eq!(db.len(), 1, "a malformed import wrote records");
    assert_eq!(db.get(b"keep")?.as_deref(), Some(&b"me"[..]));
    Ok(())
}

/// An I/O error is reported with the system's message once (it was
/// printed twice, `... Not a directory (os error 20): Not a directory (os
/// error 20)`, as the engine's error both quoted it and gave it as its
/// source; found by a newcomer's walkthrough).
#[test]
fn an_io_error_names_the_system_message_once() -> TestResult {
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("afile");
    std::fs::write(&file, b"not a directory")?;
    let out = run(&file.join("sub"), ["insert", "k", "v"])?;
    assert_error(&out, "Not a directory");
    assert_eq!(
        stderr(&out).matches("Not a directory").count(),
        1,
        "{}",
        stderr(&out)
    );
    Ok(())
}

#[test]
fn read_commands_refuse_a_directory_without_a_store() -> TestResult {
    let dir = tempfile::tempdir()?;
    for args in [
        &["get", "k"][..],
        &["remove", "k"],
        &["stats"],
        &["check"],
        &["export"],
        &["salvage"],
    ] {
        let out = run(dir.path(), args)?;
        assert_error(
            &out,
            "is not an emberkv store (it has no emberkv.meta file)",
        );
    }
    assert_eq!(
        std::fs::read_dir(dir.path())?.count(),
        0,
        "files were created"
    );
    Ok(())
}

#[test]
fn backup_writes_a_store_that_opens_on_its_own() -> TestResult {
    let dir = tempfile::tempdir()?;
    let store = dir.path().join("store");
    let dest = dir.path().join("backup");
    assert_code(&run(&store, ["insert", "k", "v"])?, 0);
    let out = run(&store, [OsStr::new("backup"), dest.as_os_str()])?;
    assert_code(&out, 0);
    assert_code(&run(&store, ["remove", "k"])?, 0);
    assert_eq!(run(&dest, ["get", "k"])?.stdout, b"v");
    assert_error(
        &run(&store, [OsStr::new("backup"), dest.as_os_str()])?,
        "is not empty",
    );
    Ok(())
}

#[test]
fn compact_reclaims_overwritten_records() -> TestResult {
    let dir = tempfile::tempdir()?;
    let opts = Options::default()
        .segment_bytes(1 << 20)
        .compaction_garbage(None);
    let db = Db::open(dir.path(), opts.clone())?;
    for round in 0..4u8 {
        // A length of its own each round: every write appends (none goes
        // in place), leaving the older values as garbage.
        let value = vec![round; 500 + usize::from(round)];
        for k in 0..2_000u32 {
            db.insert(&k.to_le_bytes(), &value)?;
        }
    }
    db.sync()?;
    let before = db.stats()?.disk_bytes;
    db.close()?;
    let out = run(dir.path(), ["compact"])?;
    assert_code(&out, 0);
    assert!(
        stdout(&out).contains("bytes reclaimed: "),
        "{}",
        stdout(&out)
    );
    let db = Db::open(dir.path(), opts)?;
    let after = db.stats()?.disk_bytes;
    assert!(
        after < before / 2,
        "{before} bytes on disk before, {after} after"
    );
    assert_eq!(db.get(&1999u32.to_le_bytes())?, Some(vec![3; 503]));
    Ok(())
}

/// `export` and `salvage` refuse an output file inside the store, by any
/// path: an attack on the CLI found `export STORE/000000000000.seg`
/// truncating the segment it was reading (every key lost), and `export
/// STORE/emberkv.meta` succeeding while making the store unopenable.
#[test]
fn export_and_salvage_refuse_an_output_inside_the_store() -> TestResult {
    let dir = tempfile::tempdir()?;
    let store = dir.path().join("store");
    build_segmented_store(&store)?;
    let clean = run(&store, ["export"])?;
    assert_code(&clean, 0);
    let files = |store: &Path| -> std::io::Result<Vec<(String, Vec<u8>)>> {
        let mut files = Vec::new();
        for entry in std::fs::read_dir(store)? {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            files.push((name, std::fs::read(entry.path())?));
        }
        files.sort();
        Ok(files)
    };
    let before = files(&store)?;
    let inside = [
        store.join("000000000000.seg"),
        store.join("emberkv.meta"),
        store.join("new.jsonl"),
        store.join("../store/000000000001.seg"),
    ];
    for path in &inside {
        for command in ["export", "salvage"] {
            let out = run(&store, [OsStr::new(command), path.as_os_str()])?;
            assert_error(&out, "lies inside the store");
            assert_eq!(files(&store)?, before, "{command} {}", path.display());
        }
    }
    let link = dir.path().join("link.jsonl");
    std::os::unix::fs::symlink(store.join("000000000000.seg"), &link)?;
    assert_error(
        &run(&store, [OsStr::new("export"), link.as_os_str()])?,
        "lies inside the store",
    );
    assert_eq!(files(&store)?, before);
    assert_eq!(
        line_set(&run(&store, ["export"])?.stdout),
        line_set(&clean.stdout)
    );
    Ok(())
}

/// `salvage FILE` of a store another handle holds leaves FILE as it was
/// (it was emptied before salvage found the store locked).
#[test]
fn salvage_of_a_locked_store_leaves_its_output_file_alone() -> TestResult {
    let dir = tempfile::tempdir()?;
    let store = dir.path().join("store");
    let db = Db::open(&store, Options::default())?;
    db.insert(b"k", b"v")?;
    let file = dir.path().join("earlier.jsonl");
    std::fs::write(&file, b"an earlier salvage\n")?;
    let out = run(&store, [OsStr::new("salvage"), file.as_os_str()])?;
    assert_error(&out, "is locked by another process");
    assert_eq!(std::fs::read(&file)?, b"an earlier salvage\n");
    db.close()?;
    Ok(())
}

/// A store whose meta file is gone: a write refuses it without making a
/// new one (which would name another store and hide every segment from
/// salvage, as an attack on the CLI found), and salvage gets every key
/// out from the segment headers.
#[test]
fn a_store_without_its_meta_file_is_salvaged_whole() -> TestResult {
    let dir = tempfile::tempdir()?;
    let store = dir.path().join("store");
    build_segmented_store(&store)?;
    let clean = run(&store, ["export"])?;
    assert_code(&clean, 0);
    std::fs::remove_file(store.join("emberkv.meta"))?;
    assert_error(
        &run(&store, ["insert", "k", "v"])?,
        "emberkv.meta is missing",
    );
    assert!(
        !store.join("emberkv.meta").exists(),
        "insert made a meta file"
    );
    let out = run(&store, ["salvage"])?;
    assert!(
        stderr(&out).contains("damaged or missing"),
        "{}",
        stderr(&out)
    );
    assert_eq!(line_set(&out.stdout), line_set(&clean.stdout));
    assert!(
        !store.join("emberkv.meta").exists(),
        "salvage made a meta file"
    );
    Ok(())
}

/// `import` of an endless line stops at the longest line a record can
/// take with one clear error, and creates no store (an attack on the CLI
/// found `import /dev/zero` reading until allocation failed, then
/// aborting with a backtrace).
#[test]
fn import_of_an_endless_line_is_an_error() -> TestResult {
    let dir = tempfile::tempdir()?;
    let store = dir.path().join("store");
    let out = run(&store, ["import", "/dev/zero"])?;
    assert_error(&out, "/dev/zero line 1: longer than 403050496 bytes");
    assert!(!store.exists(), "a store was created");
    Ok(())
}

/// `get` of a key longer than the limit is the same error as `insert` and
/// `remove` give, not "key not found" (found by an attack on the CLI).
#[test]
fn get_of_an_oversize_key_is_an_error() -> TestResult {
    let dir = tempfile::tempdir()?;
    let store = dir.path().join("store");
    assert_code(&run(&store, ["insert", "k", "v"])?, 0);
    let key = "k".repeat(65_537);
    for args in [
        vec!["get", &key],
        vec!["remove", &key],
        vec!["insert", &key, "v"],
    ] {
        let out = run(&store, &args)?;
        assert_error(&out, "key of 65537 bytes exceeds the limit of 65536 bytes");
    }
    Ok(())
}

/// With stderr a pipe nobody reads, a command exits with its own code,
/// not 101 from a panic in `eprintln!` (found by an attack on the CLI:
/// `emberkv DIR get nokey 2>&1 | head -c0`).
#[test]
fn an_unread_stderr_keeps_the_exit_code() -> TestResult {
    let dir = tempfile::tempdir()?;
    let store = dir.path().join("store");
    assert_code(&run(&store, ["insert", "k", "v"])?, 0);
    for (args, code) in [
        (&["get", "nokey"][..], 1),
        (&["export"], 0),
        (&["get", "k", "x"], 2),
    ] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_emberkv"))
            .arg(&store)
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()?;
        // The read end closed before the child writes (it has to start
        // and open the store first): its writes meet EPIPE.
        drop(child.stderr.take());
        assert_eq!(child.wait()?.code(), Some(code), "{args:?}");
    }
    Ok(())
}

/// Import from stdin or from a pipe: the stream is checked as it is copied
/// to a temporary file and inserted from that copy (it was held in memory
/// whole); a malformed line at its end imports nothing and is named by its
/// line number, and a copy that cannot be made is an error before
/// anything is imported.
#[test]
fn a_streamed_import_is_checked_whole_then_inserted_from_a_copy() -> TestResult {
    let dir = tempfile::tempdir()?;
    let mut input = String::new();
    for k in 0..20_000 {
        input.push_str(&format!(
            "{{\"key\":\"k{k}\",\"value\":\"{}\"}}\n",
            "v".repeat(k % 200)
        ));
        if k % 1_000 == 0 {
            input.push('\n');
        }
    }
    let store = dir.path().join("stdin");
    let out = run_with_input(&store, ["import"], input.as_bytes())?;
    assert_code(&out, 0);
    assert_eq!(
        stderr(&out),
        "imported 20000 records from stdin (0 already expired)\n"
    );
    let db = Db::open(&store, Options::default().read_only(true))?;
    assert_eq!(db.len(), 20_000);
    assert_eq!(db.get(b"k19999")?, Some(vec![b'v'; 19_999 % 200]));
    drop(db);

    // A named pipe, with a malformed last line: line 20,000 + 20 blank
    // lines + 1.
    let fifo = dir.path().join("fifo");
    let made = Command::new("mkfifo").arg(&fifo).status()?;
    assert!(made.success());
    let bad = format!("{input}{{\"key\":\"late\"}}\n");
    let writer = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::write(fifo, bad))
    };
    let piped = dir.path().join("piped");
    let out = run(&piped, [OsStr::new("import"), fifo.as_os_str()])?;
    writer.join().unwrap()?;
    assert_error(
        &out,
        &format!("{} line 20021: missing field \"value\"", fifo.display()),
    );
    assert!(
        !piped.join("emberkv.meta").exists(),
        "a malformed import made a store"
    );

    let out = Command::new(env!("CARGO_BIN_EXE_emberkv"))
        .arg(&piped)
        .arg("import")
        .env("TMPDIR", dir.path().join("no such directory"))
        .stdin(Stdio::null())
        .output()?;
    assert_error(&out, "cannot create a temporary file in");
    assert!(!piped.join("emberkv.meta").exists());
    Ok(())
}
