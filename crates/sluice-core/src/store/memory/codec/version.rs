//! The snapshot format's versions, and what each one added.

/// The format this build writes: sliding log, token bucket and leaky bucket states carry
/// the leases they hold.
pub(crate) const VERSION: u16 = 5;
/// The format before states carried the leases they hold.
pub(crate) const VERSION_WITHOUT_HOLDS: u16 = 4;
/// The format before sliding window states carried their grid's anchor.
pub(crate) const VERSION_WITHOUT_ANCHORS: u16 = 3;
/// The format before tables carried their limit's definition.
pub(crate) const VERSION_WITHOUT_DEFINITIONS: u16 = 2;
/// The first format: as version 2, but its limit ids are [`LimitId::legacy`](crate::LimitId) ones.
pub(crate) const VERSION_LEGACY_IDS: u16 = 1;
/// Every format this build reads.
pub(crate) const READ: [u16; 5] =
    [VERSION, VERSION_WITHOUT_HOLDS, VERSION_WITHOUT_ANCHORS, VERSION_WITHOUT_DEFINITIONS, VERSION_LEGACY_IDS];
