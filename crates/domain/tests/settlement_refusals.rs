//! Issue 17: a settlement the ledger cannot take closes the loop. A call reporting usage above
//! `UsdMicros::MAX_CHARGE` (or more than the ledger's balances hold) is decided once: its
//! operation closes with its whole reservation charged (B3), an overrun stops admissions for
//! an operator (B5), a contribution is held for explicit readmission (D4) and a plan or review
//! is given back; the same receipt delivered again changes nothing. Before, the refusal was
//! logged, the operation stayed open with its reservation, the result was applied anyway, and
//! every recovery pass redelivered the receipt, growing the Room's history without an input.

mod common;

use agentroom_domain::engine::{
    CallRequest, CallResult, Charge, Input, InputError, LateDecision, Proposal, ProposalKind,
    ReasonerResult, SpecialistResult,
};
use agentroom_domain::ledger::{BudgetLedger, LedgerEntry, Overrun};
use agentroom_domain::money::UsdMicros;
use agentroom_domain::objective::ObjectiveStatus;
use agentroom_domain::plan::TaskState;
use agentroom_domain::review::{Artifact, ContributionDraft};
use agentroom_domain::rules::Rule;
use agentroom_domain::sim::SimError;
use common::*;

/// A contribution from the specialist of `call`, reporting `charge`.
fn contribution(room: &mut Room, call: &CallRequest, charge: Charge) -> Input {
    Input::CallReturned {
        op: call.op,
        charge,
        result: CallResult::Specialist(SpecialistResult::Contribution(ContributionDraft {
            id: room.next_contribution_id(),
            artifacts: vec![Artifact {
                name: "body".into(),
                content: "findings".into(),
            }],
            sources: Vec::new(),
            body: None,
            outputs: serde_json::Map::new(),
        })),
    }
}

#[test]
fn b3_b5_d4_a_usage_the_ledger_cannot_take_is_decided_once_and_the_contribution_held() {
    let mut room = Room::new();
    let gather = specialist_call(&room.start_objective());
    let before = room.state().ledger().balances();
    let input = contribution(&mut room, &gather, Charge::Actual(UsdMicros::new(i64::MAX)));
    let d = room.apply(input.clone());

    // B3: closed, its whole reservation charged, nothing left held.
    assert!(d.settles(gather.op), "the operation closes: {:#?}", d.log);
    assert!(room.state().operation(gather.op).is_none());
    let after = room.state().ledger().balances();
    assert_eq!(
        after.spent.micros(),
        before.spent.micros() + gather.reservation.micros()
    );
    assert_eq!(
        after.reserved.micros(),
        before.reserved.micros() - gather.reservation.micros()
    );
    assert_eq!(
        d.ledger,
        vec![LedgerEntry::SettlementRefused {
            op: gather.op,
            reserved: gather.reservation,
            reported: UsdMicros::new(i64::MAX),
        }]
    );
    // B5: admissions stop until an operator acts, and operators are told.
    assert!(matches!(
        room.state().ledger().overrun(),
        Some(Overrun::ChargeRefused { op, .. }) if op == gather.op
    ));
    assert_rejected(&d, Rule::B5);
    assert!(
        notifications(&d)
            .iter()
            .any(|n| n.contains("cannot take") && n.contains(&gather.op.to_string())),
        "{:?}",
        notifications(&d)
    );
    // D4: the contribution is recorded and held, not used.
    assert!(calls(&d).is_empty(), "no call while admissions are stopped");
    assert!(room.state().held_results().contains_key(&gather.op));
    let task = &room.objective().current_plan().unwrap().tasks()[0];
    assert_eq!(
        *task.state(),
        TaskState::HeldForReadmission { op: gather.op }
    );

    // The same receipt again (a recovery pass) is refused and changes nothing.
    let state = room.state().clone();
    let err = room.sim_apply(input).unwrap_err();
    assert_eq!(err, SimError::Input(InputError::NotOpen(gather.op)));
    assert_eq!(room.state(), &state, "no history grows from a redelivery");

    // The replayed log rebuilds the same ledger (D1).
    let replayed = BudgetLedger::replay(room.sim.ledger()).unwrap();
    assert_eq!(&replayed, room.state().ledger());

    // An operator raises the limit; an owner readmits the held result; the work goes on.
    room.apply(Input::RaiseLimit {
        by: p("oscar"),
        amount: micros(50_000),
    });
    assert!(room.state().ledger().overrun().is_none());
    let d = room.late("olive", &gather, LateDecision::Readmit);
    let write = specialist_call(&d);
    assert_ne!(write.op, gather.op);
}

#[test]
fn b5_a_plan_whose_settlement_was_refused_is_given_back_and_consumes_no_interpretation() {
    let mut room = Room::new();
    let said = room.say("Summarize the state of the art");
    let call = reasoner_call(&said);
    let d = room.apply(Input::CallReturned {
        op: call.op,
        charge: Charge::Actual(UsdMicros::new(UsdMicros::MAX_CHARGE.micros() + 1)),
        result: CallResult::Reasoner(ReasonerResult::Proposal(Proposal {
            observed: call.observed,
            kind: ProposalKind::Plan(two_step_plan()),
        })),
    });
    assert!(d.settles(call.op));
    assert!(
        room.state().objectives().is_empty(),
        "the plan is not used as it is"
    );
    assert!(calls(&d).is_empty(), "B5: no call while admissions stop");
    assert!(
        d.log
            .iter()
            .any(|l| l.message.contains("largest charge a call may report")),
        "{:#?}",
        d.log
    );
    let (_, pending) = room.state().intake().iter().next().unwrap();
    assert_eq!(pending.attempts(), 0, "O11: no interpretation consumed");
    // Acknowledged by an operator, the message is interpreted again.
    let d = room.apply(Input::AcknowledgeOverrun { by: p("oscar") });
    let again = reasoner_call(&d);
    assert_ne!(again.op, call.op);
}

#[test]
fn b5_usage_above_the_reservation_but_representable_is_an_overrun_charged_as_reported() {
    let mut room = Room::new();
    let gather = specialist_call(&room.start_objective());
    let before = room.state().ledger().balances().spent;
    let over = gather.reservation.micros() + 7;
    let input = contribution(&mut room, &gather, Charge::Actual(micros(over)));
    let d = room.apply(input);
    assert_eq!(
        room.state().ledger().balances().spent.micros(),
        before.micros() + over
    );
    assert!(matches!(
        room.state().ledger().overrun(),
        Some(Overrun::ActualAboveReservation { .. })
    ));
    assert_rejected(&d, Rule::B5);
    // The result itself is used: the task completed.
    assert!(matches!(
        room.objective().current_plan().unwrap().tasks()[0].state(),
        TaskState::Completed { .. }
    ));
    assert_eq!(room.objective().status(), ObjectiveStatus::Running);
}
