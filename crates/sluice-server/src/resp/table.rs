//! The commands the front answers, as `COMMAND` and `COMMAND DOCS` describe them and as
//! dispatch checks their arity.

use crate::resp::arguments::{self, Arg};

/// A command the front answers, as `COMMAND` lists it and `COMMAND DOCS` documents it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Spec {
    /// Its name, in lower case (`container|subcommand` for a subcommand).
    pub(crate) name: &'static str,
    /// Redis's arity: `n` exactly `n` words (the name included), `-n` at least `n`.
    pub(crate) arity: i64,
    /// Redis's command flags.
    pub(crate) flags: &'static [&'static str],
    /// The position of its key (0: none).
    pub(crate) first_key: i64,
    /// Its group, as `COMMAND DOCS` tells it.
    pub(crate) group: &'static str,
    /// The version that added it: Redis's for Redis's commands, redis-cell's for
    /// `CL.THROTTLE`, Sluice's for `SLUICE.*`.
    pub(crate) since: &'static str,
    /// One line on what it does.
    pub(crate) summary: &'static str,
    /// Its arguments, for `COMMAND DOCS`.
    pub(crate) arguments: &'static [Arg],
    /// A container's subcommands (`CLIENT SETNAME`…).
    pub(crate) subcommands: &'static [Spec],
}

const fn spec(name: &'static str, arity: i64, flags: &'static [&'static str], first_key: i64) -> Spec {
    Spec {
        name,
        arity,
        flags,
        first_key,
        group: "connection",
        since: "1.0.0",
        summary: "",
        arguments: &[],
        subcommands: &[],
    }
}

const fn about(spec: Spec, group: &'static str, since: &'static str, summary: &'static str) -> Spec {
    Spec { group, since, summary, ..spec }
}

const fn taking(arguments: &'static [Arg], spec: Spec) -> Spec {
    Spec { arguments, ..spec }
}

const fn holding(subcommands: &'static [Spec], spec: Spec) -> Spec {
    Spec { subcommands, ..spec }
}

const HANDSHAKE: &[&str] = &["noscript", "loading", "stale", "fast", "no_auth"];
const CONNECTION: &[&str] = &["noscript", "loading", "stale"];

/// Every command answered. `cl.throttle` has redis-cell's arity (−1: its module checks the
/// count itself, with its own usage error).
pub(crate) const COMMANDS: &[Spec] = &[
    taking(
        arguments::CL_THROTTLE,
        about(spec("cl.throttle", -1, &["write"], 1), "module", "0.1.0", "GCRA rate limiting, as redis-cell's command"),
    ),
    taking(
        arguments::SLUICE_CHECK,
        about(spec("sluice.check", -3, &["write"], 2), "module", "0.1.0", "Check a key against configured policies"),
    ),
    taking(
        arguments::SLUICE_PEEK,
        about(
            spec("sluice.peek", 3, &["readonly"], 2),
            "module",
            "0.1.0",
            "What a cost-1 check would get, consuming nothing",
        ),
    ),
    taking(
        arguments::SLUICE_RESET,
        about(spec("sluice.reset", -2, &["write"], 1), "module", "0.1.0", "Forget a key's states (admin)"),
    ),
    taking(arguments::HELLO, about(spec("hello", -1, HANDSHAKE, 0), "connection", "6.0.0", "Handshake")),
    taking(
        arguments::PING,
        about(spec("ping", -1, &["fast"], 0), "connection", "1.0.0", "Returns PONG, or the message given"),
    ),
    taking(arguments::ECHO, about(spec("echo", 2, &["fast"], 0), "connection", "1.0.0", "Returns the message given")),
    taking(arguments::AUTH, about(spec("auth", -2, HANDSHAKE, 0), "connection", "1.0.0", "Present the admin token")),
    holding(
        CLIENT,
        about(spec("client", -2, &[], 0), "connection", "2.4.0", "A container for client connection commands"),
    ),
    taking(
        arguments::SELECT,
        about(spec("select", 2, &["loading", "stale", "fast"], 0), "connection", "1.0.0", "Only database 0 exists"),
    ),
    about(spec("quit", -1, HANDSHAKE, 0), "connection", "1.0.0", "Close the connection"),
    holding(
        COMMAND,
        about(
            spec("command", -1, &["loading", "stale"], 0),
            "server",
            "2.8.13",
            "The commands answered, and their docs",
        ),
    ),
    taking(arguments::INFO, about(spec("info", -1, &["loading", "stale"], 0), "server", "1.0.0", "The server section")),
];

/// `CLIENT`'s subcommands.
const CLIENT: &[Spec] = &[
    taking(
        arguments::CLIENT_SETNAME,
        about(spec("client|setname", 3, CONNECTION, 0), "connection", "2.6.9", "Set the current connection name"),
    ),
    about(spec("client|getname", 2, CONNECTION, 0), "connection", "2.6.9", "Get the current connection name"),
    taking(
        arguments::CLIENT_SETINFO,
        about(spec("client|setinfo", 4, CONNECTION, 0), "connection", "7.2.0", "Set client or connection attributes"),
    ),
    about(
        spec("client|id", 2, CONNECTION, 0),
        "connection",
        "5.0.0",
        "Returns the client ID for the current connection",
    ),
];

/// `COMMAND`'s subcommands.
const COMMAND: &[Spec] = &[
    about(spec("command|count", 2, &["loading", "stale"], 0), "server", "2.8.13", "Get total number of commands"),
    taking(
        arguments::COMMAND_NAMES,
        about(spec("command|info", -2, &["loading", "stale"], 0), "server", "2.8.13", "Get the commands' details"),
    ),
    taking(
        arguments::COMMAND_NAMES,
        about(spec("command|docs", -2, &["loading", "stale"], 0), "server", "7.0.0", "Get the commands' documentation"),
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    /// The fewest words `arg` takes when given.
    fn words(arg: &Arg) -> i64 {
        let token = i64::from(arg.token.is_some());
        let nested = arg.arguments.iter().filter(|arg| !arg.flags.contains(&"optional"));
        match arg.kind {
            "block" => token + nested.map(words).sum::<i64>(),
            "oneof" => token + arg.arguments.iter().map(words).min().unwrap_or(0),
            _ => token + 1,
        }
    }

    /// `COMMAND DOCS` and the arity dispatch checks tell one story: the required arguments
    /// are the words the arity asks for (`cl.throttle` aside, whose module counts them
    /// itself, `quit`, which takes anything as Redis's does, and containers, whose
    /// subcommands do).
    #[test]
    fn the_documented_arguments_match_each_arity() {
        let all = COMMANDS.iter().chain(CLIENT).chain(COMMAND);
        for spec in all.filter(|spec| !["cl.throttle", "quit"].contains(&spec.name) && spec.subcommands.is_empty()) {
            let required = spec.arguments.iter().filter(|arg| !arg.flags.contains(&"optional"));
            let name_words = if spec.name.contains('|') { 2 } else { 1 };
            let least = name_words + required.map(words).sum::<i64>();
            let open = spec.arguments.iter().any(|arg| !arg.flags.is_empty());
            let expected = if open { -least } else { least };
            assert_eq!(spec.arity, expected, "{}", spec.name);
        }
        assert_eq!(words(&arguments::CL_THROTTLE[4]), 1);
        assert_eq!(arguments::CL_THROTTLE.iter().filter(|arg| arg.flags.is_empty()).count(), 4);
    }
}
