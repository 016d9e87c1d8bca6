//! `sluice`: the rate limiter's command-line entry point.

/// mimalloc rather than the system allocator: a check makes a few dozen short-lived
/// allocations (hyper, axum, serde), and mimalloc serves them in about half the time
/// (`docs/benchmarks.md`, "Service").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    sluice_server::run()
}
