//! Typed command errors, each displayed as the exact error line Redis 7
//! replies (without the leading `-`).

use std::borrow::Cow;
use std::fmt;

use crate::request::c_str;

/// The result of running a command: its reply is written on success.
pub type CmdResult<T = ()> = Result<T, CmdError>;

/// Why a command failed; [`fmt::Display`] gives Redis's wording.
#[derive(Debug)]
pub enum CmdError {
    /// `ERR unknown command '<name>', with args beginning with: '<a>' ...`
    UnknownCommand {
        /// The name as sent (bytes, up to a NUL, at most 128).
        name: Vec<u8>,
        /// The first arguments, quoted, as Redis lists them (bytes).
        args: Vec<u8>,
    },
    /// `ERR unknown subcommand '<sub>'. Try <CMD> HELP.`
    UnknownSubcommand {
        /// The subcommand as sent (bytes, up to a NUL, at most 128).
        sub: Vec<u8>,
        /// The container command, upper case.
        container: &'static str,
    },
    /// `ERR wrong number of arguments for '<name>' command`
    WrongArity(String),
    /// `ERR syntax error`
    Syntax,
    /// `ERR value is not an integer or out of range`
    NotInteger,
    /// `ERR value is not a valid float`
    NotFloat,
    /// `ERR increment or decrement would overflow`
    Overflow,
    /// `ERR increment would produce NaN or Infinity`
    NanOrInfinity,
    /// `ERR invalid expire time in '<cmd>' command`
    InvalidExpire(&'static str),
    /// `ERR offset is out of range`
    OffsetOutOfRange,
    /// `ERR string exceeds maximum allowed size (proto-max-bulk-len)`
    StringTooLong,
    /// `ERR DB index is out of range`
    DbIndexOutOfRange,
    /// `ERR invalid cursor`
    InvalidCursor,
    /// `NOAUTH Authentication required.`
    NoAuth,
    /// `WRONGPASS invalid username-password pair or user is disabled.`
    WrongPass,
    /// `NOPROTO unsupported protocol version`
    NoProto,
    /// An error from the store, as `ERR <engine message>`.
    Store(emberkv::Error),
    /// Any other error: the whole line, its code first (`ERR ...`).
    Msg(String),
    /// An error line that quotes bytes a client sent, as they were sent
    /// (Redis formats them with C's `%s`, and they need not be UTF-8): the
    /// whole line, its code first.
    Raw(Vec<u8>),
}

impl CmdError {
    /// `ERR <msg>`.
    pub fn err(msg: impl fmt::Display) -> Self {
        CmdError::Msg(format!("ERR {msg}"))
    }

    /// `ERR <before><arg><after>`, with `arg` a client's bytes as C's `%s`
    /// prints them (up to the first NUL), as Redis's errors quote an
    /// option or a name it does not know.
    pub fn err_quoting(before: &str, arg: &[u8], after: &str) -> Self {
        let mut line = format!("ERR {before}").into_bytes();
        line.extend_from_slice(c_str(arg));
        line.extend_from_slice(after.as_bytes());
        CmdError::Raw(line)
    }

    /// The unknown-command error for a command and its arguments, listing
    /// arguments while the list is under 128 bytes, as Redis does.
    pub fn unknown_command<'a>(name: &[u8], mut args: impl Iterator<Item = &'a [u8]>) -> Self {
        let mut list = Vec::new();
        while list.len() < 128 {
            let Some(arg) = args.next() else { break };
            let arg = c_bytes(arg, 128 - list.len());
            list.push(b'\'');
            list.extend_from_slice(arg);
            list.extend_from_slice(b"' ");
        }
        CmdError::UnknownCommand {
            name: c_bytes(name, 128).to_vec(),
            args: list,
        }
    }

    /// The unknown-subcommand error for argument `sub` of container
    /// command `container` (upper case), as Redis's `%.128s` shows it.
    pub fn unknown_subcommand(sub: &[u8], container: &'static str) -> Self {
        CmdError::UnknownSubcommand {
            sub: c_bytes(sub, 128).to_vec(),
            container,
        }
    }

    /// The error line as Redis sends it (without the leading `-`; the
    /// reply replaces CR and LF with spaces): bytes a client sent are
    /// quoted as they were sent, where [`fmt::Display`] replaces those
    /// that are not UTF-8.
    pub fn line(&self) -> Cow<'_, [u8]> {
        let quoted = |parts: &[&[u8]]| Cow::Owned(parts.concat());
        match self {
            CmdError::UnknownCommand { name, args } => quoted(&[
                b"ERR unknown command '",
                name,
                b"', with args beginning with: ",
                args,
            ]),
            CmdError::UnknownSubcommand { sub, container } => quoted(&[
                b"ERR unknown subcommand '",
                sub,
                b"'. Try ",
                container.as_bytes(),
                b" HELP.",
            ]),
            CmdError::Raw(line) => Cow::Borrowed(line),
            CmdError::Msg(line) => Cow::Borrowed(line.as_bytes()),
            other => Cow::Owned(other.to_string().into_bytes()),
        }
    }
}

/// `arg` as C's `%.<max>s` prints it, as Redis formats names and
/// arguments in its errors: up to its first NUL, at most `max` bytes.
pub(crate) fn c_bytes(arg: &[u8], max: usize) -> &[u8] {
    let arg = c_str(arg);
    &arg[..arg.len().min(max)]
}

impl fmt::Display for CmdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CmdError::UnknownCommand { .. }
            | CmdError::UnknownSubcommand { .. }
            | CmdError::Raw(_) => f.write_str(&String::from_utf8_lossy(&self.line())),
            CmdError::WrongArity(name) => {
                write!(f, "ERR wrong number of arguments for '{name}' command")
            }
            CmdError::Syntax => f.write_str("ERR syntax error"),
            CmdError::NotInteger => f.write_str("ERR value is not an integer or out of range"),
            CmdError::NotFloat => f.write_str("ERR value is not a valid float"),
            CmdError::Overflow => f.write_str("ERR increment or decrement would overflow"),
            CmdError::NanOrInfinity => f.write_str("ERR increment would produce NaN or Infinity"),
            CmdError::InvalidExpire(cmd) => {
                write!(f, "ERR invalid expire time in '{cmd}' command")
            }
            CmdError::OffsetOutOfRange => f.write_str("ERR offset is out of range"),
            CmdError::StringTooLong => {
                f.write_str("ERR string exceeds maximum allowed size (proto-max-bulk-len)")
            }
            CmdError::DbIndexOutOfRange => f.write_str("ERR DB index is out of range"),
            CmdError::InvalidCursor => f.write_str("ERR invalid cursor"),
            CmdError::NoAuth => f.write_str("NOAUTH Authentication required."),
            CmdError::WrongPass => {
                f.write_str("WRONGPASS invalid username-password pair or user is disabled.")
            }
            CmdError::NoProto => f.write_str("NOPROTO unsupported protocol version"),
            CmdError::Store(e) => write!(f, "ERR {e}"),
            CmdError::Msg(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for CmdError {}

impl From<emberkv::Error> for CmdError {
    fn from(e: emberkv::Error) -> Self {
        CmdError::Store(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_command_lists_args_like_redis() {
        let args: Vec<&[u8]> = vec![b"a", b"b"];
        let e = CmdError::unknown_command(b"foo", args.into_iter());
        assert_eq!(
            e.to_string(),
            "ERR unknown command 'foo', with args beginning with: 'a' 'b' "
        );
        let e = CmdError::unknown_command(b"foo", std::iter::empty());
        assert_eq!(
            e.to_string(),
            "ERR unknown command 'foo', with args beginning with: "
        );
        // A NUL ends a name or argument, as C's `%s` (redis-server 7.0:
        // `-ERR unknown command 'fo', with args beginning with: 'a' 'c' `).
        let args: Vec<&[u8]> = vec![b"a\0b", b"c"];
        let e = CmdError::unknown_command(b"fo\0o", args.into_iter());
        assert_eq!(
            e.to_string(),
            "ERR unknown command 'fo', with args beginning with: 'a' 'c' "
        );
        // Bytes that are not UTF-8 are quoted as sent (redis-server 7.0:
        // `-ERR unknown command '\xff', with args beginning with: '\x80' `).
        let args: Vec<&[u8]> = vec![b"\x80"];
        let e = CmdError::unknown_command(b"\xff", args.into_iter());
        assert_eq!(
            &*e.line(),
            b"ERR unknown command '\xff', with args beginning with: '\x80' "
        );
        assert_eq!(
            e.to_string(),
            "ERR unknown command '\u{fffd}', with args beginning with: '\u{fffd}' "
        );
        let e = CmdError::err_quoting("No such user '", b"a\xffb\0c", "'");
        assert_eq!(&*e.line(), b"ERR No such user 'a\xffb'");
        let long = vec![b'x'; 300];
        let args: Vec<&[u8]> = vec![&long, b"next"];
        let e = CmdError::unknown_command(b"foo", args.into_iter()).to_string();
        assert!(e.ends_with(&format!("'{}' ", "x".repeat(128))), "{e}");
    }
}
