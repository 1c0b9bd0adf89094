//! Bearer tokens (issue 7): the [`TokenStore`] port, the token text format, and the one
//! authentication check every store shares.
//!
//! A token is `ar_<id>_<secret>`: `id` is 8 random bytes in lower-case hex (public: it names
//! the token in lists, logs and `token revoke`), `secret` 32 random bytes in lower-case hex
//! (shown once, when issued). A store keeps only the SHA-256 of the secret, never the secret,
//! and [`TokenStore::authenticate`] compares hashes in constant time. The randomness comes in
//! from the caller ([`TokenMaterial::from_random`]), so this crate draws none; expiry is
//! checked against a time passed in.

use std::fmt;

use agentroom_domain::ids::{PrincipalId, RoomId, Timestamp};
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::error::{BoxError, Cause};

/// The prefix every token text starts with.
pub const TOKEN_PREFIX: &str = "ar_";

/// Random bytes in a token id.
pub const ID_BYTES: usize = 8;

/// Random bytes in a token secret.
pub const SECRET_BYTES: usize = 32;

/// Random bytes [`TokenMaterial::from_random`] takes: the id's, then the secret's.
pub const RANDOM_BYTES: usize = ID_BYTES + SECRET_BYTES;

/// A token's public id: 16 lower-case hex digits.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct TokenId(String);

impl TokenId {
    /// Parses an id: exactly 16 lower-case hex digits.
    pub fn parse(text: &str) -> Result<Self, MalformedToken> {
        if text.len() == ID_BYTES * 2 && is_lower_hex(text) {
            Ok(Self(text.to_owned()))
        } else {
            Err(MalformedToken)
        }
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for TokenId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for TokenId {
    type Error = MalformedToken;
    fn try_from(text: String) -> Result<Self, MalformedToken> {
        Self::parse(&text)
    }
}

impl From<TokenId> for String {
    fn from(id: TokenId) -> String {
        id.0
    }
}

fn is_lower_hex(text: &str) -> bool {
    text.bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Text that is not a token id or a token (wrong prefix, length or alphabet).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("not an agentroom token (expected `ar_<16 hex>_<64 hex>`)")]
pub struct MalformedToken;

/// The SHA-256 of a token secret: all a store keeps of it.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretHash([u8; 32]);

impl SecretHash {
    /// The hash of `secret`.
    fn of(secret: &[u8; SECRET_BYTES]) -> Self {
        Self(Sha256::digest(secret).into())
    }

    /// A stored hash read back from its hex form.
    pub fn from_hex(text: &str) -> Option<Self> {
        let mut bytes = [0u8; 32];
        hex::decode_to_slice(text, &mut bytes).ok()?;
        Some(Self(bytes))
    }

    /// The lower-case hex form a store keeps.
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }

    /// Constant-time equality: how long it takes says nothing about where two hashes differ.
    pub fn matches(&self, other: &SecretHash) -> bool {
        self.0.ct_eq(&other.0).into()
    }
}

impl fmt::Debug for SecretHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretHash(..)")
    }
}

/// A parsed token text: its id and the hash of its secret (the secret itself is dropped).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PresentedToken {
    id: TokenId,
    hash: SecretHash,
}

impl PresentedToken {
    /// Parses `ar_<16 hex>_<64 hex>`.
    pub fn parse(text: &str) -> Result<Self, MalformedToken> {
        let rest = text.strip_prefix(TOKEN_PREFIX).ok_or(MalformedToken)?;
        let (id, secret) = rest.split_once('_').ok_or(MalformedToken)?;
        let id = TokenId::parse(id)?;
        if secret.len() != SECRET_BYTES * 2 || !is_lower_hex(secret) {
            return Err(MalformedToken);
        }
        let mut bytes = [0u8; SECRET_BYTES];
        hex::decode_to_slice(secret, &mut bytes).map_err(|_| MalformedToken)?;
        Ok(Self {
            id,
            hash: SecretHash::of(&bytes),
        })
    }

    /// The token's id.
    pub fn id(&self) -> &TokenId {
        &self.id
    }

    /// The hash of its secret.
    pub fn hash(&self) -> &SecretHash {
        &self.hash
    }
}

/// A fresh token's id and secret, made from random bytes the caller draws (`getrandom`).
pub struct TokenMaterial {
    id: TokenId,
    secret: [u8; SECRET_BYTES],
}

impl TokenMaterial {
    /// The id from the first [`ID_BYTES`], the secret from the rest.
    pub fn from_random(bytes: [u8; RANDOM_BYTES]) -> Self {
        let (id, rest) = bytes.split_at(ID_BYTES);
        let mut secret = [0u8; SECRET_BYTES];
        secret.copy_from_slice(rest);
        Self {
            id: TokenId(hex::encode(id)),
            secret,
        }
    }
}

impl fmt::Debug for TokenMaterial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenMaterial")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// What a token is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewToken {
    /// The Room it acts in; it never authenticates for another.
    pub room: RoomId,
    /// Whom it authenticates.
    pub principal: PrincipalId,
    /// When it was issued.
    pub created_at: Timestamp,
    /// From when on it no longer authenticates; `None` never expires.
    pub expires_at: Option<Timestamp>,
    /// A note for people (`laptop`, `ci`), never a secret.
    pub label: Option<String>,
}

/// A token as stored, without its secret or hash: safe to list and log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TokenRecord {
    /// Its id.
    pub id: TokenId,
    /// Its Room.
    pub room: RoomId,
    /// Its principal.
    pub principal: PrincipalId,
    /// When it was issued.
    pub created_at: Timestamp,
    /// When it expires, if ever.
    pub expires_at: Option<Timestamp>,
    /// When it was revoked, if it was.
    pub revoked_at: Option<Timestamp>,
    /// Its label.
    pub label: Option<String>,
}

/// A token just issued: its record and the text, shown once and never stored.
pub struct IssuedToken {
    /// The stored record.
    pub record: TokenRecord,
    text: String,
}

impl IssuedToken {
    /// The token text (`ar_<id>_<secret>`) to hand to its holder, once.
    pub fn text(&self) -> &str {
        &self.text
    }
}

impl fmt::Debug for IssuedToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IssuedToken")
            .field("record", &self.record)
            .finish_non_exhaustive()
    }
}

/// Who a valid token authenticates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authenticated {
    /// The token's Room.
    pub room: RoomId,
    /// Its principal.
    pub principal: PrincipalId,
    /// Its id (for logs).
    pub token_id: TokenId,
}

/// Why a token store failed. The variants that stand for a failure below the store keep the
/// error they came from as their `source()`, as [`StoreError`](crate::StoreError) does.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// The database is not migrated to what this binary expects (D5).
    #[error("the database is not migrated ({context}{}); run `agentroom migrate up` first", Cause(.source))]
    NotMigrated {
        /// What is missing or differs.
        context: String,
        /// The database's error that showed it, if one did.
        #[source]
        source: Option<BoxError>,
    },
    /// The database failed.
    #[error("database: {context}: {source}")]
    Database {
        /// What was being done.
        context: String,
        /// The driver's error.
        #[source]
        source: BoxError,
    },
    /// Something stored cannot be read back.
    #[error("stored token data cannot be read: {context}{}", Cause(.source))]
    Corrupt {
        /// What could not be read.
        context: String,
        /// The parser's error, if one failed.
        #[source]
        source: Option<BoxError>,
    },
    /// A token with this id exists already (random ids collide only by a bug).
    #[error("token {0} exists already")]
    Exists(TokenId),
    /// No token has this id.
    #[error("no token has the id {0}")]
    Unknown(TokenId),
}

impl TokenError {
    /// The database failed while doing `context`.
    pub fn database(context: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Self::Database {
            context: context.into(),
            source: source.into(),
        }
    }

    /// `context` cannot be read back: `source` failed to parse it.
    pub fn corrupt(context: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Self::Corrupt {
            context: context.into(),
            source: Some(source.into()),
        }
    }

    /// Stored token data breaks an invariant (`context` says which); no parser failed.
    pub fn inconsistent(context: impl Into<String>) -> Self {
        Self::Corrupt {
            context: context.into(),
            source: None,
        }
    }
}

/// Why a token does not authenticate. The reasons are told apart for logs only: the HTTP
/// edge answers every one of them with the same 401.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// Not a token at all.
    #[error("malformed token")]
    Malformed,
    /// No token has this id, or its secret does not match.
    #[error("unknown token")]
    Unknown,
    /// The token expired.
    #[error("token {0} expired")]
    Expired(TokenId),
    /// The token was revoked.
    #[error("token {0} was revoked")]
    Revoked(TokenId),
    /// The store failed: not the caller's fault (the edge answers 5xx).
    #[error(transparent)]
    Store(#[from] TokenError),
}

/// Where tokens are kept. Stores implement the four storage methods; issuing and
/// authenticating are provided on top of them, so every store checks tokens the same way.
#[async_trait]
pub trait TokenStore: Send + Sync {
    /// Stores a new token's record with the hash of its secret.
    async fn insert_token(&self, record: &TokenRecord, hash: &SecretHash)
    -> Result<(), TokenError>;

    /// A token's record and secret hash, by id.
    async fn find_token(
        &self,
        id: &TokenId,
    ) -> Result<Option<(TokenRecord, SecretHash)>, TokenError>;

    /// Marks a token revoked at `at` (a second revocation keeps the first time) and returns
    /// its record; [`TokenError::Unknown`] if no token has this id.
    async fn revoke_token(&self, id: &TokenId, at: Timestamp) -> Result<TokenRecord, TokenError>;

    /// The tokens of a Room, oldest first, without secrets.
    async fn list_tokens(&self, room: &RoomId) -> Result<Vec<TokenRecord>, TokenError>;

    /// Marks revoked at `at` every token of `principal` in `room` created at or before
    /// `issued_until` and not revoked yet (one already revoked keeps its first time; tokens of
    /// other principals, other Rooms, or created later are untouched), in one statement;
    /// returns how many it revoked now. T6: a revoked member's tokens end with its membership,
    /// so adding the principal again later never revives them, while a token issued after
    /// `issued_until` (to the member added again) stays valid. Revoking none is not an error.
    async fn revoke_principal_tokens(
        &self,
        room: &RoomId,
        principal: &PrincipalId,
        issued_until: Timestamp,
        at: Timestamp,
    ) -> Result<u64, TokenError>;

    /// Issues a token from `material`: stores its record and the hash of its secret, and
    /// returns the text, which exists nowhere else.
    async fn issue_token(
        &self,
        new: NewToken,
        material: TokenMaterial,
    ) -> Result<IssuedToken, TokenError> {
        let record = TokenRecord {
            id: material.id.clone(),
            room: new.room,
            principal: new.principal,
            created_at: new.created_at,
            expires_at: new.expires_at,
            revoked_at: None,
            label: new.label,
        };
        self.insert_token(&record, &SecretHash::of(&material.secret))
            .await?;
        let text = format!(
            "{TOKEN_PREFIX}{}_{}",
            material.id,
            hex::encode(material.secret)
        );
        Ok(IssuedToken { record, text })
    }

    /// Who `text` authenticates at `now`: a well-formed token whose secret hash matches (in
    /// constant time), not revoked, and not expired (`now` before its expiry).
    async fn authenticate(&self, text: &str, now: Timestamp) -> Result<Authenticated, AuthError> {
        let presented = PresentedToken::parse(text).map_err(|_| AuthError::Malformed)?;
        let Some((record, hash)) = self.find_token(presented.id()).await? else {
            return Err(AuthError::Unknown);
        };
        if !hash.matches(presented.hash()) {
            return Err(AuthError::Unknown);
        }
        if record.revoked_at.is_some() {
            return Err(AuthError::Revoked(record.id));
        }
        if record.expires_at.is_some_and(|expiry| now >= expiry) {
            return Err(AuthError::Expired(record.id));
        }
        Ok(Authenticated {
            room: record.room,
            principal: record.principal,
            token_id: record.id,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_text_round_trips_through_parse() {
        let material = TokenMaterial::from_random([7; RANDOM_BYTES]);
        let text = format!("ar_{}_{}", material.id, hex::encode(material.secret));
        let presented = PresentedToken::parse(&text).unwrap();
        assert_eq!(presented.id(), &material.id);
        assert!(presented.hash().matches(&SecretHash::of(&material.secret)));
        assert_eq!(text.len(), 3 + 16 + 1 + 64);
    }

    #[test]
    fn malformed_tokens_are_refused() {
        let good = format!("ar_{}_{}", "a".repeat(16), "b".repeat(64));
        assert!(PresentedToken::parse(&good).is_ok());
        for bad in [
            String::new(),
            "ar_".to_owned(),
            format!("xx_{}_{}", "a".repeat(16), "b".repeat(64)),
            format!("ar_{}_{}", "a".repeat(15), "b".repeat(64)),
            format!("ar_{}_{}", "a".repeat(16), "b".repeat(63)),
            format!("ar_{}_{}", "A".repeat(16), "b".repeat(64)),
            format!("ar_{}_{}", "a".repeat(16), "g".repeat(64)),
            format!("ar_{}{}", "a".repeat(16), "b".repeat(64)),
        ] {
            assert_eq!(PresentedToken::parse(&bad), Err(MalformedToken), "{bad}");
        }
    }
}
