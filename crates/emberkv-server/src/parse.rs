//! A command's arguments and the typed parsing of each one.
//!
//! The command table checks arity before a command runs, so a command may
//! index the arguments its arity guarantees; options past them are read
//! with the helpers here, which fail with Redis's own errors.

use std::ops::Range;

use crate::error::{CmdError, CmdResult};
use crate::long_double::LongDouble;

/// The arguments of one command (the name is argument 0), borrowed from
/// the connection's read buffer.
#[derive(Clone, Copy, Debug)]
pub struct Args<'a> {
    base: &'a [u8],
    ranges: &'a [Range<usize>],
}

impl<'a> Args<'a> {
    /// Arguments at `ranges` of `base`.
    pub fn new(base: &'a [u8], ranges: &'a [Range<usize>]) -> Self {
        Args { base, ranges }
    }

    /// Number of arguments, the name included.
    pub fn len(&self) -> usize {
        self.ranges.len()
    }

    /// Whether there are none (never, for a parsed command).
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Argument `i`; panics past the end (arity is checked first).
    pub fn get(&self, i: usize) -> &'a [u8] {
        &self.base[self.ranges[i].clone()]
    }

    /// Argument `i`, or `None` past the end.
    pub fn opt(&self, i: usize) -> Option<&'a [u8]> {
        self.ranges.get(i).map(|r| &self.base[r.clone()])
    }

    /// All arguments, the name first.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &'a [u8]> + '_ {
        self.ranges.iter().map(|r| &self.base[r.clone()])
    }

    /// The arguments from `i` on, as a command of their own (COMMAND
    /// GETKEYS reads the command it is given so); empty past the end.
    pub fn skip(&self, i: usize) -> Args<'a> {
        Args {
            base: self.base,
            ranges: &self.ranges[i.min(self.len())..],
        }
    }

    /// Arguments from `i` on.
    pub fn from(&self, i: usize) -> impl ExactSizeIterator<Item = &'a [u8]> + '_ {
        self.ranges[i.min(self.len())..]
            .iter()
            .map(|r| &self.base[r.clone()])
    }
}

/// Whether keyword argument `arg` is `word`, ignoring ASCII case, up to
/// its first NUL: Redis compares options with C's `strcasecmp`, so
/// `SET k v "GET\0x"` is a SET ... GET there too.
pub fn is(arg: &[u8], word: &str) -> bool {
    crate::request::c_str(arg).eq_ignore_ascii_case(word.as_bytes())
}

/// Whether `arg` names subcommand `name`, ignoring ASCII case, every byte
/// compared: Redis finds subcommands in a table hashed over the whole
/// argument, so `CONFIG "GET\0"` is an unknown subcommand there (unless
/// the hash happens to fall in GET's bucket: its C-string comparison then
/// matches, by chance of the process's hash seed).
pub fn is_name(arg: &[u8], name: &str) -> bool {
    arg.eq_ignore_ascii_case(name.as_bytes())
}

/// A signed 64-bit integer argument.
///
/// # Errors
/// [`CmdError::NotInteger`].
pub fn int(arg: &[u8]) -> CmdResult<i64> {
    crate::num::parse_i64(arg).ok_or(CmdError::NotInteger)
}

/// A C `int` argument, as Redis's `getIntFromObjectOrReply` reads one
/// (SELECT's and COPY's database index).
///
/// # Errors
/// [`CmdError::NotInteger`], or `ERR value is out of range, value must
/// between -2147483648 and 2147483647` for an integer outside an `i32`.
pub fn int32(arg: &[u8]) -> CmdResult<i32> {
    i32::try_from(int(arg)?).map_err(|_| {
        CmdError::err(format_args!(
            "value is out of range, value must between {} and {}",
            i32::MIN,
            i32::MAX
        ))
    })
}

/// A float argument.
///
/// # Errors
/// [`CmdError::NotFloat`].
pub fn float(arg: &[u8]) -> CmdResult<LongDouble> {
    LongDouble::parse(arg).ok_or(CmdError::NotFloat)
}

/// An argument as text, for names and messages (invalid UTF-8 replaced).
pub fn text(arg: &[u8]) -> String {
    String::from_utf8_lossy(arg).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn args_index_and_iterate() {
        let base = b"SETkv";
        let ranges = [0..3, 3..4, 4..5];
        let args = Args::new(base, &ranges);
        assert_eq!(args.len(), 3);
        assert_eq!(args.get(1), b"k");
        assert_eq!(args.opt(3), None);
        assert_eq!(args.from(1).collect::<Vec<_>>(), vec![&b"k"[..], b"v"]);
        assert_eq!(args.from(9).count(), 0);
    }

    #[test]
    fn helpers_map_to_redis_errors() {
        assert!(is(b"nx", "NX"));
        assert!(is(b"nx\0yz", "NX"));
        assert!(!is(b"n\0x", "NX"));
        assert!(is_name(b"GeT", "get"));
        assert!(!is_name(b"get\0", "get"));
        assert_eq!(int(b"12").ok(), Some(12));
        assert!(matches!(int(b"1.5"), Err(CmdError::NotInteger)));
        assert!(matches!(float(b"x"), Err(CmdError::NotFloat)));
    }
}
