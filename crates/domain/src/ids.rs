//! Typed identifiers, timestamps, and the `IdSource` through which the engine gets fresh ids.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// An error for an identifier that cannot be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    /// The text is not a UUID.
    #[error("{kind} `{text}` is not a UUID")]
    NotAUuid {
        /// Which kind of id was expected.
        kind: &'static str,
        /// The text that was given.
        text: String,
    },
    /// The text is not a slug (lower-case ASCII letters, digits, `-` and `_`, 1..=64 bytes).
    #[error("{kind} `{text}` must be 1 to 64 lower-case letters, digits, `-` or `_`")]
    NotASlug {
        /// Which kind of id was expected.
        kind: &'static str,
        /// The text that was given.
        text: String,
    },
}

macro_rules! uuid_id {
    ($(#[$doc:meta])* $name:ident, $kind:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(Uuid);

        impl $name {
            /// Wraps a UUID.
            pub const fn from_uuid(uuid: Uuid) -> Self {
                Self(uuid)
            }

            /// The wrapped UUID.
            pub const fn as_uuid(&self) -> &Uuid {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0.hyphenated(), f)
            }
        }

        impl FromStr for $name {
            type Err = IdError;

            fn from_str(text: &str) -> Result<Self, Self::Err> {
                Uuid::parse_str(text).map(Self).map_err(|_| IdError::NotAUuid {
                    kind: $kind,
                    text: text.to_owned(),
                })
            }
        }
    };
}

uuid_id!(
    /// A persisted event.
    EventId,
    "event id"
);
uuid_id!(
    /// An objective.
    ObjectiveId,
    "objective id"
);
uuid_id!(
    /// One version of an objective's plan.
    PlanVersionId,
    "plan version id"
);
uuid_id!(
    /// A durable operation: one reserved provider call.
    OperationId,
    "operation id"
);
uuid_id!(
    /// A specialist's persisted contribution.
    ContributionId,
    "contribution id"
);
uuid_id!(
    /// An entry of the Room's memory (M1), derived from the input that added it.
    MemoryEntryId,
    "memory entry id"
);
uuid_id!(
    /// A recorded review.
    ReviewId,
    "review id"
);
uuid_id!(
    /// A notification with a stable id (T5).
    NotificationId,
    "notification id"
);
uuid_id!(
    /// A persisted operator input (control, a limit raise, a review, …): the id of the
    /// request that carried it. A Room decides each input id once; deciding the same input
    /// again yields the same derived ids.
    InputId,
    "input id"
);

/// The namespace of [`InputId::named`] (the coordinator derives its ids from the same one).
const INPUT_NAMESPACE: Uuid = Uuid::from_u128(0x6167_656e_7472_6f6f_6d2d_636f_6f72_6400);

impl InputId {
    /// An input id derived from a caller's stable name for the request (e.g. `"grant sam
    /// specialist"` in a setup that runs once per Room): the same name is the same input.
    pub fn named(name: &str) -> Self {
        Self(Uuid::new_v5(&INPUT_NAMESPACE, name.as_bytes()))
    }
}

macro_rules! slug_id {
    ($(#[$doc:meta])* $name:ident, $kind:literal) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            /// Parses a slug: 1 to 64 lower-case ASCII letters, digits, `-` or `_`.
            pub fn parse(text: &str) -> Result<Self, IdError> {
                let ok = !text.is_empty()
                    && text.len() <= 64
                    && text.bytes().all(|b| {
                        b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_'
                    });
                if ok {
                    Ok(Self(text.to_owned()))
                } else {
                    Err(IdError::NotASlug {
                        kind: $kind,
                        text: text.to_owned(),
                    })
                }
            }

            /// The slug as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl FromStr for $name {
            type Err = IdError;

            fn from_str(text: &str) -> Result<Self, Self::Err> {
                Self::parse(text)
            }
        }

        impl TryFrom<String> for $name {
            type Error = IdError;

            fn try_from(text: String) -> Result<Self, Self::Error> {
                Self::parse(&text)
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }
    };
}

slug_id!(
    /// A Room. The embedded default Room is `local`.
    RoomId,
    "room id"
);
slug_id!(
    /// A budget pool: an owner- or campaign-wide limit that Rooms draw on (B8). It belongs to
    /// the host, not to a Room.
    PoolId,
    "pool id"
);
slug_id!(
    /// A principal: a person or an agent with a stable id.
    PrincipalId,
    "principal id"
);
slug_id!(
    /// A task's stable key within an objective, proposed by the reasoner.
    TaskKey,
    "task key"
);
slug_id!(
    /// A criterion's key within an objective.
    CriterionId,
    "criterion id"
);

/// A task identity (O3, O4): `{plan_version_id}/{key}` by default, or
/// `{prefix}{objective_id}/{key}` (suffixed `#n` for the n-th fresh identity of that key) when
/// the policy sets `task_identity_prefix`. Assigned only by the engine.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TaskIdentity(String);

impl TaskIdentity {
    /// A plan-scoped identity (the O4 default).
    pub fn plan_scoped(plan: PlanVersionId, key: &TaskKey) -> Self {
        Self(format!("{plan}/{key}"))
    }

    /// An objective-scoped identity; `n` is 1 for the first identity of this key.
    pub fn objective_scoped(prefix: &str, objective: ObjectiveId, key: &TaskKey, n: u32) -> Self {
        if n <= 1 {
            Self(format!("{prefix}{objective}/{key}"))
        } else {
            Self(format!("{prefix}{objective}/{key}#{n}"))
        }
    }

    /// Wraps an identity read back from storage or the wire; only the engine mints new ones.
    pub fn from_wire(text: &str) -> Self {
        Self(text.to_owned())
    }

    /// The identity as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for TaskIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A point in time, in milliseconds since the Unix epoch, passed in through `Env`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Timestamp(i64);

impl Timestamp {
    /// A timestamp from milliseconds since the Unix epoch.
    pub const fn from_millis(millis: i64) -> Self {
        Self(millis)
    }

    /// Milliseconds since the Unix epoch.
    pub const fn as_millis(self) -> i64 {
        self.0
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Where the engine gets fresh ids. In production, ids derive deterministically from the
/// persisted input's id and a counter ([`DerivedIds`]), so that deciding the same input again
/// after a compare-and-swap conflict yields the same operation ids.
pub trait IdSource {
    /// The next fresh UUID.
    fn next_uuid(&mut self) -> Uuid;
}

/// UUIDv5 ids derived from a namespace (the persisted input's id) and a counter.
#[derive(Debug, Clone)]
pub struct DerivedIds {
    namespace: Uuid,
    counter: u64,
}

impl DerivedIds {
    /// Ids derived from `namespace`, starting at counter 0.
    pub const fn new(namespace: Uuid) -> Self {
        Self {
            namespace,
            counter: 0,
        }
    }
}

impl IdSource for DerivedIds {
    fn next_uuid(&mut self) -> Uuid {
        let uuid = Uuid::new_v5(&self.namespace, &self.counter.to_be_bytes());
        self.counter = self.counter.wrapping_add(1);
        uuid
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_ids_repeat_for_the_same_namespace() {
        let ns = Uuid::from_u128(7);
        let mut a = DerivedIds::new(ns);
        let mut b = DerivedIds::new(ns);
        let first = a.next_uuid();
        assert_eq!(first, b.next_uuid());
        assert_ne!(first, a.next_uuid());
    }

    #[test]
    fn slugs_refuse_upper_case_empty_and_long_text() {
        assert!(PrincipalId::parse("alice-2").is_ok());
        assert!(PrincipalId::parse("Alice").is_err());
        assert!(PrincipalId::parse("").is_err());
        assert!(PrincipalId::parse(&"a".repeat(65)).is_err());
        let err = TaskKey::parse("a b").unwrap_err();
        assert_eq!(
            err.to_string(),
            "task key `a b` must be 1 to 64 lower-case letters, digits, `-` or `_`"
        );
    }

    #[test]
    fn o4_objective_scoped_identities_are_stable_and_suffixed() {
        let obj = ObjectiveId::from_uuid(Uuid::from_u128(1));
        let key = TaskKey::parse("gather").unwrap();
        let first = TaskIdentity::objective_scoped("P", obj, &key, 1);
        assert_eq!(first.as_str(), format!("P{obj}/gather"));
        let second = TaskIdentity::objective_scoped("P", obj, &key, 2);
        assert_eq!(second.as_str(), format!("P{obj}/gather#2"));
    }
}
