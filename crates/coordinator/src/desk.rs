//! The agent-host desk as the service offers it: the hosted specialist calls of a Room waiting
//! for a principal's result, and the submission of that result (checked against the Room's
//! own operation first: another Room's call is not found, another specialist's is refused).
//! [`ReportedResult`] is the one reading of what an agent host reports, whichever edge it
//! came through (REST's result body, the MCP tool `submit_result`).

use agentroom_ports::desk::contribution_id;
use agentroom_ports::domain::artifact::NotADigest;
use agentroom_ports::domain::engine::{Charge, SpecialistResult};
use agentroom_ports::domain::ids::{ContributionId, OperationId, PrincipalId, RoomId, Timestamp};
use agentroom_ports::domain::money::UsdMicros;
use agentroom_ports::domain::review::{
    Artifact, Body, ContributionDraft, ContributionRefusal, DocumentDraft, SourceDraft,
};
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

/// A source an agent host's result cites, as an edge reads it (a document's digest still text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReportedSource {
    /// A contribution of the Room.
    Contribution {
        /// Its id.
        id: ContributionId,
    },
    /// An external document named only by its address and digest.
    External {
        /// Where it is.
        url: String,
        /// Its content digest.
        digest: String,
    },
    /// A document read for the work, with the excerpt the contribution relies on.
    Document {
        /// Its id within the contribution (what verdicts cite), e.g. `s1`.
        id: String,
        /// Where it is.
        uri: String,
        /// Its title.
        title: String,
        /// The words relied on.
        excerpt: String,
        /// When it was read, in Unix milliseconds.
        retrieved_at: i64,
        /// `sha256:` and 64 lowercase hex digits.
        content_digest: String,
    },
}

/// What an agent host reports for one assignment, as an edge reads it: a contribution or a
/// failure, with what the work cost (none: the whole reservation, B3).
#[derive(Debug, Clone, PartialEq)]
pub enum ReportedResult {
    /// The work's result.
    Contribution {
        /// Its body: text or Markdown.
        body: Option<String>,
        /// `text/markdown` (the default) or `text/plain`.
        media_type: Option<String>,
        /// Named pieces of text (the form before bodies).
        artifacts: Vec<Artifact>,
        /// What it cites.
        sources: Vec<ReportedSource>,
        /// Its outputs by name.
        outputs: serde_json::Map<String, serde_json::Value>,
        /// What it cost, in USD micros.
        usage_micros: Option<i64>,
    },
    /// The work failed.
    Failure {
        /// Why: not blank.
        reason: String,
        /// What it cost, in USD micros.
        usage_micros: Option<i64>,
    },
}

impl ReportedResult {
    /// The submission this result makes for the call `op`:
    /// [`CoordinatorError::InvalidResult`] for a negative usage or one no call can cost, a
    /// blank failure reason, a document digest that is not one. What the Room keeps of a
    /// contribution (its bounds, its outputs) is checked by [`Coordinator::submit_result`].
    pub fn into_submission(self, op: OperationId) -> Result<Submission, CoordinatorError> {
        match self {
            ReportedResult::Contribution {
                body,
                media_type,
                artifacts,
                sources,
                outputs,
                usage_micros,
            } => {
                let sources = sources
                    .into_iter()
                    .map(ReportedSource::into_draft)
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(Submission {
                    charge: charge(usage_micros)?,
                    result: SpecialistResult::Contribution(ContributionDraft {
                        id: contribution_id(op),
                        artifacts,
                        body: body.map(|text| Body {
                            media_type: media_type.unwrap_or_else(|| "text/markdown".to_owned()),
                            text,
                        }),
                        sources,
                        outputs,
                    }),
                })
            }
            ReportedResult::Failure {
                reason,
                usage_micros,
            } => {
                if reason.trim().is_empty() {
                    return Err(CoordinatorError::InvalidResult(
                        "a failure needs a non-empty reason".to_owned(),
                    ));
                }
                Ok(Submission {
                    charge: charge(usage_micros)?,
                    result: SpecialistResult::Failure { reason },
                })
            }
        }
    }
}

impl ReportedSource {
    /// The source as the domain takes it; a document's digest must be one.
    fn into_draft(self) -> Result<SourceDraft, CoordinatorError> {
        Ok(match self {
            ReportedSource::Contribution { id } => SourceDraft::Contribution { id },
            ReportedSource::External { url, digest } => SourceDraft::External { url, digest },
            ReportedSource::Document {
                id,
                uri,
                title,
                excerpt,
                retrieved_at,
                content_digest,
            } => SourceDraft::Document(DocumentDraft {
                content_digest: content_digest.parse().map_err(|err: NotADigest| {
                    CoordinatorError::InvalidResult(format!("source `{id}`: content_digest: {err}"))
                })?,
                retrieved_at: Timestamp::from_millis(retrieved_at),
                id,
                uri,
                title,
                excerpt,
            }),
        })
    }
}

/// The charge a reported usage makes: none reported is the whole reservation (B3).
fn charge(usage: Option<i64>) -> Result<Charge, CoordinatorError> {
    match usage {
        None => Ok(Charge::NoUsage),
        Some(micros) if micros < 0 => Err(CoordinatorError::InvalidResult(format!(
            "usage_micros must not be negative (got {micros})"
        ))),
        // Usage no call can cost is refused here, before anything is recorded (issue 17).
        Some(micros) if micros > UsdMicros::MAX_CHARGE.micros() => {
            Err(CoordinatorError::InvalidResult(format!(
                "usage_micros {micros} is above the largest charge a call may report ({} micros)",
                UsdMicros::MAX_CHARGE.micros()
            )))
        }
        // Above the reservation is allowed: it is charged and stops admissions (B3, B5).
        Some(micros) => Ok(Charge::Actual(UsdMicros::new(micros))),
    }
}
