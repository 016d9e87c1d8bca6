//! `sluice`: the rate limiter's command-line entry point.

#![forbid(unsafe_code)]

/// mimalloc rather than the system allocator: a check makes a few dozen short-lived
/// allocations (hyper, axum, serde), where glibc's malloc and free took about 6 % of the
/// server's CPU. Measured at `fce45cc`: 45 644 → 37 176 instructions per HTTP check, and a new
/// key's insert 11.0 → 8.75 µs, for 86.5 → 92.9 bytes per key (`docs/benchmarks.md`, "History").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    sluice_server::run()
}
