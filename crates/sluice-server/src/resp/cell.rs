//! Running `CL.THROTTLE` on the service's engine: the arithmetic is [`throttle`]'s, the
//! decision the store's, the count under the call's parameters (bounded labels).
//!
//! [`throttle`]: crate::resp::throttle

use crate::engine::front::Front;
use crate::resp::policies::request_error;
use crate::resp::reply::Reply;
use crate::resp::session::{Planned, Session};
use crate::resp::throttle::{Plan, Rate, Throttle};
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
    let Planned { plan, counters, .. } = match planned(front, session, &call, rate) {
        Ok(planned) => planned,
        Err(reply) => return reply,
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
        counters.count(fields[0] == 0, false);
    }
    Reply::Array(fields.into_iter().map(Reply::Integer).collect())
}

/// The plan and counters of `call`'s parameters: the connection's last ones when they are
/// the same (clients call with the same parameters again and again; a limit's identity is
/// a hash, and the counters are shared by every connection), else new ones.
fn planned(front: &Front, session: &mut Session, call: &Throttle, rate: Rate) -> Result<Planned, Reply> {
    let parameters = (call.max_burst, call.count, call.period);
    match &session.planned {
        Some(planned) if planned.parameters == parameters => Ok(planned.clone()),
        _ => {
            let plan = call.plan(rate)?;
            let planned = Planned { parameters, plan, counters: front.engine.metrics().throttle(parameters) };
            session.planned = Some(planned.clone());
            Ok(planned)
        }
    }
}
