//! The one place that calls Redis's key API: keys opened for a check, their values read in
//! place, the check's writes applied and replicated. Everything here is safe to call; each
//! `unsafe` block relies only on the module API's documented contract.

use crate::write::Write;
use redis_module::{Context, RedisString, raw};
use std::os::raw::c_int;
use std::time::{SystemTime, UNIX_EPOCH};

/// A key that does not hold a string (Redis's `WRONGTYPE`).
#[derive(Debug)]
pub(crate) struct WrongType;

/// One key, open for reading and writing until dropped.
#[derive(Debug)]
pub(crate) struct OpenKey<'a> {
    ctx: &'a Context,
    name: &'a RedisString,
    key: *mut raw::RedisModuleKey,
}

impl<'a> OpenKey<'a> {
    /// Opens `name` in the command's database. A key past its TTL is deleted on opening,
    /// as a command's `GET` would.
    pub(crate) fn open(ctx: &'a Context, name: &'a RedisString) -> Self {
        let mode = (raw::REDISMODULE_READ | raw::REDISMODULE_WRITE) as c_int;
        // SAFETY: `ctx` is the context of the running command and `name.inner` a string it
        // owns (the command's argument); RedisModule_OpenKey is set once the module loaded.
        let key = unsafe { api(raw::RedisModule_OpenKey)(ctx.get_raw(), name.inner, mode) };
        OpenKey { ctx, name, key }
    }

    /// The key's name.
    pub(crate) fn name(&self) -> &'a [u8] {
        self.name.as_slice()
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
                // Binary-safe (`Context::create_string` goes through a C string).
                let string = RedisString::create_from_slice(self.ctx.get_raw(), value);
                // SAFETY: the key is open for writing; StringSet takes its own reference.
                unsafe { api(raw::RedisModule_StringSet)(self.key, string.inner) };
                let at = self.expire_at(now_ms, *ttl_ms);
                self.ctx.replicate("SET", &[self.name(), value, b"PXAT", at.to_string().as_bytes()]);
            }
            Write::SetRange { offset, bytes } => {
                self.overwrite(*offset, bytes);
                let offset = offset.to_string();
                self.ctx.replicate("SETRANGE", &[self.name(), offset.as_bytes(), bytes]);
            }
            Write::Expire { ttl_ms } => {
                let at = self.expire_at(now_ms, *ttl_ms);
                self.ctx.replicate("PEXPIREAT", &[self.name(), at.to_string().as_bytes()]);
            }
        }
    }

    /// Sets the key to expire `ttl_ms` after `now_ms`; returns that time.
    fn expire_at(&mut self, now_ms: u64, ttl_ms: u64) -> u64 {
        let at = now_ms.saturating_add(ttl_ms);
        // SAFETY: the key is open for writing and holds a value (just written).
        unsafe { api(raw::RedisModule_SetAbsExpire)(self.key, i64::try_from(at).unwrap_or(i64::MAX)) };
        at
    }

    /// Copies `bytes` into the value at `offset`, growing it with zeros first if it is
    /// shorter (as `SETRANGE`).
    fn overwrite(&mut self, offset: usize, bytes: &[u8]) {
        let end = offset + bytes.len();
        let mut len = 0;
        // SAFETY: the key is open for writing and holds a string (the check read it, and a
        // value too short is grown first); the pointer is valid for `len` bytes until the
        // next call on the key, and nothing else touches it meanwhile.
        unsafe {
            let mode = raw::REDISMODULE_WRITE as c_int;
            let mut value = api(raw::RedisModule_StringDMA)(self.key, &mut len, mode);
            if len < end {
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
        // SAFETY: opened in `open`, closed once, here.
        unsafe { api(raw::RedisModule_CloseKey)(self.key) };
    }
}

/// Redis `TIME` in µs: the module API's clock where Redis has it (7.2+), else the same
/// clock read directly (Redis's `TIME` is `gettimeofday`, the system's real-time clock).
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

/// Redis's clock in ms, as it counts TTLs (`mstime`).
pub(crate) fn redis_time_ms() -> u64 {
    // SAFETY: RedisModule_Milliseconds exists in every Redis with modules; it only reads
    // the clock.
    u64::try_from(unsafe { api(raw::RedisModule_Milliseconds)() }).unwrap_or_default()
}

/// A module API function every Redis that loads modules provides (its pointer, a
/// `static mut` Redis fills in once when the module loads, before any command runs, is read
/// by the caller). A missing one is a broken invariant, not an input: the panic becomes an
/// error reply (`lib.rs`).
#[allow(clippy::expect_used)]
fn api<F>(function: Option<F>) -> F {
    function.expect("a module API function every supported Redis provides")
}
