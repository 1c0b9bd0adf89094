//! PostgreSQL-only guarantees of the Room store under real concurrency and real faults: D1
//! compare-and-swap between racing writers, B7 under 32 concurrent coordinators on one Room,
//! D2/D3 fencing of stale lease generations, a backend killed inside the commit window, and
//! the first store calls after every backend of the store was terminated.
//! Every state is reached through the domain's `decide`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use agentroom_domain::catalog::MemoryCatalog;
use agentroom_domain::engine::{
    CallResult, Charge, Decision, Effect, Env, Input, MembershipChange, Proposal, ProposalKind,
    ReasonerResult, Reconciliation, decide,
};
use agentroom_domain::event::{Event, EventBody};
use agentroom_domain::ids::{DerivedIds, EventId, OperationId, PrincipalId, RoomId, Timestamp};
use agentroom_domain::ledger::{BudgetLedger, LedgerEntry};
use agentroom_domain::money::UsdMicros;
use agentroom_domain::policy::{AccessPolicy, RoomPolicy};
use agentroom_domain::room::Role;
use agentroom_domain::state::{OperationState, Quotes, RoomSetup, RoomState};
use agentroom_ports::{
    Commit, CommitError, Heartbeat, LeaseGrant, OperationFilter, OperationStatus, Outbox, Receipt,
    ReceiptWrite, Revision, RoomStore, StoreError, WorkflowStore,
};
use agentroom_store_postgres::PgRooms;
use sqlx::{AssertSqlSafe, Connection, PgConnection};
use tokio::sync::Barrier;
use uuid::Uuid;

const AT: Timestamp = Timestamp::from_millis(1_764_460_800_000);
const QUOTE: i64 = 1_000;

fn p(id: &str) -> PrincipalId {
    PrincipalId::parse(id).unwrap()
}

fn lease(owner: &str, millis: u64) -> LeaseGrant {
    LeaseGrant {
        owner: owner.to_owned(),
        duration: Duration::from_millis(millis),
    }
}

/// One coordinator's view of a Room: the state it last loaded or committed, and ids derived
/// from its own namespace (so two coordinators never mint the same id).
struct Writer {
    state: RoomState,
    revision: Revision,
    namespace: u128,
    inputs: u128,
    catalog: MemoryCatalog,
}

impl Writer {
    fn new(state: RoomState, revision: Revision, namespace: u128) -> Self {
        Self {
            state,
            revision,
            namespace,
            inputs: 0,
            catalog: MemoryCatalog::new(),
        }
    }

    fn room(&self) -> RoomId {
        self.state.room().clone()
    }

    fn next_uuid(&mut self) -> Uuid {
        self.inputs += 1;
        Uuid::from_u128((self.namespace << 64) | self.inputs)
    }

    fn decide(&mut self, input: Input) -> Decision {
        let mut ids = DerivedIds::new(self.next_uuid());
        let mut env = Env {
            now: AT,
            ids: &mut ids,
            catalog: &self.catalog,
            contents: &agentroom_domain::review::NoContents,
            served: None,
            pool: None,
            archive: &agentroom_domain::archive::NoArchive,
        };
        decide(&self.state, input, &mut env).unwrap()
    }

    fn owner_message(&mut self, text: &str) -> (Event, Decision) {
        let event = Event {
            id: EventId::from_uuid(self.next_uuid()),
            room: self.room(),
            author: p("olive"),
            body: EventBody::OwnerMessage {
                text: text.to_owned(),
            },
        };
        let decision = self.decide(Input::EventAccepted(event.clone()));
        (event, decision)
    }

    /// Commits `decision` (its operations leased to `runner`); keeps its state on success.
    async fn commit(
        &mut self,
        store: &PgRooms,
        decision: &Decision,
        input: &str,
        receipts: Vec<(OperationId, i64, Receipt)>,
    ) -> Result<Revision, CommitError> {
        let room = self.room();
        let grant = lease("runner", 60_000);
        let mut commit = Commit::decided(&room, &self.state, decision, AT, input, Some(&grant));
        // A receipt's or a reconciler's outcome, applied by this decision.
        commit.applied = receipts.iter().map(|(op, _, _)| *op).collect();
        if input == "reconciled" {
            commit
                .applied
                .extend(decision.closed.iter().map(|o| o.id()));
        }
        commit.receipts = receipts;
        let revision = store.commit(&room, self.revision, commit).await?;
        self.state = decision.state.clone();
        self.revision = revision;
        Ok(revision)
    }

    async fn reload(&mut self, store: &PgRooms) {
        let stored = store.load(&self.room()).await.unwrap().unwrap();
        self.state = stored.state;
        self.revision = stored.revision;
    }
}

/// A Room `name` with owner `olive` and operator `oscar`, created and committed in `store`.
async fn create_room(store: &PgRooms, name: &str, limit: i64) -> Writer {
    let state = RoomState::new(RoomSetup {
        room: RoomId::parse(name).unwrap(),
        owner: p("olive"),
        policy: RoomPolicy::default(),
        access: AccessPolicy::default(),
        quotes: Quotes {
            reasoner: UsdMicros::new(QUOTE),
            specialist: UsdMicros::new(2 * QUOTE),
            reviewer: UsdMicros::new(QUOTE / 2),
        },
        limit: UsdMicros::new(limit),
    })
    .unwrap();
    let revision = store.create(&state, AT).await.unwrap();
    let mut writer = Writer::new(state, revision, 1);
    let grant = writer.decide(Input::ChangeMembership {
        by: p("olive"),
        principal: p("oscar"),
        role: Role::Operator,
        change: MembershipChange::Grant,
    });
    writer
        .commit(store, &grant, "change_membership", vec![])
        .await
        .unwrap();
    writer
}

fn reserved(decision: &Decision) -> Vec<OperationId> {
    decision
        .effects
        .iter()
        .filter_map(|e| match e {
            Effect::ReserveAndCall(request) => Some(request.op),
            _ => None,
        })
        .collect()
}

fn answer(charge: i64) -> Receipt {
    Receipt {
        model: None,
        omitted: Vec::new(),
        charge: Charge::Actual(UsdMicros::new(charge)),
        result: CallResult::Reasoner(ReasonerResult::Proposal(Proposal {
            observed: Default::default(),
            kind: ProposalKind::Answer {
                text: "an answer".to_owned(),
            },
        })),
    }
}

/// A tiny deterministic generator (xorshift64*), one per task.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    }
}

/// D1: two writers commit on the same revision at the same moment, again and again: exactly
/// one wins each round, the other gets a conflict naming the winner's revision, and nothing
/// of the loser is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d1_two_writers_on_one_revision_exactly_one_wins() {
    let (schema, store) = common::migrated_rooms().await;
    let store = Arc::new(store);
    let mut writer = create_room(&store, "duel", 1_000_000_000).await;
    for round in 0..25u128 {
        let barrier = Arc::new(Barrier::new(2));
        let mut joins = Vec::new();
        for side in 0..2u128 {
            let store = Arc::clone(&store);
            let barrier = Arc::clone(&barrier);
            let mut w = Writer::new(
                writer.state.clone(),
                writer.revision,
                100 + round * 2 + side,
            );
            joins.push(tokio::spawn(async move {
                let (_, decision) = w.owner_message("race");
                let ops = reserved(&decision);
                barrier.wait().await;
                let outcome = w.commit(&store, &decision, "event_accepted", vec![]).await;
                (outcome, ops, w)
            }));
        }
        let mut results = Vec::new();
        for join in joins {
            results.push(join.await.unwrap());
        }
        let winners: Vec<_> = results.iter().filter(|(o, _, _)| o.is_ok()).collect();
        assert_eq!(winners.len(), 1, "round {round}: exactly one writer wins");
        let expected = writer.revision;
        for (outcome, ops, w) in results {
            match outcome {
                Ok(revision) => {
                    assert_eq!(revision, expected.next());
                    for op in ops {
                        assert!(store.operation(op).await.unwrap().is_some());
                    }
                    writer = w;
                }
                Err(CommitError::Conflict {
                    expected: e,
                    actual,
                    ..
                }) => {
                    assert_eq!((e, actual), (expected, expected.next()));
                    for op in ops {
                        assert!(
                            store.operation(op).await.unwrap().is_none(),
                            "the loser's operation row was written"
                        );
                    }
                }
                Err(other) => panic!("round {round}: {other}"),
            }
        }
    }
    let stored = store.load(&writer.room()).await.unwrap().unwrap();
    assert_eq!(stored.state, writer.state);
    assert_eq!(stored.revision, writer.revision);
    let rows = store.ledger(&writer.room()).await.unwrap();
    assert_eq!(
        BudgetLedger::replay(&rows).as_ref(),
        Ok(writer.state.ledger())
    );
    common::drop_schema(&schema).await;
}

/// How many reservations the B7 stress admits in all, as the issue asks. The live Room
/// state holds open work only (ledger entries and closed operations are rows), so each
/// attempt costs the same at the 10,000th reservation as at the first; 32 tasks contending on
/// 2 cores make about six conflicts per commit, and the run takes about three minutes in a
/// debug build on this shared machine.
const B7_RESERVATIONS: usize = 10_000;
const B7_TASKS: usize = 32;
/// Open calls (in flight or uncertain) past which a task closes one instead of reserving.
const B7_OPEN: usize = 24;

/// B7: 32 coordinators released from a barrier reserve against one Room with random
/// settlements (a few above their reservation, B5), uncertain marks and limit raises; each
/// reloads and decides again on a conflict. No reservation is ever admitted beyond the
/// available balance, spent passes the limit only through an actual above its reservation,
/// every reservation has exactly one operation row, and the stored ledger rows replay to the
/// stored balances.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b7_concurrent_coordinators_never_admit_beyond_the_balance() {
    let (schema, pool) = common::fresh_schema_with(16).await;
    let store = Arc::new(common::migrate_rooms(&schema, pool).await);
    let base = create_room(&store, "stress", 40 * QUOTE).await;
    let admitted = Arc::new(AtomicUsize::new(0));
    let barrier = Arc::new(Barrier::new(B7_TASKS));
    let started = Instant::now();
    let mut joins = Vec::new();
    for task in 0..B7_TASKS {
        let store = Arc::clone(&store);
        let admitted = Arc::clone(&admitted);
        let barrier = Arc::clone(&barrier);
        let mut w = Writer::new(base.state.clone(), base.revision, 1_000 + task as u128);
        joins.push(tokio::spawn(async move {
            let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (task as u64 + 1));
            let (mut commits, mut conflicts, mut streak) = (0u64, 0u64, 0u32);
            barrier.wait().await;
            while admitted.load(Ordering::Relaxed) < B7_RESERVATIONS {
                let in_flight: Vec<OperationId> = w
                    .state
                    .operations()
                    .values()
                    .filter(|o| o.state() == OperationState::InFlight)
                    .map(|o| o.id())
                    .collect();
                let uncertain: Vec<OperationId> = w
                    .state
                    .operations()
                    .values()
                    .filter(|o| o.state() == OperationState::Uncertain)
                    .map(|o| o.id())
                    .collect();
                // Past B7_OPEN open calls, close one instead of reserving: a coordinator runs
                // a bounded number of calls at once, and the Room's live state stays small.
                let busy = in_flight.len() + uncertain.len() >= B7_OPEN;
                let roll = if busy {
                    8 + rng.below(52)
                } else {
                    rng.below(100)
                };
                let (input, decision, receipts) = if roll < 8 {
                    let d = w.decide(Input::RaiseLimit {
                        by: p("oscar"),
                        amount: UsdMicros::new(8 * QUOTE),
                    });
                    ("raise_limit", d, vec![])
                } else if roll < 45 && !in_flight.is_empty() {
                    let op = in_flight[rng.below(in_flight.len() as u64) as usize];
                    // One settlement in 60 overruns its reservation (B5 stops admissions
                    // until a raise).
                    let charge = if rng.below(60) == 0 {
                        QUOTE + 250
                    } else {
                        rng.below(QUOTE as u64 + 1) as i64
                    };
                    let receipt = answer(charge);
                    let d = w.decide(Input::CallReturned {
                        op,
                        charge: receipt.charge,
                        result: receipt.result.clone(),
                    });
                    ("call_returned", d, vec![(op, 1, receipt)])
                } else if roll < 52 && !in_flight.is_empty() {
                    let op = in_flight[rng.below(in_flight.len() as u64) as usize];
                    (
                        "call_uncertain",
                        w.decide(Input::CallUncertain { op, cause: None }),
                        vec![],
                    )
                } else if roll < 60 && !uncertain.is_empty() {
                    // A reconciler confirms an uncertain call: it ran (charged in full, its
                    // result lost) or it never did (released).
                    let op = uncertain[rng.below(uncertain.len() as u64) as usize];
                    let outcome = if rng.below(2) == 0 {
                        Reconciliation::NotExecuted
                    } else {
                        Reconciliation::ExecutedWithoutResult {
                            charge: Charge::NoUsage,
                        }
                    };
                    (
                        "reconciled",
                        w.decide(Input::Reconciled { op, outcome }),
                        vec![],
                    )
                } else if busy {
                    continue;
                } else {
                    let (event, d) = w.owner_message("reserve");
                    store.append_event(&event, AT).await.unwrap();
                    ("event_accepted", d, vec![])
                };
                let new = reserved(&decision).len();
                match w.commit(&store, &decision, input, receipts).await {
                    Ok(_) => {
                        streak = 0;
                        commits += 1;
                        admitted.fetch_add(new, Ordering::Relaxed);
                    }
                    Err(CommitError::Conflict { .. }) => {
                        // As a coordinator would: back off a random while, growing with
                        // the conflicts in a row, then reload and decide again.
                        conflicts += 1;
                        streak = (streak + 1).min(6);
                        let pause = rng.below(1 << streak) + 1;
                        tokio::time::sleep(Duration::from_millis(pause)).await;
                        w.reload(&store).await;
                    }
                    Err(other) => panic!("task {task}: {other}"),
                }
            }
            (commits, conflicts)
        }));
    }
    let (mut commits, mut conflicts) = (0, 0);
    for join in joins {
        let (c, k) = join.await.unwrap();
        commits += c;
        conflicts += k;
    }
    let elapsed = started.elapsed();
    let room = base.room();
    let stored = store.load(&room).await.unwrap().unwrap();
    let rows = store.ledger(&room).await.unwrap();
    let replayed = BudgetLedger::replay(&rows).unwrap();
    assert_eq!(
        &replayed,
        stored.state.ledger(),
        "the rows replay to the stored ledger"
    );
    assert_eq!(
        stored.revision.0,
        base.revision.0 + i64::try_from(commits).unwrap(),
        "every accepted commit is one revision"
    );

    // Walk the ledger: no reservation beyond the available balance or while stopped (B2,
    // B5, B7); spent above the limit only after an actual above its reservation.
    let (mut limit, mut spent, mut held) = (0i64, 0i64, BTreeMap::new());
    let (mut stopped, mut overran, mut reservations) = (false, false, 0usize);
    for entry in &rows {
        match entry {
            LedgerEntry::Opened { limit: l } => limit = l.micros(),
            LedgerEntry::Reserved { op, amount } => {
                let reserved: i64 = held.values().sum();
                assert!(
                    !stopped,
                    "reservation {op} admitted while admissions were stopped"
                );
                assert!(
                    amount.micros() <= limit - spent - reserved,
                    "reservation {op} of {amount} above the available balance"
                );
                held.insert(*op, amount.micros());
                reservations += 1;
            }
            LedgerEntry::Settled {
                op,
                reserved,
                charged,
            } => {
                assert_eq!(held.remove(op), Some(reserved.micros()));
                spent += charged.micros();
                if charged > reserved {
                    stopped = true;
                    overran = true;
                }
                assert!(
                    spent <= limit || overran,
                    "spent passed the limit without an overrun"
                );
            }
            LedgerEntry::SettlementRefused { op, reserved, .. } => {
                assert_eq!(held.remove(op), Some(reserved.micros()));
                spent += reserved.micros();
                stopped = true;
                overran = true;
            }
            LedgerEntry::Released { op, amount } => {
                assert_eq!(held.remove(op), Some(amount.micros()));
            }
            LedgerEntry::LimitRaised { by } => {
                limit += by.micros();
                stopped = false;
            }
            LedgerEntry::OverrunAcknowledged => stopped = false,
            LedgerEntry::MarkedUncertain { op } => assert!(held.contains_key(op)),
        }
    }
    assert!(reservations >= B7_RESERVATIONS);
    // B1: every reservation has exactly one operation row, in this Room.
    let open = store.operations(OperationFilter::Open).await.unwrap();
    let applied = store
        .operations(OperationFilter::Status(OperationStatus::Applied))
        .await
        .unwrap();
    assert_eq!(open.len() + applied.len(), reservations);
    // The live state holds exactly the open operations; closed ones left it with their
    // settlement, recorded in the ledger rows.
    assert_eq!(stored.state.operations().len(), open.len());
    assert!(
        conflicts > 0,
        "the tasks really contended ({commits} commits)"
    );
    eprintln!(
        "b7: {reservations} reservations, {commits} commits, {conflicts} conflicts in {elapsed:?}"
    );
    common::drop_schema(&schema).await;
}

/// D2, D3: once another runner has claimed an expired lease, the stale generation can neither
/// extend its heartbeat, nor record a receipt, nor commit one; racing the claim, exactly one
/// of the stale receipt and the claim takes each operation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d2_a_stale_generation_can_neither_write_a_receipt_nor_heartbeat() {
    let (schema, store) = common::migrated_rooms().await;
    let store = Arc::new(store);
    let mut w = create_room(&store, "fencing", 1_000_000_000).await;
    let room = w.room();
    let (_, decision) = w.owner_message("go");
    let op = reserved(&decision)[0];
    let previous = w.state.clone();
    let mut commit = Commit::decided(
        &room,
        &previous,
        &decision,
        AT,
        "event_accepted",
        Some(&lease("a", 200)),
    );
    commit.operations[0].lease = Some(lease("a", 200));
    w.revision = store.commit(&room, w.revision, commit).await.unwrap();
    w.state = decision.state.clone();
    assert_eq!(
        store
            .heartbeat(op, 1, Duration::from_millis(200))
            .await
            .unwrap(),
        Heartbeat::Extended { cancel: false }
    );
    assert!(
        store
            .claim_expired(lease("b", 60_000), 10)
            .await
            .unwrap()
            .is_empty(),
        "a live lease is not claimed"
    );
    // Past the lease by the database clock.
    tokio::time::sleep(Duration::from_millis(400)).await;
    let claimed = store.claim_expired(lease("b", 60_000), 10).await.unwrap();
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].generation, 2);

    assert_eq!(
        store
            .heartbeat(op, 1, Duration::from_secs(60))
            .await
            .unwrap(),
        Heartbeat::Fenced
    );
    assert_eq!(
        store.record_receipt(op, 1, &answer(300)).await.unwrap(),
        ReceiptWrite::Fenced
    );
    let settle = w.decide(Input::CallReturned {
        op,
        charge: Charge::Actual(UsdMicros::new(300)),
        result: answer(300).result,
    });
    let before = store.load(&room).await.unwrap().unwrap();
    match w
        .commit(&store, &settle, "call_returned", vec![(op, 1, answer(300))])
        .await
    {
        Err(CommitError::Fenced { op: o, generation }) => assert_eq!((o, generation), (op, 1)),
        other => panic!("expected fenced, got {other:?}"),
    }
    assert_eq!(store.load(&room).await.unwrap().unwrap(), before);
    let record = store.operation(op).await.unwrap().unwrap();
    assert_eq!(
        (record.status, record.receipt),
        (OperationStatus::InFlight, None)
    );
    // The current generation commits.
    w.commit(&store, &settle, "call_returned", vec![(op, 2, answer(300))])
        .await
        .unwrap();
    assert_eq!(
        store.operation(op).await.unwrap().unwrap().status,
        OperationStatus::Applied
    );

    // Race: 16 operations with expired leases; their stale holders write receipts while a
    // claimer claims. Each operation goes to exactly one of them.
    let mut ops = Vec::new();
    for i in 0..16 {
        let (_, decision) = w.owner_message(&format!("m{i}"));
        ops.extend(reserved(&decision));
        let mut commit = Commit::decided(&room, &w.state, &decision, AT, "event_accepted", None);
        for o in &mut commit.operations {
            o.lease = Some(lease("a", 0));
        }
        w.revision = store.commit(&room, w.revision, commit).await.unwrap();
        w.state = decision.state.clone();
    }
    let barrier = Arc::new(Barrier::new(2));
    let stale = {
        let (store, barrier, ops) = (Arc::clone(&store), Arc::clone(&barrier), ops.clone());
        tokio::spawn(async move {
            barrier.wait().await;
            let mut recorded = Vec::new();
            for op in ops {
                if store.record_receipt(op, 1, &answer(10)).await.unwrap() == ReceiptWrite::Recorded
                {
                    recorded.push(op);
                }
            }
            recorded
        })
    };
    let claimer = {
        let (store, barrier) = (Arc::clone(&store), Arc::clone(&barrier));
        tokio::spawn(async move {
            barrier.wait().await;
            let mut claimed = Vec::new();
            for _ in 0..16 {
                let batch = store.claim_expired(lease("c", 60_000), 1).await.unwrap();
                claimed.extend(batch.into_iter().map(|c| c.record.op()));
            }
            claimed
        })
    };
    let recorded = stale.await.unwrap();
    let claimed = claimer.await.unwrap();
    for op in &ops {
        let record = store.operation(*op).await.unwrap().unwrap();
        let (r, c) = (recorded.contains(op), claimed.contains(op));
        assert!(r != c, "{op}: receipt recorded {r}, claimed {c}");
        if r {
            assert_eq!(
                (record.status, record.generation),
                (OperationStatus::Receipted, 1)
            );
        } else {
            assert_eq!(
                (record.status, record.generation),
                (OperationStatus::InFlight, 2)
            );
            assert!(record.receipt.is_none());
        }
    }
    common::drop_schema(&schema).await;
}

/// A test connection outside the store's pool.
async fn admin() -> PgConnection {
    PgConnection::connect(&common::database_url())
        .await
        .unwrap()
}

/// Makes every commit of `schema` wait, just before it commits, for the advisory lock `key`:
/// a deferred constraint trigger on history rows.
async fn hold_commits(conn: &mut PgConnection, schema: &str, key: i64) {
    let ddl = format!(
        "CREATE FUNCTION {schema}.hold_commit() RETURNS trigger LANGUAGE plpgsql AS $$ \
         BEGIN PERFORM pg_advisory_lock_shared({key}); \
         PERFORM pg_advisory_unlock_shared({key}); RETURN NULL; END $$; \
         CREATE CONSTRAINT TRIGGER hold_commit AFTER INSERT ON {schema}.room_history \
         DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION {schema}.hold_commit();"
    );
    sqlx::raw_sql(AssertSqlSafe(ddl))
        .execute(&mut *conn)
        .await
        .unwrap();
}

/// The backend waiting for advisory lock `key`, once it waits.
async fn waiting_backend(conn: &mut PgConnection, key: i64) -> i32 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let pid: Option<i32> = sqlx::query_scalar(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND NOT granted \
             AND ((classid::bigint << 32) | objid::bigint) = $1 LIMIT 1",
        )
        .bind(key)
        .fetch_optional(&mut *conn)
        .await
        .unwrap();
        if let Some(pid) = pid {
            return pid;
        }
        assert!(Instant::now() < deadline, "no commit reached the window");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A backend killed with `pg_terminate_backend` inside the commit window (held open by a
/// deferred trigger waiting on an advisory lock) leaves none of the transaction; a retry
/// with the same operation id commits it once. A commit that went through before its
/// client could learn it is found out by the same retry: a conflict, one operation row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d1_b1_a_backend_killed_in_the_commit_window_leaves_all_or_nothing() {
    let (schema, store) = common::migrated_rooms().await;
    let store = Arc::new(store);
    let mut w = create_room(&store, "killed", 1_000_000_000).await;
    let room = w.room();
    // A key of this test alone: advisory locks are shared by the whole server.
    let mut random = [0u8; 4];
    getrandom::fill(&mut random).unwrap();
    let key = i64::from(u32::from_be_bytes(random));
    let mut holder = admin().await;
    let mut killer = admin().await;
    hold_commits(&mut holder, &schema, key).await;
    sqlx::query("SELECT pg_advisory_lock($1)")
        .bind(key)
        .execute(&mut holder)
        .await
        .unwrap();

    let before = store.load(&room).await.unwrap().unwrap();
    let ledger_before = store.ledger(&room).await.unwrap();
    let (_, decision) = w.owner_message("killed mid-commit");
    let op = reserved(&decision)[0];
    let decision = Arc::new(decision);
    let attempt = {
        let (store, decision, state, revision) = (
            Arc::clone(&store),
            Arc::clone(&decision),
            w.state.clone(),
            w.revision,
        );
        tokio::spawn(async move {
            let mut w = Writer::new(state, revision, 7);
            w.commit(&store, &decision, "event_accepted", vec![]).await
        })
    };
    let pid = waiting_backend(&mut killer, key).await;
    let terminated: bool = sqlx::query_scalar("SELECT pg_terminate_backend($1)")
        .bind(pid)
        .fetch_one(&mut killer)
        .await
        .unwrap();
    assert!(terminated);
    match attempt.await.unwrap() {
        Err(CommitError::Store(error @ StoreError::Database { .. })) => {
            // The driver's error is the source, not only text.
            let source = std::error::Error::source(&error).expect("a source");
            assert!(source.downcast_ref::<sqlx::Error>().is_some(), "{source:?}");
        }
        other => panic!("expected a database failure, got {other:?}"),
    }
    // None of it is there.
    assert_eq!(store.load(&room).await.unwrap().unwrap(), before);
    assert_eq!(store.ledger(&room).await.unwrap(), ledger_before);
    assert!(store.operation(op).await.unwrap().is_none());

    // Let commits through; the retry with the same operation id learns it was not written.
    sqlx::query("SELECT pg_advisory_unlock($1)")
        .bind(key)
        .execute(&mut holder)
        .await
        .unwrap();
    let revision = w
        .commit(&store, &decision, "event_accepted", vec![])
        .await
        .unwrap();
    assert_eq!(revision, before.revision.next());
    assert_eq!(store.operation(op).await.unwrap().unwrap().generation, 1);

    // A commit that went through while its client lost the answer: the retry of the same
    // decision is a conflict, the operation row exists once, and a reload shows it.
    let (_, second) = w.owner_message("committed, answer lost");
    let second_op = reserved(&second)[0];
    let mut lost = Writer::new(w.state.clone(), w.revision, 8);
    lost.commit(&store, &second, "event_accepted", vec![])
        .await
        .unwrap();
    match w.commit(&store, &second, "event_accepted", vec![]).await {
        Err(CommitError::Conflict { actual, .. }) => assert_eq!(actual, lost.revision),
        other => panic!("expected a conflict, got {other:?}"),
    }
    w.reload(&store).await;
    assert!(w.state.operation(second_op).is_some());
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM operations WHERE op_id = $1::uuid")
        .bind(second_op.to_string())
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!(rows, 1);
    holder.close().await.unwrap();
    killer.close().await.unwrap();
    common::drop_schema(&schema).await;
}

/// Terminates every backend of the store on `schema` (its connections carry the schema's name
/// as `application_name`) as `pg_terminate_backend` from another session does, and waits
/// until they are gone.
async fn terminate_backends(conn: &mut PgConnection, schema: &str) {
    let terminated: Vec<bool> = sqlx::query_scalar(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE application_name = $1 AND pid <> pg_backend_pid()",
    )
    .bind(schema)
    .fetch_all(&mut *conn)
    .await
    .unwrap();
    assert!(
        !terminated.is_empty() && terminated.iter().all(|t| *t),
        "the store has backends to terminate: {terminated:?}"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left: i64 =
            sqlx::query_scalar("SELECT count(*) FROM pg_stat_activity WHERE application_name = $1")
                .bind(schema)
                .fetch_one(&mut *conn)
                .await
                .unwrap();
        if left == 0 {
            return;
        }
        assert!(Instant::now() < deadline, "{left} backends still there");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Issue 17: after PostgreSQL terminated every backend of the store while its connections sat
/// idle, the next store call succeeds instead of failing (a 500 at the API): a load from a
/// store that knows the Room (catch-up), one from a store that does not (full load), a
/// heartbeat (D3) and a load-then-commit as the coordinator does (D1) run again once on a
/// fresh connection, since those that read or heartbeat are safe to run twice and the load
/// leaves fresh connections for the commit. Nothing is written twice: one operation row, the
/// revisions in sequence.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d1_d3_the_first_calls_after_the_backends_are_terminated_succeed() {
    let (schema, store) = common::migrated_rooms().await;
    let mut w = create_room(&store, "terminated", 1_000_000_000).await;
    let room = w.room();
    let mut killer = admin().await;

    // A load from a store that knows the Room.
    assert_eq!(
        store.load(&room).await.unwrap().unwrap().revision,
        w.revision
    );
    terminate_backends(&mut killer, &schema).await;
    let loaded = store.load(&room).await.unwrap().unwrap();
    assert_eq!((loaded.revision, &loaded.state), (w.revision, &w.state));

    // A full load from a store that does not know it yet (its own held connections).
    let cold = PgRooms::from_pool(store.pool().clone()).await.unwrap();
    assert!(cold.hot_path_plans().await.is_ok());
    terminate_backends(&mut killer, &schema).await;
    let loaded = cold.load(&room).await.unwrap().unwrap();
    assert_eq!((loaded.revision, &loaded.state), (w.revision, &w.state));

    // Load then commit, as the coordinator decides an input.
    terminate_backends(&mut killer, &schema).await;
    w.reload(&store).await;
    let before = w.revision;
    let (_, decision) = w.owner_message("after a termination");
    let op = reserved(&decision)[0];
    let revision = w
        .commit(&store, &decision, "event_accepted", vec![])
        .await
        .unwrap();
    assert_eq!(revision, before.next());

    // A heartbeat of the call that commit leased.
    terminate_backends(&mut killer, &schema).await;
    assert_eq!(
        store
            .heartbeat(op, 1, Duration::from_secs(60))
            .await
            .unwrap(),
        Heartbeat::Extended { cancel: false }
    );

    // The pool's statements were never the problem (sqlx pings before it hands one out).
    let ledger = store.ledger(&room).await.unwrap();
    terminate_backends(&mut killer, &schema).await;
    assert_eq!(store.ledger(&room).await.unwrap(), ledger);

    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM operations WHERE op_id = $1::uuid")
        .bind(op.to_string())
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!(rows, 1);
    assert_eq!(store.load(&room).await.unwrap().unwrap().revision, revision);
    killer.close().await.unwrap();
    store.close().await;
    common::drop_schema(&schema).await;
}

/// D1 across processes: a store that knows an older revision of a Room loads the latest one
/// by applying the deltas committed since by another store (or, far behind, from the latest
/// snapshot), and commits on it; every path rebuilds exactly the committed state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d1_a_store_that_knows_an_old_revision_loads_the_latest() {
    let (schema, first) = common::migrated_rooms().await;
    let second = PgRooms::from_pool(first.pool().clone()).await.unwrap();
    let mut a = create_room(&first, "two-processes", 1_000_000_000).await;
    let room = a.room();
    let mut b = Writer::new(a.state.clone(), a.revision, 2);
    b.reload(&second).await;
    for steps in [5, 1, 0, 100, 3] {
        for i in 0..steps {
            let (_, decision) = a.owner_message(&format!("m{i}"));
            a.commit(&first, &decision, "event_accepted", vec![])
                .await
                .unwrap();
        }
        b.reload(&second).await;
        assert_eq!((&b.state, b.revision), (&a.state, a.revision));
        // The second store commits on what it loaded; the first catches up.
        let raise = b.decide(Input::RaiseLimit {
            by: p("oscar"),
            amount: UsdMicros::new(1),
        });
        b.commit(&second, &raise, "raise_limit", vec![])
            .await
            .unwrap();
        a.reload(&first).await;
        assert_eq!((&a.state, a.revision), (&b.state, b.revision));
        assert_eq!(
            second.state_at(&room, a.revision).await.unwrap().as_ref(),
            Some(&a.state)
        );
    }
    common::drop_schema(&schema).await;
}

/// Stores `n` undelivered notifications of `room` straight into the outbox (what a commit's
/// notifications write), returning them in order.
async fn undelivered(
    store: &PgRooms,
    room: &RoomId,
    n: u128,
) -> Vec<agentroom_domain::engine::Notification> {
    let mut notes = Vec::new();
    for i in 0..n {
        let note = agentroom_domain::engine::Notification {
            id: agentroom_domain::ids::NotificationId::from_uuid(Uuid::from_u128(0x7_0000 + i)),
            audience: agentroom_domain::engine::Audience::Owners,
            objective: None,
            text: format!("note {i}"),
        };
        sqlx::query(
            "INSERT INTO outbox (notification_id, room_id, revision, body) \
             VALUES ($1::uuid, $2, 2, $3::json)",
        )
        .bind(note.id.to_string())
        .bind(room.as_str())
        .bind(serde_json::to_string(&note).unwrap())
        .execute(store.pool())
        .await
        .unwrap();
        notes.push(note);
    }
    notes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t5_a_rooms_deliveries_are_numbered_in_the_order_they_commit() {
    let (schema, store) = common::migrated_rooms().await;
    let store = Arc::new(store);
    let writer = create_room(&store, "outbox-order", 1_000_000).await;
    let room = writer.state.room().clone();
    let notes = undelivered(&store, &room, 2).await;

    // Process A marks the first one and has not committed yet.
    let mut a = store.pool().acquire().await.unwrap();
    sqlx::raw_sql("BEGIN").execute(&mut *a).await.unwrap();
    sqlx::query(agentroom_store_postgres::sql::MARK_DELIVERED)
        .bind(notes[0].id.to_string())
        .execute(&mut *a)
        .await
        .unwrap();
    // Process B marks the second: it waits for A, so it cannot be numbered before A's and
    // become visible first (a stream that read it would then skip A's forever).
    let b = tokio::spawn({
        let store = Arc::clone(&store);
        let id = notes[1].id;
        async move { store.mark_delivered(id).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !b.is_finished(),
        "B drew its number while A's was uncommitted"
    );
    assert!(
        store.delivered(&room, 0, 10).await.unwrap().is_empty(),
        "nothing is visible before A commits"
    );
    sqlx::raw_sql("COMMIT").execute(&mut *a).await.unwrap();
    b.await.unwrap().unwrap();

    let delivered = store.delivered(&room, 0, 10).await.unwrap();
    let order: Vec<_> = delivered.iter().map(|d| d.notification.id).collect();
    assert_eq!(order, vec![notes[0].id, notes[1].id]);
    assert!(delivered[0].position < delivered[1].position);
    // A notification marked again keeps its number (delivered once, T5).
    store.mark_delivered(notes[0].id).await.unwrap();
    assert_eq!(store.delivered(&room, 0, 10).await.unwrap(), delivered);

    drop(a);
    store.close().await;
    common::drop_schema(&schema).await;
}
