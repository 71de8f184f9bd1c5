//! COMMAND: the command table as clients read it at connect (COUNT, DOCS,
//! INFO, LIST).

use super::{COMMANDS, Ctx, Spec, Sub, dispatch_sub, flag, help, lookup};
use crate::error::CmdResult;
use crate::parse::Args;

static SUBS: &[Sub] = &[
    Sub {
        name: "count",
        arity: 2,
        run: count,
    },
    Sub {
        name: "docs",
        arity: -2,
        run: docs,
    },
    Sub {
        name: "info",
        arity: -2,
        run: info,
    },
    Sub {
        name: "list",
        arity: -2,
        run: list,
    },
    Sub {
        name: "help",
        arity: 2,
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
    dispatch_sub(ctx, args, "COMMAND", SUBS)
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

fn list(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    if args.len() > 2 {
        return Err(crate::error::CmdError::Syntax);
    }
    ctx.out.bulks(COMMANDS.iter().map(|s| s.name.as_bytes()));
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

/// The ACL categories Redis 7.0 gives a command: those its flags imply
/// (write, readonly, admin with dangerous, fast or else slow) and those its
/// command table names, mostly by group.
fn categories(spec: &Spec) -> Vec<&'static str> {
    let mut cats: Vec<&str> = Vec::new();
    if spec.flags & flag::WRITE != 0 {
        cats.push("@write");
    }
    if spec.flags & flag::READONLY != 0 {
        cats.push("@read");
    }
    if spec.flags & flag::ADMIN != 0 {
        cats.extend(["@admin", "@dangerous"]);
    }
    cats.push(if spec.flags & flag::FAST != 0 {
        "@fast"
    } else {
        "@slow"
    });
    let named: &[&str] = match spec.name {
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
    };
    cats.extend(named);
    CATEGORIES
        .iter()
        .copied()
        .filter(|c| cats.contains(c))
        .collect()
}

/// The hints Redis 7.0 gives clients about a command's reply and, in a
/// cluster, where to send it (COMMAND INFO's "tips", in its order).
fn tips(name: &str) -> &'static [&'static str] {
    match name {
        "command" => &["nondeterministic_output_order"],
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

/// Redis 7's ten-element COMMAND INFO entry.
fn write_info(ctx: &mut Ctx<'_>, spec: &Spec) {
    let out = &mut *ctx.out;
    out.array(10);
    out.bulk(spec.name.as_bytes());
    out.int(i64::from(spec.arity));
    let flags = flag::names(spec.flags);
    out.set(flags.len());
    for f in flags {
        out.simple(f);
    }
    out.int(i64::from(spec.keys.0));
    out.int(i64::from(spec.keys.1));
    out.int(i64::from(spec.keys.2));
    let cats = categories(spec);
    out.set(cats.len());
    for c in cats {
        out.simple(c);
    }
    let tips = tips(spec.name);
    out.set(tips.len());
    for t in tips {
        out.bulk(t.as_bytes());
    }
    out.array(0); // key specifications
    out.array(0); // subcommands
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
        match lookup(name) {
            Some((_, spec)) => write_info(ctx, spec),
            None => ctx.out.null(),
        }
    }
    Ok(())
}

fn write_doc(ctx: &mut Ctx<'_>, spec: &Spec) {
    ctx.out.bulk(spec.name.as_bytes());
    ctx.out.map(3);
    ctx.out.bulk(b"summary");
    ctx.out.bulk(spec.summary.as_bytes());
    ctx.out.bulk(b"since");
    ctx.out.bulk(spec.since.as_bytes());
    ctx.out.bulk(b"group");
    ctx.out.bulk(spec.group.as_bytes());
}

fn docs(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let specs: Vec<&Spec> = if args.len() == 2 {
        COMMANDS.iter().collect()
    } else {
        // Unknown names are left out, as Redis does.
        args.from(2)
            .filter_map(|n| lookup(n).map(|(_, s)| s))
            .collect()
    };
    ctx.out.map(specs.len());
    for spec in specs {
        write_doc(ctx, spec);
    }
    Ok(())
}
