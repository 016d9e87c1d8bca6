//! `SLUICE.CHECK policy[,policy…] key [cost]`, `SLUICE.PEEK policy[,policy…] key` and
//! `SLUICE.RESET key [policy…]`: the HTTP API's check, peek and reset on configured
//! policies, all or nothing. A check answers the HTTP answer's fields, as a RESP3 map (a
//! flat array of names and values in RESP2). A reset follows the HTTP admin rules: with an
//! admin token it needs a connection that presented it (`AUTH`); without one, it answers
//! loopback clients only.

use crate::engine::front::Front;
use crate::engine::{Answer, RequestError};
use crate::http::api::CheckResponse;
use crate::resp::reply::Reply;
use crate::resp::session::Session;
use bytes::Bytes;
use sluice_core::Source;

/// `SLUICE.CHECK policy[,policy…] key [cost]`; the cost is 1 when not given.
pub(crate) async fn check(front: &Front, args: &[Bytes]) -> Reply {
    let cost = match args {
        [_, _] => 1,
        [_, _, cost] => match std::str::from_utf8(cost).ok().and_then(|text| text.parse::<u64>().ok()) {
            Some(cost) => cost,
            None => return Reply::error("cost must be an integer from 0 to 2^64 − 1"),
        },
        _ => return Reply::error("syntax error: SLUICE.CHECK policy[,policy…] key [cost]"),
    };
    decide(front, &args[0], &args[1], cost).await
}

/// `SLUICE.PEEK policy[,policy…] key`: what a cost-1 check would get, consuming nothing.
pub(crate) async fn peek(front: &Front, args: &[Bytes]) -> Reply {
    decide(front, &args[0], &args[1], 0).await
}

async fn decide(front: &Front, policies: &[u8], key: &[u8], cost: u64) -> Reply {
    let names = String::from_utf8_lossy(policies);
    let names: Vec<&str> = names.split(',').collect();
    match front.engine.check(key, &names, cost).await {
        Ok(answer) if answer.source == Source::FailedClosed && !answer.shadow_rejected => {
            Reply::error("store unavailable: the store cannot answer and the failure mode is closed")
        }
        Ok(answer) => answer_map(&answer),
        Err(error) => request_error(&error),
    }
}

/// The HTTP answer's fields, in its order.
fn answer_map(answer: &Answer) -> Reply {
    let fields = CheckResponse::from_outcome(answer);
    let integer = |value: u64| Reply::Integer(i64::try_from(value).unwrap_or(i64::MAX));
    let optional = |value: Option<u64>| value.map_or(Reply::Null, integer);
    Reply::Map(vec![
        ("allowed", Reply::Boolean(fields.allowed)),
        ("policy", Reply::text(fields.policy)),
        ("limit", integer(fields.limit)),
        ("remaining", optional(fields.remaining)),
        ("reset_after_us", integer(fields.reset_after_us)),
        ("retry_after_us", optional(fields.retry_after_us)),
        ("cost_exceeds_limit", Reply::Boolean(fields.cost_exceeds_limit)),
        ("delay_us", integer(fields.delay_us)),
        ("shadow_rejected", Reply::Boolean(fields.shadow_rejected)),
        ("source", Reply::text(fields.source)),
    ])
}

/// `SLUICE.RESET key [policy…]`: every policy when none is named.
pub(crate) async fn reset(front: &Front, session: &Session, args: &[Bytes]) -> Reply {
    if let Some(refusal) = refused(front, session) {
        return refusal;
    }
    let names: Vec<String> = args[1..].iter().map(|name| String::from_utf8_lossy(name).into_owned()).collect();
    match front.engine.reset(&args[0], &names).await {
        Ok(()) => {
            tracing::info!(key = %String::from_utf8_lossy(&args[0]), policies = ?names, "key reset (RESP)");
            Reply::Simple("OK")
        }
        Err(error) => request_error(&error),
    }
}

/// Why `session` may not reset: the HTTP admin endpoints' rules.
fn refused(front: &Front, session: &Session) -> Option<Reply> {
    match &front.service.settings.admin_token {
        Some(_) if session.authenticated => None,
        Some(_) => Some(Reply::Error("NOAUTH SLUICE.RESET needs the admin token: AUTH <token> first".into())),
        None if session.peer.is_loopback() => None,
        None => Some(Reply::Error(
            "NOPERM SLUICE.RESET answers loopback clients only unless an admin token is configured".into(),
        )),
    }
}

/// A request error as a reply: the HTTP API's message.
pub(crate) fn request_error(error: &RequestError) -> Reply {
    Reply::error(error)
}
