//! The agent-host desk as the service offers it: the hosted specialist calls of a Room waiting
//! for a principal's result, and the submission of that result (checked against the Room's
//! own operation first: another Room's call is not found, another specialist's is refused).

use agentroom_ports::domain::engine::SpecialistResult;
use agentroom_ports::domain::ids::{OperationId, PrincipalId, RoomId};
use agentroom_ports::domain::review::ContributionRefusal;
use agentroom_ports::domain::state::{CallRole, Purpose};
use agentroom_ports::{HostedDesk, SpecialistCall, Submission, SubmitError};

use crate::{Coordinator, CoordinatorError};

impl Coordinator {
    /// The calls of `room` waiting in this process for `principal`'s result (none when no
    /// specialist is hosted here).
    pub async fn assignments(
        &self,
        room: &RoomId,
        principal: &PrincipalId,
    ) -> Result<Vec<SpecialistCall>, CoordinatorError> {
        let Some(desk) = &self.shared.desk else {
            return Ok(Vec::new());
        };
        let mut calls = Vec::new();
        for call in desk.assignments(principal) {
            // A call asked to abort (a pause, a cancel, or T6: its principal lost the role)
            // is withdrawn at once, before its heartbeat drops the wait.
            if self
                .operation(room, call.op)
                .await?
                .is_some_and(|record| !record.cancel_requested)
            {
                calls.push(call);
            }
        }
        Ok(calls)
    }

    /// Checks that `op` is an assignment of `room` hosted here and that it is `principal`'s
    /// (T2): [`CoordinatorError::NoAssignment`] when it is not one, `SubmitError::NotYours`
    /// when it is another specialist's. Nothing changes.
    pub async fn assignment_of(
        &self,
        room: &RoomId,
        principal: &PrincipalId,
        op: OperationId,
    ) -> Result<&dyn HostedDesk, CoordinatorError> {
        let record = self
            .operation(room, op)
            .await?
            .filter(|record| record.request.role == CallRole::Specialist)
            .ok_or(CoordinatorError::NoAssignment(op))?;
        let desk = self
            .shared
            .desk
            .as_deref()
            .filter(|desk| {
                record
                    .request
                    .principal
                    .as_ref()
                    .is_some_and(|p| desk.serves(p))
            })
            .ok_or(CoordinatorError::NoAssignment(op))?;
        if record.request.principal.as_ref() != Some(principal) {
            return Err(SubmitError::NotYours {
                op,
                principal: principal.clone(),
            }
            .into());
        }
        // Withdrawn (asked to abort: paused, cancelled, or its principal lost the role, T6):
        // it takes no result, even before its heartbeat drops the wait.
        if record.cancel_requested {
            return Err(SubmitError::NotWaiting { op }.into());
        }
        Ok(desk)
    }

    /// Records `principal`'s result for its assignment `op` of `room` durably and hands it to
    /// the waiting call, which settles it (the domain decides what it completes and costs).
    pub async fn submit_result(
        &self,
        room: &RoomId,
        principal: &PrincipalId,
        op: OperationId,
        submission: Submission,
    ) -> Result<(), CoordinatorError> {
        let desk = self.assignment_of(room, principal, op).await?;
        // Checked before anything is recorded: an oversized or malformed contribution is
        // refused with its reason and nothing of it is stored.
        if let SpecialistResult::Contribution(draft) = &submission.result {
            let stored = self
                .shared
                .store
                .load(room)
                .await?
                .ok_or_else(|| CoordinatorError::UnknownRoom(room.clone()))?;
            let state = &stored.state;
            if let Some(operation) = state.operation(op)
                && let (Some(objective), Purpose::Execute { task }) =
                    (operation.objective(), operation.purpose())
            {
                state.admits_contribution(objective, task, draft)?;
            } else {
                draft
                    .check(state.policy().content())
                    .map_err(ContributionRefusal::from)?;
            }
        }
        desk.submit(principal, op, submission)?;
        Ok(())
    }
}
