//! Deciding traffic that is not live: `sluice simulate` (trace lines), `sluice replay`
//! (access logs) and the dashboard's playground, each on a throwaway store with the time
//! the input gives.

pub(crate) mod playground;
pub(crate) mod replay;
pub(crate) mod simulate;
pub(crate) mod trace;
