//! What changed between two JSON documents, and applying it (D1: history stores what
//! changed, not a copy per revision). Objects change key by key, arrays index by index (an
//! appended ledger entry is stored as that entry alone), everything else is replaced.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The change from one JSON value to another.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "op")]
pub enum Delta {
    /// Nothing changed.
    Same,
    /// The value is replaced whole.
    Replace {
        /// The new value.
        value: Value,
    },
    /// An object: keys set (with their own deltas) and keys removed.
    Object {
        /// Changed or added keys.
        #[serde(default, skip_serializing_if = "Map::is_empty")]
        set: Map<String, Value>,
        /// Removed keys.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        remove: Vec<String>,
    },
    /// An array: its new length and the changed or added items (index, delta).
    Array {
        /// The new length.
        len: usize,
        /// Changed or added items.
        items: Vec<(usize, Value)>,
    },
}

/// Why a delta does not apply.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the stored change does not apply to the state it follows: {0}")]
pub struct DeltaError(String);

impl Delta {
    /// What changed from `old` to `new`.
    pub fn between(old: &Value, new: &Value) -> Delta {
        if old == new {
            return Delta::Same;
        }
        match (old, new) {
            (Value::Object(a), Value::Object(b)) => {
                let mut set = Map::new();
                for (key, value) in b {
                    match a.get(key) {
                        Some(before) if before == value => {}
                        Some(before) => {
                            set.insert(key.clone(), to_value(&Delta::between(before, value)));
                        }
                        None => {
                            set.insert(
                                key.clone(),
                                to_value(&Delta::Replace {
                                    value: value.clone(),
                                }),
                            );
                        }
                    }
                }
                let remove = a.keys().filter(|k| !b.contains_key(*k)).cloned().collect();
                Delta::Object { set, remove }
            }
            (Value::Array(a), Value::Array(b)) => {
                let mut items = Vec::new();
                for (index, value) in b.iter().enumerate() {
                    match a.get(index) {
                        Some(before) if before == value => {}
                        Some(before) => {
                            items.push((index, to_value(&Delta::between(before, value))))
                        }
                        None => items.push((
                            index,
                            to_value(&Delta::Replace {
                                value: value.clone(),
                            }),
                        )),
                    }
                }
                Delta::Array {
                    len: b.len(),
                    items,
                }
            }
            _ => Delta::Replace { value: new.clone() },
        }
    }

    /// Applies this delta to `value`.
    pub fn apply(&self, value: &mut Value) -> Result<(), DeltaError> {
        match self {
            Delta::Same => Ok(()),
            Delta::Replace { value: new } => {
                *value = new.clone();
                Ok(())
            }
            Delta::Object { set, remove } => {
                let Value::Object(map) = value else {
                    return Err(DeltaError("an object change on a non-object".into()));
                };
                for key in remove {
                    map.remove(key);
                }
                for (key, change) in set {
                    let change = from_value(change)?;
                    let slot = map.entry(key.clone()).or_insert(Value::Null);
                    change.apply(slot)?;
                }
                Ok(())
            }
            Delta::Array { len, items } => {
                let Value::Array(array) = value else {
                    return Err(DeltaError("an array change on a non-array".into()));
                };
                array.resize(*len, Value::Null);
                for (index, change) in items {
                    let change = from_value(change)?;
                    let Some(slot) = array.get_mut(*index) else {
                        return Err(DeltaError(format!("index {index} past the length {len}")));
                    };
                    change.apply(slot)?;
                }
                Ok(())
            }
        }
    }
}

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
            _ => Err(DeltaError("a document that is not an object".into())),
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

    /// The document with `changed` members set, and the change from this one to it: what
    /// [`Delta::between`] gives for the whole documents, computed from those members only.
    pub fn with(&self, changed: Vec<(&str, Value)>) -> (Sections, Delta) {
        let mut next = self.clone();
        let mut set = Map::new();
        for (name, value) in changed {
            let delta = match self.get(name) {
                Some(before) => Delta::between(before, &value),
                None => Delta::Replace {
                    value: value.clone(),
                },
            };
            if delta != Delta::Same {
                set.insert(name.to_owned(), to_value(&delta));
            }
            next.0.insert(name.to_owned(), Arc::new(value));
        }
        let delta = if set.is_empty() {
            Delta::Same
        } else {
            Delta::Object {
                set,
                remove: Vec::new(),
            }
        };
        (next, delta)
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
            Delta::Array { .. } => Err(DeltaError("an array change on an object".into())),
        }
    }
}

fn to_value(delta: &Delta) -> Value {
    // A Delta is plain data (maps with string keys): serializing it cannot fail.
    serde_json::to_value(delta).unwrap_or(Value::Null)
}

fn from_value(value: &Value) -> Result<Delta, DeltaError> {
    Delta::deserialize(value).map_err(|e| DeltaError(e.to_string()))
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
        fn d1_sections_give_the_whole_documents_change_and_apply_it(
            old in arb_object(),
            new in arb_object(),
        ) {
            let sections = Sections::from_value(old.clone()).unwrap();
            let Value::Object(members) = &new else { unreachable!() };
            // Only members that differ are passed, as `RoomState::changed_sections` does; a
            // member removed is not expressible that way, so keep the old ones here.
            let mut expected = old.clone();
            let changed: Vec<(&str, Value)> = members
                .iter()
                .filter(|(k, v)| old.get(k.as_str()) != Some(v))
                .map(|(k, v)| (k.as_str(), v.clone()))
                .collect();
            for (k, v) in &changed {
                expected[*k] = v.clone();
            }
            let (next, delta) = sections.with(changed);
            prop_assert_eq!(next.to_value(), expected.clone());
            prop_assert_eq!(&delta, &Delta::between(&old, &expected));
            let stored = serde_json::to_string(&delta).unwrap();
            let back: Delta = serde_json::from_str(&stored).unwrap();
            let mut rebuilt = sections.clone();
            rebuilt.apply(&back).unwrap();
            prop_assert_eq!(rebuilt, next);
            let mut whole = old.clone();
            back.apply(&mut whole).unwrap();
            prop_assert_eq!(whole, expected);
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
