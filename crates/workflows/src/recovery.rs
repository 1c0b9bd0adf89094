//! Recovery on start (D2, D6): every open operation is classified from durable evidence only.
//! Receipted but not applied: the receipt goes to the owner. In flight with an expired lease
//! and no receipt: claimed (a new generation, an attempt counted), marked uncertain and never
//! called again. Uncertain: the `Reconciler` is asked; a confirmed outcome goes to the owner,
//! an unknown one stays uncertain until the attempts bound dead-letters it. Resolved by an
//! operator and not yet applied: the resolution goes to the owner as the reconciliation it
//! confirms. Live leases of other runners are left alone.

use std::collections::BTreeSet;

use agentroom_ports::domain::engine::{Charge, Reconciliation};
use agentroom_ports::domain::ids::OperationId;
use agentroom_ports::{
    OperationFilter, OperationRecord, OperationStatus, Reconciler, Resolution, ResolutionOutcome,
    WorkflowStore,
};

use crate::crash::{self, crash_point};
use crate::error::WorkflowError;
use crate::lease;
use crate::owner::ReceiptOwner;
use crate::provider::Provider;
use crate::runner::Runner;

/// What one recovery pass did, operation by operation.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Receipted operations whose receipt the owner took.
    pub delivered: Vec<OperationId>,
    /// Receipted operations whose owner failed (handed over again next time).
    pub undelivered: Vec<OperationId>,
    /// Expired in-flight operations without receipt: claimed and marked uncertain.
    pub claimed: Vec<OperationId>,
    /// Uncertain operations whose outcome the reconciler confirmed and the owner took.
    pub reconciled: Vec<OperationId>,
    /// Operations still uncertain (reservation held).
    pub uncertain: Vec<OperationId>,
    /// Operations moved to the dead letters now.
    pub dead_lettered: Vec<OperationId>,
    /// In-flight operations under a live lease: left alone.
    pub live: Vec<OperationId>,
    /// Operations an operator resolved whose resolution the owner applied to the Room now.
    pub resolved: Vec<OperationId>,
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

impl<W, P, O> Runner<W, P, O>
where
    W: WorkflowStore + ?Sized,
    P: Provider + ?Sized,
    O: ReceiptOwner + ?Sized,
{
    /// Classifies and settles every open operation as far as durable evidence allows. The
    /// provider is never called.
    #[tracing::instrument(skip_all, fields(runner = self.config.runner()))]
    pub async fn recover<R: Reconciler + ?Sized>(
        &self,
        reconciler: &R,
    ) -> Result<RecoveryReport, WorkflowError> {
        let mut report = RecoveryReport::default();
        let claimed = self.claim_and_mark_uncertain(&mut report).await?;
        let open = lease::retrying(&self.config, "operations", || {
            self.store.operations(OperationFilter::Open)
        })
        .await?;
        for record in open {
            match record.status {
                OperationStatus::Receipted => self.hand_over(&record, &mut report).await,
                OperationStatus::InFlight => {
                    if record.lease_expired {
                        // It expired after the claims: the next pass takes it.
                        tracing::info!(op = %record.op(), "lease expired during recovery");
                    } else {
                        report.live.push(record.op());
                    }
                }
                OperationStatus::Uncertain => {
                    let fresh = claimed.contains(&record.op());
                    self.reconcile(&record, fresh, reconciler, &mut report)
                        .await?;
                }
                OperationStatus::DeadLetter
                | OperationStatus::Applied
                | OperationStatus::Resolved => {}
            }
        }
        self.apply_resolutions(&mut report).await?;
        tracing::info!(?report, "recovery done");
        Ok(report)
    }

    /// Claims every expired in-flight operation without receipt and marks it uncertain.
    async fn claim_and_mark_uncertain(
        &self,
        report: &mut RecoveryReport,
    ) -> Result<BTreeSet<OperationId>, WorkflowError> {
        let mut claimed = BTreeSet::new();
        loop {
            let batch = lease::retrying(&self.config, "claim_expired", || {
                self.store
                    .claim_expired(self.config.lease_grant(), self.config.claim_batch())
            })
            .await?;
            if batch.is_empty() {
                return Ok(claimed);
            }
            for claim in batch {
                crash_point(crash::AFTER_CLAIM);
                let op = claim.record.op();
                tracing::warn!(%op, generation = claim.generation, "no receipt and an expired lease: uncertain, never replayed");
                if lease::mark_uncertain(&*self.store, &self.config, op, claim.generation).await? {
                    crash_point(crash::AFTER_UNCERTAIN);
                    claimed.insert(op);
                    report.claimed.push(op);
                }
            }
        }
    }

    /// Hands each operator resolution the Room has not applied yet to the owner, as the
    /// reconciliation it confirms; the owner's commit marks the operation applied, so a
    /// resolution is applied once. Until then the Room holds the reservation.
    async fn apply_resolutions(&self, report: &mut RecoveryReport) -> Result<(), WorkflowError> {
        let resolved = lease::retrying(&self.config, "operations", || {
            self.store
                .operations(OperationFilter::Status(OperationStatus::Resolved))
        })
        .await?;
        for record in resolved {
            let op = record.op();
            let Some(resolution) = &record.resolution else {
                tracing::warn!(%op, "resolved without a recorded resolution; left alone");
                continue;
            };
            // The Room may not know the call is uncertain yet (its owner failed earlier).
            if let Err(err) = self.owner.uncertain(&record).await {
                tracing::debug!(%op, %err, "the owner did not mark it uncertain (already is?)");
            }
            let outcome = resolution_outcome(resolution);
            match self.owner.reconciled(&record, &outcome).await {
                Ok(()) => {
                    tracing::info!(%op, operator = resolution.operator, ?outcome, "operator resolution applied");
                    report.resolved.push(op);
                }
                Err(err) => {
                    tracing::warn!(%op, %err, "the owner did not take the operator's resolution");
                }
            }
        }
        Ok(())
    }

    async fn hand_over(&self, record: &OperationRecord, report: &mut RecoveryReport) {
        let Some(receipt) = &record.receipt else {
            return;
        };
        match self.owner.deliver(record, receipt, record.generation).await {
            Ok(()) => report.delivered.push(record.op()),
            Err(err) => {
                tracing::warn!(op = %record.op(), %err, "the owner did not take the receipt");
                report.undelivered.push(record.op());
            }
        }
    }

    /// Asks the reconciler about an uncertain operation; `fresh` when this pass's claim
    /// counted its attempt already.
    async fn reconcile<R: Reconciler + ?Sized>(
        &self,
        record: &OperationRecord,
        fresh: bool,
        reconciler: &R,
        report: &mut RecoveryReport,
    ) -> Result<(), WorkflowError> {
        let op = record.op();
        let attempts = if fresh {
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
        if let Err(err) = self.owner.uncertain(record).await {
            tracing::warn!(%op, %err, "the owner did not take the uncertain call");
        }
        match reconciler.reconcile(record).await {
            Ok(Some(outcome)) => match self.owner.reconciled(record, &outcome).await {
                Ok(()) => {
                    tracing::info!(%op, ?outcome, "reconciled");
                    report.reconciled.push(op);
                    return Ok(());
                }
                Err(err) => {
                    tracing::warn!(%op, %err, "the owner did not take the reconciliation");
                }
            },
            Ok(None) => tracing::info!(%op, attempts, "the reconciler does not know"),
            Err(err) => tracing::warn!(%op, attempts, %err, "the reconciler failed"),
        }
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
                report.dead_lettered.push(op);
            }
            return Ok(());
        }
        report.uncertain.push(op);
        Ok(())
    }
}
