//! Each command's arguments as `COMMAND DOCS` describes them, in Redis 7's argument model
//! (name, type, token, flags, nested arguments): what `redis-cli` turns into the hint it
//! shows after a command's name (`CL.THROTTLE key max_burst count period [quantity]`) and
//! into `HELP <command>`.

/// One argument of a command.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Arg {
    /// Its name, as the hint shows it.
    pub(crate) name: &'static str,
    /// Redis's argument type: `key`, `string`, `integer`, `pure-token`, `oneof` or `block`.
    pub(crate) kind: &'static str,
    /// The word written before it (`SETNAME name`), if any.
    pub(crate) token: Option<&'static str>,
    /// Redis's argument flags: `optional`, `multiple`.
    pub(crate) flags: &'static [&'static str],
    /// What a `oneof` or a `block` holds.
    pub(crate) arguments: &'static [Arg],
}

const fn arg(name: &'static str, kind: &'static str) -> Arg {
    Arg { name, kind, token: None, flags: &[], arguments: &[] }
}

const fn optional(arg: Arg) -> Arg {
    Arg { flags: &["optional"], ..arg }
}

const fn after(token: &'static str, arg: Arg) -> Arg {
    Arg { token: Some(token), ..arg }
}

const fn group(name: &'static str, kind: &'static str, arguments: &'static [Arg]) -> Arg {
    Arg { arguments, ..arg(name, kind) }
}

/// `CL.THROTTLE key max_burst count period [quantity]`, redis-cell's names.
pub(crate) const CL_THROTTLE: &[Arg] = &[
    arg("key", "key"),
    arg("max_burst", "integer"),
    arg("count", "integer"),
    arg("period", "integer"),
    optional(arg("quantity", "integer")),
];

/// `SLUICE.CHECK policy[,policy…] key [cost]`.
pub(crate) const SLUICE_CHECK: &[Arg] = &[arg("policy", "string"), arg("key", "key"), optional(arg("cost", "integer"))];

/// `SLUICE.PEEK policy[,policy…] key`.
pub(crate) const SLUICE_PEEK: &[Arg] = &[arg("policy", "string"), arg("key", "key")];

/// `SLUICE.RESET key [policy …]`.
pub(crate) const SLUICE_RESET: &[Arg] =
    &[arg("key", "key"), Arg { flags: &["optional", "multiple"], ..arg("policy", "string") }];

/// `HELLO [protover [AUTH username password] [SETNAME clientname]]`, as Redis documents it.
pub(crate) const HELLO: &[Arg] = &[optional(group(
    "arguments",
    "block",
    &[
        arg("protover", "integer"),
        optional(after(
            "AUTH",
            group("username_password", "block", &[arg("username", "string"), arg("password", "string")]),
        )),
        optional(after("SETNAME", arg("clientname", "string"))),
    ],
))];

/// `PING [message]`.
pub(crate) const PING: &[Arg] = &[optional(arg("message", "string"))];

/// `ECHO message`.
pub(crate) const ECHO: &[Arg] = &[arg("message", "string")];

/// `AUTH [username] password`.
pub(crate) const AUTH: &[Arg] = &[optional(arg("username", "string")), arg("password", "string")];

/// `SELECT index`.
pub(crate) const SELECT: &[Arg] = &[arg("index", "integer")];

/// `INFO [section …]`.
pub(crate) const INFO: &[Arg] = &[Arg { flags: &["optional", "multiple"], ..arg("section", "string") }];

/// `CLIENT SETNAME connection-name`.
pub(crate) const CLIENT_SETNAME: &[Arg] = &[arg("connection-name", "string")];

/// `CLIENT SETINFO <LIB-NAME libname | LIB-VER libver>`.
pub(crate) const CLIENT_SETINFO: &[Arg] = &[group(
    "attr",
    "oneof",
    &[after("LIB-NAME", arg("libname", "string")), after("LIB-VER", arg("libver", "string"))],
)];

/// `COMMAND INFO [command-name …]` and `COMMAND DOCS [command-name …]`.
pub(crate) const COMMAND_NAMES: &[Arg] = &[Arg { flags: &["optional", "multiple"], ..arg("command-name", "string") }];
