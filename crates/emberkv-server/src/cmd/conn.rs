//! Connection commands: PING, ECHO, QUIT, SELECT, AUTH, HELLO, RESET.

use std::sync::atomic::Ordering;

use super::Ctx;
use crate::error::{CmdError, CmdResult};
use crate::parse::{Args, is, text};

pub(super) fn ping(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    match args.len() {
        1 => ctx.out.simple("PONG"),
        2 => ctx.out.bulk(args.get(1)),
        _ => return Err(CmdError::WrongArity("ping".into())),
    }
    Ok(())
}

pub(super) fn echo(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    ctx.out.bulk(args.get(1));
    Ok(())
}

pub(super) fn quit(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    ctx.out.ok();
    ctx.session.close_after_reply = true;
    Ok(())
}

pub(super) fn select(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    match crate::parse::int32(args.get(1))? {
        0 => {
            ctx.out.ok();
            Ok(())
        }
        _ => Err(CmdError::DbIndexOutOfRange),
    }
}

/// Compares a guess with the password in time that depends only on the
/// password's length, never on where the first difference is (nor on the
/// guess's length).
pub fn constant_time_eq(guess: &[u8], password: &[u8]) -> bool {
    let mut diff = u8::from(guess.len() != password.len());
    for (i, &p) in password.iter().enumerate() {
        let g = guess.get(i).copied().unwrap_or(0);
        diff |= std::hint::black_box(g ^ p);
    }
    diff == 0
}

/// Checks a username and password as Redis's default user does: with no
/// password set, any password is accepted for `default`.
fn authenticate(ctx: &Ctx<'_>, user: &[u8], password: &[u8]) -> bool {
    if user != b"default" {
        return false;
    }
    match &ctx.shared.config.read().requirepass {
        None => true,
        Some(required) => constant_time_eq(password, required.as_bytes()),
    }
}

pub(super) fn auth(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let (user, password) = match args.len() {
        2 => {
            if ctx.shared.config.read().requirepass.is_none() {
                return Err(CmdError::err(
                    "AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?",
                ));
            }
            (&b"default"[..], args.get(1))
        }
        3 => (args.get(1), args.get(2)),
        _ => return Err(CmdError::Syntax),
    };
    if !authenticate(ctx, user, password) {
        crate::warning!(
            "Failed AUTH from client id={} addr={}",
            ctx.session.handle.id,
            ctx.session.handle.addr
        );
        return Err(CmdError::WrongPass);
    }
    ctx.session.authed = true;
    ctx.out.ok();
    Ok(())
}

/// RESET, as Redis 7's `clearClientConnectionState`: the transaction
/// (if any) discarded, nothing watched, no name, RESP2, and the
/// authentication a connection made now gets (none while a password is
/// set; one made while none is stays authenticated if one is set later).
pub(super) fn reset(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    super::multi::forget(ctx);
    *ctx.session.handle.name.lock() = None;
    ctx.out.set_resp3(false);
    ctx.session.handle.resp.store(2, Ordering::Relaxed);
    ctx.session.authed = ctx.shared.live.no_password.load(Ordering::Relaxed);
    ctx.out.simple("RESET");
    Ok(())
}

/// Checks a client name as Redis does: printable ASCII without spaces.
pub(super) fn valid_name(name: &[u8]) -> bool {
    name.iter().all(|&b| (b'!'..=b'~').contains(&b))
}

pub(super) fn hello(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let mut version = None;
    let mut next = 1;
    if args.len() >= 2 {
        let v = crate::num::parse_i64(args.get(1))
            .ok_or_else(|| CmdError::err("Protocol version is not an integer or out of range"))?;
        if !(2..=3).contains(&v) {
            return Err(CmdError::NoProto);
        }
        version = Some(v);
        next = 2;
    }
    let mut credentials = None;
    let mut name = None;
    let mut j = next;
    while j < args.len() {
        let opt = args.get(j);
        let more = args.len() - 1 - j;
        if is(opt, "AUTH") && more >= 2 {
            credentials = Some((args.get(j + 1), args.get(j + 2)));
            j += 2;
        } else if is(opt, "SETNAME") && more >= 1 {
            name = Some(args.get(j + 1));
            j += 1;
        } else {
            return Err(CmdError::err_quoting(
                "Syntax error in HELLO option '",
                opt,
                "'",
            ));
        }
        j += 1;
    }
    if let Some((user, password)) = credentials {
        if !authenticate(ctx, user, password) {
            return Err(CmdError::WrongPass);
        }
        ctx.session.authed = true;
    }
    if !ctx.session.authenticated(&ctx.shared.live) {
        return Err(CmdError::Msg(
            "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time".into(),
        ));
    }
    if let Some(name) = name {
        if !valid_name(name) {
            return Err(CmdError::err(
                "Client names cannot contain spaces, newlines or special characters.",
            ));
        }
        *ctx.session.handle.name.lock() = (!name.is_empty()).then(|| text(name));
    }
    if let Some(v) = version {
        ctx.out.set_resp3(v == 3);
        ctx.session.handle.resp.store(v as u8, Ordering::Relaxed);
    }
    let proto = if ctx.out.resp3() { 3 } else { 2 };
    ctx.out.map(7);
    ctx.out.bulk(b"server");
    ctx.out.bulk(b"redis");
    ctx.out.bulk(b"version");
    ctx.out.bulk(crate::REDIS_VERSION.as_bytes());
    ctx.out.bulk(b"proto");
    ctx.out.int(proto);
    ctx.out.bulk(b"id");
    ctx.out.int(ctx.session.handle.id as i64);
    ctx.out.bulk(b"mode");
    ctx.out.bulk(b"standalone");
    ctx.out.bulk(b"role");
    ctx.out.bulk(b"master");
    ctx.out.bulk(b"modules");
    ctx.out.array(0);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_time_eq_is_equality() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secreT", b"secret"));
        assert!(!constant_time_eq(b"secret1", b"secret"));
        assert!(!constant_time_eq(b"secre", b"secret"));
        assert!(!constant_time_eq(b"", b"secret"));
        assert!(constant_time_eq(b"", b""));
        assert!(!constant_time_eq(b"x", b""));
    }

    #[test]
    fn client_names() {
        assert!(valid_name(b"worker-1"));
        assert!(valid_name(b""));
        assert!(!valid_name(b"a b"));
        assert!(!valid_name(b"a\nb"));
    }
}
