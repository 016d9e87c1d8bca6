//! The connection commands clients send before and between their calls: `HELLO`, `AUTH`,
//! `CLIENT`, `SELECT`, `PING`, `ECHO`, `QUIT`. The admin token (`--admin-token`) is the
//! default user's password; without one, `AUTH` is refused as Redis refuses it with no
//! password set.

use crate::engine::front::Front;
use crate::resp::reply::{Protocol, Reply};
use crate::resp::session::Session;
use bytes::Bytes;

/// The version `HELLO` and `INFO` report: the Redis release whose commands and replies
/// the front follows (RESP3, `COMMAND DOCS`, `CLIENT SETINFO`).
pub(crate) const REDIS_VERSION: &str = "7.2.0";

/// Runs the connection command `name` (lower case) with `args`.
pub(crate) fn run(front: &Front, session: &mut Session, name: &str, args: &[Bytes]) -> Reply {
    match (name, args) {
        ("ping", []) => Reply::Simple("PONG"),
        ("ping", [message]) | ("echo", [message]) => Reply::Bulk(message.clone()),
        ("hello", _) => hello(front, session, args),
        ("auth", [password]) => auth(front, session, b"default", password),
        ("auth", [user, password]) => auth(front, session, user, password),
        ("client", _) => client(session, args),
        ("select", [index]) => match std::str::from_utf8(index).ok().and_then(|text| text.parse::<i64>().ok()) {
            Some(0) => Reply::Simple("OK"),
            Some(_) => Reply::error("DB index is out of range"),
            None => Reply::error("value is not an integer or out of range"),
        },
        ("quit", _) => {
            session.quitting = true;
            Reply::Simple("OK")
        }
        _ => Reply::error(format!("wrong number of arguments for '{name}' command")),
    }
}

/// `HELLO [protover [AUTH user password] [SETNAME name]]`.
fn hello(front: &Front, session: &mut Session, args: &[Bytes]) -> Reply {
    let protocol =
        match args.first().map(|version| std::str::from_utf8(version).ok().and_then(|text| text.parse().ok())) {
            None => session.protocol,
            Some(Some(2)) => Protocol::Resp2,
            Some(Some(3)) => Protocol::Resp3,
            Some(Some(_)) => return Reply::Error("NOPROTO unsupported protocol version".into()),
            Some(None) => return Reply::error("Protocol version is not an integer or out of range"),
        };
    if let Err(reply) = hello_options(front, session, args.get(1..).unwrap_or_default()) {
        return reply;
    }
    session.protocol = protocol;
    Reply::Map(vec![
        ("server", Reply::text("sluice")),
        ("version", Reply::text(REDIS_VERSION)),
        ("proto", Reply::Integer(protocol.version())),
        ("id", Reply::Integer(i64::try_from(session.id).unwrap_or(i64::MAX))),
        ("mode", Reply::text("standalone")),
        ("role", Reply::text("master")),
        ("modules", Reply::Array(Vec::new())),
        ("sluice_version", Reply::text(env!("CARGO_PKG_VERSION"))),
    ])
}

/// `HELLO`'s `AUTH user password` and `SETNAME name`, applied in order; the first error stops.
fn hello_options(front: &Front, session: &mut Session, mut options: &[Bytes]) -> Result<(), Reply> {
    while let Some(option) = options.first() {
        let reply = match (option.to_ascii_lowercase().as_slice(), options) {
            (b"auth", [_, user, password, more @ ..]) => {
                options = more;
                auth(front, session, user, password)
            }
            (b"setname", [_, name, more @ ..]) => {
                options = more;
                set_name(session, name.clone())
            }
            _ => Reply::error(format!("Syntax error in HELLO option '{}'", String::from_utf8_lossy(option))),
        };
        if let Reply::Error(_) = reply {
            return Err(reply);
        }
    }
    Ok(())
}

/// `AUTH [user] password`: the default user's password is the admin token.
fn auth(front: &Front, session: &mut Session, user: &[u8], password: &[u8]) -> Reply {
    let Some(token) = &front.service.settings.admin_token else {
        return Reply::error(
            "AUTH <password> called without any password configured for the default user. \
             Are you sure your configuration is correct?",
        );
    };
    let password = std::str::from_utf8(password).unwrap_or_default();
    // Both compared, whatever the user: the time taken tells nothing of which was wrong.
    let matches = token.matches(password) & (user == b"default");
    session.authenticated = matches;
    if matches {
        Reply::Simple("OK")
    } else {
        Reply::Error("WRONGPASS invalid username-password pair or user is disabled.".into())
    }
}

/// `CLIENT SETNAME name`, `GETNAME`, `SETINFO LIB-NAME|LIB-VER value`, `ID`.
fn client(session: &mut Session, args: &[Bytes]) -> Reply {
    let subcommand = args[0].to_ascii_lowercase();
    match (subcommand.as_slice(), &args[1..]) {
        (b"setname", [name]) => set_name(session, name.clone()),
        (b"getname", []) => session.name.clone().map_or(Reply::Null, Reply::Bulk),
        (b"setinfo", [attribute, _]) => match attribute.to_ascii_lowercase().as_slice() {
            b"lib-name" | b"lib-ver" => Reply::Simple("OK"),
            _ => Reply::error(format!("Unrecognized option '{}'", String::from_utf8_lossy(attribute))),
        },
        (b"id", []) => Reply::Integer(i64::try_from(session.id).unwrap_or(i64::MAX)),
        (b"setname" | b"getname" | b"setinfo" | b"id", _) => Reply::error(format!(
            "wrong number of arguments for 'client|{}' command",
            String::from_utf8_lossy(&subcommand)
        )),
        _ => Reply::error(format!("unknown subcommand '{}'. Try CLIENT HELP.", String::from_utf8_lossy(&args[0]))),
    }
}

/// Names the connection; an empty name removes it. Redis's rule: no spaces or line breaks.
fn set_name(session: &mut Session, name: Bytes) -> Reply {
    if name.iter().any(|&byte| !(b'!'..=b'~').contains(&byte)) {
        return Reply::error("Client names cannot contain spaces, newlines or special characters.");
    }
    session.name = (!name.is_empty()).then_some(name);
    Reply::Simple("OK")
}
