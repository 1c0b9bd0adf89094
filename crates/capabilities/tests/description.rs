//! What the catalog says of its capabilities, from YAML: a resolution carries the declared
//! outputs of the capability finally used, typed as written (T2), and `describe` lists every
//! capability with its inputs, outputs, phase, deprecation and provider (C1).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

use agentroom_capabilities::Catalog;
use agentroom_domain::catalog::{
    CapabilityCatalog, CapabilityEffect, CapabilityInfo, DeclaredOutput, OutputType,
    ResolveRequest, Resolved, check_outputs,
};
use agentroom_domain::ids::{ObjectiveId, PrincipalId, TaskKey};
use expect_test::expect;
use serde_json::{Map, Value, json};
use uuid::Uuid;

/// The seed's examples, `network-access` (which `database-access` requires), their bindings,
/// and `described.yaml`.
fn catalog() -> Catalog {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let files: Vec<(String, String)> = [
        "seed_examples.yaml",
        "network_access.yaml",
        "bindings.yaml",
        "described.yaml",
    ]
    .into_iter()
    .map(|name| {
        let text = std::fs::read_to_string(dir.join(name)).unwrap();
        (name.to_owned(), text)
    })
    .collect();
    Catalog::parse(files.iter().map(|(n, t)| (n.as_str(), t.as_str())))
        .unwrap_or_else(|e| panic!("{e}"))
}

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

fn resolve(catalog: &Catalog, capability: &str, inputs: Value) -> Resolved {
    let task = TaskKey::parse("t").unwrap();
    catalog
        .resolve(ResolveRequest {
            plan: ObjectiveId::from_uuid(Uuid::from_u128(1)),
            task: &task,
            capability,
            inputs: &object(inputs),
        })
        .unwrap_or_else(|refusal| panic!("{capability}: {refusal}"))
}

fn declared(name: &str, kind: OutputType, description: Option<&str>) -> DeclaredOutput {
    DeclaredOutput {
        name: name.to_owned(),
        kind,
        description: description.map(str::to_owned),
    }
}

#[test]
fn t2_a_resolution_carries_the_declared_outputs_typed_as_written() {
    let catalog = catalog();
    let tests = resolve(&catalog, "test-execution", json!({}));
    assert_eq!(
        tests.outputs,
        [
            declared(
                "passed",
                OutputType::Boolean,
                Some("Whether all tests passed")
            ),
            declared("summary", OutputType::Object, Some("Test results summary")),
        ]
    );
    let lines = resolve(&catalog, "tools/line-count", json!({"path": "a.rs"}));
    assert_eq!(
        lines.outputs,
        [declared(
            "lines",
            OutputType::Integer,
            Some("How many lines")
        )]
    );
    // The outputs travel to the check a contribution meets.
    assert_eq!(
        check_outputs(&lines.outputs, &object(json!({"lines": "12"})))
            .unwrap_err()
            .to_string(),
        "declared output `lines` must be an integer, found a string"
    );
    assert!(check_outputs(&lines.outputs, &object(json!({"lines": 12}))).is_ok());
    assert!(
        resolve(&catalog, "database-access", json!({"dialect": "sqlite"}))
            .outputs
            .len()
            == 1
    );
}

#[test]
fn t2_a_deprecated_name_resolves_to_the_outputs_of_its_replacement() {
    let catalog = catalog();
    let resolved = resolve(&catalog, "codegen-v1", json!({"language": "rust"}));
    assert_eq!(resolved.capability, "code-generation");
    assert_eq!(
        resolved.replacements,
        [("codegen-v1".to_owned(), "code-generation".to_owned())]
    );
    let names: Vec<&str> = resolved.outputs.iter().map(|o| o.name.as_str()).collect();
    assert_eq!(names, ["code", "explanation"]);
}

#[test]
fn c1_the_catalog_describes_every_capability_with_its_outputs_and_deprecation() {
    let described = catalog().describe();
    let summary: Vec<String> = described
        .iter()
        .map(|c| {
            format!(
                "{} [{}] provider={} effect={:?} inputs={:?} outputs={:?}",
                c.name,
                c.phase,
                c.provider.as_ref().map_or("-", PrincipalId::as_str),
                c.effect,
                c.inputs
                    .iter()
                    .map(|i| format!("{}:{}{}", i.name, i.kind, if i.required { "!" } else { "" }))
                    .collect::<Vec<_>>(),
                c.outputs
                    .iter()
                    .map(|o| format!("{}:{}", o.name, o.kind))
                    .collect::<Vec<_>>(),
            )
        })
        .collect();
    expect![[r#"
        announce [Available] provider=- effect=ExternalWrite inputs=[] outputs=[]
        code-generation [Available] provider=coder effect=ReadOrDraft inputs=["language:string!", "framework:string", "style:string", "files:array"] outputs=["code:string", "explanation:string"]
        codegen-v1 [Deprecated] provider=coder effect=ReadOrDraft inputs=[] outputs=["source:string"]
        database-access [Available] provider=dba effect=ReadOrDraft inputs=["dialect:string!", "readOnly:boolean", "connectionConfig:object"] outputs=["results:object"]
        network-access [Available] provider=- effect=ReadOrDraft inputs=["host:string!", "timeoutSeconds:integer"] outputs=[]
        release-notes [Available] provider=- effect=ExternalWrite inputs=[] outputs=[]
        test-execution [Available] provider=tester effect=ReadOrDraft inputs=["testPattern:string", "coverage:boolean", "parallel:number"] outputs=["passed:boolean", "summary:object"]
        tools/line-count [Available] provider=counter effect=ReadOrDraft inputs=["path:string!"] outputs=["lines:integer"]
    "#]].assert_eq(&(summary.join("\n") + "\n"));

    let old = described.iter().find(|c| c.name == "codegen-v1").unwrap();
    assert_eq!(
        old,
        &CapabilityInfo {
            name: "codegen-v1".into(),
            display_name: None,
            description: "The first code generator".into(),
            inputs: vec![],
            outputs: vec![declared("source", OutputType::String, None)],
            phase: "Deprecated".into(),
            deprecation_message: Some(
                "codegen-v1 writes no explanation; use code-generation".into()
            ),
            replacement: Some("code-generation".into()),
            // Routed as resolution routes it: by the replacement's binding.
            provider: Some(PrincipalId::parse("coder").unwrap()),
            effect: CapabilityEffect::ReadOrDraft,
        }
    );
}

#[test]
fn c1_inputs_are_described_with_type_required_default_and_enum() {
    let described = catalog().describe();
    let generation = described
        .iter()
        .find(|c| c.name == "code-generation")
        .unwrap();
    expect![[r#"
        {
          "name": "code-generation",
          "display_name": "Code Generation",
          "description": "Generate code in specified programming languages",
          "inputs": [
            {
              "name": "language",
              "kind": "string",
              "required": true,
              "default": null,
              "enum_values": [
                "typescript",
                "python",
                "go",
                "rust",
                "java"
              ],
              "description": "Target programming language"
            },
            {
              "name": "framework",
              "kind": "string",
              "required": false,
              "default": null,
              "enum_values": [],
              "description": "Framework or library context"
            },
            {
              "name": "style",
              "kind": "string",
              "required": false,
              "default": "standard",
              "enum_values": [],
              "description": "Code style guidelines to follow"
            },
            {
              "name": "files",
              "kind": "array",
              "required": false,
              "default": null,
              "enum_values": [],
              "description": "Existing files for context"
            }
          ],
          "outputs": [
            {
              "name": "code",
              "kind": "string",
              "description": "Generated source code"
            },
            {
              "name": "explanation",
              "kind": "string",
              "description": "Explanation of the generated code"
            }
          ],
          "phase": "Available",
          "deprecation_message": null,
          "replacement": null,
          "provider": "coder",
          "effect": "read_or_draft"
        }"#]]
    .assert_eq(&serde_json::to_string_pretty(generation).unwrap());
}

#[test]
fn c1_a_description_is_sorted_by_name_and_the_same_on_every_call() {
    let catalog = catalog();
    let first = catalog.describe();
    let mut names: Vec<&str> = first.iter().map(|c| c.name.as_str()).collect();
    let listed = names.clone();
    names.sort_unstable();
    assert_eq!(listed, names);
    assert_eq!(first, catalog.describe());
    assert!(Catalog::default().describe().is_empty());
}
