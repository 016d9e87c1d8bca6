//! Loading the module: the entry points Redis looks up by name, the commands registered,
//! the strings replication reuses, and the module options the server offers.

use super::command::{Command, entry};
use super::{api, replicate};
use redis_module::{Context, raw};
use std::ffi::c_void;
use std::os::raw::c_int;

/// Valkey's `VALKEYMODULE_OPTIONS_SKIP_COMMAND_VALIDATION` (Valkey 8.1+): `Replicate` no
/// longer looks the replicated command up by name, about half of its cost. Redis numbers
/// its options the same way but gives this bit no meaning (or, in a later version, another
/// one), so it is set only on a Valkey that lists it among its options.
const SKIP_COMMAND_VALIDATION: c_int = 1 << 4;

/// How the module replicates on this server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Replication {
    /// Each write's command is looked up by name first (Redis, Valkey before 8.1).
    Validated,
    /// Valkey skips the look-up: the module only replicates commands it knows exist.
    Unvalidated,
}

/// Makes the strings replication reuses and sets the options this server offers; called
/// once, from the module's `init`, in `ctx`, the context of its load.
pub(crate) fn prepare(ctx: &Context) -> Replication {
    replicate::prepare();
    if !is_valkey() || options_offered() & SKIP_COMMAND_VALIDATION == 0 {
        return Replication::Validated;
    }
    // SAFETY: the context of the module's load; the option is one this server lists.
    unsafe { api(raw::RedisModule_SetModuleOptions)(ctx.get_raw(), SKIP_COMMAND_VALIDATION) };
    Replication::Unvalidated
}

/// Whether the server is Valkey: it alone also names its module API `ValkeyModule_*`.
fn is_valkey() -> bool {
    let mut function: *mut c_void = std::ptr::null_mut();
    let target = std::ptr::from_mut(&mut function).cast::<c_void>();
    // SAFETY: GetApi writes one function pointer to `target` if the server has the name (a
    // C string), and nothing otherwise.
    let found = unsafe { api(raw::RedisModule_GetApi)(c"ValkeyModule_GetModuleOptionsAll".as_ptr(), target) };
    found == raw::REDISMODULE_OK as c_int && !function.is_null()
}

/// The module options the server knows (`GetModuleOptionsAll`, Redis 7.2+ and Valkey).
fn options_offered() -> c_int {
    // SAFETY: reading a function pointer the server filled in when the module loaded (or
    // left empty), never written afterwards.
    match unsafe { raw::RedisModule_GetModuleOptionsAll } {
        // SAFETY: takes no arguments and only returns a constant.
        Some(all) => unsafe { all() },
        None => 0,
    }
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
