//! An in-memory [`TokenStore`] (feature `test-util`): the reference the token conformance
//! suite checks itself against. Never used by a binary or an end-to-end test.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use agentroom_domain::ids::{PrincipalId, RoomId, Timestamp};
use async_trait::async_trait;

use crate::tokens::{SecretHash, TokenError, TokenId, TokenRecord, TokenStore};

/// Tokens in memory, keyed by id.
#[derive(Debug, Default)]
pub struct MemoryTokens {
    rows: Mutex<BTreeMap<TokenId, (TokenRecord, SecretHash, u64)>>,
}

impl MemoryTokens {
    /// No tokens.
    pub fn new() -> Self {
        Self::default()
    }

    fn rows(&self) -> MutexGuard<'_, BTreeMap<TokenId, (TokenRecord, SecretHash, u64)>> {
        self.rows.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[async_trait]
impl TokenStore for MemoryTokens {
    async fn insert_token(
        &self,
        record: &TokenRecord,
        hash: &SecretHash,
    ) -> Result<(), TokenError> {
        let mut rows = self.rows();
        if rows.contains_key(&record.id) {
            return Err(TokenError::Exists(record.id.clone()));
        }
        let order = u64::try_from(rows.len()).unwrap_or(u64::MAX);
        rows.insert(record.id.clone(), (record.clone(), hash.clone(), order));
        Ok(())
    }

    async fn find_token(
        &self,
        id: &TokenId,
    ) -> Result<Option<(TokenRecord, SecretHash)>, TokenError> {
        Ok(self
            .rows()
            .get(id)
            .map(|(record, hash, _)| (record.clone(), hash.clone())))
    }

    async fn revoke_token(&self, id: &TokenId, at: Timestamp) -> Result<TokenRecord, TokenError> {
        let mut rows = self.rows();
        let (record, _, _) = rows
            .get_mut(id)
            .ok_or_else(|| TokenError::Unknown(id.clone()))?;
        record.revoked_at = record.revoked_at.or(Some(at));
        Ok(record.clone())
    }

    async fn list_tokens(&self, room: &RoomId) -> Result<Vec<TokenRecord>, TokenError> {
        let mut found: Vec<_> = self
            .rows()
            .values()
            .filter(|(record, _, _)| &record.room == room)
            .map(|(record, _, order)| (record.created_at, *order, record.clone()))
            .collect();
        found.sort_by_key(|(created, order, _)| (*created, *order));
        Ok(found.into_iter().map(|(_, _, record)| record).collect())
    }

    async fn revoke_principal_tokens(
        &self,
        room: &RoomId,
        principal: &PrincipalId,
        issued_until: Timestamp,
        at: Timestamp,
    ) -> Result<u64, TokenError> {
        let mut revoked = 0u64;
        for (record, _, _) in self.rows().values_mut() {
            if &record.room == room
                && &record.principal == principal
                && record.created_at <= issued_until
                && record.revoked_at.is_none()
            {
                record.revoked_at = Some(at);
                revoked += 1;
            }
        }
        Ok(revoked)
    }
}

/// The whole in-memory store keeps its tokens in a [`MemoryTokens`].
#[async_trait]
impl TokenStore for crate::memory::MemoryStore {
    async fn insert_token(
        &self,
        record: &TokenRecord,
        hash: &SecretHash,
    ) -> Result<(), TokenError> {
        self.tokens.insert_token(record, hash).await
    }

    async fn find_token(
        &self,
        id: &TokenId,
    ) -> Result<Option<(TokenRecord, SecretHash)>, TokenError> {
        self.tokens.find_token(id).await
    }

    async fn revoke_token(&self, id: &TokenId, at: Timestamp) -> Result<TokenRecord, TokenError> {
        self.tokens.revoke_token(id, at).await
    }

    async fn list_tokens(&self, room: &RoomId) -> Result<Vec<TokenRecord>, TokenError> {
        self.tokens.list_tokens(room).await
    }

    async fn revoke_principal_tokens(
        &self,
        room: &RoomId,
        principal: &PrincipalId,
        issued_until: Timestamp,
        at: Timestamp,
    ) -> Result<u64, TokenError> {
        self.tokens
            .revoke_principal_tokens(room, principal, issued_until, at)
            .await
    }
}
