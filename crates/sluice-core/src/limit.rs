//! A named policy, and the key a caller is limited by.

mod definition;

pub use definition::DefinitionError;

use crate::Policy;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// A policy with a name. Its [`LimitId`] identifies the definition: two limits with the same
/// name and parameters share state, and changing either starts the limit fresh.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limit {
    name: Arc<str>,
    policy: Policy,
    id: LimitId,
}

impl Limit {
    /// A limit called `name` applying `policy`.
    ///
    /// # Examples
    ///
    /// ```
    /// use sluice_core::{Limit, SlidingLog, SlidingLogVariant};
    /// use std::time::Duration;
    ///
    /// let login = SlidingLog::new(5, Duration::from_secs(900), SlidingLogVariant::Attempts)?;
    /// let limit = Limit::new("login", login);
    /// assert_eq!(limit.name(), "login");
    /// # Ok::<(), sluice_core::PolicyError>(())
    /// ```
    pub fn new(name: impl Into<Arc<str>>, policy: impl Into<Policy>) -> Self {
        let name = name.into();
        let policy = policy.into();
        let id = LimitId::of(&name, &policy);
        Limit { name, policy, id }
    }

    /// The limit's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The limit's name, shared (a clone costs no allocation).
    pub(crate) fn shared_name(&self) -> &Arc<str> {
        &self.name
    }

    /// The limit's policy.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The identity of this definition.
    pub fn id(&self) -> LimitId {
        self.id
    }

    /// The definition its [`LimitId`] is the hash of: the scheme, the name, the algorithm
    /// and every parameter, one per line.
    ///
    /// # Examples
    ///
    /// ```
    /// use sluice_core::{Limit, TokenBucket, TokenBucketSettings};
    /// use std::time::Duration;
    ///
    /// let bucket = TokenBucketSettings { capacity: 10, refill_amount: 1, refill_interval: Duration::from_secs(1) };
    /// let api = Limit::new("api", TokenBucket::new(bucket)?);
    /// assert_eq!(
    ///     api.definition(),
    ///     "sluice.limit.v2\nname=3:api\nalgorithm=token_bucket\n\
    ///      capacity=10\nrefill_amount=1\nrefill_interval_us=1000000\n"
    /// );
    /// # Ok::<(), sluice_core::PolicyError>(())
    /// ```
    pub fn definition(&self) -> String {
        definition(&self.name, &self.policy)
    }
}

/// The versioned, explicit encoding of a limit that its identity hashes. Every field is
/// written by name and the name is length-prefixed, so no two definitions encode alike.
fn definition(name: &str, policy: &Policy) -> String {
    let mut text = format!("{}\nname={}:{name}\nalgorithm={}\n", LimitId::SCHEME, name.len(), policy.algorithm_name());
    for (field, value) in policy.parameters() {
        text.push_str(&format!("{field}={value}\n"));
    }
    text
}

/// A stable 64-bit identity of a limit's name and parameters, so that state saved by one
/// process (a snapshot, a Redis key) is found again by the next one: the FNV-1a hash of the
/// limit's [`definition`](Limit::definition).
///
/// The definition names its scheme (`sluice.limit.v2`), so the identity depends only on
/// what the limit decides, never on how Rust prints or lays out a type. A scheme change
/// orphans every stored state and is recorded in `docs/redis.md`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LimitId(pub u64);

impl LimitId {
    /// The identity scheme: the first line of every definition.
    pub const SCHEME: &'static str = "sluice.limit.v2";

    fn of(name: &str, policy: &Policy) -> Self {
        let mut hasher = Fnv1a::default();
        hasher.write(definition(name, policy).as_bytes());
        LimitId(hasher.finish())
    }

    /// The identity the first scheme gave `name` and `policy`: a hash of the policy's
    /// `Debug` text, unstable across releases. Read only to restore snapshots of format
    /// version 1, which carry such identities; pinned by a test, so a change to the `Debug`
    /// text cannot go unnoticed.
    pub(crate) fn legacy(name: &str, policy: &Policy) -> Self {
        let mut hasher = Fnv1a::default();
        name.hash(&mut hasher);
        format!("{policy:?}").hash(&mut hasher);
        LimitId(hasher.finish())
    }
}

impl fmt::Display for LimitId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

/// FNV-1a: stable across processes and versions of Rust, unlike `DefaultHasher`.
struct Fnv1a(u64);

impl Default for Fnv1a {
    fn default() -> Self {
        Fnv1a(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for Fnv1a {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 = (self.0 ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// The caller's key (user, API key, IP): 1 to 1024 bytes of any content.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Key<'a>(&'a [u8]);

impl<'a> Key<'a> {
    /// The longest key, in bytes.
    pub const MAX_LEN: usize = 1024;

    /// Checks that `bytes` is a usable key.
    ///
    /// # Errors
    ///
    /// When `bytes` is empty or longer than [`MAX_LEN`](Self::MAX_LEN).
    pub fn new(bytes: &'a [u8]) -> Result<Self, KeyError> {
        if bytes.is_empty() || bytes.len() > Self::MAX_LEN {
            return Err(KeyError { len: bytes.len() });
        }
        Ok(Key(bytes))
    }

    /// The key's bytes.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.0
    }
}

/// A key that is empty or too long.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("key must be 1 to 1024 bytes long, got {len}")]
pub struct KeyError {
    /// The length of the refused key.
    pub len: usize,
}
