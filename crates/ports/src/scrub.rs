//! Scrubbing a redacted memory text out of a Room's stored history (issue 18): every stored
//! document (a delta, a snapshot) in which the text is a memory entry's text gets
//! [`REDACTED_TEXT`] there instead, exactly as the domain wrote it into the state, so that the
//! history replayed delta by delta still ends at the current state (D1).
//!
//! Only whole JSON string values are replaced, never a substring, and only those under a
//! `memory` member and a `text` member below it (a version's text in a snapshot, or in a
//! delta of the memory section, whatever shape the delta took): the same words elsewhere in
//! the state (a column, a principal, an owner's message) are other data, which the current
//! state still holds, and are left alone. The decision log never holds a memory text (the
//! engine logs entries by id), so there is nothing of it there to scrub.

use agentroom_domain::redaction::REDACTED_TEXT;
use serde_json::Value;

/// Replaces, in `document`, every string equal to one of `texts` that stands as a memory
/// entry's text; returns whether it replaced any.
pub fn scrub_memory_texts(document: &mut Value, texts: &[String]) -> bool {
    walk(document, texts, false, false)
}

fn walk(value: &mut Value, texts: &[String], in_memory: bool, in_text: bool) -> bool {
    match value {
        Value::String(s) if in_memory && in_text && texts.iter().any(|t| t == s) => {
            REDACTED_TEXT.clone_into(s);
            true
        }
        Value::Array(items) => {
            let mut changed = false;
            for item in items {
                changed |= walk(item, texts, in_memory, in_text);
            }
            changed
        }
        Value::Object(members) => {
            let mut changed = false;
            for (key, member) in members.iter_mut() {
                let memory = in_memory || key == "memory";
                let text = in_text || (memory && key == "text");
                changed |= walk(member, texts, memory, text);
            }
            changed
        }
        _ => false,
    }
}

/// [`scrub_memory_texts`] on stored JSON text: the scrubbed text when it held one of
/// `texts` as a memory text, `None` when it is unchanged (or is not JSON: a store reports
/// unreadable history when it loads it, not here). Stores read only the documents that
/// mention one of the texts.
pub fn scrub_memory_json(stored: &str, texts: &[String]) -> Option<String> {
    let mut document: Value = serde_json::from_str(stored).ok()?;
    scrub_memory_texts(&mut document, texts)
        .then(|| serde_json::to_string(&document).ok())
        .flatten()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn only_whole_memory_texts_are_scrubbed_never_a_substring_or_other_data() {
        let texts = vec!["a".to_owned(), "pin 1234".to_owned()];
        let mut snapshot = json!({
            "members": {"a": ["owner"]},
            "objectives": [{"title": "a", "text": "a"}],
            "memory": [
                {"id": "e1", "versions": [{"text": "pin 1234", "by": "a", "at": 1},
                                          {"text": "a", "by": "olive", "at": 2}],
                 "retraction": {"why": "a"}},
                {"id": "e2", "versions": [{"text": "a pin 1234 b", "by": "olive", "at": 3}]}
            ]
        });
        assert!(scrub_memory_texts(&mut snapshot, &texts));
        assert_eq!(
            snapshot,
            json!({
                "members": {"a": ["owner"]},
                "objectives": [{"title": "a", "text": "a"}],
                "memory": [
                    {"id": "e1", "versions": [{"text": REDACTED_TEXT, "by": "a", "at": 1},
                                              {"text": REDACTED_TEXT, "by": "olive", "at": 2}],
                     "retraction": {"why": "a"}},
                    {"id": "e2", "versions": [{"text": "a pin 1234 b", "by": "olive", "at": 3}]}
                ]
            })
        );
        // A delta of the memory section: an appended version, or a replaced text.
        let delta = r#"{"op":"object","set":{"memory":{"op":"array","len":1,"items":[[0,{"op":"object","set":{"versions":{"op":"array","len":2,"items":[[1,{"op":"replace","value":{"text":"pin 1234","by":"olive","at":5}}]]}}}]]}}}"#;
        let scrubbed = scrub_memory_json(delta, &texts).unwrap();
        assert!(!scrubbed.contains("pin 1234"), "{scrubbed}");
        assert!(scrubbed.contains(REDACTED_TEXT));
        assert_eq!(scrub_memory_json(r#"{"set":{"log":"pin"}}"#, &texts), None);
    }
}
