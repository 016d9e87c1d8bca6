//! Sluice as a Redis module: `SLUICE.CHECK`, the check the Lua scripts of `sluice-redis` run,
//! and `SLUICE.GIVEBACK`, their give-back, as native commands.
//!
//! ```text
//! SLUICE.CHECK <key> [<key> ...] <packed> [<deadline>]
//! SLUICE.GIVEBACK <key> [<key> ...] <packed>
//! ```
//!
//! `SLUICE.CHECK` takes the scripts' arguments (one state key per limit; the packed argument
//! of `lua/common.lua`: little-endian doubles `now` (−1: Redis `TIME`), `cost`, `extra_ms`,
//! `min_ttl_ms`, a lease's units and period when one is asked, then per limit its algorithm
//! id and `p1..p4`; the optional deadline, a double, Redis `TIME` in µs past which nothing is
//! written and the reply is empty) and gives their reply (packed doubles: `now`, seven per
//! limit, after a lease request whether it was granted and each limit's stamp, Redis
//! `TIME`). `SLUICE.GIVEBACK` takes the give-back script's (`lua/give_back_args.lua`) and
//! replies with an empty string, as it does. Both read and write the same keys in the same
//! byte layouts with the same TTLs, so the module and the scripts can serve one Redis side
//! by side.
//!
//! # How it works
//!
//! - **Keys.** The packed argument's length (`32 + 40 L`, `48 + 40 L` with a lease;
//!   `40 + 56 L` for a give-back) says how many keys come first, so the commands tell Redis
//!   where their keys are (`getkeys-api`): Cluster checks their slot, and clients that route
//!   by the first argument route them as they route a script by its first key.
//! - **Decisions.** The fixed window, sliding window, token and leaky buckets store their
//!   core state field for field (the buckets with the leases they hold, the windows with
//!   their stamp), so the module runs the core's own `decide`, `decide_leased` and
//!   `give_back` (`layout.rs`); the sliding log's Redis layout (whole below 33 entries, a
//!   ring above, leases beside the slots) is not the core's in-memory one, so
//!   `sliding_log.rs` is the script's twin.
//! - **Writes and replication.** A check decides every limit (with the lease asked, then,
//!   when it does not fit them all, without), then records them all or none (`check.rs`). Each write is one of the script's calls (`SET … PX`, `SETRANGE`,
//!   `PEXPIRE`), applied through the key API and replicated as its effect (`SET … PXAT`,
//!   `SETRANGE`, `PEXPIREAT`), never as the command: a replica or an AOF replay needs
//!   neither the module nor the clock the primary read.
//! - **Safety.** Every argument is validated before a key is opened (`args.rs`); a value
//!   the scripts would not have written is an error reply, and nothing is written then.
//!   `unsafe` lives in `keyspace` alone: the compiler denies it everywhere else, and
//!   `keyspace` opens each key once, however often a check lists it.
//! - **Cost.** A check of one or two limits allocates nothing of its own: arguments are
//!   read where Redis keeps them, values are written in place, replies and writes are
//!   built on the stack, and a limit's policy, once validated, is kept by its bytes
//!   (`args.rs`). What remains is Redis's: opening the key, setting its TTL, replying, and
//!   `RedisModule_Replicate` per write, which alone costs more than `INCR` (it looks the
//!   command up by name and copies its arguments; on Valkey 8.1+ the module skips the
//!   look-up); see `docs/redis.md`.
//!
//! The `bench-floor` feature adds `SLUICE.FLOOR`, the benchmark's floors (not for
//! production).

#![deny(unsafe_code)]

mod args;
mod check;
mod give_back;
#[allow(unsafe_code)]
mod keyspace;
mod layout;
mod sliding_log;
mod write;

use keyspace::{Call, Command, Keys};
use smallvec::SmallVec;
use std::ffi::CStr;
use std::os::raw::c_int;

/// `SLUICE.CHECK`: answers Redis's request for key positions, or runs the check.
#[derive(Debug)]
struct CheckCommand;

impl Command for CheckCommand {
    const NAME: &'static CStr = c"sluice.check";
    const FLAGS: &'static CStr = c"write deny-oom getkeys-api";
    const KEYS: [c_int; 3] = [1, 1, 1];

    fn run(call: &Call<'_>) -> Result<(), String> {
        let args = call.len() - 1;
        let length = |back: usize| if args >= back { call.arg(call.len() - back).len() } else { 0 };
        let keys = args::key_count(args, length(1), length(2));
        if call.wants_key_positions() {
            for position in 1..=keys.unwrap_or(0) {
                call.key_at(position);
            }
            return Ok(());
        }
        let Some(keys) = keys else {
            return Err(error(
                "usage: SLUICE.CHECK <key> [<key> ...] <packed: 32 (48 with a lease) + 40 bytes per key> [<deadline: 8 bytes>]",
            ));
        };
        run(call, keys)
    }
}

/// Validates the arguments, then checks the limits on the first `keys` arguments, applies
/// what it wrote and replies.
fn run(call: &Call<'_>, keys: usize) -> Result<(), String> {
    let deadline = (call.len() > keys + 2).then(|| call.arg(keys + 2));
    let check = args::parse(call.arg(keys + 1), deadline).map_err(|problem| error(&problem))?;
    let clock = keyspace::redis_time_us();
    let mut keys = Keys::open(call, 1..=keys);
    let states = keys.values().map_err(|keyspace::WrongType| WRONG_TYPE.to_owned())?;
    let mut outcome = check::Outcome { reply: SmallVec::new(), writes: SmallVec::new() };
    check::run(&check, &states, clock, &mut outcome).map_err(|refusal| match refusal {
        check::Refusal::BadState(limit) => {
            error(&format!("the key of limit {} holds a value that is not a Sluice state", limit + 1))
        }
        check::Refusal::TooLong(limit) => error(&format!("the log of limit {} would outgrow 512 MB", limit + 1)),
        check::Refusal::LeaseTooLate => error("the lease would end past 2^53 us, the most the scripts compute exactly"),
    })?;
    drop(states);
    // TTLs count from Redis's command time, as the scripts' `PEXPIRE` does; before 7.2 (no
    // such time in the module API) from the clock read above, in ms (`mstime`).
    let now_ms = keyspace::command_time_ms().unwrap_or(clock / 1000);
    for (limit, write) in &outcome.writes {
        keys.apply(*limit, write, now_ms);
    }
    call.reply(&outcome.reply);
    Ok(())
}

/// `SLUICE.GIVEBACK`: answers Redis's request for key positions, or gives a lease back.
#[derive(Debug)]
struct GiveBackCommand;

impl Command for GiveBackCommand {
    const NAME: &'static CStr = c"sluice.giveback";
    const FLAGS: &'static CStr = c"write deny-oom getkeys-api";
    const KEYS: [c_int; 3] = [1, 1, 1];

    fn run(call: &Call<'_>) -> Result<(), String> {
        let args = call.len() - 1;
        let keys = args::give_back_key_count(args, if args >= 1 { call.arg(args).len() } else { 0 });
        if call.wants_key_positions() {
            for position in 1..=keys.unwrap_or(0) {
                call.key_at(position);
            }
            return Ok(());
        }
        let Some(keys) = keys else {
            return Err(error("usage: SLUICE.GIVEBACK <key> [<key> ...] <packed: 40 + 56 bytes per key>"));
        };
        give_back(call, keys)
    }
}

/// Validates the arguments, then gives the lease back into the limits' states on the first
/// `keys` arguments, applies what that wrote and replies (an empty string, as the script).
fn give_back(call: &Call<'_>, keys: usize) -> Result<(), String> {
    let back = args::parse_give_back(call.arg(keys + 1)).map_err(|problem| error(&problem))?;
    let clock = keyspace::redis_time_us();
    let mut keys = Keys::open(call, 1..=keys);
    let states = keys.values().map_err(|keyspace::WrongType| WRONG_TYPE.to_owned())?;
    let mut writes = SmallVec::new();
    give_back::run(&back, &states, clock, &mut writes)
        .map_err(|limit| error(&format!("the key of limit {} holds a value that is not a Sluice state", limit + 1)))?;
    drop(states);
    let now_ms = keyspace::command_time_ms().unwrap_or(clock / 1000);
    for (limit, write) in &writes {
        keys.apply(*limit, write, now_ms);
    }
    call.reply(&[]);
    Ok(())
}

/// Redis's reply to a command on a key of another type.
const WRONG_TYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

/// An error reply. Its text is ASCII, as clients expect of an error line: the core's
/// messages say `µs` and `×`, which Redis would pass on as bytes of another encoding.
fn error(message: &str) -> String {
    let ascii = message.chars().map(|c| match c {
        'µ' => 'u',
        '×' => 'x',
        ' '..='~' => c,
        _ => '?',
    });
    format!("ERR sluice: {}", ascii.collect::<String>())
}

/// `SLUICE.FLOOR <key> [WRITE]`, built only with the `bench-floor` feature, for the
/// benchmark: a command that opens its key and replies (as many bytes as a one-limit check),
/// the least any module command on a key costs Redis; with `WRITE`, it also writes what a
/// fixed window's check writes (16 bytes, a TTL: a minute, so that the floor finds the key)
/// and replicates it as one `SET … PXAT`, the least any module command that changes a key
/// costs Redis.
#[cfg(feature = "bench-floor")]
#[derive(Debug)]
struct FloorCommand;

#[cfg(feature = "bench-floor")]
impl Command for FloorCommand {
    const NAME: &'static CStr = c"sluice.floor";
    const FLAGS: &'static CStr = c"write deny-oom";
    const KEYS: [c_int; 3] = [1, 1, 1];

    fn run(call: &Call<'_>) -> Result<(), String> {
        let write = match call.len() {
            2 => false,
            3 if call.arg(2).eq_ignore_ascii_case(b"write") => true,
            _ => return Err(error("usage: SLUICE.FLOOR <key> [WRITE]")),
        };
        let mut keys = Keys::open(call, 1..=1);
        if write {
            let value = layout::pack(&[1, 2]);
            keys.apply(0, &write::Write::Set { value, ttl_ms: 60_000 }, keyspace::redis_time_us() / 1000);
        }
        drop(keys);
        call.reply(&[0; 72]);
        Ok(())
    }
}

/// Sets the module up on the server loading it and registers its commands (called by the
/// entry point in `keyspace`).
fn init(ctx: &redis_module::Context, _: &[redis_module::RedisString]) -> redis_module::Status {
    if keyspace::prepare(ctx) == keyspace::Replication::Unvalidated {
        ctx.log_notice("sluice: replicating without command validation (Valkey 8.1+)");
    }
    let registered = keyspace::register::<CheckCommand>(ctx).and_then(|()| keyspace::register::<GiveBackCommand>(ctx));
    #[cfg(feature = "bench-floor")]
    let registered = registered.and_then(|()| keyspace::register::<FloorCommand>(ctx));
    if registered.is_ok() { redis_module::Status::Ok } else { redis_module::Status::Err }
}
