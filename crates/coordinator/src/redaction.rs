//! Redaction (issue 18): the owner (`content.redact`) removes an artifact's content or a
//! memory entry's text that holds a secret or personal data. One decided input with its own
//! revision: the domain decides who may and what can be redacted, and the store removes the
//! content and scrubs the texts from the Room's history in the same commit.

use agentroom_ports::StoredContent;
use agentroom_ports::domain::artifact::ContentDigest;
use agentroom_ports::domain::ids::{PrincipalId, RoomId};
use agentroom_ports::domain::redaction::{RedactionTarget, Redactions};

use crate::{Coordinator, CoordinatorError, InputId, OperatorInput, Outcome};

impl Coordinator {
    /// The Room's redaction records, oldest first.
    pub async fn redactions(&self, room: &RoomId) -> Result<Redactions, CoordinatorError> {
        Ok(self.room(room).await?.state.redactions().clone())
    }

    /// The content `digest` addresses in `room`, as stored (none once redacted).
    pub async fn content(
        &self,
        room: &RoomId,
        digest: &ContentDigest,
    ) -> Result<Option<StoredContent>, CoordinatorError> {
        Ok(self.shared.store.content(room, digest).await?)
    }

    /// Redacts `target` for `reason`: its content leaves the store and the Room's history,
    /// and a redaction record takes its place.
    pub async fn redact(
        &self,
        room: &RoomId,
        id: InputId,
        by: PrincipalId,
        target: RedactionTarget,
        reason: String,
    ) -> Result<Outcome, CoordinatorError> {
        self.submit(room, id, OperatorInput::Redact { by, target, reason })
            .await
    }
}
