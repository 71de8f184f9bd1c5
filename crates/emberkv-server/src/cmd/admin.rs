//! Server commands: INFO, CONFIG, SAVE / BGSAVE / BGREWRITEAOF (a
//! durability barrier), LASTSAVE, TIME, SHUTDOWN.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::time::{SystemTime, UNIX_EPOCH};

use super::flag::{ADMIN, LOADING, NOSCRIPT, STALE};
use super::{Ctx, Sub, dispatch_sub, help};
use crate::config::{self, PARAMS};
use crate::error::{CmdError, CmdResult};
use crate::parse::{Args, is, text};
use crate::stats::Stats;

/// Makes every acknowledged write durable: the engine's flush and
/// fdatasync. It blocks the client's event loop for the fdatasync (as
/// redis-server's SAVE blocks its server); other loops go on.
fn barrier(ctx: &mut Ctx<'_>) -> CmdResult {
    ctx.shared.store.sync()?;
    ctx.shared.stats.changes.store(0, Ordering::Relaxed);
    Ok(())
}

pub(super) fn save(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    barrier(ctx)?;
    ctx.out.ok();
    Ok(())
}

pub(super) fn bgsave(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    match args.opt(1) {
        Some(a) if args.len() > 2 || !is(a, "SCHEDULE") => return Err(CmdError::Syntax),
        _ => {}
    }
    barrier(ctx)?;
    ctx.out.simple("Background saving started");
    Ok(())
}

pub(super) fn bgrewriteaof(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    barrier(ctx)?;
    ctx.out
        .simple("Background append only file rewriting started");
    Ok(())
}

pub(super) fn lastsave(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    ctx.out.int(ctx.shared.store.last_save() as i64);
    Ok(())
}

pub(super) fn time(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    ctx.out.array(2);
    ctx.out.bulk_int(now.as_secs());
    ctx.out.bulk_int(now.subsec_micros());
    Ok(())
}

pub(super) fn shutdown(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let (mut nosave, mut save, mut abort, mut other) = (false, false, false, false);
    let mut force = false;
    for a in args.from(1) {
        if is(a, "NOSAVE") {
            nosave = true;
        } else if is(a, "SAVE") {
            save = true;
        } else if is(a, "NOW") || is(a, "FORCE") {
            force |= is(a, "FORCE");
            other = true;
        } else if is(a, "ABORT") {
            abort = true;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    if (abort && (nosave || save || other)) || (nosave && save) {
        return Err(CmdError::Syntax);
    }
    if abort {
        return Err(CmdError::err("No shutdown in progress."));
    }
    // NOSAVE does not skip the final flush: the store is always closed
    // cleanly, so nothing acknowledged is lost; unless FORCE, a store that
    // cannot make its writes durable now keeps the server running (see
    // `Shared::sync_before_shutdown`). (The server logs the request when
    // it acts on it.)
    if !force && !ctx.shared.sync_before_shutdown("SHUTDOWN") {
        return Err(CmdError::err("Errors trying to SHUTDOWN. Check logs."));
    }
    ctx.session.shutdown = true;
    Ok(())
}

pub(super) static CONFIG_SUBS: &[Sub] = &[
    Sub {
        name: "get",
        summary: "Returns the effective values of configuration parameters.",
        since: "2.0.0",
        arity: -3,
        flags: ADMIN | NOSCRIPT | LOADING | STALE,
        run: config_get,
    },
    Sub {
        name: "set",
        summary: "Sets configuration parameters in-flight.",
        since: "2.0.0",
        arity: -4,
        flags: ADMIN | NOSCRIPT | LOADING | STALE,
        run: config_set,
    },
    Sub {
        name: "resetstat",
        summary: "Resets the server's statistics.",
        since: "2.0.0",
        arity: 2,
        flags: ADMIN | NOSCRIPT | LOADING | STALE,
        run: config_resetstat,
    },
    Sub {
        name: "rewrite",
        summary: "Persists the effective configuration to file.",
        since: "2.8.0",
        arity: 2,
        flags: ADMIN | NOSCRIPT | LOADING | STALE,
        run: config_rewrite,
    },
    Sub {
        name: "help",
        summary: "Returns helpful text about the different subcommands.",
        since: "5.0.0",
        arity: 2,
        flags: LOADING | STALE,
        run: config_help,
    },
];

pub(super) fn config(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    dispatch_sub(ctx, args, "config")
}

fn config_help(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    help(
        ctx,
        &[
            "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "GET <pattern>",
            "    Return parameters matching the glob-like <pattern> and their values.",
            "SET <directive> <value>",
            "    Set the configuration <directive> to <value>.",
            "RESETSTAT",
            "    Reset statistics reported by the INFO command.",
            "HELP",
            "    Print this help.",
        ],
    );
    Ok(())
}

/// CONFIG GET, as Redis 7.0's `configGetCommand`: an argument without
/// `*`, `?` or `[` names one parameter (in any case) and the reply names
/// it as the argument spelled it; a pattern matches names ignoring case
/// and the reply gives their own names. Redis 6's names of settings
/// (`config::ALIASES`) are names too: a pattern lists them beside the
/// new ones. A name asked twice is given once, under its first spelling.
fn config_get(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let config = ctx.shared.config.read();
    let names = PARAMS
        .iter()
        .enumerate()
        .map(|(at, param)| (at, param.name))
        .chain(config::ALIASES.iter().filter_map(|&(alias, name)| {
            let at = PARAMS.iter().position(|p| p.name == name)?;
            Some((at, alias))
        }));
    let names: Vec<(usize, &str)> = names.collect();
    let mut found: Vec<(usize, &[u8])> = Vec::new();
    for arg in args.from(2) {
        let glob = arg.iter().any(|b| b"*?[".contains(b));
        for &(at, name) in &names {
            let name = name.as_bytes();
            let hit = if glob {
                crate::glob::matches(&arg.to_ascii_lowercase(), name)
            } else {
                arg.eq_ignore_ascii_case(name)
            };
            if hit
                && !found
                    .iter()
                    .any(|(_, seen)| seen.eq_ignore_ascii_case(name))
            {
                found.push((at, if glob { name } else { arg }));
            }
        }
    }
    let values: Vec<String> = found
        .iter()
        .map(|&(at, _)| PARAMS[at].get(&config))
        .collect();
    drop(config);
    ctx.out.map(found.len());
    for ((_, name), value) in found.iter().zip(values) {
        ctx.out.bulk(name);
        ctx.out.bulk(value.as_bytes());
    }
    Ok(())
}

fn config_set(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    // Fewer than one pair is refused by the arity (-4); an unpaired name
    // after the first pair is a syntax error, as in Redis 7.
    if !args.len().is_multiple_of(2) {
        return Err(CmdError::Syntax);
    }
    let shared = ctx.shared;
    let mut config = shared.config.write();
    let mut next = config.clone();
    let mut seen = Vec::new();
    let mut pairs = args.from(2);
    while let (Some(sent), Some(value)) = (pairs.next(), pairs.next()) {
        let name = text(sent);
        let failed = |why: &str| {
            CmdError::err(format_args!(
                "CONFIG SET failed (possibly related to argument '{name}') - {why}"
            ))
        };
        let Some(param) = config::param(&name) else {
            return Err(CmdError::err_quoting(
                "Unknown option or number of arguments for CONFIG SET - '",
                sent,
                "'",
            ));
        };
        if !param.mutable {
            return Err(failed("can't set immutable config"));
        }
        // A name given twice; a Redis 6 name beside the new one is not
        // (the later value wins), as in redis-server.
        let lower = name.to_ascii_lowercase();
        if seen.contains(&lower) {
            return Err(failed("duplicate parameter"));
        }
        seen.push(lower);
        param
            .set(&mut next, &[text(value)])
            .map_err(|e| failed(&e.redis()))?;
    }
    if next.maxclients > config.maxclients {
        // Room for the new number of clients under the open files limit
        // (raised if need be), beside what the start counted: the
        // descriptors open then and the store's share. Not those open
        // now: the store's lock and the event loops' came after the start
        // and live in the reserve, and counting them made the value the
        // start chose one that could not be set again (an attack helper).
        let kept = config.base_fds.saturating_add(config.store_files);
        let fit = crate::fd_limit::fit_clients(next.maxclients, kept).clients;
        if fit < next.maxclients {
            return Err(CmdError::err(format_args!(
                "CONFIG SET failed (possibly related to argument 'maxclients') - The operating \
                 system is not able to handle the specified number of clients, try with {fit}"
            )));
        }
    }
    if next.maxclients != config.maxclients {
        shared.clients.resize(config.maxclients, next.maxclients);
    }
    if next.loglevel != config.loglevel {
        crate::log::set_level(next.loglevel);
    }
    shared.live.update(&next);
    *config = next;
    drop(config);
    ctx.out.ok();
    Ok(())
}

fn config_resetstat(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    ctx.shared.stats.reset();
    let expired = ctx.shared.store.db().stats()?.expired_keys_removed;
    ctx.shared
        .stats
        .expired_base
        .store(expired, std::sync::atomic::Ordering::Relaxed);
    ctx.out.ok();
    Ok(())
}

fn config_rewrite(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    if ctx.shared.config.read().config_file.is_none() {
        return Err(CmdError::err("The server is running without a config file"));
    }
    Err(CmdError::err(
        "CONFIG REWRITE is not supported by emberkv-server",
    ))
}

/// INFO's sections, in the order Redis 7 prints them: its `default` set,
/// and commandstats and latencystats, which only `all`, `everything` or
/// their names ask for.
const SECTIONS: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "modules",
    "commandstats",
    "errorstats",
    "latencystats",
    "cluster",
    "keyspace",
];

pub(super) fn info(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let all = args.from(1).any(|a| is(a, "all") || is(a, "everything"));
    let default = args.len() == 1 || args.from(1).any(|a| is(a, "default"));
    let wanted: Vec<&str> = SECTIONS
        .iter()
        .copied()
        .filter(|s| {
            all || (default && !matches!(*s, "commandstats" | "latencystats"))
                || args.from(1).any(|a| is(a, s))
        })
        .collect();
    let text = info_text(ctx, &wanted)?;
    ctx.out.verbatim(text.as_bytes());
    Ok(())
}

/// Bytes as Redis's `*_human` fields print them.
fn human(bytes: u64) -> String {
    let b = bytes as f64;
    if b < 1024.0 {
        format!("{bytes}B")
    } else if b < 1024.0 * 1024.0 {
        format!("{:.2}K", b / 1024.0)
    } else if b < 1024.0 * 1024.0 * 1024.0 {
        format!("{:.2}M", b / (1024.0 * 1024.0))
    } else {
        format!("{:.2}G", b / (1024.0 * 1024.0 * 1024.0))
    }
}

/// The CPU time of the process and of its waited-for children, in
/// seconds: user, system, children's user, children's system, from
/// /proc/self/stat (clock ticks of 10 ms: Linux's `USER_HZ` is 100); zeros
/// where unavailable.
fn cpu_seconds() -> [f64; 4] {
    let ticks = std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| {
            // Fields 14 to 17 (utime, stime, cutime, cstime), counted
            // from the state after the command name's closing parenthesis.
            let fields: Vec<&str> = s.rsplit_once(')')?.1.split_whitespace().collect();
            let mut t = [0f64; 4];
            for (i, t) in t.iter_mut().enumerate() {
                *t = fields.get(11 + i)?.parse::<u64>().ok()? as f64 / 100.0;
            }
            Some(t)
        });
    ticks.unwrap_or_default()
}

/// The process's resident memory, from /proc (0 where unavailable).
fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096)
}

/// The engine's statistics, read at most once per INFO: each read takes
/// every index shard's lock and lists the store's directory, and four
/// sections show them.
fn engine_stats<'a>(
    cached: &'a mut Option<emberkv::Stats>,
    db: &emberkv::Db,
) -> emberkv::Result<&'a emberkv::Stats> {
    Ok(match cached {
        Some(s) => s,
        empty => empty.insert(db.stats()?),
    })
}

fn info_text(ctx: &Ctx<'_>, sections: &[&str]) -> CmdResult<String> {
    let shared = ctx.shared;
    let config = shared.config.read().clone();
    let db = shared.store.db();
    let mut engine = None;
    let stats = &shared.stats;
    let mut t = String::new();
    for &section in sections {
        if !t.is_empty() {
            t.push_str("\r\n");
        }
        // Writing to a String cannot fail.
        let w = &mut t;
        match section {
            "server" => {
                let up = shared.started.elapsed().as_secs();
                // Accepted without effect (no cron at that rate here), and
                // reported as set.
                let hz = config::param("hz")
                    .map(|p| p.get(&config))
                    .unwrap_or_default();
                let now_us = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .unwrap_or_default()
                    .as_micros();
                let _ = write!(
                    w,
                    "# Server\r\nredis_version:{}\r\nemberkv_version:{}\r\nredis_git_sha1:00000000\r\nredis_git_dirty:0\r\nredis_mode:standalone\r\nos:{} {}\r\narch_bits:{}\r\nmultiplexing_api:epoll\r\nprocess_id:{}\r\nrun_id:{}\r\ntcp_port:{}\r\nserver_time_usec:{}\r\nuptime_in_seconds:{}\r\nuptime_in_days:{}\r\nhz:{}\r\nconfigured_hz:{}\r\nexecutable:{}\r\nconfig_file:{}\r\n",
                    crate::REDIS_VERSION,
                    env!("CARGO_PKG_VERSION"),
                    std::env::consts::OS,
                    std::env::consts::ARCH,
                    usize::BITS,
                    std::process::id(),
                    shared.run_id,
                    shared.tcp_port,
                    now_us,
                    up,
                    up / 86_400,
                    hz,
                    hz,
                    shared.executable,
                    config
                        .config_file
                        .as_ref()
                        .map(|p| p.display().to_string())
                        .unwrap_or_default(),
                );
            }
            "clients" => {
                let _ = write!(
                    w,
                    "# Clients\r\nconnected_clients:{}\r\nmaxclients:{}\r\nblocked_clients:0\r\ntracking_clients:0\r\n",
                    shared.clients.len(),
                    config.maxclients
                );
            }
            "memory" => {
                let s = engine_stats(&mut engine, db)?;
                let rss = rss_bytes();
                let _ = write!(
                    w,
                    "# Memory\r\nused_memory:{rss}\r\nused_memory_human:{}\r\nused_memory_rss:{rss}\r\nused_memory_rss_human:{}\r\nmaxmemory:{}\r\nmaxmemory_human:{}\r\nmaxmemory_policy:noeviction\r\nmaxmemory_enforced:no\r\nemberkv_index_bytes:{}\r\nemberkv_index_bytes_per_key:{:.2}\r\nemberkv_hot_bytes:{}\r\nemberkv_read_cache_bytes:{}\r\nemberkv_read_cache_hit_ratio:{:.4}\r\nemberkv_logical_bytes:{}\r\n",
                    human(rss),
                    human(rss),
                    config.maxmemory,
                    human(config.maxmemory),
                    s.index_bytes,
                    s.index_bytes_per_key,
                    s.hot_bytes,
                    s.read_cache_bytes,
                    s.cache_hit_ratio,
                    s.logical_bytes,
                );
            }
            "persistence" => {
                let s = engine_stats(&mut engine, db)?;
                let _ = write!(
                    w,
                    "# Persistence\r\nloading:0\r\nasync_loading:0\r\nrdb_changes_since_last_save:{}\r\nrdb_bgsave_in_progress:0\r\nrdb_last_save_time:{}\r\nrdb_last_bgsave_status:ok\r\naof_enabled:{}\r\naof_rewrite_in_progress:0\r\naof_last_write_status:ok\r\nemberkv_store:{}\r\nemberkv_appendfsync:{}\r\nemberkv_disk_bytes:{}\r\nemberkv_space_amplification:{:.2}\r\nemberkv_segment_files_open:{}\r\nemberkv_segment_files_reopened:{}\r\n",
                    Stats::get(&stats.changes),
                    shared.store.last_save(),
                    u8::from(config.appendonly),
                    shared.store.path().display(),
                    config::param("appendfsync")
                        .map(|p| p.get(&config))
                        .unwrap_or_default(),
                    s.disk_bytes,
                    s.space_amplification,
                    s.open_files,
                    s.files_reopened,
                );
            }
            "stats" => {
                let _ = write!(
                    w,
                    "# Stats\r\ntotal_connections_received:{}\r\ntotal_commands_processed:{}\r\ninstantaneous_ops_per_sec:{}\r\ntotal_net_input_bytes:{}\r\ntotal_net_output_bytes:{}\r\nrejected_connections:{}\r\nexpired_keys:{}\r\nevicted_keys:0\r\nkeyspace_hits:{}\r\nkeyspace_misses:{}\r\ntotal_error_replies:{}\r\n",
                    Stats::get(&stats.connections),
                    Stats::get(&stats.commands),
                    Stats::get(&stats.ops_per_sec),
                    Stats::get(&stats.net_in),
                    Stats::get(&stats.net_out),
                    Stats::get(&stats.rejected),
                    engine_stats(&mut engine, db)?
                        .expired_keys_removed
                        .saturating_sub(Stats::get(&stats.expired_base)),
                    Stats::get(&stats.hits),
                    Stats::get(&stats.misses),
                    stats.errors(),
                );
            }
            "replication" => {
                let _ = write!(
                    w,
                    "# Replication\r\nrole:master\r\nconnected_slaves:0\r\nmaster_replid:{}\r\nmaster_repl_offset:0\r\n",
                    shared.run_id
                );
            }
            "cpu" => {
                let [user, sys, children_user, children_sys] = cpu_seconds();
                let _ = write!(
                    w,
                    "# CPU\r\nused_cpu_sys:{sys:.6}\r\nused_cpu_user:{user:.6}\r\nused_cpu_sys_children:{children_sys:.6}\r\nused_cpu_user_children:{children_user:.6}\r\n",
                );
            }
            "modules" => w.push_str("# Modules\r\n"),
            "commandstats" => {
                w.push_str("# Commandstats\r\n");
                for (slot, t) in stats.per_command().iter().enumerate() {
                    let (calls, rejected, failed) = (
                        Stats::get(&t.calls),
                        Stats::get(&t.rejected),
                        Stats::get(&t.failed),
                    );
                    if calls == 0 && rejected == 0 && failed == 0 {
                        continue;
                    }
                    let usec = Stats::get(&t.nanos) / 1000;
                    let per_call = if calls == 0 {
                        0.0
                    } else {
                        usec as f64 / calls as f64
                    };
                    let _ = write!(
                        w,
                        "cmdstat_{}:calls={calls},usec={usec},usec_per_call={per_call:.2},rejected_calls={rejected},failed_calls={failed}\r\n",
                        super::stat_name(slot)
                    );
                }
            }
            "latencystats" => {
                w.push_str("# Latencystats\r\n");
                if config.latency_tracking {
                    let percentiles = &config.latency_percentiles;
                    for (slot, at) in stats.latency_percentiles(percentiles) {
                        let _ = write!(w, "latency_percentiles_usec_{}:", super::stat_name(slot));
                        for (n, (p, usec)) in percentiles.iter().zip(at).enumerate() {
                            let comma = if n == 0 { "" } else { "," };
                            let _ = write!(w, "{comma}p{p}={usec:.3}");
                        }
                        w.push_str("\r\n");
                    }
                }
            }
            "errorstats" => {
                w.push_str("# Errorstats\r\n");
                for (code, n) in stats.error_codes.lock().iter() {
                    let _ = write!(w, "errorstat_{code}:count={n}\r\n");
                }
            }
            "cluster" => w.push_str("# Cluster\r\ncluster_enabled:0\r\n"),
            _ => {
                w.push_str("# Keyspace\r\n");
                let keys = db.len();
                if keys > 0 {
                    // Like `keys`, `expires` counts expired keys not yet
                    // reclaimed; avg_ttl is not estimated.
                    let expires = engine_stats(&mut engine, db).map_or(0, |s| s.expiring_keys);
                    let _ = write!(w, "db0:keys={keys},expires={expires},avg_ttl=0\r\n");
                }
            }
        }
    }
    Ok(t)
}
