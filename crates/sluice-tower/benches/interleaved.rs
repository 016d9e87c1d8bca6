//! The same variants as the `overhead` bench, measured in alternation: rounds of 20 000
//! requests per variant, 30 rounds, the fastest round of each variant kept. On a machine
//! shared with other work, alternating and keeping the minimum cancels most of the noise
//! that sequential measurements pick up.
//!
//! `cargo bench -p sluice-tower --bench interleaved`; `ONLY=<variant>` runs one variant
//! alone (for a profiler: `ONLY=sluice_tower valgrind --tool=callgrind <bench binary>`).
//!
//! Measured with this bench and not kept (the code is in git history): the response future
//! built in place, a 1 KiB digit table, and six other request-path changes, none faster (for
//! example 9 180 instructions per request against 9 144); the allowed response's fields boxed:
//! 22 fewer instructions in one build, 23 more in another (9 088 against 9 065), and one
//! allocation more per allowed response with fields.

#[path = "support/apps.rs"]
mod apps;

use std::sync::atomic::AtomicU32;
use std::time::Instant;
use tower::ServiceExt;

const ROUNDS: usize = 30;
const REQUESTS: u32 = 20_000;

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
    let only = std::env::var("ONLY").ok();
    let apps: Vec<_> =
        apps::apps().into_iter().filter(|(name, _)| only.as_deref().is_none_or(|o| o == *name)).collect();
    let mut fastest = vec![f64::MAX; apps.len()];
    let counter = AtomicU32::new(0);
    for _ in 0..ROUNDS {
        for ((_, app), best) in apps.iter().zip(&mut fastest) {
            let started = Instant::now();
            runtime.block_on(async {
                for _ in 0..REQUESTS {
                    let response = app.clone().oneshot(apps::request(&counter)).await.expect("infallible");
                    assert!(response.status().is_success());
                }
            });
            *best = best.min(started.elapsed().as_nanos() as f64 / f64::from(REQUESTS));
        }
    }
    for ((name, _), best) in apps.iter().zip(&fastest) {
        println!("{name:<24} {best:>6.0} ns/request, overhead {:>4.0} ns", best - fastest[0]);
    }
}
