//! The A2E wire: one JSON object per message. Decoding turns a line into a typed request or
//! into the A2E `error` that says exactly what cannot be understood; encoding fills the
//! envelope (`type`, fresh `id`, `version`, `ts`, `req_id`) of every reply.

use serde::Serialize;
use serde::ser::SerializeMap;
use serde_json::{Map, Value};

use crate::limits;
use crate::model::{DEFAULT_STATUS, Refusal, TaskRows};

/// The protocol version we speak.
pub const VERSION: &str = "1.0";

/// The capability names the SDK client accepts in a handshake reply; anything else makes it
/// drop the whole reply.
pub const SDK_CAPABILITIES: [&str; 12] = [
    "skill",
    "tools",
    "toolkits",
    "env",
    "proc",
    "memory",
    "learning",
    "chains",
    "multi_agent",
    "planning",
    "mcp",
    "test",
];

/// The six planning message types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MessageKind {
    /// `planning/plan/create`
    PlanCreate,
    /// `planning/plan/list`
    PlanList,
    /// `planning/task/add`
    TaskAdd,
    /// `planning/task/update`
    TaskUpdate,
    /// `planning/task/list`
    TaskList,
    /// `planning/plan/board`
    PlanBoard,
}

impl MessageKind {
    /// All six, in the seed's order.
    pub const ALL: [MessageKind; 6] = [
        MessageKind::PlanCreate,
        MessageKind::PlanList,
        MessageKind::TaskAdd,
        MessageKind::TaskUpdate,
        MessageKind::TaskList,
        MessageKind::PlanBoard,
    ];

    /// The request type string.
    pub fn request_type(self) -> &'static str {
        match self {
            MessageKind::PlanCreate => "planning/plan/create",
            MessageKind::PlanList => "planning/plan/list",
            MessageKind::TaskAdd => "planning/task/add",
            MessageKind::TaskUpdate => "planning/task/update",
            MessageKind::TaskList => "planning/task/list",
            MessageKind::PlanBoard => "planning/plan/board",
        }
    }

    /// The response type string (the request type + `/resp`).
    pub fn response_type(self) -> &'static str {
        match self {
            MessageKind::PlanCreate => "planning/plan/create/resp",
            MessageKind::PlanList => "planning/plan/list/resp",
            MessageKind::TaskAdd => "planning/task/add/resp",
            MessageKind::TaskUpdate => "planning/task/update/resp",
            MessageKind::TaskList => "planning/task/list/resp",
            MessageKind::PlanBoard => "planning/plan/board/resp",
        }
    }

    fn from_type(kind: &str) -> Option<Self> {
        MessageKind::ALL
            .into_iter()
            .find(|k| k.request_type() == kind)
    }
}

/// `planning/plan/create`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanCreate {
    /// Display name (default `"default"`).
    pub name: String,
    /// Requested vocabulary (empty = the default columns).
    pub columns: Vec<String>,
    /// Description.
    pub description: String,
}

/// `planning/task/add`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskAdd {
    /// Parent plan.
    pub plan_id: String,
    /// Title.
    pub title: String,
    /// Status (default `"backlog"`).
    pub status: String,
    /// Description.
    pub description: String,
    /// Assignee.
    pub assignee: String,
    /// Dependencies.
    pub deps: Vec<String>,
    /// Metadata, a JSON object as compact JSON text.
    pub metadata: String,
}

/// `planning/task/update`; `None` means "no change" (the wire's `""` and `[]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskUpdate {
    /// Parent plan.
    pub plan_id: String,
    /// Task.
    pub task_id: String,
    /// New status.
    pub status: Option<String>,
    /// New assignee.
    pub assignee: Option<String>,
    /// New dependency list.
    pub deps: Option<Vec<String>>,
}

/// `planning/task/list`; `None` means "any".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskList {
    /// Only this plan.
    pub plan_id: Option<String>,
    /// Only this status.
    pub status: Option<String>,
}

/// `planning/plan/board`; `None` means every plan, one board each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanBoard {
    /// Only this plan.
    pub plan_id: Option<String>,
}

/// One of the six planning requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlanningRequest {
    /// Create a plan.
    PlanCreate(PlanCreate),
    /// List plans.
    PlanList,
    /// Add a task.
    TaskAdd(TaskAdd),
    /// Update a task.
    TaskUpdate(TaskUpdate),
    /// List tasks.
    TaskList(TaskList),
    /// Board view.
    PlanBoard(PlanBoard),
}

impl PlanningRequest {
    /// Which of the six it is.
    pub fn kind(&self) -> MessageKind {
        match self {
            PlanningRequest::PlanCreate(_) => MessageKind::PlanCreate,
            PlanningRequest::PlanList => MessageKind::PlanList,
            PlanningRequest::TaskAdd(_) => MessageKind::TaskAdd,
            PlanningRequest::TaskUpdate(_) => MessageKind::TaskUpdate,
            PlanningRequest::TaskList(_) => MessageKind::TaskList,
            PlanningRequest::PlanBoard(_) => MessageKind::PlanBoard,
        }
    }
}

/// `handshake/req`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Handshake {
    /// The agent's id, as it says.
    pub agent_id: String,
    /// The capabilities it asks for.
    pub agent_caps: Vec<String>,
    /// A bearer token, if it sends one.
    pub auth_token: String,
}

/// A decoded message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    /// `handshake/req`.
    Handshake(Handshake),
    /// `ping`.
    Ping,
    /// `shutdown`: the session ends; no reply.
    Shutdown,
    /// A reply type (`pong`, `error`, `*/resp`): never answered.
    Reply,
    /// A planning request.
    Planning(PlanningRequest),
}

/// A decoded message with the id its reply echoes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inbound {
    /// The request's `id` (`""` when it has none).
    pub req_id: String,
    /// What it asks.
    pub body: Body,
}

/// The A2E error codes we send.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// Malformed JSON, or JSON that is not an object.
    ParseError,
    /// An unknown `type`.
    InvalidMessage,
    /// A missing required field, a field of the wrong JSON type, a size limit exceeded.
    SchemaViolation,
    /// No permission.
    Unauthorized,
    /// Storage or internal failure.
    RuntimeError,
}

/// What cannot be understood, answered as an A2E `error` message.
#[derive(Debug, Clone, PartialEq)]
pub struct ProtocolError {
    /// The request's id, `""` when it could not be read.
    pub req_id: String,
    /// The code.
    pub code: ErrorCode,
    /// What was wrong.
    pub message: String,
    /// Always an object; `{"field": name}` where a field is at fault.
    pub detail: Map<String, Value>,
}

impl ProtocolError {
    fn new(req_id: &str, code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            req_id: req_id.to_owned(),
            code,
            message: message.into(),
            detail: Map::new(),
        }
    }

    fn with(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.detail.insert(key.to_owned(), value.into());
        self
    }

    /// Detail for the client: `key` is `value` in the error's `detail` object.
    pub fn with_detail(self, key: &str, value: impl Into<Value>) -> Self {
        self.with(key, value)
    }

    /// No permission: the message was understood and refused before anything was done (a
    /// transport that authenticates its sessions says why in `message`).
    pub fn unauthorized(req_id: &str, message: impl Into<String>) -> Self {
        Self::new(req_id, ErrorCode::Unauthorized, message)
    }

    /// A storage or internal failure (a failing store, no randomness for a fresh id); the
    /// cause goes to the log, not to the client, so the text names neither.
    pub fn runtime(req_id: &str) -> Self {
        Self::new(
            req_id,
            ErrorCode::RuntimeError,
            "the planning service failed; the request was not applied",
        )
    }

    /// A message above [`limits::MAX_MESSAGE_BYTES`].
    pub fn too_large(bytes: usize) -> Self {
        Self::new(
            "",
            ErrorCode::SchemaViolation,
            format!(
                "the message is {bytes} bytes or more; the limit is {} bytes",
                limits::MAX_MESSAGE_BYTES
            ),
        )
        .with("limit_bytes", limits::MAX_MESSAGE_BYTES)
    }
}

/// Decodes one message.
pub fn decode(bytes: &[u8]) -> Result<Inbound, ProtocolError> {
    if bytes.len() > limits::MAX_MESSAGE_BYTES {
        return Err(ProtocolError::too_large(bytes.len()));
    }
    let value: Value = serde_json::from_slice(bytes).map_err(|e| {
        ProtocolError::new("", ErrorCode::ParseError, format!("malformed JSON: {e}"))
    })?;
    let Value::Object(object) = value else {
        return Err(ProtocolError::new(
            "",
            ErrorCode::ParseError,
            format!(
                "a message must be a JSON object, not {}",
                json_type_name(&value)
            ),
        ));
    };
    let req_id = match object.get("id") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(id)) if id.len() <= limits::MAX_LABEL_BYTES => id.clone(),
        Some(Value::String(_)) => {
            return Err(ProtocolError::new(
                "",
                ErrorCode::SchemaViolation,
                format!("`id` is over {} bytes", limits::MAX_LABEL_BYTES),
            )
            .with("field", "id"));
        }
        Some(other) => {
            return Err(ProtocolError::new(
                "",
                ErrorCode::SchemaViolation,
                format!("`id` must be a string, not {}", json_type_name(other)),
            )
            .with("field", "id"));
        }
    };
    let fields = Fields {
        object: &object,
        req_id: &req_id,
    };
    let kind = fields.required_str("type", limits::MAX_LABEL_BYTES)?;
    let body = match kind {
        "handshake/req" => Body::Handshake(Handshake {
            agent_id: fields.lenient_str("agent_id"),
            agent_caps: fields.lenient_str_list("agent_caps"),
            auth_token: fields.lenient_str("auth_token"),
        }),
        "ping" => Body::Ping,
        "shutdown" => Body::Shutdown,
        "pong" | "error" | "handshake/resp" => Body::Reply,
        other if other.ends_with("/resp") => Body::Reply,
        other => match MessageKind::from_type(other) {
            Some(kind) => Body::Planning(fields.planning(kind)?),
            None => {
                return Err(ProtocolError::new(
                    &req_id,
                    ErrorCode::InvalidMessage,
                    format!("unknown type {other}"),
                )
                .with("type", other));
            }
        },
    };
    Ok(Inbound { req_id, body })
}

fn json_type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Whether a key or a string anywhere in `value` holds a NUL character (`\u0000` in JSON),
/// which PostgreSQL's `jsonb` refuses.
fn holds_nul(value: &Value) -> bool {
    match value {
        Value::String(text) => text.contains('\0'),
        Value::Array(items) => items.iter().any(holds_nul),
        Value::Object(map) => map.iter().any(|(k, v)| k.contains('\0') || holds_nul(v)),
        Value::Null | Value::Bool(_) | Value::Number(_) => false,
    }
}

/// Reads typed fields out of a message object, turning every fault into a
/// `schema_violation` that names the field.
struct Fields<'a> {
    object: &'a Map<String, Value>,
    req_id: &'a str,
}

impl<'a> Fields<'a> {
    fn violation(&self, field: &str, message: String) -> ProtocolError {
        ProtocolError::new(self.req_id, ErrorCode::SchemaViolation, message).with("field", field)
    }

    fn wrong_type(&self, field: &str, expected: &str, got: &Value) -> ProtocolError {
        self.violation(
            field,
            format!("`{field}` must be {expected}, not {}", json_type_name(got)),
        )
        .with("expected", expected)
    }

    /// Every string a planning request carries passes here: over its limit, or holding a
    /// NUL character, it is a `schema_violation` naming the field. NUL is refused here, once,
    /// before any store sees it: PostgreSQL cannot store it in `text` or `jsonb` (it failed as
    /// a retryable `runtime_error`), SQLite stored it, and no title, name or label needs it.
    fn check_size(&self, field: &str, text: &str, limit: usize) -> Result<(), ProtocolError> {
        if text.contains('\0') {
            return Err(self.violation(field, format!("`{field}` contains a NUL character")));
        }
        if text.len() > limit {
            Err(self
                .violation(
                    field,
                    format!(
                        "`{field}` is {} bytes; the limit is {limit} bytes",
                        text.len()
                    ),
                )
                .with("limit_bytes", limit))
        } else {
            Ok(())
        }
    }

    /// An optional string; absent and `null` are `None`.
    fn optional_str(&self, field: &str, limit: usize) -> Result<Option<&'a str>, ProtocolError> {
        match self.object.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(text)) => {
                self.check_size(field, text, limit)?;
                Ok(Some(text.as_str()))
            }
            Some(other) => Err(self.wrong_type(field, "a string", other)),
        }
    }

    fn required_str(&self, field: &str, limit: usize) -> Result<&'a str, ProtocolError> {
        self.optional_str(field, limit)?
            .ok_or_else(|| self.violation(field, format!("`{field}` is required")))
    }

    fn optional_str_list(
        &self,
        field: &str,
        max_items: usize,
        limit: usize,
    ) -> Result<Option<Vec<String>>, ProtocolError> {
        match self.object.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Array(items)) => {
                if items.len() > max_items {
                    return Err(self
                        .violation(
                            field,
                            format!(
                                "`{field}` has {} items; the limit is {max_items}",
                                items.len()
                            ),
                        )
                        .with("limit_items", max_items));
                }
                let mut out = Vec::with_capacity(items.len());
                for (index, item) in items.iter().enumerate() {
                    let name = format!("{field}[{index}]");
                    match item {
                        Value::String(text) => {
                            self.check_size(&name, text, limit)?;
                            out.push(text.clone());
                        }
                        other => return Err(self.wrong_type(&name, "a string", other)),
                    }
                }
                Ok(Some(out))
            }
            Some(other) => Err(self.wrong_type(field, "an array of strings", other)),
        }
    }

    fn lenient_str(&self, field: &str) -> String {
        match self.object.get(field) {
            Some(Value::String(text)) if text.len() <= limits::MAX_LABEL_BYTES => text.clone(),
            _ => String::new(),
        }
    }

    fn lenient_str_list(&self, field: &str) -> Vec<String> {
        match self.object.get(field) {
            Some(Value::Array(items)) => items
                .iter()
                .filter_map(Value::as_str)
                .filter(|s| s.len() <= limits::MAX_LABEL_BYTES)
                .take(limits::MAX_COLUMNS)
                .map(str::to_owned)
                .collect(),
            _ => Vec::new(),
        }
    }

    fn metadata(&self) -> Result<String, ProtocolError> {
        match self.object.get("metadata") {
            None | Some(Value::Null) => Ok("{}".to_owned()),
            Some(value @ Value::Object(_)) => {
                if holds_nul(value) {
                    return Err(self.violation(
                        "metadata",
                        "`metadata` contains a NUL character in a key or a string".to_owned(),
                    ));
                }
                let text = value.to_string();
                self.check_size("metadata", &text, limits::MAX_METADATA_BYTES)?;
                Ok(text)
            }
            Some(other) => Err(self.wrong_type("metadata", "a JSON object", other)),
        }
    }

    fn planning(&self, kind: MessageKind) -> Result<PlanningRequest, ProtocolError> {
        use limits::{MAX_DESCRIPTION_BYTES, MAX_LABEL_BYTES, MAX_NAME_BYTES, MAX_TITLE_BYTES};
        let non_empty = |s: Option<&str>| s.filter(|s| !s.is_empty()).map(str::to_owned);
        Ok(match kind {
            MessageKind::PlanCreate => PlanningRequest::PlanCreate(PlanCreate {
                name: non_empty(self.optional_str("name", MAX_NAME_BYTES)?)
                    .unwrap_or_else(|| "default".to_owned()),
                columns: self
                    .optional_str_list("columns", limits::MAX_COLUMNS, MAX_LABEL_BYTES)?
                    .unwrap_or_default(),
                description: self
                    .optional_str("description", MAX_DESCRIPTION_BYTES)?
                    .unwrap_or_default()
                    .to_owned(),
            }),
            MessageKind::PlanList => PlanningRequest::PlanList,
            MessageKind::TaskAdd => PlanningRequest::TaskAdd(TaskAdd {
                plan_id: self.required_str("plan_id", MAX_LABEL_BYTES)?.to_owned(),
                title: self.required_str("title", MAX_TITLE_BYTES)?.to_owned(),
                status: non_empty(self.optional_str("status", MAX_LABEL_BYTES)?)
                    .unwrap_or_else(|| DEFAULT_STATUS.to_owned()),
                description: self
                    .optional_str("description", MAX_DESCRIPTION_BYTES)?
                    .unwrap_or_default()
                    .to_owned(),
                assignee: self
                    .optional_str("assignee", MAX_LABEL_BYTES)?
                    .unwrap_or_default()
                    .to_owned(),
                deps: self
                    .optional_str_list("deps", limits::MAX_DEPS, MAX_LABEL_BYTES)?
                    .unwrap_or_default(),
                metadata: self.metadata()?,
            }),
            MessageKind::TaskUpdate => PlanningRequest::TaskUpdate(TaskUpdate {
                plan_id: self.required_str("plan_id", MAX_LABEL_BYTES)?.to_owned(),
                task_id: self.required_str("task_id", MAX_LABEL_BYTES)?.to_owned(),
                status: non_empty(self.optional_str("status", MAX_LABEL_BYTES)?),
                assignee: non_empty(self.optional_str("assignee", MAX_LABEL_BYTES)?),
                deps: self
                    .optional_str_list("deps", limits::MAX_DEPS, MAX_LABEL_BYTES)?
                    .filter(|d| !d.is_empty()),
            }),
            MessageKind::TaskList => PlanningRequest::TaskList(TaskList {
                plan_id: non_empty(self.optional_str("plan_id", MAX_LABEL_BYTES)?),
                status: non_empty(self.optional_str("status", MAX_LABEL_BYTES)?),
            }),
            MessageKind::PlanBoard => PlanningRequest::PlanBoard(PlanBoard {
                plan_id: non_empty(self.optional_str("plan_id", MAX_LABEL_BYTES)?),
            }),
        })
    }
}

/// One plan in a `plan/list` reply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PlanItem {
    /// Id.
    pub plan_id: String,
    /// Name.
    pub name: String,
    /// Columns.
    pub columns: Vec<String>,
}

/// One plan's part of a `task/list` reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedPlan {
    /// The plan.
    pub plan_id: String,
    /// Its column names (a row's status is `columns[row.column]`).
    pub columns: Vec<String>,
    /// Its tasks, in creation order.
    pub rows: TaskRows,
}

/// A `task/list` reply's tasks: serialized as `[{task_id, title, status, assignee,
/// plan_id}]`, plans in creation order and each plan's tasks in creation order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskListing(pub Vec<ListedPlan>);

/// One item of a [`TaskListing`], borrowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TaskItem<'a> {
    /// Id.
    pub task_id: &'a str,
    /// Title.
    pub title: &'a str,
    /// Status (its column's name).
    pub status: &'a str,
    /// Assignee.
    pub assignee: &'a str,
    /// Plan.
    pub plan_id: &'a str,
}

impl TaskListing {
    /// Every item, in order.
    pub fn items(&self) -> impl Iterator<Item = TaskItem<'_>> + '_ {
        self.0.iter().flat_map(|plan| {
            plan.rows.iter().map(move |row| TaskItem {
                task_id: row.task_id,
                title: row.title,
                status: plan
                    .columns
                    .get(row.column)
                    .map(String::as_str)
                    .unwrap_or_default(),
                assignee: row.assignee,
                plan_id: &plan.plan_id,
            })
        })
    }

    /// How many tasks.
    pub fn len(&self) -> usize {
        self.0.iter().map(|p| p.rows.len()).sum()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Serialize for TaskListing {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.items())
    }
}

/// One task on a board, borrowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct BoardTask<'a> {
    /// Id.
    pub task_id: &'a str,
    /// Title.
    pub title: &'a str,
    /// Status (its column's name).
    pub status: &'a str,
    /// Assignee.
    pub assignee: &'a str,
}

/// One plan's board: serialized as `{plan_id, name, columns, tasks}` where `tasks` maps each
/// column, in the plan's order, to its tasks in creation order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Board {
    plan_id: String,
    name: String,
    columns: Vec<String>,
    rows: TaskRows,
}

impl Board {
    /// A board of `rows`, or `None` if a row names a column the plan does not have.
    pub fn new(
        plan_id: String,
        name: String,
        columns: Vec<String>,
        rows: TaskRows,
    ) -> Option<Self> {
        if rows.max_column().is_some_and(|c| c >= columns.len()) {
            return None;
        }
        Some(Self {
            plan_id,
            name,
            columns,
            rows,
        })
    }

    /// The plan.
    pub fn plan_id(&self) -> &str {
        &self.plan_id
    }

    /// The columns, in order.
    pub fn columns(&self) -> &[String] {
        &self.columns
    }

    /// The tasks of column `index`, in creation order.
    pub fn column(&self, index: usize) -> impl Iterator<Item = BoardTask<'_>> + '_ {
        let status = self
            .columns
            .get(index)
            .map(String::as_str)
            .unwrap_or_default();
        self.rows
            .iter()
            .filter(move |row| row.column == index)
            .map(move |row| BoardTask {
                task_id: row.task_id,
                title: row.title,
                status,
                assignee: row.assignee,
            })
    }

    /// How many tasks.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether it has none.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
}

impl Serialize for Board {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        struct Columns<'a>(&'a Board);
        impl Serialize for Columns<'_> {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                struct Tasks<'a>(&'a Board, usize);
                impl Serialize for Tasks<'_> {
                    fn serialize<S: serde::Serializer>(
                        &self,
                        serializer: S,
                    ) -> Result<S::Ok, S::Error> {
                        serializer.collect_seq(self.0.column(self.1))
                    }
                }
                let mut map = serializer.serialize_map(Some(self.0.columns.len()))?;
                for (index, name) in self.0.columns.iter().enumerate() {
                    map.serialize_entry(name, &Tasks(self.0, index))?;
                }
                map.end()
            }
        }
        let mut map = serializer.serialize_map(Some(4))?;
        map.serialize_entry("plan_id", &self.plan_id)?;
        map.serialize_entry("name", &self.name)?;
        map.serialize_entry("columns", &self.columns)?;
        map.serialize_entry("tasks", &Columns(self))?;
        map.end()
    }
}

/// The answer to a planning request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlanningReply {
    /// `plan/create` succeeded.
    PlanCreated {
        /// The new plan.
        plan_id: String,
        /// Its resolved columns.
        columns: Vec<String>,
    },
    /// `plan/list`.
    Plans(Vec<PlanItem>),
    /// `task/add` succeeded.
    TaskAdded {
        /// The new task.
        task_id: String,
        /// The column it landed in.
        status: String,
    },
    /// `task/update` succeeded.
    TaskUpdated {
        /// The task.
        task_id: String,
    },
    /// `task/list`.
    Tasks(TaskListing),
    /// `plan/board`.
    Boards(Vec<Board>),
    /// A rule refused the request: its normal response type with `success: false`, `code`
    /// and `message`.
    Refused {
        /// Which request.
        kind: MessageKind,
        /// Echoed in `task/update` refusals.
        task_id: String,
        /// Why.
        refusal: Refusal,
    },
}

impl PlanningReply {
    /// The response type string.
    pub fn response_type(&self) -> &'static str {
        match self {
            PlanningReply::PlanCreated { .. } => MessageKind::PlanCreate.response_type(),
            PlanningReply::Plans(_) => MessageKind::PlanList.response_type(),
            PlanningReply::TaskAdded { .. } => MessageKind::TaskAdd.response_type(),
            PlanningReply::TaskUpdated { .. } => MessageKind::TaskUpdate.response_type(),
            PlanningReply::Tasks(_) => MessageKind::TaskList.response_type(),
            PlanningReply::Boards(_) => MessageKind::PlanBoard.response_type(),
            PlanningReply::Refused { kind, .. } => kind.response_type(),
        }
    }

    /// Whether the request succeeded.
    pub fn success(&self) -> bool {
        !matches!(self, PlanningReply::Refused { .. })
    }

    fn write_fields<M: SerializeMap>(&self, map: &mut M) -> Result<(), M::Error> {
        map.serialize_entry("success", &self.success())?;
        match self {
            PlanningReply::PlanCreated { plan_id, columns } => {
                map.serialize_entry("plan_id", plan_id)?;
                map.serialize_entry("columns", columns)?;
            }
            PlanningReply::Plans(plans) => map.serialize_entry("plans", plans)?,
            PlanningReply::TaskAdded { task_id, status } => {
                map.serialize_entry("task_id", task_id)?;
                map.serialize_entry("status", status)?;
            }
            PlanningReply::TaskUpdated { task_id } => map.serialize_entry("task_id", task_id)?,
            PlanningReply::Tasks(tasks) => map.serialize_entry("tasks", tasks)?,
            PlanningReply::Boards(boards) => map.serialize_entry("boards", boards)?,
            PlanningReply::Refused {
                kind,
                task_id,
                refusal,
            } => {
                // The response type's own fields with their defaults, so that a strict
                // client still reads a well-formed reply.
                let empty: [(); 0] = [];
                match kind {
                    MessageKind::PlanCreate => {
                        map.serialize_entry("plan_id", "")?;
                        map.serialize_entry("columns", &empty)?;
                    }
                    MessageKind::PlanList => map.serialize_entry("plans", &empty)?,
                    MessageKind::TaskAdd => {
                        map.serialize_entry("task_id", "")?;
                        map.serialize_entry("status", "")?;
                    }
                    MessageKind::TaskUpdate => map.serialize_entry("task_id", task_id)?,
                    MessageKind::TaskList => map.serialize_entry("tasks", &empty)?,
                    MessageKind::PlanBoard => map.serialize_entry("boards", &empty)?,
                }
                map.serialize_entry("code", refusal.code.as_str())?;
                map.serialize_entry("message", &refusal.message)?;
            }
        }
        Ok(())
    }
}

/// The `handshake/resp` body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandshakeReply {
    /// The session's id.
    pub session_id: String,
    /// Capabilities accepted (only names from [`SDK_CAPABILITIES`]).
    pub accepted_caps: Vec<String>,
    /// Whether the session is accepted.
    pub ok: bool,
    /// Why not, when it is not.
    pub reason: String,
}

/// Every reply a session sends.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// `handshake/resp`.
    Handshake(HandshakeReply),
    /// `pong`.
    Pong {
        /// Seconds since the session started.
        uptime_seconds: f64,
    },
    /// A planning response.
    Planning(PlanningReply),
    /// An A2E `error`.
    Error(ProtocolError),
}

/// The envelope of one outgoing message.
#[derive(Debug, Clone, Copy)]
pub struct Envelope<'a> {
    /// A fresh id.
    pub id: &'a str,
    /// Seconds since the Unix epoch.
    pub ts: f64,
    /// The request's id.
    pub req_id: &'a str,
}

struct Out<'a> {
    reply: &'a Reply,
    envelope: Envelope<'a>,
}

impl Serialize for Out<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let Out { reply, envelope } = self;
        let kind = match reply {
            Reply::Handshake(_) => "handshake/resp",
            Reply::Pong { .. } => "pong",
            Reply::Planning(planning) => planning.response_type(),
            Reply::Error(_) => "error",
        };
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("type", kind)?;
        map.serialize_entry("id", envelope.id)?;
        map.serialize_entry("version", VERSION)?;
        map.serialize_entry("ts", &envelope.ts)?;
        let req_id = match reply {
            Reply::Error(error) => error.req_id.as_str(),
            _ => envelope.req_id,
        };
        map.serialize_entry("req_id", req_id)?;
        match reply {
            Reply::Handshake(h) => {
                map.serialize_entry("session_id", &h.session_id)?;
                let caps: Vec<Value> = h
                    .accepted_caps
                    .iter()
                    .map(|c| serde_json::json!({"capability": c, "enabled": true, "metadata": {}}))
                    .collect();
                map.serialize_entry("accepted_caps", &caps)?;
                map.serialize_entry("max_parallel", &4)?;
                map.serialize_entry("ok", &h.ok)?;
                map.serialize_entry("reason", &h.reason)?;
            }
            Reply::Pong { uptime_seconds } => {
                map.serialize_entry("uptime_seconds", uptime_seconds)?;
            }
            Reply::Planning(planning) => planning.write_fields(&mut map)?,
            Reply::Error(error) => {
                map.serialize_entry("code", &error.code)?;
                map.serialize_entry("message", &error.message)?;
                map.serialize_entry("detail", &error.detail)?;
                map.serialize_entry("retryable", &(error.code == ErrorCode::RuntimeError))?;
                map.serialize_entry("capability_name", "planning")?;
            }
        }
        map.end()
    }
}

/// Encodes a reply as one compact JSON line (without the newline).
pub fn encode(reply: &Reply, envelope: Envelope<'_>) -> String {
    let mut out = Vec::with_capacity(256);
    encode_into(&mut out, reply, envelope);
    // serde_json writes valid UTF-8.
    String::from_utf8(out).unwrap_or_default()
}

/// Appends a reply's compact JSON (without a newline) to `out`.
pub fn encode_into(out: &mut Vec<u8>, reply: &Reply, envelope: Envelope<'_>) {
    // Serializing these types into memory cannot fail: every map key is a string.
    if let Err(error) = serde_json::to_writer(&mut *out, &Out { reply, envelope }) {
        tracing::error!(%error, "encoding a reply failed");
    }
}
