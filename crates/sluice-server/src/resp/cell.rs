//! Running `CL.THROTTLE` on the service's engine: the arithmetic is [`throttle`]'s, the
//! decision the store's, the count under the call's parameters (bounded labels).
//!
//! [`throttle`]: crate::resp::throttle

use crate::engine::front::Front;
use crate::resp::policies::request_error;
use crate::resp::reply::Reply;
use crate::resp::session::Session;
use crate::resp::throttle::{Plan, Throttle};
use bytes::Bytes;
use sluice_core::Source;

/// `CL.THROTTLE key max_burst count period [quantity]`.
pub(crate) async fn throttle(front: &Front, session: &mut Session, args: &[Bytes]) -> Reply {
    let call = match Throttle::parse(args) {
        Ok(call) => call,
        Err(reply) => return reply,
    };
    let rate = match call.rate() {
        Ok(rate) => rate,
        Err(reply) => return reply,
    };
    let parameters = (call.max_burst, call.count, call.period);
    let plan = match &session.limits {
        Some((cached, plan)) if *cached == parameters => plan.clone(),
        _ => match call.plan(rate) {
            Ok(plan) => {
                session.limits = Some((parameters, plan.clone()));
                plan
            }
            Err(reply) => return reply,
        },
    };
    let fields = match plan {
        Plan::Stateless => call.stateless_reply(rate),
        Plan::Store(limit) => match front.engine.check_limit(&call.key, &limit, call.quantity.unsigned_abs()).await {
            Ok(verdict) if verdict.source == Source::FailedClosed => {
                return Reply::error("store unavailable: the store cannot answer and the failure mode is closed");
            }
            Ok(verdict) => call.reply(rate, &verdict.decision),
            Err(error) => return request_error(&error),
        },
    };
    if call.quantity > 0 {
        front.engine.metrics().throttle(parameters).count(fields[0] == 0, false);
    }
    Reply::Array(fields.into_iter().map(Reply::Integer).collect())
}
