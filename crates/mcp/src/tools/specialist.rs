//! The tools of agent hosts and specialists: their assignments (with the dependency content
//! and sources each call may cite), and what they do about them.

use agentroom_domain::room::Permission;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::Extensions;
use rmcp::{Json, tool, tool_router};
use schemars::JsonSchema;
use serde::Serialize;

use super::{Checked, NoInput, json};
use crate::{RoomTools, ToolError};

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
}
