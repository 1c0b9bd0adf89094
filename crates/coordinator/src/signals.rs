//! Owner corrections and agent-host signals as the service offers them: the correction
//! history of an objective (O14), and the wait acknowledgements (O12) and internal receipts
//! (O13) an assignee posts about its assignment. Who may say what is the domain's
//! (`RoomState::admits_event`); events are checked against the Room before they are stored
//! ([`Coordinator::post`]), so a refused one stores and changes nothing.

use agentroom_ports::domain::engine::{CallBrief, InputError};
use agentroom_ports::domain::event::{Event, EventBody};
use agentroom_ports::domain::ids::{EventId, ObjectiveId, OperationId, PrincipalId, RoomId};
use agentroom_ports::domain::objective::Criterion;
use agentroom_ports::domain::plan::PlanTrigger;

use crate::{Coordinator, CoordinatorError, Outcome};

/// One owner correction of an objective's history (O14), as it was posted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Correction {
    /// The persisted event.
    pub event: EventId,
    /// Who posted it (always the Room's owner: only the owner's corrections enter it).
    pub author: PrincipalId,
    /// What the owner said.
    pub text: String,
    /// The criteria it froze instead of the earlier ones, if it changed them.
    pub criteria: Option<Vec<Criterion>>,
    /// The plan version it led to, once one was admitted.
    pub plan_version: Option<u32>,
}

/// An objective's criteria now and its correction history, read at one revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorrectionHistory {
    /// The criteria the objective holds now.
    pub criteria: Vec<Criterion>,
    /// Its corrections, oldest first.
    pub corrections: Vec<Correction>,
}

/// What an assignee says about its assignment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AssignmentSignal {
    /// Its task waits on something outside the Room (O12).
    Waiting {
        /// What it waits on.
        reason: String,
    },
    /// Something internal about the objective happened: a delivery, an answer (O13).
    Receipt {
        /// What it records.
        note: String,
    },
}

impl Coordinator {
    /// The correction history of `objective` in `room` (O14), oldest first: each persisted
    /// correction the Room took, with the plan version it led to, and the criteria now.
    pub async fn corrections(
        &self,
        room: &RoomId,
        objective: ObjectiveId,
    ) -> Result<CorrectionHistory, CoordinatorError> {
        let stored = self.room_for_objective(room, objective).await?;
        let found = stored
            .state
            .objective(objective)
            .ok_or(InputError::UnknownObjective(objective))?;
        let mut history = Vec::with_capacity(found.corrections().len());
        for id in found.corrections() {
            let Some(event) = self.shared.store.event(room, *id).await? else {
                // Accepted events are kept; one missing is a store that lost it.
                return Err(CoordinatorError::UnknownEvent {
                    room: room.clone(),
                    event: *id,
                });
            };
            let EventBody::OwnerCorrection { text, criteria, .. } = event.body else {
                continue;
            };
            let plan_version = found
                .plans()
                .iter()
                .find(|p| matches!(p.trigger(), PlanTrigger::OwnerCorrection { event } if event == id))
                .map(|p| p.number());
            history.push(Correction {
                event: *id,
                author: event.author,
                text,
                criteria,
                plan_version,
            });
        }
        Ok(CorrectionHistory {
            criteria: found.criteria().to_vec(),
            corrections: history,
        })
    }

    /// Posts, as `principal`, what it says about its assignment `op` in `room` under the
    /// event id `id`: a wait acknowledgement for the assignment's task (O12) or an internal
    /// receipt about its objective (O13). The assignment must be one of this Room's hosted
    /// here and `principal`'s own (as for its result); the domain decides the rest.
    pub async fn signal_assignment(
        &self,
        room: &RoomId,
        principal: &PrincipalId,
        op: OperationId,
        id: EventId,
        signal: AssignmentSignal,
    ) -> Result<Outcome, CoordinatorError> {
        self.assignment_of(room, principal, op).await?;
        let record = self
            .operation(room, op)
            .await?
            .ok_or(CoordinatorError::NoAssignment(op))?;
        let (Some(objective), CallBrief::Execute(task)) =
            (record.request.objective, &record.request.brief)
        else {
            return Err(CoordinatorError::NoAssignment(op));
        };
        let body = match signal {
            AssignmentSignal::Waiting { reason } => EventBody::WaitAck {
                objective,
                task: task.identity.clone(),
                reason,
            },
            AssignmentSignal::Receipt { note } => EventBody::InternalReceipt {
                objective: Some(objective),
                note,
            },
        };
        self.post(&Event {
            id,
            room: room.clone(),
            author: principal.clone(),
            body,
        })
        .await
    }
}
