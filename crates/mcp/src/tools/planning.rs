//! The six A2E planning messages as tools: each input becomes that message, decoded by the
//! A2E wire's own decoder (the same limits and errors as A2E and `POST …/planning`) and
//! answered by the same planning service as the caller's principal (T2, T3: an agent moves
//! only its own tasks on an objective's board, by the rules). The answer is the A2E reply's
//! fields without its envelope; a refusal by a rule is a tool error with the reply's code.

use agentroom_domain::room::Permission;
use agentroom_planning::wire::{self, Body, Envelope, Reply};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::Extensions;
use rmcp::{Json, tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{Checked, NoInput};
use crate::{Caller, RoomTools, ToolError};

/// `planning_plan_create`'s input (`planning/plan/create`).
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PlanCreate {
    /// Display name (default `default`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The board's columns (default: backlog, todo, in_progress, review, done).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub columns: Option<Vec<String>>,
    /// What the plan is for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// `planning_task_add`'s input (`planning/task/add`).
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskAdd {
    /// The plan.
    pub plan_id: String,
    /// The task's title; not blank.
    pub title: String,
    /// Its column (default `backlog`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// What it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Who does it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub assignee: Option<String>,
    /// Tasks of the same plan it depends on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deps: Option<Vec<String>>,
    /// Anything else, as a JSON object.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

/// `planning_task_update`'s input (`planning/task/update`): what is given changes.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskUpdate {
    /// The plan.
    pub plan_id: String,
    /// The task.
    pub task_id: String,
    /// Its new column.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Its new assignee.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub assignee: Option<String>,
    /// Its new dependencies.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deps: Option<Vec<String>>,
}

/// `planning_task_list`'s input (`planning/task/list`).
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskList {
    /// Only this plan's tasks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan_id: Option<String>,
    /// Only tasks in this column.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
}

/// `planning_plan_board`'s input (`planning/plan/board`).
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PlanBoard {
    /// Only this plan's board (default: every plan's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan_id: Option<String>,
}

/// A planning message's reply: the A2E `…/resp` message's fields without its envelope
/// (`success` and the fields of its type: `plan_id`, `plans`, `task_id`, `tasks`, `boards`…).
#[derive(Debug, Serialize, JsonSchema)]
pub struct PlanningAnswer {
    /// The A2E response type (`planning/plan/create/resp`, …).
    pub reply_type: String,
    /// The reply's fields.
    #[serde(flatten)]
    pub fields: Map<String, Value>,
}

impl RoomTools {
    /// Sends `input` as the planning message `kind` for the caller.
    async fn planning(
        &self,
        context: &Extensions,
        kind: &str,
        input: &impl Serialize,
    ) -> Result<PlanningAnswer, ToolError> {
        let (caller, _) = self.authorized(context, Permission::PlanningUse).await?;
        let service = self.planning.as_ref().ok_or_else(|| {
            ToolError::WrongState(
                "this process does not serve the planning messages: connect through the host \
                 that coordinates the Room (`agentroom mcp --stdio --host URL`, or its /mcp \
                 endpoint)"
                    .to_owned(),
            )
        })?;
        let mut message = match serde_json::to_value(input) {
            Ok(Value::Object(fields)) => fields,
            Ok(_) | Err(_) => {
                return Err(ToolError::InvalidInput(
                    "the input is not a JSON object".to_owned(),
                ));
            }
        };
        message.insert("type".to_owned(), Value::from(kind));
        message.insert("id".to_owned(), Value::from("mcp"));
        let bytes =
            serde_json::to_vec(&message).map_err(|error| ToolError::Internal(Box::new(error)))?;
        let request = match wire::decode(&bytes) {
            Ok(inbound) => match inbound.body {
                Body::Planning(request) => request,
                _ => {
                    return Err(ToolError::InvalidInput(format!(
                        "{kind} is not a planning request"
                    )));
                }
            },
            // The wire's own words: a limit exceeded, a field of the wrong type, a NUL.
            Err(error) => return Err(ToolError::InvalidInput(error.message)),
        };
        let Caller { room, principal } = caller;
        let reply = service
            .handle_as(&room, Some(&principal), request)
            .await
            .map_err(|error| ToolError::Internal(Box::new(error)))?;
        if let agentroom_planning::wire::PlanningReply::Refused { refusal, .. } = &reply {
            return Err(ToolError::PlanningRefused {
                code: refusal.code.as_str(),
                message: refusal.message.clone(),
            });
        }
        let reply_type = reply.response_type().to_owned();
        let line = wire::encode(
            &Reply::Planning(reply),
            Envelope {
                id: "mcp",
                ts: 0.0,
                req_id: "mcp",
            },
        );
        let Ok(Value::Object(mut fields)) = serde_json::from_str::<Value>(&line) else {
            return Err(ToolError::Internal(
                "a planning reply is not a JSON object".into(),
            ));
        };
        for envelope in ["type", "id", "ts", "req_id", "version"] {
            fields.remove(envelope);
        }
        Ok(PlanningAnswer { reply_type, fields })
    }
}

#[tool_router(router = planning_router, vis = "pub(crate)")]
impl RoomTools {
    /// `planning/plan/create`.
    #[tool(
        name = "planning_plan_create",
        description = "A2E planning/plan/create: create a plan (a kanban board) in the Room; \
                       answers its plan_id and columns. Needs planning.use."
    )]
    pub async fn planning_plan_create(
        &self,
        context: Extensions,
        Parameters(input): Parameters<Checked<PlanCreate>>,
    ) -> Result<Json<PlanningAnswer>, ToolError> {
        let input = input.input()?;
        Ok(Json(
            self.planning(&context, "planning/plan/create", &input)
                .await?,
        ))
    }

    /// `planning/plan/list`.
    #[tool(
        name = "planning_plan_list",
        description = "A2E planning/plan/list: the Room's plans, objectives' boards included. \
                       Needs planning.use."
    )]
    pub async fn planning_plan_list(
        &self,
        context: Extensions,
        Parameters(input): Parameters<Checked<NoInput>>,
    ) -> Result<Json<PlanningAnswer>, ToolError> {
        let NoInput {} = input.input()?;
        Ok(Json(
            self.planning(&context, "planning/plan/list", &Map::new())
                .await?,
        ))
    }

    /// `planning/task/add`.
    #[tool(
        name = "planning_task_add",
        description = "A2E planning/task/add: add a task to a plan (not to an objective's \
                       board, which only its admitted plan changes, O7). Needs planning.use."
    )]
    pub async fn planning_task_add(
        &self,
        context: Extensions,
        Parameters(input): Parameters<Checked<TaskAdd>>,
    ) -> Result<Json<PlanningAnswer>, ToolError> {
        let input = input.input()?;
        Ok(Json(
            self.planning(&context, "planning/task/add", &input).await?,
        ))
    }

    /// `planning/task/update`.
    #[tool(
        name = "planning_task_update",
        description = "A2E planning/task/update: move a task or change its assignee or \
                       dependencies. On an objective's board an agent moves only its own task, \
                       by the rules (T2). Needs planning.use."
    )]
    pub async fn planning_task_update(
        &self,
        context: Extensions,
        Parameters(input): Parameters<Checked<TaskUpdate>>,
    ) -> Result<Json<PlanningAnswer>, ToolError> {
        let input = input.input()?;
        Ok(Json(
            self.planning(&context, "planning/task/update", &input)
                .await?,
        ))
    }

    /// `planning/task/list`.
    #[tool(
        name = "planning_task_list",
        description = "A2E planning/task/list: the tasks of the Room's plans, by plan and \
                       column if given. Needs planning.use."
    )]
    pub async fn planning_task_list(
        &self,
        context: Extensions,
        Parameters(input): Parameters<Checked<TaskList>>,
    ) -> Result<Json<PlanningAnswer>, ToolError> {
        let input = input.input()?;
        Ok(Json(
            self.planning(&context, "planning/task/list", &input)
                .await?,
        ))
    }

    /// `planning/plan/board`.
    #[tool(
        name = "planning_plan_board",
        description = "A2E planning/plan/board: a plan's kanban board (every plan's without \
                       plan_id), objectives' boards included. Needs planning.use."
    )]
    pub async fn planning_plan_board(
        &self,
        context: Extensions,
        Parameters(input): Parameters<Checked<PlanBoard>>,
    ) -> Result<Json<PlanningAnswer>, ToolError> {
        let input = input.input()?;
        Ok(Json(
            self.planning(&context, "planning/plan/board", &input)
                .await?,
        ))
    }
}
