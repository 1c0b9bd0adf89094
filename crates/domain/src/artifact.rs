//! Content addresses: an artifact's body or a source's content is stored once per Room under
//! the SHA-256 of its bytes, immutable (DESIGN.md "Artifact and source"); the Room's state
//! names it by that digest, never holds it.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// `sha256:` and the 64 lowercase hex digits of the SHA-256 of some content.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ContentDigest(String);

/// Text that is not a content digest.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a content digest (`sha256:` and 64 lowercase hex digits)")]
pub struct NotADigest(pub String);

const PREFIX: &str = "sha256:";

impl ContentDigest {
    /// The digest of `content`.
    pub fn of(content: &[u8]) -> Self {
        Self(format!("{PREFIX}{}", hex::encode(Sha256::digest(content))))
    }

    /// Whether `content` is what this digest addresses.
    pub fn addresses(&self, content: &[u8]) -> bool {
        *self == Self::of(content)
    }

    /// Its text, `sha256:…`.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for ContentDigest {
    type Err = NotADigest;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let hex = text
            .strip_prefix(PREFIX)
            .filter(|hex| {
                hex.len() == 64
                    && hex
                        .bytes()
                        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
            })
            .ok_or_else(|| NotADigest(text.to_owned()))?;
        Ok(Self(format!("{PREFIX}{hex}")))
    }
}

impl TryFrom<String> for ContentDigest {
    type Error = NotADigest;

    fn try_from(text: String) -> Result<Self, Self::Error> {
        text.parse()
    }
}

impl From<ContentDigest> for String {
    fn from(digest: ContentDigest) -> Self {
        digest.0
    }
}

impl fmt::Display for ContentDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_digest_addresses_exactly_its_content_and_parses_back() {
        let digest = ContentDigest::of(b"hello");
        assert_eq!(
            digest.as_str(),
            "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
        );
        assert!(digest.addresses(b"hello"));
        assert!(!digest.addresses(b"hello "));
        assert_eq!(digest.as_str().parse::<ContentDigest>(), Ok(digest.clone()));
        let json = serde_json::to_string(&digest).unwrap();
        assert_eq!(
            serde_json::from_str::<ContentDigest>(&json).unwrap(),
            digest
        );
    }

    #[test]
    fn anything_else_is_not_a_digest() {
        for bad in [
            "",
            "sha256:",
            "sha256:2CF24DBA5FB0A30E26E83B2AC5B9E29E1B161E5C1FA7425E73043362938B9824",
            "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b982",
            "md5:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824",
            "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824",
        ] {
            assert_eq!(
                bad.parse::<ContentDigest>(),
                Err(NotADigest(bad.to_owned())),
                "{bad}"
            );
            assert!(serde_json::from_str::<ContentDigest>(&format!("\"{bad}\"")).is_err());
        }
    }
}
