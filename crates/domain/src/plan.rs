//! Plan versions and tasks: keys, identities (O3, O4), specs, kinds, engine task state and the
//! planning column each state shows in.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::catalog::DeclaredOutput;
use crate::ids::{ContributionId, EventId, OperationId, PlanVersionId, PrincipalId, ReviewId};
use crate::ids::{TaskIdentity, TaskKey};
use crate::objective::ObservedRevisions;

/// Whether a task produces work or the objective's report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskKind {
    /// Production work.
    Production,
    /// The report: exactly one per plan; its contribution is the versioned report.
    Report,
}

/// What a task is: the part of a task that decides whether a completed task can be reused (O3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskSpec {
    /// The title.
    pub title: String,
    /// The capability it requires, as proposed.
    pub capability: String,
    /// Its inputs, as proposed.
    pub inputs: Map<String, Value>,
    /// The keys it depends on, sorted and without repeats.
    pub deps: Vec<TaskKey>,
}

/// The engine's state of a task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "state")]
pub enum TaskState {
    /// Not dispatched: waiting on deps (backlog) or ready (todo).
    Pending,
    /// A call is running for it.
    Dispatched {
        /// The operation.
        op: OperationId,
    },
    /// Its call acknowledged that it waits on something outside (O12).
    WaitingOutside {
        /// The operation.
        op: OperationId,
        /// What it waits on.
        reason: String,
    },
    /// Its call's outcome is unknown (D2).
    Uncertain {
        /// The operation.
        op: OperationId,
    },
    /// A result landed after a control change and waits for readmission (D4).
    HeldForReadmission {
        /// The operation whose result is held.
        op: OperationId,
    },
    /// Its call failed; repair was asked for.
    Failed {
        /// Why.
        reason: String,
    },
    /// Completed by a contribution (T2).
    Completed {
        /// The contribution.
        contribution: ContributionId,
    },
}

/// The default planning columns, in order.
pub const DEFAULT_COLUMNS: [&str; 4] = ["backlog", "todo", "in_progress", "done"];

/// A planning column an engine state shows in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Column {
    /// Waiting on deps.
    Backlog,
    /// Ready, or failed and awaiting a new plan.
    Todo,
    /// Dispatched, running, waiting outside, uncertain or held.
    InProgress,
    /// Completed.
    Done,
}

impl Column {
    /// The column's name on the board.
    pub const fn as_str(self) -> &'static str {
        match self {
            Column::Backlog => "backlog",
            Column::Todo => "todo",
            Column::InProgress => "in_progress",
            Column::Done => "done",
        }
    }

    /// The column of this name, if it is one.
    pub fn from_name(name: &str) -> Option<Column> {
        [
            Column::Backlog,
            Column::Todo,
            Column::InProgress,
            Column::Done,
        ]
        .into_iter()
        .find(|c| c.as_str() == name)
    }
}

/// A task of a plan version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Task {
    pub(crate) key: TaskKey,
    pub(crate) identity: TaskIdentity,
    pub(crate) spec: TaskSpec,
    pub(crate) kind: TaskKind,
    pub(crate) capability: String,
    pub(crate) inputs: Map<String, Value>,
    pub(crate) assignee: PrincipalId,
    pub(crate) state: TaskState,
    pub(crate) reused: bool,
    /// The capability's declared outputs at admission (T2); none for tasks admitted before
    /// outputs were checked.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) outputs: Vec<DeclaredOutput>,
}

impl Task {
    /// The outputs its capability declared when it was admitted: a contribution must give
    /// each, typed as declared (T2).
    pub fn outputs(&self) -> &[DeclaredOutput] {
        &self.outputs
    }
    /// The stable key.
    pub fn key(&self) -> &TaskKey {
        &self.key
    }
    /// The identity the engine assigned (O3, O4).
    pub fn identity(&self) -> &TaskIdentity {
        &self.identity
    }
    /// The spec as proposed.
    pub fn spec(&self) -> &TaskSpec {
        &self.spec
    }
    /// Production or report.
    pub fn kind(&self) -> TaskKind {
        self.kind
    }
    /// The capability after replacements were followed.
    pub fn capability(&self) -> &str {
        &self.capability
    }
    /// The inputs with defaults applied.
    pub fn inputs(&self) -> &Map<String, Value> {
        &self.inputs
    }
    /// The specialist the capability's binding names.
    pub fn assignee(&self) -> &PrincipalId {
        &self.assignee
    }
    /// The engine state.
    pub fn state(&self) -> &TaskState {
        &self.state
    }
    /// Whether the task was carried over completed and unchanged from the previous version.
    pub fn is_reused(&self) -> bool {
        self.reused
    }
    /// Whether it is completed.
    pub fn is_completed(&self) -> bool {
        matches!(self.state, TaskState::Completed { .. })
    }
    /// The operation running for it, if any.
    pub fn running_op(&self) -> Option<OperationId> {
        match self.state {
            TaskState::Dispatched { op }
            | TaskState::WaitingOutside { op, .. }
            | TaskState::Uncertain { op } => Some(op),
            _ => None,
        }
    }
}

/// Why a plan version was proposed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "trigger")]
pub enum PlanTrigger {
    /// The owner's message that created the objective.
    OwnerMessage {
        /// The event.
        event: EventId,
    },
    /// An owner correction (R6).
    OwnerCorrection {
        /// The event.
        event: EventId,
    },
    /// An unmet review (R3).
    UnmetReview {
        /// The review.
        review: ReviewId,
    },
    /// Repair after a failed task.
    Repair {
        /// The failed task.
        task: TaskIdentity,
    },
    /// An internal receipt about the objective.
    InternalReceipt {
        /// The event.
        event: EventId,
    },
}

/// How a plan version differs from the version it superseded, task key by task key (O2):
/// what it added, removed, changed (same key, another spec) and left unchanged, and which of
/// its tasks it carried over completed (O3).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PlanChanges {
    /// Keys new in this version.
    pub added: Vec<TaskKey>,
    /// Keys of the previous version this one dropped.
    pub removed: Vec<TaskKey>,
    /// Keys kept with another spec.
    pub changed: Vec<TaskKey>,
    /// Keys kept with the same spec.
    pub unchanged: Vec<TaskKey>,
    /// Tasks carried over completed and unchanged, with their results (O3).
    pub reused: Vec<TaskKey>,
}

/// One version of an objective's plan. Append-only: a successor supersedes it (O2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanVersion {
    pub(crate) id: PlanVersionId,
    pub(crate) number: u32,
    pub(crate) predecessor: Option<PlanVersionId>,
    pub(crate) trigger: PlanTrigger,
    pub(crate) observed: ObservedRevisions,
    pub(crate) explanation: String,
    pub(crate) tasks: Vec<Task>,
}

impl PlanVersion {
    /// The change from `old` to `new` against `stored`, the stored document's value of `old`
    /// (issue 21): field by field, its tasks item by item.
    pub(crate) fn delta(
        old: &Self,
        new: &Self,
        stored: Option<&Value>,
    ) -> crate::delta::DiffResult {
        use crate::delta::{Fields, indexed, whole};
        let Some(Value::Object(stored)) = stored else {
            return whole(old, new, stored);
        };
        // Destructured so that a new field cannot be forgotten here.
        let PlanVersion {
            id,
            number,
            predecessor,
            trigger,
            observed,
            explanation,
            tasks,
        } = new;
        let mut f = Fields::of(stored);
        f.field("id", &old.id, id, false, whole)?;
        f.field("number", &old.number, number, false, whole)?;
        f.field("predecessor", &old.predecessor, predecessor, false, whole)?;
        f.field("trigger", &old.trigger, trigger, false, whole)?;
        f.field("observed", &old.observed, observed, false, whole)?;
        f.field("explanation", &old.explanation, explanation, false, whole)?;
        f.field("tasks", &old.tasks, tasks, false, |o, n, s| {
            indexed(o, n, s, whole)
        })?;
        Ok(f.delta())
    }

    /// The version's id.
    pub fn id(&self) -> PlanVersionId {
        self.id
    }
    /// 1 for the first version.
    pub fn number(&self) -> u32 {
        self.number
    }
    /// The version it superseded.
    pub fn predecessor(&self) -> Option<PlanVersionId> {
        self.predecessor
    }
    /// Why it was proposed.
    pub fn trigger(&self) -> &PlanTrigger {
        &self.trigger
    }
    /// The revisions its proposal was bound to (O10).
    pub fn observed(&self) -> ObservedRevisions {
        self.observed
    }
    /// The reasoner's explanation.
    pub fn explanation(&self) -> &str {
        &self.explanation
    }
    /// Its tasks, in proposal order.
    pub fn tasks(&self) -> &[Task] {
        &self.tasks
    }
    /// The task of this identity.
    pub fn task(&self, identity: &TaskIdentity) -> Option<&Task> {
        self.tasks.iter().find(|t| &t.identity == identity)
    }
    /// The task of this key.
    pub fn task_by_key(&self, key: &TaskKey) -> Option<&Task> {
        self.tasks.iter().find(|t| &t.key == key)
    }
    /// The planning column of `task` (engine state → column).
    pub fn column_of(&self, task: &Task) -> Column {
        match task.state {
            TaskState::Completed { .. } => Column::Done,
            TaskState::Dispatched { .. }
            | TaskState::WaitingOutside { .. }
            | TaskState::Uncertain { .. }
            | TaskState::HeldForReadmission { .. } => Column::InProgress,
            TaskState::Failed { .. } => Column::Todo,
            TaskState::Pending => {
                if self.deps_completed(task) {
                    Column::Todo
                } else {
                    Column::Backlog
                }
            }
        }
    }
    /// How this version differs from `previous`, the version it superseded (`None` for the
    /// first: every task is added).
    pub fn changes_since(&self, previous: Option<&PlanVersion>) -> PlanChanges {
        let mut changes = PlanChanges::default();
        for task in &self.tasks {
            let list = match previous.and_then(|p| p.task_by_key(&task.key)) {
                None => &mut changes.added,
                Some(before) if before.spec != task.spec => &mut changes.changed,
                Some(_) => &mut changes.unchanged,
            };
            list.push(task.key.clone());
            if task.reused {
                changes.reused.push(task.key.clone());
            }
        }
        if let Some(previous) = previous {
            changes.removed = previous
                .tasks
                .iter()
                .filter(|t| self.task_by_key(&t.key).is_none())
                .map(|t| t.key.clone())
                .collect();
        }
        changes
    }
    /// Whether every dep of `task` is completed.
    pub fn deps_completed(&self, task: &Task) -> bool {
        task.spec
            .deps
            .iter()
            .all(|d| self.task_by_key(d).is_some_and(Task::is_completed))
    }
}
