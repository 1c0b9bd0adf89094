//! What changed between two JSON documents, and applying it (D1: history stores what
//! changed, not a copy per revision). The change itself ([`Delta`]) is the domain's, which
//! writes a decision's change from the typed states; here is the document a store keeps of a
//! Room's latest revision, which changes are applied to.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use agentroom_domain::delta::from_value;
pub use agentroom_domain::delta::{Delta, DeltaError};

/// A JSON object document held as its top-level members, each shared: successive revisions
/// of a Room share the members a decision did not change, so a store that keeps the last
/// revision's document builds the next one, and the change between them, from the changed
/// members alone.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sections(BTreeMap<String, Arc<Value>>);

impl Sections {
    /// The members of `value`, which must be an object.
    pub fn from_value(value: Value) -> Result<Self, DeltaError> {
        match value {
            Value::Object(map) => Ok(Self(
                map.into_iter().map(|(k, v)| (k, Arc::new(v))).collect(),
            )),
            _ => Err(DeltaError::new("a document that is not an object")),
        }
    }

    /// The member `name`.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.0.get(name).map(|v| &**v)
    }

    /// The members, in key order (as a `Value` object would hold them).
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.0.iter().map(|(k, v)| (k.as_str(), &**v))
    }

    /// The document as one value (a deep copy).
    pub fn to_value(&self) -> Value {
        Value::Object(
            self.0
                .iter()
                .map(|(k, v)| (k.clone(), Value::clone(v)))
                .collect(),
        )
    }

    /// Applies `delta`, copying only the members it changes.
    pub fn apply(&mut self, delta: &Delta) -> Result<(), DeltaError> {
        match delta {
            Delta::Same => Ok(()),
            Delta::Replace { value } => {
                *self = Self::from_value(value.clone())?;
                Ok(())
            }
            Delta::Object { set, remove } => {
                for key in remove {
                    self.0.remove(key);
                }
                for (key, change) in set {
                    let change = from_value(change)?;
                    let slot = self
                        .0
                        .entry(key.clone())
                        .or_insert_with(|| Arc::new(Value::Null));
                    change.apply(Arc::make_mut(slot))?;
                }
                Ok(())
            }
            Delta::Array { .. } => Err(DeltaError::new("an array change on an object")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn round_trip(old: Value, new: Value) {
        let delta = Delta::between(&old, &new);
        let stored = serde_json::to_string(&delta).unwrap();
        let back: Delta = serde_json::from_str(&stored).unwrap();
        let mut rebuilt = old;
        back.apply(&mut rebuilt).unwrap();
        assert_eq!(rebuilt, new);
    }

    #[test]
    fn an_appended_array_item_is_stored_alone() {
        let old = json!({"ledger": {"entries": [{"a": 1}, {"b": 2}]}, "room": "r"});
        let new = json!({"ledger": {"entries": [{"a": 1}, {"b": 2}, {"c": 3}]}, "room": "r"});
        let delta = serde_json::to_string(&Delta::between(&old, &new)).unwrap();
        assert!(!delta.contains("\"a\""), "{delta}");
        assert!(delta.contains("\"c\""), "{delta}");
        round_trip(old, new);
    }

    #[test]
    fn nulls_removals_and_shrinking_arrays_round_trip() {
        round_trip(
            json!({"a": 1, "b": null, "c": [1, 2, 3]}),
            json!({"b": 2, "c": [1], "d": null}),
        );
        round_trip(json!([1, {"x": null}]), json!({"now": "object"}));
        round_trip(json!(null), json!({"a": [null, null]}));
    }

    fn arb_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i32>().prop_map(|n| json!(n)),
            "[a-c]{0,2}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 32, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map("[a-d]", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    fn arb_object() -> impl Strategy<Value = Value> {
        prop::collection::btree_map("[a-e]", arb_json(), 0..5)
            .prop_map(|m| Value::Object(m.into_iter().collect()))
    }

    proptest! {
        #[test]
        fn d1_sections_apply_the_whole_documents_change(
            old in arb_object(),
            new in arb_object(),
        ) {
            let mut sections = Sections::from_value(old.clone()).unwrap();
            let delta = Delta::between(&old, &new);
            let stored = serde_json::to_string(&delta).unwrap();
            let back: Delta = serde_json::from_str(&stored).unwrap();
            sections.apply(&back).unwrap();
            prop_assert_eq!(sections.to_value(), new);
        }

        #[test]
        fn d1_applying_the_change_rebuilds_the_new_value(old in arb_json(), new in arb_json()) {
            let delta = Delta::between(&old, &new);
            let stored = serde_json::to_string(&delta).unwrap();
            let back: Delta = serde_json::from_str(&stored).unwrap();
            let mut rebuilt = old;
            back.apply(&mut rebuilt).unwrap();
            prop_assert_eq!(rebuilt, new);
        }
    }
}
