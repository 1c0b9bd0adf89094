//! The durable Room store on SQLite, beyond the conformance suite: two writers on one file
//! (D1, B7), fencing of stale lease generations (D3), rebuilding every revision from history
//! (D1) and the bytes a commit writes on a long-lived Room. Where a store's cache of the
//! latest state could hide a mistake, another store instance on the same file reads back.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use agentroom_domain::catalog::MemoryCatalog;
use agentroom_domain::engine::{
    CallRequest, CallResult, Charge, Decision, Effect, Input, MembershipChange, Proposal,
    ProposalKind, ReasonerResult,
};
use agentroom_domain::event::{Event, EventBody};
use agentroom_domain::ids::{EventId, PrincipalId, RoomId, Timestamp};
use agentroom_domain::ledger::BudgetLedger;
use agentroom_domain::money::UsdMicros;
use agentroom_domain::policy::{AccessPolicy, RoomPolicy};
use agentroom_domain::room::Role;
use agentroom_domain::sim::Simulation;
use agentroom_domain::state::{Quotes, RoomSetup, RoomState};
use agentroom_ports::{
    Commit, CommitError, Heartbeat, LeaseGrant, NewOperation, OperationStatus, Outbox, Receipt,
    ReceiptWrite, Revision, RoomStore, StoreError, WorkflowStore,
};
use agentroom_store_sqlite::{Durability, SqliteRooms, migrate};
use uuid::Uuid;

const LEASE: Duration = Duration::from_secs(30);

fn room_id() -> RoomId {
    RoomId::parse("local").unwrap()
}

fn olive() -> PrincipalId {
    PrincipalId::parse("olive").unwrap()
}

/// A Room of owner `olive` with operator `oscar` (who may raise the limit).
fn new_room() -> RoomState {
    let opened = RoomState::new(RoomSetup {
        room: room_id(),
        owner: olive(),
        policy: RoomPolicy::default(),
        access: AccessPolicy::default(),
        quotes: Quotes {
            reasoner: UsdMicros::new(1_000),
            specialist: UsdMicros::new(2_000),
            reviewer: UsdMicros::new(500),
        },
        limit: UsdMicros::new(1_000_000_000),
    })
    .unwrap();
    let mut sim = Simulation::new(opened, MemoryCatalog::new(), Timestamp::from_millis(0));
    sim.apply(Input::ChangeMembership {
        by: olive(),
        principal: PrincipalId::parse("oscar").unwrap(),
        role: Role::Operator,
        change: MembershipChange::Grant,
    })
    .unwrap();
    sim.state().clone()
}

fn migrated() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agentroom.db");
    migrate::up(&path).unwrap();
    (dir, path)
}

fn open(path: &Path) -> SqliteRooms {
    SqliteRooms::open(path, Durability::ProcessCrash).unwrap()
}

fn block<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(future)
}

/// A Room driven through `decide` and committed input by input, as the coordinator will.
struct Driver {
    sim: Simulation<MemoryCatalog>,
    revision: Revision,
    events: u128,
    /// Every committed state, by revision (index 0 is revision 1).
    committed: Vec<RoomState>,
    /// The runner id leases are granted to.
    owner: String,
    lease: Duration,
}

impl Driver {
    async fn create(store: &SqliteRooms) -> Self {
        let state = new_room();
        let revision = store
            .create(&state, Timestamp::from_millis(0))
            .await
            .unwrap();
        Self {
            sim: Simulation::new(
                state.clone(),
                MemoryCatalog::new(),
                Timestamp::from_millis(0),
            ),
            revision,
            events: 0,
            committed: vec![state],
            owner: "runner-a".into(),
            lease: LEASE,
        }
    }

    /// Decides `input` and commits it with everything the decision writes; `receipt` is the
    /// receipt of the call the input reports, with the generation that wrote it.
    async fn step(
        &mut self,
        store: &SqliteRooms,
        input: Input,
        receipt: Option<(i64, Receipt)>,
    ) -> Result<Decision, CommitError> {
        let previous = self.sim.state().clone();
        let kind = input_kind(&input);
        let event = match &input {
            Input::EventAccepted(e) => Some(e.id),
            _ => None,
        };
        let reported = match &input {
            Input::CallReturned { op, .. } => Some(*op),
            _ => None,
        };
        let decision = self.sim.apply(input).unwrap();
        let mut commit = Commit::state(&previous, &decision.state, self.sim.now(), kind);
        commit.event = event;
        commit.log = &decision.log;
        commit.ledger = decision.ledger.clone();
        for effect in &decision.effects {
            match effect {
                Effect::ReserveAndCall(request) => commit.operations.push(NewOperation {
                    room: room_id(),
                    request: request.clone(),
                    lease: Some(LeaseGrant {
                        owner: self.owner.clone(),
                        duration: self.lease,
                    }),
                }),
                Effect::CancelCall { op } => commit.cancellations.push(*op),
                Effect::Notify(n) => commit.notifications.push(n.clone()),
                Effect::StopForAttention { .. } => {}
            }
        }
        if let (Some(op), Some((generation, receipt))) = (reported, receipt) {
            commit.receipts.push((op, generation, receipt));
            commit.applied.push(op);
        }
        let revision = store.commit(&room_id(), self.revision, commit).await?;
        assert_eq!(revision, self.revision.next());
        self.revision = revision;
        self.committed.push(decision.state.clone());
        Ok(decision)
    }

    fn event(&mut self, text: &str) -> Event {
        self.events += 1;
        Event {
            id: EventId::from_uuid(Uuid::from_u128(0xE000_0000 + self.events)),
            room: room_id(),
            author: olive(),
            body: EventBody::OwnerMessage { text: text.into() },
        }
    }

    /// An owner message and its reasoner call: returns the call, committed with its lease.
    async fn ask(&mut self, store: &SqliteRooms, text: &str) -> CallRequest {
        let event = self.event(text);
        store.append_event(&event, self.sim.now()).await.unwrap();
        let decision = self
            .step(store, Input::EventAccepted(event), None)
            .await
            .unwrap();
        decision
            .effects
            .iter()
            .find_map(|e| match e {
                Effect::ReserveAndCall(c) => Some(c.clone()),
                _ => None,
            })
            .expect("a reasoner call")
    }

    /// The reasoner answers `call`: its receipt and its settlement in one commit.
    async fn answer(
        &mut self,
        store: &SqliteRooms,
        call: &CallRequest,
        generation: i64,
    ) -> Result<Decision, CommitError> {
        let (input, receipt) = answer_of(call);
        self.step(store, input, Some((generation, receipt))).await
    }
}

fn answer_of(call: &CallRequest) -> (Input, Receipt) {
    let charge = Charge::Actual(UsdMicros::new(400));
    let result = CallResult::Reasoner(ReasonerResult::Proposal(Proposal {
        observed: call.observed,
        kind: ProposalKind::Answer {
            text: "forty-two".into(),
        },
    }));
    (
        Input::CallReturned {
            op: call.op,
            charge,
            result: result.clone(),
        },
        Receipt {
            charge,
            result,
            model: None,
            omitted: Vec::new(),
        },
    )
}

fn input_kind(input: &Input) -> &'static str {
    match input {
        Input::EventAccepted(_) => "event_accepted",
        Input::CallReturned { .. } => "call_returned",
        Input::RaiseLimit { .. } => "raise_limit",
        _ => "other",
    }
}

fn raise(amount: i64) -> Input {
    Input::RaiseLimit {
        by: PrincipalId::parse("oscar").unwrap(),
        amount: UsdMicros::new(amount),
    }
}

#[test]
fn d1_two_writers_on_one_file_commit_on_the_same_revision_and_exactly_one_wins() {
    let (_dir, path) = migrated();
    let first = Arc::new(open(&path));
    let second = Arc::new(open(&path));
    block(async {
        first
            .create(&new_room(), Timestamp::from_millis(0))
            .await
            .unwrap();
    });
    let mut revision = Revision::FIRST;
    let mut winners = vec![new_room()];
    for round in 0..40_i64 {
        let base = block(first.load(&room_id())).unwrap().unwrap();
        assert_eq!(base.revision, revision);
        let barrier = Arc::new(Barrier::new(2));
        let writers: Vec<_> = [(Arc::clone(&first), 1), (Arc::clone(&second), 2)]
            .into_iter()
            .map(|(store, writer)| {
                let barrier = Arc::clone(&barrier);
                let base = base.clone();
                std::thread::spawn(move || {
                    let mut sim = Simulation::new(
                        base.state.clone(),
                        MemoryCatalog::new(),
                        Timestamp::from_millis(round),
                    );
                    let decision = sim.apply(raise(writer * 1_000 + round)).unwrap();
                    let mut commit =
                        Commit::state(&base.state, &decision.state, sim.now(), "raise_limit");
                    commit.ledger = decision.ledger.clone();
                    barrier.wait();
                    let result = block(store.commit(&room_id(), base.revision, commit));
                    (writer, result, decision.state)
                })
            })
            .collect();
        let results: Vec<_> = writers.into_iter().map(|w| w.join().unwrap()).collect();
        let won: Vec<_> = results.iter().filter(|(_, r, _)| r.is_ok()).collect();
        assert_eq!(won.len(), 1, "round {round}: exactly one writer wins");
        let lost = results.iter().find(|(_, r, _)| r.is_err()).unwrap();
        match &lost.1 {
            Err(CommitError::Conflict {
                expected, actual, ..
            }) => {
                assert_eq!(*expected, revision);
                assert_eq!(*actual, revision.next());
            }
            other => panic!("the loser gets the conflict, not {other:?}"),
        }
        revision = revision.next();
        let stored = block(second.load(&room_id())).unwrap().unwrap();
        assert_eq!(stored.revision, revision);
        assert_eq!(stored.state, won[0].2, "the winner's state is stored");
        winners.push(won[0].2.clone());
    }
    // Each store diffed against the state it knew or was handed: a third store rebuilds
    // every revision, whichever store wrote it, to the winner's state.
    let third = open(&path);
    for (index, state) in winners.iter().enumerate() {
        let at = Revision(i64::try_from(index).unwrap() + 1);
        let rebuilt = block(third.state_at(&room_id(), at)).unwrap();
        assert_eq!(rebuilt.as_ref(), Some(state), "revision {at}");
    }
    // The ledger rows hold the opening and exactly one raise per round: the loser wrote none.
    let ledger = block(first.ledger(&room_id())).unwrap();
    assert_eq!(ledger.len(), 41);
    let stored = block(first.load(&room_id())).unwrap().unwrap();
    assert_eq!(
        BudgetLedger::replay(&ledger).as_ref(),
        Ok(stored.state.ledger())
    );
}

#[tokio::test]
async fn d3_a_stale_generation_can_neither_heartbeat_nor_write_a_receipt() {
    let (_dir, path) = migrated();
    let store = open(&path);
    let mut room = Driver::create(&store).await;
    // The first runner's lease expires at once, so a second runner claims the call.
    room.lease = Duration::ZERO;
    let call = room.ask(&store, "what is the answer?").await;
    let created = store.operation(call.op).await.unwrap().unwrap();
    assert_eq!(created.status, OperationStatus::InFlight);
    assert_eq!(created.generation, 1);
    assert_eq!(created.lease_owner.as_deref(), Some("runner-a"));
    std::thread::sleep(Duration::from_millis(5));

    let claimed = store
        .claim_expired(
            LeaseGrant {
                owner: "runner-b".into(),
                duration: LEASE,
            },
            10,
        )
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].generation, 2);
    assert_eq!(claimed[0].record.recovery_attempts, 1);
    assert_eq!(claimed[0].record.lease_owner.as_deref(), Some("runner-b"));
    assert!(!claimed[0].record.lease_expired);

    // Generation 1 is fenced everywhere: heartbeat, receipt, and a commit carrying it.
    assert_eq!(
        store.heartbeat(call.op, 1, LEASE).await.unwrap(),
        Heartbeat::Fenced
    );
    let (_, receipt) = answer_of(&call);
    assert_eq!(
        store.record_receipt(call.op, 1, &receipt).await.unwrap(),
        ReceiptWrite::Fenced
    );
    let before = store.load(&room_id()).await.unwrap().unwrap();
    let ledger_before = store.ledger(&room_id()).await.unwrap();
    let mut stale = Driver {
        sim: Simulation::new(before.state.clone(), MemoryCatalog::new(), room.sim.now()),
        revision: before.revision,
        events: 100,
        committed: Vec::new(),
        owner: "runner-a".into(),
        lease: LEASE,
    };
    match stale.answer(&store, &call, 1).await {
        Err(CommitError::Fenced { op, generation }) => {
            assert_eq!(op, call.op);
            assert_eq!(generation, 1);
        }
        other => panic!("a commit with a stale receipt is fenced, not {other:?}"),
    }
    let after = store.load(&room_id()).await.unwrap().unwrap();
    assert_eq!(after, before, "a fenced commit writes nothing");
    assert_eq!(store.ledger(&room_id()).await.unwrap(), ledger_before);
    assert_eq!(
        store.operation(call.op).await.unwrap().unwrap().receipt,
        None
    );

    // The current generation heartbeats (and hears of cancellation), and writes once.
    assert_eq!(
        store.heartbeat(call.op, 2, LEASE).await.unwrap(),
        Heartbeat::Extended { cancel: false }
    );
    assert_eq!(
        store.record_receipt(call.op, 2, &receipt).await.unwrap(),
        ReceiptWrite::Recorded
    );
    assert_eq!(
        store.record_receipt(call.op, 2, &receipt).await.unwrap(),
        ReceiptWrite::Fenced,
        "a receipt is written once"
    );
    let record = store.operation(call.op).await.unwrap().unwrap();
    assert_eq!(record.status, OperationStatus::Receipted);
    assert_eq!(record.receipt, Some(receipt));
    assert!(
        store
            .claim_expired(
                LeaseGrant {
                    owner: "runner-c".into(),
                    duration: LEASE,
                },
                10
            )
            .await
            .unwrap()
            .is_empty(),
        "an operation with a receipt is never claimed again"
    );
}

#[tokio::test]
async fn d1_every_revision_rebuilds_from_history_to_what_was_committed() {
    let (_dir, path) = migrated();
    let store = open(&path);
    let mut room = Driver::create(&store).await;
    // Past more than one snapshot (one is due once the deltas since the last outweigh it),
    // with calls, settlements and raises.
    while room.revision.0 < 150 {
        let call = room.ask(&store, "what now?").await;
        room.answer(&store, &call, 1).await.unwrap();
        room.step(&store, raise(7), None).await.unwrap();
    }
    let snapshots: i64 = rusqlite::Connection::open(&path)
        .unwrap()
        .query_row("SELECT count(*) FROM room_snapshots", [], |row| row.get(0))
        .unwrap();
    assert!(snapshots > 1, "{snapshots} snapshots");
    // A store that loaded the Room catches up with another one's commits by their deltas.
    let reader = open(&path);
    let before = reader.load(&room_id()).await.unwrap().unwrap();
    assert_eq!(before.revision, room.revision);
    for _ in 0..3 {
        room.step(&store, raise(7), None).await.unwrap();
    }
    let after = reader.load(&room_id()).await.unwrap().unwrap();
    assert_eq!(
        (after.revision, &after.state),
        (room.revision, room.committed.last().unwrap())
    );
    // A store that committed nothing has nothing cached: it rebuilds every revision.
    let store = open(&path);
    for (index, committed) in room.committed.iter().enumerate() {
        let revision = Revision(i64::try_from(index).unwrap() + 1);
        let rebuilt = store.state_at(&room_id(), revision).await.unwrap();
        assert_eq!(rebuilt.as_ref(), Some(committed), "revision {revision}");
    }
    let loaded = open(&path).load(&room_id()).await.unwrap().unwrap();
    assert_eq!(loaded.revision, room.revision);
    assert_eq!(&loaded.state, room.committed.last().unwrap());
    assert_eq!(
        store
            .state_at(&room_id(), room.revision.next())
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        BudgetLedger::replay(&store.ledger(&room_id()).await.unwrap()).as_ref(),
        Ok(loaded.state.ledger())
    );
    // Every answer was applied and left a notification in the outbox.
    let open = store
        .operations(agentroom_ports::OperationFilter::Open)
        .await
        .unwrap();
    assert!(open.is_empty(), "{open:?}");
    assert!(!store.undelivered(1_000).await.unwrap().is_empty());
}

/// D1 across an upgrade: the database the previous release's `agentroom demo` wrote (a Room
/// with an objective, plans, contributions, a review and a settled ledger; `fixtures/`) is
/// migrated to this release's schema, and its whole history replays: every revision
/// rebuilds, the last is the Room as loaded, the ledger rows replay to its balances, the
/// decision log reads back.
#[tokio::test]
async fn d1_a_database_of_the_previous_release_upgrades_and_replays_its_history() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agentroom.db");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/demo-4e14c95.db"),
        &path,
    )
    .unwrap();
    assert!(
        SqliteRooms::open(&path, Durability::ProcessCrash).is_err(),
        "D5: not opened before it is migrated"
    );
    assert_eq!(
        migrate::up(&path).unwrap(),
        vec![7, 8, 9],
        "only this release's migrations"
    );
    let store = open(&path);
    let room = RoomId::parse("local").unwrap();
    let loaded = store.load(&room).await.unwrap().unwrap();
    assert_eq!(loaded.revision, Revision(14));
    let mut last = None;
    for revision in 1..=loaded.revision.0 {
        let rebuilt = store.state_at(&room, Revision(revision)).await.unwrap();
        assert!(rebuilt.is_some(), "revision {revision} does not rebuild");
        last = rebuilt;
    }
    assert_eq!(last.as_ref(), Some(&loaded.state));
    assert_eq!(
        BudgetLedger::replay(&store.ledger(&room).await.unwrap()).as_ref(),
        Ok(loaded.state.ledger())
    );
    let history = store.history(&room, Revision(0), 100).await.unwrap();
    assert_eq!(history.len(), 14);
    assert!(history.iter().any(|entry| entry.input == "call_returned"));
    assert_eq!(loaded.state.objectives().len(), 1, "the objective is there");
    // B8 across the state-format change: a Room written before pools draws on none.
    assert_eq!(loaded.state.pool(), None);
}

/// D1 across a state-format change (issue 16 added optional fields to operations, pending
/// messages, objectives and reviews): the database release 4e8e77a's `agentroom demo` wrote
/// needs no migration, loads with this release's state, replays every revision, and reads the
/// new fields as absent.
#[tokio::test]
async fn d1_a_room_written_before_the_provider_fields_loads_and_replays_its_history() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agentroom.db");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/demo-4e8e77a.db"),
        &path,
    )
    .unwrap();
    assert_eq!(
        migrate::up(&path).unwrap(),
        vec![8, 9],
        "only the budget pools' (0008) and the objective records' (0009) migrations"
    );
    let store = open(&path);
    let room = RoomId::parse("local").unwrap();
    let loaded = store.load(&room).await.unwrap().unwrap();
    assert_eq!(loaded.revision, Revision(14));
    let mut last = None;
    for revision in 1..=loaded.revision.0 {
        let rebuilt = store.state_at(&room, Revision(revision)).await.unwrap();
        assert!(rebuilt.is_some(), "revision {revision} does not rebuild");
        last = rebuilt;
    }
    assert_eq!(last.as_ref(), Some(&loaded.state));
    assert_eq!(
        BudgetLedger::replay(&store.ledger(&room).await.unwrap()).as_ref(),
        Ok(loaded.state.ledger())
    );
    let objective = &loaded.state.objectives()[0];
    assert!(objective.intake_calls().is_empty());
    assert!(objective.reviews().iter().all(|r| r.model().is_none()));
    assert!(loaded.state.intake().is_empty());
    // Written back in this release's format, it reads the same.
    let text = serde_json::to_string(&loaded.state).unwrap();
    let again: RoomState = serde_json::from_str(&text).unwrap();
    assert_eq!(again, loaded.state);
}

#[tokio::test]
async fn d1_a_commit_writes_what_changed_not_the_state_on_a_room_with_1000_revisions() {
    let (_dir, path) = migrated();
    let store = open(&path);
    let mut room = Driver::create(&store).await;
    let mut early = Vec::new();
    let state_size = |state: &RoomState| serde_json::to_string(state).unwrap().len();
    let mut early_state = 0;
    while room.revision.0 < 1_000 {
        let before = room.revision;
        room.step(&store, raise(1), None).await.unwrap();
        if before.0 < 20 {
            early.push(store.history_row_bytes(&room_id(), room.revision).unwrap());
            early_state = state_size(room.sim.state());
        }
    }
    let ledger = store.ledger(&room_id()).await.unwrap();
    assert!(ledger.len() >= 1_000, "{}", ledger.len());
    let state_bytes = state_size(&store.load(&room_id()).await.unwrap().unwrap().state);
    room.step(&store, raise(1), None).await.unwrap();
    let late = store.history_row_bytes(&room_id(), room.revision).unwrap();
    let early_max = *early.iter().max().unwrap();
    // The same decision writes the same few hundred bytes at revision 10 and at 1,000 (a
    // few more digits in the balances), however long the ledger grew.
    assert!(
        late <= early_max + 64,
        "revision {}: {late} bytes, early commits {early:?}",
        room.revision
    );
    // The ledger's entries are rows, not state: the live state is as large at revision
    // 1,000 as at revision 20 (a few more digits in the balances).
    assert!(
        state_bytes <= early_state + 16,
        "the state grew with history: {early_state} bytes at revision 20, {state_bytes} at 1,000"
    );
}

#[test]
fn d5_the_room_store_refuses_an_unmigrated_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agentroom.db");
    let missing = SqliteRooms::open(&path, Durability::ProcessCrash).unwrap_err();
    assert!(
        matches!(missing, StoreError::NotMigrated { .. }),
        "{missing}"
    );
    assert!(!path.exists());
    rusqlite::Connection::open(&path).unwrap();
    let empty = SqliteRooms::open(&path, Durability::ProcessCrash).unwrap_err();
    assert!(
        empty.to_string().contains("agentroom migrate up"),
        "{empty}"
    );
}

#[tokio::test]
async fn a_database_failure_keeps_the_drivers_error_as_its_source() {
    let (_dir, path) = migrated();
    let store = open(&path);
    // The schema is pulled from under a running store: its next read fails in SQLite.
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch("DROP TABLE outbox")
        .unwrap();
    let failed = store.undelivered(10).await.unwrap_err();
    assert!(matches!(failed, StoreError::Database { .. }), "{failed}");
    let mut chain = std::error::Error::source(&failed);
    let mut driver = None;
    while let Some(cause) = chain {
        driver = driver.or(cause.downcast_ref::<rusqlite::Error>());
        chain = cause.source();
    }
    let driver = driver.expect("the chain reaches rusqlite's error");
    assert!(driver.to_string().contains("no such table"), "{driver}");
    assert!(failed.to_string().contains("no such table"), "{failed}");
}

#[test]
fn a_claim_reads_only_in_flight_operations_and_the_outbox_only_undelivered_ones() {
    let (_dir, path) = migrated();
    let store = open(&path);
    let claim = store
        .explain(agentroom_store_sqlite::rooms::CLAIM_SQL)
        .unwrap()
        .join("\n");
    assert!(
        claim.contains("SEARCH operations USING INDEX operations_by_status (status=?)"),
        "{claim}"
    );
    assert!(!claim.contains("SCAN"), "{claim}");
    assert!(!claim.contains("TEMP B-TREE"), "{claim}");
    let outbox = store
        .explain(agentroom_store_sqlite::rooms::UNDELIVERED_SQL)
        .unwrap()
        .join("\n");
    assert!(outbox.contains("outbox_undelivered"), "{outbox}");
    assert!(!outbox.contains("TEMP B-TREE"), "{outbox}");
}
