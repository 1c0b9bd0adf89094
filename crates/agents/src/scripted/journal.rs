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
    let (executions, whole, _) = read_from(path, 0, 0)?;
    Ok((executions, whole))
}

/// The whole lines of the journal at `path` from byte `offset` on (the end of a whole line,
/// `lines` lines into the file), the offset past the last of them and the count of lines up
/// to it. A missing file is an empty journal; a torn tail (no newline yet) is left for later.
fn read_from(
    path: &Path,
    offset: u64,
    lines: usize,
) -> Result<(Vec<Execution>, u64, usize), JournalError> {
    let mut file = match File::open(path) {
        Ok(file) => file,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            return Ok((Vec::new(), 0, 0));
        }
        Err(err) => return Err(io(path)(err)),
    };
    read_lines(&mut file, path, offset, lines)
}

/// [`read_from`] on a file already open.
fn read_lines(
    file: &mut File,
    path: &Path,
    offset: u64,
    lines: usize,
) -> Result<(Vec<Execution>, u64, usize), JournalError> {
    use std::io::{Read as _, Seek as _, SeekFrom};
    file.seek(SeekFrom::Start(offset)).map_err(io(path))?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(io(path))?;
    let whole = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    let mut executions = Vec::new();
    let mut count = lines;
    for line in bytes[..whole].split(|b| *b == b'\n') {
        if whole == 0 {
            break;
        }
        count += 1;
        if line.is_empty() {
            continue;
        }
        let execution =
            serde_json::from_slice::<Execution>(line).map_err(|e| JournalError::Corrupt {
                path: path.display().to_string(),
                line: count,
                reason: e.to_string(),
            })?;
        executions.push(execution);
    }
    // `split` yields one empty piece after the last newline.
    let count = if whole == 0 { lines } else { count - 1 };
    let read = u64::try_from(whole).unwrap_or(u64::MAX);
    Ok((executions, offset.saturating_add(read), count))
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
        JournalReconciler::new(self.path.clone(), roles)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, JournalState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Confirms uncertain calls from a journal file (D2): recorded → executed, with the recorded
/// charge and result; not recorded → never executed, its reservation released. Calls of roles
/// the journal does not cover stay unknown. Each question reads what was appended to the file
/// since the last one (by this process or one that crashed) into an index by operation, so
/// recovering n calls reads the file once, not n times (issue 21); a file shorter than what
/// was read (replaced) is read again from its start.
#[derive(Debug, Clone)]
pub struct JournalReconciler {
    path: PathBuf,
    roles: Vec<CallRole>,
    index: std::sync::Arc<Mutex<Index>>,
}

/// What a reconciler has read of its journal.
#[derive(Debug, Default)]
struct Index {
    executions: std::collections::HashMap<OperationId, Execution>,
    /// The file read (device and inode): another file at the path is read anew.
    file: Option<(u64, u64)>,
    /// The byte offset past the last whole line read.
    read_to: u64,
    /// How many lines that is.
    lines: usize,
}

impl Index {
    /// Reads what was appended to the journal at `path` since the last time, from the file
    /// it opens (so its identity and its content are the same file's).
    fn catch_up(&mut self, path: &Path) -> Result<(), JournalError> {
        use std::os::unix::fs::MetadataExt as _;
        let mut file = match File::open(path) {
            Ok(file) => file,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                *self = Index::default();
                return Ok(());
            }
            Err(err) => return Err(io(path)(err)),
        };
        let metadata = file.metadata().map_err(io(path))?;
        let identity = Some((metadata.dev(), metadata.ino()));
        if identity != self.file || metadata.len() < self.read_to {
            *self = Index {
                file: identity,
                ..Index::default()
            };
        }
        if metadata.len() == self.read_to {
            return Ok(());
        }
        let (executions, read_to, lines) = read_lines(&mut file, path, self.read_to, self.lines)?;
        for execution in executions {
            // An operation is recorded once; its first record stands.
            self.executions.entry(execution.op).or_insert(execution);
        }
        self.read_to = read_to;
        self.lines = lines;
        Ok(())
    }
}

impl JournalReconciler {
    /// A reconciler for the journal file at `path`, covering `roles`.
    pub fn new(path: impl Into<PathBuf>, roles: &[CallRole]) -> Self {
        Self {
            path: path.into(),
            roles: roles.to_vec(),
            index: std::sync::Arc::default(),
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
        let mut index = self.index.lock().unwrap_or_else(PoisonError::into_inner);
        index
            .catch_up(&self.path)
            .map_err(|e| ReconcileError(e.to_string()))?;
        Ok(Some(match index.executions.get(&operation.op()) {
            Some(execution) => Reconciliation::Executed {
                charge: execution.charge,
                result: execution.result.clone(),
            },
            None => Reconciliation::NotExecuted,
        }))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic, reason = "tests")]
mod tests {
    use std::io::Write as _;

    use super::*;

    fn op(n: u128) -> OperationId {
        format!("00000000-0000-4000-8000-{n:012x}").parse().unwrap()
    }

    fn line(n: u128, reason: &str) -> String {
        let op = op(n);
        serde_json::json!({
            "op": op,
            "role": "specialist",
            "principal": "sam",
            "task": "p/gather",
            "reply": 0,
            "charge": {"charge": "actual", "micros": 5},
            "result": {"role": "specialist", "value": {"result": "failure", "reason": reason}},
        })
        .to_string()
    }

    fn append(path: &Path, text: &str) {
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .unwrap();
        file.write_all(text.as_bytes()).unwrap();
    }

    fn reason(index: &Index, n: u128) -> Option<String> {
        index
            .executions
            .get(&op(n))
            .map(|e| format!("{:?}", e.result))
    }

    /// D2 at scale (issue 21): the reconciler's index reads only what was appended since its
    /// last question, a torn tail only once it is whole, keeps an operation's first record,
    /// names a corrupt line by its number in the file, and starts over on a replaced file.
    #[test]
    fn d2_the_index_reads_each_line_once_in_file_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("executions.jsonl");
        let mut index = Index::default();
        index.catch_up(&path).unwrap();
        assert!(index.executions.is_empty(), "a missing journal is empty");

        append(&path, &format!("{}\n{}\n", line(1, "one"), line(2, "two")));
        index.catch_up(&path).unwrap();
        assert_eq!((index.executions.len(), index.lines), (2, 2));
        let torn = line(3, "three");
        let (head, tail) = torn.split_at(10);
        append(&path, head);
        index.catch_up(&path).unwrap();
        assert!(reason(&index, 3).is_none(), "a torn tail is not read");
        append(&path, &format!("{tail}\n{}\n", line(1, "again")));
        index.catch_up(&path).unwrap();
        assert!(reason(&index, 3).unwrap().contains("three"));
        assert!(
            reason(&index, 1).unwrap().contains("one"),
            "the first record stands"
        );
        assert_eq!(index.read_to, std::fs::metadata(&path).unwrap().len());
        assert_eq!(index.lines, 4);

        append(&path, "not json\n");
        match index.catch_up(&path) {
            Err(JournalError::Corrupt { line: 5, .. }) => {}
            other => panic!("{other:?}"),
        }

        std::fs::write(&path, format!("{}\n", line(9, "nine"))).unwrap();
        index.catch_up(&path).unwrap();
        assert_eq!(index.executions.len(), 1, "a replaced journal is read anew");
        assert!(reason(&index, 9).unwrap().contains("nine"));

        // Replaced by a longer file (renamed over it): another file, read from its start.
        let longer = dir.path().join("longer.jsonl");
        let text: String = (20..30)
            .map(|n| format!("{}\n", line(n, "later")))
            .collect();
        std::fs::write(&longer, text).unwrap();
        std::fs::rename(&longer, &path).unwrap();
        index.catch_up(&path).unwrap();
        assert_eq!(index.executions.len(), 10, "every line of the new file");
        assert!(reason(&index, 9).is_none() && reason(&index, 20).is_some());
    }
}
