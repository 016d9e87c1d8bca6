//! Rate limiting for axum, hyper and tonic services, as a [`tower::Layer`].
//!
//! ```
//! # #[cfg(feature = "axum")] {
//! use axum::{Router, routing::get};
//! use sluice_tower::{Limit, RateLimitLayer, SlidingLog, SlidingLogVariant, key::PeerIp};
//! use std::time::Duration;
//!
//! let hello = Limit::new("hello", SlidingLog::new(5, Duration::from_secs(10), SlidingLogVariant::Accepted)?);
//! let limited = RateLimitLayer::new(hello, PeerIp::new());
//! let app: Router = Router::new().route("/hello", get(|| async { "hi" }).route_layer(limited));
//! # }
//! # Ok::<(), sluice_tower::PolicyError>(())
//! ```
//!
//! This crate is the one dependency an app needs: it re-exports what building a layer
//! takes from the core crate, `sluice-core` (the limits and their algorithms, the
//! [`RateLimiter`], the [`MemoryStore`], the [`Store`] trait, clocks and decisions; the
//! whole crate as [`sluice_core`]), and, with the `redis` feature, the Redis store
//! (`RedisStore`, `RedisSettings`, `FailureMode`; the whole crate as `sluice_redis`).
//!
//! On a route, use `route_layer`: axum's `layer` on a method router also wraps its
//! fallback, so requests of a method the route does not serve would be charged (and
//! answered 429 rather than 405 once the quota is gone). Serve the app with
//! `into_make_service_with_connect_info::<SocketAddr>()` for [`key::PeerIp`] and
//! [`key::ClientIp`]: without it requests carry no peer address, and each is answered 400
//! with a detail (and one log line) saying so.
//!
//! [`RateLimitLayer::new`] takes one policy, in memory, on the system clock. For several
//! policies, another clock (a [`ManualClock`] in tests) or another store (such as a
//! `RedisStore` shared by every instance of the service), build a [`RateLimiter`] with
//! [`RateLimiter::builder`] and give it to [`RateLimitLayer::from_limiter`]: a memory store
//! made by that builder follows the limiter's clock.
//!
//! # Features
//!
//! - `axum` (the one default): peer addresses from axum's `ConnectInfo`, answers in
//!   axum's body.
//! - `tonic`: gRPC answers (`RESOURCE_EXHAUSTED` with a `google.rpc.RetryInfo`), tonic's
//!   body and its `TcpConnectInfo`; without it, gRPC requests get the HTTP answers.
//! - `yaml`: [`Policies`], the named policies of the service's YAML file.
//! - `redis`: the Redis store's re-exports (it brings a Redis client and a TLS stack).
//!
//! An axum app needs the default alone; add `tonic` for a tonic server, `redis` to share
//! limits between instances (`features = ["redis"]`). Without any feature
//! (`default-features = false`) the layer still serves any `tower` HTTP service, hyper's
//! for one, keyed by a `SocketAddr` extension, a header or a closure.
//!
//! # How it works
//!
//! For each request the layer takes a key from the request head (the [`key`] module's
//! extractors, or a closure), checks it against every policy of the layer in one
//! [`Store::check`] (all or nothing: 10 per second *and* 1000 per day), and then:
//!
//! - **allowed**: the inner service answers, and the response gets the IETF
//!   `RateLimit-Policy` and `RateLimit` fields (optionally `X-RateLimit-*`) of the most
//!   restrictive policy ([`headers`]);
//! - **rejected**: the layer answers 429 with `Retry-After` (whole seconds, rounded up,
//!   never 0) and a `problem+json` body (RFC 9457), or, for gRPC requests,
//!   `RESOURCE_EXHAUSTED` with a `google.rpc.RetryInfo` ([`response`]); both can be
//!   replaced with [`RateLimitLayer::on_rejection`];
//! - **shaped** (a leaky bucket in `delay` mode): the request waits its turn on the
//!   layer's clock, at most `burst × interval` (the policy rejects one that would wait
//!   longer, without taking a turn), or less with [`RateLimitLayer::max_delay`];
//! - **no key**: the [`key::MissingKey`] rule rejects it (400 by default) or puts it under
//!   a shared key;
//! - **store failure**: the store's own failure mode decides (the Redis store's `open`,
//!   `closed` or `fallback`); a store that cannot decide at all follows
//!   [`RateLimitLayer::on_store_error`] (503 by default). An outage is answered as one,
//!   not as a spent quota: `closed` gets 503 with `Retry-After` and a `problem+json` body
//!   of type [`response::STORE_UNAVAILABLE_TYPE`], without rate-limit fields (gRPC:
//!   `UNAVAILABLE`). The layer never waits on the store past the store's own timeout.
//!
//! `poll_ready` only forwards to the inner service: a limited key never holds back other
//! keys' requests. The layer answers in the inner service's own body type (see
//! [`response::LayerBody`]), so responses that pass are not wrapped. On a store that
//! decides at once ([`Store::check_ready`]: the memory store, or a store that wraps it and
//! forwards that method) the decision is made inside `call`, without allocating or
//! cloning the inner service; other stores are awaited in the response future.
//!
//! # Trade-offs
//!
//! Forwarding headers are read only behind proxies you declare ([`key::ClientIp`],
//! [`key::TrustedProxies`]), since a client talking directly could write any address there,
//! and only the one your proxies write (`X-Forwarded-For` unless you choose `Forwarded`,
//! [`key::ForwardingHeader`]), since a proxy passes the other on as the client sent it. IPv6 clients are keyed by their /64 by default, since one
//! subscriber usually holds a whole /64.

#![forbid(unsafe_code)]

mod decide;
pub mod future;
pub mod headers;
pub mod key;
mod layer;
mod lease_sweep;
mod outcome;
#[cfg(feature = "yaml")]
mod policies;
pub mod response;
mod service;
mod shared;

pub use layer::RateLimitLayer;
pub use lease_sweep::sweep_in_background;
#[cfg(feature = "yaml")]
pub use policies::{Policies, PolicyLookupError};
pub use service::RateLimit;
pub use shared::OnStoreError;

// What an app takes from the core: limits and their algorithms, the limiter, the stores,
// clocks and decisions.
pub use sluice_core;
pub use sluice_core::{
    Alignment, BuildError, CheckError, Clock, Decision, FixedWindow, Key, KeyError, LeakMode, LeakyBucket, Limit,
    ManualClock, MemoryStore, MemoryStoreBuilder, Policy, PolicyError, RateLimiter, RateLimiterBuilder, RetryAfter,
    SlidingLog, SlidingLogVariant, SlidingWindow, Source, Store, StoreError, SystemClock, Timestamp, TokenBucket,
    TokenBucketSettings, Verdict,
};
// Quota leases: a store in front of the shared one that answers most checks from units it
// leased (docs/leases.md); `sweep_in_background` gives them back when unused.
pub use sluice_core::lease::{LeaseFigures, LeaseRefusal, LeasedStore, NoLease, Unspent, check_leasable, never_leased};
// The error of `Policies`: every problem of a YAML file, each with its path.
#[cfg(feature = "yaml")]
pub use sluice_core::ConfigError;

// The Redis store, shared by every instance of an app.
#[cfg(feature = "redis")]
pub use sluice_redis;
#[cfg(feature = "redis")]
pub use sluice_redis::{FailureMode, RedisSettings, RedisStore};

/// docs/tower.md, whose Rust snippets run as this crate's doctests (they use the `redis`
/// feature), so that the guide compiles against what the crate exports.
#[cfg(all(doctest, feature = "redis"))]
#[doc = include_str!("../../../docs/tower.md")]
pub struct TowerGuide;
