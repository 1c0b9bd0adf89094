//! What changed between two JSON documents, and applying it (D1: history stores what
//! changed, not a copy per revision). Objects change key by key, arrays index by index (an
//! appended ledger entry is stored as that entry alone), everything else is replaced.

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

    proptest! {
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
