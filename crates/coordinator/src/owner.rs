//! The coordinator as the operations' owner: what the runner and recovery learned goes to the
//! Room's actor as a call outcome, decided with ids derived from the operation and the kind of
//! outcome, and committed with the operation marked applied once the Room settled it.

use std::sync::Arc;

use agentroom_ports::domain::engine::{Charge, Input, Reconciliation};
use agentroom_ports::domain::money::UsdMicros;
use agentroom_ports::domain::state::OperationState;
use agentroom_ports::{CommitError, OperationRecord, Receipt};
use agentroom_workflows::{Delivery, Leased, OwnerError, ReceiptOwner};
use async_trait::async_trait;

use crate::actor::Guard;
use crate::ids::IdSeed;
use crate::{CoordinatorError, Outcome, Shared};

pub(crate) struct Owner {
    shared: Arc<Shared>,
}

impl Owner {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        Self { shared }
    }
}

fn running(state: OperationState) -> bool {
    matches!(
        state,
        OperationState::InFlight | OperationState::CancelRequested
    )
}

fn uncertain(state: OperationState) -> bool {
    state == OperationState::Uncertain
}

impl Owner {
    async fn apply(
        &self,
        record: &OperationRecord,
        input: Input,
        kind: &'static str,
        when: fn(OperationState) -> bool,
        applied: bool,
    ) -> Result<(), OwnerError> {
        let op = record.op();
        self.shared
            .submit(
                &record.room,
                input,
                IdSeed::Outcome(op, kind),
                Guard::Outcome {
                    op,
                    when,
                    applied,
                    receipt: None,
                },
            )
            .await
            .map(|_| ())
            .map_err(|err| OwnerError(err.to_string()))
    }
}

#[async_trait]
impl ReceiptOwner for Owner {
    async fn record_and_deliver(
        &self,
        leased: &Leased,
        receipt: &Receipt,
    ) -> Result<Delivery, OwnerError> {
        let op = leased.op();
        let input = Input::CallReturned {
            op,
            charge: receipt.charge,
            result: receipt.result.clone(),
        };
        // The same ids as `deliver` would derive: either way the Room decides it once.
        let outcome = self
            .shared
            .submit(
                &leased.room,
                input,
                IdSeed::Outcome(op, "call_returned"),
                Guard::Outcome {
                    op,
                    when: running,
                    applied: true,
                    receipt: Some(Box::new((leased.generation, receipt.clone()))),
                },
            )
            .await;
        match outcome {
            Ok(Outcome::Decided { .. }) => Ok(Delivery::Recorded),
            Ok(Outcome::AlreadyDone | Outcome::AlreadyDecided { .. }) => Ok(Delivery::NotTaken),
            Err(CoordinatorError::Commit(CommitError::Fenced { .. })) => Ok(Delivery::Fenced),
            Err(err) => Err(OwnerError(err.to_string())),
        }
    }

    async fn deliver(
        &self,
        record: &OperationRecord,
        receipt: &Receipt,
        _generation: i64,
    ) -> Result<(), OwnerError> {
        let input = Input::CallReturned {
            op: record.op(),
            charge: receipt.charge,
            result: receipt.result.clone(),
        };
        self.apply(record, input, "call_returned", running, true)
            .await
    }

    async fn uncertain(&self, record: &OperationRecord) -> Result<(), OwnerError> {
        let input = Input::CallUncertain { op: record.op() };
        self.apply(record, input, "call_uncertain", running, false)
            .await
    }

    async fn reconciled(
        &self,
        record: &OperationRecord,
        outcome: &Reconciliation,
    ) -> Result<(), OwnerError> {
        let input = Input::Reconciled {
            op: record.op(),
            outcome: outcome.clone(),
        };
        self.apply(record, input, "reconciled", uncertain, true)
            .await
    }

    async fn not_sent(&self, record: &OperationRecord, _reason: &str) -> Result<(), OwnerError> {
        let input = Input::CallSettled {
            op: record.op(),
            charge: Charge::Actual(UsdMicros::ZERO),
        };
        self.apply(record, input, "call_settled", running, true)
            .await
    }
}
