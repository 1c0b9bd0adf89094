//! The tools of reviewers: a report version with its sources, and a review with evidence per
//! criterion.

use rmcp::tool_router;

use crate::RoomTools;

#[tool_router(router = review_router, vis = "pub(crate)", allow_empty)]
impl RoomTools {}
