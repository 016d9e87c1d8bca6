//! [`Decide`]: one check on Redis, from the blocked-key cache to the failure mode, with the
//! lease it may carry ([`Store::check_and_lease`](sluice_core::Store::check_and_lease)).
//!
//! A lease is asked in the same script or module command as the check (so it is as atomic
//! as any check, on every server and in Cluster): Redis decides the request with its lease
//! under every limit, and when they do not all allow it, the request alone, in that one
//! call (`lua/single.lua`, `lua/check.lua`), as the memory store does under one lock. Its
//! deadline is Redis's time of the decision (the check's `now`, or Redis `TIME`) plus the
//! lease period. docs/leases.md has the rest.

use super::channel::{Channel, Request};
use super::common::Common;
use super::errors::{Expired, InOutage, is_script_error};
use crate::blocked::{Generation, Now, Remembered};
use crate::cluster::shards::Shard;
use crate::deadline::wall_clock;
use crate::exact_time::lease_is_exact;
use crate::refusal::MetBy;
use crate::script::{Granted, Reply, ScriptCall, decode};
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
    /// every limit can be leased exactly): from the blocked-key cache, from Redis, or from
    /// the failure mode when Redis is known down or fails.
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
        let asked = self.common().blocked.generation();
        let mut reply = match self.evaluate(self.lease()).await {
            Ok(reply) => reply,
            Err(error) => return self.failed(error).map(LeaseAnswer::unleased),
        };
        if let Some(Granted { granted: true, stamps }) = reply.lease.take() {
            let at = Timestamp::from_micros(reply.now);
            let answer = LeaseAnswer::granted(reply.decisions, at).ok_or(StoreError::NoLimits)?;
            return Ok(answer.stamped(stamps));
        }
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

    /// The lease to ask with the request (units, and the period in µs), when one is asked
    /// and may be granted: the request has a cost, every limit can be leased exactly (see
    /// [`LeaseTerms::refusal`](sluice_core::algorithm::LeaseTerms::refusal)), and the
    /// scripts compute exactly up to the lease's deadline.
    fn lease(&self) -> Option<(u64, u64)> {
        let Check { limits, cost, lease, lease_period, .. } = self.check;
        let period = u64::try_from(lease_period.as_micros()).ok()?;
        let now = u64::try_from(self.script_now).ok();
        let leasable = lease > 0
            && cost > 0
            && cost.checked_add(lease).is_some_and(|total| total < sluice_core::EXACT_LIMIT)
            && limits.iter().all(|limit| limit.policy().lease_terms().refusal().is_none())
            && lease_is_exact(now, lease_period, limits);
        leasable.then_some((lease, period))
    }

    /// The rejection the blocked-key cache holds for this check under `id`.
    fn cached(&self, id: &[u8]) -> Option<Verdict> {
        let now = self.check.now.as_micros();
        let now = if self.script_now < 0 { Now::Redis(now) } else { Now::Caller(now) };
        self.common().blocked.lookup(id, now, self.check.cost)
    }

    /// Runs the script (or the module's command) for the check's cost and `lease`: the time
    /// Redis decided at, each limit's decision, and whether the lease was granted.
    async fn evaluate(&self, lease: Option<(u64, u64)>) -> Result<Reply, StoreError> {
        let common = self.common();
        let deadline = common.lead.deadline(wall_clock(), common.settings.timeout);
        let (keys, limits, now, cost) = (&self.keys, self.check.limits, self.script_now, self.check.cost);
        let call = ScriptCall { keys, limits, now, cost, lease, deadline };
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
        let reply = decode(&reply, self.check.limits.len(), lease.is_some())?;
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
