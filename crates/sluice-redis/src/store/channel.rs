//! One connection to Redis and its health: what a store's clones share, and what a probe
//! watches while Redis does not answer.

use super::common::Common;
use super::errors::{cause_of, describe, within};
use super::origin::OnDisconnect;
use super::origin::{CONNECT_TIMEOUT, Origin};
use crate::deadline::wall_clock;
pub(super) use crate::failure::PROBE_INTERVAL;
use crate::health::{Cause, Link};
use crate::refusal::MetBy;
use crate::settings::ModuleUse;
use crate::store::standalone::{Standalone, is_demoted};
use crate::store::standalone_connection::StandaloneConnection;
use arc_swap::ArcSwapOption;
use redis::FromRedisValue;
use redis::aio::ConnectionLike;
use redis::cluster_async::ClusterConnection;
use sluice_core::StoreError;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

/// How long a probe waits for Redis. Longer than a check's timeout: a probe sent to a
/// stalled Redis is answered the moment it resumes, which ends the outage at once.
pub(super) const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// How long a new connection may wait for its first probe to end before it is used
/// anyway: connecting (2 s), the probe (1 s), once more after a broken connection (1 s).
const FIRST_PROBE_LIMIT: Duration = Duration::from_secs(5);

/// A connection, its health, and what every connection of the store shares.
pub(crate) struct Channel {
    pub(super) connection: Connection,
    pub(super) link: Link,
    pub(super) common: Arc<Common>,
    /// True once the first probe ended: Redis answered, or is known down.
    probed: tokio::sync::watch::Sender<bool>,
}

/// The connection itself; either may not be made yet (a store opened while Redis was down).
pub(super) enum Connection {
    /// Replaced after a failover: see [`standalone`](super::standalone).
    Standalone(Standalone),
    Cluster(ArcSwapOption<ClusterConnection>),
}

/// What to send on a connection.
#[derive(Clone, Copy)]
pub(super) enum Request<'a> {
    Script(&'a redis::ScriptInvocation<'a>),
    Command(&'a redis::Cmd),
}

impl Request<'_> {
    async fn run<T: FromRedisValue, C: ConnectionLike + Send>(self, mut connection: C) -> redis::RedisResult<T> {
        match self {
            Request::Script(invocation) => invocation.invoke_async(&mut connection).await,
            Request::Command(command) => command.query_async(&mut connection).await,
        }
    }
}

/// What a connection's previous probe found, which decides how the next one connects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Previously {
    /// No probe failed just before (none ran, or it was answered): the connection in
    /// place is asked.
    Answered,
    /// The previous probe failed, for this cause.
    Failed(Cause),
}

/// Why there is no connection to send on: the store was opened while Redis could not be
/// reached, and no probe has connected yet.
#[derive(Debug, thiserror::Error)]
#[error("not connected to Redis yet")]
pub(crate) struct NotConnected;

impl Channel {
    /// A channel to `common`'s Redis: a standalone connection is made lazily (its first
    /// command connects), a Cluster's and a Sentinel primary's by the first probe. A probe
    /// starts at once: it samples Redis's clock, and finds out whether Redis answers.
    /// While the store is in an outage, the channel starts down.
    pub(super) fn open(common: Arc<Common>) -> Result<Arc<Channel>, StoreError> {
        let connection = match common.origin {
            Origin::Standalone(_) | Origin::Tls(_) | Origin::Sentinel(_) => {
                Connection::Standalone(Standalone::default())
            }
            Origin::Cluster(_) => Connection::Cluster(ArcSwapOption::empty()),
        };
        let probed = tokio::sync::watch::Sender::new(false);
        let channel = Arc::new(Channel { connection, link: Link::default(), common, probed });
        if let (Connection::Standalone(standalone), Origin::Standalone(_)) =
            (&channel.connection, &channel.common.origin)
        {
            standalone.set(channel.common.origin.lazy_standalone(channel.on_disconnect())?);
        }
        if !channel.common.outages.health().is_available() {
            channel.link.fail(&channel.common.outages, "an outage is under way");
        }
        channel.start_probe();
        Ok(channel)
    }

    /// Waits (at most [`FIRST_PROBE_LIMIT`]) until the first probe has ended: from then
    /// on, every check is decided by Redis or, where Redis is known down, by the failure
    /// mode at once; none waits for a connection being made.
    pub(super) async fn first_probe(&self) {
        let mut probed = self.probed.subscribe();
        let _ = tokio::time::timeout(FIRST_PROBE_LIMIT, probed.wait_for(|probed| *probed)).await;
    }

    /// What this channel's connections call when they hear they were disconnected: start a
    /// probe (unless the channel is gone).
    fn on_disconnect(self: &Arc<Self>) -> OnDisconnect {
        let channel = Arc::downgrade(self);
        Arc::new(move || {
            if let Some(channel) = channel.upgrade() {
                channel.start_probe();
            }
        })
    }

    /// Sends `request` (bounded by `limit`), replacing a standalone connection that
    /// answered `READONLY`.
    pub(super) async fn send<T: FromRedisValue>(
        self: &Arc<Self>,
        limit: Duration,
        request: Request<'_>,
    ) -> Result<T, StoreError> {
        let not_connected = || StoreError::Unavailable(Box::new(NotConnected));
        match &self.connection {
            Connection::Standalone(standalone) => {
                if let Origin::Tls(_) = self.common.origin {
                    // Made by the first command that needs it (as redis-rs's own are).
                    within_limit(limit, standalone.connect_if_needed(&self.common.origin, self.on_disconnect()))
                        .await?;
                }
                let used = standalone.current().ok_or_else(not_connected)?;
                let result = within(limit, request.run(StandaloneConnection::clone(&used))).await;
                if let Err(StoreError::Unavailable(cause)) = &result
                    && cause.downcast_ref::<redis::RedisError>().is_some_and(is_demoted)
                {
                    standalone.replace(&used, &self.common.origin, self.on_disconnect());
                }
                result
            }
            Connection::Cluster(current) => {
                let connection = current.load_full().ok_or_else(not_connected)?;
                within(limit, request.run(ClusterConnection::clone(&connection))).await
            }
        }
    }

    /// Records that Redis failed this connection: counted by cause, the link down, a probe
    /// started.
    pub(super) fn fail(self: &Arc<Self>, error: &StoreError) {
        let outages = &self.common.outages;
        outages.count_error(cause_of(error));
        self.common.note_refusal(error, MetBy::Check);
        self.link.fail(outages, &describe(error));
        self.start_probe();
    }

    /// Starts a probe, unless one runs.
    pub(super) fn start_probe(self: &Arc<Self>) {
        if self.link.claim_probe() {
            tokio::spawn(probe(Arc::downgrade(self)));
        }
    }

    /// Asks Redis once (bounded by `limit`): up when it answers, down when it fails. After
    /// a failure (`previously`), a Sentinel's primary is asked for again first, and a
    /// standalone Redis's connection made anew when it was refused or broken.
    /// On a Cluster, answering is reading the topology; then every master is probed, each
    /// marked down on its own when it fails.
    pub(super) async fn probe_once(
        self: &Arc<Self>,
        limit: Duration,
        previously: Previously,
    ) -> Result<(), StoreError> {
        self.connect_if_needed(previously).await?;
        if self.shards().is_some() {
            self.refresh_topology(limit).await?;
            self.probe_masters(limit).await;
        } else {
            self.write_probe(&format!("{}probe", self.common.settings.key_prefix), limit).await?;
        }
        if self.common.settings.module == ModuleUse::Detect {
            self.detect_module(limit).await;
        }
        Ok(())
    }

    /// Runs the probe script on `key` (bounded by `limit`), and samples Redis's clock.
    pub(super) async fn write_probe(self: &Arc<Self>, key: &str, limit: Duration) -> Result<(), StoreError> {
        let invocation = self.common.probe.key(key);
        let redis_time: u64 = self.send(limit, Request::Script(&invocation)).await?;
        self.common.lead.observe(redis_time, wall_clock());
        Ok(())
    }

    /// Asks Redis whether the Sluice module's `SLUICE.CHECK` is there, and records the
    /// answer; a failure (an ACL without `COMMAND INFO`, say) keeps the last answer.
    async fn detect_module(self: &Arc<Self>, limit: Duration) {
        let mut info = redis::cmd("COMMAND");
        info.arg("INFO").arg("SLUICE.CHECK");
        if let Ok(answer) = self.send::<Vec<redis::Value>>(limit, Request::Command(&info)).await {
            let loaded = answer.first().is_some_and(|command| !matches!(command, redis::Value::Nil));
            if self.common.module_loaded.swap(loaded, Ordering::Relaxed) != loaded {
                tracing::info!(
                    module = loaded,
                    "Sluice module {}: checks run as {}",
                    if loaded { "found" } else { "not loaded" },
                    if loaded { "SLUICE.CHECK" } else { "scripts" }
                );
            }
        }
    }

    /// Connects a Cluster's connection if none was made yet (a TLS one is made by `send`),
    /// a standalone one anew when [`needs_new_connection`](Self::needs_new_connection),
    /// and a Sentinel primary's if none was made or the last probe failed (the primary may
    /// have changed).
    async fn connect_if_needed(self: &Arc<Self>, previously: Previously) -> Result<(), StoreError> {
        match (&self.connection, &self.common.origin) {
            (Connection::Cluster(current), Origin::Cluster(client)) if current.load().is_none() => {
                current.store(Some(Arc::new(within(CONNECT_TIMEOUT, client.get_async_connection()).await?)));
            }
            (Connection::Standalone(standalone), Origin::Sentinel(_))
                if previously != Previously::Answered || standalone.current().is_none() =>
            {
                standalone.set(self.common.origin.connect_standalone(self.on_disconnect()).await?);
            }
            (Connection::Standalone(standalone), Origin::Standalone(_)) if self.needs_new_connection(previously) => {
                standalone.set(self.common.origin.connect_standalone(self.on_disconnect()).await?);
            }
            _ => {}
        }
        Ok(())
    }

    /// Whether a standalone Redis is asked on a connection made now rather than on redis-rs's
    /// own: after a refused or broken connection, and after a refusal of the configuration.
    /// redis-rs's connection answers a command with the outcome of its previous attempt to
    /// connect, and only then tries again (in the background): asked once per probe
    /// interval, it would report Redis answering one interval late. It also keeps answering
    /// a refusal met on reconnecting (a password rotated). A connection made now tells at
    /// once whether Redis answers (one attempt, nothing left behind when it fails), and is
    /// the one checks use from then on.
    fn needs_new_connection(&self, previously: Previously) -> bool {
        match previously {
            Previously::Answered => false,
            Previously::Failed(cause) => cause == Cause::Connection || self.common.refusals.current().is_some(),
        }
    }
}

impl Drop for Channel {
    /// A connection that goes while down no longer holds its store's outage open.
    fn drop(&mut self) {
        self.link.forget(&self.common.outages);
    }
}

/// Probes `channel` until Redis answers it (then marks it up) or the store is dropped.
/// The first probe goes at once: a check that failed by chance costs one round trip.
async fn probe(channel: Weak<Channel>) {
    let mut previously = Previously::Answered;
    loop {
        let Some(owner) = channel.upgrade() else { return };
        let mut probed = owner.probe_once(PROBE_TIMEOUT, previously).await;
        if previously == Previously::Answered && probed.as_ref().is_err_and(found_broken) {
            // A broken connection is made again by the command that finds it broken, which
            // fails itself: the next command rides the new connection, without waiting.
            // (After a failure, each probe makes a connection of its own instead.)
            probed = owner.probe_once(PROBE_TIMEOUT, Previously::Answered).await;
        }
        previously =
            probed.as_ref().map_or_else(|error| Previously::Failed(cause_of(error)), |()| Previously::Answered);
        match probed {
            Ok(()) => {
                owner.common.refusals.answered(MetBy::Probe, owner.common.outages.target());
                // Released first: a check failing in between starts a new probe.
                owner.link.release_probe();
                owner.link.recover(&owner.common.outages);
                owner.probed.send_replace(true);
                return;
            }
            Err(error) => {
                owner.common.outages.count_error(cause_of(&error));
                owner.common.note_refusal(&error, MetBy::Probe);
                owner.link.fail(&owner.common.outages, &describe(&error));
                owner.probed.send_replace(true);
            }
        }
        drop(owner);
        tokio::time::sleep(PROBE_INTERVAL).await;
    }
}

/// Awaits `future` for at most `limit`.
async fn within_limit<T>(
    limit: Duration,
    future: impl std::future::Future<Output = Result<T, StoreError>>,
) -> Result<T, StoreError> {
    tokio::time::timeout(limit, future)
        .await
        .unwrap_or_else(|_| Err(StoreError::Unavailable(Box::new(super::errors::TimedOut(limit)))))
}

/// Whether `error` is a command finding its connection broken, which redis-rs then makes
/// again: not a refused connection attempt, which would only be refused again at once (one
/// attempt per probe interval keeps an outage cheap).
fn found_broken(error: &StoreError) -> bool {
    let StoreError::Unavailable(source) = error else { return false };
    cause_of(error) == Cause::Connection
        && source.downcast_ref::<redis::RedisError>().is_some_and(|error| !error.is_connection_refusal())
}
