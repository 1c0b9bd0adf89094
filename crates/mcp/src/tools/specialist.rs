//! The tools of agent hosts and specialists: their assignments (with the dependency content
//! and sources each call may cite), and what they do about them.

use agentroom_coordinator::{AssignmentSignal, ReportedResult, ReportedSource, TaskUpdate};
use agentroom_domain::ids::{ContributionId, EventId, ObjectiveId, OperationId, TaskIdentity};
use agentroom_domain::plan::Column;
use agentroom_domain::review::Artifact;
use agentroom_domain::room::Permission;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::Extensions;
use rmcp::{Json, tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{
    Applied, Checked, MAX_TEXT_CHARS, NoInput, Posted, applied, check_key, check_length, json,
    posted,
};
use crate::{Caller, RoomTools, ToolError};

/// A hosted assignment waiting for the caller's result (REST's `AssignmentView`).
#[derive(Debug, Serialize, JsonSchema)]
pub struct Assignment {
    /// The operation (submit the result under it).
    pub operation: String,
    /// The objective its task serves.
    pub objective: Option<String>,
    /// Its reservation: the most the call may cost, in USD micros.
    pub reservation_micros: i64,
    /// The task: key, title, capability and inputs.
    pub task: serde_json::Value,
    /// The Room content the task may use: its dependencies' contributions and sources.
    pub context: serde_json::Value,
}

/// `list_my_assignments`'s answer.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Assignments {
    /// The calls waiting for the caller's result in this process.
    pub assignments: Vec<Assignment>,
}

/// One named piece of a contribution (the form before bodies).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ArtifactInput {
    /// Its name.
    #[schemars(length(min = 1, max = 200))]
    pub name: String,
    /// Its content.
    pub content: String,
}

/// One source a contribution cites (REST's `SourceBody`).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum SourceInput {
    /// A contribution of the Room (one the assignment's context lists).
    Contribution {
        /// Its id.
        id: String,
    },
    /// An external document named only by its address and digest (a reviewer has nothing of
    /// it to read).
    External {
        /// Where it is.
        url: String,
        /// Its content digest.
        digest: String,
    },
    /// A document read for the work, with the excerpt the contribution relies on (what a
    /// reviewer's verdict may quote, R7).
    Document {
        /// Its id within the contribution (what verdicts cite), e.g. `s1`.
        id: String,
        /// Where it is.
        uri: String,
        /// Its title.
        title: String,
        /// The words relied on, copied from the document.
        excerpt: String,
        /// When it was read, in Unix milliseconds.
        retrieved_at: i64,
        /// `sha256:` and 64 lowercase hex digits: the digest of the whole document as read.
        #[schemars(regex(pattern = r"^sha256:[0-9a-f]{64}$"))]
        content_digest: String,
    },
}

/// The result of an assignment (REST's result body): a contribution or a failure.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(tag = "outcome", rename_all = "snake_case", deny_unknown_fields)]
pub enum ResultInput {
    /// The work's result.
    Contribution {
        /// Its body: text or Markdown (a report task's content is its body).
        #[serde(default)]
        body: Option<String>,
        /// `text/markdown` (the default) or `text/plain`.
        #[serde(default)]
        media_type: Option<String>,
        /// Named pieces of text (the form before bodies).
        #[serde(default)]
        artifacts: Vec<ArtifactInput>,
        /// What it cites.
        #[serde(default)]
        sources: Vec<SourceInput>,
        /// Its outputs by name, as the task's capability declares them (T2).
        #[serde(default)]
        outputs: serde_json::Map<String, serde_json::Value>,
        /// What the work cost, in USD micros; absent: the whole reservation (B3).
        #[serde(default)]
        #[schemars(range(min = 0))]
        usage_micros: Option<i64>,
    },
    /// The work failed.
    Failure {
        /// Why: not blank.
        reason: String,
        /// What the work cost, in USD micros; absent: the whole reservation (B3).
        #[serde(default)]
        #[schemars(range(min = 0))]
        usage_micros: Option<i64>,
    },
}

/// `submit_result`'s input.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SubmitResult {
    /// The operation of your assignment (`list_my_assignments`).
    pub operation: String,
    /// Its result.
    pub result: ResultInput,
}

/// `submit_result`'s answer.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Recorded {
    /// The operation.
    pub operation: String,
    /// Recorded durably and handed to the waiting call, which settles it.
    pub recorded: bool,
}

/// `post_wait`'s input.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PostWait {
    /// The operation of your assignment.
    pub operation: String,
    /// What its task waits on outside the Room: not blank.
    #[schemars(length(min = 1, max = 16000))]
    pub reason: String,
    /// A key of your choosing: the same key posts the same wait once.
    #[schemars(length(min = 1, max = 128))]
    pub idempotency_key: Option<String>,
}

/// `post_receipt`'s input.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PostReceipt {
    /// The operation of your assignment.
    pub operation: String,
    /// What happened about its objective (a delivery, an answer): not blank.
    #[schemars(length(min = 1, max = 16000))]
    pub note: String,
    /// A key of your choosing: the same key posts the same receipt once.
    #[schemars(length(min = 1, max = 128))]
    pub idempotency_key: Option<String>,
}

/// Where one's own task moves.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum MyTaskStatus {
    /// Acknowledged: being worked on.
    InProgress,
    /// Done, with the contribution that completes it (T2).
    Done,
}

/// `update_my_task`'s input (REST's `TaskUpdateBody`).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateMyTask {
    /// The objective.
    pub objective: String,
    /// The task's identity on the objective's current board.
    pub task: String,
    /// Where it moves.
    pub status: MyTaskStatus,
    /// The contribution that completes it (for `done`, T2).
    pub contribution: Option<String>,
    /// A key of your choosing: the same key and update are decided once.
    #[schemars(length(min = 1, max = 128))]
    pub idempotency_key: Option<String>,
}

/// The operation `text` names, as an assignment of this Room (`not_found` otherwise).
fn operation(text: &str) -> Result<OperationId, ToolError> {
    text.parse()
        .map_err(|_| ToolError::NotFound(format!("no assignment of operation {text}")))
}

/// The objective `text` names (`not_found` when it is not one).
pub(crate) fn objective_id(text: &str) -> Result<ObjectiveId, ToolError> {
    text.parse()
        .map_err(|_| ToolError::NotFound(format!("no objective {text} in this room")))
}

/// The result `input` reports, as the service reads every edge's (it checks it).
fn reported(input: ResultInput) -> Result<ReportedResult, ToolError> {
    Ok(match input {
        ResultInput::Contribution {
            body,
            media_type,
            artifacts,
            sources,
            outputs,
            usage_micros,
        } => ReportedResult::Contribution {
            body,
            media_type,
            artifacts: artifacts
                .into_iter()
                .map(|a| Artifact {
                    name: a.name,
                    content: a.content,
                })
                .collect(),
            sources: sources
                .into_iter()
                .map(reported_source)
                .collect::<Result<_, _>>()?,
            outputs,
            usage_micros,
        },
        ResultInput::Failure {
            reason,
            usage_micros,
        } => ReportedResult::Failure {
            reason,
            usage_micros,
        },
    })
}

fn reported_source(source: SourceInput) -> Result<ReportedSource, ToolError> {
    Ok(match source {
        SourceInput::Contribution { id } => ReportedSource::Contribution {
            id: id.parse().map_err(|error| {
                ToolError::InvalidInput(format!("source contribution `{id}`: {error}"))
            })?,
        },
        SourceInput::External { url, digest } => ReportedSource::External { url, digest },
        SourceInput::Document {
            id,
            uri,
            title,
            excerpt,
            retrieved_at,
            content_digest,
        } => ReportedSource::Document {
            id,
            uri,
            title,
            excerpt,
            retrieved_at,
            content_digest,
        },
    })
}

impl RoomTools {
    /// Posts what `caller` says about its assignment `op` (O12, O13), under its key.
    async fn signal(
        &self,
        caller: &Caller,
        op: OperationId,
        key: Option<&str>,
        what: &str,
        signal: AssignmentSignal,
    ) -> Result<Posted, ToolError> {
        self.deciding("an assignment's wait or receipt")?;
        let id = EventId::from_uuid(*self.input_id(caller, key, what)?.as_uuid());
        let outcome = self
            .coordinator
            .signal_assignment(&caller.room, &caller.principal, op, id, signal)
            .await?;
        posted(id, &outcome)
    }
}

#[tool_router(router = specialist_router, vis = "pub(crate)")]
impl RoomTools {
    /// The hosted specialist work waiting for the caller.
    #[tool(
        name = "list_my_assignments",
        description = "The hosted specialist calls waiting for your result in this process \
                       (GET /v1/rooms/{room}/assignments): each call's operation, objective, \
                       reservation, task and the dependency content and sources it may cite. \
                       Needs task.update_own."
    )]
    pub async fn list_my_assignments(
        &self,
        context: Extensions,
        Parameters(input): Parameters<Checked<NoInput>>,
    ) -> Result<Json<Assignments>, ToolError> {
        let NoInput {} = input.input()?;
        let (caller, _) = self.authorized(&context, Permission::TaskUpdateOwn).await?;
        let calls = self
            .coordinator
            .assignments(&caller.room, &caller.principal)
            .await?;
        let mut assignments = Vec::with_capacity(calls.len());
        for call in calls {
            assignments.push(Assignment {
                operation: call.op.to_string(),
                objective: call.objective.map(|id| id.to_string()),
                reservation_micros: call.reservation.micros(),
                task: json(&call.task)?,
                context: json(&call.context)?,
            });
        }
        Ok(Json(Assignments { assignments }))
    }

    /// Submits the caller's result for its assignment.
    #[tool(
        name = "submit_result",
        description = "Submit the result of your own assignment once (POST \
                       /v1/rooms/{room}/assignments/{operation}/result): a contribution (body, \
                       artifacts, sources, outputs) or a failure, with what the work cost in USD \
                       micros (absent: the whole reservation, B3). Recorded durably before the \
                       waiting call uses it (T2, D2); the domain decides what it completes. \
                       Another specialist's operation is refused. Needs task.update_own."
    )]
    pub async fn submit_result(
        &self,
        context: Extensions,
        Parameters(input): Parameters<Checked<SubmitResult>>,
    ) -> Result<Json<Recorded>, ToolError> {
        let input = input.input()?;
        let (caller, _) = self.authorized(&context, Permission::TaskUpdateOwn).await?;
        self.deciding("a result")?;
        let op = operation(&input.operation)?;
        // Another Room's call is not found, another specialist's refused, before the result
        // is read (as REST's path).
        self.coordinator
            .assignment_of(&caller.room, &caller.principal, op)
            .await?;
        let submission = reported(input.result)?.into_submission(op)?;
        self.coordinator
            .submit_result(&caller.room, &caller.principal, op, submission)
            .await?;
        Ok(Json(Recorded {
            operation: op.to_string(),
            recorded: true,
        }))
    }

    /// Says that the caller's assignment's task waits on something outside the Room (O12).
    #[tool(
        name = "post_wait",
        description = "Say that your own assignment's task waits on something outside the Room \
                       (O12; POST /v1/rooms/{room}/assignments/{operation}/wait): posted as your \
                       wait_ack event; the task shows waiting, other ready work and a ready \
                       review go ahead. Give an idempotency_key to post it once. Needs \
                       task.update_own."
    )]
    pub async fn post_wait(
        &self,
        context: Extensions,
        Parameters(input): Parameters<Checked<PostWait>>,
    ) -> Result<Json<Posted>, ToolError> {
        let input = input.input()?;
        check_key(input.idempotency_key.as_deref())?;
        check_length("reason", &input.reason, MAX_TEXT_CHARS)?;
        let (caller, _) = self.authorized(&context, Permission::TaskUpdateOwn).await?;
        let op = operation(&input.operation)?;
        let what = format!("assignment/{op}/wait/{}", input.reason);
        let signal = AssignmentSignal::Waiting {
            reason: input.reason,
        };
        let posted = self
            .signal(&caller, op, input.idempotency_key.as_deref(), &what, signal)
            .await?;
        Ok(Json(posted))
    }

    /// Records a receipt about the caller's assignment's objective (O13).
    #[tool(
        name = "post_receipt",
        description = "Record something internal about your own assignment's objective (O13; \
                       POST /v1/rooms/{room}/assignments/{operation}/receipt): posted as your \
                       internal_receipt event; the reasoner may take it into account, and for a \
                       completed or canceled objective it is consumed without a model call. \
                       Give an idempotency_key to post it once. Needs task.update_own."
    )]
    pub async fn post_receipt(
        &self,
        context: Extensions,
        Parameters(input): Parameters<Checked<PostReceipt>>,
    ) -> Result<Json<Posted>, ToolError> {
        let input = input.input()?;
        check_key(input.idempotency_key.as_deref())?;
        check_length("note", &input.note, MAX_TEXT_CHARS)?;
        let (caller, _) = self.authorized(&context, Permission::TaskUpdateOwn).await?;
        let op = operation(&input.operation)?;
        let what = format!("assignment/{op}/receipt/{}", input.note);
        let signal = AssignmentSignal::Receipt { note: input.note };
        let posted = self
            .signal(&caller, op, input.idempotency_key.as_deref(), &what, signal)
            .await?;
        Ok(Json(posted))
    }

    /// Moves the caller's own task: in progress, or done with its contribution (T2).
    #[tool(
        name = "update_my_task",
        description = "Move your own task on an objective's board (POST \
                       /v1/rooms/{room}/objectives/{objective}/tasks): acknowledge it in \
                       progress, or confirm it done with the contribution that completes it \
                       (T2). Another's task is refused; the domain decides the move. Needs \
                       task.update_own."
    )]
    pub async fn update_my_task(
        &self,
        context: Extensions,
        Parameters(input): Parameters<Checked<UpdateMyTask>>,
    ) -> Result<Json<Applied>, ToolError> {
        let input = input.input()?;
        check_key(input.idempotency_key.as_deref())?;
        let contribution = input
            .contribution
            .as_deref()
            .map(str::parse::<ContributionId>)
            .transpose()
            .map_err(|error| ToolError::InvalidInput(format!("contribution: {error}")))?;
        let (caller, _) = self.authorized(&context, Permission::TaskUpdateOwn).await?;
        self.deciding("a task update")?;
        let objective = objective_id(&input.objective)?;
        let update = TaskUpdate {
            task: TaskIdentity::from_wire(&input.task),
            status: match input.status {
                MyTaskStatus::InProgress => Column::InProgress,
                MyTaskStatus::Done => Column::Done,
            },
            contribution,
        };
        let id = self.input_id(
            &caller,
            input.idempotency_key.as_deref(),
            &format!(
                "task/{objective}/{}/{:?}/{:?}",
                update.task, update.status, update.contribution
            ),
        )?;
        let outcome = self
            .coordinator
            .update_own_task(
                &caller.room,
                id,
                caller.principal.clone(),
                objective,
                update,
            )
            .await?;
        Ok(Json(applied(&outcome)?))
    }
}
