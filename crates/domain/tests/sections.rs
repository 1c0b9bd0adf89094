//! `RoomState::delta_from` (D1: history stores what changed; issue 21: written from the typed
//! states): across a walk through a real objective, the change it writes is exactly the one
//! `Delta::between` gives for the whole documents, and applying it to the stored document
//! gives the next state's document.
// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use agentroom_domain::delta::Delta;
use agentroom_domain::state::{RoomState, STATE_SECTIONS};
use serde_json::Value;

use common::{Room, reasoner_call, specialist_call, two_step_plan};

fn members(state: &RoomState) -> serde_json::Map<String, Value> {
    match serde_json::to_value(state).unwrap() {
        Value::Object(map) => map,
        other => panic!("a state serializes as an object, got {other}"),
    }
}

/// What `delta_from` must say for `previous` → `next`, from the whole documents; the number
/// of sections it changes.
fn check(previous: &RoomState, next: &RoomState) -> usize {
    let before = members(previous);
    let after = members(next);
    let mut names: Vec<&str> = after.keys().map(String::as_str).collect();
    let mut sections = STATE_SECTIONS.to_vec();
    // `redactions` is left out of the document while it holds nothing, so that states
    // without any serialize as they did before they existed.
    sections.retain(|name| *name != "redactions" || after.contains_key(*name));
    names.sort_unstable();
    sections.sort_unstable();
    assert_eq!(names, sections, "STATE_SECTIONS names every member");
    let change = next.delta_from(previous, |name| before.get(name)).unwrap();
    let whole = Delta::between(
        &Value::Object(before.clone()),
        &Value::Object(after.clone()),
    );
    assert_eq!(change, whole, "the typed change is the documents' change");
    let mut document = Value::Object(before);
    change.apply(&mut document).unwrap();
    assert_eq!(document, Value::Object(after.clone()));
    match change {
        Delta::Same => 0,
        Delta::Object { set, .. } => set.len(),
        other => panic!("a state's change is an object change, got {other:?}"),
    }
}

#[test]
fn d1_the_typed_change_is_the_documents_change_and_rebuilds_the_next_one() {
    let mut room = Room::new();
    let mut steps = 0;
    let mut changed = 0;
    let mut step =
        |room: &mut Room, f: &dyn Fn(&mut Room) -> agentroom_domain::engine::Decision| {
            let previous = room.state().clone();
            let decision = f(room);
            changed += check(&previous, &decision.state);
            steps += 1;
            decision
        };
    let said = step(&mut room, &|r| r.say("Summarize the state of the art"));
    let planned = step(&mut room, &|r| {
        r.plan(&reasoner_call(&said), two_step_plan())
    });
    let call = specialist_call(&planned);
    step(&mut room, &|r| r.contribute(&call, "findings with sources"));
    step(&mut room, &|r| {
        r.grant("zed", agentroom_domain::room::Role::Reviewer)
    });
    assert_eq!(
        check(room.state(), room.state()),
        0,
        "a state against itself: nothing"
    );
    assert_eq!(steps, 4);
    assert!(changed >= 4, "each step changed something");
}

#[test]
fn d1_a_section_the_stored_document_lacks_is_set_whole() {
    let mut room = Room::new();
    let previous = room.state().clone();
    let next = room.say("Summarize the state of the art").state;
    let full = members(&previous);
    let Delta::Object { set, .. } = next.delta_from(&previous, |name| full.get(name)).unwrap()
    else {
        panic!("the owner's message changes the state");
    };
    // Every section it changes, left out of the stored document (as documents written
    // before a section existed lack it), is set whole: never a change of a missing value.
    for name in set.keys() {
        let mut before = full.clone();
        before.remove(name);
        let change = next.delta_from(&previous, |n| before.get(n)).unwrap();
        let Delta::Object { set, .. } = &change else {
            panic!("an object change, got {change:?}");
        };
        let section: Delta = serde_json::from_value(set[name].clone()).unwrap();
        assert_eq!(
            section,
            Delta::Replace {
                value: members(&next)[name].clone()
            },
            "{name}"
        );
        let mut document = Value::Object(before);
        change.apply(&mut document).unwrap();
        assert_eq!(document, serde_json::to_value(&next).unwrap(), "{name}");
    }
}
