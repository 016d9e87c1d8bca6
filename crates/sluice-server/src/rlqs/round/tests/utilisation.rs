//! How much of a limit Envoys get to use, on steady traffic: the figures the issue of
//! paid-but-unusable top-ups was about, with Envoys modelled as 1.40 behaves.

use super::*;

/// Runs `envoys` Envoys, each sending `per_second` requests a second (spread evenly, each
/// at its own phase), on a 60-per-`window_secs` limit, for `windows` whole windows; the
/// requests let through in each whole window, and by each Envoy over the run.
fn steady(limit: u64, envoys: usize, per_second: u64, windows: u64) -> (Vec<u64>, Vec<u64>) {
    let length = Duration::from_secs(60);
    let window = Windows::new(length).unwrap();
    // Half a window in, as a real start is anywhere in a window.
    let start = Timestamp::from_micros(29_000_000 * 60_000_000 + 30_000_000);
    let budget = Budget { limit, windows: window, clock: ManualClock::at(start), used: Mutex::new(HashMap::new()) };
    let timing = Timing { report_interval: Duration::from_secs(5) };
    let mut sim = Sim::new(budget, envoys, timing, Duration::from_millis(5), true);
    let mut by_envoy = vec![0u64; envoys];
    let step_us = 1_000_000 / per_second / envoys as u64;
    let end = window.end(start).saturating_add(length * u32::try_from(windows).unwrap());
    let mut turn = 0usize;
    while sim.now() < end {
        let next = sim.now().saturating_add(Duration::from_micros(step_us));
        sim.advance_to(next);
        let envoy = turn % envoys;
        let before: u64 = sim.admitted.values().sum();
        sim.requests(envoy, 1);
        by_envoy[envoy] += sim.admitted.values().sum::<u64>() - before;
        turn += 1;
    }
    sim.assert_bounds();
    let first = window.index(window.end(start));
    let per_window = (first..first + windows).map(|index| sim.admitted.get(&index).copied().unwrap_or(0)).collect();
    (per_window, by_envoy)
}

#[test]
fn three_envoys_at_three_times_the_demand_use_at_least_90_percent_of_60_a_minute() {
    let (per_window, _) = steady(60, 3, 1, 4);
    for (index, admitted) in per_window.iter().enumerate() {
        assert!((54..=60).contains(admitted), "window {index}: {admitted} of 60 let through ({per_window:?})");
    }
}

#[test]
fn three_envoys_on_5_a_minute_never_pass_5_and_all_are_served_within_two_windows() {
    let (per_window, by_envoy) = steady(5, 3, 1, 2);
    assert!(per_window.iter().all(|admitted| *admitted <= 5), "{per_window:?}");
    assert!(by_envoy.iter().all(|admitted| *admitted > 0), "an Envoy starved: {by_envoy:?}");
}
