//! What 100 000 RLQS buckets cost the service: one stream reports them (a thousand a
//! report, each a tenant of its own under a 5-per-minute rule, so each is assigned a
//! share), then reports them all every 5 s as Envoy does; the service's CPU time and
//! resident memory are read from `/proc` over 10 s of that. A measurement, not a check: run it with
//! `cargo test -p sluice-server --release --test rlqs_load -- --ignored --nocapture`.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

mod support;

use std::time::{Duration, Instant};
use support::rlqs::{bucket, open, report};
use support::server::Server;

const RULES: &str = include_str!("../../../docs/envoy-rlqs-sluice.yaml");

/// The process's CPU time (user + system) in clock ticks, and resident memory in KiB.
fn usage(pid: u32) -> (u64, u64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat.rsplit(')').next().unwrap().split_whitespace().collect();
    let ticks = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let rss = status.lines().find(|line| line.starts_with("VmRSS:")).unwrap();
    (ticks, rss.split_whitespace().nth(1).unwrap().parse().unwrap())
}

#[tokio::test]
#[ignore = "a measurement: run it on its own, with --release"]
async fn one_hundred_thousand_buckets() {
    let server = Server::start(RULES, &["--max-rlqs-buckets", "100000", "--workers", "1"]);
    let (_, before) = usage(server.pid());
    let ids = |batch: usize| {
        (0..1000).map(move |index| bucket(&[("plan", "free"), ("tenant", &format!("t{batch}-{index}"))]))
    };
    let stream = open(&server, report("quota", &ids(0).collect::<Vec<_>>(), 1)).await;
    let started = Instant::now();
    for batch in 1..100 {
        stream.reports.send(report("quota", &ids(batch).collect::<Vec<_>>(), 1)).await.unwrap();
    }
    let mut answered = 0;
    let mut responses = stream.responses.unwrap();
    while answered < 100_000 {
        let next = tokio::time::timeout(Duration::from_secs(60), responses.message()).await;
        answered += next.unwrap().unwrap().unwrap().bucket_action.len();
    }
    println!("100 000 buckets reported and assigned in {:?}", started.elapsed());
    // As Envoy would, read the renewals meanwhile, and report every 5 s (no request).
    let (ticks, held) = usage(server.pid());
    let reading = tokio::spawn(async move { while let Ok(Some(_)) = responses.message().await {} });
    for _ in 0..2 {
        tokio::time::sleep(Duration::from_secs(5)).await;
        for batch in 0..100 {
            stream.reports.send(report("quota", &ids(batch).collect::<Vec<_>>(), 0)).await.unwrap();
        }
    }
    let (later, _) = usage(server.pid());
    drop(stream.reports);
    reading.abort();
    let hz = 100.0; // USER_HZ on Linux
    println!("resident memory: {} MiB more than at the start", (held - before) / 1024);
    println!("CPU while holding them: {:.1} % of a core", (later - ticks) as f64 / hz / 10.0 * 100.0);
}
