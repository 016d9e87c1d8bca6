//! Sluice as a Redis module: `SLUICE.CHECK`, the check the Lua scripts of `sluice-redis` run,
//! as one native command.
//!
//! ```text
//! SLUICE.CHECK <key> [<key> ...] <packed> [<deadline>]
//! ```
//!
//! It takes the scripts' arguments (one state key per limit; the packed argument of
//! `lua/common.lua`: little-endian doubles `now` (−1: Redis `TIME`), `cost`, `extra_ms`,
//! `min_ttl_ms`, then per limit its algorithm id and `p1..p4`; the optional deadline, a
//! double, Redis `TIME` in µs past which nothing is written and the reply is empty) and
//! gives their reply (packed doubles: `now`, seven per limit, Redis `TIME`). It reads and
//! writes the same keys in the same byte layouts with the same TTLs, so the module and the
//! scripts can serve one Redis side by side.
//!
//! # How it works
//!
//! - **Keys.** The packed argument's length (`32 + 40 L`) says how many keys come first, so
//!   the command tells Redis where its keys are (`getkeys-api`): Cluster checks their slot,
//!   and clients that route by the first argument route it as they route a script by its
//!   first key.
//! - **Decisions.** The fixed window, sliding window, token and leaky buckets store their
//!   core state field for field, so the module runs the core's own `decide`
//!   (`layout.rs`); the sliding log's Redis layout (whole below 33 entries, a ring above) is
//!   not the core's in-memory one, so `sliding_log.rs` is the script's twin.
//! - **Writes and replication.** A check decides every limit, then records them all or
//!   none (`check.rs`). Each write is one of the script's calls (`SET … PX`, `SETRANGE`,
//!   `PEXPIRE`), applied through the key API and replicated as its effect (`SET … PXAT`,
//!   `SETRANGE`, `PEXPIREAT`), never as the command: a replica or an AOF replay needs
//!   neither the module nor the clock the primary read.
//! - **Safety.** Every argument is validated before a key is opened (`args.rs`); a value
//!   the scripts would not have written is an error reply, and nothing is written then.
//!   `unsafe` lives in `keyspace.rs` alone.

mod args;
mod check;
mod keyspace;
mod layout;
mod sliding_log;
mod write;

use keyspace::OpenKey;
use redis_module::{Context, RedisError, RedisResult, RedisString, RedisValue};
use std::panic::{AssertUnwindSafe, catch_unwind};

/// `SLUICE.CHECK`: answers Redis's request for key positions, or runs the check. (The
/// registration macro hands the arguments over by value.)
#[allow(clippy::needless_pass_by_value)]
fn check_command(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    let lengths: Vec<usize> = args.iter().skip(1).map(|arg| arg.as_slice().len()).collect();
    let keys = args::key_count(&lengths);
    if ctx.is_keys_position_request() {
        for position in 1..=keys.unwrap_or(0) {
            ctx.key_at_pos(i32::try_from(position).unwrap_or(i32::MAX));
        }
        return Ok(RedisValue::NoReply);
    }
    let Some(keys) = keys else {
        return Err(error(
            "usage: SLUICE.CHECK <key> [<key> ...] <packed: 32 + 40 bytes per key> [<deadline: 8 bytes>]",
        ));
    };
    // A panic is a bug, not an input: it becomes an error reply rather than taking Redis down.
    catch_unwind(AssertUnwindSafe(|| run(ctx, &args[1..=keys], &args[keys + 1..])))
        .unwrap_or_else(|_| Err(error("internal error (a bug in the module: please report it)")))
}

/// Validates the arguments, then checks the limits on `keys` and applies what it wrote.
fn run(ctx: &Context, keys: &[RedisString], rest: &[RedisString]) -> RedisResult {
    let deadline = rest.get(1).map(RedisString::as_slice);
    let check = args::parse(rest[0].as_slice(), deadline).map_err(|problem| error(&problem))?;
    let clock = keyspace::redis_time_us();
    // Each key opened once, however often it is listed: a second handle on a key would not
    // see what the first one changes.
    let mut slots = Vec::with_capacity(keys.len());
    let mut open: Vec<OpenKey<'_>> = Vec::with_capacity(keys.len());
    for name in keys {
        let slot = open.iter().position(|key| key.name() == name.as_slice()).unwrap_or(open.len());
        if slot == open.len() {
            open.push(OpenKey::open(ctx, name));
        }
        slots.push(slot);
    }
    let states = slots
        .iter()
        .map(|&slot| open[slot].value().map(|value| (open[slot].name(), value)))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|keyspace::WrongType| RedisError::WrongType)?;
    let outcome = check::run(&check, &states, clock).map_err(|refusal| match refusal {
        check::Refusal::BadState(limit) => {
            error(&format!("the key of limit {} holds a value that is not a Sluice state", limit + 1))
        }
        check::Refusal::TooLong(limit) => error(&format!("the log of limit {} would outgrow 512 MB", limit + 1)),
    })?;
    if !outcome.writes.is_empty() {
        let now_ms = keyspace::redis_time_ms();
        for (index, writes) in &outcome.writes {
            for write in writes {
                open[slots[*index]].apply(write, now_ms);
            }
        }
    }
    Ok(RedisValue::StringBuffer(outcome.reply))
}

/// An error reply. Its text is ASCII, as clients expect of an error line: the core's
/// messages say `µs` and `×`, which Redis would pass on as bytes of another encoding.
fn error(message: &str) -> RedisError {
    let ascii = message.chars().map(|c| match c {
        'µ' => 'u',
        '×' => 'x',
        ' '..='~' => c,
        _ => '?',
    });
    RedisError::String(format!("ERR sluice: {}", ascii.collect::<String>()))
}

/// The module's entry points (`RedisModule_OnLoad`, `RedisModule_OnUnload`), which Redis
/// looks up by name.
#[allow(missing_docs)]
mod registration {
    use super::check_command;
    use redis_module::redis_module;

    // The system allocator, not Redis's: a check allocates only for its own duration, and
    // the library is also linked into tests, where Redis's allocator does not exist.
    redis_module! {
        name: "sluice",
        version: 1,
        allocator: (std::alloc::System, std::alloc::System),
        data_types: [],
        commands: [
            ["sluice.check", check_command, "write deny-oom getkeys-api", 1, 1, 1, ""],
        ],
    }
}
