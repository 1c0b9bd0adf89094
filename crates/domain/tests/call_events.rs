//! D2, B3: what became of a call is one domain value, [`CallEvent`]; it becomes one input,
//! fits only the operation states it can follow (a second delivery finds it decided), and
//! settles the operation unless the call is uncertain. Reached only through `decide`.

mod common;

use agentroom_domain::engine::{
    CallEvent, CallFailure, CallResult, Charge, FailureKind, Proposal, ProposalKind,
    ReasonerResult, Reconciliation,
};
use agentroom_domain::state::OperationState;
use common::*;

fn answer(call: &agentroom_domain::engine::CallRequest) -> CallEvent {
    CallEvent::Returned {
        charge: Charge::Actual(micros(400)),
        result: CallResult::Reasoner(ReasonerResult::Proposal(Proposal {
            observed: call.observed,
            kind: ProposalKind::Answer {
                text: "forty-two".into(),
            },
        })),
    }
}

fn state_of(room: &Room, call: &agentroom_domain::engine::CallRequest) -> Option<OperationState> {
    room.state().operation(call.op).map(|o| o.state())
}

#[test]
fn d2_b3_a_returned_call_settles_once_and_a_second_delivery_no_longer_fits() {
    let mut room = Room::new();
    let call = reasoner_call(&room.say("what is six times seven?"));
    assert_eq!(state_of(&room, &call), Some(OperationState::InFlight));
    let event = answer(&call);
    assert!(event.fits(OperationState::InFlight));
    assert!(event.settles());
    assert_eq!(event.kind(), "call_returned");
    let decision = room.apply(event.clone().input(call.op));
    assert!(decision.settles(call.op), "{:#?}", decision.log);
    // Delivered again (a crash before it was marked applied): the Room settled it before.
    assert!(state_of(&room, &call).is_none_or(|s| !event.fits(s)));
}

#[test]
fn d2_an_uncertain_call_keeps_its_reservation_until_a_reconciliation_settles_it() {
    let mut room = Room::new();
    let call = reasoner_call(&room.say("what is six times seven?"));
    let uncertain = CallEvent::Uncertain { cause: None };
    assert!(!uncertain.settles(), "D2: the reservation is held");
    let decision = room.apply(uncertain.input(call.op));
    assert!(!decision.settles(call.op));
    assert_eq!(state_of(&room, &call), Some(OperationState::Uncertain));
    // Only a confirmation follows an uncertain call; its own outcomes no longer fit.
    assert!(!CallEvent::Uncertain { cause: None }.fits(OperationState::Uncertain));
    assert!(!not_sent().fits(OperationState::Uncertain));
    let confirmed = CallEvent::Reconciled(Reconciliation::ExecutedWithoutResult {
        charge: Charge::NoUsage,
    });
    assert!(confirmed.fits(OperationState::Uncertain));
    assert!(!confirmed.fits(OperationState::InFlight));
    assert_eq!(confirmed.kind(), "reconciled");
    let decision = room.apply(confirmed.input(call.op));
    assert!(decision.settles(call.op), "{:#?}", decision.log);
}

#[test]
fn b3_a_call_never_sent_is_settled_at_zero() {
    let mut room = Room::new();
    let call = reasoner_call(&room.say("what is six times seven?"));
    let before = room.state().ledger().balances();
    assert_eq!(not_sent().kind(), "call_failed");
    assert!(not_sent().fits(OperationState::CancelRequested));
    let decision = room.apply(not_sent().input(call.op));
    assert!(decision.settles(call.op));
    let after = room.state().ledger().balances();
    assert_eq!(after.spent, before.spent, "nothing charged");
}

/// A call its provider never received.
fn not_sent() -> CallEvent {
    CallEvent::NotSent(CallFailure::new(
        FailureKind::Unreachable,
        "connection refused",
    ))
}
