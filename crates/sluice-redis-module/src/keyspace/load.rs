//! Loading the module: the entry points Redis looks up by name, the commands registered,
//! and the strings replication reuses.

use super::command::{Command, entry};
use super::{api, replicate};
use redis_module::{Context, raw};
use std::os::raw::c_int;

/// Makes the strings replication reuses; called once, from the module's `init`.
pub(crate) fn prepare(_ctx: &Context) {
    replicate::prepare();
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

/// The module's entry points (`RedisModule_OnLoad`, `RedisModule_OnUnload`), which Redis
/// looks up by name; loading runs the crate's `init`.
#[allow(missing_docs)]
mod entry_points {
    use crate::init;
    use redis_module::redis_module;

    // The system allocator, not Redis's: a check allocates only for its own duration, and
    // the library is also linked into tests, where Redis's allocator does not exist.
    redis_module! {
        name: "sluice",
        version: 1,
        allocator: (std::alloc::System, std::alloc::System),
        data_types: [],
        init: init,
    }
}
