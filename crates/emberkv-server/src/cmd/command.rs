//! COMMAND: the command table as clients read it at connect (COUNT, DOCS,
//! INFO, LIST), and the keys of a given command (GETKEYS,
//! GETKEYSANDFLAGS).

use super::docs::{self, Heading};
use super::flag::{LOADING, STALE};
use super::{
    COMMANDS, Ctx, Spec, Sub, arity_ok, dispatch_sub, flag, help, lookup, sub_named, subcommands,
};
use crate::error::{CmdError, CmdResult};
use crate::parse::{Args, is};

pub(super) static SUBS: &[Sub] = &[
    Sub {
        name: "count",
        summary: "Returns a count of commands.",
        since: "2.8.13",
        arity: 2,
        flags: LOADING | STALE,
        run: count,
    },
    Sub {
        name: "docs",
        summary: "Returns documentary information about one, multiple or all commands.",
        since: "7.0.0",
        arity: -2,
        flags: LOADING | STALE,
        run: docs,
    },
    Sub {
        name: "info",
        summary: "Returns information about one, multiple or all commands.",
        since: "2.8.13",
        arity: -2,
        flags: LOADING | STALE,
        run: info,
    },
    Sub {
        name: "list",
        summary: "Returns a list of command names.",
        since: "7.0.0",
        arity: -2,
        flags: LOADING | STALE,
        run: list,
    },
    Sub {
        name: "getkeys",
        summary: "Extracts the key names from an arbitrary command.",
        since: "2.8.13",
        arity: -4,
        flags: LOADING | STALE,
        run: getkeys,
    },
    Sub {
        name: "getkeysandflags",
        summary: "Extracts the key names and access flags for an arbitrary command.",
        since: "7.0.0",
        arity: -4,
        flags: LOADING | STALE,
        run: getkeysandflags,
    },
    Sub {
        name: "help",
        summary: "Returns helpful text about the different subcommands.",
        since: "5.0.0",
        arity: 2,
        flags: LOADING | STALE,
        run: command_help,
    },
];

pub(super) fn command(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    if args.len() == 1 {
        ctx.out.array(COMMANDS.len());
        for spec in COMMANDS {
            write_info(ctx, spec);
        }
        return Ok(());
    }
    dispatch_sub(ctx, args, "command")
}

fn command_help(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    help(
        ctx,
        &[
            "COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "(no subcommand)",
            "    Return details about all commands.",
            "COUNT",
            "    Return the total number of commands in this server.",
            "LIST",
            "    Return a list of all commands in this server.",
            "INFO [<command-name> ...]",
            "    Return details about multiple commands.",
            "DOCS [<command-name> ...]",
            "    Return documentation details about multiple commands.",
            "GETKEYS <full-command>",
            "    Return the keys from a full Redis command.",
            "GETKEYSANDFLAGS <full-command>",
            "    Return the keys and the access flags from a full Redis command.",
            "HELP",
            "    Print this help.",
        ],
    );
    Ok(())
}

fn count(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    ctx.out.int(COMMANDS.len() as i64);
    Ok(())
}

/// What COMMAND LIST's FILTERBY keeps.
enum ListFilter<'a> {
    /// `MODULE name`: no command here comes from a module.
    Module,
    /// `ACLCAT category`: the category's name without `@`, any case.
    AclCat(&'a [u8]),
    /// `PATTERN glob`: matched against the full name, ignoring case.
    Pattern(Vec<u8>),
}

/// COMMAND LIST [FILTERBY MODULE name | ACLCAT category | PATTERN glob],
/// as Redis 7.0's: the full name of every command and subcommand
/// (`container|sub`, after its container), or of those the filter keeps.
/// Anything else after LIST is a syntax error.
fn list(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let filter = match args.len() {
        2 => None,
        5 if is(args.get(2), "FILTERBY") => {
            let (kind, arg) = (args.get(3), args.get(4));
            Some(if is(kind, "MODULE") {
                ListFilter::Module
            } else if is(kind, "ACLCAT") {
                ListFilter::AclCat(arg)
            } else if is(kind, "PATTERN") {
                ListFilter::Pattern(arg.to_ascii_lowercase())
            } else {
                return Err(CmdError::Syntax);
            })
        }
        _ => return Err(CmdError::Syntax),
    };
    let mut names = Vec::new();
    for spec in COMMANDS {
        let cats = categories(spec.flags, named_categories(spec));
        names.push((spec.name.to_owned(), cats));
        for sub in subcommands(spec.name) {
            let cats = categories(sub.flags, sub_named_categories(spec));
            names.push((format!("{}|{}", spec.name, sub.name), cats));
        }
    }
    let keep = |name: &str, cats: &[&str]| match &filter {
        None => true,
        Some(ListFilter::Module) => false,
        Some(ListFilter::AclCat(cat)) => cats
            .iter()
            .any(|c| c.as_bytes()[1..].eq_ignore_ascii_case(cat)),
        Some(ListFilter::Pattern(glob)) => crate::glob::matches(glob, name.as_bytes()),
    };
    names.retain(|(name, cats)| keep(name, cats));
    ctx.out.bulks(names.iter().map(|(name, _)| name.as_bytes()));
    Ok(())
}

/// Redis's ACL categories, in the order of their bits there (which
/// COMMAND INFO follows).
const CATEGORIES: &[&str] = &[
    "@keyspace",
    "@read",
    "@write",
    "@string",
    "@bitmap",
    "@admin",
    "@fast",
    "@slow",
    "@dangerous",
    "@connection",
    "@transaction",
];

/// The ACL categories Redis 7.0 gives a command or subcommand of these
/// flags: those the flags imply (write, readonly, admin with dangerous,
/// fast or else slow) and `named`, those its command table names, in
/// Redis's order.
fn categories(flags: u16, named: &[&'static str]) -> Vec<&'static str> {
    let mut cats: Vec<&str> = named.to_vec();
    if flags & flag::WRITE != 0 {
        cats.push("@write");
    }
    if flags & flag::READONLY != 0 {
        cats.push("@read");
    }
    if flags & flag::ADMIN != 0 {
        cats.extend(["@admin", "@dangerous"]);
    }
    cats.push(if flags & flag::FAST != 0 {
        "@fast"
    } else {
        "@slow"
    });
    CATEGORIES
        .iter()
        .copied()
        .filter(|c| cats.contains(c))
        .collect()
}

/// The categories Redis's command table names for each subcommand of
/// container `spec`.
fn sub_named_categories(spec: &Spec) -> &'static [&'static str] {
    if spec.name == "config" {
        &[]
    } else {
        &["@connection"]
    }
}

/// The categories Redis's command table names for a command (its
/// subcommands', see [`sub_named_categories`]).
fn named_categories(spec: &Spec) -> &'static [&'static str] {
    match spec.name {
        // Containers: their subcommands carry the categories.
        "client" | "config" => &[],
        "command" => &["@connection"],
        "dbsize" => &["@keyspace"],
        "flushall" | "flushdb" | "keys" => &["@keyspace", "@dangerous"],
        "info" => &["@dangerous"],
        "lastsave" => &["@admin", "@dangerous"],
        _ => match spec.group {
            "string" => &["@string"],
            "generic" => &["@keyspace"],
            "bitmap" => &["@bitmap"],
            "connection" => &["@connection"],
            "transactions" => &["@transaction"],
            _ => &[],
        },
    }
}

/// The hints Redis 7.0 gives clients about a command's reply and, in a
/// cluster, where to send it (COMMAND INFO's "tips", in its order).
fn tips(name: &str) -> &'static [&'static str] {
    match name {
        "command" | "command|docs" | "command|info" | "command|list" => {
            &["nondeterministic_output_order"]
        }
        "client|info" | "client|list" => &["nondeterministic_output"],
        "client|setinfo" | "config|set" => {
            &["request_policy:all_nodes", "response_policy:all_succeeded"]
        }
        "dbsize" => &["request_policy:all_shards", "response_policy:agg_sum"],
        "del" | "exists" | "touch" | "unlink" => {
            &["request_policy:multi_shard", "response_policy:agg_sum"]
        }
        "flushall" | "flushdb" | "ping" => {
            &["request_policy:all_shards", "response_policy:all_succeeded"]
        }
        "info" => &[
            "nondeterministic_output",
            "request_policy:all_shards",
            "response_policy:special",
        ],
        "keys" => &["request_policy:all_shards", "nondeterministic_output_order"],
        "lastsave" | "pttl" | "time" | "ttl" => &["nondeterministic_output"],
        "mget" => &["request_policy:multi_shard"],
        "mset" => &[
            "request_policy:multi_shard",
            "response_policy:all_succeeded",
        ],
        "msetnx" => &["request_policy:multi_shard", "response_policy:agg_min"],
        "randomkey" => &["request_policy:all_shards", "nondeterministic_output"],
        "scan" => &["nondeterministic_output", "request_policy:special"],
        _ => &[],
    }
}

/// A key specification of COMMAND INFO (Redis 7's `keySpec`): where the
/// command's keys are and what it does to them. Every one here finds its
/// first key at an argument index and the rest in a range (with no
/// limit).
struct KeySpec {
    notes: Option<&'static str>,
    /// Redis's key-spec flags (`RO`, `RW`, `OW`, `RM`, `access`,
    /// `update`, `insert`, `delete`, `variable_flags`).
    flags: &'static [&'static str],
    /// The argument index of the first key (`begin_search` `index`).
    index: i64,
    /// `find_keys` `range`: the last key, relative to the first (-1: the
    /// last argument), and the step between keys.
    lastkey: i64,
    keystep: i64,
}

impl KeySpec {
    const fn range(
        flags: &'static [&'static str],
        index: i64,
        lastkey: i64,
        keystep: i64,
    ) -> KeySpec {
        KeySpec {
            notes: None,
            flags,
            index,
            lastkey,
            keystep,
        }
    }

    const fn noted(self, notes: &'static str) -> KeySpec {
        KeySpec {
            notes: Some(notes),
            ..self
        }
    }
}

const BITFIELD_KEY: KeySpec =
    KeySpec::range(&["RW", "access", "update", "variable_flags"], 1, 0, 1)
        .noted("This command allows both access and modification of the key");
const GETEX_KEY: KeySpec = KeySpec::range(&["RW", "access", "update"], 1, 0, 1)
    .noted("RW and UPDATE because it changes the TTL");
const OW_INSERT_AT_1: KeySpec = KeySpec::range(&["OW", "insert"], 1, 0, 1);
const OW_INSERT_AT_1_TO_LAST_STEP_2: KeySpec = KeySpec::range(&["OW", "insert"], 1, -1, 2);
const OW_INSERT_AT_2: KeySpec = KeySpec::range(&["OW", "insert"], 2, 0, 1);
const OW_UPDATE_AT_1: KeySpec = KeySpec::range(&["OW", "update"], 1, 0, 1);
const OW_UPDATE_AT_1_TO_LAST_STEP_2: KeySpec = KeySpec::range(&["OW", "update"], 1, -1, 2);
const OW_UPDATE_AT_2: KeySpec = KeySpec::range(&["OW", "update"], 2, 0, 1);
const RM_DELETE_AT_1_TO_LAST: KeySpec = KeySpec::range(&["RM", "delete"], 1, -1, 1);
const RO_ACCESS_AT_1: KeySpec = KeySpec::range(&["RO", "access"], 1, 0, 1);
const RO_ACCESS_AT_1_AND_NEXT: KeySpec = KeySpec::range(&["RO", "access"], 1, 1, 1);
const RO_ACCESS_AT_1_TO_LAST: KeySpec = KeySpec::range(&["RO", "access"], 1, -1, 1);
const RO_ACCESS_AT_3_TO_LAST: KeySpec = KeySpec::range(&["RO", "access"], 3, -1, 1);
const RO_AT_1: KeySpec = KeySpec::range(&["RO"], 1, 0, 1);
const RO_AT_1_TO_LAST: KeySpec = KeySpec::range(&["RO"], 1, -1, 1);
const RW_ACCESS_DELETE_AT_1: KeySpec = KeySpec::range(&["RW", "access", "delete"], 1, 0, 1);
const RW_ACCESS_UPDATE_AT_1: KeySpec = KeySpec::range(&["RW", "access", "update"], 1, 0, 1);
const RW_INSERT_AT_1: KeySpec = KeySpec::range(&["RW", "insert"], 1, 0, 1);
const RW_UPDATE_AT_1: KeySpec = KeySpec::range(&["RW", "update"], 1, 0, 1);
const SET_KEY: KeySpec = KeySpec::range(&["RW", "access", "update", "variable_flags"], 1, 0, 1)
    .noted("RW and ACCESS due to the optional `GET` argument");

/// The key specifications redis-server 7.0.15 reports for command `name`
/// (none for commands without keys and for subcommands), so that clients
/// that route by them (cluster clients) see the same as from Redis; the
/// differential test compares them.
fn key_specs(name: &str) -> &'static [KeySpec] {
    match name {
        "append" => &[RW_INSERT_AT_1],
        "bitcount" | "bitfield_ro" | "bitpos" | "expiretime" | "get" | "getbit" | "getrange"
        | "pexpiretime" | "pttl" | "substr" | "ttl" => &[RO_ACCESS_AT_1],
        "bitfield" => &[BITFIELD_KEY],
        "bitop" => &[OW_UPDATE_AT_2, RO_ACCESS_AT_3_TO_LAST],
        "copy" => &[RO_ACCESS_AT_1, OW_UPDATE_AT_2],
        "decr" | "decrby" | "getset" | "incr" | "incrby" | "incrbyfloat" | "setbit" => {
            &[RW_ACCESS_UPDATE_AT_1]
        }
        "del" | "unlink" => &[RM_DELETE_AT_1_TO_LAST],
        "exists" | "touch" | "watch" => &[RO_AT_1_TO_LAST],
        "expire" | "expireat" | "persist" | "pexpire" | "pexpireat" | "setrange" => {
            &[RW_UPDATE_AT_1]
        }
        "getdel" => &[RW_ACCESS_DELETE_AT_1],
        "getex" => &[GETEX_KEY],
        "lcs" => &[RO_ACCESS_AT_1_AND_NEXT],
        "mget" => &[RO_ACCESS_AT_1_TO_LAST],
        "mset" => &[OW_UPDATE_AT_1_TO_LAST_STEP_2],
        "msetnx" => &[OW_INSERT_AT_1_TO_LAST_STEP_2],
        "psetex" | "setex" => &[OW_UPDATE_AT_1],
        "rename" => &[RW_ACCESS_DELETE_AT_1, OW_UPDATE_AT_2],
        "renamenx" => &[RW_ACCESS_DELETE_AT_1, OW_INSERT_AT_2],
        "set" => &[SET_KEY],
        "setnx" => &[OW_INSERT_AT_1],
        "strlen" | "type" => &[RO_AT_1],
        _ => &[],
    }
}

fn getkeys(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    keys_of(ctx, &args.skip(2), false)
}

fn getkeysandflags(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    keys_of(ctx, &args.skip(2), true)
}

/// COMMAND GETKEYS and GETKEYSANDFLAGS of the command `call` (its name
/// first), as Redis 7.0's `getKeysSubcommandImpl`: the errors in its
/// order (no such command or subcommand, no keys, wrong arity), then each
/// key, with its key-spec flags when `with_flags`.
fn keys_of(ctx: &mut Ctx<'_>, call: &Args<'_>, with_flags: bool) -> CmdResult {
    let Some((_, spec)) = lookup(call.get(0)) else {
        return Err(CmdError::err("Invalid command specified"));
    };
    if call.len() >= 2
        && !subcommands(spec.name).is_empty()
        && sub_named(spec.name, call.get(1)).is_none()
    {
        return Err(CmdError::err("Invalid command specified"));
    }
    let specs = key_specs(spec.name);
    if specs.is_empty() {
        return Err(CmdError::err("The command has no key arguments"));
    }
    if !arity_ok(spec.arity, call.len()) {
        return Err(CmdError::err(
            "Invalid number of arguments specified for command",
        ));
    }
    let keys = key_positions(spec.name, specs, call);
    if keys.is_empty() {
        return Err(CmdError::err("Invalid arguments specified for command"));
    }
    let out = &mut *ctx.out;
    out.array(keys.len());
    for (at, flags) in keys {
        if with_flags {
            out.array(2);
            out.bulk(call.get(at));
            out.set(flags.len());
            for flag in flags {
                out.simple(flag);
            }
        } else {
            out.bulk(call.get(at));
        }
    }
    Ok(())
}

/// Where the keys of `call` are and their key-spec flags. SET and
/// BITFIELD, whose flags depend on their arguments (`variable_flags`),
/// take them from their arguments as Redis 7.0's `setGetKeys` and
/// `bitfieldGetKeys` do; every other command from its key
/// specifications (`getKeysUsingKeySpecs`).
fn key_positions(
    name: &str,
    specs: &[KeySpec],
    call: &Args<'_>,
) -> Vec<(usize, &'static [&'static str])> {
    const RW_ACCESS_UPDATE: &[&str] = &["RW", "access", "update"];
    match name {
        "set" => {
            let get = call.from(3).any(|a| is(a, "GET"));
            let flags: &[&str] = if get {
                RW_ACCESS_UPDATE
            } else {
                &["OW", "update"]
            };
            return vec![(1, flags)];
        }
        "bitfield" => {
            let flags: &[&str] = if bitfield_reads_only(call) {
                &["RO", "access"]
            } else {
                RW_ACCESS_UPDATE
            };
            return vec![(1, flags)];
        }
        _ => {}
    }
    let argc = call.len() as i64;
    let mut keys = Vec::new();
    for spec in specs {
        let first = spec.index;
        if first >= argc || first < 1 {
            continue;
        }
        let last = if spec.lastkey >= 0 {
            first + spec.lastkey
        } else {
            argc + spec.lastkey
        };
        let mut at = first;
        while at <= last && at < argc {
            keys.push((at as usize, spec.flags));
            at += spec.keystep.max(1);
        }
    }
    keys
}

/// Whether a BITFIELD call only reads: every operation a GET with its two
/// arguments or an OVERFLOW with its one (anything else, a syntax error
/// included, counts as a write, as in Redis).
fn bitfield_reads_only(call: &Args<'_>) -> bool {
    let mut at = 2;
    while at < call.len() {
        let rest = call.len() - at - 1;
        let op = call.get(at);
        if is(op, "GET") && rest >= 2 {
            at += 3;
        } else if is(op, "OVERFLOW") && rest >= 1 {
            at += 2;
        } else {
            return false;
        }
    }
    true
}

/// Writes `specs` as COMMAND INFO's eighth field.
fn write_key_specs(ctx: &mut Ctx<'_>, specs: &[KeySpec]) {
    let out = &mut *ctx.out;
    out.set(specs.len());
    for spec in specs {
        out.map(3 + usize::from(spec.notes.is_some()));
        if let Some(notes) = spec.notes {
            out.bulk(b"notes");
            out.bulk(notes.as_bytes());
        }
        out.bulk(b"flags");
        out.set(spec.flags.len());
        for flag in spec.flags {
            out.simple(flag);
        }
        write_search(out, b"begin_search", b"index", &[(b"index", spec.index)]);
        let range = [
            (&b"lastkey"[..], spec.lastkey),
            (b"keystep", spec.keystep),
            (b"limit", 0),
        ];
        write_search(out, b"find_keys", b"range", &range);
    }
}

/// A key spec's `begin_search` or `find_keys`: its type and its integer
/// fields.
fn write_search(out: &mut crate::reply::Reply, name: &[u8], kind: &[u8], fields: &[(&[u8], i64)]) {
    out.bulk(name);
    out.map(2);
    out.bulk(b"type");
    out.bulk(kind);
    out.bulk(b"spec");
    out.map(fields.len());
    for &(field, value) in fields {
        out.bulk(field);
        out.int(value);
    }
}

/// Redis 7's ten-element COMMAND INFO entry of a command, with its key
/// specifications and its subcommands' entries.
fn write_info(ctx: &mut Ctx<'_>, spec: &Spec) {
    let named = named_categories(spec);
    write_entry(ctx, spec.name, spec.arity, spec.flags, spec.keys, named);
    let subs = subcommands(spec.name);
    // As Redis 7 replies (`addReplyCommandSubCommands`): an empty set for
    // a command without subcommands, an array of them otherwise.
    if subs.is_empty() {
        ctx.out.set(0);
    } else {
        ctx.out.array(subs.len());
    }
    for sub in subs {
        write_sub_info(ctx, spec, sub);
    }
}

/// The COMMAND INFO entry of subcommand `sub` of container `spec`.
fn write_sub_info(ctx: &mut Ctx<'_>, spec: &Spec, sub: &Sub) {
    let name = format!("{}|{}", spec.name, sub.name);
    let named = sub_named_categories(spec);
    write_entry(ctx, &name, sub.arity, sub.flags, (0, 0, 0), named);
    ctx.out.set(0); // subcommands
}

/// The command or subcommand that COMMAND INFO and DOCS name: `name`, or
/// `container|sub` (as Redis 7.0's `lookupCommandBySds`: two parts at
/// most, the second a subcommand of the first).
fn resolve(name: &[u8]) -> Option<(&'static Spec, Option<&'static Sub>)> {
    let Some(bar) = name.iter().position(|&b| b == b'|') else {
        return lookup(name).map(|(_, spec)| (spec, None));
    };
    let (base, sub) = (&name[..bar], &name[bar + 1..]);
    if sub.contains(&b'|') {
        return None;
    }
    let (_, spec) = lookup(base)?;
    let (_, sub) = sub_named(spec.name, sub)?;
    Some((spec, Some(sub)))
}

/// The first nine elements of a COMMAND INFO entry: name, arity, flags,
/// key positions, ACL categories, tips, key specifications.
fn write_entry(
    ctx: &mut Ctx<'_>,
    name: &str,
    arity: i32,
    flags: u16,
    keys: (i32, i32, i32),
    named: &[&'static str],
) {
    let out = &mut *ctx.out;
    out.array(10);
    out.bulk(name.as_bytes());
    out.int(i64::from(arity));
    let flags_named = flag::names(flags);
    out.set(flags_named.len());
    for f in flags_named {
        out.simple(f);
    }
    out.int(i64::from(keys.0));
    out.int(i64::from(keys.1));
    out.int(i64::from(keys.2));
    let cats = categories(flags, named);
    out.set(cats.len());
    for c in cats {
        out.simple(c);
    }
    let tips = tips(name);
    out.set(tips.len());
    for t in tips {
        out.bulk(t.as_bytes());
    }
    write_key_specs(ctx, key_specs(name));
}

fn info(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    if args.len() == 2 {
        ctx.out.array(COMMANDS.len());
        for spec in COMMANDS {
            write_info(ctx, spec);
        }
        return Ok(());
    }
    ctx.out.array(args.len() - 2);
    for name in args.from(2) {
        match resolve(name) {
            Some((spec, None)) => write_info(ctx, spec),
            Some((spec, Some(sub))) => write_sub_info(ctx, spec, sub),
            None => ctx.out.null(),
        }
    }
    Ok(())
}

/// A command's name and its docs map ([`docs::write`]).
fn write_doc(ctx: &mut Ctx<'_>, spec: &Spec) {
    ctx.out.bulk(spec.name.as_bytes());
    let names: Vec<String> = subcommands(spec.name)
        .iter()
        .map(|sub| format!("{}|{}", spec.name, sub.name))
        .collect();
    let subs: Vec<Heading<'_>> = subcommands(spec.name)
        .iter()
        .zip(&names)
        .map(|(sub, name)| Heading {
            name,
            summary: sub.summary,
            since: sub.since,
            group: spec.group,
        })
        .collect();
    let command = Heading {
        name: spec.name,
        summary: spec.summary,
        since: spec.since,
        group: spec.group,
    };
    docs::write(ctx.out, &command, &subs);
}

fn docs(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let found: Vec<(&Spec, Option<&Sub>)> = if args.len() == 2 {
        COMMANDS.iter().map(|spec| (spec, None)).collect()
    } else {
        // Unknown names are left out, as Redis does.
        args.from(2).filter_map(resolve).collect()
    };
    ctx.out.map(found.len());
    for (spec, sub) in found {
        match sub {
            None => write_doc(ctx, spec),
            Some(sub) => {
                let name = format!("{}|{}", spec.name, sub.name);
                ctx.out.bulk(name.as_bytes());
                let heading = Heading {
                    name: &name,
                    summary: sub.summary,
                    since: sub.since,
                    group: spec.group,
                };
                docs::write(ctx.out, &heading, &[]);
            }
        }
    }
    Ok(())
}
