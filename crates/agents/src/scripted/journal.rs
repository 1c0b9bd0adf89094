//! The scripted agents' durable record of what they executed: an append-only JSON-lines file,
//! one [`Execution`] per line, synced to disk before the call returns; and the [`Reconciler`]
//! that confirms an uncertain call from it (D2).
//!
//! A line is whole once it ends with a newline. A crash while a line is written leaves a torn
//! tail without one: that call never returned, so by this record it never ran; opening the
//! journal cuts the tail off and readers ignore it. Any other unreadable line is corruption and
//! is reported, never skipped.
//!
//! In memory the journal and its reconciler keep only where each operation's line starts
//! (issue 21: a host's memory must not grow with every result it ever recorded); a lookup
//! reads that one line back.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt as _;
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
/// Whole lines read: each execution with the offset its line starts at, the offset past the
/// last of them, and the count of lines up to it.
type Lines = (Vec<(u64, Execution)>, u64, usize);

fn read(path: &Path) -> Result<(Vec<(u64, Execution)>, u64), JournalError> {
    let (executions, whole, _) = read_from(path, 0, 0)?;
    Ok((executions, whole))
}

/// The whole lines of the journal at `path` from byte `offset` on (the end of a whole line,
/// `lines` lines into the file), the offset past the last of them and the count of lines up
/// to it. A missing file is an empty journal; a torn tail (no newline yet) is left for later.
fn read_from(path: &Path, offset: u64, lines: usize) -> Result<Lines, JournalError> {
    let mut file = match File::open(path) {
        Ok(file) => file,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            return Ok((Vec::new(), 0, 0));
        }
        Err(err) => return Err(io(path)(err)),
    };
    read_lines(&mut file, path, offset, lines)
}

/// [`read_from`] on a file already open; each execution with the offset its line starts at.
fn read_lines(
    file: &mut File,
    path: &Path,
    offset: u64,
    lines: usize,
) -> Result<Lines, JournalError> {
    use std::io::{Read as _, Seek as _, SeekFrom};
    file.seek(SeekFrom::Start(offset)).map_err(io(path))?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(io(path))?;
    let whole = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    let mut executions = Vec::new();
    let mut count = lines;
    let mut start = offset;
    for line in bytes[..whole].split(|b| *b == b'\n') {
        if whole == 0 {
            break;
        }
        count += 1;
        let at = start;
        start = start.saturating_add(u64::try_from(line.len()).unwrap_or(u64::MAX) + 1);
        if line.is_empty() {
            continue;
        }
        let execution =
            serde_json::from_slice::<Execution>(line).map_err(|e| JournalError::Corrupt {
                path: path.display().to_string(),
                line: count,
                reason: e.to_string(),
            })?;
        executions.push((at, execution));
    }
    // `split` yields one empty piece after the last newline.
    let count = if whole == 0 { lines } else { count - 1 };
    let read = u64::try_from(whole).unwrap_or(u64::MAX);
    Ok((executions, offset.saturating_add(read), count))
}

/// The execution whose line starts at `offset` of `file` (a whole line: it was read or
/// written whole before its offset was kept).
fn line_at(file: &File, path: &Path, offset: u64) -> Result<Execution, JournalError> {
    let mut line = Vec::new();
    let mut chunk = [0_u8; 4096];
    let mut at = offset;
    loop {
        let n = file.read_at(&mut chunk, at).map_err(io(path))?;
        let read = chunk.get(..n).unwrap_or_default();
        if let Some(end) = read.iter().position(|b| *b == b'\n') {
            line.extend_from_slice(read.get(..end).unwrap_or_default());
            break;
        }
        if n == 0 {
            return Err(JournalError::Corrupt {
                path: path.display().to_string(),
                line: 0,
                reason: format!("no whole line at byte {offset}"),
            });
        }
        line.extend_from_slice(read);
        at = at.saturating_add(u64::try_from(n).unwrap_or(u64::MAX));
    }
    serde_json::from_slice(&line).map_err(|e| JournalError::Corrupt {
        path: path.display().to_string(),
        line: 0,
        reason: format!("the line at byte {offset}: {e}"),
    })
}

/// The durable record of executed calls.
#[derive(Debug)]
pub struct Journal {
    path: PathBuf,
    /// Whether each record is synced to disk before its call returns (survives power loss;
    /// the default), or only written (survives the process's crash).
    synced: bool,
    state: Mutex<JournalState>,
    /// What the file held when it was opened, by operation: the reply each used, which the
    /// scripted agents resume from.
    opened: Vec<Recorded>,
}

/// What a journal line says about the script: which reply of which role an operation used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Recorded {
    /// The operation.
    pub op: OperationId,
    /// The port it was called through.
    pub role: CallRole,
    /// Which reply of the scenario answered it.
    pub reply: usize,
}

#[derive(Debug)]
struct JournalState {
    file: File,
    /// Where each recorded operation's line starts.
    offsets: HashMap<OperationId, u64>,
    /// The length of the whole lines: where the next one starts.
    end: u64,
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
        let mut offsets = HashMap::with_capacity(executions.len());
        let mut opened = Vec::with_capacity(executions.len());
        for (at, execution) in executions {
            // An operation is recorded once; its first record stands.
            if let std::collections::hash_map::Entry::Vacant(entry) = offsets.entry(execution.op) {
                entry.insert(at);
                opened.push(Recorded {
                    op: execution.op,
                    role: execution.role,
                    reply: execution.reply,
                });
            }
        }
        Ok(Self {
            path,
            state: Mutex::new(JournalState {
                file,
                offsets,
                end: whole,
            }),
            opened,
            synced: true,
        })
    }

    /// This journal with records written but not synced before their calls return: a record
    /// survives the crash of the process (SIGKILL), not of the machine. For scripted agents
    /// standing in for instant providers (`agentroom-bench room`), whose own durability is
    /// not what a figure measures; a hosted specialists' journal is always synced.
    pub fn unsynced(mut self) -> Self {
        self.synced = false;
        self
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What the file held when it was opened, one per operation, in file order.
    pub fn opened(&self) -> &[Recorded] {
        &self.opened
    }

    /// What `op` executed, if it did (its line read back).
    pub fn get(&self, op: OperationId) -> Result<Option<Execution>, JournalError> {
        let state = self.lock();
        state
            .offsets
            .get(&op)
            .map(|at| line_at(&state.file, &self.path, *at))
            .transpose()
    }

    /// Every execution, by operation id (the file read whole).
    pub fn executions(&self) -> Result<Vec<Execution>, JournalError> {
        let _state = self.lock();
        let (lines, _) = read(&self.path)?;
        let mut first: std::collections::BTreeMap<OperationId, Execution> = Default::default();
        for (_, execution) in lines {
            first.entry(execution.op).or_insert(execution);
        }
        Ok(first.into_values().collect())
    }

    /// Appends `execution` and syncs it to disk; the call may return only after this. An
    /// operation is recorded once: recording it again keeps the first record, which is
    /// returned.
    pub(crate) fn record(&self, execution: Execution) -> Result<Execution, JournalError> {
        let mut state = self.lock();
        if let Some(at) = state.offsets.get(&execution.op) {
            return line_at(&state.file, &self.path, *at);
        }
        let mut line = serde_json::to_vec(&execution).map_err(|e| JournalError::Corrupt {
            path: self.path.display().to_string(),
            line: state.offsets.len() + 1,
            reason: e.to_string(),
        })?;
        line.push(b'\n');
        state.file.write_all(&line).map_err(io(&self.path))?;
        if self.synced {
            state.file.sync_data().map_err(io(&self.path))?;
        }
        let at = state.end;
        state.end = at.saturating_add(u64::try_from(line.len()).unwrap_or(u64::MAX));
        state.offsets.insert(execution.op, at);
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
    /// Where each recorded operation's line starts.
    offsets: HashMap<OperationId, u64>,
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
        for (at, execution) in executions {
            // An operation is recorded once; its first record stands.
            self.offsets.entry(execution.op).or_insert(at);
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
        let unread = |e: JournalError| ReconcileError(e.to_string());
        index.catch_up(&self.path).map_err(unread)?;
        let recorded = match index.offsets.get(&operation.op()) {
            Some(at) => {
                let file = File::open(&self.path).map_err(|e| unread(io(&self.path)(e)))?;
                Some(line_at(&file, &self.path, *at).map_err(unread)?)
            }
            None => None,
        };
        Ok(Some(match recorded {
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

    /// The result recorded for operation `n`, read back from the line the index points at.
    fn reason_in(index: &Index, path: &Path, n: u128) -> Option<String> {
        let at = index.offsets.get(&op(n))?;
        let file = File::open(path).unwrap();
        Some(format!("{:?}", line_at(&file, path, *at).unwrap().result))
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
        assert!(index.offsets.is_empty(), "a missing journal is empty");

        append(&path, &format!("{}\n{}\n", line(1, "one"), line(2, "two")));
        index.catch_up(&path).unwrap();
        assert_eq!((index.offsets.len(), index.lines), (2, 2));
        let torn = line(3, "three");
        let (head, tail) = torn.split_at(10);
        append(&path, head);
        index.catch_up(&path).unwrap();
        assert!(
            reason_in(&index, &path, 3).is_none(),
            "a torn tail is not read"
        );
        append(&path, &format!("{tail}\n{}\n", line(1, "again")));
        index.catch_up(&path).unwrap();
        assert!(reason_in(&index, &path, 3).unwrap().contains("three"));
        assert!(
            reason_in(&index, &path, 1).unwrap().contains("one"),
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
        assert_eq!(index.offsets.len(), 1, "a replaced journal is read anew");
        assert!(reason_in(&index, &path, 9).unwrap().contains("nine"));

        // Replaced by a longer file (renamed over it): another file, read from its start.
        let longer = dir.path().join("longer.jsonl");
        let text: String = (20..30)
            .map(|n| format!("{}\n", line(n, "later")))
            .collect();
        std::fs::write(&longer, text).unwrap();
        std::fs::rename(&longer, &path).unwrap();
        index.catch_up(&path).unwrap();
        assert_eq!(index.offsets.len(), 10, "every line of the new file");
        assert!(reason_in(&index, &path, 9).is_none() && reason_in(&index, &path, 20).is_some());
    }

    fn execution(n: u128, reason: &str) -> Execution {
        serde_json::from_str(&line(n, reason)).unwrap()
    }

    /// Issue 21: the journal keeps where each line starts, not the executions; a lookup reads
    /// the line back, before and after a reopen, and a second record of an operation answers
    /// its first.
    #[test]
    fn d2_a_journal_reads_each_execution_back_from_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("executions.jsonl");
        let journal = Journal::open(&path).unwrap();
        journal.record(execution(1, "one")).unwrap();
        journal.record(execution(2, "two")).unwrap();
        assert_eq!(journal.get(op(2)).unwrap(), Some(execution(2, "two")));
        drop(journal);
        // A torn tail (a crash mid-line) is cut off when it is opened again.
        append(&path, &line(3, "torn")[..12]);
        let journal = Journal::open(&path).unwrap();
        let opened: Vec<OperationId> = journal.opened().iter().map(|r| r.op).collect();
        assert_eq!(opened, vec![op(1), op(2)]);
        assert_eq!(journal.get(op(3)).unwrap(), None);
        journal.record(execution(3, "three")).unwrap();
        let again = journal.record(execution(1, "again")).unwrap();
        assert_eq!(again, execution(1, "one"), "the first record stands");
        for (n, reason) in [(1, "one"), (2, "two"), (3, "three")] {
            assert_eq!(journal.get(op(n)).unwrap(), Some(execution(n, reason)));
        }
        assert_eq!(journal.executions().unwrap().len(), 3);
    }
}
