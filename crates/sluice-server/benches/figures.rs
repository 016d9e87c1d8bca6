//! The check path's cost with the per-policy figures (fill ratio, top keys, distinct keys)
//! on and off, in one run: `sluice serve`'s engine on the embedded store, no network.
//!
//! Three streams, each with the figures on and off side by side:
//! - `hot`: one key, allowed (the top-keys table finds it at once);
//! - `distinct`: 100 000 keys in turn, allowed (every check misses the table and replaces
//!   its smallest counter: the table's worst case);
//! - `denied`: 1 000 keys in turn, each denied (the denied table and the fill ratio at 1).
//!
//! `cargo bench -p sluice-server --bench figures` (a minute once built); docs/benchmarks.md
//! records the medians and their ratios.
#![allow(clippy::unwrap_used, missing_docs)]

use criterion::{Criterion, criterion_group, criterion_main};
use sluice_server::bench::{CheckPath, Figures};
use std::hint::black_box;

const DISTINCT: usize = 100_000;
const DENIED: usize = 1_000;

fn keys(count: usize, prefix: &str) -> Vec<Vec<u8>> {
    (0..count).map(|index| format!("{prefix}-{index:06}").into_bytes()).collect()
}

fn figures(c: &mut Criterion) {
    let distinct = keys(DISTINCT, "tenant");
    let denied = keys(DENIED, "abuser");
    let paths = [("off", CheckPath::new(Figures::Off)), ("on", CheckPath::new(Figures::On))];
    for (_, path) in &paths {
        denied.iter().for_each(|key| _ = path.check("tight", key));
    }
    let mut group = c.benchmark_group("check_path");
    // Off and on side by side, stream by stream, so that a slow spell of the machine
    // weighs on both alike.
    for (name, path) in &paths {
        group.bench_function(format!("hot/{name}"), |b| b.iter(|| path.check("roomy", black_box(b"hot-key"))));
    }
    for (name, path) in &paths {
        let mut next = 0;
        group.bench_function(format!("distinct/{name}"), |b| {
            b.iter(|| {
                next = (next + 1) % DISTINCT;
                path.check("roomy", black_box(&distinct[next]))
            });
        });
    }
    for (name, path) in &paths {
        let mut next = 0;
        group.bench_function(format!("denied/{name}"), |b| {
            b.iter(|| {
                next = (next + 1) % DENIED;
                path.check("tight", black_box(&denied[next]))
            });
        });
    }
    group.finish();
}

criterion_group!(benches, figures);
criterion_main!(benches);
