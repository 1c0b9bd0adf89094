//! Issue 17: a blank owner message (or correction) asks the reasoner nothing. It is refused
//! before it is stored (`EventBody::check`, which the service asks), and one that was stored
//! anyway (by an older release) is decided without a paid call (O9).

mod common;

use agentroom_domain::event::{EventBody, EventError, EventKind};
use agentroom_domain::rules::Rule;
use common::*;

#[test]
fn o9_a_blank_owner_message_is_refused_before_it_is_stored() {
    for text in ["", " ", "\n\t  \r\n"] {
        let body = EventBody::OwnerMessage { text: text.into() };
        assert_eq!(
            body.check(),
            Err(EventError::BlankText(EventKind::OwnerMessage)),
            "{text:?}"
        );
    }
    let said = EventBody::OwnerMessage {
        text: " Summarize it ".into(),
    };
    assert_eq!(said.check(), Ok(()));
    assert_eq!(
        EventError::BlankText(EventKind::OwnerMessage).to_string(),
        "the owner_message text is blank: say what you want"
    );
}

#[test]
fn o9_a_blank_owner_message_that_reaches_the_engine_starts_no_reasoner_call() {
    let mut room = Room::new();
    let spent = room.state().ledger().balances();
    let d = room.say("   ");
    assert!(calls(&d).is_empty(), "no paid call: {:#?}", d.log);
    assert_rejected(&d, Rule::O9);
    assert!(
        room.state().intake().is_empty(),
        "nothing waits for a reasoner"
    );
    assert_eq!(room.state().ledger().balances(), spent, "nothing reserved");
    // A real message afterwards is interpreted as usual.
    let d = room.say("Summarize the state of the art");
    reasoner_call(&d);
}
