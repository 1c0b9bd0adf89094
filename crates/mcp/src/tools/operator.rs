//! The tools of operators: the budget, the objectives' controls, late results and uncertain
//! operations. Each is REST's route of the same name, with the same permission: the reads
//! answer what REST shows, the inputs are submitted to the coordinator and decided by the
//! domain (a refusal by a rule is a tool error naming it).

use agentroom_coordinator::{OperatorInput, ResolveOutcome};
use agentroom_domain::engine::{ControlAction, LateDecision};
use agentroom_domain::ids::{ObjectiveId, OperationId};
use agentroom_domain::ledger::Balances as LedgerBalances;
use agentroom_domain::money::UsdMicros;
use agentroom_domain::room::Permission;
use agentroom_ports::{OperationStatus, Resolution, ResolutionOutcome, StoredRoom};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::Extensions;
use rmcp::{Json, tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use super::{Applied, Balances, Checked, applied, check_key, json};
use crate::{Caller, RoomTools, ToolError};

/// The most ledger entries `budget_show` answers with.
pub const MAX_LEDGER_ENTRIES: usize = 200;

/// `budget_show`'s input.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BudgetShow {
    /// How many of the latest ledger entries to include (default 20, at most 200).
    #[schemars(range(min = 0, max = 200))]
    pub entries: Option<usize>,
}

/// A budget pool's gauge (B8), for a Room that draws on one.
#[derive(Debug, Serialize, JsonSchema)]
pub struct PoolGauge {
    /// The pool.
    pub id: String,
    /// Its balances.
    pub balances: Balances,
    /// The overrun that stopped its admissions, if one did (B5).
    pub overrun: Option<serde_json::Value>,
}

/// `budget_show`'s answer (REST's `GET …/budget`).
#[derive(Debug, Serialize, JsonSchema)]
pub struct BudgetView {
    /// The Room's balances.
    pub balances: Balances,
    /// The overrun that stopped admissions until acknowledged (B5), if any.
    pub overrun: Option<serde_json::Value>,
    /// The pool the Room draws on (B8), if it draws on one.
    pub pool: Option<PoolGauge>,
    /// Micros charged per objective.
    pub spent_micros_by_objective: BTreeMap<String, i64>,
    /// Micros charged per call role.
    pub spent_micros_by_role: BTreeMap<String, i64>,
    /// Micros charged per principal called.
    pub spent_micros_by_principal: BTreeMap<String, i64>,
    /// Micros charged per model.
    pub spent_micros_by_model: BTreeMap<String, i64>,
    /// How many ledger entries the Room has.
    pub ledger_entries: usize,
    /// The latest ones, oldest first.
    pub latest_entries: Vec<serde_json::Value>,
}

/// `budget_raise`'s input (B4).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BudgetRaise {
    /// By how much, in USD micros; positive.
    #[schemars(range(min = 1))]
    pub amount_micros: i64,
    /// A key of the caller's choosing: the same key raises once.
    #[schemars(length(min = 1, max = 128))]
    pub idempotency_key: Option<String>,
}

/// An input that takes only an idempotency key.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KeyOnly {
    /// A key of the caller's choosing: the same key decides once.
    #[schemars(length(min = 1, max = 128))]
    pub idempotency_key: Option<String>,
}

/// What to do to an objective (D3).
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Control {
    /// Stop dispatching and abort running calls.
    Pause,
    /// Continue where it was.
    Resume,
    /// End it.
    Cancel,
}

/// `control_objective`'s input.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ControlObjective {
    /// The objective's id.
    pub objective: String,
    /// `pause`, `resume` or `cancel`.
    pub action: Control,
    /// A key of the caller's choosing: the same key decides once.
    #[schemars(length(min = 1, max = 128))]
    pub idempotency_key: Option<String>,
}

/// A result held after a control change, awaiting readmission or discard (D4).
#[derive(Debug, Serialize, JsonSchema)]
pub struct LateResult {
    /// Its operation.
    pub operation: String,
    /// Its objective.
    pub objective: String,
    /// Its task.
    pub task: serde_json::Value,
    /// The contribution it holds.
    pub contribution: String,
}

/// `list_late_results`'s answer.
#[derive(Debug, Serialize, JsonSchema)]
pub struct LateResults {
    /// The held results.
    pub late_results: Vec<LateResult>,
}

/// What to do with a held result.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Late {
    /// Use it: the task completes with it.
    Readmit,
    /// Drop it: the task stays open.
    Discard,
}

/// `decide_late_result`'s input.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DecideLateResult {
    /// The held result's operation.
    pub operation: String,
    /// `readmit` or `discard`.
    pub decision: Late,
    /// A key of the caller's choosing: the same key decides once.
    #[schemars(length(min = 1, max = 128))]
    pub idempotency_key: Option<String>,
}

/// An uncertain or dead-lettered operation (REST's `OperationView`).
#[derive(Debug, Serialize, JsonSchema)]
pub struct OperationView {
    /// The operation.
    pub operation: String,
    /// `uncertain` or `dead_letter`.
    pub status: String,
    /// The call's role.
    pub role: String,
    /// The principal called, for a specialist or reviewer call.
    pub principal: Option<String>,
    /// Its objective.
    pub objective: Option<String>,
    /// Its reservation, in USD micros.
    pub reservation_micros: i64,
    /// Recovery attempts so far.
    pub recovery_attempts: u32,
    /// Why it was dead-lettered.
    pub dead_letter_reason: Option<String>,
    /// What the Room recorded as its cause, when it did.
    pub cause: Option<String>,
}

/// `list_uncertain_operations`'s answer.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Operations {
    /// The Room's uncertain and dead-lettered operations.
    pub operations: Vec<OperationView>,
}

/// What an operator confirmed about an operation.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Confirmed {
    /// The call took effect.
    Succeeded,
    /// It did not.
    Failed,
}

/// `resolve_operation`'s input (D2).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResolveOperation {
    /// The operation.
    pub operation: String,
    /// What was confirmed.
    pub outcome: Confirmed,
    /// Why: what was checked; not blank.
    #[schemars(length(min = 1, max = 2000))]
    pub reason: String,
}

/// `resolve_operation`'s answer.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Resolved {
    /// The operation.
    pub operation: String,
    /// What was confirmed.
    pub outcome: Confirmed,
    /// Who confirmed it.
    pub operator: String,
    /// Why.
    pub reason: String,
    /// When it applies.
    pub applied: String,
}

fn balances(of: LedgerBalances) -> Balances {
    Balances {
        limit_micros: of.limit.micros(),
        reserved_micros: of.reserved.micros(),
        uncertain_micros: of.uncertain.micros(),
        spent_micros: of.spent.micros(),
        available_micros: of.available.micros(),
    }
}

impl RoomTools {
    /// `text` as an objective id of the caller's Room, open or closed (its record read then),
    /// or not found.
    async fn objective_in(
        &self,
        caller: &Caller,
        stored: StoredRoom,
        text: &str,
    ) -> Result<ObjectiveId, ToolError> {
        let unknown = || ToolError::NotFound(format!("no objective {text} in this room"));
        let id: ObjectiveId = text.parse().map_err(|_| unknown())?;
        let shown = self.showing(caller, stored, id).await?;
        shown.state.objective(id).map(|_| id).ok_or_else(unknown)
    }
}

/// `text` as an operation id, or not found (`what` names what was looked for).
fn operation_id(text: &str, what: &str) -> Result<OperationId, ToolError> {
    text.parse()
        .map_err(|_| ToolError::NotFound(format!("no {what} {text}")))
}

#[tool_router(router = operator_router, vis = "pub(crate)")]
impl RoomTools {
    /// The Room's budget.
    #[tool(
        name = "budget_show",
        description = "The Room's budget (GET /v1/rooms/{room}/budget): balances in USD micros, \
                       the overrun that stops admissions until acknowledged, the pool it draws \
                       on, spend by objective, role, principal and model, and the latest ledger \
                       entries. Needs budget.read."
    )]
    pub async fn budget_show(
        &self,
        context: Extensions,
        Parameters(input): Parameters<Checked<BudgetShow>>,
    ) -> Result<Json<BudgetView>, ToolError> {
        let input = input.input()?;
        let wanted = input.entries.unwrap_or(20);
        if wanted > MAX_LEDGER_ENTRIES {
            return Err(ToolError::InvalidInput(format!(
                "entries is {wanted}; the most is {MAX_LEDGER_ENTRIES}"
            )));
        }
        let (caller, stored) = self.authorized(&context, Permission::BudgetRead).await?;
        let breakdown = self.coordinator.budget(&caller.room).await?;
        let ledger = stored.state.ledger();
        let pool = match self.coordinator.room_pool(&caller.room).await? {
            Some(pool) => Some(PoolGauge {
                id: pool.id.to_string(),
                balances: balances(pool.ledger.balances()),
                overrun: pool.ledger.overrun().map(|o| json(&o)).transpose()?,
            }),
            None => None,
        };
        let total = breakdown.entries.len();
        let latest = breakdown
            .entries
            .iter()
            .skip(total.saturating_sub(wanted))
            .map(json)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Json(BudgetView {
            balances: balances(ledger.balances()),
            overrun: ledger.overrun().map(|o| json(&o)).transpose()?,
            pool,
            spent_micros_by_objective: breakdown.by_objective,
            spent_micros_by_role: breakdown.by_role,
            spent_micros_by_principal: breakdown.by_principal,
            spent_micros_by_model: breakdown.by_model,
            ledger_entries: total,
            latest_entries: latest,
        }))
    }

    /// Raises the Room's limit.
    #[tool(
        name = "budget_raise",
        description = "Raise the Room's budget limit by amount_micros (POST \
                       /v1/rooms/{room}/budget/raise, B4). Decided by the Room's rules; give an \
                       idempotency_key to raise once whatever the retries. Needs budget.raise."
    )]
    pub async fn budget_raise(
        &self,
        context: Extensions,
        Parameters(input): Parameters<Checked<BudgetRaise>>,
    ) -> Result<Json<Applied>, ToolError> {
        let input = input.input()?;
        if input.amount_micros <= 0 {
            return Err(ToolError::InvalidInput(format!(
                "amount_micros must be positive, not {}",
                input.amount_micros
            )));
        }
        check_key(input.idempotency_key.as_deref())?;
        let (caller, _) = self.authorized(&context, Permission::BudgetRaise).await?;
        self.deciding("raising the budget")?;
        let id = self.input_id(
            &caller,
            input.idempotency_key.as_deref(),
            &format!("raise/{}", input.amount_micros),
        )?;
        let outcome = self
            .coordinator
            .raise_limit(
                &caller.room,
                id,
                caller.principal.clone(),
                UsdMicros::new(input.amount_micros),
            )
            .await?;
        Ok(Json(applied(&outcome)?))
    }

    /// Acknowledges the Room's overrun.
    #[tool(
        name = "budget_acknowledge",
        description = "Acknowledge the Room's budget overrun (POST \
                       /v1/rooms/{room}/budget/acknowledge, B5): admissions resume within the \
                       limit. Refused by its rule when there is no overrun. Needs \
                       budget.acknowledge."
    )]
    pub async fn budget_acknowledge(
        &self,
        context: Extensions,
        Parameters(input): Parameters<Checked<KeyOnly>>,
    ) -> Result<Json<Applied>, ToolError> {
        let input = input.input()?;
        check_key(input.idempotency_key.as_deref())?;
        let (caller, _) = self
            .authorized(&context, Permission::BudgetAcknowledge)
            .await?;
        self.deciding("acknowledging an overrun")?;
        let id = self.input_id(&caller, input.idempotency_key.as_deref(), "acknowledge")?;
        let outcome = self
            .coordinator
            .submit(
                &caller.room,
                id,
                OperatorInput::AcknowledgeOverrun {
                    by: caller.principal.clone(),
                },
            )
            .await?;
        Ok(Json(applied(&outcome)?))
    }

    /// Pauses, resumes or cancels an objective.
    #[tool(
        name = "control_objective",
        description = "Pause, resume or cancel an objective (POST \
                       /v1/rooms/{room}/objectives/{objective}/control, D3): a pause or cancel \
                       aborts its running calls, whose results are then held (see \
                       list_late_results). Needs objective.control."
    )]
    pub async fn control_objective(
        &self,
        context: Extensions,
        Parameters(input): Parameters<Checked<ControlObjective>>,
    ) -> Result<Json<Applied>, ToolError> {
        let input = input.input()?;
        check_key(input.idempotency_key.as_deref())?;
        let (caller, stored) = self
            .authorized(&context, Permission::ObjectiveControl)
            .await?;
        let objective = self.objective_in(&caller, stored, &input.objective).await?;
        self.deciding("controlling an objective")?;
        let action = match input.action {
            Control::Pause => ControlAction::Pause,
            Control::Resume => ControlAction::Resume,
            Control::Cancel => ControlAction::Cancel,
        };
        let id = self.input_id(
            &caller,
            input.idempotency_key.as_deref(),
            &format!("control/{objective}/{action:?}"),
        )?;
        let outcome = self
            .coordinator
            .control(
                &caller.room,
                id,
                caller.principal.clone(),
                objective,
                action,
            )
            .await?;
        Ok(Json(applied(&outcome)?))
    }

    /// The results held after a control change.
    #[tool(
        name = "list_late_results",
        description = "Results held after a pause or cancel, awaiting readmission or discard \
                       (GET /v1/rooms/{room}/late-results, D4). Needs late_result.decide."
    )]
    pub async fn list_late_results(
        &self,
        context: Extensions,
        Parameters(input): Parameters<Checked<super::NoInput>>,
    ) -> Result<Json<LateResults>, ToolError> {
        let super::NoInput {} = input.input()?;
        let (_, stored) = self
            .authorized(&context, Permission::LateResultDecide)
            .await?;
        let mut late_results = Vec::new();
        for held in stored.state.held_results().values() {
            late_results.push(LateResult {
                operation: held.op().to_string(),
                objective: held.objective().to_string(),
                task: json(held.task())?,
                contribution: held.contribution().to_string(),
            });
        }
        Ok(Json(LateResults { late_results }))
    }

    /// Readmits or discards a held result.
    #[tool(
        name = "decide_late_result",
        description = "Readmit or discard a result held after a control change (POST \
                       /v1/rooms/{room}/late-results/{operation}, D4). Needs \
                       late_result.decide."
    )]
    pub async fn decide_late_result(
        &self,
        context: Extensions,
        Parameters(input): Parameters<Checked<DecideLateResult>>,
    ) -> Result<Json<Applied>, ToolError> {
        let input = input.input()?;
        check_key(input.idempotency_key.as_deref())?;
        let (caller, stored) = self
            .authorized(&context, Permission::LateResultDecide)
            .await?;
        let op = operation_id(&input.operation, "held result of operation")?;
        if !self
            .coordinator
            .holds_late_result(&caller.room, &stored, op)
            .await?
        {
            return Err(ToolError::NotFound(format!(
                "no held result of operation {op}"
            )));
        }
        self.deciding("deciding a late result")?;
        let decision_of = match input.decision {
            Late::Readmit => LateDecision::Readmit,
            Late::Discard => LateDecision::Discard,
        };
        let id = self.input_id(
            &caller,
            input.idempotency_key.as_deref(),
            &format!("late/{op}/{decision_of:?}"),
        )?;
        let outcome = self
            .coordinator
            .decide_late_result(&caller.room, id, caller.principal.clone(), op, decision_of)
            .await?;
        Ok(Json(applied(&outcome)?))
    }

    /// The Room's uncertain and dead-lettered operations.
    #[tool(
        name = "list_uncertain_operations",
        description = "The Room's uncertain and dead-lettered operations (GET \
                       /v1/rooms/{room}/operations, D2): calls whose effect nobody can confirm \
                       without a person. Needs operation.resolve."
    )]
    pub async fn list_uncertain_operations(
        &self,
        context: Extensions,
        Parameters(input): Parameters<Checked<super::NoInput>>,
    ) -> Result<Json<Operations>, ToolError> {
        let super::NoInput {} = input.input()?;
        let (caller, stored) = self
            .authorized(&context, Permission::OperationResolve)
            .await?;
        let mut operations = Vec::new();
        for status in [OperationStatus::Uncertain, OperationStatus::DeadLetter] {
            for record in self
                .coordinator
                .room_operations(&caller.room, Some(status))
                .await?
            {
                operations.push(OperationView {
                    operation: record.op().to_string(),
                    status: record.status.as_str().to_owned(),
                    role: record.request.role.as_str().to_owned(),
                    principal: record.request.principal.as_ref().map(|p| p.to_string()),
                    objective: record.request.objective.map(|o| o.to_string()),
                    reservation_micros: record.request.reservation.micros(),
                    recovery_attempts: record.recovery_attempts,
                    dead_letter_reason: record.dead_letter_reason.clone(),
                    cause: stored
                        .state
                        .operation(record.op())
                        .and_then(|o| o.cause())
                        .map(|c| c.cause.clone()),
                });
            }
        }
        Ok(Json(Operations { operations }))
    }

    /// Records what an operator confirmed about an uncertain operation.
    #[tool(
        name = "resolve_operation",
        description = "Record what you confirmed about an uncertain or dead-lettered operation \
                       (POST /v1/rooms/{room}/operations/{operation}/resolve, D2): succeeded or \
                       failed, and why. The Room applies it at its coordinator's next recovery. \
                       Needs operation.resolve."
    )]
    pub async fn resolve_operation(
        &self,
        context: Extensions,
        Parameters(input): Parameters<Checked<ResolveOperation>>,
    ) -> Result<Json<Resolved>, ToolError> {
        let input = input.input()?;
        if input.reason.trim().is_empty() {
            return Err(ToolError::InvalidInput(
                "reason must say why (what was checked)".to_owned(),
            ));
        }
        let (caller, _) = self
            .authorized(&context, Permission::OperationResolve)
            .await?;
        let op = operation_id(&input.operation, "operation")?;
        let unknown = || ToolError::NotFound(format!("no operation {op} in this room"));
        let resolution = Resolution {
            outcome: match input.outcome {
                Confirmed::Succeeded => ResolutionOutcome::Succeeded,
                Confirmed::Failed => ResolutionOutcome::Failed,
            },
            operator: caller.principal.to_string(),
            reason: input.reason,
            at: self.coordinator.now(),
        };
        match self
            .coordinator
            .resolve(&caller.room, op, &resolution)
            .await?
        {
            None => return Err(unknown()),
            Some(ResolveOutcome::Recorded) => {}
            Some(ResolveOutcome::NotResolvable(status)) => {
                return Err(ToolError::WrongState(format!(
                    "operation {op} is {}, not uncertain or dead-lettered; nothing was changed",
                    status.as_str()
                )));
            }
        }
        Ok(Json(Resolved {
            operation: op.to_string(),
            outcome: input.outcome,
            operator: resolution.operator,
            reason: resolution.reason,
            applied: "at the next recovery of the room's coordinator".to_owned(),
        }))
    }
}
