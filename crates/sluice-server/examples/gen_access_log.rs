//! Writes a synthetic nginx combined access log, for measuring `sluice replay`.
//!
//! ```sh
//! cargo run --release -p sluice-server --example gen_access_log -- /tmp/access.log 1000
//! ```
//!
//! The second argument is the size in MB (default 1000). About 2 000 requests per second
//! from 50 000 addresses, a few of them very busy, with one line in 50 written up to two
//! seconds late (nginx logs when the response ends).
#![allow(missing_docs)]

use std::fs::File;
use std::io::{BufWriter, Write};

const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
const PATHS: [&str; 6] = ["/", "/api/v1/items", "/api/v1/items/42", "/login", "/static/app.js", "/search?q=sluice"];
const AGENTS: [&str; 3] = [
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36",
    "curl/8.5.0",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 Mobile/15E148",
];

/// xorshift64*: enough randomness for a benchmark input, with no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// `10/Oct/2000:13:55:36 +0000` for a time in seconds since the epoch (UTC).
fn time_local(seconds: u64) -> String {
    let days = i64::try_from(seconds / 86_400).unwrap_or(0) + 719_468;
    let era = days.div_euclid(146_097);
    let doe = days - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let month_name = MONTHS[usize::try_from(month - 1).unwrap_or(0)];
    let (h, m, s) = (seconds / 3600 % 24, seconds / 60 % 60, seconds % 60);
    format!("{day:02}/{month_name}/{year}:{h:02}:{m:02}:{s:02} +0000")
}

/// An address: one request in four from 20 busy ones, the rest from 50 000.
fn address(rng: &mut Rng) -> String {
    let n = if rng.below(4) == 0 { rng.below(20) } else { 20 + rng.below(50_000) };
    format!("10.{}.{}.{}", n >> 16, (n >> 8) & 255, n & 255)
}

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let path = args.next().unwrap_or_else(|| "/tmp/access.log".to_owned());
    let megabytes: u64 = args.next().and_then(|text| text.parse().ok()).unwrap_or(1000);
    let mut out = BufWriter::with_capacity(1 << 20, File::create(&path)?);
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let (mut written, mut micros) = (0u64, 1_700_000_000_000_000u64);
    while written < megabytes * 1_000_000 {
        micros += rng.below(1000);
        let late = if rng.below(50) == 0 { rng.below(2_000_000) } else { 0 };
        let line = format!(
            "{} - - [{}] \"GET {} HTTP/1.1\" {} {} \"-\" \"{}\"\n",
            address(&mut rng),
            time_local(micros.saturating_sub(late) / 1_000_000),
            PATHS[usize::try_from(rng.below(6)).unwrap_or(0)],
            if rng.below(20) == 0 { 404 } else { 200 },
            rng.below(50_000),
            AGENTS[usize::try_from(rng.below(3)).unwrap_or(0)],
        );
        out.write_all(line.as_bytes())?;
        written += line.len() as u64;
    }
    out.flush()
}
