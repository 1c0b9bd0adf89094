//! The six A2E planning messages (seed 000): wire types and validation ([`wire`]), the
//! rules that need stored data ([`rules`]), the storage port ([`PlanningRepository`]), the
//! service with `supported_messages()` and `handle()` ([`PlanningService`]) and one A2E
//! session over any transport ([`Session`]).
//!
//! What cannot be understood is answered with an A2E `error` (`parse_error`,
//! `invalid_message`, `schema_violation`, `runtime_error`) whose `detail` is an object; what
//! a rule refuses is answered with the normal response type, `success: false`, `code` and
//! `message`. Either way nothing is stored or changed.

pub mod coordinator;
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
pub use model::{
    Columns, DEFAULT_COLUMNS, NewPlan, NewTask, PlanKind, PlanRecord, Refusal, RefusalCode,
    TaskChange, TaskDetail, TaskRow, TaskRowRef, TaskRows,
};
pub use repo::{PlanningRepository, RepoError};
pub use service::{Ambient, CountingAmbient, PlanningService, SystemAmbient};
pub use session::{Session, Step};
