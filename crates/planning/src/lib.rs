//! The six A2E planning messages (seed 000): wire types and validation ([`wire`]), the
//! rules that need stored data ([`rules`]), the storage port ([`PlanningRepository`]), the
//! service with `supported_messages()` and `handle()` ([`PlanningService`]) and one A2E
//! session over any transport ([`Session`]). Coordinator plans (one per objective, `plan_id` =
//! the objective id) come through the [`CoordinatorPlans`] seam, which the coordinator
//! implements: shown on boards and in lists, closed to `task/add`, open only to an agent's
//! rule-respecting status updates of its own tasks, which the coordinator decides.
//!
//! What cannot be understood is answered with an A2E `error` (`parse_error`,
//! `invalid_message`, `schema_violation`, `runtime_error`) whose `detail` is an object; what
//! a rule refuses is answered with the normal response type, `success: false`, `code` and
//! `message`. Either way nothing is stored or changed (a rule of the engine that refuses an
//! agent's update of a coordinator plan leaves the board as it was; the coordinator logs the
//! rejection in the Room's decision log, as it does every decision).

pub mod coordinator;
pub mod error;
pub mod limits;
pub mod model;
pub mod repo;
pub mod rules;
pub mod service;
pub mod session;
pub mod wire;

#[cfg(feature = "conformance")]
pub mod conformance;

/// The ids and time this crate's API names (`Session::new(service, room)`, `Ambient::now`),
/// so a transport can call it without depending on the domain crate itself.
pub use agentroom_domain::ids::{PrincipalId, RoomId, Timestamp};
pub use coordinator::{AgentTaskUpdate, CoordinatorPlan, CoordinatorPlans};
pub use error::BoxError;
pub use model::{
    Columns, DEFAULT_COLUMNS, NewPlan, NewTask, PlanKind, PlanRecord, Refusal, RefusalCode,
    TaskChange, TaskDetail, TaskRow, TaskRowRef, TaskRows,
};
pub use repo::{PlanningRepository, RepoError};
pub use service::{
    Ambient, CountingAmbient, NoRandomness, PlanningError, PlanningService, SystemAmbient,
};
pub use session::{Session, Step};
