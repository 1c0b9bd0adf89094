//! The Room-scoped queries every edge reads through the service (REST, A2E, the operator CLI,
//! the web board): the ledger and its breakdown, the decision log, delivered notifications,
//! the Room's operations and what an operator confirmed about one. Each view is one store
//! query for the Room it names, never a read of every Room's rows filtered at the edge.

use std::collections::{BTreeMap, HashMap};

use agentroom_ports::domain::artifact::ContentDigest;
use agentroom_ports::domain::ids::{NotificationId, ObjectiveId, OperationId, RoomId, Timestamp};
use agentroom_ports::domain::ledger::LedgerEntry;
use agentroom_ports::domain::state::RoomState;
use agentroom_ports::tokens::{AuthError, Authenticated};
use agentroom_ports::{
    Delivered, HistoryEntry, OperationFilter, OperationRecord, OperationStatus, OutboxPosition,
    Resolution, Revision, RoomStore, TokenStore, WorkflowStore,
};

use crate::{Coordinator, CoordinatorError};

/// What the Room has spent, broken down (B2, B3): the settled charges summed by objective,
/// role, principal and model (the model the receipt names), and the ledger entries in order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BudgetBreakdown {
    /// Micros charged per objective (`(none)` for calls outside one).
    pub by_objective: BTreeMap<String, i64>,
    /// Micros charged per call role.
    pub by_role: BTreeMap<String, i64>,
    /// Micros charged per principal called (`(none)` for the reasoner).
    pub by_principal: BTreeMap<String, i64>,
    /// Micros charged per model (`(unnamed)` when the receipt names none).
    pub by_model: BTreeMap<String, i64>,
    /// The ledger entries, in order.
    pub entries: Vec<LedgerEntry>,
}

impl BudgetBreakdown {
    /// Sums the settled charges of `entries`, reading each one's operation from `operations`
    /// (`(unknown)` when it is not there).
    fn of(entries: Vec<LedgerEntry>, operations: &[OperationRecord], state: &RoomState) -> Self {
        let by_op: HashMap<OperationId, &OperationRecord> =
            operations.iter().map(|r| (r.op(), r)).collect();
        // The reasoner calls that interpreted an owner message before its objective existed
        // are booked to the objective it became.
        let became: HashMap<OperationId, ObjectiveId> = state
            .objectives()
            .iter()
            .flat_map(|o| o.intake_calls().iter().map(move |op| (*op, o.id())))
            .collect();
        let mut breakdown = Self::default();
        for entry in &entries {
            let (op, charged) = match entry {
                LedgerEntry::Settled { op, charged, .. } => (op, charged),
                // A refused settlement charged the whole reservation (B3, B5).
                LedgerEntry::SettlementRefused { op, reserved, .. } => (op, reserved),
                _ => continue,
            };
            let keys = match by_op.get(op) {
                Some(record) => [
                    record
                        .request
                        .objective
                        .or_else(|| became.get(op).copied())
                        .map_or_else(|| "(none)".to_owned(), |o| o.to_string()),
                    record.request.role.as_str().to_owned(),
                    record
                        .request
                        .principal
                        .as_ref()
                        .map_or_else(|| "(none)".to_owned(), ToString::to_string),
                    record
                        .receipt
                        .as_ref()
                        .and_then(|receipt| receipt.model.clone())
                        .unwrap_or_else(|| "(unnamed)".to_owned()),
                ],
                None => ["(unknown)", "(unknown)", "(unknown)", "(unknown)"].map(str::to_owned),
            };
            let [objective, role, principal, model] = keys;
            for (map, key) in [
                (&mut breakdown.by_objective, objective),
                (&mut breakdown.by_role, role),
                (&mut breakdown.by_principal, principal),
                (&mut breakdown.by_model, model),
            ] {
                let sum = map.entry(key).or_insert(0);
                *sum = sum.saturating_add(charged.micros());
            }
        }
        breakdown.entries = entries;
        breakdown
    }
}

/// What became of an operator's resolution of an operation (D2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResolveOutcome {
    /// Recorded; the Room applies it at its coordinator's next recovery.
    Recorded,
    /// The operation is neither uncertain nor dead-lettered: nothing was changed.
    NotResolvable(OperationStatus),
}

impl Coordinator {
    /// The text stored in `room` under each of `digests` that is there (content is immutable
    /// and checked against its address by the store; what is not text is left out).
    pub async fn texts(
        &self,
        room: &RoomId,
        digests: impl IntoIterator<Item = &ContentDigest>,
    ) -> Result<BTreeMap<ContentDigest, String>, CoordinatorError> {
        let mut texts = BTreeMap::new();
        for digest in digests {
            if texts.contains_key(digest) {
                continue;
            }
            if let Some(stored) = self.shared.store.content(room, digest).await?
                && let Ok(text) = String::from_utf8(stored.bytes)
            {
                texts.insert(digest.clone(), text);
            }
        }
        Ok(texts)
    }

    /// Who the bearer token `text` authenticates now (its Room and principal).
    pub async fn authenticate(&self, text: &str) -> Result<Authenticated, AuthError> {
        TokenStore::authenticate(&*self.shared.store, text, self.shared.clock.now()).await
    }

    /// Now, by the host's clock.
    pub fn now(&self) -> Timestamp {
        self.shared.clock.now()
    }

    /// The Room's ledger entries, in order.
    pub async fn ledger(&self, room: &RoomId) -> Result<Vec<LedgerEntry>, CoordinatorError> {
        Ok(RoomStore::ledger(&*self.shared.store, room).await?)
    }

    /// The Room's ledger with its charges broken down by objective, role, principal and model:
    /// the ledger, the Room's operations and its closed objectives' records, a query each
    /// (records a page at a time), whatever the number of entries.
    pub async fn budget(&self, room: &RoomId) -> Result<BudgetBreakdown, CoordinatorError> {
        let entries = self.ledger(room).await?;
        let operations = self.room_operations(room, None).await?;
        // Calls are booked to the objective they served, closed ones included.
        let stored = self.room_with_history(room).await?;
        Ok(BudgetBreakdown::of(entries, &operations, &stored.state))
    }

    /// The operations of `room` (of `status` only, when given), oldest first.
    pub async fn room_operations(
        &self,
        room: &RoomId,
        status: Option<OperationStatus>,
    ) -> Result<Vec<OperationRecord>, CoordinatorError> {
        Ok(WorkflowStore::room_operations(&*self.shared.store, room, status).await?)
    }

    /// Every Room's operations on this store that `filter` selects, oldest first (the host's
    /// metrics, the operator's list).
    pub async fn operations(
        &self,
        filter: OperationFilter,
    ) -> Result<Vec<OperationRecord>, CoordinatorError> {
        Ok(WorkflowStore::operations(&*self.shared.store, filter).await?)
    }

    /// Operation `op` if it belongs to `room` (another Room's operation is not found).
    pub async fn operation(
        &self,
        room: &RoomId,
        op: OperationId,
    ) -> Result<Option<OperationRecord>, CoordinatorError> {
        Ok(WorkflowStore::operation(&*self.shared.store, op)
            .await?
            .filter(|record| &record.room == room))
    }

    /// Records an operator's resolution of `room`'s uncertain or dead-lettered operation
    /// `op` (D2); `None` when the Room has no such operation.
    pub async fn resolve(
        &self,
        room: &RoomId,
        op: OperationId,
        resolution: &Resolution,
    ) -> Result<Option<ResolveOutcome>, CoordinatorError> {
        let Some(record) = self.operation(room, op).await? else {
            return Ok(None);
        };
        self.record_resolution(&record, resolution).await.map(Some)
    }

    /// Records an operator's resolution of operation `op`, whichever Room it belongs to (the
    /// host operator's command); `None` when the store has no such operation.
    pub async fn resolve_on_host(
        &self,
        op: OperationId,
        resolution: &Resolution,
    ) -> Result<Option<(OperationRecord, ResolveOutcome)>, CoordinatorError> {
        let Some(record) = WorkflowStore::operation(&*self.shared.store, op).await? else {
            return Ok(None);
        };
        let outcome = self.record_resolution(&record, resolution).await?;
        Ok(Some((record, outcome)))
    }

    /// The resolution, recorded once; the Room applies it at the next recovery (D2).
    async fn record_resolution(
        &self,
        record: &OperationRecord,
        resolution: &Resolution,
    ) -> Result<ResolveOutcome, CoordinatorError> {
        if WorkflowStore::resolve(&*self.shared.store, record.op(), resolution).await? {
            Ok(ResolveOutcome::Recorded)
        } else {
            Ok(ResolveOutcome::NotResolvable(record.status))
        }
    }

    /// Up to `limit` history rows of the Room after revision `after` (the decision log).
    pub async fn history(
        &self,
        room: &RoomId,
        after: Revision,
        limit: usize,
    ) -> Result<Vec<HistoryEntry>, CoordinatorError> {
        Ok(RoomStore::history(&*self.shared.store, room, after, limit).await?)
    }

    /// Up to `limit` notifications of the Room delivered after position `after`.
    pub async fn delivered(
        &self,
        room: &RoomId,
        after: i64,
        limit: usize,
    ) -> Result<Vec<Delivered>, CoordinatorError> {
        Ok(RoomStore::delivered(&*self.shared.store, room, after, limit).await?)
    }

    /// Where a notification of the Room is in the outbox.
    pub async fn outbox_position(
        &self,
        room: &RoomId,
        id: NotificationId,
    ) -> Result<Option<OutboxPosition>, CoordinatorError> {
        Ok(RoomStore::outbox_position(&*self.shared.store, room, id).await?)
    }
}
