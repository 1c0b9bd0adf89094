//! The one history engine of Room state (D1), shared by every store: a commit stores the
//! change from the previous revision ([`Delta`]) and, when the deltas since the last snapshot
//! outweigh it, a snapshot of the whole state; the state at a revision is rebuilt from the
//! nearest snapshot and the deltas after it; and a store keeps each Room's latest document
//! ([`RoomHistory`]) so that a commit diffs only the sections a decision changed and a load
//! reads only the deltas committed since. Stores read and write the rows; every decision about
//! them is made here, so both stores follow one snapshot policy and one cache policy.
//!
//! The snapshot rule: a commit writes a snapshot when the delta bytes since the latest one,
//! its own included, reach the snapshot's size (and at least
//! [`MIN_SNAPSHOT_INTERVAL_BYTES`]). A load then reads at most about twice the state, and
//! snapshots cost at most about as many bytes as the deltas they summarize, however large the
//! state is and however small its changes are.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use agentroom_domain::ids::RoomId;
use agentroom_domain::state::RoomState;
use serde::Deserialize;

use crate::delta::{Delta, Sections};
use crate::rooms::{Commit, Revision, StoreError};

/// A snapshot is written once the deltas since the last one outweigh it, but never for less
/// than this many delta bytes (tiny states gain nothing from frequent snapshots).
pub const MIN_SNAPSHOT_INTERVAL_BYTES: i64 = 16 * 1024;

/// A load of a Room whose latest document a store keeps at most this many revisions behind
/// reads only the deltas since; further behind, the latest snapshot and the deltas after it.
pub const CATCH_UP_REVISIONS: i64 = 64;

/// Rooms whose latest document a store keeps; past this many it forgets one to make room.
pub const CACHED_ROOMS: usize = 1024;

/// How much a Room's history weighs since its latest snapshot: what decides whether a commit
/// also writes a snapshot. Only a hint when it is not read from the Room's row: a stale one
/// costs an early or a late snapshot, never correctness.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotWeight {
    /// Delta bytes committed since the latest snapshot (the snapshot's own revision's delta
    /// excluded).
    pub since: i64,
    /// The latest snapshot's size in bytes.
    pub snapshot_bytes: i64,
}

impl SnapshotWeight {
    /// Right after a snapshot of `bytes`.
    pub fn at_snapshot(bytes: i64) -> Self {
        Self {
            since: 0,
            snapshot_bytes: bytes,
        }
    }

    /// The snapshot rule: whether a commit of `delta_bytes` also writes a snapshot.
    pub fn snapshot_due(self, delta_bytes: i64) -> bool {
        self.since.saturating_add(delta_bytes)
            >= self.snapshot_bytes.max(MIN_SNAPSHOT_INTERVAL_BYTES)
    }

    /// After a commit of `delta_bytes` that wrote a snapshot of `snapshot_bytes`, if any.
    pub fn after(self, delta_bytes: i64, snapshot_bytes: Option<i64>) -> Self {
        match snapshot_bytes {
            Some(bytes) => Self::at_snapshot(bytes),
            None => Self {
                since: self.since.saturating_add(delta_bytes),
                snapshot_bytes: self.snapshot_bytes,
            },
        }
    }

    /// The weight of the stored rows a rebuild read: a snapshot of `snapshot_bytes` and the
    /// deltas after it.
    fn of_rows<D: AsRef<str>>(snapshot_bytes: usize, deltas: &[D]) -> Self {
        Self {
            since: deltas.iter().map(|d| bytes(d.as_ref().len())).sum(),
            snapshot_bytes: bytes(snapshot_bytes),
        }
    }
}

fn bytes(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The document of a Room at a revision a store loaded or committed. A (Room, revision) names
/// one state forever (compare-and-swap admits one commit per revision), so it is never wrong
/// for its revision; it is only useful while the Room is still there.
#[derive(Debug, Clone)]
pub struct Known {
    revision: Revision,
    document: Arc<Sections>,
    weight: Option<SnapshotWeight>,
}

impl Known {
    /// The revision it is the document of.
    pub fn revision(&self) -> Revision {
        self.revision
    }

    /// Whether a load of a Room now at `current` reads only the deltas after this one
    /// (rather than the latest snapshot and the deltas after it).
    pub fn catches_up_to(&self, current: Revision) -> bool {
        current >= self.revision && current.0 - self.revision.0 <= CATCH_UP_REVISIONS
    }
}

/// What a new Room stores: its state as a snapshot (JSON text) at [`Revision::FIRST`].
#[derive(Debug)]
pub struct Creation {
    snapshot: String,
    document: Sections,
}

impl Creation {
    /// The snapshot's JSON text.
    pub fn snapshot(&self) -> &str {
        &self.snapshot
    }

    /// Its size in bytes.
    pub fn snapshot_bytes(&self) -> i64 {
        bytes(self.snapshot.len())
    }
}

/// What a commit stores in history, computed before it is written: the delta from the
/// expected revision's state, and the whole state when a snapshot is due.
#[derive(Debug)]
pub struct Staged {
    /// The change, applied to the kept document once the commit is made.
    change: Delta,
    /// The document of the expected revision when this store kept none: serialized from the
    /// commit's previous state, so that the committed revision's document is known after it.
    base: Option<Sections>,
    delta: String,
    snapshot: Option<String>,
    weight: Option<SnapshotWeight>,
}

impl Staged {
    /// `change` written out, with a snapshot of `state` when the snapshot rule says so after
    /// a Room of `weight` (none: no snapshot), and the weight it leaves.
    fn written(
        change: Delta,
        base: Option<Sections>,
        state: &RoomState,
        weight: Option<SnapshotWeight>,
    ) -> Result<Self, StoreError> {
        let serializing = |e| StoreError::database("serializing a Room state", e);
        let delta = serde_json::to_string(&change).map_err(serializing)?;
        let delta_bytes = bytes(delta.len());
        let snapshot = weight
            .is_some_and(|w| w.snapshot_due(delta_bytes))
            .then(|| serde_json::to_string(state))
            .transpose()
            .map_err(serializing)?;
        let weight =
            weight.map(|w| w.after(delta_bytes, snapshot.as_ref().map(|s| bytes(s.len()))));
        Ok(Staged {
            change,
            base,
            delta,
            snapshot,
            weight,
        })
    }

    /// The delta's JSON text.
    pub fn delta(&self) -> &str {
        &self.delta
    }

    /// Its size in bytes.
    pub fn delta_bytes(&self) -> i64 {
        bytes(self.delta.len())
    }

    /// The snapshot's JSON text, when the commit writes one.
    pub fn snapshot(&self) -> Option<&str> {
        self.snapshot.as_deref()
    }

    /// Its size in bytes.
    pub fn snapshot_bytes(&self) -> Option<i64> {
        self.snapshot.as_ref().map(|s| bytes(s.len()))
    }
}

/// A document rebuilt from stored rows, with the weight of the rows it read.
#[derive(Debug)]
pub struct Rebuilt {
    document: Sections,
    weight: SnapshotWeight,
}

impl Rebuilt {
    /// The Room state it holds.
    pub fn state(&self) -> Result<RoomState, StoreError> {
        state_of(&self.document)
    }
}

/// Rebuilds the state at revision `target` of `room` from the snapshot at `snapshot_revision`
/// (JSON text) and the deltas after it up to `target`, in order (D1). Fewer or more deltas
/// than the revisions between them is [`StoreError::Corrupt`].
pub fn rebuild<D: AsRef<str>>(
    room: &RoomId,
    snapshot_revision: Revision,
    snapshot: &str,
    target: Revision,
    deltas: &[D],
) -> Result<Rebuilt, StoreError> {
    if bytes(deltas.len()) != target.0.saturating_sub(snapshot_revision.0) {
        return Err(StoreError::inconsistent(format!(
            "room {room} has {} history deltas after its snapshot at revision \
             {snapshot_revision}, not the {} up to revision {target}",
            deltas.len(),
            target.0.saturating_sub(snapshot_revision.0)
        )));
    }
    let value: serde_json::Value = serde_json::from_str(snapshot).map_err(|e| {
        StoreError::corrupt(
            format!("the snapshot of room {room} at {snapshot_revision}"),
            e,
        )
    })?;
    let mut document = Sections::from_value(value).map_err(|e| {
        StoreError::corrupt(
            format!("the snapshot of room {room} at {snapshot_revision}"),
            e,
        )
    })?;
    apply(room, snapshot_revision, &mut document, deltas)?;
    Ok(Rebuilt {
        weight: SnapshotWeight::of_rows(snapshot.len(), deltas),
        document,
    })
}

/// Applies the deltas of the revisions after `base`, in order, to `document`.
fn apply<D: AsRef<str>>(
    room: &RoomId,
    base: Revision,
    document: &mut Sections,
    deltas: &[D],
) -> Result<(), StoreError> {
    let mut revision = base;
    for text in deltas {
        revision = revision.next();
        let delta: Delta = serde_json::from_str(text.as_ref()).map_err(|e| {
            StoreError::corrupt(format!("the history of room {room} at {revision}"), e)
        })?;
        document.apply(&delta).map_err(|e| {
            StoreError::corrupt(format!("the history of room {room} at {revision}"), e)
        })?;
    }
    Ok(())
}

/// The Room state a document holds, read without copying it into one JSON value.
pub fn state_of(document: &Sections) -> Result<RoomState, StoreError> {
    let members = serde::de::value::MapDeserializer::<_, serde_json::Error>::new(document.iter());
    RoomState::deserialize(members).map_err(|e| StoreError::corrupt("a rebuilt Room state", e))
}

/// The latest document of each Room a store loaded or committed (at most [`CACHED_ROOMS`]),
/// with its snapshot weight: a commit at that revision diffs against it instead of
/// serializing the previous state again, and a load reads only the deltas committed since.
/// Entries only move forward: a document older than the kept one is not kept.
#[derive(Debug, Default)]
pub struct RoomHistory {
    rooms: Mutex<HashMap<RoomId, Known>>,
}

impl RoomHistory {
    /// Knows no Room.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<RoomId, Known>> {
        // Every entry is whole when the lock is released (inserted or removed in one call).
        self.rooms.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The latest document this store knows of `room`.
    pub fn known(&self, room: &RoomId) -> Option<Known> {
        self.lock().get(room).cloned()
    }

    /// The state of `room` at `revision` when that is the revision this store knows.
    pub fn state_at(
        &self,
        room: &RoomId,
        revision: Revision,
    ) -> Option<Result<RoomState, StoreError>> {
        let known = self.known(room).filter(|k| k.revision == revision)?;
        Some(state_of(&known.document))
    }

    /// Forgets `room`'s document: after a redaction scrubbed its stored history, so that no
    /// document this store keeps was read from the rows before (the next load rebuilds it).
    pub fn forget(&self, room: &RoomId) {
        self.lock().remove(room);
    }

    fn remember(&self, room: &RoomId, known: Known) {
        let mut rooms = self.lock();
        match rooms.get(room) {
            Some(kept) if kept.revision > known.revision => return,
            Some(_) => {}
            None if rooms.len() >= CACHED_ROOMS => {
                if let Some(forgotten) = rooms.keys().next().cloned() {
                    rooms.remove(&forgotten);
                }
            }
            None => {}
        }
        rooms.insert(room.clone(), known);
    }

    /// What creating a Room with `state` stores.
    pub fn create(state: &RoomState) -> Result<Creation, StoreError> {
        let value = serde_json::to_value(state)
            .map_err(|e| StoreError::database("serializing a Room state", e))?;
        let snapshot = serde_json::to_string(&value)
            .map_err(|e| StoreError::database("serializing a Room state", e))?;
        let document = Sections::from_value(value)
            .map_err(|e| StoreError::database("serializing a Room state", e))?;
        Ok(Creation { snapshot, document })
    }

    /// Remembers the Room `room` created with `creation` at [`Revision::FIRST`].
    pub fn created(&self, room: &RoomId, creation: Creation) {
        let weight = SnapshotWeight::at_snapshot(creation.snapshot_bytes());
        self.remember(
            room,
            Known {
                revision: Revision::FIRST,
                document: Arc::new(creation.document),
                weight: Some(weight),
            },
        );
    }

    /// What `commit` of `room` at `expected` stores: the change from the expected revision's
    /// document to the new state, written from the typed states so that only what the
    /// decision changed is serialized ([`RoomState::delta_from`], issue 21), and a snapshot
    /// of `commit.state` when the snapshot rule says so. The document is the kept one when it
    /// is `expected`'s, else `commit.previous` serialized. A commit without a known weight
    /// writes no snapshot; the next load learns the weight.
    pub fn stage(
        &self,
        room: &RoomId,
        expected: Revision,
        commit: &Commit<'_>,
    ) -> Result<Staged, StoreError> {
        Self::stage_on(self.known(room), expected, commit)
    }

    /// [`RoomHistory::stage`] against `known`, the document this store kept when it looked.
    fn stage_on(
        known: Option<Known>,
        expected: Revision,
        commit: &Commit<'_>,
    ) -> Result<Staged, StoreError> {
        let serializing = |e| StoreError::database("serializing a Room state", e);
        let weight = known.as_ref().and_then(|k| k.weight);
        let (change, base) = match known.filter(|k| k.revision == expected) {
            Some(known) => {
                let change = commit
                    .state
                    .delta_from(commit.previous, |name| known.document.get(name))
                    .map_err(serializing)?;
                (change, None)
            }
            None => {
                let document = Sections::from_value(
                    serde_json::to_value(commit.previous).map_err(serializing)?,
                )
                .map_err(|e| StoreError::database("serializing a Room state", e))?;
                let change = commit
                    .state
                    .delta_from(commit.previous, |name| document.get(name))
                    .map_err(serializing)?;
                (change, Some(document))
            }
        };
        Staged::written(change, base, commit.state, weight)
    }

    /// What each commit of a group stores ([`crate::RoomStore::commit_group`]): the first
    /// staged at `expected` as [`RoomHistory::stage`] does, each next one against the
    /// document the one before leaves, with the snapshot rule applied along the group. Each
    /// is remembered, in order, with [`RoomHistory::committed`].
    pub fn stage_group(
        &self,
        room: &RoomId,
        expected: Revision,
        commits: &[Commit<'_>],
    ) -> Result<Vec<Staged>, StoreError> {
        let serializing = |e| StoreError::database("serializing a Room state", e);
        let Some((first, rest)) = commits.split_first() else {
            return Ok(Vec::new());
        };
        // One look at the kept document: the first member is staged against it, and the
        // next ones against what it becomes.
        let known = self.known(room);
        let staged = Self::stage_on(known.clone(), expected, first)?;
        // The document the next member is written against: the kept one (or the first's
        // base) moved by each change, sharing every section no change touched.
        let known = known.filter(|k| k.revision == expected);
        let mut document = match (&staged.base, known) {
            (Some(base), _) => base.clone(),
            (None, Some(known)) => Sections::clone(&known.document),
            (None, None) => return Err(StoreError::inconsistent("a staged commit without a base")),
        };
        let mut weight = staged.weight;
        let mut group = Vec::with_capacity(commits.len());
        document
            .apply(&staged.change)
            .map_err(|e| StoreError::database("staging a group of commits", e))?;
        group.push(staged);
        for commit in rest {
            let change = commit
                .state
                .delta_from(commit.previous, |name| document.get(name))
                .map_err(serializing)?;
            document
                .apply(&change)
                .map_err(|e| StoreError::database("staging a group of commits", e))?;
            let staged = Staged::written(change, None, commit.state, weight)?;
            weight = staged.weight;
            group.push(staged);
        }
        Ok(group)
    }

    /// Remembers `staged` as committed at `revision`, with the weight the store read back
    /// when it keeps one (else the one the commit was staged with, moved past it): the kept
    /// document of the revision before moves forward by the change, in place (only what the
    /// decision changed is copied, when nobody else reads that document now).
    pub fn committed(
        &self,
        room: &RoomId,
        revision: Revision,
        staged: Staged,
        stored: Option<SnapshotWeight>,
    ) {
        let Staged {
            change,
            base,
            weight,
            ..
        } = staged;
        let weight = stored.or(weight);
        {
            let mut rooms = self.lock();
            if let Some(kept) = rooms.get_mut(room)
                && kept.revision.next() == revision
            {
                if Arc::make_mut(&mut kept.document).apply(&change).is_ok() {
                    kept.revision = revision;
                    kept.weight = weight;
                } else {
                    // Not the document the change was written against: the next load
                    // rebuilds it from the stored rows.
                    rooms.remove(room);
                }
                return;
            }
        }
        if let Some(mut document) = base
            && document.apply(&change).is_ok()
        {
            self.remember(
                room,
                Known {
                    revision,
                    document: Arc::new(document),
                    weight,
                },
            );
        }
    }

    /// The state of `room` at `current` from `known` and the deltas of the revisions after it
    /// up to `current`, remembered as the latest; `None` when they are not those deltas (the
    /// caller then rebuilds from the latest snapshot). `stored` is the weight the store read
    /// when it keeps one; else the known one grows by the deltas.
    pub fn catch_up<D: AsRef<str>>(
        &self,
        room: &RoomId,
        known: Known,
        current: Revision,
        deltas: &[D],
        stored: Option<SnapshotWeight>,
    ) -> Result<Option<RoomState>, StoreError> {
        if bytes(deltas.len()) != current.0.saturating_sub(known.revision.0)
            || current < known.revision
        {
            return Ok(None);
        }
        let document = if deltas.is_empty() {
            known.document
        } else {
            let mut document = Sections::clone(&known.document);
            apply(room, known.revision, &mut document, deltas)?;
            Arc::new(document)
        };
        let state = state_of(&document)?;
        let weight = stored.or_else(|| {
            known.weight.map(|w| SnapshotWeight {
                since: w
                    .since
                    .saturating_add(SnapshotWeight::of_rows(0, deltas).since),
                snapshot_bytes: w.snapshot_bytes,
            })
        });
        self.remember(
            room,
            Known {
                revision: current,
                document,
                weight,
            },
        );
        Ok(Some(state))
    }

    /// The state `rebuilt` holds, remembered as `room`'s document at `current` (its latest
    /// revision), with the weight the store read when it keeps one, else the weight of the
    /// rows the rebuild read.
    pub fn loaded(
        &self,
        room: &RoomId,
        current: Revision,
        rebuilt: Rebuilt,
        stored: Option<SnapshotWeight>,
    ) -> Result<RoomState, StoreError> {
        let state = state_of(&rebuilt.document)?;
        self.remember(
            room,
            Known {
                revision: current,
                document: Arc::new(rebuilt.document),
                weight: Some(stored.unwrap_or(rebuilt.weight)),
            },
        );
        Ok(state)
    }
}

#[cfg(test)]
#[cfg(feature = "conformance")]
mod tests {
    use super::*;
    use crate::conformance::Driver;
    use crate::memory::MemoryStore;

    #[test]
    fn d1_a_snapshot_is_due_once_the_deltas_since_outweigh_it() {
        let small = SnapshotWeight::at_snapshot(1_000);
        assert!(!small.snapshot_due(MIN_SNAPSHOT_INTERVAL_BYTES - 1));
        assert!(small.snapshot_due(MIN_SNAPSHOT_INTERVAL_BYTES));
        let large = SnapshotWeight {
            since: 99_000,
            snapshot_bytes: 100_000,
        };
        assert!(!large.snapshot_due(999));
        assert!(large.snapshot_due(1_000));
        assert_eq!(large.after(10, None).since, 99_010);
        assert_eq!(large.after(10, Some(123)), SnapshotWeight::at_snapshot(123));
    }

    /// A Room driven through `decide` for `commits` commits after it was set up: its states,
    /// numbered from [`Revision::FIRST`] (as if the first were its creation).
    async fn driven(commits: usize) -> (RoomId, Vec<(Revision, RoomState)>) {
        let store = MemoryStore::new();
        let mut d = Driver::create(&store, "engine", 100_000_000).await;
        let mut states = vec![(Revision::FIRST, d.state.clone())];
        for i in 0..commits {
            let decision = if i % 2 == 0 {
                d.owner_message(&format!("m{i}"))
            } else {
                d.raise(10)
            };
            let previous = d.state.clone();
            d.commit(&store, &decision, "x").await.unwrap();
            assert_ne!(previous, d.state);
            states.push((
                Revision(i64::try_from(states.len()).unwrap() + 1),
                d.state.clone(),
            ));
        }
        (d.room(), states)
    }

    fn commit_of<'a>(previous: &'a RoomState, state: &'a RoomState) -> Commit<'a> {
        Commit::state(
            previous,
            state,
            agentroom_domain::ids::Timestamp::from_millis(0),
            "x",
        )
    }

    #[tokio::test]
    async fn d1_staged_deltas_rebuild_every_revision_and_snapshots_follow_the_rule() {
        let (room, states) = driven(40).await;
        let history = RoomHistory::new();
        let (_, first) = &states[0];
        let creation = RoomHistory::create(first).unwrap();
        let mut snapshots = vec![(Revision::FIRST, creation.snapshot().to_owned())];
        let mut deltas: Vec<String> = Vec::new();
        let mut weight = SnapshotWeight::at_snapshot(creation.snapshot_bytes());
        history.created(&room, creation);
        for pair in states.windows(2) {
            let [(expected, previous), (revision, state)] = pair else {
                unreachable!()
            };
            let staged = history
                .stage(&room, *expected, &commit_of(previous, state))
                .unwrap();
            assert_eq!(
                staged.snapshot().is_some(),
                weight.snapshot_due(staged.delta_bytes()),
                "revision {revision}"
            );
            weight = weight.after(staged.delta_bytes(), staged.snapshot_bytes());
            deltas.push(staged.delta().to_owned());
            if let Some(snapshot) = staged.snapshot() {
                snapshots.push((*revision, snapshot.to_owned()));
            }
            history.committed(&room, *revision, staged, None);
            assert_eq!(history.known(&room).unwrap().weight, Some(weight));
        }
        assert!(
            snapshots.len() > 1,
            "the deltas never outweighed the snapshot"
        );
        // Each revision rebuilds from the nearest snapshot at or before it.
        for (revision, state) in &states {
            let (base, snapshot) = snapshots
                .iter()
                .rev()
                .find(|(at, _)| at <= revision)
                .unwrap();
            let after = usize::try_from(base.0).unwrap();
            let upto = usize::try_from(revision.0 - 1).unwrap();
            let rebuilt =
                rebuild(&room, *base, snapshot, *revision, &deltas[after - 1..upto]).unwrap();
            assert_eq!(&rebuilt.state().unwrap(), state, "revision {revision}");
        }
        // Too few deltas is corrupt history, not a state.
        let (last, _) = states.last().unwrap();
        assert!(matches!(
            rebuild(&room, Revision::FIRST, &snapshots[0].1, *last, &deltas[..1]),
            Err(StoreError::Corrupt { .. })
        ));
    }

    #[tokio::test]
    async fn d1_a_commit_without_the_known_document_diffs_from_its_previous_state() {
        let (room, states) = driven(3).await;
        let cold = RoomHistory::new();
        let warm = RoomHistory::new();
        warm.created(&room, RoomHistory::create(&states[0].1).unwrap());
        let mut known_revision = Revision::FIRST;
        for pair in states.windows(2) {
            let [(expected, previous), (revision, state)] = pair else {
                unreachable!()
            };
            let commit = commit_of(previous, state);
            let from_cold = cold.stage(&room, *expected, &commit).unwrap();
            let from_warm = warm.stage(&room, *expected, &commit).unwrap();
            assert_eq!(from_cold.delta(), from_warm.delta());
            // Without a weight nothing says a snapshot is due.
            assert!(from_cold.snapshot().is_none());
            warm.committed(&room, *revision, from_warm, None);
            known_revision = *revision;
        }
        assert_eq!(warm.known(&room).unwrap().revision(), known_revision);
        assert!(cold.known(&room).is_none());
    }

    #[tokio::test]
    async fn d1_a_load_catches_up_from_the_known_document_and_the_cache_only_moves_forward() {
        let (room, states) = driven(4).await;
        let history = RoomHistory::new();
        history.created(&room, RoomHistory::create(&states[0].1).unwrap());
        let known = history.known(&room).unwrap();
        let mut deltas = Vec::new();
        let writer = RoomHistory::new();
        writer.created(&room, RoomHistory::create(&states[0].1).unwrap());
        for pair in states.windows(2) {
            let [(expected, previous), (revision, state)] = pair else {
                unreachable!()
            };
            let staged = writer
                .stage(&room, *expected, &commit_of(previous, state))
                .unwrap();
            deltas.push(staged.delta().to_owned());
            writer.committed(&room, *revision, staged, None);
        }
        let (current, latest) = states.last().unwrap();
        assert!(known.catches_up_to(*current));
        assert!(!known.catches_up_to(Revision(CATCH_UP_REVISIONS + 2)));
        // Deltas that do not follow the known revision are refused, not applied.
        assert_eq!(
            history
                .catch_up(&room, known.clone(), *current, &deltas[1..], None)
                .unwrap(),
            None
        );
        let caught = history
            .catch_up(&room, known, *current, &deltas, None)
            .unwrap();
        assert_eq!(caught.as_ref(), Some(latest));
        assert_eq!(history.state_at(&room, *current).unwrap().unwrap(), *latest);
        let grown: i64 = deltas.iter().map(|d| bytes(d.len())).sum();
        assert_eq!(history.known(&room).unwrap().weight.unwrap().since, grown);
        // An older document never replaces a newer one.
        history.created(&room, RoomHistory::create(&states[0].1).unwrap());
        assert_eq!(history.known(&room).unwrap().revision(), *current);
        assert!(history.state_at(&room, Revision::FIRST).is_none());
    }
}
