//! From a command's name to its handler. Names are matched in any case; the arity is
//! checked here, as Redis checks it, before a handler runs.

use crate::engine::front::Front;
use crate::resp::frame::Command;
use crate::resp::reply::Reply;
use crate::resp::session::Session;
use crate::resp::table::COMMANDS;
use crate::resp::{cell, handshake, introspection, policies};

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
