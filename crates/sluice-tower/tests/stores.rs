//! Stores that wrap the memory store: one that forwards `Store::check_ready` keeps the
//! layer's decide-now path (the decision is made in `call`, before the response future is
//! polled); one that does not is awaited, and decides the same.
#![allow(clippy::unwrap_used)]

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use sluice_core::{
    Check, Key, Limit, ManualClock, MemoryStore, RateLimiter, SlidingLog, SlidingLogVariant, Store, StoreError,
    Timestamp, Verdict,
};
use sluice_tower::RateLimitLayer;
use sluice_tower::key::HeaderKey;
use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tower::{Layer, Service, ServiceExt, service_fn};

/// How a wrapper store was asked.
#[derive(Debug, Default)]
struct Calls {
    ready: AtomicUsize,
    awaited: AtomicUsize,
}

/// A memory store behind a wrapper that counts its calls, forwarding `check_ready` or not.
#[derive(Clone, Debug)]
struct Counting {
    inner: MemoryStore,
    calls: Arc<Calls>,
    forwards_ready: bool,
}

impl Store for Counting {
    fn check(&self, check: Check<'_>) -> impl Future<Output = Result<Verdict, StoreError>> + Send {
        self.calls.awaited.fetch_add(1, Ordering::SeqCst);
        self.inner.check(check)
    }

    fn reset(&self, key: Key<'_>, limits: &[Limit]) -> impl Future<Output = Result<(), StoreError>> + Send {
        self.inner.reset(key, limits)
    }

    fn check_ready(&self, check: Check<'_>) -> Option<Result<Verdict, StoreError>> {
        if !self.forwards_ready {
            return None;
        }
        self.calls.ready.fetch_add(1, Ordering::SeqCst);
        self.inner.check_ready(check)
    }
}

type Body = Full<Bytes>;

/// Two requests a minute per `x-user`, on a `Counting` store, in front of a service that
/// answers "ok".
fn limited(
    forwards_ready: bool,
    cost: bool,
) -> (impl Service<Request<Body>, Response = Response<Body>, Error = Infallible>, Arc<Calls>) {
    let calls = Arc::new(Calls::default());
    let store = Counting { inner: MemoryStore::new(), calls: Arc::clone(&calls), forwards_ready };
    let limit = Limit::new("two", SlidingLog::new(2, Duration::from_secs(60), SlidingLogVariant::Accepted).unwrap());
    let limiter = RateLimiter::builder().limit(limit).store(store).clock(ManualClock::default()).build().unwrap();
    let mut layer = RateLimitLayer::from_limiter(limiter, HeaderKey::new(http::HeaderName::from_static("x-user")));
    if cost {
        layer = layer.cost(|_| 1);
    }
    let ok = service_fn(|_: Request<Body>| async { Ok::<_, Infallible>(Response::new(Full::from("ok"))) });
    (layer.layer(ok), calls)
}

fn request() -> Request<Body> {
    Request::get("/").header("x-user", "alice").body(Full::default()).unwrap()
}

/// Sends three requests; returns their statuses and, for each, whether the store had been
/// asked by the time `call` returned (before the response future was polled).
async fn three(
    service: &mut impl Service<Request<Body>, Response = Response<Body>, Error = Infallible>,
    calls: &Calls,
) -> Vec<(u16, usize, usize)> {
    let mut seen = Vec::new();
    for _ in 0..3 {
        let future = service.ready().await.unwrap().call(request());
        let asked = (calls.ready.load(Ordering::SeqCst), calls.awaited.load(Ordering::SeqCst));
        let status = future.await.unwrap().status().as_u16();
        seen.push((status, asked.0, asked.1));
    }
    seen
}

#[tokio::test]
async fn a_store_that_forwards_check_ready_is_decided_in_call() {
    for cost in [false, true] {
        let (mut service, calls) = limited(true, cost);
        // Each request is decided by the time `call` returns, and no check is awaited.
        assert_eq!(three(&mut service, &calls).await, [(200, 1, 0), (200, 2, 0), (429, 3, 0)], "cost function: {cost}");
    }
}

#[tokio::test]
async fn a_store_that_does_not_is_awaited_and_decides_the_same() {
    for cost in [false, true] {
        let (mut service, calls) = limited(false, cost);
        // The check is made in the response future: not yet asked when `call` returns.
        assert_eq!(three(&mut service, &calls).await, [(200, 0, 0), (200, 0, 1), (429, 0, 2)], "cost function: {cost}");
        assert_eq!(calls.awaited.load(Ordering::SeqCst), 3);
    }
}

/// Two layers (two instances) share one store through leases: together they admit exactly
/// the limit, and most of their requests are answered from leased units, in `call`.
#[tokio::test]
async fn two_instances_behind_leases_admit_exactly_the_limit() {
    use sluice_core::lease::LeasedStore;
    use sluice_core::{Alignment, FixedWindow};
    let shared = Arc::new(MemoryStore::new());
    let clock = ManualClock::at(Timestamp::from_micros(60_000_000));
    let window = FixedWindow::new(100, Duration::from_secs(60), Alignment::Aligned, Duration::ZERO).unwrap();
    let instance = |shared: &Arc<MemoryStore>| {
        let store = LeasedStore::new(Arc::clone(shared), Duration::from_millis(100));
        let limiter = RateLimiter::builder()
            .limit(Limit::new("hundred", window.clone()))
            .store(store.clone())
            .clock(clock.clone())
            .build()
            .unwrap();
        let layer = RateLimitLayer::from_limiter(limiter, HeaderKey::new(http::HeaderName::from_static("x-user")));
        let ok = service_fn(|_: Request<Body>| async { Ok::<_, Infallible>(Response::new(Full::from("ok"))) });
        (layer.layer(ok), store)
    };
    let (mut one, one_store) = instance(&shared);
    let (mut two, _) = instance(&shared);
    let mut admitted = 0;
    for i in 0..300 {
        clock.advance(Duration::from_millis(1));
        let service = if i % 2 == 0 { &mut one } else { &mut two };
        let status = service.ready().await.unwrap().call(request()).await.unwrap().status();
        admitted += u32::from(status == 200);
    }
    assert_eq!(admitted, 100);
    assert!(one_store.figures().leased_checks > 25, "{:?}", one_store.figures());
}
