//! The admin token, kept only as its SHA-256 digest, so that checking a presented token
//! takes a time that tells nothing of the configured one.

use sha2::{Digest, Sha256};
use std::fmt;
use subtle::ConstantTimeEq;

/// The secret that requests to the admin endpoints present (`Authorization: Bearer <token>`).
///
/// A plain byte comparison stops at the first difference, and at once when the lengths
/// differ, so its timing reveals the token's length and, byte by byte, its content. Here
/// both sides are SHA-256 digests (32 bytes, whatever the tokens' lengths; the configured
/// one computed once, at start-up) compared in constant time: the time taken depends only
/// on the length of what the client sent. `Debug` shows no part of the token.
#[derive(Clone)]
pub(crate) struct AdminToken {
    digest: [u8; 32],
}

impl AdminToken {
    /// The token `secret`.
    pub(crate) fn new(secret: &str) -> AdminToken {
        AdminToken { digest: Sha256::digest(secret.as_bytes()).into() }
    }

    /// Whether `presented` is the token.
    pub(crate) fn matches(&self, presented: &str) -> bool {
        let presented: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        presented.ct_eq(&self.digest).into()
    }
}

impl fmt::Debug for AdminToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AdminToken(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_only_the_same_token() {
        let token = AdminToken::new("s3cret");
        assert!(token.matches("s3cret"));
        for other in ["", "s3cre", "s3crets", "S3CRET", "s3cret ", "guess"] {
            assert!(!token.matches(other), "{other:?} matched");
        }
    }

    #[test]
    fn debug_output_hides_the_token() {
        let shown = format!("{:?}", Some(AdminToken::new("s3cret")));
        assert!(!shown.contains("s3cret"), "{shown}");
    }
}
