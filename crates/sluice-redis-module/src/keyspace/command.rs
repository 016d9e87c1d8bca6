//! Commands: what Redis calls, and one call's arguments and replies.

use super::api;
use redis_module::raw;
use std::ffi::CStr;
use std::os::raw::{c_char, c_int};
use std::panic::{AssertUnwindSafe, catch_unwind};

/// A command the module registers: Redis calls [`run`](Command::run) with its arguments.
pub(crate) trait Command {
    /// Its name, flags (as `RedisModule_CreateCommand` takes them) and static key positions.
    const NAME: &'static CStr;
    const FLAGS: &'static CStr;
    const KEYS: [c_int; 3];

    /// Runs the command and replies, or returns the error to reply (its code first:
    /// `ERR`, `WRONGTYPE`).
    fn run(call: &Call<'_>) -> Result<(), String>;
}

/// What Redis calls: the arguments as one slice, handed to the command.
pub(super) extern "C" fn entry<C: Command>(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
) -> c_int {
    let args = match usize::try_from(argc) {
        // SAFETY: Redis passes `argc` argument strings in `argv`, valid during the call.
        Ok(len) if !argv.is_null() => unsafe { std::slice::from_raw_parts(argv.cast_const(), len) },
        _ => &[],
    };
    let call = Call { ctx, args };
    // A panic is a bug, not an input: it becomes an error reply rather than taking Redis
    // down (a panic cannot leave a C function).
    match catch_unwind(AssertUnwindSafe(|| C::run(&call))) {
        Ok(Ok(())) => {}
        Ok(Err(message)) => call.reply_error(&message),
        Err(_) => call.reply_error("ERR sluice: internal error (a bug in the module: please report it)"),
    }
    raw::REDISMODULE_OK as c_int
}

/// One call of a command: its arguments (the name first) and what it may do with them.
#[derive(Debug)]
pub(crate) struct Call<'a> {
    ctx: *mut raw::RedisModuleCtx,
    args: &'a [*mut raw::RedisModuleString],
}

impl<'a> Call<'a> {
    /// How many arguments, the command's name included.
    pub(crate) fn len(&self) -> usize {
        self.args.len()
    }

    /// The bytes of argument `index` (0: the command's name), borrowed from Redis for the
    /// call's duration.
    ///
    /// # Panics
    ///
    /// When there is no such argument.
    pub(crate) fn arg(&self, index: usize) -> &'a [u8] {
        let mut len = 0;
        // SAFETY: an argument string of this call, alive until it returns; Redis returns a
        // pointer to its `len` bytes, which nothing changes meanwhile.
        unsafe {
            let bytes = api(raw::RedisModule_StringPtrLen)(self.args[index], &mut len);
            std::slice::from_raw_parts(bytes.cast::<u8>(), len)
        }
    }

    /// Whether Redis only asks where the keys are (`getkeys-api`).
    pub(crate) fn wants_key_positions(&self) -> bool {
        // SAFETY: the context of this call.
        unsafe { api(raw::RedisModule_IsKeysPositionRequest)(self.ctx) != 0 }
    }

    /// Tells Redis argument `index` is a key (during a key position request).
    pub(crate) fn key_at(&self, index: usize) {
        // SAFETY: the context of this call, which is a key position request.
        unsafe { api(raw::RedisModule_KeyAtPos)(self.ctx, c_int::try_from(index).unwrap_or(c_int::MAX)) };
    }

    /// The call's context and the string of argument `index`: what opening the key it names
    /// takes (only [`Keys`](super::Keys) opens keys, once each).
    pub(super) fn key_parts(&self, index: usize) -> (*mut raw::RedisModuleCtx, *mut raw::RedisModuleString) {
        (self.ctx, self.args[index])
    }

    /// Replies with `bytes` as a bulk string.
    pub(crate) fn reply(&self, bytes: &[u8]) {
        // SAFETY: the context of this call; Redis copies the buffer.
        unsafe { api(raw::RedisModule_ReplyWithStringBuffer)(self.ctx, bytes.as_ptr().cast::<c_char>(), bytes.len()) };
    }

    /// Replies with the error `message`, which starts with its code (`ERR`, `WRONGTYPE`).
    pub(crate) fn reply_error(&self, message: &str) {
        let text: Vec<u8> = message.bytes().filter(|&b| b != 0).chain([0]).collect();
        let text = CStr::from_bytes_with_nul(&text).unwrap_or(c"ERR sluice: an error");
        // SAFETY: the context of this call; Redis copies the C string.
        unsafe { api(raw::RedisModule_ReplyWithError)(self.ctx, text.as_ptr()) };
    }
}
