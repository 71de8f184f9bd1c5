//! Typed command errors, each displayed as the exact error line Redis 7
//! replies (without the leading `-`).

use std::fmt;

use crate::request::c_str;

/// The result of running a command: its reply is written on success.
pub type CmdResult<T = ()> = Result<T, CmdError>;

/// Why a command failed; [`fmt::Display`] gives Redis's wording.
#[derive(Debug)]
pub enum CmdError {
    /// `ERR unknown command '<name>', with args beginning with: '<a>' ...`
    UnknownCommand {
        /// The name as sent.
        name: String,
        /// The first arguments, quoted, as Redis lists them.
        args: String,
    },
    /// `ERR unknown subcommand '<sub>'. Try <CMD> HELP.`
    UnknownSubcommand {
        /// The subcommand as sent.
        sub: String,
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
}

impl CmdError {
    /// `ERR <msg>`.
    pub fn err(msg: impl fmt::Display) -> Self {
        CmdError::Msg(format!("ERR {msg}"))
    }

    /// The unknown-command error for a command and its arguments, listing
    /// arguments while the list is under 128 bytes, as Redis does.
    pub fn unknown_command<'a>(name: &[u8], mut args: impl Iterator<Item = &'a [u8]>) -> Self {
        let mut list = String::new();
        while list.len() < 128 {
            let Some(arg) = args.next() else { break };
            let arg = c_text(arg, 128 - list.len());
            list.push('\'');
            list.push_str(&arg);
            list.push_str("' ");
        }
        let name = c_text(name, 128);
        CmdError::UnknownCommand { name, args: list }
    }

    /// The unknown-subcommand error for argument `sub` of container
    /// command `container` (upper case), as Redis's `%.128s` shows it.
    pub fn unknown_subcommand(sub: &[u8], container: &'static str) -> Self {
        let sub = c_text(sub, 128);
        CmdError::UnknownSubcommand { sub, container }
    }
}

/// `arg` as C's `%.<max>s` prints it, as Redis formats names and
/// arguments in its errors: up to its first NUL, at most `max` bytes.
pub(crate) fn c_text(arg: &[u8], max: usize) -> String {
    let arg = c_str(arg);
    String::from_utf8_lossy(&arg[..arg.len().min(max)]).into_owned()
}

impl fmt::Display for CmdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CmdError::UnknownCommand { name, args } => write!(
                f,
                "ERR unknown command '{name}', with args beginning with: {args}"
            ),
            CmdError::UnknownSubcommand { sub, container } => {
                write!(f, "ERR unknown subcommand '{sub}'. Try {container} HELP.")
            }
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
        let long = vec![b'x'; 300];
        let args: Vec<&[u8]> = vec![&long, b"next"];
        let e = CmdError::unknown_command(b"foo", args.into_iter()).to_string();
        assert!(e.ends_with(&format!("'{}' ", "x".repeat(128))), "{e}");
    }
}
