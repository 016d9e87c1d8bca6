//! `COMMAND` (with `COUNT`, `INFO` and `DOCS`) and `INFO`: what `redis-cli` and client
//! libraries read to learn the server, in Redis 7's reply shapes.

use crate::engine::front::Front;
use crate::resp::arguments::Arg;
use crate::resp::handshake::REDIS_VERSION;
use crate::resp::reply::Reply;
use crate::resp::session::Session;
use crate::resp::table::{COMMANDS, Spec};
use bytes::Bytes;

/// `COMMAND [COUNT | INFO name… | DOCS [name…]]`.
pub(crate) fn command(args: &[Bytes]) -> Reply {
    let Some(subcommand) = args.first() else { return Reply::Array(COMMANDS.iter().map(info_of).collect()) };
    let named = || args[1..].iter().map(|name| find(name));
    match subcommand.to_ascii_lowercase().as_slice() {
        b"count" => Reply::Integer(COMMANDS.len() as i64),
        b"info" => Reply::Array(named().map(|spec| spec.map_or(Reply::Null, info_of)).collect()),
        b"docs" if args.len() == 1 => Reply::Map(COMMANDS.iter().map(docs_of).collect()),
        b"docs" => Reply::Map(named().flatten().map(docs_of).collect()),
        _ => Reply::error(format!("unknown subcommand '{}'. Try COMMAND HELP.", String::from_utf8_lossy(subcommand))),
    }
}

fn find(name: &[u8]) -> Option<&'static Spec> {
    COMMANDS.iter().find(|spec| spec.name.as_bytes().eq_ignore_ascii_case(name))
}

/// A command as `COMMAND INFO` describes it: name, arity, flags, first key, last key, step,
/// ACL categories, tips, key specifications, subcommands.
fn info_of(spec: &Spec) -> Reply {
    let words = |list: &[&'static str]| Reply::Array(list.iter().map(|word| Reply::Simple(word)).collect());
    let key = spec.first_key;
    Reply::Array(vec![
        Reply::text(spec.name),
        Reply::Integer(spec.arity),
        words(spec.flags),
        Reply::Integer(key),
        Reply::Integer(key),
        Reply::Integer(i64::from(key > 0)),
        Reply::Array(Vec::new()),
        Reply::Array(Vec::new()),
        Reply::Array(Vec::new()),
        Reply::Array(spec.subcommands.iter().map(info_of).collect()),
    ])
}

/// A command's name and its documentation map, as `COMMAND DOCS` lists them: summary,
/// since, group, and the arguments and subcommands it has.
fn docs_of(spec: &'static Spec) -> (&'static str, Reply) {
    let mut docs = vec![
        ("summary", Reply::text(spec.summary)),
        ("since", Reply::text(spec.since)),
        ("group", Reply::text(spec.group)),
    ];
    if !spec.arguments.is_empty() {
        docs.push(("arguments", Reply::Array(spec.arguments.iter().map(argument).collect())));
    }
    if !spec.subcommands.is_empty() {
        docs.push(("subcommands", Reply::Map(spec.subcommands.iter().map(docs_of).collect())));
    }
    (spec.name, Reply::Map(docs))
}

/// An argument's map: name, type, and its token, flags and nested arguments when it has them.
fn argument(arg: &Arg) -> Reply {
    let mut fields = vec![("name", Reply::text(arg.name)), ("type", Reply::text(arg.kind))];
    if let Some(token) = arg.token {
        fields.push(("token", Reply::text(token)));
    }
    if !arg.flags.is_empty() {
        fields.push(("flags", Reply::Array(arg.flags.iter().map(|flag| Reply::Simple(flag)).collect())));
    }
    if !arg.arguments.is_empty() {
        fields.push(("arguments", Reply::Array(arg.arguments.iter().map(argument).collect())));
    }
    Reply::Map(fields)
}

/// `INFO [section…]`: the server section, whatever is asked.
pub(crate) fn info(front: &Front, session: &Session) -> Reply {
    let settings = &front.service.settings;
    let text = format!(
        "# Server\r\nredis_version:{REDIS_VERSION}\r\nsluice_version:{}\r\nredis_mode:standalone\r\n\
         process_id:{}\r\ntcp_port:{port}\r\nstore:{}\r\nconnection_protocol:{}\r\n",
        env!("CARGO_PKG_VERSION"),
        std::process::id(),
        settings.store,
        session.protocol.version(),
        port = session.port,
    );
    Reply::text(text)
}
