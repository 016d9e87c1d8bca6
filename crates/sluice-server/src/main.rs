//! `sluice`: the rate limiter's command-line entry point.

fn main() -> std::process::ExitCode {
    sluice_server::run()
}
