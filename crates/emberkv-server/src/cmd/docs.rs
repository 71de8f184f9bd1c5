//! What COMMAND DOCS says of each command beyond its table row: its time
//! complexity and its arguments, written in a compact grammar that is
//! parsed when a client asks (redis-cli does at connect, to show each
//! command's syntax as the user types it).
//!
//! The grammar, one item after another, separated by spaces:
//! - `name:type`: an argument of Redis's type `type` (`key`, `string`,
//!   `integer`, `double`, `pattern`, `unix-time`); the last `:` splits, so
//!   a name may hold one (`ip:port:string`). Key arguments take the index
//!   of the command's key specification after the previous key's, or the
//!   one `@n` names (`key2:key@0`: LCS's two keys share one);
//! - `TOKEN`: a pure token, named as the token in lower case;
//! - `TOKEN=name:type`, `TOKEN=name(...)`, `TOKEN=name{...}`: an argument,
//!   one-of or block that a token introduces;
//! - `name(a | b)`: one of the alternatives `a`, `b`; `name{a b}`: a block
//!   of items that go together;
//! - `[item]`: optional; `item...`: repeated; `item...+`: repeated, each
//!   time with its token.
//!
//! The replies follow Redis 7's COMMAND DOCS (`commandDocs` in its
//! `server.c`): each argument's `name`, `type`, `key_spec_index` (key
//! arguments, numbered in order), `token`, `flags` and nested
//! `arguments`. Left out: an argument's `since` and `deprecated_since`
//! and a command's `history`, which no client reads to build a call.

use crate::reply::Reply;

/// One command's complexity and arguments; subcommands are named
/// `container|sub`, as Redis names them.
pub(super) struct Doc {
    pub name: &'static str,
    pub complexity: &'static str,
    /// In the grammar of the module docs; empty when there are none.
    pub arguments: &'static str,
}

/// Every command's and subcommand's doc, sorted by name.
pub(super) static DOCS: &[Doc] = &[
    doc(
        "append",
        "O(N) where N is the length of the new value (written whole)",
        "key:key value:string",
    ),
    doc(
        "auth",
        "O(N) where N is the length of the password",
        "[username:string] password:string",
    ),
    doc(
        "bgrewriteaof",
        "O(1): makes the log durable (one fsync)",
        "",
    ),
    doc(
        "bgsave",
        "O(1): makes the log durable (one fsync)",
        "[SCHEDULE]",
    ),
    doc(
        "bitcount",
        "O(N)",
        "key:key [index{start:integer end:integer [index_unit(BYTE | BIT)]}]",
    ),
    doc(
        "bitfield",
        "O(N) where N is the length of the value, for a call that writes (the value is written whole); O(1) for each subcommand specified",
        "key:key [operation(GET=encoding_offset{encoding:string offset:integer} | write{[OVERFLOW=wrap_sat_fail(WRAP | SAT | FAIL)] write_operation(SET=encoding_offset_value{encoding:string offset:integer value:integer} | INCRBY=encoding_offset_increment{encoding:string offset:integer increment:integer})})...]",
    ),
    doc(
        "bitfield_ro",
        "O(1) for each subcommand specified",
        "key:key [GET=encoding_offset{encoding:string offset:integer}...+]",
    ),
    doc("bitop", "O(N)", "operation:string destkey:key key:key..."),
    doc(
        "bitpos",
        "O(N)",
        "key:key bit:integer [index{start:integer [end_index{end:integer [index_unit(BYTE | BIT)]}]}]",
    ),
    doc("client", "Depends on subcommand.", ""),
    doc("client|getname", "O(1)", ""),
    doc("client|help", "O(1)", ""),
    doc("client|id", "O(1)", ""),
    doc("client|info", "O(1)", ""),
    doc(
        "client|kill",
        "O(N) where N is the number of client connections",
        "filter(ip:port:string | new-format([ID=client-id:integer] | [TYPE=normal_master_slave_pubsub(NORMAL | MASTER | SLAVE | REPLICA | PUBSUB)] | [USER=username:string] | [ADDR=ip:port:string] | [LADDR=ip:port:string] | [SKIPME=yes/no:string])...)",
    ),
    doc(
        "client|list",
        "O(N) where N is the number of client connections",
        "[TYPE=normal_master_replica_pubsub(NORMAL | MASTER | REPLICA | PUBSUB)] [ID=id{client-id:integer...}]",
    ),
    doc("client|no-evict", "O(1)", "enabled(ON | OFF)"),
    doc("client|no-touch", "O(1)", "enabled(ON | OFF)"),
    doc(
        "client|setinfo",
        "O(1)",
        "attr(LIB-NAME=libname:string | LIB-VER=libver:string)",
    ),
    doc("client|setname", "O(1)", "connection-name:string"),
    doc(
        "command",
        "O(N) where N is the total number of commands",
        "",
    ),
    doc("command|count", "O(1)", ""),
    doc(
        "command|docs",
        "O(N) where N is the number of commands to look up",
        "[command-name:string...]",
    ),
    doc(
        "command|getkeys",
        "O(N) where N is the number of arguments to the command",
        "",
    ),
    doc(
        "command|getkeysandflags",
        "O(N) where N is the number of arguments to the command",
        "",
    ),
    doc("command|help", "O(1)", ""),
    doc(
        "command|info",
        "O(N) where N is the number of commands to look up",
        "[command-name:string...]",
    ),
    doc(
        "command|list",
        "O(N) where N is the total number of commands",
        "[FILTERBY=filterby(MODULE=module-name:string | ACLCAT=category:string | PATTERN=pattern:pattern)]",
    ),
    doc("config", "Depends on subcommand.", ""),
    doc(
        "config|get",
        "O(N) when N is the number of configuration parameters provided",
        "parameter{parameter:string}...",
    ),
    doc("config|help", "O(1)", ""),
    doc("config|resetstat", "O(1)", ""),
    doc("config|rewrite", "O(1)", ""),
    doc(
        "config|set",
        "O(N) when N is the number of configuration parameters provided",
        "parameter_value{parameter:string value:string}...",
    ),
    doc(
        "copy",
        "O(N) where N is the length of the value (written whole)",
        "source:key destination:key [DB=destination-db:integer] [REPLACE]",
    ),
    doc("dbsize", "O(1)", ""),
    doc("decr", "O(1)", "key:key"),
    doc("decrby", "O(1)", "key:key decrement:integer"),
    doc("del", "O(N) where N is the number of keys", "key:key..."),
    doc(
        "discard",
        "O(N), when N is the number of queued commands",
        "",
    ),
    doc("echo", "O(1)", "message:string"),
    doc("exec", "Depends on commands in the transaction", ""),
    doc(
        "exists",
        "O(N) where N is the number of keys to check",
        "key:key...",
    ),
    doc(
        "expire",
        "O(N) where N is the length of the value (written again with its expiry)",
        "key:key seconds:integer [condition(NX | XX | GT | LT)]",
    ),
    doc(
        "expireat",
        "O(N) where N is the length of the value (written again with its expiry)",
        "key:key unix-time-seconds:unix-time [condition(NX | XX | GT | LT)]",
    ),
    doc("expiretime", "O(1)", "key:key"),
    doc(
        "flushall",
        "O(N) where N is the number of keys",
        "[async(ASYNC | SYNC)]",
    ),
    doc(
        "flushdb",
        "O(N) where N is the number of keys",
        "[async(ASYNC | SYNC)]",
    ),
    doc("get", "O(N) where N is the length of the value", "key:key"),
    doc("getbit", "O(1)", "key:key offset:integer"),
    doc(
        "getdel",
        "O(N) where N is the length of the value",
        "key:key",
    ),
    doc(
        "getex",
        "O(N) where N is the length of the value",
        "key:key [expiration(EX=seconds:integer | PX=milliseconds:integer | EXAT=unix-time-seconds:unix-time | PXAT=unix-time-milliseconds:unix-time | PERSIST)]",
    ),
    doc(
        "getrange",
        "O(N) where N is the length of the value",
        "key:key start:integer end:integer",
    ),
    doc(
        "getset",
        "O(N) where N is the length of the values",
        "key:key value:string",
    ),
    doc(
        "hello",
        "O(1)",
        "[arguments{protover:integer [AUTH=username_password{username:string password:string}] [SETNAME=clientname:string]}]",
    ),
    doc("incr", "O(1)", "key:key"),
    doc("incrby", "O(1)", "key:key increment:integer"),
    doc("incrbyfloat", "O(1)", "key:key increment:double"),
    doc("info", "O(1)", "[section:string...]"),
    doc(
        "keys",
        "O(N) with N being the number of keys in the database",
        "pattern:pattern",
    ),
    doc("lastsave", "O(1)", ""),
    doc(
        "lcs",
        "O(N*M) where N and M are the lengths of s1 and s2, respectively",
        "key1:key key2:key@0 [LEN] [IDX] [MINMATCHLEN=len:integer] [WITHMATCHLEN]",
    ),
    doc(
        "mget",
        "O(N) where N is the number of keys to retrieve",
        "key:key...",
    ),
    doc(
        "mset",
        "O(N) where N is the number of keys to set",
        "key_value{key:key value:string}...",
    ),
    doc(
        "msetnx",
        "O(N) where N is the number of keys to set",
        "key_value{key:key value:string}...",
    ),
    doc("multi", "O(1)", ""),
    doc(
        "persist",
        "O(N) where N is the length of the value (written again without its expiry)",
        "key:key",
    ),
    doc(
        "pexpire",
        "O(N) where N is the length of the value (written again with its expiry)",
        "key:key milliseconds:integer [condition(NX | XX | GT | LT)]",
    ),
    doc(
        "pexpireat",
        "O(N) where N is the length of the value (written again with its expiry)",
        "key:key unix-time-milliseconds:unix-time [condition(NX | XX | GT | LT)]",
    ),
    doc("pexpiretime", "O(1)", "key:key"),
    doc("ping", "O(1)", "[message:string]"),
    doc(
        "psetex",
        "O(N) where N is the length of the value",
        "key:key milliseconds:integer value:string",
    ),
    doc("pttl", "O(1)", "key:key"),
    doc("quit", "O(1)", ""),
    doc("randomkey", "O(1)", ""),
    doc(
        "rename",
        "O(N) where N is the length of the value",
        "key:key newkey:key",
    ),
    doc(
        "renamenx",
        "O(N) where N is the length of the value",
        "key:key newkey:key",
    ),
    doc("reset", "O(1)", ""),
    doc("save", "O(1): makes the log durable (one fsync)", ""),
    doc(
        "scan",
        "O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of keys",
        "cursor:integer [MATCH=pattern:pattern] [COUNT=count:integer] [TYPE=type:string]",
    ),
    doc("select", "O(1)", "index:integer"),
    doc(
        "set",
        "O(N) where N is the length of the value",
        "key:key value:string [condition(NX | XX)] [GET] [expiration(EX=seconds:integer | PX=milliseconds:integer | EXAT=unix-time-seconds:unix-time | PXAT=unix-time-milliseconds:unix-time | KEEPTTL)]",
    ),
    doc(
        "setbit",
        "O(N) where N is the length of the value (written whole)",
        "key:key offset:integer value:integer",
    ),
    doc(
        "setex",
        "O(N) where N is the length of the value",
        "key:key seconds:integer value:string",
    ),
    doc(
        "setnx",
        "O(N) where N is the length of the value",
        "key:key value:string",
    ),
    doc(
        "setrange",
        "O(N) where N is the length of the new value (written whole)",
        "key:key offset:integer value:string",
    ),
    doc(
        "shutdown",
        "O(1): closes the store (one fsync)",
        "[nosave_save(NOSAVE | SAVE)] [NOW] [FORCE] [ABORT]",
    ),
    doc("strlen", "O(1)", "key:key"),
    doc(
        "substr",
        "O(N) where N is the length of the value",
        "key:key start:integer end:integer",
    ),
    doc("time", "O(1)", ""),
    doc(
        "touch",
        "O(N) where N is the number of keys that will be touched",
        "key:key...",
    ),
    doc("ttl", "O(1)", "key:key"),
    doc("type", "O(1)", "key:key"),
    doc("unlink", "O(N) where N is the number of keys", "key:key..."),
    doc("unwatch", "O(1)", ""),
    doc("watch", "O(1) for every key", "key:key..."),
];

const fn doc(name: &'static str, complexity: &'static str, arguments: &'static str) -> Doc {
    Doc {
        name,
        complexity,
        arguments,
    }
}

/// The doc of command or subcommand `name` (lower case, `container|sub`).
pub(super) fn find(name: &str) -> Option<&'static Doc> {
    DOCS.binary_search_by(|d| d.name.cmp(name))
        .ok()
        .map(|at| &DOCS[at])
}

/// The argument types of Redis 7's command docs that the grammar names
/// after a `:`.
const TYPES: &[&str] = &["key", "string", "integer", "double", "pattern", "unix-time"];

/// One argument of a command, as COMMAND DOCS describes it.
#[derive(Debug, PartialEq)]
struct Arg<'a> {
    name: String,
    /// Redis's type: one of [`TYPES`], `pure-token`, `oneof` or `block`.
    kind: &'a str,
    token: Option<&'a str>,
    key_spec_index: Option<i64>,
    optional: bool,
    multiple: bool,
    multiple_token: bool,
    /// Of a one-of or a block.
    arguments: Vec<Arg<'a>>,
}

/// Parses `grammar` (see the module docs).
///
/// # Errors
/// A message naming the byte offset where the grammar is malformed.
fn parse(grammar: &str) -> Result<Vec<Arg<'_>>, String> {
    let mut parser = Parser {
        text: grammar,
        at: 0,
        keys: 0,
    };
    let args = parser.items(None)?;
    if parser.at != grammar.len() {
        return Err(format!(
            "unexpected {:?} at byte {}",
            &grammar[parser.at..],
            parser.at
        ));
    }
    Ok(args)
}

struct Parser<'a> {
    text: &'a str,
    at: usize,
    /// Key arguments met so far: the next one's `key_spec_index`.
    keys: i64,
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.at).copied()
    }

    fn skip_spaces(&mut self) {
        while self.peek() == Some(b' ') {
            self.at += 1;
        }
    }

    fn expect(&mut self, byte: u8) -> Result<(), String> {
        if self.peek() != Some(byte) {
            return Err(format!("expected {:?} at byte {}", byte as char, self.at));
        }
        self.at += 1;
        Ok(())
    }

    /// Items separated by spaces, up to `close` (not taken) or the end.
    fn items(&mut self, close: Option<u8>) -> Result<Vec<Arg<'a>>, String> {
        let mut items = Vec::new();
        loop {
            self.skip_spaces();
            match self.peek() {
                None => break,
                Some(b) if Some(b) == close => break,
                Some(_) => items.push(self.item()?),
            }
        }
        Ok(items)
    }

    /// Alternatives separated by ` | `, up to `)` (not taken).
    fn alternatives(&mut self) -> Result<Vec<Arg<'a>>, String> {
        let mut alternatives = vec![self.item()?];
        loop {
            self.skip_spaces();
            if self.peek() != Some(b'|') {
                return Ok(alternatives);
            }
            self.at += 1;
            self.skip_spaces();
            alternatives.push(self.item()?);
        }
    }

    fn item(&mut self) -> Result<Arg<'a>, String> {
        if self.peek() == Some(b'[') {
            self.at += 1;
            let mut arg = self.item()?;
            self.expect(b']')?;
            arg.optional = true;
            return Ok(arg);
        }
        let start = self.at;
        while self.peek().is_some_and(|b| !b" []|(){}.".contains(&b)) {
            self.at += 1;
        }
        let word = &self.text[start..self.at];
        if word.is_empty() {
            return Err(format!("expected an argument at byte {start}"));
        }
        let (token, rest) = match word.split_once('=') {
            Some((token, rest)) => (Some(token), rest),
            None => (None, word),
        };
        let mut arg = match self.peek() {
            Some(open @ (b'(' | b'{')) => {
                self.at += 1;
                let (kind, arguments, close) = if open == b'(' {
                    ("oneof", self.alternatives()?, b')')
                } else {
                    ("block", self.items(Some(b'}'))?, b'}')
                };
                self.expect(close)?;
                Arg::new(rest.to_owned(), kind, token, arguments)
            }
            _ => match rest.rsplit_once(':') {
                Some((name, kind)) => {
                    let (kind, spec) = match kind.split_once('@') {
                        Some(("key", spec)) => (
                            "key",
                            Some(
                                spec.parse()
                                    .map_err(|_| format!("bad key spec at byte {start}"))?,
                            ),
                        ),
                        Some(_) => return Err(format!("a key spec on a non-key at byte {start}")),
                        None => (kind, None),
                    };
                    let Some(&kind) = TYPES.iter().find(|&&t| t == kind) else {
                        return Err(format!("unknown type {kind:?} at byte {start}"));
                    };
                    let mut arg = Arg::new(name.to_owned(), kind, token, Vec::new());
                    if kind == "key" {
                        let spec = spec.unwrap_or(self.keys);
                        arg.key_spec_index = Some(spec);
                        self.keys = spec + 1;
                    }
                    arg
                }
                None if token.is_none() => Arg::new(
                    word.to_ascii_lowercase(),
                    "pure-token",
                    Some(word),
                    Vec::new(),
                ),
                None => return Err(format!("a token without an argument at byte {start}")),
            },
        };
        if self.text[self.at..].starts_with("...") {
            self.at += 3;
            arg.multiple = true;
            if self.peek() == Some(b'+') {
                self.at += 1;
                arg.multiple_token = true;
            }
        }
        Ok(arg)
    }
}

impl<'a> Arg<'a> {
    fn new(name: String, kind: &'a str, token: Option<&'a str>, arguments: Vec<Arg<'a>>) -> Self {
        Arg {
            name,
            kind,
            token,
            key_spec_index: None,
            optional: false,
            multiple: false,
            multiple_token: false,
            arguments,
        }
    }

    /// Writes the argument's map, fields in Redis 7's order.
    fn write(&self, out: &mut Reply) {
        let flags: Vec<&str> = [
            (self.optional, "optional"),
            (self.multiple, "multiple"),
            (self.multiple_token, "multiple_token"),
        ]
        .into_iter()
        .filter_map(|(on, flag)| on.then_some(flag))
        .collect();
        out.map(
            2 + usize::from(self.key_spec_index.is_some())
                + usize::from(self.token.is_some())
                + usize::from(!flags.is_empty())
                + usize::from(!self.arguments.is_empty()),
        );
        out.bulk(b"name");
        out.bulk(self.name.as_bytes());
        out.bulk(b"type");
        out.bulk(self.kind.as_bytes());
        if let Some(index) = self.key_spec_index {
            out.bulk(b"key_spec_index");
            out.int(index);
        }
        if let Some(token) = self.token {
            out.bulk(b"token");
            out.bulk(token.as_bytes());
        }
        if !flags.is_empty() {
            out.bulk(b"flags");
            out.set(flags.len());
            for flag in flags {
                out.simple(flag);
            }
        }
        if !self.arguments.is_empty() {
            out.bulk(b"arguments");
            write_all(out, &self.arguments);
        }
    }
}

fn write_all(out: &mut Reply, args: &[Arg<'_>]) {
    out.array(args.len());
    for arg in args {
        arg.write(out);
    }
}

/// What COMMAND DOCS tells of a command or subcommand besides its row
/// in [`DOCS`].
pub(super) struct Heading<'a> {
    /// Lower case; `container|sub` for a subcommand.
    pub name: &'a str,
    pub summary: &'a str,
    pub since: &'a str,
    pub group: &'a str,
}

/// Writes the docs map of `command` (not its name): summary, since,
/// group, complexity, arguments and, for a container, the map of its
/// `subcommands`' docs.
pub(super) fn write(out: &mut Reply, command: &Heading<'_>, subcommands: &[Heading<'_>]) {
    let doc = find(command.name);
    // Every row parses (a test checks them all); a row that did not would
    // leave its arguments out rather than fail the reply.
    let args = doc
        .and_then(|d| parse(d.arguments).ok())
        .filter(|args| !args.is_empty());
    out.map(
        3 + usize::from(doc.is_some())
            + usize::from(args.is_some())
            + usize::from(!subcommands.is_empty()),
    );
    out.bulk(b"summary");
    out.bulk(command.summary.as_bytes());
    out.bulk(b"since");
    out.bulk(command.since.as_bytes());
    out.bulk(b"group");
    out.bulk(command.group.as_bytes());
    if let Some(doc) = doc {
        out.bulk(b"complexity");
        out.bulk(doc.complexity.as_bytes());
    }
    if let Some(args) = args {
        out.bulk(b"arguments");
        write_all(out, &args);
    }
    if !subcommands.is_empty() {
        out.bulk(b"subcommands");
        out.map(subcommands.len());
        for sub in subcommands {
            out.bulk(sub.name.as_bytes());
            write(out, sub, &[]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_parses_and_the_table_is_sorted() {
        for doc in DOCS {
            parse(doc.arguments).unwrap_or_else(|e| panic!("{}: {e}", doc.name));
        }
        assert!(DOCS.windows(2).all(|w| w[0].name < w[1].name));
    }

    /// A row for every command and subcommand of the table, and none for
    /// anything else.
    #[test]
    fn every_command_has_a_row() {
        let mut names: Vec<String> = Vec::new();
        for spec in super::super::COMMANDS {
            names.push(spec.name.to_owned());
            for sub in super::super::subcommands(spec.name) {
                names.push(format!("{}|{}", spec.name, sub.name));
            }
        }
        names.sort();
        let rows: Vec<&str> = DOCS.iter().map(|d| d.name).collect();
        assert_eq!(rows, names);
    }

    #[test]
    fn the_grammar_builds_redis_argument_trees() {
        let args =
            parse("key:key [condition(NX | XX)] [EX=seconds:integer] kv{key:key value:string}...")
                .unwrap();
        assert_eq!(args.len(), 4);
        assert_eq!(
            (args[0].name.as_str(), args[0].kind, args[0].key_spec_index),
            ("key", "key", Some(0))
        );
        let condition = &args[1];
        assert!(condition.optional && condition.kind == "oneof");
        assert_eq!(condition.arguments[1].token, Some("XX"));
        assert_eq!(condition.arguments[1].name, "xx");
        assert_eq!(condition.arguments[1].kind, "pure-token");
        assert_eq!(
            (args[2].token, args[2].kind, args[2].optional),
            (Some("EX"), "integer", true)
        );
        assert!(args[3].multiple && args[3].kind == "block");
        assert_eq!(args[3].arguments[0].key_spec_index, Some(1));
        let shared = parse("key1:key key2:key@0 key3:key").unwrap();
        let specs: Vec<_> = shared.iter().map(|a| a.key_spec_index).collect();
        assert_eq!(specs, [Some(0), Some(0), Some(1)]);
        let ip = parse("ip:port:string [PREFIX=prefix:string...+]").unwrap();
        assert_eq!((ip[0].name.as_str(), ip[0].kind), ("ip:port", "string"));
        assert!(ip[1].multiple && ip[1].multiple_token);
    }

    #[test]
    fn malformed_grammar_is_an_error_not_a_panic() {
        for bad in [
            "[key:key",
            "a(b | c",
            "x:nosuchtype",
            "EX=",
            "TOKEN=name",
            "a{b",
            "]",
            "key:key)",
            "k:key@x",
            "k:string@0",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
