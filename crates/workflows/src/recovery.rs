//! Recovery on start (D2, D6): every open operation is classified from durable evidence only,
//! and what the Rooms must decide is returned, never applied here. Receipted but not applied:
//! the receipt is due. In flight with an expired lease and no receipt: claimed (a new
//! generation, an attempt counted), marked uncertain and never called again. Uncertain: the
//! `Reconciler` is asked; a confirmed outcome is due, an unknown one stays uncertain until the
//! attempts bound dead-letters it. Resolved by an operator and not yet applied: the
//! resolution is due as the reconciliation it confirms. Live leases of other runners are left
//! alone.

use std::collections::BTreeSet;

use agentroom_ports::domain::engine::{CallEvent, Charge, Reconciliation};
use agentroom_ports::domain::ids::OperationId;
use agentroom_ports::{
    OperationFilter, OperationRecord, OperationStatus, Resolution, ResolutionOutcome,
};

use crate::crash::{self, crash_point};
use crate::error::WorkflowError;
use crate::lease;
use crate::runner::Runner;

/// What one recovery pass did, operation by operation.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Receipted operations whose receipt the Room took.
    pub delivered: Vec<OperationId>,
    /// Receipted operations the Room did not take (handed over again next time).
    pub undelivered: Vec<OperationId>,
    /// Expired in-flight operations without receipt: claimed and marked uncertain.
    pub claimed: Vec<OperationId>,
    /// Uncertain operations whose outcome the reconciler confirmed and the Room took.
    pub reconciled: Vec<OperationId>,
    /// Operations still uncertain (reservation held).
    pub uncertain: Vec<OperationId>,
    /// Operations moved to the dead letters now.
    pub dead_lettered: Vec<OperationId>,
    /// In-flight operations under a live lease: left alone.
    pub live: Vec<OperationId>,
    /// Operations an operator resolved whose resolution the Room applied now.
    pub resolved: Vec<OperationId>,
}

/// Why an operation is due.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    /// Its receipt is recorded and the Room has not applied it.
    Receipted,
    /// It is uncertain and nobody confirmed what it did (it stays so, or was dead-lettered
    /// now): the Room must know it is.
    Uncertain,
    /// It is uncertain and the reconciler confirmed what it did.
    Confirmed,
    /// An operator resolved it and the Room has not applied the resolution.
    Resolved,
}

/// An operation whose durable evidence the Room must decide: its call events, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Due {
    /// The operation as stored.
    pub record: OperationRecord,
    /// Why it is due.
    pub found: Found,
    /// What the Room decides, in order.
    pub events: Vec<CallEvent>,
}

/// One recovery pass: what it did on the store, and what the Rooms must decide now.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Recovery {
    /// Claims, live leases, calls still uncertain and dead letters; the rest is filled in
    /// with [`Recovery::taken`] as the Rooms decide what is due.
    pub report: RecoveryReport,
    /// What the Rooms must decide, in the order found.
    pub due: Vec<Due>,
}

impl Recovery {
    /// Takes the operations due, to decide them.
    pub fn take_due(&mut self) -> Vec<Due> {
        std::mem::take(&mut self.due)
    }

    /// The Room decided `due`'s events (`taken`: the last of them was applied), or could not
    /// (`false`: the evidence stays, the next pass hands it over again).
    pub fn taken(&mut self, due: &Due, taken: bool) {
        let op = due.record.op();
        let report = &mut self.report;
        match (due.found, taken) {
            (Found::Receipted, true) => report.delivered.push(op),
            (Found::Receipted, false) => report.undelivered.push(op),
            (Found::Confirmed, true) => report.reconciled.push(op),
            (Found::Confirmed, false) => report.uncertain.push(op),
            (Found::Resolved, true) => report.resolved.push(op),
            (Found::Resolved, false) | (Found::Uncertain, _) => {}
        }
    }
}

/// What an operator's resolution confirms about a call (D2): it ran, and without its usage
/// the whole reservation is charged (B3); or it did not take effect, and the reservation is
/// released so the work is open again.
pub fn resolution_outcome(resolution: &Resolution) -> Reconciliation {
    match resolution.outcome {
        ResolutionOutcome::Succeeded => Reconciliation::ExecutedWithoutResult {
            charge: Charge::NoUsage,
        },
        ResolutionOutcome::Failed => Reconciliation::NotExecuted,
    }
}

impl Runner {
    /// Classifies every open operation as far as durable evidence allows and returns what the
    /// Rooms must decide. The provider is never called.
    #[tracing::instrument(skip_all, fields(runner = self.config.runner()))]
    pub async fn recover(&self) -> Result<Recovery, WorkflowError> {
        let mut recovery = Recovery::default();
        let claimed = self.claim_and_mark_uncertain(&mut recovery.report).await?;
        let open = lease::retrying(&self.config, "operations", || {
            self.store.operations(OperationFilter::Open)
        })
        .await?;
        for record in open {
            let cause = claimed.contains(&record.op()).then(|| {
                "no receipt and its lease expired: the process running it stopped".to_owned()
            });
            match record.status {
                OperationStatus::Receipted => {
                    if let Some(receipt) = &record.receipt {
                        let events = vec![receipt.event()];
                        recovery.due.push(Due {
                            record,
                            found: Found::Receipted,
                            events,
                        });
                    }
                }
                OperationStatus::InFlight => {
                    if record.lease_expired {
                        // It expired after the claims: the next pass takes it.
                        tracing::info!(op = %record.op(), "lease expired during recovery");
                    } else {
                        recovery.report.live.push(record.op());
                    }
                }
                OperationStatus::Uncertain => {
                    self.reconcile(record, cause, &mut recovery).await?;
                }
                OperationStatus::DeadLetter
                | OperationStatus::Applied
                | OperationStatus::Resolved => {}
            }
        }
        self.resolutions(&mut recovery).await?;
        tracing::info!(report = ?recovery.report, due = recovery.due.len(), "recovery classified");
        Ok(recovery)
    }

    /// Claims every expired in-flight operation without receipt and marks it uncertain, a
    /// batch per write (issue 21: one commit per batch, not two per operation).
    async fn claim_and_mark_uncertain(
        &self,
        report: &mut RecoveryReport,
    ) -> Result<BTreeSet<OperationId>, WorkflowError> {
        let mut claimed = BTreeSet::new();
        loop {
            let batch = lease::retrying(&self.config, "claim_expired_uncertain", || {
                self.store
                    .claim_expired_uncertain(self.config.lease_grant(), self.config.claim_batch())
            })
            .await?;
            if batch.is_empty() {
                return Ok(claimed);
            }
            // The claim and the uncertain mark are one write: a crash at either point leaves
            // the batch uncertain, and the next pass reconciles it (counting an attempt).
            crash_point(crash::AFTER_CLAIM);
            crash_point(crash::AFTER_UNCERTAIN);
            for claim in batch {
                let op = claim.record.op();
                tracing::warn!(%op, generation = claim.generation, "no receipt and an expired lease: uncertain, never replayed");
                claimed.insert(op);
                report.claimed.push(op);
            }
        }
    }

    /// Each operator resolution the Room has not applied yet is due as the reconciliation it
    /// confirms; the Room's commit marks the operation applied, so a resolution is applied
    /// once. Until then the Room holds the reservation. The Room may not know the call is
    /// uncertain yet (its owner failed earlier): that comes first.
    async fn resolutions(&self, recovery: &mut Recovery) -> Result<(), WorkflowError> {
        let resolved = lease::retrying(&self.config, "operations", || {
            self.store
                .operations(OperationFilter::Status(OperationStatus::Resolved))
        })
        .await?;
        for record in resolved {
            let Some(resolution) = &record.resolution else {
                tracing::warn!(op = %record.op(), "resolved without a recorded resolution; left alone");
                continue;
            };
            let outcome = resolution_outcome(resolution);
            tracing::info!(op = %record.op(), operator = resolution.operator, ?outcome, "an operator's resolution is due");
            recovery.due.push(Due {
                record,
                found: Found::Resolved,
                events: vec![
                    CallEvent::Uncertain { cause: None },
                    CallEvent::Reconciled(outcome),
                ],
            });
        }
        Ok(())
    }

    /// Asks the reconciler about an uncertain operation; `claimed` (why it is uncertain) when
    /// this pass's claim made it so and counted its attempt already. Without a confirmed
    /// outcome after the attempts bound, it is dead-lettered for an operator.
    async fn reconcile(
        &self,
        record: OperationRecord,
        claimed: Option<String>,
        recovery: &mut Recovery,
    ) -> Result<(), WorkflowError> {
        let op = record.op();
        let attempts = if claimed.is_some() {
            record.recovery_attempts
        } else {
            let counted = lease::retrying(&self.config, "count_recovery_attempt", || {
                self.store.count_recovery_attempt(op)
            })
            .await?;
            match counted {
                Some(attempts) => attempts,
                // Resolved or dead-lettered meanwhile.
                None => return Ok(()),
            }
        };
        if let Some(outcome) = self.confirm(&record).await {
            recovery.due.push(Due {
                record,
                found: Found::Confirmed,
                events: vec![
                    CallEvent::Uncertain { cause: claimed },
                    CallEvent::Reconciled(outcome),
                ],
            });
            return Ok(());
        }
        tracing::info!(%op, attempts, "no outcome confirmed");
        if attempts >= self.config.max_recovery_attempts() {
            let reason = format!(
                "no outcome confirmed after {attempts} recovery attempts; an operator must resolve it"
            );
            let moved = lease::retrying(&self.config, "dead_letter", || {
                self.store.dead_letter(op, &reason)
            })
            .await?;
            if moved {
                tracing::warn!(%op, reason, "dead-lettered");
                recovery.report.dead_lettered.push(op);
            }
        } else {
            recovery.report.uncertain.push(op);
        }
        recovery.due.push(Due {
            record,
            found: Found::Uncertain,
            events: vec![CallEvent::Uncertain { cause: claimed }],
        });
        Ok(())
    }
}
