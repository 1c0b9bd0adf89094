//! The Room's memory (M1): list its entries, add one with its provenance, correct one (its
//! earlier texts stay in its history), retract one (it stays, with who, when and why). Each
//! change is one decided input with its own revision; the domain decides who may
//! (`memory.manage`) and refuses what the Room does not have. Current entries reach the
//! reasoner with their provenance (`context`, C1); retracted ones never do.

use agentroom_ports::domain::engine::MemoryChange;
use agentroom_ports::domain::ids::{MemoryEntryId, PrincipalId, RoomId};
use agentroom_ports::domain::memory::{Memory, Provenance};

use crate::{Coordinator, CoordinatorError, InputId, OperatorInput, Outcome};

impl Coordinator {
    /// The Room's memory as stored now, retracted entries included (with their retraction).
    pub async fn memory(&self, room: &RoomId) -> Result<Memory, CoordinatorError> {
        Ok(self.room(room).await?.state.memory().clone())
    }

    /// Adds an entry saying `text`, from `provenance` (M1).
    pub async fn add_memory(
        &self,
        room: &RoomId,
        id: InputId,
        by: PrincipalId,
        text: String,
        provenance: Provenance,
    ) -> Result<Outcome, CoordinatorError> {
        self.change_memory(room, id, by, MemoryChange::Add { text, provenance })
            .await
    }

    /// Corrects `entry` to say `text` from now on; its earlier texts stay (M1).
    pub async fn correct_memory(
        &self,
        room: &RoomId,
        id: InputId,
        by: PrincipalId,
        entry: MemoryEntryId,
        text: String,
    ) -> Result<Outcome, CoordinatorError> {
        self.change_memory(room, id, by, MemoryChange::Correct { entry, text })
            .await
    }

    /// Retracts `entry` for `why`: it stays, and never reaches a model again (M1).
    pub async fn retract_memory(
        &self,
        room: &RoomId,
        id: InputId,
        by: PrincipalId,
        entry: MemoryEntryId,
        why: String,
    ) -> Result<Outcome, CoordinatorError> {
        self.change_memory(room, id, by, MemoryChange::Retract { entry, why })
            .await
    }

    async fn change_memory(
        &self,
        room: &RoomId,
        id: InputId,
        by: PrincipalId,
        change: MemoryChange,
    ) -> Result<Outcome, CoordinatorError> {
        self.submit(room, id, OperatorInput::Memory { by, change })
            .await
    }
}
