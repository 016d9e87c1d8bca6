//! `sluice simulate`: replays a trace through a real store with injected time.

use crate::cli::SimulateArgs;
use crate::config::service_file::ServiceConfig;
use crate::config::store_url::StoreChoice;
use crate::micros::micros;
use crate::offline::trace::{TraceRequest, parse_line};
use anyhow::{Context, bail};
use serde::Serialize;
use sluice_core::{Check, Key, Limit, ManualClock, MemoryStore, RetryAfter, Store, Verdict};
use sluice_redis::{RedisSettings, RedisStore};
use std::io::{BufRead, BufWriter, Write};
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// One output line: the decision for one trace request, with the HTTP API's field names
/// (durations in whole microseconds, named `…_us`).
#[derive(Debug, Serialize)]
struct Line<'a> {
    t: u64,
    key: &'a str,
    cost: u64,
    /// For a peek (cost 0), whether a cost-1 request would pass (docs/semantics.md): the
    /// peek itself changes nothing, which `peek` says.
    allowed: bool,
    /// `true` on a peek's line (cost 0), absent otherwise.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    peek: bool,
    remaining: u64,
    reset_after_us: u64,
    /// `null` when allowed or when the cost can never be allowed.
    retry_after_us: Option<u64>,
    /// The cost is more than the policy can ever allow (as in the HTTP API's answer).
    cost_exceeds_limit: bool,
    delay_us: u64,
    policy: &'a str,
}

/// Runs the simulator on standard input and output.
pub(crate) fn run(args: &SimulateArgs) -> anyhow::Result<ExitCode> {
    let config = ServiceConfig::load(&args.config)?;
    let limits = select(&config, &args.policies)?;
    let store = StoreChoice::parse(&args.store).map_err(|message| anyhow::anyhow!("--store: {message}"))?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let stdin = std::io::stdin().lock();
    let mut stdout = BufWriter::new(std::io::stdout().lock());
    let bad_lines = match runtime.block_on(redis_store(&store)) {
        None => runtime.block_on(replay(stdin, &mut stdout, &limits, &memory_store()))?,
        Some(store) => runtime.block_on(replay(stdin, &mut stdout, &limits, &store?))?,
    };
    stdout.flush().context("cannot write the decisions")?;
    Ok(if bad_lines == 0 { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

/// The limits named on the command line, in that order: policies of the file (a policy
/// file or the service's; Envoy rules are not named, so not chosen here).
pub(crate) fn select(config: &ServiceConfig, names: &[String]) -> anyhow::Result<Vec<Limit>> {
    let mut limits: Vec<Limit> = Vec::new();
    for name in names {
        let Some(index) = config.policy_index(name) else {
            let known: Vec<&str> = config.policies().iter().map(|entry| entry.limit.name()).collect();
            bail!("unknown policy `{name}`; the configuration defines: {}", known.join(", "));
        };
        if limits.iter().any(|chosen| chosen.name() == name) {
            bail!("policy `{name}` is given twice");
        }
        limits.push(config.policies()[index].limit.clone());
    }
    Ok(limits)
}

/// How long a Redis check may take before the simulation stops with an error.
const STORE_TIMEOUT: Duration = Duration::from_secs(5);

/// The embedded store with a clock that never moves: a state may only be dropped by the
/// store's own clock, so with requests carrying their own times the simulator drops
/// nothing (docs/semantics.md).
pub(crate) fn memory_store() -> MemoryStore {
    MemoryStore::builder().clock(ManualClock::default()).max_keys(usize::MAX).max_memory(usize::MAX).build()
}

/// The Redis store `store` names (`None` for the embedded one), with injected time, under a
/// key prefix of its own so every run is fresh.
async fn redis_store(store: &StoreChoice) -> Option<anyhow::Result<RedisStore>> {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_nanos();
    let prefix = format!("sluice-simulate:{nanos:x}-{}:", std::process::id());
    let settings = RedisSettings { key_prefix: prefix, timeout: STORE_TIMEOUT, ..RedisSettings::injected_time() };
    store.connect_redis(settings).await
}

/// Replays every line of `trace` through `store`, writing one JSON line per request;
/// returns the number of bad lines (reported on standard error and skipped).
async fn replay(
    trace: impl BufRead,
    out: &mut impl Write,
    limits: &[Limit],
    store: &impl Store,
) -> anyhow::Result<usize> {
    let mut bad_lines = 0;
    for (index, line) in trace.lines().enumerate() {
        let number = index + 1;
        let line = line.with_context(|| format!("cannot read trace line {number}"))?;
        match parse_line(&line) {
            Ok(None) => {}
            Ok(Some(request)) => {
                let verdict = decide(store, limits, &request).await.with_context(|| format!("trace line {number}"))?;
                write_decision(out, limits, &request, verdict)?;
            }
            Err(message) => {
                eprintln!("sluice: trace line {number}: {message}");
                bad_lines += 1;
            }
        }
    }
    Ok(bad_lines)
}

/// The store's decision on `request`. A verdict the store's failure mode gave without it
/// (Redis unreachable, busy or slower than the timeout) is an error: a simulation prints
/// only what the store decided.
async fn decide(store: &impl Store, limits: &[Limit], request: &TraceRequest<'_>) -> anyhow::Result<Verdict> {
    let key = Key::new(request.key.as_bytes())?;
    let verdict = store.check(Check::new(key, limits, request.time, request.cost)).await?;
    if verdict.source.is_without_store() {
        anyhow::bail!("the store did not decide (unreachable, busy, or slower than {STORE_TIMEOUT:?})");
    }
    Ok(verdict)
}

fn write_decision(
    out: &mut impl Write,
    limits: &[Limit],
    request: &TraceRequest<'_>,
    verdict: Verdict,
) -> anyhow::Result<()> {
    let Verdict { decision, limit, .. } = verdict;
    let line = Line {
        t: request.time.as_micros(),
        key: request.key,
        cost: request.cost,
        allowed: decision.allowed,
        peek: request.cost == 0,
        remaining: decision.remaining,
        reset_after_us: micros(decision.reset_after),
        retry_after_us: decision.retry_after_micros(),
        cost_exceeds_limit: decision.retry_after == Some(RetryAfter::Never),
        delay_us: micros(decision.delay),
        policy: limits[limit].name(),
    };
    serde_json::to_writer(&mut *out, &line)?;
    out.write_all(b"\n").context("cannot write the decisions")
}
