//! The scripted agents' durable record of what they executed: an append-only JSON-lines file,
//! one [`Execution`] per line, synced to disk before the call returns; and the [`Reconciler`]
//! that confirms an uncertain call from it (D2).
//!
//! A line is whole once it ends with a newline. A crash while a line is written leaves a torn
//! tail without one: that call never returned, so by this record it never ran; opening the
//! journal cuts the tail off and readers ignore it. Any other unreadable line is corruption and
//! is reported, never skipped.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use agentroom_ports::domain::engine::{CallResult, Charge, Reconciliation};
use agentroom_ports::domain::ids::{OperationId, PrincipalId, TaskIdentity};
use agentroom_ports::domain::state::CallRole;
use agentroom_ports::{OperationRecord, ReconcileError, Reconciler};
use async_trait::async_trait;
use serde::{Deserialize, Serialize};

/// One executed call, as recorded before it returned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Execution {
    /// The operation.
    pub op: OperationId,
    /// The port it was called through.
    pub role: CallRole,
    /// The specialist or reviewer it ran as.
    pub principal: Option<PrincipalId>,
    /// The task it executed (specialists).
    pub task: Option<TaskIdentity>,
    /// Which reply of the scenario answered it (its index among the role's replies).
    pub reply: usize,
    /// What it cost.
    pub charge: Charge,
    /// What it returned.
    pub result: CallResult,
}

/// The journal could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// An IO error on the file.
    #[error("journal {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The error.
        source: std::io::Error,
    },
    /// A whole line that is not an execution.
    #[error("journal {path}: line {line} is not an execution: {reason}")]
    Corrupt {
        /// The file.
        path: String,
        /// The 1-based line.
        line: usize,
        /// Why.
        reason: String,
    },
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> JournalError + '_ {
    move |source| JournalError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// The whole lines of the journal at `path` and the length of the prefix they take; a missing
/// file is an empty journal.
fn read(path: &Path) -> Result<(Vec<Execution>, u64), JournalError> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), 0)),
        Err(err) => return Err(io(path)(err)),
    };
    let whole = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    let mut executions = Vec::new();
    for (i, line) in bytes[..whole].split(|b| *b == b'\n').enumerate() {
        if line.is_empty() {
            continue;
        }
        let execution =
            serde_json::from_slice::<Execution>(line).map_err(|e| JournalError::Corrupt {
                path: path.display().to_string(),
                line: i + 1,
                reason: e.to_string(),
            })?;
        executions.push(execution);
    }
    Ok((executions, u64::try_from(whole).unwrap_or(u64::MAX)))
}

/// The durable record of executed calls.
#[derive(Debug)]
pub struct Journal {
    path: PathBuf,
    state: Mutex<JournalState>,
}

#[derive(Debug)]
struct JournalState {
    file: File,
    executions: BTreeMap<OperationId, Execution>,
}

impl Journal {
    /// Opens (or creates) the journal at `path`, cutting off a torn tail.
    pub fn open(path: impl Into<PathBuf>) -> Result<Self, JournalError> {
        let path = path.into();
        let (executions, whole) = read(&path)?;
        let created = !path.exists();
        let file = OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(&path)
            .map_err(io(&path))?;
        let length = file.metadata().map_err(io(&path))?.len();
        if length > whole {
            tracing::warn!(path = %path.display(), torn = length - whole, "cutting off a torn journal tail");
            file.set_len(whole).map_err(io(&path))?;
            file.sync_all().map_err(io(&path))?;
        }
        if created && let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            // The new file's name must survive a crash too.
            File::open(dir)
                .and_then(|d| d.sync_all())
                .map_err(io(dir))?;
        }
        let executions = executions.into_iter().map(|e| (e.op, e)).collect();
        Ok(Self {
            path,
            state: Mutex::new(JournalState { file, executions }),
        })
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What `op` executed, if it did.
    pub fn get(&self, op: OperationId) -> Option<Execution> {
        self.lock().executions.get(&op).cloned()
    }

    /// Every execution, by operation id.
    pub fn executions(&self) -> Vec<Execution> {
        self.lock().executions.values().cloned().collect()
    }

    /// Appends `execution` and syncs it to disk; the call may return only after this. An
    /// operation is recorded once: recording it again keeps the first record, which is
    /// returned.
    pub(crate) fn record(&self, execution: Execution) -> Result<Execution, JournalError> {
        let mut state = self.lock();
        if let Some(first) = state.executions.get(&execution.op) {
            return Ok(first.clone());
        }
        let mut line = serde_json::to_vec(&execution).map_err(|e| JournalError::Corrupt {
            path: self.path.display().to_string(),
            line: state.executions.len() + 1,
            reason: e.to_string(),
        })?;
        line.push(b'\n');
        state.file.write_all(&line).map_err(io(&self.path))?;
        state.file.sync_data().map_err(io(&self.path))?;
        state.executions.insert(execution.op, execution.clone());
        Ok(execution)
    }

    /// A reconciler that answers from this journal for calls of `roles`: the agents of those
    /// roles must all record here before they return, or "not recorded" would not mean "not
    /// executed".
    pub fn reconciler(&self, roles: &[CallRole]) -> JournalReconciler {
        JournalReconciler {
            path: self.path.clone(),
            roles: roles.to_vec(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, JournalState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Confirms uncertain calls from a journal file (D2): recorded → executed, with the recorded
/// charge and result; not recorded → never executed, its reservation released. Calls of roles
/// the journal does not cover stay unknown. It reads the file on every question, so it answers
/// for a process that crashed as well as for this one.
#[derive(Debug, Clone)]
pub struct JournalReconciler {
    path: PathBuf,
    roles: Vec<CallRole>,
}

impl JournalReconciler {
    /// A reconciler for the journal file at `path`, covering `roles`.
    pub fn new(path: impl Into<PathBuf>, roles: &[CallRole]) -> Self {
        Self {
            path: path.into(),
            roles: roles.to_vec(),
        }
    }
}

#[async_trait]
impl Reconciler for JournalReconciler {
    #[tracing::instrument(skip_all, fields(op = %operation.op()))]
    async fn reconcile(
        &self,
        operation: &OperationRecord,
    ) -> Result<Option<Reconciliation>, ReconcileError> {
        if !self.roles.contains(&operation.request.role) {
            return Ok(None);
        }
        let (executions, _) = read(&self.path).map_err(|e| ReconcileError(e.to_string()))?;
        let op = operation.op();
        Ok(Some(match executions.into_iter().find(|e| e.op == op) {
            Some(execution) => Reconciliation::Executed {
                charge: execution.charge,
                result: execution.result,
            },
            None => Reconciliation::NotExecuted,
        }))
    }
}
