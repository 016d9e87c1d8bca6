//! `sluice simulate`: replays a trace through the real in-memory store with injected time.

use crate::cli::SimulateArgs;
use crate::trace::{TraceRequest, parse_line};
use anyhow::{Context, bail};
use serde::Serialize;
use sluice::{Config, Key, Limit, ManualClock, MemoryStore, Verdict};
use std::io::{BufRead, BufWriter, Write};
use std::process::ExitCode;

/// One output line: the decision for one trace request.
#[derive(Debug, Serialize)]
struct Line<'a> {
    t: u64,
    key: &'a str,
    cost: u64,
    allowed: bool,
    remaining: u64,
    reset_after: u64,
    /// µs; `null` when allowed or when the cost can never be allowed.
    retry_after: Option<u64>,
    delay: u64,
    policy: &'a str,
}

/// Runs the simulator on standard input and output.
pub(crate) fn run(args: &SimulateArgs) -> anyhow::Result<ExitCode> {
    let text = std::fs::read_to_string(&args.config).with_context(|| {
        format!(
            "cannot read the configuration file {}",
            args.config.display()
        )
    })?;
    let config =
        Config::from_yaml(&text).with_context(|| format!("in {}", args.config.display()))?;
    let limits = select(&config, &args.policies)?;
    let stdin = std::io::stdin().lock();
    let mut stdout = BufWriter::new(std::io::stdout().lock());
    let bad_lines = replay(stdin, &mut stdout, &limits)?;
    stdout.flush().context("cannot write the decisions")?;
    Ok(if bad_lines == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// The limits named on the command line, in that order.
fn select(config: &Config, names: &[String]) -> anyhow::Result<Vec<Limit>> {
    let mut limits: Vec<Limit> = Vec::new();
    for name in names {
        let Some(limit) = config.limit(name) else {
            let known: Vec<&str> = config.limits().iter().map(Limit::name).collect();
            bail!(
                "unknown policy `{name}`; the configuration defines: {}",
                known.join(", ")
            );
        };
        if limits.iter().any(|chosen| chosen.name() == name) {
            bail!("policy `{name}` is given twice");
        }
        limits.push(limit.clone());
    }
    Ok(limits)
}

/// Replays every line of `trace`, writing one JSON line per request; returns the number of
/// bad lines (reported on standard error and skipped).
fn replay(trace: impl BufRead, out: &mut impl Write, limits: &[Limit]) -> anyhow::Result<usize> {
    // A clock that never moves: a state may only be dropped by the store's own clock, so
    // with requests carrying their own times the simulator drops nothing (SPEC.md).
    let store = MemoryStore::builder()
        .clock(ManualClock::default())
        .max_keys(usize::MAX)
        .build();
    let mut bad_lines = 0;
    for (index, line) in trace.lines().enumerate() {
        let number = index + 1;
        let line = line.with_context(|| format!("cannot read trace line {number}"))?;
        match parse_line(&line) {
            Ok(None) => {}
            Ok(Some(request)) => write_decision(out, &store, limits, &request)?,
            Err(message) => {
                eprintln!("sluice: trace line {number}: {message}");
                bad_lines += 1;
            }
        }
    }
    Ok(bad_lines)
}

fn write_decision(
    out: &mut impl Write,
    store: &MemoryStore,
    limits: &[Limit],
    request: &TraceRequest<'_>,
) -> anyhow::Result<()> {
    let key = Key::new(request.key.as_bytes())?;
    let Verdict { decision, limit } = store.check_now(key, limits, request.time, request.cost)?;
    let line = Line {
        t: request.time.as_micros(),
        key: request.key,
        cost: request.cost,
        allowed: decision.allowed,
        remaining: decision.remaining,
        reset_after: micros(decision.reset_after),
        retry_after: decision.retry_after_micros(),
        delay: micros(decision.delay),
        policy: limits[limit].name(),
    };
    serde_json::to_writer(&mut *out, &line)?;
    out.write_all(b"\n").context("cannot write the decisions")
}

fn micros(duration: std::time::Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}
