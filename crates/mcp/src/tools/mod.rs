//! The tools, their strict and bounded inputs and their typed outputs. Each tool authorizes
//! its caller first ([`RoomTools::authorized`], the permission REST's route needs), then
//! calls the coordinator and shapes what it answers; none decides anything itself.

use agentroom_coordinator::Outcome;
use agentroom_domain::engine::{LogEntry, Verdict};
use agentroom_domain::event::{Event, EventBody};
use agentroom_domain::ids::{CriterionId, EventId, InputId};
use agentroom_domain::objective::{Criterion, Objective};
use agentroom_domain::plan::Column;
use agentroom_domain::room::Permission;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::Extensions;
use rmcp::{Json, tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{Caller, Posting, RoomTools, ToolError};

mod operator;
mod planning;
mod review;
mod specialist;

pub use operator::*;
pub use planning::*;
pub use review::*;
pub use specialist::*;

/// The longest owner message a tool takes, in characters.
pub const MAX_TEXT_CHARS: usize = 16_000;
/// The longest criterion text, in characters.
pub const MAX_CRITERION_CHARS: usize = 2_000;
/// The longest idempotency key, in characters (REST's `Idempotency-Key` bound).
pub const MAX_KEY_CHARS: usize = 128;

/// A tool's input as it arrived: `T`, or why it is not one. rmcp refuses arguments that do not
/// deserialize with its own plain-text error; read through this, they are refused as every
/// other tool error is, with REST's code for a body that does not fit (`invalid_body`). Its
/// JSON Schema is `T`'s.
#[derive(Debug)]
pub struct Checked<T>(Result<T, String>);

impl<T> Checked<T> {
    /// The input, or [`ToolError::InvalidInput`] naming what is wrong (an unknown or missing
    /// field, a wrong type).
    pub fn input(self) -> Result<T, ToolError> {
        self.0.map_err(ToolError::InvalidInput)
    }
}

impl<'de, T: serde::de::DeserializeOwned> Deserialize<'de> for Checked<T> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = serde_json::Value::deserialize(deserializer)?;
        Ok(Checked(
            serde_json::from_value(value).map_err(|error| error.to_string()),
        ))
    }
}

impl<T: JsonSchema> JsonSchema for Checked<T> {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        T::schema_name()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        T::json_schema(generator)
    }
}

/// A tool that takes no input: any field is refused.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoInput {}

/// `post_owner_message`'s input.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PostOwnerMessage {
    /// The message: not blank. The reasoner answers it or proposes a plan (an objective).
    #[schemars(length(min = 1, max = 16000))]
    pub text: String,
    /// A key of the caller's choosing: the same key posts the same message once.
    #[schemars(length(min = 1, max = 128))]
    pub idempotency_key: Option<String>,
}

/// `read_objective`'s input.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadObjective {
    /// The objective.
    pub objective: String,
}

/// A task on a board, as the caller may see it.
#[derive(Debug, Serialize, JsonSchema)]
pub struct BoardTask {
    /// Its identity (what `update_my_task` names).
    pub identity: String,
    /// Its key in the plan.
    pub key: String,
    /// Its title.
    pub title: String,
    /// The capability it needs.
    pub capability: String,
    /// `production` or `report`.
    pub kind: serde_json::Value,
    /// Who it is assigned to.
    pub assignee: String,
    /// The keys it waits on.
    pub deps: Vec<String>,
    /// Its engine state (waiting, running, completed with its contribution, …).
    pub state: serde_json::Value,
    /// Whether it was reused unchanged from the previous plan version (O3).
    pub reused: bool,
}

/// One column of a board.
#[derive(Debug, Serialize, JsonSchema)]
pub struct BoardColumn {
    /// `backlog`, `todo`, `in_progress` or `done`.
    pub column: String,
    /// Its tasks the caller sees.
    pub tasks: Vec<BoardTask>,
}

/// The current plan's board.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Board {
    /// The plan version it shows.
    pub plan_version: u32,
    /// Its columns.
    pub columns: Vec<BoardColumn>,
}

/// `read_objective`'s answer: what `GET …/objectives/{objective}` shows the caller.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ObjectiveDetail {
    /// The objective in brief.
    pub brief: ObjectiveBrief,
    /// Its criteria: id and text.
    pub criteria: Vec<CriterionView>,
    /// Its counters (replans without progress, interpretations, failed report versions).
    pub counters: serde_json::Value,
    /// Its current plan's board: only the tasks the caller sees (an overseer every one, a
    /// specialist its own).
    pub board: Option<Board>,
    /// The report awaiting review, if one.
    pub awaiting_review: Option<serde_json::Value>,
}

/// A criterion of an owner correction.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CriterionInput {
    /// Its id: 1 to 64 of `a-z 0-9 - _`.
    #[schemars(regex(pattern = r"^[a-z0-9_-]{1,64}$"))]
    pub id: String,
    /// What must hold: not blank.
    #[schemars(length(min = 1, max = 2000))]
    pub text: String,
}

/// `correct_objective`'s input (REST's `owner_correction` event).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CorrectObjective {
    /// The objective: active (a completed or canceled one is not reopened).
    pub objective: String,
    /// The correction: not blank.
    #[schemars(length(min = 1, max = 16000))]
    pub text: String,
    /// The criteria that replace the frozen ones (at least one); absent: they stay.
    #[schemars(length(min = 1))]
    pub criteria: Option<Vec<CriterionInput>>,
    /// A key of your choosing: the same key posts the same correction once.
    #[schemars(length(min = 1, max = 128))]
    pub idempotency_key: Option<String>,
}

/// An objective in brief (REST's `ObjectiveBrief`).
#[derive(Debug, Serialize, JsonSchema)]
pub struct ObjectiveBrief {
    /// Its id.
    pub id: String,
    /// Its title.
    pub title: String,
    /// `planning`, `running`, `waiting_for_owner`, `paused`, `stopped_for_attention`,
    /// `completed` or `canceled`.
    pub status: String,
    /// The owner whose message created it.
    pub owner: String,
    /// Bumps on plan admission, owner correction and criteria change.
    pub revision: u64,
    /// Bumps on pause, resume and cancel.
    pub control_revision: u64,
    /// How many plan versions it has.
    pub plan_versions: usize,
}

/// The Room's budget balances, in USD micros (for a caller with `budget.read`).
#[derive(Debug, Serialize, JsonSchema)]
pub struct Balances {
    /// The total limit.
    pub limit_micros: i64,
    /// Held by open reservations, uncertain ones included.
    pub reserved_micros: i64,
    /// The part of `reserved_micros` held by uncertain calls.
    pub uncertain_micros: i64,
    /// Charged so far.
    pub spent_micros: i64,
    /// Limit − spent − reserved; negative after an overrun.
    pub available_micros: i64,
}

/// Who the caller is in the Room.
#[derive(Debug, Serialize, JsonSchema)]
pub struct You {
    /// The token's principal.
    pub principal: String,
    /// Its current roles.
    pub roles: Vec<String>,
}

/// An owner message waiting to be interpreted (for those who oversee the Room).
#[derive(Debug, Serialize, JsonSchema)]
pub struct PendingMessage {
    /// The event.
    pub event: String,
    /// Its first 200 characters.
    pub text: String,
    /// How many interpretations it has consumed (O11).
    pub attempts: u32,
}

/// `room_overview`'s answer: what `GET /v1/rooms/{room}` shows the caller.
#[derive(Debug, Serialize, JsonSchema)]
pub struct RoomOverview {
    /// The Room.
    pub room: String,
    /// Its revision.
    pub revision: i64,
    /// The caller.
    pub you: You,
    /// How many members it has.
    pub members: usize,
    /// Its objectives.
    pub objectives: Vec<ObjectiveBrief>,
    /// Its budget, for a caller with `budget.read`.
    pub budget: Option<Balances>,
    /// Owner messages waiting for interpretation, for an owner, operator or reviewer.
    pub pending_messages: Vec<PendingMessage>,
}

/// `list_objectives`'s answer.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Objectives {
    /// The Room's objectives.
    pub objectives: Vec<ObjectiveBrief>,
}

/// One entry of a decision log.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Decided {
    /// `accepted` or `rejected`.
    pub verdict: String,
    /// The rule that decided, when one did.
    pub rule: Option<String>,
    /// What happened, for people.
    pub message: String,
    /// The objective it concerns.
    pub objective: Option<String>,
}

/// `post_owner_message`'s answer: the event and its decision (REST's `Decision`).
#[derive(Debug, Serialize, JsonSchema)]
pub struct Posted {
    /// The stored event's id.
    pub event: String,
    /// Whether it is stored (always, when the call succeeds).
    pub recorded: bool,
    /// Whether it was decided now: false when posted before under the same key, or when
    /// this process runs no agents and the host coordinating the Room accepts it.
    pub decided: bool,
    /// The Room's revision after the decision.
    pub revision: Option<i64>,
    /// The decision log.
    pub log: Vec<Decided>,
}

/// `update_my_task`'s and `record_review`'s answer: the decision (REST's `Decision`).
#[derive(Debug, Serialize, JsonSchema)]
pub struct Applied {
    /// Whether it was decided now: false when sent before under the same key.
    pub decided: bool,
    /// The Room's revision after the decision.
    pub revision: Option<i64>,
    /// The decision log: the input's own verdict first, then what it set off.
    pub log: Vec<Decided>,
}

/// The error of a tool that needs the process coordinating the Room, here where events are
/// only recorded (`agentroom mcp --stdio`).
pub(crate) fn needs_host(what: &str) -> ToolError {
    ToolError::WrongState(format!(
        "{what} is decided by the process that coordinates the Room, and this MCP server only \
         records events (`agentroom mcp --stdio` on a store); connect through the host with your \
         token instead: its MCP endpoint over HTTP (`agentroom serve`, /mcp), or \
         `agentroom mcp --stdio --host URL`; nothing was changed"
    ))
}

/// A text a person wrote: at most [`MAX_TEXT_CHARS`] characters (a blank one is the domain's
/// to refuse).
pub(crate) fn check_text(text: &str) -> Result<(), ToolError> {
    check_length("text", text, MAX_TEXT_CHARS)
}

/// `field` holds at most `most` characters (the bound its schema advertises).
pub(crate) fn check_length(field: &str, text: &str, most: usize) -> Result<(), ToolError> {
    let chars = text.chars().count();
    if chars > most {
        return Err(ToolError::InvalidInput(format!(
            "{field} has {chars} characters; the most is {most}"
        )));
    }
    Ok(())
}

/// An objective's criteria as a tool shows them.
pub(crate) fn criteria(objective: &Objective) -> Vec<CriterionView> {
    objective
        .criteria()
        .iter()
        .map(|c| CriterionView {
            id: c.id.to_string(),
            text: c.text.clone(),
        })
        .collect()
}

/// An idempotency key: 1 to [`MAX_KEY_CHARS`] characters and no control characters.
pub(crate) fn check_key(key: Option<&str>) -> Result<(), ToolError> {
    if let Some(key) = key {
        let chars = key.chars().count();
        if chars == 0 || chars > MAX_KEY_CHARS || key.chars().any(char::is_control) {
            return Err(ToolError::InvalidInput(format!(
                "idempotency_key must have 1 to {MAX_KEY_CHARS} characters and no control \
                 characters"
            )));
        }
    }
    Ok(())
}

/// A decided input's answer, or its refusal: when the domain refused the input itself (its
/// first log entry, the input's own verdict, is a rejection by a rule), the caller's error
/// with that rule and its words, as REST answers it.
pub(crate) fn refused_or_decided(outcome: &Outcome) -> Result<(bool, Option<i64>), ToolError> {
    let (decided_now, revision) = match outcome {
        Outcome::Decided { revision, .. } => (true, Some(revision.0)),
        Outcome::AlreadyDecided { revision, .. } => (false, Some(revision.0)),
        Outcome::AlreadyDone => (false, None),
    };
    if let Some(first) = outcome.log().first()
        && first.verdict == Verdict::Rejected
        && let Some(rule) = first.rule
    {
        return Err(ToolError::RuleRefused {
            rule,
            message: first.message.clone(),
            revision,
        });
    }
    Ok((decided_now, revision))
}

/// [`refused_or_decided`] as the answer of a decided input.
pub(crate) fn applied(outcome: &Outcome) -> Result<Applied, ToolError> {
    let (decided, revision) = refused_or_decided(outcome)?;
    Ok(Applied {
        decided,
        revision,
        log: outcome.log().iter().map(decided_entry).collect(),
    })
}

impl RoomTools {
    /// Refuses an input that needs deciding where this process only records: a decision
    /// here could reserve calls no agent of this process would run.
    pub(crate) fn deciding(&self, what: &str) -> Result<(), ToolError> {
        match self.posting {
            Posting::Decide => Ok(()),
            Posting::Record => Err(needs_host(what)),
        }
    }

    /// The input id of `what` sent by `caller`: derived from its idempotency key (the same
    /// key and request are the same input, decided once), fresh otherwise.
    pub(crate) fn input_id(
        &self,
        caller: &Caller,
        key: Option<&str>,
        what: &str,
    ) -> Result<InputId, ToolError> {
        Ok(match key {
            Some(key) => InputId::named(&format!(
                "mcp/{}/{}/{what}/{key}",
                caller.room, caller.principal
            )),
            None => self.coordinator.fresh_input_id()?,
        })
    }

    /// Posts `body` as `caller`'s event: stored, then decided (`Posting::Decide`), or stored
    /// for the host coordinating the Room to decide (`Posting::Record`). A rejection of the
    /// event by a rule is the caller's refusal.
    pub(crate) async fn post_event(
        &self,
        caller: &Caller,
        key: Option<&str>,
        body: EventBody,
    ) -> Result<Posted, ToolError> {
        let input_id = self.input_id(caller, key, &format!("event/{body:?}"))?;
        let id = EventId::from_uuid(*input_id.as_uuid());
        let event = Event {
            id,
            room: caller.room.clone(),
            author: caller.principal.clone(),
            body,
        };
        if self.posting == Posting::Record {
            self.coordinator.record(&event).await?;
            return Ok(Posted {
                event: id.to_string(),
                recorded: true,
                decided: false,
                revision: None,
                log: Vec::new(),
            });
        }
        let outcome = self.coordinator.post(&event).await?;
        posted(id, &outcome)
    }
}

/// What posting the event `id` answers, once decided.
pub(crate) fn posted(id: EventId, outcome: &Outcome) -> Result<Posted, ToolError> {
    let (decided, revision) = refused_or_decided(outcome)?;
    Ok(Posted {
        event: id.to_string(),
        recorded: true,
        decided,
        revision,
        log: outcome.log().iter().map(decided_entry).collect(),
    })
}

pub(crate) fn brief(objective: &Objective) -> ObjectiveBrief {
    ObjectiveBrief {
        id: objective.id().to_string(),
        title: objective.title().to_owned(),
        status: objective.status().as_str().to_owned(),
        owner: objective.owner().to_string(),
        revision: objective.revision(),
        control_revision: objective.control_revision(),
        plan_versions: objective.plans().len(),
    }
}

pub(crate) fn decided_entry(entry: &LogEntry) -> Decided {
    Decided {
        verdict: match entry.verdict {
            Verdict::Accepted => "accepted",
            Verdict::Rejected => "rejected",
        }
        .to_owned(),
        rule: entry.rule.map(|rule| rule.to_string()),
        message: entry.message.clone(),
        objective: entry.objective.map(|id| id.to_string()),
    }
}

pub(crate) fn json<T: Serialize>(value: &T) -> Result<serde_json::Value, ToolError> {
    serde_json::to_value(value).map_err(|error| ToolError::Internal(Box::new(error)))
}

#[tool_router(router = room_router, vis = "pub(crate)")]
impl RoomTools {
    /// The Room as the caller may see it: revision, your roles, objectives, the budget
    /// (with `budget.read`) and pending owner messages (for overseers).
    #[tool(
        name = "room_overview",
        description = "The Room as you may see it (GET /v1/rooms/{room}): its revision, your \
                       principal and roles, its objectives in brief, its budget balances (with \
                       budget.read) and owner messages waiting for interpretation (owners, \
                       operators, reviewers). Needs objective.read."
    )]
    pub async fn room_overview(
        &self,
        context: Extensions,
        Parameters(input): Parameters<Checked<NoInput>>,
    ) -> Result<Json<RoomOverview>, ToolError> {
        let NoInput {} = input.input()?;
        let (caller, _) = self.authorized(&context, Permission::ObjectiveRead).await?;
        let stored = self.with_history(&caller).await?;
        let state = &stored.state;
        let principal = &caller.principal;
        let balances = state.ledger().balances();
        Ok(Json(RoomOverview {
            room: state.room().to_string(),
            revision: stored.revision.0,
            you: You {
                principal: principal.to_string(),
                roles: state
                    .members()
                    .roles_of(principal)
                    .map(|role| role.as_str().to_owned())
                    .collect(),
            },
            members: state.members().iter().count(),
            objectives: state.objectives().iter().map(brief).collect(),
            budget: state
                .may(principal, Permission::BudgetRead)
                .then(|| Balances {
                    limit_micros: balances.limit.micros(),
                    reserved_micros: balances.reserved.micros(),
                    uncertain_micros: balances.uncertain.micros(),
                    spent_micros: balances.spent.micros(),
                    available_micros: balances.available.micros(),
                }),
            pending_messages: if state.oversees(principal) {
                state
                    .intake()
                    .iter()
                    .map(|(event, intake)| PendingMessage {
                        event: event.to_string(),
                        text: intake.text().chars().take(200).collect(),
                        attempts: intake.attempts(),
                    })
                    .collect()
            } else {
                Vec::new()
            },
        }))
    }

    /// The Room's objectives in brief.
    #[tool(
        name = "list_objectives",
        description = "The Room's objectives in brief (GET /v1/rooms/{room}/objectives): id, \
                       title, status, owner, revisions, plan versions. Needs objective.read."
    )]
    pub async fn list_objectives(
        &self,
        context: Extensions,
        Parameters(input): Parameters<Checked<NoInput>>,
    ) -> Result<Json<Objectives>, ToolError> {
        let NoInput {} = input.input()?;
        let (caller, _) = self.authorized(&context, Permission::ObjectiveRead).await?;
        let stored = self.with_history(&caller).await?;
        Ok(Json(Objectives {
            objectives: stored.state.objectives().iter().map(brief).collect(),
        }))
    }

    /// Posts an owner message as the caller (POST /v1/rooms/{room}/events, `owner_message`).
    #[tool(
        name = "post_owner_message",
        description = "Post a message to the Room as yourself (POST /v1/rooms/{room}/events, \
                       kind owner_message): stored, then decided. Only the owner's messages \
                       create objectives (O9): anyone else's is refused by that rule when it is \
                       decided. Where this server runs no agents (stdio), the message is \
                       stored and the host coordinating the Room decides it. Give an \
                       idempotency_key to post it once whatever the retries. Needs event.post."
    )]
    pub async fn post_owner_message(
        &self,
        context: Extensions,
        Parameters(input): Parameters<Checked<PostOwnerMessage>>,
    ) -> Result<Json<Posted>, ToolError> {
        let input = input.input()?;
        check_text(&input.text)?;
        check_key(input.idempotency_key.as_deref())?;
        let (caller, _) = self.authorized(&context, Permission::EventPost).await?;
        let body = EventBody::OwnerMessage { text: input.text };
        let posted = self
            .post_event(&caller, input.idempotency_key.as_deref(), body)
            .await?;
        Ok(Json(posted))
    }

    /// An objective with its criteria and its current plan's board.
    #[tool(
        name = "read_objective",
        description = "Read an objective and its board (GET \
                       /v1/rooms/{room}/objectives/{objective}): its brief, criteria, counters, \
                       the report awaiting review, and the current plan's columns (backlog, todo, \
                       in_progress, done) with the tasks you may see. Needs objective.read."
    )]
    pub async fn read_objective(
        &self,
        context: Extensions,
        Parameters(input): Parameters<Checked<ReadObjective>>,
    ) -> Result<Json<ObjectiveDetail>, ToolError> {
        let input = input.input()?;
        let (caller, stored) = self.authorized(&context, Permission::ObjectiveRead).await?;
        let id = specialist::objective_id(&input.objective)?;
        let stored = self.showing(&caller, stored, id).await?;
        let state = &stored.state;
        let objective = state
            .objective(id)
            .ok_or_else(|| ToolError::NotFound(format!("no objective {id} in this room")))?;
        let board = match objective.current_plan() {
            Some(plan) => {
                let mut columns = Vec::new();
                for column in [
                    Column::Backlog,
                    Column::Todo,
                    Column::InProgress,
                    Column::Done,
                ] {
                    let mut tasks = Vec::new();
                    for task in plan.tasks().iter().filter(|task| {
                        plan.column_of(task) == column && state.sees_task(&caller.principal, task)
                    }) {
                        tasks.push(BoardTask {
                            identity: task.identity().to_string(),
                            key: task.key().to_string(),
                            title: task.spec().title.clone(),
                            capability: task.capability().to_owned(),
                            kind: json(&task.kind())?,
                            assignee: task.assignee().to_string(),
                            deps: task.spec().deps.iter().map(ToString::to_string).collect(),
                            state: json(task.state())?,
                            reused: task.is_reused(),
                        });
                    }
                    columns.push(BoardColumn {
                        column: column.as_str().to_owned(),
                        tasks,
                    });
                }
                Some(Board {
                    plan_version: plan.number(),
                    columns,
                })
            }
            None => None,
        };
        Ok(Json(ObjectiveDetail {
            brief: brief(objective),
            criteria: criteria(objective),
            counters: json(&objective.counters())?,
            board,
            awaiting_review: objective
                .awaiting_review()
                .map(|r| json(r.report()))
                .transpose()?,
        }))
    }

    /// Corrects an objective as its owner (O14).
    #[tool(
        name = "correct_objective",
        description = "Correct an active objective as the Room's owner (POST \
                       /v1/rooms/{room}/events, kind owner_correction; O14, R6): what you say \
                       now, and optionally the criteria that replace the frozen ones. Only the \
                       owner's corrections enter the correction history; anyone else's, or one \
                       of a completed or canceled objective, is refused and nothing is stored. \
                       Where this server runs no agents (stdio), it is stored for the host to \
                       decide. Give an idempotency_key to post it once. Needs event.post."
    )]
    pub async fn correct_objective(
        &self,
        context: Extensions,
        Parameters(input): Parameters<Checked<CorrectObjective>>,
    ) -> Result<Json<Posted>, ToolError> {
        let input = input.input()?;
        check_text(&input.text)?;
        check_key(input.idempotency_key.as_deref())?;
        let criteria = match input.criteria {
            Some(criteria) => Some(
                criteria
                    .into_iter()
                    .map(|c| {
                        check_length("a criterion's text", &c.text, MAX_CRITERION_CHARS)?;
                        Ok(Criterion {
                            id: CriterionId::parse(&c.id).map_err(|error| {
                                ToolError::InvalidInput(format!("criteria: {error}"))
                            })?,
                            text: c.text,
                        })
                    })
                    .collect::<Result<Vec<_>, ToolError>>()?,
            ),
            None => None,
        };
        let (caller, _) = self.authorized(&context, Permission::EventPost).await?;
        let objective = specialist::objective_id(&input.objective)?;
        let body = EventBody::OwnerCorrection {
            objective,
            text: input.text,
            criteria,
        };
        let posted = self
            .post_event(&caller, input.idempotency_key.as_deref(), body)
            .await?;
        Ok(Json(posted))
    }
}
