//! The pool conformance suite (B8): what every store that implements [`PoolStore`] beside
//! [`RoomStore`] must do. A Room's commit moves the pool it draws on in the same transaction,
//! or nothing is written; a pool's log replays to its ledger; concurrent Rooms never admit
//! more than the pool holds. Generated per store by [`pool_conformance!`](crate::pool_conformance).
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use agentroom_domain::engine::{Charge, Decision, Effect, Input};
use agentroom_domain::ids::{OperationId, PoolId, Timestamp};
use agentroom_domain::ledger::{BudgetLedger, LedgerEntry, LedgerError};
use agentroom_domain::money::UsdMicros;

use crate::conformance::{Driver, Store};
use crate::pools::{PoolChangeError, PoolStore};
use crate::rooms::CommitError;

/// What a store needs for this suite.
pub trait PooledStore: Store + PoolStore {}
impl<T: Store + PoolStore> PooledStore for T {}

/// Generates one `#[tokio::test]` per case; `$factory` is an async fn returning a fresh,
/// migrated `Arc<S>` where `S` implements [`PooledStore`].
#[macro_export]
macro_rules! pool_conformance {
    ($factory:path) => {
        $crate::pool_conformance!(@cases $factory;
            b8_a_pool_is_created_once_with_its_opening_as_its_first_row,
            b8_rooms_commits_move_their_pool_and_its_log_replays,
            b8_a_commit_the_pool_cannot_hold_writes_nothing,
            b8_a_pool_change_is_decided_under_the_pool_lock,
            b8_concurrent_rooms_never_admit_more_than_the_pool_holds,
        );
    };
    (@cases $factory:path; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $case() {
                let store = $factory().await;
                $crate::pool_conformance::$case(store).await;
            }
        )*
    };
}

const AT: Timestamp = Timestamp::from_millis(1_764_460_800_000);
/// The reasoner quote of the conformance driver's Rooms.
const QUOTE: i64 = 1_000;

fn pool_id(name: &str) -> PoolId {
    PoolId::parse(name).unwrap()
}

async fn create_pool<S: PooledStore>(store: &S, name: &str, limit: i64) -> PoolId {
    let id = pool_id(name);
    let ledger = BudgetLedger::open(UsdMicros::new(limit)).unwrap();
    store.create_pool(&id, &ledger, AT).await.unwrap();
    id
}

/// A Room `name` drawing on `pool`.
async fn drawing<S: PooledStore>(store: &S, name: &str, pool: &PoolId) -> Driver {
    let mut d = Driver::create(store, name, 1_000_000).await;
    let attach = d.decide(Input::AttachPool {
        pool: Some(pool.clone()),
    });
    d.commit(store, &attach, "attach_pool").await.unwrap();
    assert_eq!(d.state.pool(), Some(pool));
    d
}

async fn ledger_of<S: PooledStore>(store: &S, pool: &PoolId) -> BudgetLedger {
    store.load_pool(pool).await.unwrap().unwrap().ledger
}

fn reserved_op(decision: &Decision) -> Option<OperationId> {
    decision.effects.iter().find_map(|e| match e {
        Effect::ReserveAndCall(request) => Some(request.op),
        _ => None,
    })
}

/// B8: a pool is created once; its log starts with its opening and replays to it.
pub async fn b8_a_pool_is_created_once_with_its_opening_as_its_first_row<S: PooledStore>(
    store: Arc<S>,
) {
    let id = create_pool(&*store, "campaign", 5_000).await;
    let again = BudgetLedger::open(UsdMicros::new(9)).unwrap();
    match store.create_pool(&id, &again, AT).await {
        Err(crate::StoreError::PoolExists(p)) => assert_eq!(p, id),
        other => panic!("expected PoolExists, got {other:?}"),
    }
    let stored = store.load_pool(&id).await.unwrap().unwrap();
    assert_eq!(stored.revision, 1);
    assert_eq!(
        stored.ledger.balances().limit,
        UsdMicros::new(5_000),
        "unchanged"
    );
    let log = store.pool_log(&id).await.unwrap();
    assert_eq!(log.len(), 1);
    assert_eq!(log[0].seq, 1);
    assert_eq!(log[0].room, None);
    assert_eq!(
        log[0].entry,
        LedgerEntry::Opened {
            limit: UsdMicros::new(5_000)
        }
    );
    assert_eq!(store.pools().await.unwrap(), vec![id.clone()]);
    assert!(store.load_pool(&pool_id("other")).await.unwrap().is_none());
    assert!(store.pool_log(&pool_id("other")).await.unwrap().is_empty());
}

/// B8: two Rooms' reservations and charges move their pool in their own commits; the pool's
/// log replays to its ledger and names the Room of each row; the pool's spent is the sum of
/// the Rooms' charges.
pub async fn b8_rooms_commits_move_their_pool_and_its_log_replays<S: PooledStore>(store: Arc<S>) {
    let id = create_pool(&*store, "shared", 10 * QUOTE).await;
    let mut rooms = vec![
        drawing(&*store, "north", &id).await,
        drawing(&*store, "south", &id).await,
    ];
    for (n, d) in rooms.iter_mut().enumerate() {
        let view = ledger_of(&*store, &id).await;
        let decision = d.owner_message_drawing("plan the launch", Some(&view));
        let op = reserved_op(&decision).expect("admitted within the pool");
        d.commit(&*store, &decision, "event_accepted")
            .await
            .unwrap();
        let view = ledger_of(&*store, &id).await;
        let charge = 300 + 100 * i64::try_from(n).unwrap();
        let settled = d.decide_drawing(
            Input::CallSettled {
                op,
                charge: Charge::Actual(UsdMicros::new(charge)),
            },
            Some(&view),
        );
        d.commit(&*store, &settled, "call_settled").await.unwrap();
    }
    let pool = ledger_of(&*store, &id).await;
    let mut spent = 0;
    let mut reserved = 0;
    for d in &rooms {
        let own = d.state.ledger().balances();
        spent += own.spent.micros();
        reserved += own.reserved.micros();
    }
    assert_eq!(
        pool.balances().spent.micros(),
        spent,
        "the sum of the Rooms' charges"
    );
    assert_eq!(pool.balances().reserved.micros(), reserved);
    assert_eq!(spent, 300 + 400);
    let log = store.pool_log(&id).await.unwrap();
    let entries: Vec<_> = log.iter().map(|row| row.entry.clone()).collect();
    assert_eq!(
        BudgetLedger::replay(&entries).unwrap(),
        pool,
        "the log replays"
    );
    let seqs: Vec<i64> = log.iter().map(|row| row.seq).collect();
    assert_eq!(
        seqs,
        (1..=i64::try_from(log.len()).unwrap()).collect::<Vec<_>>()
    );
    for row in &log[1..] {
        let room = row.room.as_ref().expect("a Room's row names it");
        assert!(["north", "south"].contains(&room.as_str()), "{room}");
    }
}

/// B8: a Room whose decision read the pool before another Room took it commits nothing: the
/// Room's revision, state and ledger rows and the pool are as they were.
pub async fn b8_a_commit_the_pool_cannot_hold_writes_nothing<S: PooledStore>(store: Arc<S>) {
    let id = create_pool(&*store, "tight", QUOTE + QUOTE / 2).await;
    let mut a = drawing(&*store, "first", &id).await;
    let mut b = drawing(&*store, "second", &id).await;
    let stale = ledger_of(&*store, &id).await;
    let taken = a.owner_message_drawing("one", Some(&stale));
    a.commit(&*store, &taken, "event_accepted").await.unwrap();
    let pool_before = store.load_pool(&id).await.unwrap().unwrap();
    let log_before = store.pool_log(&id).await.unwrap();
    let room_before = store.load(&b.room()).await.unwrap().unwrap();
    let rows_before = store.ledger(&b.room()).await.unwrap();
    // B decided from the pool as it was before A's reservation: the engine admitted it.
    let late = b.owner_message_drawing("two", Some(&stale));
    assert!(reserved_op(&late).is_some());
    match b.commit(&*store, &late, "event_accepted").await {
        Err(CommitError::PoolRefused { room, pool, reason }) => {
            assert_eq!((room, pool), (b.room(), id.clone()));
            assert!(reason.contains("available"), "{reason}");
        }
        other => panic!("expected PoolRefused, got {other:?}"),
    }
    assert_eq!(store.load_pool(&id).await.unwrap().unwrap(), pool_before);
    assert_eq!(store.pool_log(&id).await.unwrap(), log_before);
    let room_after = store.load(&b.room()).await.unwrap().unwrap();
    assert_eq!(room_after.revision, room_before.revision);
    assert_eq!(room_after.state, room_before.state);
    assert_eq!(store.ledger(&b.room()).await.unwrap(), rows_before);
    // Decided again from the pool as it is, the engine refuses it by B8 and that commits.
    let fresh = ledger_of(&*store, &id).await;
    let refused = b.owner_message_drawing("two", Some(&fresh));
    assert!(reserved_op(&refused).is_none());
    assert!(refused.rejected_by(agentroom_domain::rules::Rule::B8));
    b.commit(&*store, &refused, "event_accepted").await.unwrap();
    // A Room whose pool is gone commits no reservation either.
    let mut orphan = drawing(&*store, "orphan", &id).await;
    let mut state = orphan.state.clone();
    let detached = orphan.decide(Input::AttachPool {
        pool: Some(pool_id("gone")),
    });
    state.clone_from(&detached.state);
    orphan
        .commit(&*store, &detached, "attach_pool")
        .await
        .unwrap();
    let view = BudgetLedger::open(UsdMicros::new(1_000_000)).unwrap();
    let decision = orphan.owner_message_drawing("three", Some(&view));
    assert!(reserved_op(&decision).is_some());
    match orphan.commit(&*store, &decision, "event_accepted").await {
        Err(CommitError::PoolRefused { reason, .. }) => {
            assert!(reason.contains("no pool gone"), "{reason}");
        }
        other => panic!("expected PoolRefused, got {other:?}"),
    }
    let revision = store.load(&orphan.room()).await.unwrap().unwrap().revision;
    assert_eq!(revision, orphan.revision);
    assert_eq!(state, orphan.state);
}

/// B4, B5, B8: the host's change of a pool is decided by its ledger on the pool as stored,
/// under the pool's lock: a refused change writes nothing, a raise beside Rooms committing
/// on the pool is never lost (nor are their reservations), and the log replays.
pub async fn b8_a_pool_change_is_decided_under_the_pool_lock<S: PooledStore + 'static>(
    store: Arc<S>,
) {
    let id = create_pool(&*store, "raise", 5 * QUOTE).await;
    let before = store.load_pool(&id).await.unwrap().unwrap();
    match store
        .change_pool(&id, &BudgetLedger::acknowledge_overrun, AT)
        .await
    {
        Err(PoolChangeError::Refused { pool, refusal }) => {
            assert_eq!(pool, id);
            assert_eq!(refusal, LedgerError::NoOverrun);
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_eq!(
        store.load_pool(&id).await.unwrap().unwrap(),
        before,
        "unchanged"
    );
    match store
        .change_pool(
            &pool_id("nowhere"),
            &|l: &mut BudgetLedger| l.raise_limit(UsdMicros::new(1)),
            AT,
        )
        .await
    {
        Err(PoolChangeError::UnknownPool(p)) => assert_eq!(p, pool_id("nowhere")),
        other => panic!("expected an unknown pool, got {other:?}"),
    }
    // Raises race Rooms reserving on the pool: every raise and every reservation counts.
    let mut d = drawing(&*store, "mover", &id).await;
    let raiser = {
        let store = Arc::clone(&store);
        let id = id.clone();
        tokio::spawn(async move {
            for _ in 0..10 {
                store
                    .change_pool(
                        &id,
                        &|l: &mut BudgetLedger| l.raise_limit(UsdMicros::new(QUOTE)),
                        AT,
                    )
                    .await
                    .unwrap();
            }
        })
    };
    let mut admitted = 0;
    for n in 0..5 {
        loop {
            let view = ledger_of(&*store, &id).await;
            let decision = d.owner_message_drawing(&format!("go {n}"), Some(&view));
            assert!(
                reserved_op(&decision).is_some(),
                "the pool holds five from the start"
            );
            match d.commit(&*store, &decision, "event_accepted").await {
                Ok(_) => {
                    admitted += 1;
                    break;
                }
                Err(CommitError::PoolRefused { .. }) => {}
                Err(other) => panic!("{other}"),
            }
        }
    }
    raiser.await.unwrap();
    let pool = store.load_pool(&id).await.unwrap().unwrap();
    let b = pool.ledger.balances();
    assert_eq!(
        b.limit,
        UsdMicros::new(15 * QUOTE),
        "every raise counted (B4)"
    );
    assert_eq!(
        b.reserved,
        UsdMicros::new(admitted * QUOTE),
        "every reservation held"
    );
    assert_eq!(b.reserved, d.state.ledger().balances().reserved);
    let log = store.pool_log(&id).await.unwrap();
    let entries: Vec<_> = log.iter().map(|row| row.entry.clone()).collect();
    assert_eq!(
        BudgetLedger::replay(&entries).unwrap(),
        pool.ledger,
        "the log replays"
    );
    let raises = log
        .iter()
        .filter(|row| matches!(row.entry, LedgerEntry::LimitRaised { .. }))
        .count();
    assert_eq!(raises, 10);
    assert!(
        log.iter().filter(|row| row.room.is_none()).count() == 11,
        "the host's rows name no Room"
    );
}

/// B7, B8: four Rooms reserve concurrently against one pool that holds five calls, each
/// reloading the pool when its commit is refused, until the engine refuses by B8: exactly
/// five are admitted, and the pool holds what the Rooms hold.
pub async fn b8_concurrent_rooms_never_admit_more_than_the_pool_holds<S: PooledStore + 'static>(
    store: Arc<S>,
) {
    const HOLDS: i64 = 5;
    let id = create_pool(&*store, "race", HOLDS * QUOTE).await;
    let mut tasks = Vec::new();
    for name in ["r1", "r2", "r3", "r4"] {
        let store = Arc::clone(&store);
        let id = id.clone();
        let d = drawing(&*store, name, &id).await;
        tasks.push(tokio::spawn(async move {
            let mut d = d;
            let mut admitted = 0_i64;
            for n in 0..100 {
                let view = ledger_of(&*store, &id).await;
                let decision = d.owner_message_drawing(&format!("message {n}"), Some(&view));
                let reserves = reserved_op(&decision).is_some();
                match d.commit(&*store, &decision, "event_accepted").await {
                    Ok(_) if reserves => admitted += 1,
                    Ok(_) => return (d, admitted),
                    Err(CommitError::PoolRefused { .. }) => {}
                    Err(CommitError::Conflict { .. }) => {
                        let stored = store.load(&d.room()).await.unwrap().unwrap();
                        d.state = stored.state;
                        d.revision = stored.revision;
                    }
                    Err(other) => panic!("{other}"),
                }
            }
            panic!("room {} never saw the pool refuse", d.room());
        }));
    }
    let mut admitted = 0;
    let mut held = 0;
    for task in tasks {
        let (d, n) = task.await.unwrap();
        admitted += n;
        let stored = store.load(&d.room()).await.unwrap().unwrap();
        held += stored.state.ledger().balances().reserved.micros();
        assert_eq!(stored.revision, d.revision);
    }
    let pool = ledger_of(&*store, &id).await;
    assert_eq!(admitted, HOLDS, "exactly what the pool holds was admitted");
    assert_eq!(pool.balances().reserved.micros(), held);
    assert_eq!(pool.balances().reserved.micros(), HOLDS * QUOTE);
    assert_eq!(
        pool.balances().available,
        UsdMicros::ZERO,
        "0 micros of overspend"
    );
    let log = store.pool_log(&id).await.unwrap();
    let entries: Vec<_> = log.iter().map(|row| row.entry.clone()).collect();
    assert_eq!(BudgetLedger::replay(&entries).unwrap(), pool);
}

/// The in-memory fake, for checking this suite itself.
pub async fn memory() -> Arc<crate::memory::MemoryStore> {
    Arc::new(crate::memory::MemoryStore::new())
}
