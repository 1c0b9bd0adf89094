//! The capability catalog's contract with the engine, through the in-memory catalog: a
//! resolution carries the declared outputs of the capability finally used, a contribution's
//! outputs are checked against them (T2), and the catalog describes every capability for the
//! reasoner's prompt (C1).
// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use agentroom_domain::catalog::{
    CapabilityCatalog, CapabilityEffect, CapabilityInfo, DeclaredOutput, InputInfo, MemoryCatalog,
    MemoryEntry, OutputMismatch, OutputType, ResolveRequest, check_outputs,
};
use agentroom_domain::ids::{ObjectiveId, PrincipalId, TaskKey};
use expect_test::expect;
use proptest::prelude::*;
use serde_json::{Map, Value, json};
use uuid::Uuid;

fn p(id: &str) -> PrincipalId {
    PrincipalId::parse(id).unwrap()
}

fn output(name: &str, kind: OutputType) -> DeclaredOutput {
    DeclaredOutput {
        name: name.to_owned(),
        kind,
        description: None,
    }
}

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

/// `code-generation` (bound to `coder`, two outputs), `old-codegen` (deprecated, replaced by
/// `code-generation`, with a message), `publish` (external-write, bound to `sam`), `offline`
/// (unavailable), `orphan` (unbound), and `research` bound the plain way.
fn catalog() -> MemoryCatalog {
    MemoryCatalog::new()
        .with(
            "code-generation",
            MemoryEntry {
                provider: Some(p("coder")),
                required_inputs: vec!["language".into()],
                defaults: object(json!({"style": "standard"})),
                description: "Generate code".into(),
                outputs: vec![
                    DeclaredOutput {
                        name: "code".into(),
                        kind: OutputType::String,
                        description: Some("Generated source code".into()),
                    },
                    output("lines", OutputType::Integer),
                ],
                ..MemoryEntry::default()
            },
        )
        .with(
            "old-codegen",
            MemoryEntry {
                provider: Some(p("legacy")),
                description: "The first code generator".into(),
                outputs: vec![output("source", OutputType::String)],
                replacement: Some("code-generation".into()),
                deprecation_message: Some("use code-generation".into()),
                ..MemoryEntry::default()
            },
        )
        .with(
            "publish",
            MemoryEntry {
                provider: Some(p("sam")),
                effect: CapabilityEffect::ExternalWrite,
                description: "Publish a post".into(),
                ..MemoryEntry::default()
            },
        )
        .with(
            "offline",
            MemoryEntry {
                provider: Some(p("sam")),
                available: false,
                description: "Not now".into(),
                ..MemoryEntry::default()
            },
        )
        .with(
            "orphan",
            MemoryEntry {
                description: "Nobody provides it".into(),
                ..MemoryEntry::default()
            },
        )
        .bind("research", &p("sam"))
}

#[test]
fn t2_a_missing_declared_output_is_named() {
    let declared = [
        output("code", OutputType::String),
        output("explanation", OutputType::String),
    ];
    let error = check_outputs(&declared, &object(json!({"explanation": "why"}))).unwrap_err();
    assert_eq!(
        error,
        OutputMismatch::Missing {
            name: "code".into()
        }
    );
    assert_eq!(error.to_string(), "declared output `code` is missing");
}

#[test]
fn t2_a_null_declared_output_counts_as_missing() {
    let declared = [output("code", OutputType::String)];
    assert_eq!(
        check_outputs(&declared, &object(json!({"code": null})))
            .unwrap_err()
            .to_string(),
        "declared output `code` is missing"
    );
}

#[test]
fn t2_a_wrongly_typed_declared_output_names_the_type_expected_and_found() {
    let declared = [output("count", OutputType::Number)];
    let error = check_outputs(&declared, &object(json!({"count": "3"}))).unwrap_err();
    assert_eq!(
        error,
        OutputMismatch::WrongType {
            name: "count".into(),
            expected: OutputType::Number,
            found: "a string",
        }
    );
    assert_eq!(
        error.to_string(),
        "declared output `count` must be a number, found a string"
    );
    let messages: Vec<String> = [
        (OutputType::String, json!(1)),
        (OutputType::Integer, json!(2.5)),
        (OutputType::Integer, json!("2")),
        (OutputType::Boolean, json!("true")),
        (OutputType::Object, json!([1])),
        (OutputType::Array, json!({"a": 1})),
    ]
    .into_iter()
    .map(|(kind, value)| {
        check_outputs(&[output("x", kind)], &object(json!({ "x": value })))
            .unwrap_err()
            .to_string()
    })
    .collect();
    assert_eq!(
        messages,
        [
            "declared output `x` must be a string, found a number",
            "declared output `x` must be an integer, found a number with a fraction",
            "declared output `x` must be an integer, found a string",
            "declared output `x` must be a boolean, found a string",
            "declared output `x` must be an object, found an array",
            "declared output `x` must be an array, found an object",
        ]
    );
}

#[test]
fn t2_the_first_declared_output_that_fails_is_named() {
    let declared = [
        output("a", OutputType::String),
        output("b", OutputType::Boolean),
        output("c", OutputType::String),
    ];
    assert_eq!(
        check_outputs(&declared, &object(json!({"a": "x", "b": 1}))).unwrap_err(),
        OutputMismatch::WrongType {
            name: "b".into(),
            expected: OutputType::Boolean,
            found: "a number",
        }
    );
}

#[test]
fn t2_outputs_given_but_not_declared_are_allowed() {
    let declared = [
        output("code", OutputType::String),
        output("lines", OutputType::Integer),
    ];
    let given = object(json!({"code": "fn main() {}", "lines": 1.0, "notes": [1, 2]}));
    assert_eq!(check_outputs(&declared, &given), Ok(()));
    assert_eq!(check_outputs(&[], &given), Ok(()));
    assert_eq!(check_outputs(&[], &Map::new()), Ok(()));
}

#[test]
fn t2_a_resolution_carries_the_declared_outputs_of_the_capability_finally_used() {
    let catalog = catalog();
    let task = TaskKey::parse("gen").unwrap();
    let inputs = object(json!({"language": "rust"}));
    let resolve = |capability| {
        catalog
            .resolve(ResolveRequest {
                plan: ObjectiveId::from_uuid(Uuid::from_u128(1)),
                task: &task,
                capability,
                inputs: &inputs,
            })
            .unwrap()
    };
    let direct = resolve("code-generation");
    assert_eq!(
        direct.outputs,
        [
            DeclaredOutput {
                name: "code".into(),
                kind: OutputType::String,
                description: Some("Generated source code".into()),
            },
            output("lines", OutputType::Integer),
        ]
    );
    // Through the deprecated name: the replacement's outputs, not the deprecated one's.
    let replaced = resolve("old-codegen");
    assert_eq!(replaced.capability, "code-generation");
    assert_eq!(replaced.provider, p("coder"));
    assert_eq!(replaced.outputs, direct.outputs);
    assert!(resolve("research").outputs.is_empty());
}

#[test]
fn c1_the_catalog_describes_every_capability_with_its_outputs_and_deprecation() {
    let described = catalog().describe();
    let names: Vec<&str> = described.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "code-generation",
            "offline",
            "old-codegen",
            "orphan",
            "publish",
            "research"
        ]
    );
    let old = described.iter().find(|c| c.name == "old-codegen").unwrap();
    assert_eq!(
        old,
        &CapabilityInfo {
            name: "old-codegen".into(),
            display_name: None,
            description: "The first code generator".into(),
            inputs: vec![],
            outputs: vec![output("source", OutputType::String)],
            phase: "Deprecated".into(),
            deprecation_message: Some("use code-generation".into()),
            replacement: Some("code-generation".into()),
            // Routed as resolution routes it: to the replacement's provider.
            provider: Some(p("coder")),
            effect: CapabilityEffect::ReadOrDraft,
        }
    );
    let generation = &described[0];
    assert_eq!(
        generation.inputs,
        [
            InputInfo {
                name: "language".into(),
                kind: "any".into(),
                required: true,
                default: None,
                enum_values: vec![],
                description: None,
            },
            InputInfo {
                name: "style".into(),
                kind: "string".into(),
                required: false,
                default: Some(json!("standard")),
                enum_values: vec![],
                description: None,
            },
        ]
    );
    let summary: Vec<String> = described
        .iter()
        .map(|c| {
            format!(
                "{} {} provider={:?} effect={:?} outputs={:?}",
                c.name,
                c.phase,
                c.provider.as_ref().map(PrincipalId::as_str),
                c.effect,
                c.outputs
                    .iter()
                    .map(|o| o.name.as_str())
                    .collect::<Vec<_>>(),
            )
        })
        .collect();
    expect![[r#"
        code-generation Available provider=Some("coder") effect=ReadOrDraft outputs=["code", "lines"]
        offline Unavailable provider=Some("sam") effect=ReadOrDraft outputs=[]
        old-codegen Deprecated provider=Some("coder") effect=ReadOrDraft outputs=["source"]
        orphan Available provider=None effect=ReadOrDraft outputs=[]
        publish Available provider=Some("sam") effect=ExternalWrite outputs=[]
        research Available provider=Some("sam") effect=ReadOrDraft outputs=[]
    "#]]
    .assert_eq(&(summary.join("\n") + "\n"));
}

#[test]
fn c1_a_description_is_the_same_on_every_call_and_reads_as_json() {
    let catalog = catalog();
    let first = catalog.describe();
    assert_eq!(first, catalog.describe());
    let generation = serde_json::to_value(&first[0]).unwrap();
    expect![[r#"
        {
          "deprecation_message": null,
          "description": "Generate code",
          "display_name": null,
          "effect": "read_or_draft",
          "inputs": [
            {
              "default": null,
              "description": null,
              "enum_values": [],
              "kind": "any",
              "name": "language",
              "required": true
            },
            {
              "default": "standard",
              "description": null,
              "enum_values": [],
              "kind": "string",
              "name": "style",
              "required": false
            }
          ],
          "name": "code-generation",
          "outputs": [
            {
              "description": "Generated source code",
              "kind": "string",
              "name": "code"
            },
            {
              "kind": "integer",
              "name": "lines"
            }
          ],
          "phase": "Available",
          "provider": "coder",
          "replacement": null
        }"#]]
    .assert_eq(&serde_json::to_string_pretty(&generation).unwrap());
    let back: Vec<CapabilityInfo> =
        serde_json::from_str(&serde_json::to_string(&first).unwrap()).unwrap();
    assert_eq!(back, first);
}

#[test]
fn c1_an_empty_catalog_describes_nothing() {
    assert!(MemoryCatalog::new().describe().is_empty());
}

/// Any JSON value, a few levels deep.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-1e6f64..1e6).prop_map(Value::from),
        "[a-z]{0,4}".prop_map(Value::from),
    ];
    leaf.prop_recursive(2, 8, 3, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            proptest::collection::btree_map("[a-z]{1,3}", inner, 0..3)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn output_type() -> impl Strategy<Value = OutputType> {
    prop_oneof![
        Just(OutputType::String),
        Just(OutputType::Number),
        Just(OutputType::Integer),
        Just(OutputType::Boolean),
        Just(OutputType::Object),
        Just(OutputType::Array),
    ]
}

proptest! {
    /// T2: a single declared output is accepted exactly when its value is of the declared type
    /// (and not null); otherwise the refusal names that output and, for a value present, the
    /// type it should have been.
    #[test]
    fn t2_a_declared_output_is_accepted_exactly_when_its_type_admits_it(
        kind in output_type(),
        value in json_value(),
        extra in json_value(),
    ) {
        let declared = [output("out", kind)];
        let given = object(json!({"out": value.clone(), "undeclared": extra}));
        let admitted = match (kind, &value) {
            (_, Value::Null) => false,
            (OutputType::String, v) => v.is_string(),
            (OutputType::Number, v) => v.is_number(),
            (OutputType::Integer, v) => {
                v.is_i64() || v.is_u64() || v.as_f64().is_some_and(|x| x.fract() == 0.0)
            }
            (OutputType::Boolean, v) => v.is_boolean(),
            (OutputType::Object, v) => v.is_object(),
            (OutputType::Array, v) => v.is_array(),
        };
        match check_outputs(&declared, &given) {
            Ok(()) => prop_assert!(admitted),
            Err(OutputMismatch::Missing { name }) => {
                prop_assert!(value.is_null());
                prop_assert_eq!(name, "out");
            }
            Err(error @ OutputMismatch::WrongType { .. }) => {
                prop_assert!(!admitted && !value.is_null());
                let expected = format!("declared output `out` must be {}, found ", kind.article());
                prop_assert!(error.to_string().starts_with(&expected), "{}", error);
            }
        }
    }
}
