//! The tools of operators: the budget, the objectives' controls, late results and uncertain
//! operations.

use rmcp::tool_router;

use crate::RoomTools;

#[tool_router(router = operator_router, vis = "pub(crate)", allow_empty)]
impl RoomTools {}
