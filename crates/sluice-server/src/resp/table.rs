//! The commands the front answers, as `COMMAND` and `COMMAND DOCS` describe them and as
//! dispatch checks their arity.

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
