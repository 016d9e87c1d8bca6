//! Replication of a check's writes as their effect: the commands a script's calls propagate
//! (`SET … PXAT`, `SETRANGE`, `PEXPIREAT`), never `SLUICE.CHECK` itself, so that a replica
//! or an AOF replay needs neither the module nor the clock the primary read. Numbers go to
//! Redis as their digits (Redis's own `l` format allocates twice); the key is named by its
//! argument, not a copy.

use super::api;
use redis_module::raw;
use std::os::raw::c_char;
use std::sync::atomic::{AtomicPtr, Ordering};

/// The argument `PXAT` of every replicated `SET`, made once (when the module loads) so that
/// replication passes it without copying it (null until then).
static PXAT: AtomicPtr<raw::RedisModuleString> = AtomicPtr::new(std::ptr::null_mut());

/// Makes the strings replication reuses; called once, when the module loads.
pub(super) fn prepare() {
    // SAFETY: with no context, Redis makes a string it never frees on its own; it is kept
    // for the module's lifetime (and only ever passed to RedisModule_Replicate, which takes
    // and drops its own reference, under Redis's lock).
    let pxat = unsafe { api(raw::RedisModule_CreateString)(std::ptr::null_mut(), c"PXAT".as_ptr(), 4) };
    PXAT.store(pxat, Ordering::Relaxed);
}

/// Replicates `SET key value PXAT at` from the command running in `ctx`.
pub(super) fn set(ctx: *mut raw::RedisModuleCtx, key: *mut raw::RedisModuleString, value: &[u8], at: u64) {
    let mut digits = itoa::Buffer::new();
    let at = digits.format(at);
    let (at, at_len) = (at.as_ptr().cast::<c_char>(), at.len());
    let (value, len) = (value.as_ptr().cast::<c_char>(), value.len());
    let pxat = PXAT.load(Ordering::Relaxed);
    // SAFETY: the running command's context; the format's arguments follow it: `s` a module
    // string (the key's argument; `PXAT`, made once and never freed), `b` a buffer and its
    // length (copied), `c` a C string (copied).
    unsafe {
        let replicate = api(raw::RedisModule_Replicate);
        if pxat.is_null() {
            replicate(ctx, c"SET".as_ptr(), c"sbcb".as_ptr(), key, value, len, c"PXAT".as_ptr(), at, at_len)
        } else {
            replicate(ctx, c"SET".as_ptr(), c"sbsb".as_ptr(), key, value, len, pxat, at, at_len)
        }
    };
}

/// Replicates `SETRANGE key offset bytes` from the command running in `ctx`.
pub(super) fn set_range(ctx: *mut raw::RedisModuleCtx, key: *mut raw::RedisModuleString, offset: usize, bytes: &[u8]) {
    let mut digits = itoa::Buffer::new();
    let offset = digits.format(offset);
    // SAFETY: as in `set`.
    unsafe {
        api(raw::RedisModule_Replicate)(
            ctx,
            c"SETRANGE".as_ptr(),
            c"sbb".as_ptr(),
            key,
            offset.as_ptr().cast::<c_char>(),
            offset.len(),
            bytes.as_ptr().cast::<c_char>(),
            bytes.len(),
        )
    };
}

/// Replicates `PEXPIREAT key at` from the command running in `ctx`.
pub(super) fn expire_at(ctx: *mut raw::RedisModuleCtx, key: *mut raw::RedisModuleString, at: u64) {
    let mut digits = itoa::Buffer::new();
    let at = digits.format(at);
    // SAFETY: as in `set`.
    unsafe {
        api(raw::RedisModule_Replicate)(
            ctx,
            c"PEXPIREAT".as_ptr(),
            c"sb".as_ptr(),
            key,
            at.as_ptr().cast::<c_char>(),
            at.len(),
        )
    };
}
