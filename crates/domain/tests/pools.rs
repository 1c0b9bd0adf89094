//! B8 through the engine: a Room that draws on a pool admits a reservation only when the
//! pool can hold it too, is attached and detached only without open calls, and is told when
//! its pool changes. The simulation moves the pool as a store does (`pool::follow`).
#![allow(clippy::unwrap_used)]

mod common;

use agentroom_domain::engine::{Charge, Input};
use agentroom_domain::ids::PoolId;
use agentroom_domain::ledger::BudgetLedger;
use agentroom_domain::rules::Rule;
use common::*;

fn pool_id() -> PoolId {
    PoolId::parse("acme").unwrap()
}

fn pool(limit: i64) -> BudgetLedger {
    let mut ledger = BudgetLedger::open(micros(limit)).unwrap();
    ledger.take_journal();
    ledger
}

fn attached(room_limit: i64, pool_limit: i64) -> Room {
    let mut room = Room::with_limit(room_limit);
    room.sim.pool_ledger(pool(pool_limit));
    let d = room.apply(Input::AttachPool {
        pool: Some(pool_id()),
    });
    assert!(accepted_by(&d, Rule::B8), "{}", timeline(&d.log));
    assert_eq!(room.state().pool(), Some(&pool_id()));
    room
}

#[test]
fn b8_a_reservation_the_pool_cannot_hold_is_refused_though_the_room_could() {
    let mut room = attached(1_000_000, REASONER - 1);
    let d = room.say("Write the launch plan");
    assert_rejected(&d, Rule::B8);
    assert!(calls(&d).is_empty(), "no reservation, no call");
    assert!(
        notifications(&d).iter().any(|n| n.contains("pool acme")),
        "operators are told: {:?}",
        notifications(&d)
    );
    let balances = room.state().ledger().balances();
    assert_eq!(balances.reserved, micros(0), "the Room holds nothing");
    assert_eq!(room.sim.pool().unwrap().balances().reserved, micros(0));
}

#[test]
fn b8_the_pool_holds_and_charges_what_the_room_does() {
    let mut room = attached(1_000_000, 10 * REASONER);
    let d = room.say("Write the launch plan");
    let call = reasoner_call(&d);
    let pool = room.sim.pool().unwrap().balances();
    assert_eq!(pool.reserved, micros(REASONER), "held at the pool too");
    let d = room.apply(Input::CallSettled {
        op: call.op,
        charge: Charge::Actual(micros(400)),
    });
    assert!(
        d.ledger
            .iter()
            .any(|e| matches!(e, agentroom_domain::ledger::LedgerEntry::Settled { .. }))
    );
    let pool = room.sim.pool().unwrap().balances();
    let own = room.state().ledger().balances();
    assert_eq!(pool.spent, micros(400));
    assert_eq!(
        (own.reserved, own.spent),
        (pool.reserved, pool.spent),
        "the pool holds and charges what the Room does"
    );
    let log = [
        vec![agentroom_domain::ledger::LedgerEntry::Opened {
            limit: micros(10 * REASONER),
        }],
        room.sim.pool().unwrap().journal().to_vec(),
    ]
    .concat();
    assert_eq!(
        &BudgetLedger::replay(&log).unwrap(),
        room.sim.pool().unwrap(),
        "the pool's log replays to its balances"
    );
}

#[test]
fn b8_a_pool_that_could_not_be_read_admits_nothing() {
    let mut room = Room::new();
    room.sim.pool_ledger(pool(1_000_000));
    room.apply(Input::AttachPool {
        pool: Some(pool_id()),
    });
    // A host that did not read the pool (a store error, a pool dropped by a down migration).
    let mut bare = Room::new();
    let state = room.state().clone();
    bare.sim = agentroom_domain::sim::Simulation::new(
        state,
        catalog(),
        agentroom_domain::ids::Timestamp::from_millis(1_800_000_000_000),
    );
    let d = bare.say("Write the launch plan");
    assert_rejected(&d, Rule::B8);
    assert!(calls(&d).is_empty());
}

#[test]
fn b8_the_pool_changes_only_while_no_call_is_open() {
    let mut room = attached(1_000_000, 1_000_000);
    let d = room.say("Write the launch plan");
    let call = reasoner_call(&d);
    let d = room.apply(Input::AttachPool { pool: None });
    assert_rejected(&d, Rule::B8);
    assert_eq!(room.state().pool(), Some(&pool_id()), "unchanged");
    assert!(room.state().operation(call.op).is_some());
    // A Room without open calls changes its pool.
    let mut idle = attached(1_000_000, 1_000_000);
    let d = idle.apply(Input::AttachPool { pool: None });
    assert!(accepted_by(&d, Rule::B8), "{}", timeline(&d.log));
    assert_eq!(idle.state().pool(), None);
    let d = idle.apply(Input::AttachPool { pool: None });
    assert_rejected(&d, Rule::B8);
}

#[test]
fn b8_b4_work_waiting_on_the_pool_goes_ahead_when_the_pool_changes() {
    let mut room = attached(1_000_000, REASONER - 1);
    let d = room.say("Write the launch plan");
    assert_rejected(&d, Rule::B8);
    // The host's administrator raises the pool (the store's change), then tells the Room.
    let mut raised = room.sim.pool().unwrap().clone();
    raised.raise_limit(micros(REASONER)).unwrap();
    room.sim.pool_ledger(raised);
    let d = room.apply(Input::PoolChanged);
    assert_eq!(calls(&d).len(), 1, "{}", timeline(&d.log));
}

/// B8: the pool a decision checks a reservation against is the pool as the store will have it
/// at that entry: a settlement earlier in the same decision frees it. Here the plan's charge
/// (half the reasoner's reservation) is settled and the first task dispatched in one
/// decision; the pool could not hold the task beside the reasoner's whole reservation, but it
/// holds it once that reservation is settled.
#[test]
fn b8_a_settlement_frees_the_pool_for_the_reservations_of_the_same_decision() {
    let limit = REASONER / 2 + SPECIALIST + 100;
    assert!(
        limit < REASONER + SPECIALIST,
        "the task fits only after the settlement"
    );
    let mut room = attached(1_000_000, limit);
    let d = room.say("Write the launch plan");
    let call = reasoner_call(&d);
    let d = room.plan(&call, two_step_plan());
    assert_eq!(
        specialist_call(&d).reservation,
        micros(SPECIALIST),
        "{}",
        timeline(&d.log)
    );
    assert!(!d.rejected_by(Rule::B8), "{}", timeline(&d.log));
    let pool = room.sim.pool().unwrap().balances();
    assert_eq!(
        (pool.spent, pool.reserved),
        (micros(REASONER / 2), micros(SPECIALIST))
    );
}

/// B8: changing the pool dispatches nothing (the host's administrator decides it from a
/// process that runs no agents); waiting work goes ahead at a host's next `PoolChanged`.
#[test]
fn b8_changing_the_pool_dispatches_nothing_until_the_room_is_told() {
    let mut room = attached(1_000_000, REASONER - 1);
    let d = room.say("Write the launch plan");
    assert_rejected(&d, Rule::B8);
    assert!(room.state().operations().is_empty());
    let d = room.apply(Input::AttachPool { pool: None });
    assert!(accepted_by(&d, Rule::B8), "{}", timeline(&d.log));
    assert!(
        calls(&d).is_empty(),
        "nothing dispatched: {}",
        timeline(&d.log)
    );
    let d = room.apply(Input::PoolChanged);
    assert_eq!(calls(&d).len(), 1, "{}", timeline(&d.log));
}
