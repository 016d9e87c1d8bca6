//! Running `CL.THROTTLE` on the service's engine: the arithmetic is [`throttle`]'s, the
//! decision the store's, the count under the call's parameters (bounded labels).
//!
//! A call is prepared first, with the connection's state (its cache of plans), then decided
//! without it: so the calls of a pipeline on distinct keys can wait for the store together
//! ([`crate::resp::connection`]).
//!
//! [`throttle`]: crate::resp::throttle

use crate::engine::front::Front;
use crate::resp::policies::request_error;
use crate::resp::reply::Reply;
use crate::resp::session::{Planned, Session};
use crate::resp::throttle::{Plan, Rate, Throttle};
use bytes::Bytes;
use sluice_core::Source;

/// A call ready to be decided.
#[derive(Debug)]
pub(crate) enum Prepared {
    /// Answered already: an error, or a plan that needs no store.
    Answered(Reply),
    /// To be decided by the store.
    Stored { call: Throttle, rate: Rate, planned: Planned },
}

/// `CL.THROTTLE key max_burst count period [quantity]`.
pub(crate) async fn throttle(front: &Front, session: &mut Session, args: &[Bytes]) -> Reply {
    decide(front, prepare(front, session, args)).await
}

/// Reads the call's arguments and finds its plan.
pub(crate) fn prepare(front: &Front, session: &mut Session, args: &[Bytes]) -> Prepared {
    let call = match Throttle::parse(args) {
        Ok(call) => call,
        Err(reply) => return Prepared::Answered(reply),
    };
    let rate = match call.rate() {
        Ok(rate) => rate,
        Err(reply) => return Prepared::Answered(reply),
    };
    let planned = match planned(front, session, &call, rate) {
        Ok(planned) => planned,
        Err(reply) => return Prepared::Answered(reply),
    };
    if let Plan::Stateless = planned.plan {
        let fields = call.stateless_reply(rate);
        count(&call, &planned, fields);
        return Prepared::Answered(integers(fields));
    }
    Prepared::Stored { call, rate, planned }
}

/// The reply to a prepared call.
pub(crate) async fn decide(front: &Front, prepared: Prepared) -> Reply {
    let (call, rate, planned) = match prepared {
        Prepared::Answered(reply) => return reply,
        Prepared::Stored { call, rate, planned } => (call, rate, planned),
    };
    let Plan::Store(limit) = &planned.plan else { return Reply::error("CL.THROTTLE: no limit planned") };
    let fields = match front.engine.check_limit(&call.key, limit, call.quantity.unsigned_abs()).await {
        Ok(verdict) if verdict.source == Source::FailedClosed => {
            return Reply::error("store unavailable: the store cannot answer and the failure mode is closed");
        }
        Ok(verdict) => call.reply(rate, &verdict.decision),
        Err(error) => return request_error(&error),
    };
    count(&call, &planned, fields);
    integers(fields)
}

/// Counts a call that asked for units (a quantity of 0 only reads) under its parameters.
fn count(call: &Throttle, planned: &Planned, fields: [i64; 5]) {
    if call.quantity > 0 {
        planned.counters.count(fields[0] == 0, false);
    }
}

fn integers(fields: [i64; 5]) -> Reply {
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
