//! The one place that calls Redis's module API: commands registered and their arguments
//! read, keys opened for a check, their values read in place, the check's writes applied
//! and replicated, replies sent. Everything here is safe to call; each `unsafe` block relies
//! only on the module API's documented contract.
//!
//! It is also where a check's cost is decided, so it calls the C API directly rather than
//! through the `redis-module` crate's wrappers: arguments are read where Redis keeps them
//! (no vector of retained strings), replication names the key by its argument and numbers
//! as integers (no formatted or copied strings), and a value is written in place when its
//! length stays (no new string object, no key deleted and added again).

use crate::write::Write;
use redis_module::{Context, raw};
use std::ffi::CStr;
use std::os::raw::{c_char, c_int};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicPtr, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

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

/// The argument `PXAT` of every replicated `SET`, made once (when the module loads) so that
/// replication passes it without copying it (null until then).
static PXAT: AtomicPtr<raw::RedisModuleString> = AtomicPtr::new(std::ptr::null_mut());

/// Makes the strings replication reuses; called once, when the module loads.
pub(crate) fn prepare() {
    // SAFETY: with no context, Redis makes a string it never frees on its own; it is kept
    // for the module's lifetime (and only ever passed to RedisModule_Replicate, which takes
    // and drops its own reference, under Redis's lock).
    let pxat = unsafe { api(raw::RedisModule_CreateString)(std::ptr::null_mut(), c"PXAT".as_ptr(), 4) };
    PXAT.store(pxat, Ordering::Relaxed);
}

/// Registers `C` as a command of the module being loaded.
///
/// # Errors
///
/// When Redis refuses it (a name already taken).
pub(crate) fn register<C: Command>(ctx: &Context) -> Result<(), ()> {
    let [first, last, step] = C::KEYS;
    // SAFETY: `ctx` is the context of the module's OnLoad; the name and flags are C strings
    // Redis copies; `entry::<C>` has the signature of a command function.
    let status = unsafe {
        api(raw::RedisModule_CreateCommand)(
            ctx.get_raw(),
            C::NAME.as_ptr(),
            Some(entry::<C>),
            C::FLAGS.as_ptr(),
            first,
            last,
            step,
        )
    };
    if status == raw::REDISMODULE_OK as c_int { Ok(()) } else { Err(()) }
}

/// What Redis calls: the arguments as one slice, handed to the command.
extern "C" fn entry<C: Command>(
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

    /// Opens the key named by argument `index` for reading and writing. A key past its TTL
    /// is deleted on opening, as a command's `GET` would.
    pub(crate) fn open(&self, index: usize) -> OpenKey<'a> {
        let name = self.args[index];
        let mode = (raw::REDISMODULE_READ | raw::REDISMODULE_WRITE) as c_int;
        // SAFETY: the context of this call and one of its argument strings.
        let key = unsafe { api(raw::RedisModule_OpenKey)(self.ctx, name, mode) };
        OpenKey { ctx: self.ctx, name, key, bytes: self.arg(index) }
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

/// A key that does not hold a string (Redis's `WRONGTYPE`).
#[derive(Debug)]
pub(crate) struct WrongType;

/// One key, open for reading and writing until dropped.
#[derive(Debug)]
pub(crate) struct OpenKey<'a> {
    ctx: *mut raw::RedisModuleCtx,
    /// The argument that names it (replication names the key by it, without a copy).
    name: *mut raw::RedisModuleString,
    bytes: &'a [u8],
    key: *mut raw::RedisModuleKey,
}

impl<'a> OpenKey<'a> {
    /// The key's name.
    pub(crate) fn name(&self) -> &'a [u8] {
        self.bytes
    }

    /// Its value, borrowed from Redis's own buffer until the key is next written (`None`:
    /// no key).
    ///
    /// # Errors
    ///
    /// When the key holds something other than a string.
    pub(crate) fn value(&self) -> Result<Option<&[u8]>, WrongType> {
        // SAFETY: `self.key` is open (closed only on drop).
        let kind = unsafe { api(raw::RedisModule_KeyType)(self.key) };
        match kind as isize {
            raw::REDISMODULE_KEYTYPE_EMPTY => return Ok(None),
            raw::REDISMODULE_KEYTYPE_STRING => {}
            _ => return Err(WrongType),
        }
        let mut len = 0;
        // SAFETY: the key is open and holds a string; Redis returns a pointer to its `len`
        // bytes, valid until the key is modified or closed: the returned slice borrows
        // `self`, and every modification takes `&mut self`.
        unsafe {
            let bytes = api(raw::RedisModule_StringDMA)(self.key, &mut len, raw::REDISMODULE_READ as c_int);
            if bytes.is_null() {
                return Err(WrongType);
            }
            Ok(Some(std::slice::from_raw_parts(bytes.cast::<u8>(), len)))
        }
    }

    /// Applies `write`, with TTLs counted from `now_ms` (Redis's clock), and replicates
    /// its effect as the command a script's call propagates (`PX` becomes `PXAT`, `PEXPIRE`
    /// becomes `PEXPIREAT`), so replicas and the AOF get the same bytes and expiry.
    pub(crate) fn apply(&mut self, write: &Write, now_ms: u64) {
        match write {
            Write::Set { value, ttl_ms } => {
                self.overwrite(0, value, true);
                let len = value.len();
                // Numbers go to Redis as their digits (Redis's own `l` format allocates twice).
                let mut digits = itoa::Buffer::new();
                let at = digits.format(self.expire_at(now_ms, *ttl_ms));
                let pxat = PXAT.load(Ordering::Relaxed);
                // SAFETY: the command's context; the format's arguments follow it: `s` a
                // module string (the key's argument; `PXAT`, made once and never freed),
                // `b` a buffer and its length (copied), `c` a C string (copied).
                unsafe {
                    let replicate = api(raw::RedisModule_Replicate);
                    let (command, value) = (c"SET".as_ptr(), value.as_ptr().cast::<c_char>());
                    if pxat.is_null() {
                        let format = c"sbcb".as_ptr();
                        let pxat = c"PXAT".as_ptr();
                        replicate(
                            self.ctx,
                            command,
                            format,
                            self.name,
                            value,
                            len,
                            pxat,
                            at.as_ptr().cast::<c_char>(),
                            at.len(),
                        )
                    } else {
                        let format = c"sbsb".as_ptr();
                        replicate(
                            self.ctx,
                            command,
                            format,
                            self.name,
                            value,
                            len,
                            pxat,
                            at.as_ptr().cast::<c_char>(),
                            at.len(),
                        )
                    }
                };
            }
            Write::SetRange { offset, bytes } => {
                self.overwrite(*offset, bytes, false);
                let mut digits = itoa::Buffer::new();
                let offset = digits.format(*offset);
                // SAFETY: as above.
                unsafe {
                    api(raw::RedisModule_Replicate)(
                        self.ctx,
                        c"SETRANGE".as_ptr(),
                        c"sbb".as_ptr(),
                        self.name,
                        offset.as_ptr().cast::<c_char>(),
                        offset.len(),
                        bytes.as_ptr().cast::<c_char>(),
                        bytes.len(),
                    )
                };
            }
            Write::Expire { ttl_ms } => {
                let mut digits = itoa::Buffer::new();
                let at = digits.format(self.expire_at(now_ms, *ttl_ms));
                // SAFETY: as above.
                unsafe {
                    api(raw::RedisModule_Replicate)(
                        self.ctx,
                        c"PEXPIREAT".as_ptr(),
                        c"sb".as_ptr(),
                        self.name,
                        at.as_ptr().cast::<c_char>(),
                        at.len(),
                    )
                };
            }
        }
    }

    /// Sets the key to expire `ttl_ms` after `now_ms`; returns that time.
    fn expire_at(&mut self, now_ms: u64, ttl_ms: u64) -> u64 {
        let at = now_ms.saturating_add(ttl_ms).min(i64::MAX as u64);
        // SAFETY: the key is open for writing and holds a value (just written).
        unsafe { api(raw::RedisModule_SetAbsExpire)(self.key, i64::try_from(at).unwrap_or(i64::MAX)) };
        at
    }

    /// Copies `bytes` into the value at `offset`, in place: the value grows with zeros
    /// first if it is shorter (as `SETRANGE`), and is cut after them when `whole` (as `SET`).
    /// A key that does not exist is created.
    fn overwrite(&mut self, offset: usize, bytes: &[u8], whole: bool) {
        let end = offset + bytes.len();
        if whole && end == 0 {
            // Truncating to nothing would create no key: set an empty string instead.
            // SAFETY: the key is open for writing; StringSet takes its own reference to the
            // new string, which is freed here.
            unsafe {
                let empty = api(raw::RedisModule_CreateString)(self.ctx, c"".as_ptr(), 0);
                api(raw::RedisModule_StringSet)(self.key, empty);
                api(raw::RedisModule_FreeString)(self.ctx, empty);
            }
            return;
        }
        let mut len = 0;
        // SAFETY: the key is open for writing and holds a string or nothing (the check read
        // it); the pointer is valid for `len` bytes until the next call on the key, and
        // nothing else touches it meanwhile. A missing key reads as empty (`len` 0), and is
        // created with `end` zeros by the truncation.
        unsafe {
            let mode = raw::REDISMODULE_WRITE as c_int;
            let mut value = api(raw::RedisModule_StringDMA)(self.key, &mut len, mode);
            if len < end || (whole && len != end) {
                api(raw::RedisModule_StringTruncate)(self.key, end);
                value = api(raw::RedisModule_StringDMA)(self.key, &mut len, mode);
            }
            if !value.is_null() && len >= end {
                std::slice::from_raw_parts_mut(value.cast::<u8>(), len)[offset..end].copy_from_slice(bytes);
            }
        }
    }
}

impl Drop for OpenKey<'_> {
    fn drop(&mut self) {
        // SAFETY: opened in `Call::open`, closed once, here.
        unsafe { api(raw::RedisModule_CloseKey)(self.key) };
    }
}

/// Redis `TIME` in µs: the module API's clock where Redis has it (7.2+), else the same
/// clock read directly (Redis's `TIME`, like the `mstime` its TTLs count from, is
/// `gettimeofday`, the system's real-time clock).
pub(crate) fn redis_time_us() -> u64 {
    // SAFETY: reading a function pointer Redis filled in when the module loaded (or left
    // empty when it has no such function), never written afterwards.
    if let Some(microseconds) = unsafe { raw::RedisModule_Microseconds } {
        // SAFETY: takes no arguments and only reads the clock.
        return u64::try_from(unsafe { microseconds() }).unwrap_or_default();
    }
    let since_epoch = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    u64::try_from(since_epoch.as_micros()).unwrap_or_default()
}

/// A module API function every Redis that loads modules provides (its pointer, a
/// `static mut` Redis fills in once when the module loads, before any command runs, is read
/// by the caller). A missing one is a broken invariant, not an input: the panic becomes an
/// error reply (`lib.rs`).
#[allow(clippy::expect_used)]
fn api<F>(function: Option<F>) -> F {
    function.expect("a module API function every supported Redis provides")
}
