//! `RoomState::changed_sections` (D1: history stores what changed): the sections it names are
//! exactly the members of the state's JSON document that differ, each serialized as the
//! whole document serializes it, across a walk through a real objective.
// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use agentroom_domain::state::{RoomState, STATE_SECTIONS};
use serde_json::Value;

use common::{Room, reasoner_call, specialist_call, two_step_plan};

fn members(state: &RoomState) -> serde_json::Map<String, Value> {
    match serde_json::to_value(state).unwrap() {
        Value::Object(map) => map,
        other => panic!("a state serializes as an object, got {other}"),
    }
}

/// What `changed_sections` must say for `previous` → `next`, from the whole documents.
fn check(previous: &RoomState, next: &RoomState) -> usize {
    let before = members(previous);
    let after = members(next);
    let mut names: Vec<&str> = after.keys().map(String::as_str).collect();
    let mut sections = STATE_SECTIONS.to_vec();
    // `redactions` and `closed` are left out of the document while they hold nothing, so
    // that states without any serialize as they did before they existed.
    sections.retain(|name| !matches!(*name, "redactions" | "closed") || after.contains_key(*name));
    names.sort_unstable();
    sections.sort_unstable();
    assert_eq!(names, sections, "STATE_SECTIONS names every member");
    let expected: Vec<(&str, Value)> = STATE_SECTIONS
        .iter()
        .filter(|name| before.get(**name) != after.get(**name))
        .map(|name| (*name, after[*name].clone()))
        .collect();
    let changed = next.changed_sections(previous).unwrap();
    assert_eq!(changed, expected);
    changed.len()
}

#[test]
fn d1_changed_sections_are_the_members_that_differ_serialized_as_in_the_document() {
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
