//! The keys of a call, each opened once: their values read in place, the check's writes
//! applied in place and replicated as their effect.

use super::command::Call;
use super::{api, replicate};
use crate::write::Write;
use redis_module::raw;
use smallvec::SmallVec;
use std::ops::RangeInclusive;
use std::os::raw::c_int;

/// A key that does not hold a string (Redis's `WRONGTYPE`).
#[derive(Debug)]
pub(crate) struct WrongType;

/// The keys a call lists, each opened once however often it is listed: a second handle on
/// a key would not see what the first one changes. This is the only way to open a key.
#[derive(Debug)]
pub(crate) struct Keys<'a> {
    /// One handle per distinct key, in the order first listed.
    open: SmallVec<[OpenKey<'a>; 2]>,
    /// For each listed key, its handle's index in `open`.
    handles: SmallVec<[usize; 4]>,
}

impl<'a> Keys<'a> {
    /// Opens the keys named by the arguments at `positions` for reading and writing.
    pub(crate) fn open(call: &Call<'a>, positions: RangeInclusive<usize>) -> Self {
        let mut keys = Keys { open: SmallVec::new(), handles: SmallVec::new() };
        for position in positions {
            let name = call.arg(position);
            let handle = keys.open.iter().position(|key| key.name() == name).unwrap_or(keys.open.len());
            if handle == keys.open.len() {
                keys.open.push(OpenKey::open(call, position));
            }
            keys.handles.push(handle);
        }
        keys
    }

    /// Each listed key's name and value (`None`: no key), in the order listed; a value is
    /// borrowed from Redis's own buffer until a key is next written.
    ///
    /// # Errors
    ///
    /// When a key holds something other than a string.
    pub(crate) fn values(&self) -> Result<Values<'_>, WrongType> {
        let mut values = SmallVec::new();
        for &handle in &self.handles {
            let key = &self.open[handle];
            values.push((key.name(), key.value()?));
        }
        Ok(values)
    }

    /// Applies `write` to the `listed`-th key (0-based, in the order listed), with TTLs
    /// counted from `now_ms` (Redis's clock), and replicates its effect.
    ///
    /// # Panics
    ///
    /// When fewer keys are listed.
    pub(crate) fn apply(&mut self, listed: usize, write: &Write, now_ms: u64) {
        self.open[self.handles[listed]].apply(write, now_ms);
    }
}

/// Each listed key's name and value (`None`: no key), in the order listed.
pub(crate) type Values<'k> = SmallVec<[(&'k [u8], Option<&'k [u8]>); 2]>;

/// One key, open for reading and writing until dropped.
#[derive(Debug)]
pub(super) struct OpenKey<'a> {
    ctx: *mut raw::RedisModuleCtx,
    /// The argument that names it (replication names the key by it, without a copy).
    name: *mut raw::RedisModuleString,
    bytes: &'a [u8],
    key: *mut raw::RedisModuleKey,
}

impl<'a> OpenKey<'a> {
    /// Opens the key named by argument `index` of `call` for reading and writing; closed on
    /// drop. A key past its TTL is deleted on opening, as a command's `GET` would.
    fn open(call: &Call<'a>, index: usize) -> Self {
        let (ctx, name) = call.key_parts(index);
        let mode = (raw::REDISMODULE_READ | raw::REDISMODULE_WRITE) as c_int;
        // SAFETY: the context of this call and one of its argument strings.
        let key = unsafe { api(raw::RedisModule_OpenKey)(ctx, name, mode) };
        OpenKey { ctx, name, bytes: call.arg(index), key }
    }

    /// The key's name.
    fn name(&self) -> &'a [u8] {
        self.bytes
    }

    /// Its value, borrowed from Redis's own buffer until the key is next written (`None`:
    /// no key).
    fn value(&self) -> Result<Option<&[u8]>, WrongType> {
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
    fn apply(&mut self, write: &Write, now_ms: u64) {
        match write {
            Write::Set { value, ttl_ms } => self.set(value, *ttl_ms, now_ms),
            Write::SetRange { offset, bytes } => self.set_range(*offset, bytes),
            Write::Expire { ttl_ms } => self.expire(*ttl_ms, now_ms),
        }
    }

    /// `SET key value PX ttl_ms`, replicated as `SET key value PXAT at`.
    fn set(&mut self, value: &[u8], ttl_ms: u64, now_ms: u64) {
        self.overwrite(0, value, true);
        let at = self.expire_at(now_ms, ttl_ms);
        replicate::set(self.ctx, self.name, value, at);
    }

    /// `SETRANGE key offset bytes`, replicated as itself.
    fn set_range(&mut self, offset: usize, bytes: &[u8]) {
        self.overwrite(offset, bytes, false);
        replicate::set_range(self.ctx, self.name, offset, bytes);
    }

    /// `PEXPIRE key ttl_ms`, replicated as `PEXPIREAT key at`.
    fn expire(&mut self, ttl_ms: u64, now_ms: u64) {
        let at = self.expire_at(now_ms, ttl_ms);
        replicate::expire_at(self.ctx, self.name, at);
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
            self.set_empty();
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

    /// Sets the value to the empty string (truncating to nothing would create no key).
    fn set_empty(&mut self) {
        // SAFETY: the key is open for writing; StringSet takes its own reference to the new
        // string, which is freed here.
        unsafe {
            let empty = api(raw::RedisModule_CreateString)(self.ctx, c"".as_ptr(), 0);
            api(raw::RedisModule_StringSet)(self.key, empty);
            api(raw::RedisModule_FreeString)(self.ctx, empty);
        }
    }
}

impl Drop for OpenKey<'_> {
    fn drop(&mut self) {
        // SAFETY: opened in `OpenKey::open`, closed once, here.
        unsafe { api(raw::RedisModule_CloseKey)(self.key) };
    }
}
