//! Runs one stream of `benches/figures.rs` a given number of times, for callgrind to count
//! the instructions of the check path with the per-policy figures on and off, apart from
//! the noise of a shared machine (docs/benchmarks.md, "Per-policy figures").
//!
//! `figures_instructions STREAM FIGURES CHECKS`: STREAM is `hot`, `distinct` or `denied`,
//! FIGURES `on` or `off`. Instructions per check: the difference between two runs (say
//! 200 000 and 100 000 checks) divided by the difference in checks, so that start-up and
//! the stream's set-up cancel out.
#![allow(clippy::unwrap_used, clippy::print_stdout, missing_docs)]

use sluice_server::bench::{CheckPath, Figures};
use std::hint::black_box;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [stream, figures, checks] = args.as_slice() else {
        panic!("usage: figures_instructions hot|distinct|denied on|off CHECKS");
    };
    let figures = if figures == "on" { Figures::On } else { Figures::Off };
    let checks: usize = checks.parse().unwrap();
    let path = CheckPath::new(figures);
    let (policy, count) = match stream.as_str() {
        "hot" => ("roomy", 1),
        "distinct" => ("roomy", 100_000),
        "denied" => ("tight", 1_000),
        other => panic!("unknown stream {other}"),
    };
    let keys: Vec<Vec<u8>> = (0..count).map(|index| format!("key-{index:06}").into_bytes()).collect();
    if policy == "tight" {
        keys.iter().for_each(|key| _ = path.check(policy, key));
    }
    let mut allowed = 0;
    for index in 0..checks {
        allowed += usize::from(path.check(policy, black_box(&keys[index % count])));
    }
    println!("{allowed} of {checks} allowed");
}
