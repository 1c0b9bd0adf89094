//! What changed between two JSON documents, and applying it (D1: history stores what
//! changed, not a copy per revision). Objects change key by key, arrays index by index (an
//! appended ledger entry is stored as that entry alone), everything else is replaced.
//!
//! A decision's change is written from the typed states ([`crate::state::RoomState::delta_from`],
//! issue 21): only what differs between the two states is serialized and compared, down to
//! the objective, plan version, task, operation or contribution that changed, against the
//! stored document's value for it, so a commit costs what it changes, not the size of the
//! Room's open work. The change is the one [`Delta::between`] gives for the whole documents.

use std::collections::BTreeMap;

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

impl DeltaError {
    /// A change that does not apply, for `reason`.
    pub fn new(reason: impl Into<String>) -> Self {
        Self(reason.into())
    }
}

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

/// `delta` as the JSON value a parent change holds it as.
pub fn to_value(delta: &Delta) -> Value {
    // A Delta is plain data (maps with string keys): serializing it cannot fail.
    serde_json::to_value(delta).unwrap_or(Value::Null)
}

/// The change a parent change holds as `value`.
pub fn from_value(value: &Value) -> Result<Delta, DeltaError> {
    Delta::deserialize(value).map_err(|e| DeltaError(e.to_string()))
}

/// What serializing a state's value failed on.
pub type DiffResult = Result<Delta, serde_json::Error>;

/// The change from `old` to `new`, written against `stored`, the stored document's value for
/// `old` (`None`: the document has none, so `new` replaces it whole). `old` itself is never
/// serialized: the stored value is what the change applies to.
pub fn whole<T: Serialize + PartialEq + ?Sized>(
    old: &T,
    new: &T,
    stored: Option<&Value>,
) -> DiffResult {
    if old == new {
        return Ok(Delta::Same);
    }
    let new = serde_json::to_value(new)?;
    Ok(match stored {
        Some(stored) => Delta::between(stored, &new),
        None => Delta::Replace { value: new },
    })
}

/// A map's change key by key: only the entries whose values differ are serialized, each by
/// `item`. A map whose keys do not serialize as strings (never one of the state's) changes
/// [`whole`].
pub fn keyed<K, V>(
    old: &BTreeMap<K, V>,
    new: &BTreeMap<K, V>,
    stored: Option<&Value>,
    item: impl Fn(&V, &V, Option<&Value>) -> DiffResult,
) -> DiffResult
where
    K: Serialize + Ord,
    V: Serialize + PartialEq,
{
    let Some(Value::Object(stored_map)) = stored else {
        return whole(old, new, stored);
    };
    let mut set = Map::new();
    for (key, value) in new {
        let before = old.get(key);
        if before == Some(value) {
            continue;
        }
        let Some(name) = key_name(key)? else {
            return whole(old, new, stored);
        };
        let change = match before {
            Some(before) => item(before, value, stored_map.get(&name))?,
            None => Delta::Replace {
                value: serde_json::to_value(value)?,
            },
        };
        if change != Delta::Same {
            set.insert(name, to_value(&change));
        }
    }
    let mut remove = Vec::new();
    for key in old.keys().filter(|k| !new.contains_key(*k)) {
        let Some(name) = key_name(key)? else {
            return whole(old, new, stored);
        };
        remove.push(name);
    }
    remove.sort();
    Ok(object(set, remove))
}

/// An array's change index by index: only the items that differ are serialized, each by
/// `item`. A stored array of another length than `old` is not this state's document: the
/// array changes [`whole`] against it.
pub fn indexed<T: Serialize + PartialEq>(
    old: &[T],
    new: &[T],
    stored: Option<&Value>,
    item: impl Fn(&T, &T, Option<&Value>) -> DiffResult,
) -> DiffResult {
    let stored_items = match stored {
        Some(Value::Array(items)) if items.len() == old.len() => items,
        _ => return whole(old, new, stored),
    };
    let mut items = Vec::new();
    for (index, value) in new.iter().enumerate() {
        let change = match old.get(index) {
            Some(before) if before == value => continue,
            Some(before) => item(before, value, stored_items.get(index))?,
            None => Delta::Replace {
                value: serde_json::to_value(value)?,
            },
        };
        if change != Delta::Same {
            items.push((index, to_value(&change)));
        }
    }
    if items.is_empty() && new.len() == old.len() {
        return Ok(Delta::Same);
    }
    Ok(Delta::Array {
        len: new.len(),
        items,
    })
}

/// A struct's change field by field, against its stored object: what a type with nested
/// changes ([`crate::objective::Objective`], [`crate::plan::PlanVersion`],
/// [`crate::state::RoomState`]) writes with one call per field, in a destructuring of the
/// type so that no field can be forgotten.
pub struct Fields<'a> {
    stored: &'a Map<String, Value>,
    set: Map<String, Value>,
    remove: Vec<String>,
}

impl<'a> Fields<'a> {
    /// The fields of the stored object `stored`.
    pub fn of(stored: &'a Map<String, Value>) -> Self {
        Self {
            stored,
            set: Map::new(),
            remove: Vec::new(),
        }
    }

    /// Field `name` from `old` to `new`, by `diff` against its stored value; `skipped` when
    /// `new` is left out of the serialized struct (`skip_serializing_if`), which removes the
    /// stored one. A field the stored object lacks (left out, or written before the field
    /// existed) is set whole.
    pub fn field<T: Serialize + PartialEq + ?Sized>(
        &mut self,
        name: &str,
        old: &T,
        new: &T,
        skipped: bool,
        diff: impl FnOnce(&T, &T, Option<&Value>) -> DiffResult,
    ) -> Result<(), serde_json::Error> {
        if old == new {
            return Ok(());
        }
        let stored = self.stored.get(name);
        if skipped {
            if stored.is_some() {
                self.remove.push(name.to_owned());
            }
            return Ok(());
        }
        let change = match stored {
            None => Delta::Replace {
                value: serde_json::to_value(new)?,
            },
            Some(stored) => diff(old, new, Some(stored))?,
        };
        if change != Delta::Same {
            self.set.insert(name.to_owned(), to_value(&change));
        }
        Ok(())
    }

    /// The struct's change.
    pub fn delta(mut self) -> Delta {
        self.remove.sort();
        object(self.set, self.remove)
    }
}

/// An object change, or none when it sets and removes nothing.
fn object(set: Map<String, Value>, remove: Vec<String>) -> Delta {
    if set.is_empty() && remove.is_empty() {
        Delta::Same
    } else {
        Delta::Object { set, remove }
    }
}

/// `key` as the member name a JSON object holds it under, when it serializes as a string.
fn key_name<K: Serialize>(key: &K) -> Result<Option<String>, serde_json::Error> {
    Ok(match serde_json::to_value(key)? {
        Value::String(name) => Some(name),
        _ => None,
    })
}
