//! Issue 16: a provider's outage or refusal is not the work's failure. A call that never ran
//! is settled at zero (B3) and consumes no interpretation (O11) and no replan (O8); its work is
//! open again, and its objective stops for attention until a person resumes it (D3), or the
//! pending owner message waits until it is retried. A call that waits for its provider, or is
//! uncertain, says why in the decision log and the Room's state. A call the sink refused (T3)
//! fails like any call without a result.

mod common;

use agentroom_domain::engine::{
    CallEvent, CallFailure, ControlAction, FailureKind, Input, InputError, Verdict as LogVerdict,
};
use agentroom_domain::objective::ObjectiveStatus;
use agentroom_domain::plan::TaskState;
use agentroom_domain::rules::Rule;
use agentroom_domain::state::OperationState;
use common::*;

fn failed(kind: FailureKind, cause: &str) -> CallEvent {
    CallEvent::NotSent(CallFailure::new(kind, cause))
}

fn logged(d: &agentroom_domain::engine::Decision, needle: &str) -> bool {
    d.log.iter().any(|l| l.message.contains(needle))
}

#[test]
fn o11_a_reasoner_call_that_never_reached_its_provider_consumes_no_interpretation() {
    let mut room = Room::new();
    let said = room.say("Summarize the state of the art");
    let call = reasoner_call(&said);
    let spent = room.state().ledger().balances().spent;
    let d = room.apply(
        failed(
            FailureKind::Unreachable,
            "connection refused (gave up after 9 attempts over 900s)",
        )
        .input(call.op),
    );
    assert!(d.settles(call.op), "B3: settled");
    assert_eq!(room.state().ledger().balances().spent, spent, "B3: zero");
    assert!(calls(&d).is_empty(), "nothing is issued until retried");
    let (event, pending) = room
        .state()
        .intake()
        .iter()
        .next()
        .expect("O11: the message stays pending");
    let event = *event;
    assert_eq!(pending.attempts(), 0, "O11: no interpretation consumed");
    assert!(pending.held().unwrap().contains("connection refused"));
    assert!(logged(&d, "connection refused"), "{:#?}", d.log);
    assert!(
        notifications(&d)
            .iter()
            .any(|n| n.contains(&event.to_string()) && n.contains("Summarize the state")),
        "the notification names the message: {:?}",
        notifications(&d)
    );
    // Retrying it issues the interpretation again, as its first attempt.
    let d = room.apply(Input::RetryMessage {
        by: p("olive"),
        event,
    });
    let again = reasoner_call(&d);
    assert!(
        matches!(
            &again.brief,
            agentroom_domain::engine::CallBrief::Interpret { attempt: 1, .. }
        ),
        "{:?}",
        again.brief
    );
    assert_eq!(
        room.state().intake().get(&event).and_then(|i| i.held()),
        None
    );
}

#[test]
fn d3_only_owners_and_operators_retry_a_held_message_and_only_a_held_one() {
    let mut room = Room::new();
    let call = reasoner_call(&room.say("Summarize the state of the art"));
    let event = *room.state().intake().keys().next().unwrap();
    // Not held yet: refused, nothing issued.
    let d = room.apply(Input::RetryMessage {
        by: p("olive"),
        event,
    });
    assert_rejected(&d, Rule::D3);
    assert!(calls(&d).is_empty());
    room.apply(failed(FailureKind::Refused, "401 from the endpoint: bad key").input(call.op));
    let d = room.apply(Input::RetryMessage {
        by: p("sam"),
        event,
    });
    assert!(calls(&d).is_empty(), "a specialist may not retry it");
    assert!(room.state().intake()[&event].held().is_some());
    let unknown = room.next_event_id();
    let err = room
        .sim_apply(Input::RetryMessage {
            by: p("olive"),
            event: unknown,
        })
        .unwrap_err();
    assert_eq!(
        err,
        agentroom_domain::sim::SimError::Input(InputError::NotPending(unknown))
    );
}

#[test]
fn o8_a_specialist_call_that_never_ran_stops_the_objective_resumably_and_counts_no_replan() {
    let mut room = Room::new();
    let d = room.start_objective();
    let gather = specialist_call(&d);
    let counters = room.objective().counters();
    let d = room.apply(
        failed(
            FailureKind::Unreachable,
            "502 Bad Gateway never came: connection refused",
        )
        .input(gather.op),
    );
    assert_eq!(
        room.objective().status(),
        ObjectiveStatus::StoppedForAttention
    );
    assert_eq!(stopped_by(&d), Some(Rule::D3));
    assert_eq!(
        room.objective().counters(),
        counters,
        "O8, R4: nothing counted"
    );
    let task = &room.objective().current_plan().unwrap().tasks()[0];
    assert_eq!(task.state(), &TaskState::Pending, "the work is open again");
    assert!(logged(&d, "connection refused"), "{:#?}", d.log);
    assert!(
        notifications(&d)
            .iter()
            .any(|n| n.contains("never reached its provider") && n.contains("resume")),
        "{:?}",
        notifications(&d)
    );
    // Resumed once the provider is back: the task is dispatched again.
    let d = room.control("olive", ControlAction::Resume);
    assert_eq!(room.objective().status(), ObjectiveStatus::Running);
    assert_eq!(calls(&d).len(), 1, "{:#?}", d.log);
}

#[test]
fn d3_a_stop_for_a_provider_stays_resumable_through_a_pause_and_an_o8_stop_is_not() {
    let mut room = Room::new();
    let d = room.start_objective();
    let gather = specialist_call(&d);
    room.apply(failed(FailureKind::Refused, "400: model `x` does not exist").input(gather.op));
    room.control("olive", ControlAction::Pause);
    room.control("olive", ControlAction::Resume);
    assert_eq!(room.objective().status(), ObjectiveStatus::Running);

    // An O8 stop is not resumed by a control: it needs a person's new act.
    let mut room = Room::new();
    let d = room.start_objective();
    let gather = specialist_call(&d);
    let mut d = room.fail(&gather);
    for _ in 0..5 {
        if room.objective().status() == ObjectiveStatus::StoppedForAttention {
            break;
        }
        let call = reasoner_call(&d);
        d = room.plan(&call, two_step_plan());
        if let Some(next) = calls_of(&d, agentroom_domain::state::CallRole::Specialist).first() {
            d = room.fail(next);
        }
    }
    assert_eq!(
        room.objective().status(),
        ObjectiveStatus::StoppedForAttention
    );
    let d = room.control("olive", ControlAction::Resume);
    assert_rejected(&d, Rule::D3);
    assert_eq!(
        room.objective().status(),
        ObjectiveStatus::StoppedForAttention
    );
}

#[test]
fn r2_a_review_call_the_provider_refused_counts_no_failed_review() {
    let mut room = Room::new();
    let d = room.start_objective();
    let gather = specialist_call(&d);
    let d = room.contribute(&gather, "facts [s1]");
    let write = specialist_call(&d);
    let d = room.contribute(&write, "the report");
    let review = review_call(&d);
    let d = room.apply(
        failed(
            FailureKind::Refused,
            "the Room's quotes are older than prices.toml",
        )
        .input(review.op),
    );
    assert_eq!(room.objective().counters().failed_reviews, 0);
    assert_eq!(
        room.objective().status(),
        ObjectiveStatus::StoppedForAttention
    );
    assert!(logged(&d, "quotes are older"), "{:#?}", d.log);
    let d = room.control("olive", ControlAction::Resume);
    assert_eq!(
        review_call(&d).role,
        agentroom_domain::state::CallRole::Reviewer
    );
}

#[test]
fn t3_a_call_refused_at_the_sink_fails_like_a_call_without_a_result() {
    let mut room = Room::new();
    let d = room.start_objective();
    let gather = specialist_call(&d);
    let d = room.apply(
        failed(
            FailureKind::Unauthorized,
            "T3: sam holds no role Specialist in the room now",
        )
        .input(gather.op),
    );
    assert_rejected(&d, Rule::T3);
    assert_ne!(
        room.objective().status(),
        ObjectiveStatus::StoppedForAttention
    );
    assert!(logged(&d, "holds no role"), "{:#?}", d.log);
}

#[test]
fn d2_a_call_waiting_for_its_provider_says_why_once_and_its_outcome_ends_the_wait() {
    let mut room = Room::new();
    let d = room.start_objective();
    let gather = specialist_call(&d);
    let d = room.apply(
        CallEvent::Waiting {
            cause: "connection refused".to_owned(),
        }
        .input(gather.op),
    );
    let operation = room.state().operation(gather.op).unwrap();
    assert!(operation.waiting_for_provider());
    assert_eq!(operation.cause().unwrap().cause, "connection refused");
    assert!(
        d.log.iter().any(|l| l.verdict == LogVerdict::Accepted
            && l.message
                .contains("waiting for the provider: connection refused")),
        "{:#?}",
        d.log
    );
    assert!(!d.settles(gather.op), "the reservation stays held");
    assert!(notifications(&d).iter().any(|n| n.contains("waiting")));
    // Recorded once.
    let again = room.sim_apply(
        CallEvent::Waiting {
            cause: "connection refused".to_owned(),
        }
        .input(gather.op),
    );
    assert!(again.is_err());
    // The provider came back: the result settles it as usual.
    let d = room.contribute(&gather, "facts [s1]");
    assert!(d.settles(gather.op));
}

#[test]
fn d2_an_uncertain_call_records_why() {
    let mut room = Room::new();
    let d = room.start_objective();
    let gather = specialist_call(&d);
    let d = room.apply(
        CallEvent::Uncertain {
            cause: Some("503 Service Unavailable from the endpoint".to_owned()),
        }
        .input(gather.op),
    );
    let operation = room.state().operation(gather.op).unwrap();
    assert_eq!(operation.state(), OperationState::Uncertain);
    assert!(operation.cause().unwrap().cause.contains("503"));
    assert!(
        notifications(&d)
            .iter()
            .any(|n| n.contains("503") && n.contains("operations resolve")),
        "{:?}",
        notifications(&d)
    );
}

#[test]
fn o11_the_reasoner_calls_that_interpreted_a_message_are_booked_to_the_objective_it_becomes() {
    let mut room = Room::new();
    let first = reasoner_call(&room.say("Summarize the state of the art"));
    let d = room.format_error(&first);
    let second = reasoner_call(&d);
    room.plan(&second, two_step_plan());
    assert_eq!(room.objective().intake_calls(), [first.op, second.op]);
    assert!(room.state().intake().is_empty());
}

#[test]
fn d3_a_replan_whose_reasoner_call_never_ran_is_taken_up_again_on_resume() {
    let mut room = Room::new();
    let d = room.start_objective();
    let gather = specialist_call(&d);
    let d = room.contribute(&gather, "facts [s1]");
    let write = specialist_call(&d);
    let d = room.contribute(&write, "the report");
    let review = review_call(&d);
    // R3: an unmet criterion asks the reasoner for a corrective plan.
    let d = room.review(&review, &one_unmet());
    let replan = reasoner_call(&d);
    let attempts = room.objective().interpretation().unwrap().attempts();
    room.apply(failed(FailureKind::Unreachable, "connection refused").input(replan.op));
    assert_eq!(
        room.objective().status(),
        ObjectiveStatus::StoppedForAttention
    );
    let kept = room
        .objective()
        .interpretation()
        .expect("the replan is kept");
    assert_eq!(
        kept.attempts(),
        attempts - 1,
        "O11: the attempt is given back"
    );
    // Resumed: the corrective interpretation goes again.
    let d = room.control("olive", ControlAction::Resume);
    assert_eq!(room.objective().status(), ObjectiveStatus::Planning);
    let again = reasoner_call(&d);
    assert_ne!(again.op, replan.op);
}

#[test]
fn b6_updating_quotes_never_lowers_one() {
    use agentroom_domain::state::{Served, ServedModel};
    let mut room = Room::new();
    let before = room.state().quotes();
    room.apply(Input::UpdateQuotes {
        by: p("oscar"),
        served: Served {
            reasoner: Some(ServedModel {
                model: "tiny".to_owned(),
                quote: micros(1),
            }),
            specialist: None,
            reviewer: None,
        },
    });
    assert_eq!(room.state().quotes(), before);
}
