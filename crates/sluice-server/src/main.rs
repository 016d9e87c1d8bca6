//! `sluice`: the rate limiter's command-line entry point.

/// mimalloc rather than the system allocator: a check makes a few dozen short-lived
/// allocations (hyper, axum, serde), where glibc's malloc and free took about 6 % of the
/// server's CPU. Measured: about 0.3 µs less per hot-key check and 2.2 µs less per new
/// key, for a few bytes more per key (`docs/benchmarks.md`, "History").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    sluice_server::run()
}
