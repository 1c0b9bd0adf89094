//! What every handler shares: the planning service, the settings and the live sessions.

use std::sync::Arc;

use agentroom_planning::PlanningService;

use crate::config::ServerConfig;
use crate::sessions::Sessions;

/// The router's state; cheap to clone.
#[derive(Clone)]
pub(crate) struct AppState {
    pub(crate) service: Arc<PlanningService>,
    pub(crate) config: Arc<ServerConfig>,
    pub(crate) sessions: Arc<Sessions>,
    /// When set, callers authenticate with a bearer token and act in its Room
    /// ([`crate::authenticated_router`]); when not, every caller is the owner of
    /// `config.room`.
    pub(crate) auth: Option<Arc<crate::api::Api>>,
}

/// Set by [`crate::serve`] when the server begins to stop: open streams end, so the graceful
/// shutdown does not wait for clients that never hang up.
#[derive(Debug, Clone)]
pub(crate) struct Stopping(pub(crate) tokio::sync::watch::Receiver<bool>);
