//! B6 (issue 16): a Room's quote per role must cover the model the host serves that role with.
//! A Room whose quote is below admits no call of that role and says why, naming the model and
//! the command that fixes it; an operator's explicit act brings the quotes up (recorded with
//! each role's model), and the call that waited goes ahead.

mod common;

use agentroom_domain::engine::Input;
use agentroom_domain::rules::Rule;
use agentroom_domain::state::{CallRole, Served, ServedModel};
use common::*;

fn served(reasoner: i64) -> Served {
    Served {
        reasoner: Some(ServedModel {
            model: "gpt-big".to_owned(),
            quote: micros(reasoner),
        }),
        specialist: None,
        reviewer: None,
    }
}

#[test]
fn b6_a_room_whose_quote_is_below_its_model_admits_no_call_and_names_the_model_and_the_fix() {
    let mut room = Room::new();
    room.sim.serve(served(REASONER * 3));
    let d = room.say("Summarize the state of the art");
    assert!(calls(&d).is_empty(), "no call admitted: {:#?}", d.log);
    assert_rejected(&d, Rule::B6);
    let said = notifications(&d).join("\n");
    assert!(said.contains("`gpt-big`"), "{said}");
    assert!(said.contains("agentroom budget quotes"), "{said}");
    assert_eq!(room.state().ledger().balances().reserved, micros(0));
    // The message waits; nothing was reserved or counted.
    let pending = room.state().intake().values().next().expect("pending");
    assert_eq!(pending.attempts(), 0);

    // A specialist may not update the quotes.
    let d = room.apply(Input::UpdateQuotes {
        by: p("sam"),
        served: served(REASONER * 3),
    });
    assert!(calls(&d).is_empty());
    assert_eq!(room.state().quotes().reasoner, micros(REASONER));

    // An operator does: recorded with the model, and the waiting message is interpreted.
    let d = room.apply(Input::UpdateQuotes {
        by: p("oscar"),
        served: served(REASONER * 3),
    });
    assert!(accepted_by(&d, Rule::B6), "{:#?}", d.log);
    assert!(d.log.iter().any(|l| l.message.contains("`gpt-big`")));
    assert_eq!(room.state().quotes().reasoner, micros(REASONER * 3));
    assert_eq!(
        room.state().quotes().specialist,
        micros(SPECIALIST),
        "unchanged"
    );
    let call = reasoner_call(&d);
    assert_eq!(call.reservation, micros(REASONER * 3));
}

#[test]
fn b6_quotes_that_cover_the_model_admit_calls_as_before() {
    let mut room = Room::new();
    room.sim.serve(served(REASONER));
    let d = room.say("Summarize the state of the art");
    assert_eq!(calls_of(&d, CallRole::Reasoner).len(), 1);
    assert!(
        served(REASONER)
            .shortfalls(&room.state().quotes())
            .is_empty()
    );
    assert_eq!(
        served(REASONER + 1)
            .shortfalls(&room.state().quotes())
            .len(),
        1
    );
}
