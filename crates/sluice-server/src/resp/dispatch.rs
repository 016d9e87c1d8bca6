//! From a command's name to its handler, and the table `COMMAND` describes. Names are
//! matched in any case; the arity is checked here, as Redis checks it, before a handler runs.

use crate::engine::front::Front;
use crate::resp::frame::Command;
use crate::resp::reply::Reply;
use crate::resp::session::Session;
use crate::resp::{cell, handshake, introspection, policies};

/// A command the front answers, as `COMMAND` lists it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Spec {
    /// Its name, in lower case.
    pub(crate) name: &'static str,
    /// Redis's arity: `n` exactly `n` words (the name included), `-n` at least `n`.
    pub(crate) arity: i64,
    /// Redis's command flags.
    pub(crate) flags: &'static [&'static str],
    /// The position of its key (0: none).
    pub(crate) first_key: i64,
    /// Its group, as `COMMAND DOCS` tells it.
    pub(crate) group: &'static str,
    /// One line on what it does.
    pub(crate) summary: &'static str,
}

const fn spec(name: &'static str, arity: i64, flags: &'static [&'static str], first_key: i64) -> Spec {
    Spec { name, arity, flags, first_key, group: "connection", summary: "" }
}

const fn about(spec: Spec, group: &'static str, summary: &'static str) -> Spec {
    Spec { group, summary, ..spec }
}

/// Every command answered. `cl.throttle` has redis-cell's arity (−1: its module checks the
/// count itself, with its own usage error).
pub(crate) const COMMANDS: &[Spec] = &[
    about(spec("cl.throttle", -1, &["write"], 1), "module", "GCRA rate limiting, as redis-cell's command"),
    about(spec("sluice.check", -3, &["write"], 2), "module", "Check a key against configured policies"),
    about(spec("sluice.peek", 3, &["readonly"], 2), "module", "What a cost-1 check would get, consuming nothing"),
    about(spec("sluice.reset", -2, &["write"], 1), "module", "Forget a key's states (admin)"),
    about(spec("hello", -1, &["noscript", "loading", "stale", "fast", "no_auth"], 0), "connection", "Handshake"),
    about(spec("ping", -1, &["fast"], 0), "connection", "Returns PONG, or the message given"),
    about(spec("echo", 2, &["fast"], 0), "connection", "Returns the message given"),
    about(
        spec("auth", -2, &["noscript", "loading", "stale", "fast", "no_auth"], 0),
        "connection",
        "Present the admin token",
    ),
    about(spec("client", -2, &[], 0), "connection", "SETNAME, GETNAME, SETINFO, ID"),
    about(spec("select", 2, &["loading", "stale", "fast"], 0), "connection", "Only database 0 exists"),
    about(
        spec("quit", -1, &["noscript", "loading", "stale", "fast", "no_auth"], 0),
        "connection",
        "Close the connection",
    ),
    about(spec("command", -1, &["loading", "stale"], 0), "server", "COMMAND, COUNT, INFO, DOCS"),
    about(spec("info", -1, &["loading", "stale"], 0), "server", "The server section"),
];

/// Runs `command` (its name first, never empty) for `session`.
pub(crate) async fn run(front: &Front, session: &mut Session, command: &Command) -> Reply {
    let name = String::from_utf8_lossy(&command[0]).to_ascii_lowercase();
    let Some(spec) = COMMANDS.iter().find(|spec| spec.name == name) else { return unknown(command) };
    let words = command.len() as i64;
    if (spec.arity > 0 && words != spec.arity) || words < spec.arity.abs() {
        return Reply::error(format!("wrong number of arguments for '{name}' command"));
    }
    let args = &command[1..];
    match spec.name {
        "cl.throttle" => cell::throttle(front, session, args).await,
        "sluice.check" => policies::check(front, args).await,
        "sluice.peek" => policies::peek(front, args).await,
        "sluice.reset" => policies::reset(front, session, args).await,
        "command" => introspection::command(args),
        "info" => introspection::info(front, session),
        _ => handshake::run(front, session, spec.name, args),
    }
}

/// Redis's answer to a command it does not know, word for word: the name and the first
/// arguments, quoted, within 128 bytes.
fn unknown(command: &Command) -> Reply {
    let clip = |bytes: &[u8], room: usize| String::from_utf8_lossy(&bytes[..bytes.len().min(room)]).into_owned();
    let mut args = String::new();
    for arg in &command[1..] {
        if args.len() >= 128 {
            break;
        }
        args.push_str(&format!("'{}' ", clip(arg, 128 - args.len())));
    }
    Reply::error(format!("unknown command '{}', with args beginning with: {args}", clip(&command[0], 128)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    #[test]
    fn an_unknown_command_is_answered_in_redis_words() {
        let command: Command = [&b"GET"[..], b"k", b"v"].into_iter().map(Bytes::from_static).collect();
        assert_eq!(unknown(&command), Reply::error("unknown command 'GET', with args beginning with: 'k' 'v' "));
        let bare: Command = vec![Bytes::from_static(b"nope")];
        assert_eq!(unknown(&bare), Reply::error("unknown command 'nope', with args beginning with: "));
    }
}
