//! The six A2E planning messages as tools.

use rmcp::tool_router;

use crate::RoomTools;

#[tool_router(router = planning_router, vis = "pub(crate)", allow_empty)]
impl RoomTools {}
