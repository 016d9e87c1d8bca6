//! The layer's overhead per request: one axum route driven in-process with `oneshot`,
//! without a limiter, behind `sluice-tower`, and behind `tower_governor` (the same peer-IP
//! key and one GCRA policy that never rejects, over 256 clients), each with and without
//! rate-limit fields on allowed responses.
//!
//! `cargo bench -p sluice-tower --bench overhead`

#[path = "support/apps.rs"]
mod apps;

use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;
use std::sync::atomic::AtomicU32;
use std::time::Duration;
use tower::ServiceExt;

fn overhead(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
    let mut group = c.benchmark_group("overhead");
    for (name, app) in apps::apps() {
        let counter = AtomicU32::new(0);
        group.bench_function(name, |b| {
            b.to_async(&runtime).iter(|| {
                let app = app.clone();
                let request = apps::request(&counter);
                async move {
                    let response = app.oneshot(request).await.expect("infallible");
                    assert!(response.status().is_success());
                    black_box(response)
                }
            });
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(6)).warm_up_time(Duration::from_secs(1));
    targets = overhead
}
criterion_main!(benches);
