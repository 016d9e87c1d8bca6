//! The dashboard and the replay report in a real browser: Debian's headless Chromium
//! (`support::browser`) against the real `sluice serve` binary.
//!
//! Each test fails if the page logs a console error, throws, or fails to load a file, and
//! saves a screenshot of what it checked under `target/test-artifacts/ui/`.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

mod support;

use serde_json::json;
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use support::browser::{Browser, PATIENCE, artifact, assert_no_errors};
use support::server::{Server, fresh_dir};

const CONFIG: &str = r#"
policies:
  three_per_hour:
    algorithm: sliding_log
    limit: 3
    window: 1h
  api:
    algorithm: token_bucket
    capacity: 100
    refill_amount: 10
    refill_interval: 1s
  burst2:
    algorithm: sliding_log
    limit: 2
    window: 1s
"#;

/// Waits until at least `room` is left in the current minute of the wall clock.
fn wait_for_room_in_the_minute(room: Duration) {
    let into_minute = || SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs_f64() % 60.0;
    while 60.0 - into_minute() < room.as_secs_f64() {
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Sends `count` checks of `key` against `policy` through the HTTP API.
fn send_checks(server: &Server, key: &str, policy: &str, count: usize) {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let client = reqwest::Client::new();
        for _ in 0..count {
            let body = json!({"key": key, "policies": [policy]});
            let response = client.post(server.url("/v1/check")).json(&body).send().await.unwrap();
            assert!(matches!(response.status().as_u16(), 200 | 429), "{}", response.status());
        }
    });
}

fn count(selector: &str) -> String {
    format!("document.querySelectorAll({selector:?}).length")
}

fn cell(policy: &str, field: &str) -> String {
    format!("document.querySelector('#policies tr[data-policy=\"{policy}\"] [data-field=\"{field}\"]')?.textContent")
}

/// A number the live view's per-second chart keeps in its `data-*` attributes.
fn rates(field: &str) -> String {
    format!("Number(document.querySelector('#rate-chart svg')?.dataset.{field})")
}

#[test]
fn the_live_view_lists_the_policies_and_follows_the_checks() {
    let server = Server::start(CONFIG, &[]);
    let mut browser = Browser::launch(1280, 900);
    browser.navigate(&server.url("/ui"));
    browser.wait_for(&format!("{} === 3", count("#policies tr[data-policy]")), "the three policies", PATIENCE);
    assert_eq!(browser.eval(&cell("api", "algorithm")), "token_bucket");
    assert_eq!(browser.eval(&cell("three_per_hour", "allowed")), "0");
    // Each limit with its window, or the bucket's size and rate.
    assert_eq!(browser.eval(&cell("burst2", "limit")), "2 / 1 s");
    assert_eq!(browser.eval(&cell("three_per_hour", "limit")), "3 / 1 h");
    assert_eq!(browser.eval(&cell("api", "limit")), "capacity 100, 10 per 1 s");
    // Five minutes of seconds, none busy yet.
    assert_eq!(browser.eval(&rates("seconds")), 300);
    assert_eq!(browser.eval(&rates("busySeconds")), 0);

    // The top-keys tables show this minute's keys: the checks and the page's look at them
    // fall in one minute (the page refreshes every second).
    wait_for_room_in_the_minute(Duration::from_secs(30));
    send_checks(&server, "browser-user", "three_per_hour", 5);
    let counted =
        format!("{} === '3' && {} === '2'", cell("three_per_hour", "allowed"), cell("three_per_hour", "rejected"));
    browser.wait_for(&counted, "the live view to count 3 allowed and 2 rejected", PATIENCE);
    // Every check counts in its policy's top keys (none is sampled): the 2 rejections
    // and the 3 units consumed, exact while the tables have room.
    let top = |table: &str, field: &str| {
        format!(
            "document.querySelector('#{table} tr[data-policy=\"three_per_hour\"][data-key=\"browser-user\"] \
             [data-field=\"{field}\"]')?.textContent"
        )
    };
    let listed = format!("{} === '2' && {} === '3'", top("top-denied", "count"), top("top-consumed", "count"));
    browser.wait_for(&listed, "browser-user among the top keys of three_per_hour", PATIENCE);
    assert_eq!(browser.eval(&top("top-denied", "error")), "exact");
    // The chart shows whole seconds only: the checks appear once their second is over.
    let charted = format!("{} === 3 && {} === 2", rates("allowedTotal"), rates("rejectedTotal"));
    browser.wait_for(&charted, "the chart to hold the 3 allowed and 2 rejected checks", PATIENCE);
    assert!(browser.eval(&rates("busySeconds")).as_u64().unwrap() >= 1);
    // Issue 36.6: the "last second" readout sits above the plot, where no bar can reach.
    let readout = "(() => { const svg = document.querySelector('#rate-chart svg'); \
                   const label = svg.querySelector('.readout').getBBox(); \
                   const plot = svg.querySelector('rect.plot').getBBox(); \
                   return [label.y + label.height, plot.y, svg.querySelector('.readout').textContent]; })()";
    let readout = browser.eval(readout);
    let (label_bottom, plot_top) = (readout[0].as_f64().unwrap(), readout[1].as_f64().unwrap());
    assert!(label_bottom <= plot_top, "the readout ({label_bottom}) runs into the plot ({plot_top})");
    assert!(readout[2].as_str().unwrap().starts_with("last second: "), "{readout}");
    let ticks = browser.eval("[...document.querySelectorAll('#rate-chart .xtick')].map(t => t.textContent)");
    assert_eq!(ticks, json!(["now", "1 min ago", "2 min ago", "3 min ago", "4 min ago", "5 min ago"]));

    assert_eq!(browser.eval(&cell("three_per_hour", "near_limit")), "3");
    assert_eq!(browser.eval(&cell("three_per_hour", "keys_estimate")), "≈1");
    browser.wait_for(&format!("{} !== '–'", cell("three_per_hour", "rejected_rate")), "a rate", PATIENCE);
    assert_eq!(browser.eval("document.querySelector('#without-store [data-field=\"failed_open\"]').textContent"), "0");
    assert_eq!(browser.eval("document.querySelector('#rlqs [data-field=\"streams\"]').textContent"), "0");
    assert_eq!(browser.eval(STATUS_SHOWN), true, "the live view says when it was updated");
    browser.screenshot(&artifact("live.png"));
    assert_no_errors(&browser);
}

/// Whether the header's "live · updated" status shows.
const STATUS_SHOWN: &str = "getComputedStyle(document.getElementById('status')).display !== 'none'";

/// Dots of the sliding log's lane: all of them, or the allowed or blocked ones.
fn dots(kind: &str) -> String {
    count(&format!("#lane-sliding_log .dot{kind}"))
}

#[test]
fn the_playground_shows_allowed_dots_then_a_blocked_one_from_the_real_algorithms() {
    let server = Server::start(CONFIG, &[]);
    let mut browser = Browser::launch(1280, 900);
    browser.navigate(&server.url("/ui#playground"));
    // It opens with the example stream drawn, each lane with its quota line and scale.
    let example = format!("{} === 2 && {} === 11", count("#lanes .lane"), dots(""));
    browser.wait_for(&example, "the example stream in the sliding log and window lanes", PATIENCE);
    // Issue 36.6: the live view's "live · updated" is not shown over the playground.
    assert_eq!(browser.eval(STATUS_SHOWN), false);
    let scale = browser.eval("[...document.querySelectorAll('#lane-sliding_log .level-tick')].map(t => t.textContent)");
    assert_eq!(scale, json!(["0", "1", "2", "3"]));
    browser.screenshot(&artifact("playground-example.png"));

    // The token bucket (3 tokens, 1 more every 500 ms) empties on the burst at 0–400 ms:
    // its first refill comes 500 ms after the first take, and the line steps up there.
    pick_algorithm(&mut browser, "token_bucket");
    let bucket = format!("{} === 1 && {} === 11", count("#lanes .lane"), count("#lane-token_bucket .dot"));
    browser.wait_for(&bucket, "the token bucket lane", PATIENCE);
    let steps = browser.eval("JSON.parse(document.querySelector('#lane-token_bucket .level').dataset.steps)");
    let steps: Vec<(f64, u64)> = serde_json::from_value(steps).unwrap();
    let refill = steps.iter().position(|&(at_ms, _)| at_ms == 500.0).expect("a step at 500 ms");
    assert_eq!((steps[refill - 1].1, steps[refill].1), (0, 1), "{steps:?}");
    // Drawn there too: the line goes straight up at 500 ms.
    let x500 = "(() => { const d = document.querySelector('#lane-token_bucket svg').dataset; \
                return +d.plotLeft + (500 / +d.spanMs) * (+d.plotRight - +d.plotLeft); })()";
    let x500 = browser.eval(x500).as_f64().unwrap();
    let points = browser.eval("document.querySelector('#lane-token_bucket .level').getAttribute('points')");
    let at_refill = points.as_str().unwrap().split(' ').filter(|point| {
        let x: f64 = point.split(',').next().unwrap().parse().unwrap();
        (x - x500).abs() < 1e-6
    });
    assert_eq!(at_refill.count(), 2, "a vertical step at x = {x500}: {points}");
    browser.screenshot(&artifact("playground-refill.png"));
    pick_algorithm(&mut browser, "compare");
    browser.wait_for(&example, "the example stream again", PATIENCE);
    browser.click("#clear");
    browser.wait_for(&format!("{} === 0", dots("")), "an empty stream", PATIENCE);

    // Limit 3 per second, a request every 100 ms: three pass, the fourth is blocked.
    for added in 1..=4 {
        browser.click("#add-request");
        browser.wait_for(&format!("{} === {added}", dots("")), "a dot for the new request", PATIENCE);
    }
    assert_eq!(browser.eval(&dots(".allowed")), 3);
    assert_eq!(browser.eval(&dots(".blocked")), 1);
    assert_eq!(browser.eval("document.querySelectorAll('#lane-sliding_log .dot')[3].dataset.allowed"), "false");
    assert_eq!(browser.eval(&count("#lane-sliding_log rect.window")), 1);

    // A click on the timeline, far right (past the window), adds an allowed request there.
    let point = browser.eval(
        "(() => { const r = document.querySelector('#lane-sliding_log svg').getBoundingClientRect(); \
         return [r.left + r.width * 0.9, r.top + r.height * 0.5]; })()",
    );
    browser.click_at(point[0].as_f64().unwrap(), point[1].as_f64().unwrap());
    browser.wait_for(
        &format!("{} === 5 && {} === 4", dots(""), dots(".allowed")),
        "an allowed dot at the click",
        PATIENCE,
    );

    // With a limit of 4, the fourth request passes too: the server decided again.
    browser.eval(
        "(() => { const limit = document.getElementById('limit'); limit.value = '4'; \
                  limit.dispatchEvent(new Event('input', {bubbles: true})); })()",
    );
    browser.wait_for(&format!("{} === 0", dots(".blocked")), "no blocked dot at limit 4", PATIENCE);
    browser.eval(
        "(() => { const limit = document.getElementById('limit'); limit.value = '3'; \
                  limit.dispatchEvent(new Event('input', {bubbles: true})); })()",
    );
    browser.wait_for(&format!("{} === 1", dots(".blocked")), "the blocked dot back at limit 3", PATIENCE);
    browser.click("#add-burst");
    browser.wait_for(&format!("{} === 10", dots("")), "five more dots", PATIENCE);
    browser.screenshot(&artifact("playground.png"));

    // Three requests late in the first second, one in the middle of the next: the exact log
    // still holds the three; the approximated window weighs them by half and lets it pass.
    browser.click("#clear");
    browser.wait_for(&format!("{} === 0", dots("")), "an empty stream", PATIENCE);
    for (at_ms, total) in [(700, 1), (800, 2), (900, 3), (1500, 4)] {
        click_timeline(&mut browser, at_ms);
        browser.wait_for(&format!("{} === {total}", dots("")), "a dot where the timeline was clicked", PATIENCE);
    }
    assert_eq!(browser.eval(&dots(".blocked")), 1);
    assert_eq!(browser.eval(&count("#lane-sliding_window .dot.blocked")), 0);
    assert_eq!(browser.eval(&count("#lane-sliding_window rect.differ")), 1);
    // Issue 36.6: the band is one colour inside the window box and out: opaque, and drawn
    // over the translucent box (here it straddles the box's edge).
    let band = "(() => { const lane = document.querySelector('#lane-sliding_window'); \
                const band = lane.querySelector('rect.differ'), box = lane.querySelector('rect.window'); \
                const b = band.getBBox(), w = box.getBBox(), style = getComputedStyle(band); \
                return { overlaps: b.x < w.x + w.width && b.x + b.width > w.x, band: [b.x, b.width], box: [w.x, w.width], \
                         after: !!(box.compareDocumentPosition(band) & Node.DOCUMENT_POSITION_FOLLOWING), \
                         fill: style.fill, opacity: style.opacity + ' ' + style.fillOpacity }; })()";
    let band = browser.eval(band);
    let drawn = (&band["overlaps"], &band["after"], &band["opacity"]);
    assert_eq!(drawn, (&json!(true), &json!(true), &json!("1 1")), "{band}");
    assert!(band["fill"].as_str().unwrap().starts_with("rgb("), "an opaque fill: {band}");
    let summary = browser.eval("document.getElementById('playground-summary').textContent");
    assert!(summary.as_str().unwrap().ends_with("differ on 1"), "{summary}");
    browser.screenshot(&artifact("playground-differ.png"));

    // The buckets decide the same stream in a lane of their own.
    for algorithm in ["token_bucket", "leaky_bucket", "fixed_window"] {
        pick_algorithm(&mut browser, algorithm);
        let lane = format!("#lanes .lane[data-algorithm=\"{algorithm}\"]");
        let drawn = format!("{} === 1 && {} === 4", count("#lanes .lane"), count(&format!("{lane} .dot")));
        browser.wait_for(&drawn, &format!("the {algorithm} lane"), PATIENCE);
        if algorithm == "token_bucket" {
            browser.screenshot(&artifact("playground-token-bucket.png"));
        }
    }
    assert_no_errors(&browser);
}

/// The example stream (limit 3 per second) under `attempts`: the blocked requests at 300 and
/// 400 ms are logged too, so the log stays full through 1.8 s (6 blocked, against 3 when
/// only allowed requests count); the sliding window counts them too (7 blocked, against 5:
/// at 2.7 s the 4 attempts of the second before still weigh 4 × 0.3).
#[test]
fn the_playground_counts_every_attempt_when_asked() {
    let server = Server::start(CONFIG, &[]);
    let mut browser = Browser::launch(1280, 900);
    browser.navigate(&server.url("/ui#playground"));
    let example = format!("{} === 11 && {} === 3", dots(""), dots(".blocked"));
    browser.wait_for(&example, "the example stream, counting allowed requests", PATIENCE);
    browser.eval(
        "(() => { const variant = document.getElementById('variant'); variant.value = 'attempts'; \
                  variant.dispatchEvent(new Event('input', {bubbles: true})); })()",
    );
    browser.wait_for(&format!("{} === 6", dots(".blocked")), "six blocked requests under attempts", PATIENCE);
    assert_eq!(browser.eval(&count("#lane-sliding_window .dot.blocked")), 7);
    browser.screenshot(&artifact("playground-attempts.png"));
    assert_no_errors(&browser);
}

/// Chooses `algorithm` in the playground's picker, as a user would.
fn pick_algorithm(browser: &mut Browser, algorithm: &str) {
    browser.eval(&format!(
        "(() => {{ const picker = document.getElementById('algorithm'); picker.value = '{algorithm}'; \
         picker.dispatchEvent(new Event('change', {{bubbles: true}})); }})()"
    ));
}

/// Clicks the sliding log's timeline at `at_ms`.
fn click_timeline(browser: &mut Browser, at_ms: u32) {
    let point = browser.eval(&format!(
        "(() => {{ const svg = document.querySelector('#lane-sliding_log svg'); const d = svg.dataset; \
         const r = svg.getBoundingClientRect(); \
         const x = +d.plotLeft + ({at_ms} / +d.spanMs) * (+d.plotRight - +d.plotLeft); \
         return [r.left + (x / svg.viewBox.baseVal.width) * r.width, r.top + r.height * 0.5]; }})()"
    ));
    browser.click_at(point[0].as_f64().unwrap(), point[1].as_f64().unwrap());
}

#[test]
fn the_replay_report_charts_requests_per_second_at_the_logs_offset() {
    let dir = fresh_dir("report");
    let (log, report) = (dir.join("access.log"), dir.join("report.html"));
    // 1500 seconds from 13:30:00 -0700: more than the chart's 1000 buckets, so a bucket is
    // 2 s. Each second 10.0.0.1 sends one to four requests (1 + second % 4) and 10.0.0.2
    // one: the busiest bucket holds 4 + 5 = 9 requests, 4.5 per second.
    let mut lines = String::new();
    for second in 0..1500 {
        let time = format!(
            "10/Oct/2000:{:02}:{:02}:{:02} -0700",
            13 + (30 + second / 60) / 60,
            (30 + second / 60) % 60,
            second % 60
        );
        for client in std::iter::repeat_n(1, 1 + second % 4).chain([2]) {
            lines += &format!("10.0.0.{client} - - [{time}] \"GET /a HTTP/1.1\" 200 5 \"-\" \"curl\"\n");
        }
    }
    std::fs::write(&log, lines).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args([
            "replay",
            "--config",
            "tests/fixtures/replay.yaml",
            "--policy",
            "two_per_second",
            "--policy",
            "one_per_second",
        ])
        .arg("--report")
        .args([&report, &log])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));

    let mut browser = Browser::launch(1280, 900);
    browser.navigate(&format!("file://{}", report.display()));
    browser.wait_for(&format!("{} === 2", count("svg[data-chart]")), "the report's two charts", PATIENCE);
    let chart = "document.querySelector('svg[data-chart]')";
    assert_eq!(browser.eval(&format!("{chart}.querySelector('.ylabel').textContent")), "requests per second");
    assert_eq!(browser.eval(&format!("{chart}.dataset.bucketSeconds")), "2");
    // The axis's top is the data's peak rate, labelled as such.
    assert_eq!(browser.eval(&format!("Number({chart}.dataset.peak)")), 4.5);
    let max_tick = browser.eval(&format!("{chart}.querySelector('.ytick.max').textContent"));
    assert_eq!(max_tick, "4.5");
    // Issue 46.5: the round 4 was drawn 10 px under the peak's 4.5, crowding it.
    assert_rate_labels_clear(&mut browser, chart, "4.5");
    let caption = browser.eval("document.querySelector('.caption').textContent");
    assert!(caption.as_str().unwrap().contains("averaged over 2 s buckets"), "{caption}");
    // Two filled outlines over one background: no bar per bucket, whose sub-pixel gaps
    // drew light and dark bands that looked like data.
    assert_eq!(browser.eval(&format!("{chart}.querySelectorAll('rect').length")), 1);
    assert_eq!(browser.eval(&format!("{chart}.querySelectorAll('path.allowed, path.rejected').length")), 2);

    // Times at the log's own offset: the axis starts at 13:30, not 20:30 UTC.
    let ticks = browser.eval(&format!("[...{chart}.querySelectorAll('.xtick')].map(t => t.textContent)"));
    assert_eq!(ticks.as_array().unwrap().first().unwrap(), "13:30", "{ticks}");
    let offset = browser.eval("document.getElementById('offset').textContent");
    assert!(offset.as_str().unwrap().contains("UTC-07:00"), "{offset}");
    let meta = browser.eval("document.getElementById('meta').textContent");
    assert!(meta.as_str().unwrap().contains("2000-10-10T13:30:00-07:00 to 2000-10-10T13:54:59-07:00"), "{meta}");
    // Each policy's parameters.
    let described = browser.eval("[...document.querySelectorAll('[data-field=\"policy\"]')].map(t => t.textContent)");
    assert_eq!(described, json!(["sliding_log, 2 / 1 s", "fixed_window, 1 / 1 s"]));
    // The limited key's timeline under each policy.
    assert!(browser.eval(&count("#policies svg")).as_u64().unwrap() >= 4);
    browser.screenshot(&artifact("report.png"));
    assert_no_errors(&browser);
}

/// Asserts that `chart`'s rate labels, top to bottom, start with the peak's `peak` and
/// are each at least a label's height clear of the next.
fn assert_rate_labels_clear(browser: &mut Browser, chart: &str, peak: &str) {
    let labels = browser.eval(&format!(
        "[...{chart}.querySelectorAll('.ytick')].map(t => {{ const b = t.getBBox(); return [t.textContent, b.y, b.y + b.height]; }})\
         .sort((a, b) => a[1] - b[1])"
    ));
    let labels = labels.as_array().unwrap();
    assert_eq!(labels[0][0], peak, "{labels:?}");
    assert!(labels.len() >= 3, "the peak, and round steps down to 0: {labels:?}");
    for pair in labels.windows(2) {
        let height = pair[0][2].as_f64().unwrap() - pair[0][1].as_f64().unwrap();
        let gap = pair[1][1].as_f64().unwrap() - pair[0][2].as_f64().unwrap();
        assert!(gap >= height, "labels {} and {} are {gap:.1} px apart: {labels:?}", pair[0][0], pair[1][0]);
    }
}

/// A combined-format line of `client` at `second` past 13:30:00 -0700.
fn log_line(client: u8, second: u32, request: &str) -> String {
    let (minute, second) = (30 + second / 60, second % 60);
    let time = format!("10/Oct/2000:{:02}:{:02}:{second:02} -0700", 13 + minute / 60, minute % 60);
    format!("10.0.0.{client} - - [{time}] \"{request} HTTP/1.1\" 200 5 \"-\" \"curl\"\n")
}

/// Issue 36.6: a filtered report says it is filtered and explains late lines; the key
/// timelines use the main chart's time scale and have a time axis; the peak's label does
/// not crowd the round one under it; one green everywhere.
#[test]
fn a_filtered_report_says_so_and_its_charts_line_up() {
    let dir = fresh_dir("filtered-report");
    let (log, report) = (dir.join("access.log"), dir.join("report.html"));
    // 1500 s, so 2 s buckets. 10.0.0.1 sends one GET /a a second; 10.0.0.3 eleven more at
    // 100 s: that bucket holds 13, a peak of 6.5/s, just above the round 6. One line is
    // late (150 s after 200 s), five are POST /b, which `--path /a` leaves out; 10.0.0.4
    // sends four at 400 s, so that two keys are limited.
    let mut lines = String::new();
    for second in 0..1500 {
        lines += &log_line(1, second, "GET /a");
        if second == 100 {
            lines += &log_line(3, second, "GET /a").repeat(11);
        }
        if second == 200 {
            lines += &log_line(4, 150, "GET /a");
        }
        if second == 300 {
            lines += &log_line(5, second, "POST /b").repeat(5);
        }
        if second == 400 {
            lines += &log_line(4, second, "GET /a").repeat(4);
        }
    }
    std::fs::write(&log, lines).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["replay", "--config", "tests/fixtures/replay.yaml", "--policy", "two_per_second", "--path", "/a"])
        .arg("--report")
        .args([&report, &log])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));

    let mut browser = Browser::launch(1280, 900);
    browser.navigate(&format!("file://{}", report.display()));
    browser.wait_for(&format!("{} === 1", count("svg[data-chart]")), "the report's chart", PATIENCE);
    let filter = browser.eval("document.getElementById('filter').textContent");
    assert_eq!(
        filter,
        "Filtered (path starts with /a): only the 1516 requests selected were replayed; 5 others were not."
    );
    let late = browser.eval("document.getElementById('late').textContent");
    assert!(late.as_str().unwrap().starts_with("Late lines: 1 line was older than a line before them"), "{late}");

    let chart = "document.querySelector('svg[data-chart]')";
    assert_eq!(browser.eval(&format!("Number({chart}.dataset.peak)")), 6.5);
    assert_rate_labels_clear(&mut browser, chart, "6.5");

    // Each key's timeline spans the main chart's plot, pixel for pixel; the last has the
    // main chart's time ticks under it.
    let plot = |svg: &str| {
        format!(
            "(() => {{ const r = {svg}.querySelector('rect.plot').getBoundingClientRect(); return [r.left, r.right]; }})()"
        )
    };
    let main_plot = browser.eval(&plot(chart));
    let timelines = browser.eval(&count("svg[data-key-rank]")).as_u64().unwrap();
    assert!(timelines >= 2, "{timelines} key timelines");
    for rank in 1..=timelines {
        let key_plot = browser.eval(&plot(&format!("document.querySelector('svg[data-key-rank=\"{rank}\"]')")));
        assert_eq!(key_plot, main_plot, "key #{rank}'s timeline against the main chart");
    }
    let ticks = |svg: &str| {
        format!("[...{svg}.querySelectorAll('.xtick')].map(t => [t.textContent, t.getBoundingClientRect().left])")
    };
    // Issue 46.5: each timeline is labelled with its key (it read `#1`), whole on hover.
    let labels = browser.eval(
        "[...document.querySelectorAll('svg[data-key-rank]')].map(s => { const t = s.querySelector('.key-label'); \
          return [t.lastChild.textContent, t.querySelector('title').textContent]; })",
    );
    assert_eq!(labels, json!([["10.0.0.3", "10.0.0.3"], ["10.0.0.4", "10.0.0.4"]]));
    let last = format!("document.querySelector('svg[data-key-rank=\"{timelines}\"]')");
    assert_eq!(browser.eval(&ticks(&last)), browser.eval(&ticks(chart)));
    assert_eq!(browser.eval(&count("svg[data-key-rank=\"1\"] .xtick")), 0, "one axis, under the last");

    // One green: every allowed outline and the legend's swatch.
    let greens = browser.eval(
        "[...new Set([...document.querySelectorAll('path.allowed')].map(p => getComputedStyle(p).fill)\
          .concat(getComputedStyle(document.querySelector('.legend .allowed')).backgroundColor))]",
    );
    assert_eq!(greens, json!(["rgb(22, 163, 74)"]), "the dashboard's green");
    browser.screenshot(&artifact("report-filtered.png"));
    assert_no_errors(&browser);
}
