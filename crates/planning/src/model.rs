//! What the planning service stores and reads: plans, their column vocabularies, task rows
//! and the refusals a rule gives.

use std::fmt;

use agentroom_domain::ids::{ObjectiveId, Timestamp};
use serde::Serialize;

/// The column vocabulary used when a plan is created without one.
pub const DEFAULT_COLUMNS: [&str; 4] = ["backlog", "todo", "in_progress", "done"];

/// The status that the SDK client sends by default; it lands in a plan's first column when
/// the plan has no column of that name.
pub const DEFAULT_STATUS: &str = "backlog";

/// A plan's column vocabulary: 1 to [`crate::limits::MAX_COLUMNS`] distinct, non-empty names, in
/// order. Immutable once the plan exists.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Columns(Vec<String>);

impl Columns {
    /// Validates a requested vocabulary; an empty request means [`DEFAULT_COLUMNS`].
    pub fn new(requested: Vec<String>) -> Result<Self, Refusal> {
        if requested.is_empty() {
            return Ok(Self(
                DEFAULT_COLUMNS.iter().map(|c| (*c).to_owned()).collect(),
            ));
        }
        for (index, name) in requested.iter().enumerate() {
            if name.trim().is_empty() {
                return Err(Refusal::new(
                    RefusalCode::InvalidColumns,
                    format!("column {index} is empty; a column needs a name"),
                ));
            }
            if let Some(first) = requested[..index].iter().position(|c| c == name) {
                return Err(Refusal::new(
                    RefusalCode::InvalidColumns,
                    format!("column `{name}` is given twice (at {first} and {index})"),
                ));
            }
        }
        Ok(Self(requested))
    }

    /// Columns read back from storage, which validated them when the plan was created.
    pub fn from_stored(columns: Vec<String>) -> Self {
        Self(columns)
    }

    /// The names, in order.
    pub fn names(&self) -> &[String] {
        &self.0
    }

    /// The name of column `index`, if there is one.
    pub fn name(&self, index: usize) -> Option<&str> {
        self.0.get(index).map(String::as_str)
    }

    /// The index of the column named `status`. The default status `backlog` (or an empty
    /// status on `task/add`) lands in the first column when the plan has no `backlog`; any
    /// other status must be a column.
    pub fn resolve(&self, status: &str) -> Result<usize, Refusal> {
        if let Some(index) = self.0.iter().position(|c| c == status) {
            return Ok(index);
        }
        if status == DEFAULT_STATUS {
            return Ok(0);
        }
        Err(self.not_a_column(status))
    }

    /// The refusal for a status that is not a column.
    pub fn not_a_column(&self, status: &str) -> Refusal {
        Refusal::new(
            RefusalCode::UnknownStatus,
            format!(
                "status `{status}` is not a column of this plan (columns: {})",
                self.0.join(", ")
            ),
        )
    }

    /// The index of the column named exactly `status` (filters do not alias `backlog`).
    pub fn position(&self, status: &str) -> Option<usize> {
        self.0.iter().position(|c| c == status)
    }

    /// The vocabulary as JSON text, for storage (a comma inside a name survives).
    pub fn to_json(&self) -> String {
        serde_json::Value::from(self.0.clone()).to_string()
    }
}

/// What kind of plan a board is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlanKind {
    /// Created with `planning/plan/create`: a plain board where `task/add` works.
    Standalone,
    /// The board of a coordinator objective: admitted whole by the engine (O7), so
    /// `task/add` is refused.
    Coordinator(ObjectiveId),
}

/// A plan as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanRecord {
    /// The store's key for the plan, increasing in creation order.
    pub key: i64,
    /// The id clients use.
    pub plan_id: String,
    /// Display name.
    pub name: String,
    /// Description.
    pub description: String,
    /// The column vocabulary.
    pub columns: Columns,
    /// Standalone or a coordinator objective's board.
    pub kind: PlanKind,
    /// When it was created.
    pub created: Timestamp,
}

/// A plan to create.
#[derive(Debug, Clone, PartialEq)]
pub struct NewPlan {
    /// The fresh id.
    pub plan_id: String,
    /// Display name.
    pub name: String,
    /// Description.
    pub description: String,
    /// The validated vocabulary.
    pub columns: Columns,
    /// When.
    pub created: Timestamp,
}

/// A task to add, its status already resolved to a column.
#[derive(Debug, Clone, PartialEq)]
pub struct NewTask {
    /// The plan's store key.
    pub plan: i64,
    /// The fresh id.
    pub task_id: String,
    /// Title (at most [`crate::limits::MAX_TITLE_BYTES`]).
    pub title: String,
    /// The column index.
    pub column: usize,
    /// Description.
    pub description: String,
    /// Assignee.
    pub assignee: String,
    /// Ids of tasks of the same plan this one waits on (distinct).
    pub deps: Vec<String>,
    /// Metadata: a JSON object, as compact JSON text.
    pub metadata: String,
    /// When.
    pub created: Timestamp,
}

/// A change to a task; `None` leaves a field as it is. At least one field is `Some`.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskChange {
    /// The plan's store key.
    pub plan: i64,
    /// The task.
    pub task_id: String,
    /// The new column index.
    pub column: Option<usize>,
    /// The new assignee.
    pub assignee: Option<String>,
    /// The new dependency list (distinct ids of the same plan).
    pub deps: Option<Vec<String>>,
    /// When.
    pub updated: Timestamp,
}

/// A task as boards and lists show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskRow {
    /// Id.
    pub task_id: String,
    /// Title.
    pub title: String,
    /// Column index into the plan's vocabulary.
    pub column: usize,
    /// Assignee.
    pub assignee: String,
}

/// Tasks read in one go, in creation order: the text of every row in one buffer, so that
/// reading 10,000 tasks costs a handful of allocations rather than three per task (the
/// allocations were most of a filtered list's time).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskRows {
    text: String,
    rows: Vec<Spans>,
}

/// Where one row's fields end in [`TaskRows::text`]; each starts where the previous ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Spans {
    task_id: usize,
    title: usize,
    assignee: usize,
    column: usize,
}

/// One row of [`TaskRows`], borrowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskRowRef<'a> {
    /// Id.
    pub task_id: &'a str,
    /// Title.
    pub title: &'a str,
    /// Column index into the plan's vocabulary.
    pub column: usize,
    /// Assignee.
    pub assignee: &'a str,
}

impl TaskRows {
    /// Room for `rows` rows of about `bytes` bytes of text in all.
    pub fn with_capacity(rows: usize, bytes: usize) -> Self {
        Self {
            text: String::with_capacity(bytes),
            rows: Vec::with_capacity(rows),
        }
    }

    /// Appends a row.
    pub fn push(&mut self, task_id: &str, title: &str, column: usize, assignee: &str) {
        self.text.push_str(task_id);
        let task_id = self.text.len();
        self.text.push_str(title);
        let title = self.text.len();
        self.text.push_str(assignee);
        self.rows.push(Spans {
            task_id,
            title,
            assignee: self.text.len(),
            column,
        });
    }

    /// How many rows.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The rows, in order.
    pub fn iter(&self) -> impl Iterator<Item = TaskRowRef<'_>> + '_ {
        let mut start = 0;
        self.rows.iter().map(move |spans| {
            let row = TaskRowRef {
                task_id: self.text.get(start..spans.task_id).unwrap_or_default(),
                title: self
                    .text
                    .get(spans.task_id..spans.title)
                    .unwrap_or_default(),
                column: spans.column,
                assignee: self
                    .text
                    .get(spans.title..spans.assignee)
                    .unwrap_or_default(),
            };
            start = spans.assignee;
            row
        })
    }

    /// The largest column index of any row, if there are rows.
    pub fn max_column(&self) -> Option<usize> {
        self.rows.iter().map(|s| s.column).max()
    }
}

/// Everything stored about a task (no planning reply carries the description, deps or
/// metadata; the REST API and the tests read them here).
#[derive(Debug, Clone, PartialEq)]
pub struct TaskDetail {
    /// The row boards show.
    pub row: TaskRow,
    /// Description.
    pub description: String,
    /// Dependencies, in the order given.
    pub deps: Vec<String>,
    /// Metadata, a JSON object.
    pub metadata: serde_json::Map<String, serde_json::Value>,
}

/// Why a rule refused a well-formed request (answered with `success: false`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RefusalCode {
    /// No such plan in this Room.
    UnknownPlan,
    /// No such task in that plan.
    UnknownTask,
    /// The status is not one of the plan's columns.
    UnknownStatus,
    /// A dependency names no task of the same plan.
    UnknownDependency,
    /// The dependencies would form a cycle.
    DependencyCycle,
    /// `task/update` with nothing to change.
    NothingToUpdate,
    /// Empty or duplicate column names.
    InvalidColumns,
    /// An empty title.
    InvalidTitle,
    /// The plan is a coordinator objective's board, admitted whole by the engine (O7).
    CoordinatorPlan,
    /// A rule of the engine refused it; the message starts with the rule's id (`T2: …`).
    RuleRefused,
}

impl RefusalCode {
    /// The wire code.
    pub fn as_str(self) -> &'static str {
        match self {
            RefusalCode::UnknownPlan => "unknown_plan",
            RefusalCode::UnknownTask => "unknown_task",
            RefusalCode::UnknownStatus => "unknown_status",
            RefusalCode::UnknownDependency => "unknown_dependency",
            RefusalCode::DependencyCycle => "dependency_cycle",
            RefusalCode::NothingToUpdate => "nothing_to_update",
            RefusalCode::InvalidColumns => "invalid_columns",
            RefusalCode::InvalidTitle => "invalid_title",
            RefusalCode::CoordinatorPlan => "coordinator_plan",
            RefusalCode::RuleRefused => "rule_refused",
        }
    }
}

/// A rule's refusal: a code clients can branch on and a message people can read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The code.
    pub code: RefusalCode,
    /// What was wrong, naming the offending value.
    pub message: String,
}

impl Refusal {
    /// A refusal.
    pub fn new(code: RefusalCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code.as_str(), self.message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits;

    fn cols(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| (*n).to_owned()).collect()
    }

    #[test]
    fn task_rows_give_back_what_was_pushed() {
        let mut rows = TaskRows::default();
        rows.push("t1", "write spec", 1, "");
        rows.push("t2", "", 0, "sam");
        rows.push("t3", "é ü", 3, "sue");
        let back: Vec<TaskRowRef<'_>> = rows.iter().collect();
        assert_eq!(back.len(), 3);
        assert_eq!(
            back[0],
            TaskRowRef {
                task_id: "t1",
                title: "write spec",
                column: 1,
                assignee: ""
            }
        );
        assert_eq!(
            back[1],
            TaskRowRef {
                task_id: "t2",
                title: "",
                column: 0,
                assignee: "sam"
            }
        );
        assert_eq!(
            back[2],
            TaskRowRef {
                task_id: "t3",
                title: "é ü",
                column: 3,
                assignee: "sue"
            }
        );
        assert_eq!(rows.max_column(), Some(3));
    }

    #[test]
    fn empty_vocabulary_means_the_default_columns() {
        let columns = Columns::new(vec![]).unwrap();
        assert_eq!(columns.names(), DEFAULT_COLUMNS);
    }

    #[test]
    fn empty_and_duplicate_column_names_are_refused() {
        let empty = Columns::new(cols(&["todo", " "])).unwrap_err();
        assert_eq!(empty.code, RefusalCode::InvalidColumns);
        let twice = Columns::new(cols(&["todo", "done", "todo"])).unwrap_err();
        assert_eq!(twice.code, RefusalCode::InvalidColumns);
        assert!(twice.message.contains("`todo`"), "{}", twice.message);
    }

    #[test]
    fn a_comma_inside_a_column_name_survives_storage() {
        let columns = Columns::new(cols(&["to,do", "done"])).unwrap();
        let back: Vec<String> = serde_json::from_str(&columns.to_json()).unwrap();
        assert_eq!(back, cols(&["to,do", "done"]));
    }

    #[test]
    fn backlog_lands_in_the_first_column_and_other_statuses_must_be_columns() {
        let columns = Columns::new(cols(&["todo", "doing", "done"])).unwrap();
        assert_eq!(columns.resolve("backlog"), Ok(0));
        assert_eq!(columns.resolve("doing"), Ok(1));
        let refused = columns.resolve("archived").unwrap_err();
        assert_eq!(refused.code, RefusalCode::UnknownStatus);
        let with_backlog = Columns::new(cols(&["x", "backlog"])).unwrap();
        assert_eq!(with_backlog.resolve("backlog"), Ok(1));
    }

    #[test]
    fn the_size_limits_are_what_the_contract_says() {
        assert_eq!(limits::MAX_TITLE_BYTES, 1024);
        assert_eq!(limits::MAX_DESCRIPTION_BYTES, 64 * 1024);
        assert_eq!(limits::MAX_METADATA_BYTES, 64 * 1024);
    }
}
