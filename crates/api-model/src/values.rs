//! The domain's enums that request bodies carry, as the API documents them. The domain types
//! do not derive `ToSchema` (the domain knows nothing of the API), so a field holding one
//! names the mirror here as its `value_type`: its schema is a string enum of exactly the
//! values the domain type reads and writes, where a plain `String` would hide which are
//! allowed. Each is named as the domain enum it mirrors (`engine::ControlAction`,
//! `plan::Column`, `review::Verdict`, `engine::LateDecision`, `room::Role`), and its doc comment is the
//! schema's description, written for API users. These types are never built; the tests
//! check each lists exactly the wire values of its domain type, so a variant added to the
//! domain fails them until it is added here.

use utoipa::ToSchema;

/// A control action on an objective (D3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ToSchema)]
#[schema(rename_all = "snake_case")]
pub enum ControlAction {
    /// Stop dispatching and abort running calls.
    Pause,
    /// Continue where it was.
    Resume,
    /// End it.
    Cancel,
}

/// A planning column on the board.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ToSchema)]
#[schema(rename_all = "snake_case")]
pub enum Column {
    /// Waiting on deps.
    Backlog,
    /// Ready, or failed and awaiting a new plan.
    Todo,
    /// Dispatched, running, waiting outside, uncertain or held.
    InProgress,
    /// Completed.
    Done,
}

/// A criterion's verdict in a review.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ToSchema)]
#[schema(rename_all = "snake_case")]
pub enum Verdict {
    /// The report meets it.
    Met,
    /// The report does not meet it (R3).
    Unmet,
    /// The reviewer cannot tell (R5).
    Unknown,
}

/// What to do with a result held for readmission (D4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ToSchema)]
#[schema(rename_all = "snake_case")]
pub enum LateDecision {
    /// Use it: the task completes with it.
    Readmit,
    /// Drop it: the task stays open.
    Discard,
}

/// A role a principal holds in a Room; what each may do is `policies/access.toml`'s.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ToSchema)]
#[schema(rename_all = "snake_case")]
pub enum Role {
    /// Creates objectives and corrects them; the Room's authority.
    Owner,
    /// Adjusts the shared budget and controls objectives.
    Operator,
    /// Audits source-bound reports.
    Reviewer,
    /// Executes tasks for the capabilities it is bound to.
    Specialist,
    /// Runs a supervised Room on behalf of agents.
    AgentHost,
}

#[cfg(test)]
mod tests {
    use agentroom_domain::{engine, plan, review, room};
    use serde::Serialize;
    use serde::de::{self, DeserializeOwned, Deserializer, Visitor};
    use serde_json::Value;

    use super::*;

    /// Records the variant names serde's derived `Deserialize` of an enum hands to
    /// `deserialize_enum`: the names it reads, after renaming, taken from serde itself rather
    /// than from a list written here (which could miss the variant it is meant to catch).
    struct VariantNames(&'static [&'static str]);

    impl<'de> Deserializer<'de> for &mut VariantNames {
        type Error = de::value::Error;

        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
            Err(de::Error::custom("not an enum"))
        }

        fn deserialize_enum<V: Visitor<'de>>(
            self,
            _: &'static str,
            variants: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Self::Error> {
            self.0 = variants;
            Err(de::Error::custom("recorded the variants"))
        }

        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
            option unit unit_struct newtype_struct seq tuple tuple_struct map struct identifier
            ignored_any
        }
    }

    /// The wire names of `T`'s variants.
    fn variant_names<T: DeserializeOwned>() -> Vec<&'static str> {
        let mut names = VariantNames(&[]);
        // The error is the point: the deserializer records the names and stops.
        assert!(T::deserialize(&mut names).is_err());
        names.0.to_vec()
    }

    /// `Mirror`'s schema lists exactly the values `Domain` reads, in its order, and each
    /// value reads into a variant that writes back the same value.
    fn assert_mirrors<Domain, Mirror>()
    where
        Domain: Serialize + DeserializeOwned,
        Mirror: ToSchema,
    {
        let names = variant_names::<Domain>();
        assert!(
            !names.is_empty(),
            "{}: no variants recorded",
            Mirror::name()
        );
        for name in &names {
            let value = Domain::deserialize(Value::from(*name)).unwrap();
            assert_eq!(serde_json::to_value(value).unwrap(), *name);
        }
        let schema = serde_json::to_value(Mirror::schema()).unwrap();
        assert_eq!(schema["type"], "string", "{schema}");
        assert_eq!(
            schema["enum"],
            serde_json::json!(names),
            "{}",
            Mirror::name()
        );
    }

    #[test]
    fn each_mirror_lists_exactly_the_wire_values_of_its_domain_enum() {
        assert_mirrors::<engine::ControlAction, ControlAction>();
        assert_mirrors::<plan::Column, Column>();
        assert_mirrors::<review::Verdict, Verdict>();
        assert_mirrors::<engine::LateDecision, LateDecision>();
        assert_mirrors::<room::Role, Role>();
    }

    #[test]
    fn the_recorder_sees_renamed_variants() {
        // A check on the check: a mirror test passing on an empty or unrenamed list would
        // prove nothing.
        assert_eq!(
            variant_names::<plan::Column>(),
            ["backlog", "todo", "in_progress", "done"]
        );
    }
}
