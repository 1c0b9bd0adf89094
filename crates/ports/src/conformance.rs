//! The store conformance suite (feature `conformance`): every store runs these cases against
//! a fresh database each (`store_conformance!(factory)`), and so does [`MemoryStore`], which
//! checks the suite itself. States are reached through the domain's `decide`, never by hand.
//!
//! This is test code: a failed check panics, which is a failed test.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use agentroom_domain::archive::{ObjectiveRecord, RecordKey};
use agentroom_domain::catalog::MemoryCatalog;
use agentroom_domain::engine::{
    CallResult, Charge, Decision, Effect, Env, Input, MembershipChange, ReasonerResult, decide,
};
use agentroom_domain::event::{Event, EventBody};
use agentroom_domain::ids::{
    DerivedIds, EventId, InputId, NotificationId, OperationId, PrincipalId, RoomId, Timestamp,
};
use agentroom_domain::ledger::{BudgetLedger, LedgerEntry};
use agentroom_domain::money::UsdMicros;
use agentroom_domain::policy::{AccessPolicy, RoomPolicy};
use agentroom_domain::room::Role;
use agentroom_domain::state::{Quotes, RoomSetup, RoomState};
use uuid::Uuid;

use crate::artifacts::ArtifactStore;
use crate::memory::MemoryStore;
use crate::notify::Outbox;
use crate::rooms::{
    Commit, CommitError, EventAppend, NewContent, OutboxPosition, Revision, RoomStore,
};
use crate::workflows::{
    Heartbeat, LeaseGrant, OperationFilter, OperationStatus, Receipt, ReceiptWrite, Resolution,
    ResolutionOutcome, WorkflowStore,
};

/// Everything a store implements.
pub trait Store: RoomStore + WorkflowStore + Outbox + ArtifactStore {}
impl<T: RoomStore + WorkflowStore + Outbox + ArtifactStore> Store for T {}

/// Generates one `#[tokio::test]` per case; `$factory` is an async fn returning a fresh,
/// migrated `Arc<S>` where `S` implements [`Store`].
#[macro_export]
macro_rules! store_conformance {
    ($factory:path) => {
        $crate::store_conformance!(@cases $factory;
            d1_a_stale_commit_is_a_conflict_and_changes_nothing,
            d1_every_revision_is_rebuilt_from_history,
            d1_concurrent_writers_reload_and_lose_nothing,
            b1_operations_are_created_with_their_reservation_and_the_committers_lease,
            d2_a_receipt_is_written_once_and_only_by_the_current_generation,
            d2_a_commit_with_a_fenced_receipt_writes_nothing,
            d2_a_commit_writes_receipts_only_on_its_own_rooms_operations_in_flight,
            d3_a_cancellation_reaches_the_heartbeat,
            d3_one_heartbeat_extends_every_lease_fenced_on_each_generation,
            claims_take_expired_leases_only_and_bump_the_generation,
            d2_expired_calls_are_claimed_and_marked_uncertain_in_one_write,
            concurrent_claimers_never_share_an_operation,
            uncertain_dead_letter_and_operator_resolution,
            d2_recovery_attempts_on_uncertain_operations_are_counted,
            t1_events_are_stored_once_by_id,
            t1_an_event_is_accepted_once_per_room,
            t1_a_commit_persists_the_event_it_accepts_and_refuses_a_stored_one,
            t1_persisted_events_never_accepted_are_listed_in_order,
            t5_notifications_are_stored_once_and_delivered,
            ledger_rows_replay_to_the_stored_balances,
            rooms_do_not_see_each_other,
            an_operator_input_is_decided_once_per_room,
            history_lists_each_commits_decision_after_a_revision,
            t5_delivered_notifications_are_read_in_delivery_order,
            d3_a_released_lease_is_fenced_on_its_generation_and_claimable_at_once,
            rooms_are_listed_by_id_in_pages,
            closed_objectives_records_are_kept_by_their_commit_and_found_by_key,
            content_is_kept_by_the_commit_that_carries_it,
            d1_a_group_commits_each_decision_as_its_own_revision_all_or_nothing,
        );
    };
    (@cases $factory:path; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $case() {
                let store = $factory().await;
                $crate::conformance::$case(store).await;
            }
        )*
    };
}

const AT: Timestamp = Timestamp::from_millis(1_764_460_800_000);

fn p(id: &str) -> PrincipalId {
    PrincipalId::parse(id).unwrap()
}

/// A Room driven through `decide`, with ids derived from its own namespace so that two
/// drivers never mint the same operation id.
pub struct Driver {
    /// The Room's current state (as last committed by this driver).
    pub state: RoomState,
    /// Its revision.
    pub revision: Revision,
    namespace: u128,
    inputs: u128,
    catalog: MemoryCatalog,
}

impl Driver {
    /// A new Room `name` (owner `olive`, operator `oscar`), created in `store`.
    pub async fn create<S: Store + ?Sized>(store: &S, name: &str, limit: i64) -> Driver {
        let room = RoomId::parse(name).unwrap();
        let state = RoomState::new(RoomSetup {
            room,
            owner: p("olive"),
            policy: RoomPolicy::default(),
            access: AccessPolicy::default(),
            quotes: Quotes {
                reasoner: UsdMicros::new(1_000),
                specialist: UsdMicros::new(2_000),
                reviewer: UsdMicros::new(500),
            },
            limit: UsdMicros::new(limit),
        })
        .unwrap();
        let revision = store.create(&state, AT).await.unwrap();
        assert_eq!(revision, Revision::FIRST);
        let namespace = name
            .bytes()
            .fold(0x5eed_u128, |h, b| h.wrapping_mul(131) ^ u128::from(b));
        let mut driver = Driver {
            state,
            revision,
            namespace,
            inputs: 0,
            catalog: MemoryCatalog::new(),
        };
        let decision = driver.decide(Input::ChangeMembership {
            by: p("olive"),
            principal: p("oscar"),
            role: Role::Operator,
            change: MembershipChange::Grant,
        });
        driver
            .commit(store, &decision, "change_membership")
            .await
            .unwrap();
        driver
    }

    /// The Room's id.
    pub fn room(&self) -> RoomId {
        self.state.room().clone()
    }

    /// Decides `input` against the driver's state (without committing).
    pub fn decide(&mut self, input: Input) -> Decision {
        self.decide_drawing(input, None)
    }

    /// Decides `input` with `pool` as the ledger of the pool the Room draws on, as the host
    /// read it (B8).
    pub fn decide_drawing(
        &mut self,
        input: Input,
        pool: Option<&agentroom_domain::ledger::BudgetLedger>,
    ) -> Decision {
        self.inputs += 1;
        let mut ids = DerivedIds::new(Uuid::from_u128(self.namespace ^ (self.inputs << 64)));
        let mut env = Env {
            now: Timestamp::from_millis(
                AT.as_millis() + i64::try_from(self.inputs).unwrap() * 1000,
            ),
            ids: &mut ids,
            catalog: &self.catalog,
            contents: &agentroom_domain::review::NoContents,
            served: None,
            pool,
            archive: &agentroom_domain::archive::NoArchive,
        };
        decide(&self.state, input, &mut env).unwrap()
    }

    /// Commits `decision` (operations leased to `runner` for 60 s) and keeps its state.
    pub async fn commit<S: Store + ?Sized>(
        &mut self,
        store: &S,
        decision: &Decision,
        input: &str,
    ) -> Result<Revision, CommitError> {
        let lease = lease("runner", 60_000);
        let commit = Commit::decided(&self.room(), &self.state, decision, AT, input, Some(&lease));
        let revision = store.commit(&self.room(), self.revision, commit).await?;
        self.state = decision.state.clone();
        self.revision = revision;
        Ok(revision)
    }

    /// Commits `decision`, which accepts `event`, persisting the event in the same commit
    /// ([`Commit::new_event`]), and keeps its state when it is committed.
    pub async fn commit_persisting<S: Store + ?Sized>(
        &mut self,
        store: &S,
        decision: &Decision,
        event: &Event,
    ) -> Result<Revision, CommitError> {
        let lease = lease("runner", 60_000);
        let mut commit = Commit::decided(
            &self.room(),
            &self.state,
            decision,
            AT,
            "event_accepted",
            Some(&lease),
        );
        commit.new_event = Some(event);
        let revision = store.commit(&self.room(), self.revision, commit).await?;
        self.state = decision.state.clone();
        self.revision = revision;
        Ok(revision)
    }

    /// The owner posts a message: one reasoner call is reserved. Returns the decision.
    pub fn owner_message(&mut self, text: &str) -> Decision {
        self.owner_message_drawing(text, None)
    }

    /// The owner posts a message, decided with `pool` as the Room's pool (B8).
    pub fn owner_message_drawing(
        &mut self,
        text: &str,
        pool: Option<&agentroom_domain::ledger::BudgetLedger>,
    ) -> Decision {
        self.inputs += 1;
        let id = EventId::from_uuid(Uuid::from_u128(self.namespace.wrapping_add(self.inputs)));
        self.inputs -= 1;
        self.decide_drawing(
            Input::EventAccepted(Event {
                id,
                room: self.room(),
                author: p("olive"),
                body: EventBody::OwnerMessage {
                    text: text.to_owned(),
                },
            }),
            pool,
        )
    }

    /// The operator raises the limit.
    pub fn raise(&mut self, micros: i64) -> Decision {
        self.decide(Input::RaiseLimit {
            by: p("oscar"),
            amount: UsdMicros::new(micros),
        })
    }
}

/// A lease for `owner` of `millis`.
pub fn lease(owner: &str, millis: u64) -> LeaseGrant {
    LeaseGrant {
        owner: owner.to_owned(),
        duration: Duration::from_millis(millis),
    }
}

fn reserved_op(decision: &Decision) -> OperationId {
    decision
        .effects
        .iter()
        .find_map(|e| match e {
            Effect::ReserveAndCall(request) => Some(request.op),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no reservation in {:?}", decision.effects))
}

fn answer() -> Receipt {
    Receipt {
        model: None,
        omitted: Vec::new(),
        charge: Charge::Actual(UsdMicros::new(400)),
        result: CallResult::Reasoner(ReasonerResult::FormatError {
            detail: "not JSON".to_owned(),
        }),
    }
}

/// D1: a commit on a stale revision is a typed conflict and writes nothing.
pub async fn d1_a_stale_commit_is_a_conflict_and_changes_nothing<S: Store>(store: Arc<S>) {
    let mut a = Driver::create(&*store, "cas", 1_000_000).await;
    let stale = a.revision;
    let state_before = a.state.clone();
    let first = a.raise(1_000);
    a.commit(&*store, &first, "raise_limit").await.unwrap();
    let ledger_rows = store.ledger(&a.room()).await.unwrap().len();

    // A second writer that loaded the same revision decides something else and commits.
    let mut b = Driver {
        state: state_before.clone(),
        revision: stale,
        namespace: 99,
        inputs: 0,
        catalog: MemoryCatalog::new(),
    };
    let decision = b.owner_message("hello");
    let commit = Commit::decided(
        &b.room(),
        &state_before,
        &decision,
        AT,
        "event_accepted",
        Some(&lease("r", 60_000)),
    );
    match store.commit(&b.room(), stale, commit).await {
        Err(CommitError::Conflict {
            expected, actual, ..
        }) => {
            assert_eq!(expected, stale);
            assert_eq!(actual, a.revision);
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    let stored = store.load(&a.room()).await.unwrap().unwrap();
    assert_eq!(stored.revision, a.revision);
    assert_eq!(stored.state, a.state);
    assert_eq!(store.ledger(&a.room()).await.unwrap().len(), ledger_rows);
    assert!(
        store
            .operation(reserved_op(&decision))
            .await
            .unwrap()
            .is_none(),
        "no operation row"
    );
}

/// D1: every accepted revision can be rebuilt from history.
pub async fn d1_every_revision_is_rebuilt_from_history<S: Store>(store: Arc<S>) {
    let mut d = Driver::create(&*store, "history", 10_000_000).await;
    let mut states = vec![(d.revision, d.state.clone())];
    for i in 0..70 {
        let decision = if i % 3 == 0 {
            d.owner_message(&format!("m{i}"))
        } else {
            d.raise(10 + i)
        };
        d.commit(&*store, &decision, "x").await.unwrap();
        states.push((d.revision, d.state.clone()));
    }
    let first = store
        .state_at(&d.room(), Revision::FIRST)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        first.members().holders(Role::Operator).count(),
        0,
        "revision 1 is the created Room"
    );
    for (revision, state) in &states {
        let rebuilt = store.state_at(&d.room(), *revision).await.unwrap();
        assert_eq!(rebuilt.as_ref(), Some(state), "revision {revision}");
    }
    assert!(
        store
            .state_at(&d.room(), d.revision.next())
            .await
            .unwrap()
            .is_none()
    );
    let loaded = store.load(&d.room()).await.unwrap().unwrap();
    assert_eq!((loaded.revision, &loaded.state), (d.revision, &d.state));
}

/// D1: writers racing on one Room each reload on conflict; every accepted commit is kept.
pub async fn d1_concurrent_writers_reload_and_lose_nothing<S: Store + 'static>(store: Arc<S>) {
    let d = Driver::create(&*store, "race", 100_000_000).await;
    let room = d.room();
    let writers = 6;
    let per_writer = 10;
    let mut joins = Vec::new();
    for w in 0..writers {
        let store = Arc::clone(&store);
        let room = room.clone();
        joins.push(tokio::spawn(async move {
            let mut done = 0;
            let mut conflicts = 0;
            let mut inputs = 0u128;
            while done < per_writer {
                let stored = store.load(&room).await.unwrap().unwrap();
                let mut driver = Driver {
                    state: stored.state,
                    revision: stored.revision,
                    namespace: 1_000 + w,
                    inputs,
                    catalog: MemoryCatalog::new(),
                };
                let decision = driver.raise(1);
                inputs = driver.inputs;
                match driver.commit(&*store, &decision, "raise_limit").await {
                    Ok(_) => done += 1,
                    Err(CommitError::Conflict { .. }) => conflicts += 1,
                    Err(other) => panic!("{other}"),
                }
            }
            conflicts
        }));
    }
    for join in joins {
        join.await.unwrap();
    }
    let stored = store.load(&room).await.unwrap().unwrap();
    let total = i64::try_from(writers * per_writer).unwrap();
    assert_eq!(stored.revision, Revision(d.revision.0 + total));
    let limit = stored.state.ledger().balances().limit;
    assert_eq!(
        limit,
        UsdMicros::new(100_000_000 + total),
        "every raise kept once"
    );
    let replayed = BudgetLedger::replay(&store.ledger(&room).await.unwrap()).unwrap();
    assert_eq!(replayed.balances(), stored.state.ledger().balances());
}

/// B1: the operation row and its reservation are committed together, with the committer's
/// lease (generation 1); creating it again (a retried decision) changes nothing.
pub async fn b1_operations_are_created_with_their_reservation_and_the_committers_lease<S: Store>(
    store: Arc<S>,
) {
    let mut d = Driver::create(&*store, "reserve", 1_000_000).await;
    let decision = d.owner_message("plan something");
    let op = reserved_op(&decision);
    let previous = d.state.clone();
    d.commit(&*store, &decision, "event_accepted")
        .await
        .unwrap();
    let record = store.operation(op).await.unwrap().unwrap();
    assert_eq!(record.status, OperationStatus::InFlight);
    assert_eq!(record.generation, 1);
    assert_eq!(record.lease_owner.as_deref(), Some("runner"));
    assert!(!record.lease_expired);
    assert_eq!(record.room, d.room());
    assert_eq!(record.request.op, op);
    assert!(d.state.ledger().balances().reserved.is_positive());

    // The same decision retried after a conflict: the operation is not created twice.
    let again = d.raise(5);
    let mut commit = Commit::decided(
        &d.room(),
        &d.state,
        &again,
        AT,
        "raise_limit",
        Some(&lease("other", 1)),
    );
    commit.operations = Commit::decided(
        &d.room(),
        &previous,
        &decision,
        AT,
        "x",
        Some(&lease("other", 1)),
    )
    .operations;
    store.commit(&d.room(), d.revision, commit).await.unwrap();
    let record = store.operation(op).await.unwrap().unwrap();
    assert_eq!(
        record.lease_owner.as_deref(),
        Some("runner"),
        "the first row stays"
    );
    assert_eq!(
        store.operations(OperationFilter::Open).await.unwrap().len(),
        1
    );
}

/// The commit of `decision` (an accepted event) with every call it reserves leased to runner
/// `a` for 0 ms: expired at once, claimable unless a heartbeat extends it.
fn expiring<'a>(d: &'a Driver, decision: &'a Decision) -> Commit<'a> {
    let mut commit = Commit::decided(
        &d.room(),
        &d.state,
        decision,
        AT,
        "event_accepted",
        Some(&lease("a", 0)),
    );
    commit
        .operations
        .iter_mut()
        .for_each(|o| o.lease = Some(lease("a", 0)));
    commit
}

/// D2: a receipt is written once, only by the current lease generation; a stale generation
/// can neither write one nor extend its heartbeat.
pub async fn d2_a_receipt_is_written_once_and_only_by_the_current_generation<S: Store>(
    store: Arc<S>,
) {
    let mut d = Driver::create(&*store, "fence", 1_000_000).await;
    let decision = d.owner_message("go");
    let op = reserved_op(&decision);
    let commit = expiring(&d, &decision);
    d.revision = store.commit(&d.room(), d.revision, commit).await.unwrap();
    d.state = decision.state.clone();
    // The lease (0 ms) has expired: another runner claims it at generation 2.
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
        store.record_receipt(op, 1, &answer()).await.unwrap(),
        ReceiptWrite::Fenced
    );
    assert!(!store.mark_uncertain(op, 1).await.unwrap());
    assert_eq!(
        store
            .heartbeat(op, 2, Duration::from_secs(60))
            .await
            .unwrap(),
        Heartbeat::Extended { cancel: false }
    );
    assert_eq!(
        store.record_receipt(op, 2, &answer()).await.unwrap(),
        ReceiptWrite::Recorded
    );
    assert_eq!(
        store.record_receipt(op, 2, &answer()).await.unwrap(),
        ReceiptWrite::Fenced,
        "once"
    );
    let record = store.operation(op).await.unwrap().unwrap();
    assert_eq!(record.status, OperationStatus::Receipted);
    assert_eq!(record.receipt, Some(answer()));
    assert!(
        store
            .claim_expired(lease("c", 60_000), 10)
            .await
            .unwrap()
            .is_empty(),
        "a receipted op is not claimed"
    );
}

/// D2: a commit carrying a receipt of a stale generation writes nothing at all.
pub async fn d2_a_commit_with_a_fenced_receipt_writes_nothing<S: Store>(store: Arc<S>) {
    let mut d = Driver::create(&*store, "fenced-commit", 1_000_000).await;
    let decision = d.owner_message("go");
    let op = reserved_op(&decision);
    d.commit(&*store, &decision, "event_accepted")
        .await
        .unwrap();
    let returned = d.decide(Input::CallReturned {
        op,
        charge: Charge::Actual(UsdMicros::new(400)),
        result: answer().result,
    });
    let before = (
        store.load(&d.room()).await.unwrap().unwrap(),
        store.ledger(&d.room()).await.unwrap(),
    );
    let mut commit = Commit::decided(&d.room(), &d.state, &returned, AT, "call_returned", None);
    commit.receipts.push((op, 7, answer()));
    commit.applied.push(op);
    match store.commit(&d.room(), d.revision, commit).await {
        Err(CommitError::Fenced {
            op: fenced,
            generation,
        }) => assert_eq!((fenced, generation), (op, 7)),
        other => panic!("expected fenced, got {other:?}"),
    }
    let after = (
        store.load(&d.room()).await.unwrap().unwrap(),
        store.ledger(&d.room()).await.unwrap(),
    );
    assert_eq!(after, before);
    let record = store.operation(op).await.unwrap().unwrap();
    assert_eq!(
        (record.status, record.receipt),
        (OperationStatus::InFlight, None)
    );

    // With the current generation it commits: receipt and settlement together.
    let mut commit = Commit::decided(&d.room(), &d.state, &returned, AT, "call_returned", None);
    commit.receipts.push((op, 1, answer()));
    commit.applied.push(op);
    d.revision = store.commit(&d.room(), d.revision, commit).await.unwrap();
    let record = store.operation(op).await.unwrap().unwrap();
    assert_eq!(record.status, OperationStatus::Applied);
    assert_eq!(record.receipt, Some(answer()));
    let open = store.operations(OperationFilter::Open).await.unwrap();
    assert!(
        open.iter().all(|o| o.op() != op),
        "an applied operation is not open"
    );
}

/// D2 and Room isolation: a commit cannot write a receipt onto another Room's operation, nor
/// onto an operation that is no longer in flight (uncertain).
pub async fn d2_a_commit_writes_receipts_only_on_its_own_rooms_operations_in_flight<S: Store>(
    store: Arc<S>,
) {
    let mut a = Driver::create(&*store, "own-a", 1_000_000).await;
    let mut b = Driver::create(&*store, "own-b", 1_000_000).await;
    let decision = a.owner_message("go");
    let op = reserved_op(&decision);
    a.commit(&*store, &decision, "event_accepted")
        .await
        .unwrap();
    let raise = b.raise(1);
    let mut commit = Commit::decided(&b.room(), &b.state, &raise, AT, "raise_limit", None);
    commit.receipts.push((op, 1, answer()));
    match store.commit(&b.room(), b.revision, commit).await {
        Err(CommitError::Fenced { op: fenced, .. }) => assert_eq!(fenced, op),
        other => panic!("another Room's operation took a receipt: {other:?}"),
    }
    assert_eq!(store.operation(op).await.unwrap().unwrap().receipt, None);
    assert_eq!(
        store.load(&b.room()).await.unwrap().unwrap().revision,
        b.revision
    );

    assert!(store.mark_uncertain(op, 1).await.unwrap());
    let raise = a.raise(1);
    let mut commit = Commit::decided(&a.room(), &a.state, &raise, AT, "raise_limit", None);
    commit.receipts.push((op, 1, answer()));
    assert!(matches!(
        store.commit(&a.room(), a.revision, commit).await,
        Err(CommitError::Fenced { .. })
    ));
    let record = store.operation(op).await.unwrap().unwrap();
    assert_eq!(
        (record.status, record.receipt),
        (OperationStatus::Uncertain, None)
    );
    b.revision = store.load(&b.room()).await.unwrap().unwrap().revision;
}

/// D3: a cancellation committed with a decision reaches the running call's heartbeat.
pub async fn d3_a_cancellation_reaches_the_heartbeat<S: Store>(store: Arc<S>) {
    let mut d = Driver::create(&*store, "cancel", 1_000_000).await;
    let decision = d.owner_message("go");
    let op = reserved_op(&decision);
    d.commit(&*store, &decision, "event_accepted")
        .await
        .unwrap();
    assert_eq!(
        store
            .heartbeat(op, 1, Duration::from_secs(60))
            .await
            .unwrap(),
        Heartbeat::Extended { cancel: false }
    );
    let raise = d.raise(1);
    let mut commit = Commit::decided(&d.room(), &d.state, &raise, AT, "control", None);
    commit.cancellations.push(op);
    d.revision = store.commit(&d.room(), d.revision, commit).await.unwrap();
    assert_eq!(
        store
            .heartbeat(op, 1, Duration::from_secs(60))
            .await
            .unwrap(),
        Heartbeat::Extended { cancel: true }
    );
    assert!(store.operation(op).await.unwrap().unwrap().cancel_requested);
}

/// D3 and issue 21 (item 4): a process's one heartbeat extends every lease it names whose
/// generation is current, in one write, and answers each in order: extended (with its cancel
/// flag) or fenced (a stale generation, an operation that is not in flight).
pub async fn d3_one_heartbeat_extends_every_lease_fenced_on_each_generation<S: Store>(
    store: Arc<S>,
) {
    let minute = Duration::from_secs(60);
    assert!(store.heartbeat_all(&[], minute).await.unwrap().is_empty());
    let mut ops = Vec::new();
    for name in ["beat-a", "beat-b"] {
        let mut d = Driver::create(&*store, name, 1_000_000).await;
        let decision = d.owner_message("go");
        let op = reserved_op(&decision);
        // Leased for 0 ms: expired at once unless the heartbeat extends it.
        let mut commit = expiring(&d, &decision);
        if name == "beat-b" {
            commit.cancellations.push(op);
        }
        d.revision = store.commit(&d.room(), d.revision, commit).await.unwrap();
        d.state = decision.state.clone();
        ops.push(op);
    }
    let (a, b) = (ops[0], ops[1]);
    let stranger = OperationId::from_uuid(Uuid::from_u128(0xBEA7));
    let answers = store
        .heartbeat_all(&[(a, 1), (b, 1), (a, 7), (stranger, 1)], minute)
        .await
        .unwrap();
    assert_eq!(
        answers,
        vec![
            Heartbeat::Extended { cancel: false },
            Heartbeat::Extended { cancel: true },
            Heartbeat::Fenced,
            Heartbeat::Fenced,
        ]
    );
    // Both leases now run a minute: nothing is claimable.
    let claimed = store.claim_expired(lease("b", 60_000), 10).await.unwrap();
    assert!(claimed.is_empty(), "{claimed:?}");
    assert_eq!(store.operation(a).await.unwrap().unwrap().generation, 1);
}

/// Claims take only expired leases, bump the generation and count a recovery attempt.
pub async fn claims_take_expired_leases_only_and_bump_the_generation<S: Store>(store: Arc<S>) {
    let mut d = Driver::create(&*store, "claims", 1_000_000).await;
    let live = d.owner_message("live");
    let live_op = reserved_op(&live);
    d.commit(&*store, &live, "event_accepted").await.unwrap();
    assert!(
        store
            .claim_expired(lease("b", 60_000), 10)
            .await
            .unwrap()
            .is_empty(),
        "a live lease is not claimed"
    );
    let expiring = d.owner_message("expiring");
    let op = reserved_op(&expiring);
    let commit = Commit::decided(
        &d.room(),
        &d.state,
        &expiring,
        AT,
        "event_accepted",
        Some(&lease("a", 0)),
    );
    d.revision = store.commit(&d.room(), d.revision, commit).await.unwrap();
    d.state = expiring.state.clone();
    let claimed = store.claim_expired(lease("b", 60_000), 10).await.unwrap();
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].record.op(), op);
    assert_eq!(claimed[0].generation, 2);
    assert_eq!(claimed[0].record.recovery_attempts, 1);
    assert_eq!(claimed[0].record.lease_owner.as_deref(), Some("b"));
    assert!(
        store
            .claim_expired(lease("c", 60_000), 10)
            .await
            .unwrap()
            .is_empty(),
        "claimed once"
    );
    assert_eq!(
        store.operation(live_op).await.unwrap().unwrap().generation,
        1
    );
}

/// D2 (issue 21, recovery): expired in-flight calls without a receipt are claimed and marked
/// uncertain by one write, a batch at a time: a new generation fences the dead holder, an
/// attempt is counted; a live lease and a receipted call are left alone.
pub async fn d2_expired_calls_are_claimed_and_marked_uncertain_in_one_write<S: Store>(
    store: Arc<S>,
) {
    let mut d = Driver::create(&*store, "claim-uncertain", 1_000_000).await;
    let live = d.owner_message("live");
    let live_op = reserved_op(&live);
    d.commit(&*store, &live, "event_accepted").await.unwrap();
    let mut expired = Vec::new();
    for text in ["first", "second", "receipted"] {
        let decision = d.owner_message(text);
        expired.push(reserved_op(&decision));
        let commit = expiring(&d, &decision);
        d.revision = store.commit(&d.room(), d.revision, commit).await.unwrap();
        d.state = decision.state.clone();
    }
    assert_eq!(
        store
            .record_receipt(expired[2], 1, &answer())
            .await
            .unwrap(),
        ReceiptWrite::Recorded
    );
    let mut claimed = store
        .claim_expired_uncertain(lease("b", 60_000), 1)
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1, "at most the limit");
    claimed.extend(
        store
            .claim_expired_uncertain(lease("b", 60_000), 10)
            .await
            .unwrap(),
    );
    let ops: BTreeSet<_> = claimed.iter().map(|c| c.record.op()).collect();
    assert_eq!(ops, BTreeSet::from([expired[0], expired[1]]));
    for claim in &claimed {
        assert_eq!(claim.generation, 2);
        assert_eq!(claim.record.status, OperationStatus::Uncertain);
        assert_eq!(claim.record.recovery_attempts, 1);
        assert_eq!(claim.record.lease_owner.as_deref(), Some("b"));
        let stored = store.operation(claim.record.op()).await.unwrap().unwrap();
        assert_eq!(stored.status, OperationStatus::Uncertain);
        assert_eq!(stored.generation, 2);
        assert_eq!(stored.recovery_attempts, 1);
        // The dead holder's late writes are fenced.
        assert_eq!(
            store
                .record_receipt(claim.record.op(), 1, &answer())
                .await
                .unwrap(),
            ReceiptWrite::Fenced
        );
    }
    assert!(
        store
            .claim_expired_uncertain(lease("c", 60_000), 10)
            .await
            .unwrap()
            .is_empty(),
        "claimed once"
    );
    let live = store.operation(live_op).await.unwrap().unwrap();
    assert_eq!(
        (live.status, live.generation),
        (OperationStatus::InFlight, 1)
    );
    let receipted = store.operation(expired[2]).await.unwrap().unwrap();
    assert_eq!(receipted.status, OperationStatus::Receipted);
}

/// Concurrent claimers never get the same operation.
pub async fn concurrent_claimers_never_share_an_operation<S: Store + 'static>(store: Arc<S>) {
    let mut d = Driver::create(&*store, "claimers", 100_000_000).await;
    let mut ops = BTreeSet::new();
    for i in 0..12 {
        let decision = d.owner_message(&format!("m{i}"));
        ops.insert(reserved_op(&decision));
        let commit = Commit::decided(
            &d.room(),
            &d.state,
            &decision,
            AT,
            "event_accepted",
            Some(&lease("gone", 0)),
        );
        d.revision = store.commit(&d.room(), d.revision, commit).await.unwrap();
        d.state = decision.state.clone();
    }
    let mut joins = Vec::new();
    for c in 0..4 {
        let store = Arc::clone(&store);
        joins.push(tokio::spawn(async move {
            let mut mine = Vec::new();
            loop {
                let claimed = store
                    .claim_expired(lease(&format!("c{c}"), 60_000), 2)
                    .await
                    .unwrap();
                if claimed.is_empty() {
                    break;
                }
                mine.extend(claimed.into_iter().map(|c| c.record.op()));
            }
            mine
        }));
    }
    let mut all = Vec::new();
    for join in joins {
        all.extend(join.await.unwrap());
    }
    let distinct: BTreeSet<OperationId> = all.iter().copied().collect();
    assert_eq!(all.len(), distinct.len(), "an operation was claimed twice");
    assert_eq!(distinct, ops);
}

/// Uncertain and dead-lettered operations wait for an operator, whose resolution is
/// recorded with who and why; nothing else can resolve.
pub async fn uncertain_dead_letter_and_operator_resolution<S: Store>(store: Arc<S>) {
    let mut d = Driver::create(&*store, "resolve", 1_000_000).await;
    let first = d.owner_message("one");
    let a = reserved_op(&first);
    d.commit(&*store, &first, "event_accepted").await.unwrap();
    let second = d.owner_message("two");
    let b = reserved_op(&second);
    d.commit(&*store, &second, "event_accepted").await.unwrap();
    let resolution = Resolution {
        outcome: ResolutionOutcome::Failed,
        operator: "oscar".to_owned(),
        reason: "provider says it never ran".to_owned(),
        at: AT,
    };
    assert!(
        !store.resolve(a, &resolution).await.unwrap(),
        "an in-flight op is not resolved"
    );
    assert!(store.mark_uncertain(a, 1).await.unwrap());
    assert!(
        store
            .dead_letter(b, "recovery gave up after 3 attempts")
            .await
            .unwrap()
    );
    let uncertain = store
        .operations(OperationFilter::Status(OperationStatus::Uncertain))
        .await
        .unwrap();
    assert_eq!(
        uncertain.iter().map(|o| o.op()).collect::<Vec<_>>(),
        vec![a]
    );
    let dead = store
        .operations(OperationFilter::Status(OperationStatus::DeadLetter))
        .await
        .unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!(
        dead[0].dead_letter_reason.as_deref(),
        Some("recovery gave up after 3 attempts")
    );
    assert!(
        store
            .claim_expired(lease("x", 1), 10)
            .await
            .unwrap()
            .is_empty(),
        "never replayed"
    );
    assert!(store.resolve(a, &resolution).await.unwrap());
    assert!(store.resolve(b, &resolution).await.unwrap());
    assert!(
        !store.resolve(b, &resolution).await.unwrap(),
        "resolved once"
    );
    let record = store.operation(a).await.unwrap().unwrap();
    assert_eq!(record.status, OperationStatus::Resolved);
    assert_eq!(record.resolution, Some(resolution));
    assert!(
        store
            .operations(OperationFilter::Open)
            .await
            .unwrap()
            .is_empty()
    );
}

/// D2: recovery attempts on an uncertain operation are counted durably (the claim counted
/// the first), so the bound on them holds across restarts; other operations are not counted.
pub async fn d2_recovery_attempts_on_uncertain_operations_are_counted<S: Store>(store: Arc<S>) {
    let mut d = Driver::create(&*store, "attempts", 1_000_000).await;
    let decision = d.owner_message("go");
    let op = reserved_op(&decision);
    let commit = Commit::decided(
        &d.room(),
        &d.state,
        &decision,
        AT,
        "event_accepted",
        Some(&lease("gone", 0)),
    );
    d.revision = store.commit(&d.room(), d.revision, commit).await.unwrap();
    d.state = decision.state.clone();
    assert_eq!(
        store.count_recovery_attempt(op).await.unwrap(),
        None,
        "an in-flight operation is not counted"
    );
    let claimed = store.claim_expired(lease("r", 60_000), 10).await.unwrap();
    assert_eq!(claimed[0].record.recovery_attempts, 1);
    assert!(
        store
            .mark_uncertain(op, claimed[0].generation)
            .await
            .unwrap()
    );
    assert_eq!(store.count_recovery_attempt(op).await.unwrap(), Some(2));
    assert_eq!(store.count_recovery_attempt(op).await.unwrap(), Some(3));
    let record = store.operation(op).await.unwrap().unwrap();
    assert_eq!(
        (record.status, record.recovery_attempts),
        (OperationStatus::Uncertain, 3)
    );
    assert!(store.dead_letter(op, "gave up").await.unwrap());
    assert_eq!(store.count_recovery_attempt(op).await.unwrap(), None);
    let unknown = OperationId::from_uuid(Uuid::from_u128(0xdead));
    assert_eq!(store.count_recovery_attempt(unknown).await.unwrap(), None);
}

/// T1: an event is stored once by its id; the same id with other content is refused.
pub async fn t1_events_are_stored_once_by_id<S: Store>(store: Arc<S>) {
    let d = Driver::create(&*store, "events", 1_000_000).await;
    let event = Event {
        id: EventId::from_uuid(Uuid::from_u128(42)),
        room: d.room(),
        author: p("olive"),
        body: EventBody::OwnerMessage {
            text: "hello".to_owned(),
        },
    };
    assert_eq!(
        store.append_event(&event, AT).await.unwrap(),
        EventAppend::Inserted
    );
    assert_eq!(
        store.append_event(&event, AT).await.unwrap(),
        EventAppend::Existed
    );
    let mut other = event.clone();
    other.body = EventBody::OwnerMessage {
        text: "changed".to_owned(),
    };
    assert!(store.append_event(&other, AT).await.is_err());
    assert_eq!(
        store.event(&d.room(), event.id).await.unwrap(),
        Some(event.clone())
    );
    assert_eq!(
        store
            .event(&d.room(), EventId::from_uuid(Uuid::from_u128(43)))
            .await
            .unwrap(),
        None
    );
}

/// T5: notifications are stored with the decision, once per id, until delivered.
pub async fn t5_notifications_are_stored_once_and_delivered<S: Store>(store: Arc<S>) {
    let mut d = Driver::create(&*store, "outbox", 1_000_000).await;
    let decision = d.raise(1);
    let mut commit = Commit::decided(&d.room(), &d.state, &decision, AT, "raise_limit", None);
    let note = agentroom_domain::engine::Notification {
        id: agentroom_domain::ids::NotificationId::from_uuid(Uuid::from_u128(7)),
        audience: agentroom_domain::engine::Audience::Operators,
        objective: None,
        text: "limit raised".to_owned(),
    };
    commit.notifications = vec![note.clone(), note.clone()];
    d.revision = store.commit(&d.room(), d.revision, commit).await.unwrap();
    d.state = decision.state.clone();
    // The same notification id from a later decision is not stored again.
    let again = d.raise(1);
    let mut commit = Commit::decided(&d.room(), &d.state, &again, AT, "raise_limit", None);
    commit.notifications = vec![note.clone()];
    store.commit(&d.room(), d.revision, commit).await.unwrap();
    let pending = store.undelivered(10).await.unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].notification, note);
    assert_eq!(pending[0].room, d.room());
    store.mark_attempt(note.id).await.unwrap();
    assert_eq!(store.undelivered(10).await.unwrap()[0].attempts, 1);
    store.mark_delivered(note.id).await.unwrap();
    store.mark_delivered(note.id).await.unwrap();
    assert!(store.undelivered(10).await.unwrap().is_empty());
}

/// The ledger rows replay to the stored state's balances (reservations, settlements).
pub async fn ledger_rows_replay_to_the_stored_balances<S: Store>(store: Arc<S>) {
    let mut d = Driver::create(&*store, "ledger", 1_000_000).await;
    for i in 0..5 {
        let decision = d.owner_message(&format!("m{i}"));
        let op = reserved_op(&decision);
        d.commit(&*store, &decision, "event_accepted")
            .await
            .unwrap();
        let settled = d.decide(Input::CallReturned {
            op,
            charge: Charge::Actual(UsdMicros::new(100 * (i + 1))),
            result: answer().result,
        });
        let mut commit = Commit::decided(&d.room(), &d.state, &settled, AT, "call_returned", None);
        commit.receipts.push((op, 1, answer()));
        commit.applied.push(op);
        d.revision = store.commit(&d.room(), d.revision, commit).await.unwrap();
        d.state = settled.state.clone();
    }
    let rows = store.ledger(&d.room()).await.unwrap();
    let settled = rows
        .iter()
        .filter(|e| matches!(e, LedgerEntry::Settled { .. }))
        .count();
    assert_eq!(settled, 5, "each call's settlement is a row: {rows:?}");
    let replayed = BudgetLedger::replay(&rows).unwrap();
    assert_eq!(&replayed, d.state.ledger(), "holds and balances");
    assert_eq!(replayed.balances(), d.state.ledger().balances());
    assert!(replayed.balances().spent.is_positive());
}

/// T1: a second commit accepting the same event writes nothing, however it was decided.
pub async fn t1_an_event_is_accepted_once_per_room<S: Store>(store: Arc<S>) {
    let mut d = Driver::create(&*store, "accept-once", 1_000_000).await;
    let event = |room: RoomId| Event {
        id: EventId::from_uuid(Uuid::from_u128(0x7100_0001)),
        room,
        author: p("olive"),
        body: EventBody::OwnerMessage {
            text: "once".to_owned(),
        },
    };
    let first = d.decide(Input::EventAccepted(event(d.room())));
    assert_eq!(first.event, Some(event(d.room()).id));
    d.commit(&*store, &first, "event_accepted").await.unwrap();
    // The same event decided again on the new state (a redelivery after a crash).
    let again = d.decide(Input::EventAccepted(event(d.room())));
    let err = d
        .commit(&*store, &again, "event_accepted")
        .await
        .unwrap_err();
    match err {
        CommitError::AlreadyAccepted { room, event: e } => {
            assert_eq!((room, e), (d.room(), event(d.room()).id));
        }
        other => panic!("expected already accepted, got {other:?}"),
    }
    let stored = store.load(&d.room()).await.unwrap().unwrap();
    assert_eq!(
        stored.revision,
        Revision(3),
        "created, granted, accepted once"
    );
    assert_eq!(stored.state, first.state);
    let rows = store.ledger(&d.room()).await.unwrap();
    assert_eq!(rows.len(), 2, "opened and one reservation");
    // Acceptance is per Room: another Room accepts an event of the same id.
    let mut other = Driver::create(&*store, "accept-once-b", 1_000_000).await;
    let theirs = other.decide(Input::EventAccepted(event(other.room())));
    other
        .commit(&*store, &theirs, "event_accepted")
        .await
        .unwrap();
}

/// T1 and issue 21 (an owner message persisted by the process that decides it is accepted in
/// the same commit): the commit stores the event with its acceptance, all or nothing; an
/// event whose id is stored already (by a retry or another process) is refused with
/// `EventStored` and the commit writes nothing, so the caller persists it the checked way.
pub async fn t1_a_commit_persists_the_event_it_accepts_and_refuses_a_stored_one<S: Store>(
    store: Arc<S>,
) {
    let mut d = Driver::create(&*store, "persist-and-accept", 1_000_000).await;
    let event = |room: RoomId, n: u128, text: &str| Event {
        id: EventId::from_uuid(Uuid::from_u128(0x7200_0000 + n)),
        room,
        author: p("olive"),
        body: EventBody::OwnerMessage {
            text: text.to_owned(),
        },
    };
    let first = event(d.room(), 1, "persisted by its decision");
    let decision = d.decide(Input::EventAccepted(first.clone()));
    d.commit_persisting(&*store, &decision, &first)
        .await
        .unwrap();
    assert_eq!(
        store.event(&d.room(), first.id).await.unwrap(),
        Some(first.clone())
    );
    assert!(
        store
            .unaccepted_events(&d.room(), 10)
            .await
            .unwrap()
            .is_empty(),
        "persisted and accepted in one commit"
    );
    let decided = store.history(&d.room(), Revision(2), 10).await.unwrap();
    assert_eq!(decided.len(), 1);
    assert_eq!(decided[0].event, Some(first.id));

    // Stored before (the checked way): the persisting commit is refused and writes nothing.
    let second = event(d.room(), 2, "stored before");
    assert_eq!(
        store.append_event(&second, AT).await.unwrap(),
        EventAppend::Inserted
    );
    let decision = d.decide(Input::EventAccepted(second.clone()));
    match d.commit_persisting(&*store, &decision, &second).await {
        Err(CommitError::EventStored { room, event }) => {
            assert_eq!((room, event), (d.room(), second.id));
        }
        other => panic!("expected the event stored already, got {other:?}"),
    }
    let stored = store.load(&d.room()).await.unwrap().unwrap();
    assert_eq!(stored.revision, d.revision, "nothing written");
    assert_eq!(stored.state, d.state);
    for op in decision.effects.iter().filter_map(|e| match e {
        Effect::ReserveAndCall(request) => Some(request.op),
        _ => None,
    }) {
        assert!(
            store.operation(op).await.unwrap().is_none(),
            "no operation created"
        );
    }
    assert_eq!(
        store.unaccepted_events(&d.room(), 10).await.unwrap(),
        vec![second.clone()],
        "the stored event waits to be accepted"
    );
    // Accepted the usual way, once.
    d.commit(&*store, &decision, "event_accepted")
        .await
        .unwrap();
    assert!(
        store
            .unaccepted_events(&d.room(), 10)
            .await
            .unwrap()
            .is_empty()
    );
}

/// T1: the events a Room persisted but never accepted are listed in the order they were
/// persisted (what a coordinator accepts on start); an accepted one leaves the list, and
/// other Rooms' events are never in it.
pub async fn t1_persisted_events_never_accepted_are_listed_in_order<S: Store>(store: Arc<S>) {
    let mut d = Driver::create(&*store, "unaccepted", 1_000_000).await;
    let other = Driver::create(&*store, "unaccepted-b", 1_000_000).await;
    let event = |n: u128, room: RoomId| Event {
        id: EventId::from_uuid(Uuid::from_u128(0x7200_0000 + n)),
        room,
        author: p("olive"),
        body: EventBody::OwnerMessage {
            text: format!("message {n}"),
        },
    };
    // Persisted out of id order, one millisecond apart.
    for (i, n) in [3_u128, 1, 2].into_iter().enumerate() {
        let at = Timestamp::from_millis(AT.as_millis() + i64::try_from(i).unwrap());
        store.append_event(&event(n, d.room()), at).await.unwrap();
    }
    store
        .append_event(&event(9, other.room()), AT)
        .await
        .unwrap();
    let ids = |events: Vec<Event>| events.into_iter().map(|e| e.id).collect::<Vec<_>>();
    let listed = ids(store.unaccepted_events(&d.room(), 10).await.unwrap());
    assert_eq!(
        listed,
        vec![
            event(3, d.room()).id,
            event(1, d.room()).id,
            event(2, d.room()).id
        ]
    );
    assert_eq!(
        ids(store.unaccepted_events(&d.room(), 2).await.unwrap()),
        listed[..2].to_vec()
    );
    let accepted = d.decide(Input::EventAccepted(event(1, d.room())));
    d.commit(&*store, &accepted, "event_accepted")
        .await
        .unwrap();
    assert_eq!(
        ids(store.unaccepted_events(&d.room(), 10).await.unwrap()),
        vec![event(3, d.room()).id, event(2, d.room()).id]
    );
    assert_eq!(
        ids(store.unaccepted_events(&other.room(), 10).await.unwrap()),
        vec![event(9, other.room()).id]
    );
}

/// Nothing crosses Rooms.
pub async fn rooms_do_not_see_each_other<S: Store>(store: Arc<S>) {
    let a = Driver::create(&*store, "room-a", 1_000_000).await;
    let b = Driver::create(&*store, "room-b", 2_000_000).await;
    assert!(
        store.create(&a.state, AT).await.is_err(),
        "a Room is created once"
    );
    let event = Event {
        id: EventId::from_uuid(Uuid::from_u128(9)),
        room: a.room(),
        author: p("olive"),
        body: EventBody::OwnerMessage {
            text: "mine".to_owned(),
        },
    };
    store.append_event(&event, AT).await.unwrap();
    assert_eq!(store.event(&b.room(), event.id).await.unwrap(), None);
    assert_eq!(store.load(&b.room()).await.unwrap().unwrap().state, b.state);
    assert_ne!(
        store.ledger(&a.room()).await.unwrap(),
        store.ledger(&b.room()).await.unwrap()
    );
    let unknown = RoomId::parse("nowhere").unwrap();
    assert!(store.load(&unknown).await.unwrap().is_none());
    let commit = Commit::state(&a.state, &a.state, AT, "x");
    assert!(matches!(
        store.commit(&unknown, Revision::FIRST, commit).await,
        Err(CommitError::UnknownRoom(_))
    ));
}

/// An operator input (its input id) is decided once per Room: a second commit deciding it
/// — decided again on the newer state, as a retried request is — writes nothing (no
/// revision, no ledger row) and names the input; the store says which revision decided it.
/// Another Room decides the same input id on its own.
pub async fn an_operator_input_is_decided_once_per_room<S: Store>(store: Arc<S>) {
    let mut d = Driver::create(&*store, "input-once", 1_000_000).await;
    let input = InputId::from_uuid(Uuid::from_u128(0x1d_0001));
    assert_eq!(store.input_decided(&d.room(), input).await.unwrap(), None);
    let raise = d.raise(500);
    let mut commit = Commit::decided(&d.room(), &d.state, &raise, AT, "raise_limit", None);
    commit.input_id = Some(input);
    let first = store.commit(&d.room(), d.revision, commit).await.unwrap();
    d.revision = first;
    d.state = raise.state.clone();
    assert_eq!(
        store.input_decided(&d.room(), input).await.unwrap(),
        Some(first)
    );
    let rows = store.ledger(&d.room()).await.unwrap();
    // The retry, decided again on the state the first one left.
    let again = d.raise(500);
    let mut commit = Commit::decided(&d.room(), &d.state, &again, AT, "raise_limit", None);
    commit.input_id = Some(input);
    match store.commit(&d.room(), d.revision, commit).await {
        Err(CommitError::AlreadyDecided { room, input: i }) => {
            assert_eq!((room, i), (d.room(), input));
        }
        other => panic!("expected already decided, got {other:?}"),
    }
    let stored = store.load(&d.room()).await.unwrap().unwrap();
    assert_eq!(stored.revision, first, "nothing was committed");
    assert_eq!(stored.state, raise.state);
    assert_eq!(
        store.ledger(&d.room()).await.unwrap(),
        rows,
        "no ledger row"
    );
    // Inputs without an id, and other ids, are decided as often as they come.
    let plain = d.raise(1);
    d.commit(&*store, &plain, "raise_limit").await.unwrap();
    let other_id = d.raise(1);
    let mut commit = Commit::decided(&d.room(), &d.state, &other_id, AT, "raise_limit", None);
    commit.input_id = Some(InputId::from_uuid(Uuid::from_u128(0x1d_0002)));
    d.revision = store.commit(&d.room(), d.revision, commit).await.unwrap();
    // Per Room: another Room decides the same id.
    let mut b = Driver::create(&*store, "input-once-b", 1_000_000).await;
    let theirs = b.raise(500);
    let mut commit = Commit::decided(&b.room(), &b.state, &theirs, AT, "raise_limit", None);
    commit.input_id = Some(input);
    let revision = store.commit(&b.room(), b.revision, commit).await.unwrap();
    assert_eq!(
        store.input_decided(&b.room(), input).await.unwrap(),
        Some(revision)
    );
    assert_eq!(
        store.input_decided(&d.room(), input).await.unwrap(),
        Some(first)
    );
}

/// The history rows read back after a revision, paged, in order: each commit's kind of
/// input, accepted event, operator input and decision log, as committed.
pub async fn history_lists_each_commits_decision_after_a_revision<S: Store>(store: Arc<S>) {
    let mut d = Driver::create(&*store, "history", 1_000_000).await;
    let message = d.owner_message("plan this");
    let event = message.event;
    d.commit(&*store, &message, "event_accepted").await.unwrap();
    let raise = d.raise(7);
    let input = InputId::from_uuid(Uuid::from_u128(0x415_0001));
    let mut commit = Commit::decided(&d.room(), &d.state, &raise, AT, "raise_limit", None);
    commit.input_id = Some(input);
    d.revision = store.commit(&d.room(), d.revision, commit).await.unwrap();
    d.state = raise.state.clone();
    let all = store.history(&d.room(), Revision(0), 100).await.unwrap();
    let kinds: Vec<(i64, &str)> = all
        .iter()
        .map(|h| (h.revision.0, h.input.as_str()))
        .collect();
    assert_eq!(
        kinds,
        vec![
            (1, "create"),
            (2, "change_membership"),
            (3, "event_accepted"),
            (4, "raise_limit")
        ]
    );
    assert_eq!(all[2].event, event);
    assert!(event.is_some());
    assert_eq!(all[2].log, message.log);
    assert_eq!((all[3].input_id, &all[3].log), (Some(input), &raise.log));
    assert!(!raise.log.is_empty(), "a raise logs its rule");
    assert_eq!(all[3].at, AT);
    assert_eq!(all[0].input_id, None);
    let page = store.history(&d.room(), Revision(2), 1).await.unwrap();
    assert_eq!(page, all[2..3].to_vec());
    assert!(
        store
            .history(&d.room(), Revision(4), 10)
            .await
            .unwrap()
            .is_empty()
    );
    let unknown = RoomId::parse("no-history").unwrap();
    assert!(
        store
            .history(&unknown, Revision(0), 10)
            .await
            .unwrap()
            .is_empty()
    );
}

/// T5: delivered notifications are read back per Room in the order they were marked
/// delivered (not the order they were stored), each once, after a position; an undelivered
/// one is known but not listed.
pub async fn t5_delivered_notifications_are_read_in_delivery_order<S: Store>(store: Arc<S>) {
    let mut d = Driver::create(&*store, "feed", 1_000_000).await;
    let mut other = Driver::create(&*store, "feed-b", 1_000_000).await;
    let note = |n: u128, text: &str| agentroom_domain::engine::Notification {
        id: NotificationId::from_uuid(Uuid::from_u128(0xfeed_0000 + n)),
        audience: agentroom_domain::engine::Audience::Operators,
        objective: None,
        text: text.to_owned(),
    };
    let raise = d.raise(1);
    let mut commit = Commit::decided(&d.room(), &d.state, &raise, AT, "raise_limit", None);
    commit.notifications = vec![note(1, "one"), note(2, "two"), note(3, "three")];
    d.revision = store.commit(&d.room(), d.revision, commit).await.unwrap();
    d.state = raise.state.clone();
    let theirs = other.raise(1);
    let mut commit = Commit::decided(
        &other.room(),
        &other.state,
        &theirs,
        AT,
        "raise_limit",
        None,
    );
    commit.notifications = vec![note(9, "theirs")];
    store
        .commit(&other.room(), other.revision, commit)
        .await
        .unwrap();
    assert!(store.delivered(&d.room(), 0, 10).await.unwrap().is_empty());
    assert_eq!(
        store
            .outbox_position(&d.room(), note(2, "").id)
            .await
            .unwrap(),
        Some(OutboxPosition::Undelivered)
    );
    for n in [2, 9, 1] {
        store.mark_delivered(note(n, "").id).await.unwrap();
    }
    store.mark_delivered(note(2, "").id).await.unwrap();
    let delivered = store.delivered(&d.room(), 0, 10).await.unwrap();
    let texts: Vec<&str> = delivered
        .iter()
        .map(|n| n.notification.text.as_str())
        .collect();
    assert_eq!(texts, vec!["two", "one"], "delivery order, once each");
    assert!(delivered[0].position > 0 && delivered[0].position < delivered[1].position);
    let second = delivered[1].position;
    assert_eq!(
        store
            .outbox_position(&d.room(), note(1, "").id)
            .await
            .unwrap(),
        Some(OutboxPosition::Delivered(second))
    );
    let after_first = store
        .delivered(&d.room(), delivered[0].position, 10)
        .await
        .unwrap();
    assert_eq!(after_first, delivered[1..].to_vec());
    assert_eq!(
        store.delivered(&d.room(), 0, 1).await.unwrap(),
        delivered[..1].to_vec()
    );
    // Delivered later, listed later.
    store.mark_delivered(note(3, "").id).await.unwrap();
    let later = store.delivered(&d.room(), second, 10).await.unwrap();
    assert_eq!(later.len(), 1);
    assert_eq!(later[0].notification, note(3, "three"));
    // Rooms do not see each other's notifications.
    assert_eq!(
        store
            .outbox_position(&d.room(), note(9, "").id)
            .await
            .unwrap(),
        None
    );
    let theirs = store.delivered(&other.room(), 0, 10).await.unwrap();
    assert_eq!(theirs.len(), 1);
    assert_eq!(theirs[0].notification.text, "theirs");
}

/// D3, D2: a graceful shutdown releases the leases of its unfinished calls. Only the current
/// generation releases, only an in-flight operation without a receipt; a released lease has
/// expired by the database clock, so recovery claims it at once (no waiting out the lease),
/// and the releasing holder's late heartbeat or receipt is fenced.
pub async fn d3_a_released_lease_is_fenced_on_its_generation_and_claimable_at_once<S: Store>(
    store: Arc<S>,
) {
    let mut d = Driver::create(&*store, "release", 1_000_000).await;
    let running = d.owner_message("slow");
    let op = reserved_op(&running);
    d.commit(&*store, &running, "event_accepted").await.unwrap();
    let done = d.owner_message("done");
    let receipted = reserved_op(&done);
    d.commit(&*store, &done, "event_accepted").await.unwrap();
    assert_eq!(
        store.record_receipt(receipted, 1, &answer()).await.unwrap(),
        ReceiptWrite::Recorded
    );
    let before = store.operation(op).await.unwrap().unwrap();
    assert_eq!((before.generation, before.lease_expired), (1, false));

    // A stale or future generation cannot release, and changes nothing.
    for stale in [0, 2] {
        assert!(!store.release_lease(op, stale).await.unwrap(), "{stale}");
    }
    assert_eq!(store.operation(op).await.unwrap().unwrap(), before);
    assert!(
        store
            .claim_expired(lease("b", 60_000), 10)
            .await
            .unwrap()
            .is_empty(),
        "a live lease is not claimed"
    );
    // A receipted operation has no lease to give up.
    assert!(!store.release_lease(receipted, 1).await.unwrap());
    let record = store.operation(receipted).await.unwrap().unwrap();
    assert_eq!(
        (record.status, record.generation),
        (OperationStatus::Receipted, 1)
    );

    // The holder releases: expired at once, the generation moved on.
    assert!(store.release_lease(op, 1).await.unwrap());
    let released = store.operation(op).await.unwrap().unwrap();
    assert_eq!(released.status, OperationStatus::InFlight);
    assert!(released.lease_expired, "{released:?}");
    assert_eq!(released.generation, 2);
    assert!(released.receipt.is_none());
    assert!(!store.release_lease(op, 1).await.unwrap(), "released once");
    assert_eq!(
        store
            .heartbeat(op, 1, Duration::from_secs(60))
            .await
            .unwrap(),
        Heartbeat::Fenced,
        "the releasing holder's late heartbeat cannot take the lease back"
    );
    assert_eq!(
        store.record_receipt(op, 1, &answer()).await.unwrap(),
        ReceiptWrite::Fenced
    );

    // Recovery claims it at once, long before the 60 s lease would have run out.
    let claimed = store.claim_expired(lease("b", 60_000), 10).await.unwrap();
    assert_eq!(claimed.len(), 1, "{claimed:?}");
    assert_eq!(claimed[0].record.op(), op);
    assert_eq!(claimed[0].generation, 3);
    assert_eq!(claimed[0].record.lease_owner.as_deref(), Some("b"));
    assert!(store.mark_uncertain(op, 3).await.unwrap());
    assert_eq!(
        store.operation(op).await.unwrap().unwrap().status,
        OperationStatus::Uncertain
    );
}

/// The store lists its Rooms by id in byte order, a page at a time, including a Room
/// created after the listing began (a host picks up new Rooms this way).
pub async fn rooms_are_listed_by_id_in_pages<S: Store>(store: Arc<S>) {
    assert!(store.rooms(None, 10).await.unwrap().is_empty());
    let ids = |names: &[&str]| -> Vec<RoomId> {
        names.iter().map(|n| RoomId::parse(n).unwrap()).collect()
    };
    for name in ["lab-b", "lab", "annex", "lab-a"] {
        Driver::create(&*store, name, 1_000_000).await;
    }
    assert_eq!(
        store.rooms(None, 10).await.unwrap(),
        ids(&["annex", "lab", "lab-a", "lab-b"])
    );
    let first = store.rooms(None, 2).await.unwrap();
    assert_eq!(first, ids(&["annex", "lab"]));
    let second = store.rooms(first.last(), 2).await.unwrap();
    assert_eq!(second, ids(&["lab-a", "lab-b"]));
    assert!(store.rooms(second.last(), 2).await.unwrap().is_empty());
    // A Room created since shows up on the next page from where the reader stopped.
    Driver::create(&*store, "lab-c", 1_000_000).await;
    assert_eq!(
        store.rooms(second.last(), 2).await.unwrap(),
        ids(&["lab-c"])
    );
    let unknown = RoomId::parse("aaa").unwrap();
    assert_eq!(
        store.rooms(Some(&unknown), 1).await.unwrap(),
        ids(&["annex"])
    );
    assert!(store.rooms(None, 0).await.unwrap().is_empty());
}

/// A closed objective's record as the engine made it (a completed objective of two
/// contributions, `engine::close_out`).
const RECORD: &str = include_str!("fixtures/objective-record.json");

/// The fixture's record under objective id `id` and owner message `origin`.
fn record(id: u128, origin: u128) -> ObjectiveRecord {
    let mut value: serde_json::Value = serde_json::from_str(RECORD).unwrap();
    value["objective"]["id"] = Uuid::from_u128(id).to_string().into();
    value["objective"]["origin"] = Uuid::from_u128(origin).to_string().into();
    serde_json::from_value(value).unwrap()
}

/// Issue 21: a commit that moves closed objectives out of the live state keeps their records
/// in the same transaction (a stale commit keeps none); they are read by id, in the order
/// they were kept, and by what they hold (an owner message, a contribution, content), each
/// Room its own.
pub async fn closed_objectives_records_are_kept_by_their_commit_and_found_by_key<S: Store>(
    store: Arc<S>,
) {
    let mut driver = Driver::create(&*store, "lab", 1_000_000).await;
    let room = driver.room();
    let first = record(0xA1, 0xE1);
    let second = record(0xA2, 0xE2);
    assert!(
        RecordKey::of(&first).len() > 4,
        "{:?}",
        RecordKey::of(&first)
    );
    // A stale commit keeps no record (D1).
    let mut stale = driver.raise(1);
    stale.archived = vec![first.clone()];
    let commit = Commit::decided(&room, &driver.state, &stale, AT, "raise_limit", None);
    let refused = store.commit(&room, Revision::FIRST, commit).await;
    assert!(
        matches!(refused, Err(CommitError::Conflict { .. })),
        "{refused:?}"
    );
    assert_eq!(
        store.objective_record(&room, first.id()).await.unwrap(),
        None
    );
    for kept in [&first, &second] {
        let mut decision = driver.raise(1);
        decision.archived = vec![kept.clone()];
        driver
            .commit(&*store, &decision, "raise_limit")
            .await
            .unwrap();
    }
    assert_eq!(
        store.objective_record(&room, first.id()).await.unwrap(),
        Some(first.clone())
    );
    let all = store.objective_records(&room, 0, 10).await.unwrap();
    assert_eq!(
        all.iter().map(|(_, r)| r.id()).collect::<Vec<_>>(),
        vec![first.id(), second.id()]
    );
    assert!(all[0].0 > 0 && all[0].0 < all[1].0, "positions increase");
    let page = store.objective_records(&room, all[0].0, 10).await.unwrap();
    assert_eq!(page, all[1..].to_vec());
    assert_eq!(
        store.objective_records(&room, 0, 1).await.unwrap(),
        all[..1].to_vec()
    );
    let by = |key: RecordKey| {
        let store = Arc::clone(&store);
        let room = room.clone();
        async move {
            store
                .records_by(&room, &key)
                .await
                .unwrap()
                .iter()
                .map(ObjectiveRecord::id)
                .collect::<Vec<_>>()
        }
    };
    let origin = second.objective.origin();
    assert_eq!(by(RecordKey::OwnerMessage(origin)).await, vec![second.id()]);
    // The fixture's contributions are in both.
    let contribution = first.contributions[0].id();
    assert_eq!(
        by(RecordKey::Contribution(contribution)).await,
        vec![first.id(), second.id()]
    );
    let digest = first.contributions[0].digests()[0].clone();
    assert_eq!(
        by(RecordKey::Content(digest)).await,
        vec![first.id(), second.id()]
    );
    assert!(
        by(RecordKey::OwnerMessage(EventId::from_uuid(
            Uuid::from_u128(0xE9)
        )))
        .await
        .is_empty()
    );
    // Another Room sees none of them.
    let other = Driver::create(&*store, "annex", 1_000_000).await.room();
    assert_eq!(
        store.objective_record(&other, first.id()).await.unwrap(),
        None
    );
    assert!(
        store
            .objective_records(&other, 0, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .records_by(&other, &RecordKey::OwnerMessage(origin))
            .await
            .unwrap()
            .is_empty()
    );
}

/// Issue 21: the content an input carries is kept by the commit of its decision, in the same
/// transaction (a stale commit keeps none); content the Room holds already is not written
/// again, and another Room does not see it.
pub async fn content_is_kept_by_the_commit_that_carries_it<S: Store>(store: Arc<S>) {
    let mut driver = Driver::create(&*store, "lab", 1_000_000).await;
    let room = driver.room();
    let body = NewContent::new("text/markdown", b"# Findings".to_vec());
    let outputs = NewContent::new("application/json", b"{\"papers\":3}".to_vec());
    let stale = driver.raise(1);
    let mut commit = Commit::decided(&room, &driver.state, &stale, AT, "raise_limit", None);
    commit.contents = vec![body.clone()];
    let refused = store.commit(&room, Revision::FIRST, commit).await;
    assert!(
        matches!(refused, Err(CommitError::Conflict { .. })),
        "{refused:?}"
    );
    assert_eq!(store.content(&room, body.digest()).await.unwrap(), None);
    for contents in [vec![body.clone(), outputs.clone()], vec![body.clone()]] {
        let decision = driver.raise(1);
        let mut commit = Commit::decided(&room, &driver.state, &decision, AT, "raise_limit", None);
        commit.contents = contents;
        driver.revision = store.commit(&room, driver.revision, commit).await.unwrap();
        driver.state = decision.state.clone();
    }
    for content in [&body, &outputs] {
        let stored = store
            .content(&room, content.digest())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(stored.bytes, content.bytes());
        assert_eq!(stored.media_type, content.media_type());
    }
    // Kept once: a put of the same bytes finds it there.
    let (_, put) = store
        .put_content(&room, "text/markdown", body.bytes(), AT)
        .await
        .unwrap();
    assert_eq!(put, crate::artifacts::Put::Present);
    let other = Driver::create(&*store, "annex", 1_000_000).await.room();
    assert_eq!(store.content(&other, body.digest()).await.unwrap(), None);
}

/// A fresh in-memory store (the suite's own check).
pub async fn memory() -> Arc<MemoryStore> {
    Arc::new(MemoryStore::new())
}

/// Issue 21 (group decisions), D1, T1, B1: decisions taken in sequence, each on the state the
/// one before leaves, commit together as consecutive revisions, each its own history row,
/// event and operations; every revision rebuilds from the rows written. A group with one
/// member refused (an event stored before, T1), at a stale revision (D1), or with none, writes
/// nothing.
pub async fn d1_a_group_commits_each_decision_as_its_own_revision_all_or_nothing<S: Store>(
    store: Arc<S>,
) {
    let mut d = Driver::create(&*store, "group-commit", 1_000_000).await;
    let room = d.room();
    let event = |n: u128, text: &str| Event {
        id: EventId::from_uuid(Uuid::from_u128(0x6700_0000 + n)),
        room: room.clone(),
        author: p("olive"),
        body: EventBody::OwnerMessage {
            text: text.to_owned(),
        },
    };
    let lease = lease("runner", 60_000);
    // Three owner messages, each decided on the state the one before leaves.
    let before = d.state.clone();
    let start = d.revision;
    let events: Vec<Event> = (1..=3).map(|n| event(n, &format!("message {n}"))).collect();
    let mut decisions = Vec::new();
    for e in &events {
        let decision = d.decide(Input::EventAccepted(e.clone()));
        d.state = decision.state.clone();
        decisions.push(decision);
    }
    let mut commits = Vec::new();
    let mut previous = &before;
    for (decision, e) in decisions.iter().zip(&events) {
        let mut commit = Commit::decided(
            &room,
            previous,
            decision,
            AT,
            "event_accepted",
            Some(&lease),
        );
        commit.new_event = Some(e);
        commits.push(commit);
        previous = &decision.state;
    }
    let revisions = store.commit_group(&room, start, commits).await.unwrap();
    assert_eq!(
        revisions,
        vec![
            start.next(),
            start.next().next(),
            start.next().next().next()
        ]
    );
    d.revision = revisions[2];
    let stored = store.load(&room).await.unwrap().unwrap();
    assert_eq!((stored.revision, &stored.state), (d.revision, &d.state));
    let decided = store.history(&room, start, 10).await.unwrap();
    assert_eq!(
        decided
            .iter()
            .map(|h| (h.revision, h.event))
            .collect::<Vec<_>>(),
        revisions
            .iter()
            .zip(&events)
            .map(|(r, e)| (*r, Some(e.id)))
            .collect::<Vec<_>>(),
        "one history row per decision, each accepting its event (T1)"
    );
    for (decision, e) in decisions.iter().zip(&events) {
        assert_eq!(store.event(&room, e.id).await.unwrap().as_ref(), Some(e));
        for effect in &decision.effects {
            if let Effect::ReserveAndCall(request) = effect {
                let record = store.operation(request.op).await.unwrap().unwrap();
                assert_eq!(record.lease_owner.as_deref(), Some("runner"), "B1");
            }
        }
    }
    assert!(store.unaccepted_events(&room, 10).await.unwrap().is_empty());
    // One more commit, so that even the group's last revision is rebuilt from rows (D1).
    let raise = d.raise(1_000);
    d.commit(&*store, &raise, "raise_limit").await.unwrap();
    for (revision, decision) in revisions.iter().zip(&decisions) {
        assert_eq!(
            store.state_at(&room, *revision).await.unwrap().as_ref(),
            Some(&decision.state),
            "revision {revision} rebuilds from history"
        );
    }

    // All or nothing: the second member persists an event stored before (T1).
    let at = d.revision;
    let kept = d.state.clone();
    let fourth = event(4, "message 4");
    let first = d.decide(Input::EventAccepted(fourth.clone()));
    d.state = first.state.clone();
    let stored_before = event(5, "stored before");
    store.append_event(&stored_before, AT).await.unwrap();
    let second = d.decide(Input::EventAccepted(stored_before.clone()));
    d.state = kept.clone();
    let mut one = Commit::decided(&room, &kept, &first, AT, "event_accepted", Some(&lease));
    one.new_event = Some(&fourth);
    let mut two = Commit::decided(
        &room,
        &first.state,
        &second,
        AT,
        "event_accepted",
        Some(&lease),
    );
    two.new_event = Some(&stored_before);
    match store.commit_group(&room, at, vec![one, two]).await {
        Err(CommitError::EventStored { event, .. }) => assert_eq!(event, stored_before.id),
        other => panic!("expected the second member refused, got {other:?}"),
    }
    let stored = store.load(&room).await.unwrap().unwrap();
    assert_eq!(
        (stored.revision, &stored.state),
        (at, &kept),
        "nothing written"
    );
    assert_eq!(store.event(&room, fourth.id).await.unwrap(), None);
    for effect in &first.effects {
        if let Effect::ReserveAndCall(request) = effect {
            assert!(store.operation(request.op).await.unwrap().is_none());
        }
    }
    assert_eq!(
        store.history(&room, at, 10).await.unwrap(),
        Vec::new(),
        "no history row"
    );

    // A stale group is a conflict (D1); an empty one is refused. Neither writes anything.
    let mut stale = Commit::decided(&room, &kept, &first, AT, "event_accepted", Some(&lease));
    stale.new_event = Some(&fourth);
    match store.commit_group(&room, start, vec![stale]).await {
        Err(CommitError::Conflict {
            expected, actual, ..
        }) => assert_eq!((expected, actual), (start, at)),
        other => panic!("expected a conflict, got {other:?}"),
    }
    assert!(matches!(
        store.commit_group(&room, at, Vec::new()).await,
        Err(CommitError::Store(_))
    ));
    let stored = store.load(&room).await.unwrap().unwrap();
    assert_eq!(
        (stored.revision, &stored.state),
        (at, &kept),
        "nothing written"
    );
}
