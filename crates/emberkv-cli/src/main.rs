//! `emberkv`: the admin command line of an emberkv store.
//!
//! Run `emberkv --help` for the commands, their exit codes and the
//! export/import format.

mod hex;
mod jsonl;

use std::fs::{self, File};
use std::io::{self, BufRead, BufReader, BufWriter, Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};
use emberkv::{Db, MAX_KEY_BYTES, MAX_VALUE_BYTES, Options};

use crate::jsonl::Record;

/// The file every emberkv store directory holds (its format metadata).
const META_FILE: &str = "emberkv.meta";

/// Exit code of a command that found no such key, a store with problems,
/// or damaged records it skipped.
const EXIT_NEGATIVE: u8 = 1;
/// Exit code of an error (clap uses it for usage errors too).
const EXIT_ERROR: u8 = 2;

const AFTER_HELP: &str = "\
The store:
  STORE_DIR comes first, before the command. Every command except `insert`
  and `import` needs an existing store there; those two create one (with
  default options) when the directory holds none. `get`, `stats`, `export`,
  `backup`, `check` and `salvage` only read: they open the store read-only
  and change no byte of its files (a torn tail the last crash left is read
  past, not cut; an empty LOCK file is made where one is missing), and they
  may run beside each other. The other commands write, and
  open the store alone. A store in use by a running process, or by a command
  that writes, is reported as locked.

Keys and values:
  A key or value that starts with '-' (other than a number such as -5) goes
  after '--', which ends the options: `insert -- -k --v`. Otherwise it would
  be taken for an option, and a mistyped option for a key or value.

Exit status:
  0  success
  1  `get` or `remove`: no such key; `check`: the store has problems;
     `export --skip-damaged`: damaged records were skipped; `salvage`:
     damage, missing bytes or unusable files were found (see stderr)
  2  an error: bad usage, a store that cannot be opened or is locked,
     an I/O failure, malformed import input

Export format (JSON Lines, one object per live key, in no particular order):
  {\"key\": K, \"value\": V, \"expires_at_ms\": N}
  K and V are JSON strings when the bytes are valid UTF-8, otherwise
  {\"base64\": \"...\"} (standard alphabet, padded); expires_at_ms (Unix time in
  milliseconds) is present only for a key with an expiry.";

/// Administers the emberkv store in STORE_DIR.
#[derive(Debug, Parser)]
#[command(name = "emberkv", version, after_help = AFTER_HELP)]
struct Cli {
    /// The store's directory.
    #[arg(value_name = "STORE_DIR")]
    store: PathBuf,
    /// What to do.
    #[command(subcommand)]
    command: Command,
}

/// The commands.
#[derive(Debug, Subcommand)]
enum Command {
    /// Print the value of KEY to stdout as raw bytes, with no newline added
    /// (exit 1 if absent).
    Get {
        /// The key (UTF-8, or hex with --hex).
        #[arg(allow_negative_numbers = true)]
        key: String,
        /// Give KEY as hex, and print the value as hex followed by a newline.
        #[arg(long)]
        hex: bool,
    },
    /// Insert VALUE under KEY, replacing any previous value and expiry.
    Insert {
        /// The key (UTF-8, or hex with --hex).
        #[arg(allow_negative_numbers = true)]
        key: String,
        /// The value (UTF-8, or hex with --hex).
        #[arg(allow_negative_numbers = true)]
        value: String,
        /// Expire the key this many seconds from now.
        #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..))]
        ttl: Option<u64>,
        /// Give KEY and VALUE as hex.
        #[arg(long)]
        hex: bool,
    },
    /// Remove KEY (exit 1 if absent).
    Remove {
        /// The key (UTF-8, or hex with --hex).
        #[arg(allow_negative_numbers = true)]
        key: String,
        /// Give KEY as hex.
        #[arg(long)]
        hex: bool,
    },
    /// Print the store's size and memory counters.
    ///
    /// The memory figures (index and hot-tier bytes) are those of this
    /// command's own opening of the store. The counters a store keeps since
    /// it was opened (compactions, records appended, fdatasyncs, read cache
    /// hits) are left out: this command's own opening does none of that
    /// (a program reads them from `Db::stats`).
    Stats {
        /// Print one JSON object instead of text lines.
        #[arg(long)]
        json: bool,
    },
    /// Verify every record's checksum and the index against the log,
    /// without changing anything (exit 0 if sound, 1 if problems are found,
    /// 2 if the check could not run). A torn tail past the durable mark, as
    /// a crash leaves it, is listed as a repair the next open makes, not a
    /// problem.
    Check,
    /// Run one compaction pass: reclaim the space of overwritten, removed
    /// and expired records, and print what was reclaimed.
    Compact,
    /// Write a consistent copy of the store to DEST, a new or empty
    /// directory (on the same file system, sealed segments are hard-linked,
    /// not copied; no store writes a sealed segment again).
    Backup {
        /// The directory to create the copy in.
        dest: PathBuf,
    },
    /// Write every live key, its value and its expiry as JSON Lines (format
    /// below) to FILE, or to stdout.
    ///
    /// A record that fails its checksum stops the export (exit 2), unless
    /// --skip-damaged is given.
    Export {
        /// The file to write (created or truncated); stdout when absent.
        file: Option<PathBuf>,
        /// Skip records that fail their checks, each named on stderr, and
        /// export every other live key: salvages what still reads back
        /// from a damaged store (exit 1 if any was skipped).
        #[arg(long)]
        skip_damaged: bool,
    },
    /// Write every key the segment files still hold, as export lines, to
    /// FILE or stdout, without opening the store: for a store that open
    /// refuses as damaged (check names the damage). Records that fail
    /// their checks are skipped, and the scan goes on after them; each
    /// damaged byte range is named on stderr (exit 1 if any). A key whose
    /// newest record was damaged comes back with its previous value, and
    /// the record after each damaged range is left out too (it may end a
    /// write batch the damage cut): import the output into a new store and
    /// review those keys.
    Salvage {
        /// The file to write (created or truncated); stdout when absent.
        file: Option<PathBuf>,
    },
    /// Insert the records of a JSON Lines export from FILE, or from stdin.
    ///
    /// The whole input is read and checked first (JSON syntax, fields,
    /// base64, key and value size limits): if any line is malformed, the
    /// error names its line number and nothing at all is imported. Then the
    /// records are inserted in input order, with their expiry (a later line
    /// for the same key wins; an expiry already past leaves the key absent);
    /// keys not in the input are left as they are. Blank lines are skipped.
    /// A regular file is read twice (checked, then inserted); stdin, or a
    /// pipe, is copied to an unnamed temporary file in $TMPDIR as it is
    /// checked (disk space for the whole input), and inserted from that:
    /// either way one record at a time is held in memory.
    /// The store is synced every 64 MiB of records and at the end; should
    /// it fail partway (say, a full disk, met when written data is
    /// flushed), the error names the line and how many records are
    /// imported for good (later ones may be missing). A line longer than
    /// a record of the largest key and value can take is an error.
    Import {
        /// The file to read; stdin when absent.
        file: Option<PathBuf>,
    },
}

/// Writes a line to stderr as `eprintln!` does, but goes on when stderr is
/// closed or gone (`eprintln!` panics then, and the exit code would be
/// 101 instead of the command's: found by an attack on the CLI).
macro_rules! say {
    ($($arg:tt)*) => {{
        let _ = writeln!(io::stderr(), $($arg)*);
    }};
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        // The reader of our output went away (`emberkv DIR export | head`):
        // what it read was right, and there is nothing left to say.
        Err(err) if is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            say!("error: {err:#}");
            ExitCode::from(EXIT_ERROR)
        }
    }
}

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause
            .downcast_ref::<io::Error>()
            .is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
    })
}

/// Runs one command; `Err` is an error to report, `Ok` the exit code.
fn run(cli: Cli) -> Result<ExitCode> {
    let store = cli.store.as_path();
    match cli.command {
        Command::Get { key, hex } => {
            let bytes = arg_bytes(&key, hex, "KEY")?;
            // As insert and remove say: no such key can exist.
            if bytes.len() > MAX_KEY_BYTES {
                bail!(
                    "key of {} bytes exceeds the limit of {MAX_KEY_BYTES} bytes",
                    bytes.len()
                );
            }
            let db = open_read_only(store)?;
            let value = db.get(&bytes)?;
            db.close()?;
            let Some(value) = value else {
                say!("key not found: {key}");
                return Ok(ExitCode::from(EXIT_NEGATIVE));
            };
            let mut out = io::stdout().lock();
            if hex {
                writeln!(out, "{}", hex::encode(&value))?;
            } else {
                out.write_all(&value)?;
            }
            out.flush()?;
        }
        Command::Insert {
            key,
            value,
            ttl,
            hex,
        } => {
            let (key, value) = (
                arg_bytes(&key, hex, "KEY")?,
                arg_bytes(&value, hex, "VALUE")?,
            );
            let db = open_or_create(store)?;
            match ttl {
                Some(secs) => db.insert_with_ttl(&key, &value, Duration::from_secs(secs))?,
                None => db.insert(&key, &value)?,
            }
            db.close()?;
        }
        Command::Remove { key, hex } => {
            let bytes = arg_bytes(&key, hex, "KEY")?;
            let db = open(store)?;
            let removed = db.remove(&bytes)?;
            db.close()?;
            if !removed {
                say!("key not found: {key}");
                return Ok(ExitCode::from(EXIT_NEGATIVE));
            }
        }
        Command::Stats { json } => stats(store, json)?,
        Command::Check => return check(store),
        Command::Compact => {
            let db = open(store)?;
            let report = db.compact()?;
            let disk_bytes = db.stats()?.disk_bytes;
            db.close()?;
            writeln!(
                io::stdout().lock(),
                "compacted segments: {}; records copied: {}; bytes reclaimed: {}; bytes on disk: {}",
                report.segments,
                report.records_copied,
                report.bytes_reclaimed,
                disk_bytes
            )?;
            for seg in &report.damaged {
                say!(
                    "segment {seg} left in place: one of its records fails its checks (run check)"
                );
            }
        }
        Command::Backup { dest } => {
            let db = open_read_only(store)?;
            db.backup(&dest)
                .with_context(|| format!("backup to {} failed", dest.display()))?;
            db.close()?;
            say!("backed up {} to {}", store.display(), dest.display());
        }
        Command::Export { file, skip_damaged } => {
            if export(store, file.as_deref(), skip_damaged)? > 0 {
                return Ok(ExitCode::from(EXIT_NEGATIVE));
            }
        }
        Command::Salvage { file } => {
            if !salvage(store, file.as_deref())? {
                return Ok(ExitCode::from(EXIT_NEGATIVE));
            }
        }
        Command::Import { file } => import(store, file.as_deref())?,
    }
    Ok(ExitCode::SUCCESS)
}

/// A key or value argument as bytes: its UTF-8, or the bytes its hex
/// digits spell when `hex`.
fn arg_bytes(arg: &str, hex: bool, name: &str) -> Result<Vec<u8>> {
    if !hex {
        return Ok(arg.as_bytes().to_vec());
    }
    hex::decode(arg).map_err(|e| anyhow::anyhow!("{name} is not valid hex: {e}"))
}

/// Opens the existing store in `dir`, refusing a directory that holds no
/// store (rather than creating one there).
fn open(dir: &Path) -> Result<Db> {
    require_store(dir)?;
    open_or_create(dir)
}

/// Opens the store in `dir`, creating it when the directory holds none.
fn open_or_create(dir: &Path) -> Result<Db> {
    open_with(dir, Options::default())
}

/// Opens the existing store in `dir` read-only (`Options::read_only`): the
/// commands that only read leave its records as they are, and may run
/// beside each other (not beside a writer).
fn open_read_only(dir: &Path) -> Result<Db> {
    require_store(dir)?;
    open_with(dir, Options::default().read_only(true))
}

/// Opens the store in `dir` with `options`; says on stderr when the
/// newest segment ended in a torn tail, which a writable open cuts off and
/// a read-only one reads past.
fn open_with(dir: &Path, options: Options) -> Result<Db> {
    let read_only = options.read_only;
    let db = Db::open(dir, options).map_err(|e| store_error(e, "open", dir))?;
    let torn = db.stats().map_or(0, |s| s.torn_bytes_cut);
    let why = "records the last crash left unfinished, or damage past the durable mark";
    match torn {
        0 => {}
        _ if read_only => say!(
            "warning: {} ends in {torn} bytes of a torn write in its newest segment ({why}): \
             read past, and cut off by the next command that writes",
            dir.display()
        ),
        _ => say!(
            "warning: opening {} cut {torn} bytes of a torn write off its newest segment ({why})",
            dir.display()
        ),
    }
    Ok(db)
}

/// Fails unless `dir` holds an emberkv store.
fn require_store(dir: &Path) -> Result<()> {
    if !dir.join(META_FILE).is_file() {
        return Err(not_a_store(dir));
    }
    Ok(())
}

/// The error of [`require_store`].
fn not_a_store(dir: &Path) -> anyhow::Error {
    anyhow::anyhow!(
        "{} is not an emberkv store (it has no {META_FILE} file)",
        dir.display()
    )
}

/// An engine error from opening or checking the store in `dir`, saying
/// which store when the engine's message does not.
fn store_error(e: emberkv::Error, verb: &str, dir: &Path) -> anyhow::Error {
    match e {
        emberkv::Error::Locked { .. } => e.into(),
        _ => anyhow::Error::new(e).context(format!("cannot {verb} store {}", dir.display())),
    }
}

/// `stats`: the counters as aligned text lines, or one JSON object.
fn stats(dir: &Path, json: bool) -> Result<()> {
    let db = open_read_only(dir)?;
    let s = db.stats()?;
    db.close()?;
    let mut out = io::stdout().lock();
    if json {
        let object = serde_json::json!({
            "keys": s.keys,
            "expiring_keys": s.expiring_keys,
            "logical_bytes": s.logical_bytes,
            "live_record_bytes": s.live_record_bytes,
            "disk_bytes": s.disk_bytes,
            "space_amplification": s.space_amplification,
            "index_bytes": s.index_bytes,
            "index_bytes_per_key": s.index_bytes_per_key,
            "hot_bytes": s.hot_bytes,
        });
        writeln!(out, "{}", serde_json::to_string_pretty(&object)?)?;
    } else {
        let lines: [(&str, String); 9] = [
            ("keys", s.keys.to_string()),
            ("keys with an expiry", s.expiring_keys.to_string()),
            ("logical bytes", s.logical_bytes.to_string()),
            ("live record bytes", s.live_record_bytes.to_string()),
            ("disk bytes", s.disk_bytes.to_string()),
            (
                "space amplification",
                format!("{:.2}", s.space_amplification),
            ),
            ("index bytes", s.index_bytes.to_string()),
            (
                "index bytes per key",
                format!("{:.1}", s.index_bytes_per_key),
            ),
            ("hot tier bytes", s.hot_bytes.to_string()),
        ];
        for (name, value) in lines {
            writeln!(out, "{:<21}{value}", format!("{name}:"))?;
        }
    }
    out.flush()?;
    Ok(())
}

/// `check`: prints the report; exit 0 when sound (with the repairs the
/// next open makes listed, such as a crash's torn tail), 1 with problems.
fn check(dir: &Path) -> Result<ExitCode> {
    require_store(dir)?;
    let report = emberkv::check(dir).map_err(|e| store_error(e, "check", dir))?;
    // The report's Display lists each problem on a line of its own.
    writeln!(io::stdout().lock(), "{report}")?;
    Ok(if report.is_sound() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_NEGATIVE)
    })
}

/// `export`: every live record as a JSON line, to `file` or stdout;
/// returns how many damaged records `skip_damaged` skipped.
fn export(dir: &Path, file: Option<&Path>, skip_damaged: bool) -> Result<u64> {
    let db = open_read_only(dir)?;
    if let Some(path) = file {
        outside_store(dir, path)?;
    }
    let (name, mut out) = output(file)?;
    let (mut count, mut skipped) = (0u64, 0u64);
    for item in db.iter() {
        let (key, value) = match item {
            Err(e @ emberkv::Error::Corruption { .. }) if skip_damaged => {
                say!("skipped a damaged record: {e}");
                skipped += 1;
                continue;
            }
            item => item?,
        };
        // `iter` gives no expiry; `None` here means the key expired since
        // `iter` read it (no writer can have the store open meanwhile).
        let Some(expiry) = db.expiry(&key)? else {
            continue;
        };
        let record = Record {
            key,
            value,
            expires_at_ms: expiry.map(unix_ms),
        };
        writeln!(out, "{}", record.to_line()?)
            .with_context(|| format!("cannot write to {name}"))?;
        count += 1;
    }
    out.flush()
        .with_context(|| format!("cannot write to {name}"))?;
    db.close()?;
    if skipped > 0 {
        say!("exported {count} records to {name}; skipped {skipped} damaged records");
    } else {
        say!("exported {count} records to {name}");
    }
    Ok(skipped)
}

/// Where `export` and `salvage` write: `file` (created or truncated), or
/// stdout; and its name for messages. Check first that `file` lies
/// outside the store ([`outside_store`]).
fn output(file: Option<&Path>) -> Result<(String, BufWriter<Box<dyn Write>>)> {
    let (name, sink): (String, Box<dyn Write>) = match file {
        Some(path) => (
            path.display().to_string(),
            Box::new(
                File::create(path).with_context(|| format!("cannot create {}", path.display()))?,
            ),
        ),
        None => ("stdout".to_owned(), Box::new(io::stdout().lock())),
    };
    Ok((name, BufWriter::new(sink)))
}

/// Fails when `path` (which need not exist) lies inside the store `dir`,
/// through `..` and symbolic links: writing it would overwrite the store's
/// own files (an attack on the CLI truncated a segment file so, losing
/// every key).
fn outside_store(dir: &Path, path: &Path) -> Result<()> {
    let Ok(store) = dir.canonicalize() else {
        return Ok(());
    };
    let target = path.canonicalize().or_else(|_| {
        let parent = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        parent
            .canonicalize()
            .map(|p| p.join(path.file_name().unwrap_or_default()))
    });
    if target.is_ok_and(|t| t.starts_with(&store)) {
        bail!(
            "{} lies inside the store {}: writing it would overwrite the store's files",
            path.display(),
            dir.display()
        );
    }
    Ok(())
}

/// `salvage`: every key the segment files still hold, as export lines, to
/// `file` or stdout; returns whether nothing was damaged. The file is
/// created once salvage has the store (a locked store leaves it as it
/// was).
fn salvage(dir: &Path, file: Option<&Path>) -> Result<bool> {
    if let Some(path) = file {
        outside_store(dir, path)?;
    }
    let mut out = None;
    let open_output = || output(file);
    let report = emberkv::salvage(dir, |key, value, expires_at_ms| {
        let record = Record {
            key: key.to_vec(),
            value: value.to_vec(),
            expires_at_ms,
        };
        let line = record.to_line().map_err(io::Error::other)?;
        if out.is_none() {
            out = Some(open_output().map_err(|e| io::Error::other(format!("{e:#}")))?);
        }
        let (_, out) = out.as_mut().expect("opened above");
        writeln!(out, "{line}")?;
        Ok(())
    })
    .map_err(|e| match e {
        // As the other commands say it: no meta file and no segment file.
        emberkv::Error::InvalidPath { .. } => not_a_store(dir),
        e => store_error(e, "salvage", dir),
    })?;
    let (name, mut out) = match out {
        Some(out) => out,
        None => output(file)?,
    };
    out.flush()
        .with_context(|| format!("cannot write to {name}"))?;
    for damage in &report.damaged {
        let keys: Vec<String> = damage.probable_keys.iter().map(|k| show_key(k)).collect();
        let key = if keys.is_empty() {
            String::new()
        } else {
            format!(
                " (its bytes suggest key {}; the damage may be in them)",
                keys.join(", ")
            )
        };
        say!(
            "damaged: {} at offset {}, skipped{key}",
            count(damage.len, "byte"),
            damage.addr
        );
    }
    for (addr, len) in &report.missing {
        say!(
            "missing: {} at offset {addr} (a file missing or cut short)",
            count(*len, "byte")
        );
    }
    for warning in &report.warnings {
        say!("warning: {warning}");
    }
    for key in &report.left_out {
        say!(
            "left out: key {} (its record may belong to a write batch the damage cut)",
            show_key(key)
        );
    }
    say!(
        "salvaged {} to {name} from {} in {}; {}, {}, {} left out",
        count(report.keys, "key"),
        count(report.records, "record"),
        count(report.segments as u64, "segment file"),
        count(report.damaged.len() as u64, "damaged range"),
        count(report.missing.len() as u64, "missing range"),
        count(report.left_out.len() as u64, "record"),
    );
    if !report.is_whole() {
        say!(
            "the keys named above are missing from the output, or come back with an older \
             value where one remained: review them"
        );
    }
    Ok(report.is_whole())
}

/// `n` and `noun`, plural unless `n` is 1 (`1 record`, `2 records`).
fn count(n: u64, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// A key for a message: its UTF-8 as a quoted string, else `0x` and hex.
fn show_key(key: &[u8]) -> String {
    match std::str::from_utf8(key) {
        Ok(text) => format!("{text:?}"),
        Err(_) => format!("0x{}", hex::encode(key)),
    }
}

/// `import`: reads and checks every line of `file` (or stdin), then
/// inserts the records. A regular file is read twice (checked whole, then
/// inserted a line at a time), so that an import holds one record in
/// memory, not the file; stdin and pipes are held in memory between the
/// two.
fn import(dir: &Path, file: Option<&Path>) -> Result<()> {
    let open_file = |path: &Path| -> Result<File> {
        File::open(path).with_context(|| format!("cannot open {}", path.display()))
    };
    let name = file.map_or("stdin".to_owned(), |p| p.display().to_string());
    let regular = file.filter(|p| fs::metadata(p).is_ok_and(|m| m.is_file()));
    // What the second pass reads: the regular file again, or the copy of
    // a stream the first pass made as it read.
    let mut second = match (regular, file) {
        (Some(path), _) => {
            read_records(BufReader::new(open_file(path)?), &name, |_, _| Ok(()))?;
            open_file(path)?
        }
        (None, Some(path)) => spool(open_file(path)?, &name)?,
        (None, None) => spool(io::stdin().lock(), &name)?,
    };
    let mut importer = Importer {
        db: open_or_create(dir)?,
        name: &name,
        done: 0,
        durable: 0,
        unsynced: 0,
        expired: 0,
        last_line: 0,
    };
    // A regular file that changes between the two passes may fail the
    // second: the records before the failing line stay imported.
    second.rewind()?;
    read_records(BufReader::new(second), &name, |n, record| {
        importer.insert(n, &record)
    })?;
    importer.finish()
}

/// Checks every line of the stream `source` as [`read_records`] does
/// while copying the bytes read to an unnamed temporary file (in
/// `$TMPDIR`, deleted when closed), and returns that file: a stream cannot
/// be read twice, and holding it in memory took as much as the input.
fn spool(source: impl Read, name: &str) -> Result<File> {
    let file = tempfile::tempfile().with_context(|| {
        format!(
            "cannot create a temporary file in {} to hold {name}",
            std::env::temp_dir().display()
        )
    })?;
    let mut tee = Tee {
        source,
        copy: BufWriter::new(file),
    };
    read_records(BufReader::new(&mut tee), name, |_, _| Ok(()))?;
    tee.copy.into_inner().map_err(|e| {
        anyhow::Error::new(e.into_error())
            .context(format!("cannot copy {name} to a temporary file"))
    })
}

/// A reader that writes what it reads from `source` to `copy`.
struct Tee<R, W> {
    source: R,
    copy: W,
}

impl<R: Read, W: Write> Read for Tee<R, W> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.source.read(buf)?;
        self.copy.write_all(&buf[..n]).map_err(|e| {
            io::Error::new(e.kind(), format!("cannot copy it to a temporary file: {e}"))
        })?;
        Ok(n)
    }
}

/// The records `import` has inserted, and how many are durable: the store
/// is synced every [`SYNC_EVERY_BYTES`] and at the end, so that a failure
/// (a full disk, which a write into the hot tier only meets when it is
/// flushed) can say how many records are imported for good.
struct Importer<'a> {
    db: Db,
    name: &'a str,
    done: usize,
    durable: usize,
    unsynced: usize,
    expired: u64,
    last_line: usize,
}

impl Importer<'_> {
    fn insert(&mut self, line: usize, record: &Record) -> Result<()> {
        if self.unsynced >= SYNC_EVERY_BYTES {
            self.sync(line)?;
        }
        self.unsynced += record.key.len() + record.value.len();
        let written = match record.expires_at_ms {
            None => self.db.insert(&record.key, &record.value),
            Some(ms) => {
                let at = from_unix_ms(ms);
                if at <= SystemTime::now() {
                    self.expired += 1;
                }
                self.db.insert_with_expiry(&record.key, &record.value, at)
            }
        };
        written.with_context(|| {
            format!(
                "{} line {line}: insert failed; the first {} records were imported, later \
                 ones may be missing",
                self.name, self.durable
            )
        })?;
        self.done += 1;
        self.last_line = line;
        Ok(())
    }

    /// Syncs the store; `line` is the line to name should it fail.
    fn sync(&mut self, line: usize) -> Result<()> {
        self.db.sync().with_context(|| {
            format!(
                "{} line {line}: the records could not be made durable; the first {} were \
                 imported, later ones may be missing",
                self.name, self.durable
            )
        })?;
        (self.durable, self.unsynced) = (self.done, 0);
        Ok(())
    }

    fn finish(mut self) -> Result<()> {
        if self.done > 0 {
            self.sync(self.last_line)?;
        }
        self.db.close()?;
        say!(
            "imported {} records from {} ({} already expired)",
            self.done,
            self.name,
            self.expired
        );
        Ok(())
    }
}

/// Bytes `import` inserts between two syncs of the store (64 MiB).
const SYNC_EVERY_BYTES: usize = 64 << 20;

/// The longest line `import` reads: a record of the largest key and value,
/// every byte escaped as `\u00XX` (6 bytes), and room for the rest.
const MAX_LINE_BYTES: u64 = 6 * (MAX_KEY_BYTES + MAX_VALUE_BYTES) as u64 + 4_096;

/// Reads and checks every non-blank line of `source`, and calls `each`
/// with its 1-based line number and its record; returns how many. A line
/// longer than [`MAX_LINE_BYTES`] is an error, not a read into memory
/// without end (`import /dev/zero`).
fn read_records(
    mut source: impl BufRead,
    name: &str,
    mut each: impl FnMut(usize, Record) -> Result<()>,
) -> Result<usize> {
    let mut records = 0;
    let mut bytes = Vec::new();
    for n in 1.. {
        bytes.clear();
        let read = Read::take(&mut source, MAX_LINE_BYTES + 1)
            .read_until(b'\n', &mut bytes)
            .with_context(|| format!("{name} line {n}"))?;
        if read == 0 {
            break;
        }
        if bytes.len() as u64 > MAX_LINE_BYTES {
            bail!(
                "{name} line {n}: longer than {MAX_LINE_BYTES} bytes, more than a record of the \
                 largest key and value takes"
            );
        }
        let line = std::str::from_utf8(&bytes)
            .with_context(|| format!("{name} line {n}: stream did not contain valid UTF-8"))?;
        let line = line.strip_suffix('\n').unwrap_or(line);
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.trim().is_empty() {
            continue;
        }
        let record = Record::parse(line).with_context(|| format!("{name} line {n}"))?;
        if record.key.len() > MAX_KEY_BYTES {
            bail!(
                "{name} line {n}: key of {} bytes exceeds the limit of {MAX_KEY_BYTES} bytes",
                record.key.len()
            );
        }
        if record.value.len() > MAX_VALUE_BYTES {
            bail!(
                "{name} line {n}: value of {} bytes exceeds the limit of {MAX_VALUE_BYTES} bytes",
                record.value.len()
            );
        }
        each(n, record)?;
        records += 1;
    }
    Ok(records)
}

/// `at` in Unix ms (the engine's expiry resolution).
fn unix_ms(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Unix ms `ms` as a [`SystemTime`], as the engine's own clock converts
/// it (no `u64` of ms overflows a Unix `SystemTime`'s 64-bit seconds).
fn from_unix_ms(ms: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms)
}
