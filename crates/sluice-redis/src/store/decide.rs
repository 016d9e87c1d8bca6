//! [`Decide`]: one check on Redis, from the blocked-key cache to the failure mode, with the
//! lease it may carry ([`Store::check_and_lease`](sluice_core::Store::check_and_lease)).
//!
//! A lease is the store's ordinary check with the cost `cost + lease`, in the same script
//! or module command (so it is as atomic as any check, on every server and in Cluster).
//! When it does not fit every limit, the request's own cost is then decided alone, as a
//! plain check decides it: limits that can be leased record nothing on a rejection, so the
//! first attempt left no trace. docs/leases.md has the rest.

use super::channel::{Channel, Request};
use super::common::Common;
use super::errors::{Expired, InOutage, is_script_error};
use crate::blocked::{Generation, Now, Remembered};
use crate::cluster::shards::Shard;
use crate::deadline::wall_clock;
use crate::refusal::MetBy;
use crate::script::{Reply, ScriptCall, decode};
use sluice_core::algorithm::LeaseTerms;
use sluice_core::{Check, LeaseAnswer, StoreError, Timestamp, Verdict};
use std::sync::Arc;

/// One check on Redis: what it asks, where, and at what time the script decides.
pub(super) struct Decide<'s, 'c> {
    channel: &'s Arc<Channel>,
    check: Check<'c>,
    /// The state keys, one per limit.
    keys: Vec<Vec<u8>>,
    /// The Cluster master that serves the keys' slot; `None` for another origin, or before
    /// the topology is known.
    master: Option<Arc<Shard>>,
    /// The time the script gets (-1: Redis `TIME`).
    script_now: i64,
}

impl<'s, 'c> Decide<'s, 'c> {
    /// `check` on `channel`.
    ///
    /// # Errors
    ///
    /// [`StoreError::NoLimits`] without limits; [`StoreError::Refused`] when the scripts
    /// cannot compute exactly at the check's time.
    fn new(channel: &'s Arc<Channel>, check: Check<'c>) -> Result<Self, StoreError> {
        if check.limits.is_empty() {
            return Err(StoreError::NoLimits);
        }
        let common = &channel.common;
        let script_now = common.script_now(check.now, check.limits)?;
        let keys = common.state_keys(check.key, check.limits);
        let master = keys.first().and_then(|first| channel.shards().and_then(|shards| shards.for_key(first)));
        Ok(Decide { channel, check, keys, master, script_now })
    }

    fn common(&self) -> &'s Common {
        &self.channel.common
    }

    /// Decides `check` on `channel`, leasing `check.lease` more units when they fit (and
    /// the limits record nothing on a rejection): from the blocked-key cache, from Redis, or
    /// from the failure mode when Redis is known down or fails.
    ///
    /// # Errors
    ///
    /// As [`new`](Self::new); a store error the failure mode does not answer.
    pub(super) async fn decide(channel: &'s Arc<Channel>, check: Check<'c>) -> Result<LeaseAnswer, StoreError> {
        Decide::new(channel, check)?.run().await
    }

    async fn run(self) -> Result<LeaseAnswer, StoreError> {
        let cache_id = self.common().settings.blocked_cache.then(|| self.keys.join(&0u8));
        if let Some(verdict) = cache_id.as_deref().and_then(|id| self.cached(id)) {
            return Ok(LeaseAnswer::unleased(verdict));
        }
        if let Some(outage) = self.known_down() {
            return self.without_redis(outage).map(LeaseAnswer::unleased);
        }
        if let Some(total) = self.lease_total() {
            match self.evaluate(total).await {
                Ok(reply) if reply.decisions.iter().all(|decision| decision.allowed) => {
                    let at = Timestamp::from_micros(reply.now);
                    return LeaseAnswer::granted(reply.decisions, at).ok_or(StoreError::NoLimits);
                }
                Ok(_) => {}
                Err(error) => return self.failed(error).map(LeaseAnswer::unleased),
            }
        }
        let asked = self.common().blocked.generation();
        let reply = match self.evaluate(self.check.cost).await {
            Ok(reply) => reply,
            Err(error) => return self.failed(error).map(LeaseAnswer::unleased),
        };
        let verdict = Verdict::combine(&reply.decisions).ok_or(StoreError::NoLimits)?;
        if let Some(id) = cache_id {
            self.remember(id, asked, &reply, verdict);
        }
        Ok(LeaseAnswer::unleased(verdict))
    }

    /// Remembers Redis's `reply` under `id` in the blocked-key cache (asked at `asked`).
    fn remember(&self, id: Vec<u8>, asked: Generation, reply: &Reply, verdict: Verdict) {
        // A state whose time was later than `now` decided at that time: its answer does not
        // age with `now`, so it is not cached.
        let cached = reply.unclamped.then_some(verdict);
        let Check { limits, now, cost, .. } = self.check;
        let remembered = Remembered { limits, verdict: cached, decided_at: reply.now, asked_at: now.as_micros(), cost };
        self.common().blocked.remember(id, asked, remembered);
    }

    /// The cost `cost + lease` to ask for, when a lease is asked and may be granted: the
    /// scripts debit leases in a window or bucket only (the leases a store holds apart,
    /// [`LeaseTerms::Held`], are the memory store's).
    fn lease_total(&self) -> Option<u64> {
        let Check { limits, cost, lease, .. } = self.check;
        let debited = |limit: &sluice_core::Limit| matches!(limit.policy().lease_terms(), LeaseTerms::Debited { .. });
        let leasable = lease > 0 && cost > 0 && limits.iter().all(debited);
        cost.checked_add(lease).filter(|_| leasable)
    }

    /// The rejection the blocked-key cache holds for this check under `id`.
    fn cached(&self, id: &[u8]) -> Option<Verdict> {
        let now = self.check.now.as_micros();
        let now = if self.script_now < 0 { Now::Redis(now) } else { Now::Caller(now) };
        self.common().blocked.lookup(id, now, self.check.cost)
    }

    /// Runs the script (or the module's command) for `cost`: the time Redis decided at,
    /// and each limit's decision.
    async fn evaluate(&self, cost: u64) -> Result<Reply, StoreError> {
        let common = self.common();
        let deadline = common.lead.deadline(wall_clock(), common.settings.timeout);
        let call = ScriptCall { keys: &self.keys, limits: self.check.limits, now: self.script_now, cost, deadline };
        let (settings, timeout) = (&common.settings, common.settings.timeout);
        let reply = if common.uses_module() {
            self.channel.send::<Vec<u8>>(timeout, Request::Command(&call.module_command(settings))).await
        } else {
            let invocation = common.scripts.invocation(&call, settings);
            self.channel.send::<Vec<u8>>(timeout, Request::Script(&invocation)).await
        };
        let reply = reply.map_err(|error| match error {
            StoreError::Unavailable(cause) if is_script_error(cause.as_ref()) => {
                StoreError::Malformed(cause.to_string())
            }
            other => other,
        })?;
        if reply.is_empty() {
            return Err(StoreError::Unavailable(Box::new(Expired)));
        }
        let reply = decode(&reply, self.check.limits.len())?;
        common.lead.observe(reply.clock, wall_clock());
        // Redis decided: a refusal a check met is over (a lease's check counts as one).
        common.refusals.answered(MetBy::Check, common.outages.target());
        Ok(reply)
    }

    /// The error to answer with when this connection, or the Cluster master of the key, is
    /// known down (its probe started again, in case its task was dropped); `None` when
    /// Redis is to be asked.
    fn known_down(&self) -> Option<StoreError> {
        if self.channel.link.is_down() {
            self.channel.start_probe();
        } else if let Some(master) = self.master.as_ref().filter(|master| master.link.is_down()) {
            self.channel.start_master_probe(master);
        } else {
            return None;
        }
        Some(StoreError::Unavailable(Box::new(InOutage)))
    }

    /// What a check that Redis failed with `error` answers: the failure recorded (on the
    /// key's Cluster master when there is one, so the other masters' keys still go to
    /// Redis; else on this connection) and the failure mode's verdict, when the error is
    /// transient; the error itself otherwise.
    fn failed(&self, error: StoreError) -> Result<Verdict, StoreError> {
        if !error.is_transient() {
            return Err(error);
        }
        match &self.master {
            Some(master) => self.channel.fail_master(&error, master),
            None => self.channel.fail(&error),
        }
        self.without_redis(error)
    }

    /// The failure mode's verdict (counted, also for the key's Cluster master), or `error`
    /// when it has none.
    fn without_redis(&self, error: StoreError) -> Result<Verdict, StoreError> {
        let common = self.common();
        let degraded = common.settings.failure_mode.decide(&common.fallback, self.check);
        if degraded.is_some() {
            common.outages.count_answered();
            if let Some(master) = &self.master {
                master.outages.count_answered();
            }
        }
        degraded.ok_or(error)
    }
}
