//! A fleet of RLQS streams against one `sluice serve`, as raw HTTP/2 gRPC clients: what a
//! round of reports costs the server, what each stream holds, and how long a new stream
//! waits for its first assignment behind a round (docs/benchmarks.md, "RLQS at fleet
//! scale"). Run by scripts/rlqs_fleet.sh, which starts the server and sets:
//!
//! - `SLUICE_FLEET_GRPC`, `SLUICE_FLEET_PID`: the server's gRPC address and process id;
//! - `SLUICE_FLEET_STREAMS` (2000), `SLUICE_FLEET_PER_CONNECTION` (1): the streams, and how
//!   many share an HTTP/2 connection (Envoy opens one per Envoy);
//! - `SLUICE_FLEET_ROUNDS` (5): rounds of one report per stream, every 5 s;
//! - `SLUICE_FLEET_BURST` (0): 1 sends a round's reports all at once; by default they are
//!   spread over the round, as the timers of a fleet of Envoys are;
//! - `SLUICE_FLEET_HOLD` (0): with a burst, 1 stops the server (`SIGSTOP`) while the burst
//!   is sent and resumes it before the new streams open, so that it finds every report
//!   waiting, as behind a fleet faster than one core: the worst case.
//!
//! Each stream holds one bucket of its own, `{plan: free, tenant: tN}`, limited by
//! docs/envoy-rlqs-sluice.yaml (5 a minute), so each is assigned a share. Connections come
//! from 127.0.0.2 and up (20 000 per address), so that loopback's ephemeral ports last.
//! The protobuf messages are written by hand: three fields of two messages.
#![allow(clippy::unwrap_used)] // a measurement that cannot set up should stop loudly

use axum::http::Request;
use bytes::{BufMut, Bytes, BytesMut};
use h2::RecvStream;
use h2::client::SendRequest;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::net::TcpSocket;
use tokio::sync::Semaphore;

/// How often Envoy 1.40 reports.
const ROUND: Duration = Duration::from_secs(5);

/// The RLQS method's path.
const PATH: &str = "/envoy.service.rate_limit_quota.v3.RateLimitQuotaService/StreamRateLimitQuotas";

/// Connections being opened at once.
const OPENING: usize = 256;

/// Connections per client address.
const PER_ADDRESS: usize = 20_000;

/// One stream's sending half.
type Reports = h2::SendStream<Bytes>;

/// A setting from the environment, or `default`.
fn setting(name: &str, default: usize) -> usize {
    std::env::var(name).map_or(default, |value| value.parse().unwrap())
}

/// A length-delimited protobuf field.
fn field(out: &mut BytesMut, tag: u8, bytes: &[u8]) {
    out.put_u8(tag << 3 | 2);
    varint(out, bytes.len() as u64);
    out.put_slice(bytes);
}

/// A protobuf varint.
fn varint(out: &mut BytesMut, mut value: u64) {
    while value >= 0x80 {
        out.put_u8((value as u8) | 0x80);
        value >>= 7;
    }
    out.put_u8(value as u8);
}

/// A gRPC message: a usage report in domain `quota` of `allowed` requests of `tenant`'s bucket.
fn report(tenant: &str, allowed: u64) -> Bytes {
    let mut id = BytesMut::new();
    for (key, value) in [("plan", "free"), ("tenant", tenant)] {
        let mut entry = BytesMut::new();
        field(&mut entry, 1, key.as_bytes());
        field(&mut entry, 2, value.as_bytes());
        field(&mut id, 1, &entry);
    }
    let mut usage = BytesMut::new();
    field(&mut usage, 1, &id);
    usage.put_u8(3 << 3); // num_requests_allowed, a varint
    varint(&mut usage, allowed);
    let mut reports = BytesMut::new();
    field(&mut reports, 1, b"quota");
    field(&mut reports, 2, &usage);
    let mut message = BytesMut::new();
    message.put_u8(0);
    message.put_u32(reports.len() as u32);
    message.put_slice(&reports);
    message.freeze()
}

/// An HTTP/2 connection to `server` from the `index`th connection's address.
async fn connect(server: SocketAddr, index: usize) -> SendRequest<Bytes> {
    let host = u8::try_from(2 + index / PER_ADDRESS).unwrap();
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind(SocketAddr::from((Ipv4Addr::new(127, 0, 0, host), 0))).unwrap();
    let tcp = socket.connect(server).await.unwrap();
    let (send, connection) = h2::client::handshake(tcp).await.unwrap();
    tokio::spawn(async move { connection.await.unwrap() });
    send
}

/// Opens a stream on `send` whose first report is `tenant`'s; its reports, and when its
/// first response came.
async fn open(send: &mut SendRequest<Bytes>, tenant: &str, answered: &Arc<AtomicUsize>) -> (Reports, Duration) {
    let call = Request::post(PATH).header("content-type", "application/grpc").header("te", "trailers");
    let started = Instant::now();
    let (response, mut reports) =
        send.clone().ready().await.unwrap().send_request(call.body(()).unwrap(), false).unwrap();
    reports.send_data(report(tenant, 1), false).unwrap();
    let mut body = response.await.unwrap().into_body();
    first_data(&mut body).await;
    let waited = started.elapsed();
    answered.fetch_add(1, Ordering::Relaxed);
    tokio::spawn(drain(body));
    (reports, waited)
}

/// Waits for the first DATA of `body` (the first response), and gives its room back.
async fn first_data(body: &mut RecvStream) {
    let data = body.data().await.unwrap().unwrap();
    body.flow_control().release_capacity(data.len()).unwrap();
}

/// Reads `body` to its end, as Envoy reads renewals.
async fn drain(mut body: RecvStream) {
    while let Some(Ok(data)) = body.data().await {
        let _ = body.flow_control().release_capacity(data.len());
    }
}

/// Opens `streams` streams, `per_connection` on each connection.
async fn open_fleet(server: SocketAddr, streams: usize, per_connection: usize) -> Vec<Reports> {
    let answered = Arc::new(AtomicUsize::new(0));
    let opening = Arc::new(Semaphore::new(OPENING));
    let mut tasks = Vec::new();
    for connection in 0..streams.div_ceil(per_connection) {
        let (answered, opening) = (Arc::clone(&answered), Arc::clone(&opening));
        let first = connection * per_connection;
        let last = (first + per_connection).min(streams);
        tasks.push(tokio::spawn(async move {
            let _permit = opening.acquire().await.unwrap();
            let mut send = connect(server, connection).await;
            let mut opened = Vec::new();
            for stream in first..last {
                opened.push(open(&mut send, &format!("t{stream}"), &answered).await.0);
            }
            opened
        }));
    }
    let mut fleet = Vec::with_capacity(streams);
    for task in tasks {
        fleet.extend(task.await.unwrap());
    }
    fleet
}

/// The server's CPU time (user + system) and resident memory.
fn usage(pid: u32) -> (Duration, u64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat.rsplit(')').next().unwrap().split_whitespace().collect();
    let ticks = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let rss = status.lines().find_map(|line| line.strip_prefix("VmRSS:")).unwrap();
    let kib: u64 = rss.trim().trim_end_matches(" kB").parse().unwrap();
    (Duration::from_millis(ticks * 10), kib * 1024) // USER_HZ is 100 on Linux
}

/// Slices a round's reports are sent in, spread over the round as a fleet's timers are.
const SLICES: usize = 50;

/// How a round's reports are sent.
#[derive(Clone, Copy, Debug)]
enum Sending {
    /// Spread over the round, as a fleet's timers spread them.
    Spread,
    /// All at once.
    Burst,
    /// All at once while the server (this process id) is stopped.
    HeldBurst(u32),
}

/// How long a held burst waits for this client to write it out before resuming the server.
const HOLD: Duration = Duration::from_millis(500);

/// One round: a report on every stream, sent as `sending` says, and the longest a new
/// stream waited for its first assignment: new streams opened at
/// [`NEWCOMERS_AFTER_BURST`] after a burst, or one in the middle of the spread round.
async fn round(server: SocketAddr, fleet: &mut [Reports], round: usize, sending: Sending) -> Duration {
    let started = tokio::time::Instant::now();
    let slice = if matches!(sending, Sending::Spread) { fleet.len().div_ceil(SLICES) } else { fleet.len() };
    let mut newcomers = Vec::new();
    if let Sending::HeldBurst(pid) = sending {
        signal(pid, "-STOP");
    }
    for (index, streams) in fleet.chunks_mut(slice.max(1)).enumerate() {
        for (offset, reports) in streams.iter_mut().enumerate() {
            reports.send_data(report(&format!("t{}", index * slice + offset), 0), false).unwrap();
        }
        if let Sending::HeldBurst(pid) = sending {
            tokio::time::sleep(HOLD).await;
            signal(pid, "-CONT");
        }
        if matches!(sending, Sending::Spread) {
            if index == SLICES / 2 {
                newcomers.push(newcomer(server, round, 0, Duration::ZERO));
            }
        } else {
            newcomers.extend(
                NEWCOMERS_AFTER_BURST.iter().enumerate().map(|(nth, after)| newcomer(server, round, nth, *after)),
            );
        }
        tokio::time::sleep_until(started + ROUND / SLICES as u32 * (index as u32 + 1)).await;
    }
    let waits: Vec<Duration> = newcomers.into_iter().map(|newcomer| newcomer.join().unwrap()).collect();
    if waits.len() > 1 {
        println!("  new streams' first assignments: {waits:.1?}");
    }
    waits.into_iter().max().unwrap_or_default()
}

/// Sends `signal` (`-STOP`, `-CONT`) to process `pid`.
fn signal(pid: u32, signal: &str) {
    let status = std::process::Command::new("kill").arg(signal).arg(pid.to_string()).status().unwrap();
    assert!(status.success(), "kill {signal} {pid}");
}

/// When new streams are opened after a burst is sent: as the server starts reading it,
/// and while it is still reading.
const NEWCOMERS_AFTER_BURST: [Duration; 3] = [Duration::ZERO, Duration::from_millis(100), Duration::from_millis(200)];

/// A new stream on a new connection, opened `after` from now on a thread and runtime of
/// its own, so that it does not wait behind the fleet's own connections in this client:
/// its wait for its first assignment, from its connection's start.
fn newcomer(server: SocketAddr, round: usize, nth: usize, after: Duration) -> std::thread::JoinHandle<Duration> {
    std::thread::spawn(move || {
        std::thread::sleep(after);
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let started = Instant::now();
            let mut send = connect(server, PER_ADDRESS * 10 + round * NEWCOMERS_AFTER_BURST.len() + nth).await;
            let tenant = format!("new{round}-{nth}-{}", std::process::id());
            let (reports, _) = open(&mut send, &tenant, &Arc::default()).await;
            drop(reports);
            started.elapsed()
        })
    })
}

/// The median of `values`.
fn median<T: Copy + Ord>(values: &mut [T]) -> T {
    values.sort_unstable();
    values[values.len() / 2]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 1)]
async fn main() {
    let server: SocketAddr = std::env::var("SLUICE_FLEET_GRPC").unwrap().parse().unwrap();
    let pid = u32::try_from(setting("SLUICE_FLEET_PID", 0)).unwrap();
    let streams = setting("SLUICE_FLEET_STREAMS", 2000);
    let per_connection = setting("SLUICE_FLEET_PER_CONNECTION", 1);
    let rounds = setting("SLUICE_FLEET_ROUNDS", 5);
    let burst = setting("SLUICE_FLEET_BURST", 0) == 1;
    let sending = match (burst, setting("SLUICE_FLEET_HOLD", 0) == 1) {
        (false, _) => Sending::Spread,
        (true, false) => Sending::Burst,
        (true, true) => Sending::HeldBurst(pid),
    };
    let (_, before) = usage(pid);
    let started = Instant::now();
    let mut fleet = open_fleet(server, streams, per_connection).await;
    println!("opened {streams} streams ({per_connection} a connection) in {:.1?}", started.elapsed());
    let (mut cpu, mut waits) = (Vec::new(), Vec::new());
    let (mut then, held) = usage(pid);
    let mut next = Instant::now();
    for index in 0..rounds {
        waits.push(round(server, &mut fleet, index, sending).await);
        next += ROUND;
        tokio::time::sleep_until(next.into()).await;
        let (now, _) = usage(pid);
        cpu.push(now - then);
        then = now;
        println!("round {index}: server CPU {:?}, new stream's first assignment {:?}", cpu[index], waits[index]);
    }
    let per_stream = held.saturating_sub(before) / streams as u64;
    let (cpu, wait) = (median(&mut cpu), median(&mut waits));
    println!(
        "streams={streams} per_connection={per_connection} sending={sending:?} cpu_per_round_ms={} cores={:.3} \
         first_assignment_ms={:.1} rss_mib={} bytes_per_stream={per_stream}",
        cpu.as_millis(),
        cpu.as_secs_f64() / ROUND.as_secs_f64(),
        wait.as_secs_f64() * 1000.0,
        held / (1 << 20),
    );
}
