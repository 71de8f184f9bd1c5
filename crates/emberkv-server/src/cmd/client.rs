//! CLIENT: ID, SETNAME, GETNAME, SETINFO, INFO, LIST, KILL, NO-EVICT,
//! NO-TOUCH, HELP.

use std::sync::atomic::Ordering;

use super::flag::{ADMIN, LOADING, NOSCRIPT, STALE};
use super::{COMMANDS, Ctx, Sub, dispatch_sub, help};
use crate::clients::{ClientHandle, Transport};
use crate::error::{CmdError, CmdResult};
use crate::parse::{Args, int, is, is_name, text};

pub(super) static SUBS: &[Sub] = &[
    Sub {
        name: "id",
        summary: "Returns the unique client ID of the connection.",
        since: "5.0.0",
        arity: 2,
        flags: NOSCRIPT | LOADING | STALE,
        run: id,
    },
    Sub {
        name: "setname",
        summary: "Sets the connection name.",
        since: "2.6.9",
        arity: 3,
        flags: NOSCRIPT | LOADING | STALE,
        run: setname,
    },
    Sub {
        name: "getname",
        summary: "Returns the name of the connection.",
        since: "2.6.9",
        arity: 2,
        flags: NOSCRIPT | LOADING | STALE,
        run: getname,
    },
    Sub {
        name: "setinfo",
        summary: "Sets information specific to the client or connection.",
        since: "7.2.0",
        arity: 4,
        flags: NOSCRIPT | LOADING | STALE,
        run: setinfo,
    },
    Sub {
        name: "info",
        summary: "Returns information about the connection.",
        since: "6.2.0",
        arity: 2,
        flags: NOSCRIPT | LOADING | STALE,
        run: info,
    },
    Sub {
        name: "list",
        summary: "Lists open connections.",
        since: "2.4.0",
        arity: -2,
        flags: ADMIN | NOSCRIPT | LOADING | STALE,
        run: list,
    },
    Sub {
        name: "kill",
        summary: "Terminates open connections.",
        since: "2.4.0",
        arity: -3,
        flags: ADMIN | NOSCRIPT | LOADING | STALE,
        run: kill,
    },
    Sub {
        name: "no-evict",
        summary: "Sets the client eviction mode of the connection.",
        since: "7.0.0",
        arity: 3,
        flags: ADMIN | NOSCRIPT | LOADING | STALE,
        run: on_off,
    },
    Sub {
        name: "no-touch",
        summary: "Controls whether commands sent by the client affect the LRU/LFU of accessed keys.",
        since: "7.2.0",
        arity: 3,
        flags: NOSCRIPT | LOADING | STALE,
        run: on_off,
    },
    Sub {
        name: "help",
        summary: "Returns helpful text about the different subcommands.",
        since: "5.0.0",
        arity: 2,
        flags: LOADING | STALE,
        run: client_help,
    },
];

pub(super) fn client(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    dispatch_sub(ctx, args, "client")
}

fn client_help(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    help(
        ctx,
        &[
            "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "ID",
            "    Return the ID of the current connection.",
            "SETNAME <name>",
            "    Assign the name <name> to the current connection.",
            "GETNAME",
            "    Return the name of the current connection.",
            "SETINFO <LIB-NAME|LIB-VER> <value>",
            "    Record the client library's name or version.",
            "INFO",
            "    Return information about the current client connection.",
            "LIST [TYPE normal] [ID <id> ...]",
            "    Return information about client connections.",
            "KILL <ip:port> | KILL [ID <id>] [ADDR <ip:port>] [LADDR <ip:port>] [TYPE normal] [USER default] [SKIPME yes|no] [MAXAGE <seconds>]",
            "    Kill connections.",
            "HELP",
            "    Print this help.",
        ],
    );
    Ok(())
}

fn id(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    ctx.out.int(ctx.session.handle.id as i64);
    Ok(())
}

fn setname(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let name = args.get(2);
    if !super::conn::valid_name(name) {
        return Err(CmdError::err(
            "Client names cannot contain spaces, newlines or special characters.",
        ));
    }
    *ctx.session.handle.name.lock() = (!name.is_empty()).then(|| text(name));
    ctx.out.ok();
    Ok(())
}

fn getname(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    match &*ctx.session.handle.name.lock() {
        Some(name) => ctx.out.bulk(name.as_bytes()),
        None => ctx.out.null(),
    }
    Ok(())
}

fn setinfo(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let (attr, value) = (args.get(2), args.get(3));
    let which = if is(attr, "LIB-NAME") {
        0
    } else if is(attr, "LIB-VER") {
        1
    } else {
        return Err(CmdError::err_quoting("Unrecognized option '", attr, "'"));
    };
    if !super::conn::valid_name(value) {
        return Err(CmdError::err_quoting(
            "",
            &attr.to_ascii_lowercase(),
            " cannot contain spaces, newlines or special characters.",
        ));
    }
    let mut lib = ctx.session.handle.lib.lock();
    if which == 0 {
        lib.0 = text(value);
    } else {
        lib.1 = text(value);
    }
    drop(lib);
    ctx.out.ok();
    Ok(())
}

fn on_off(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let on = if is(args.get(2), "ON") {
        true
    } else if is(args.get(2), "OFF") {
        false
    } else {
        return Err(CmdError::Syntax);
    };
    if is_name(args.get(1), "no-evict") {
        ctx.session.handle.no_evict.store(on, Ordering::Relaxed);
    }
    ctx.out.ok();
    Ok(())
}

/// One line of CLIENT LIST, as Redis 7 prints it (fields emberkv-server
/// does not track are 0).
pub(super) fn describe(c: &ClientHandle) -> String {
    let cmd = match c.last_cmd.load(Ordering::Relaxed) {
        0 => "NULL".to_string(),
        i => match (COMMANDS.get(i - 1), *c.last_sub.lock()) {
            (Some(spec), (container, sub)) if container.eq_ignore_ascii_case(spec.name) => {
                format!("{}|{sub}", spec.name)
            }
            (spec, _) => spec.map_or("NULL", |s| s.name).to_string(),
        },
    };
    let (lib_name, lib_ver) = c.lib.lock().clone();
    let multi = c.multi.load(Ordering::Relaxed);
    let mut flags = String::new();
    if multi >= 0 {
        flags.push('x');
    }
    if c.dirty_cas.load(Ordering::Relaxed) {
        flags.push('d');
    }
    if c.transport == Transport::Unix {
        flags.push('U');
    }
    if c.no_evict.load(Ordering::Relaxed) {
        flags.push('e');
    }
    if flags.is_empty() {
        flags.push('N');
    }
    format!(
        "id={} addr={} laddr={} fd={} name={} age={} idle={} flags={} db=0 sub=0 psub=0 ssub=0 multi={} qbuf={} qbuf-free=0 argv-mem=0 multi-mem=0 rbs=0 rbp=0 obl=0 oll=0 omem={} tot-mem=0 events=r cmd={} user=default redir=-1 resp={} lib-name={} lib-ver={}\n",
        c.id,
        c.addr,
        c.laddr,
        c.fd,
        c.name.lock().as_deref().unwrap_or(""),
        c.age_secs(),
        c.idle_secs(),
        flags,
        multi,
        c.qbuf.load(Ordering::Relaxed),
        c.omem.load(Ordering::Relaxed),
        cmd,
        c.resp.load(Ordering::Relaxed),
        lib_name,
        lib_ver,
    )
}

fn info(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    ctx.shared.store.mark_expired_watches();
    let line = describe(&ctx.session.handle);
    ctx.out.verbatim(line.as_bytes());
    Ok(())
}

fn list(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let mut ids: Option<Vec<u64>> = None;
    let mut i = 2;
    while i < args.len() {
        let opt = args.get(i);
        if is(opt, "TYPE") && i + 1 < args.len() {
            let t = args.get(i + 1);
            if !["normal", "master", "replica", "slave", "pubsub"]
                .iter()
                .any(|n| is(t, n))
            {
                return Err(CmdError::err_quoting("Unknown client type '", t, "'"));
            }
            if !is(t, "normal") {
                ids = Some(Vec::new());
            }
            i += 2;
        } else if is(opt, "ID") && i + 1 < args.len() {
            let mut found = Vec::new();
            for v in args.from(i + 1) {
                // Any integer, as in Redis; one below 1 names no client.
                let n = int(v).map_err(|_| CmdError::err("Invalid client ID"))?;
                found.extend(u64::try_from(n).ok());
            }
            ids = Some(found);
            i = args.len();
        } else {
            return Err(CmdError::Syntax);
        }
    }
    ctx.shared.store.mark_expired_watches();
    let mut text = String::new();
    for c in ctx.shared.clients.list() {
        if ids.as_ref().is_none_or(|ids| ids.contains(&c.id)) {
            text.push_str(&describe(&c));
        }
    }
    ctx.out.verbatim(text.as_bytes());
    Ok(())
}

/// The filters of the new form of CLIENT KILL.
#[derive(Default)]
struct Filter {
    id: Option<u64>,
    addr: Option<String>,
    laddr: Option<String>,
    skipme: bool,
    maxage: Option<u64>,
    none: bool,
}

fn kill(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let me = ctx.session.handle.id;
    if args.len() == 3 {
        // Old form: CLIENT KILL ip:port kills every client at that
        // address, the caller included (as Redis 7: unix socket clients
        // all share the address `path:0`; it killed the first only).
        let addr = text(args.get(2));
        let targets: Vec<_> = ctx
            .shared
            .clients
            .list()
            .into_iter()
            .filter(|c| c.addr == addr)
            .collect();
        if targets.is_empty() {
            return Err(CmdError::err("No such client"));
        }
        for target in targets {
            if target.id == me {
                ctx.session.close_after_reply = true;
            } else {
                target.kill();
            }
        }
        ctx.out.ok();
        return Ok(());
    }
    let mut f = Filter {
        skipme: true,
        ..Filter::default()
    };
    let mut i = 2;
    while i < args.len() {
        let Some(value) = args.opt(i + 1) else {
            return Err(CmdError::Syntax);
        };
        let opt = args.get(i);
        if is(opt, "ID") {
            let n = int(value)
                .ok()
                .filter(|&n| n > 0)
                .ok_or_else(|| CmdError::err("client-id should be greater than 0"))?;
            f.id = Some(n as u64);
        } else if is(opt, "ADDR") {
            f.addr = Some(text(value));
        } else if is(opt, "LADDR") {
            f.laddr = Some(text(value));
        } else if is(opt, "TYPE") {
            if is(value, "normal") {
            } else if ["master", "replica", "slave", "pubsub"]
                .iter()
                .any(|n| is(value, n))
            {
                f.none = true;
            } else {
                return Err(CmdError::err_quoting("Unknown client type '", value, "'"));
            }
        } else if is(opt, "USER") {
            if value != b"default" {
                return Err(CmdError::err_quoting("No such user '", value, "'"));
            }
        } else if is(opt, "SKIPME") {
            f.skipme = if is(value, "yes") {
                true
            } else if is(value, "no") {
                false
            } else {
                return Err(CmdError::Syntax);
            };
        } else if is(opt, "MAXAGE") {
            let n = int(value)?;
            f.maxage = Some(n.max(0) as u64);
        } else {
            return Err(CmdError::Syntax);
        }
        i += 2;
    }
    let mut killed = 0;
    if !f.none {
        for c in ctx.shared.clients.list() {
            let matches = f.id.is_none_or(|id| c.id == id)
                && f.addr.as_ref().is_none_or(|a| &c.addr == a)
                && f.laddr.as_ref().is_none_or(|a| &c.laddr == a)
                && f.maxage.is_none_or(|age| c.age_secs() >= age)
                && !(f.skipme && c.id == me);
            if matches {
                killed += 1;
                if c.id == me {
                    ctx.session.close_after_reply = true;
                } else {
                    c.kill();
                }
            }
        }
    }
    ctx.out.int(killed);
    Ok(())
}
