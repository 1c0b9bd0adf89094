//! Resolution without the engine: replacements, requirements, bindings, effects, and the
//! refusals the domain receives.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use agentroom_capabilities::{CapabilityRef, Catalog, ErrorKind, ResolveError};
use agentroom_domain::catalog::{CapabilityCatalog, CapabilityEffect, Refusal, ResolveRequest};
use agentroom_domain::ids::{ObjectiveId, TaskKey};
use proptest::prelude::*;
use serde_json::Map;
use uuid::Uuid;

/// A capability document: `name`, then optional `status` and `spec` lines.
fn cap(name: &str, status: &str, spec: &str) -> String {
    format!(
        "apiVersion: planspec.io/v1alpha1\nkind: Capability\nmetadata: {{name: {name}, namespace: default}}\nspec:\n  description: {name}\n{spec}{status}---\n"
    )
}

fn deprecated(name: &str, replacement: &str) -> String {
    cap(
        name,
        &format!("status: {{phase: Deprecated, replacement: {{name: {replacement}}}}}\n"),
        "",
    )
}

fn bind(pairs: &[(&str, &str)]) -> String {
    let mut text = "apiVersion: planspec.io/v1alpha1\nkind: Binding\nmetadata: {name: all, namespace: default}\nspec:\n  rules:\n".to_owned();
    for (capability, provider) in pairs {
        text.push_str(&format!(
            "    - {{capabilityRef: {capability}, target: {{provider: {provider}}}}}\n"
        ));
    }
    text
}

fn catalog(capabilities: &str, bindings: &str) -> Catalog {
    Catalog::parse([("caps.yaml", capabilities), ("binds.yaml", bindings)])
        .unwrap_or_else(|e| panic!("{e}"))
}

fn r(name: &str) -> CapabilityRef {
    CapabilityRef::parse(name).unwrap()
}

#[test]
fn a_missing_replacement_is_refused_naming_both() {
    let c = catalog(&deprecated("old", "new"), &bind(&[("old", "sam")]));
    assert_eq!(
        c.resolution("old", None).unwrap_err(),
        ResolveError::ReplacementMissing {
            deprecated: r("old"),
            replacement: r("new"),
        }
    );
}

#[test]
fn a_deprecated_capability_without_replacement_is_still_served() {
    let c = catalog(
        &cap(
            "old",
            "status: {phase: Deprecated, deprecationMessage: going}\n",
            "",
        ),
        &bind(&[("old", "sam")]),
    );
    let resolution = c.resolution("old", None).unwrap();
    assert_eq!(resolution.capability(), &r("old"));
    assert!(resolution.replacements().is_empty());
}

#[test]
fn the_binding_of_the_replacement_is_used_not_that_of_the_deprecated_name() {
    let caps = deprecated("old", "new") + &cap("new", "", "");
    let c = catalog(&caps, &bind(&[("old", "sam")]));
    assert_eq!(
        c.resolution("old", None).unwrap_err(),
        ResolveError::Unbound {
            capability: r("new")
        }
    );
    let c = catalog(&caps, &bind(&[("new", "sue")]));
    let resolution = c.resolution("old", None).unwrap();
    assert_eq!(resolution.provider().as_str(), "sue");
    assert_eq!(resolution.replacements(), [(r("old"), r("new"))]);
}

#[test]
fn a_replacement_that_is_unavailable_is_refused() {
    let caps = deprecated("old", "new") + &cap("new", "status: {phase: Unavailable}\n", "");
    let c = catalog(&caps, &bind(&[("new", "sam")]));
    assert_eq!(
        c.resolution("old", None).unwrap_err(),
        ResolveError::Unavailable {
            capability: r("new")
        }
    );
}

#[test]
fn a_requirement_cycle_behind_a_missing_requirement_is_still_refused() {
    // a requires x (not defined) before b, and b requires a: the cycle is reported even
    // though resolving a stops at the missing x.
    let caps = cap("a", "", "  requirements: [{name: x}, {name: b}]\n")
        + &cap("b", "", "  requirements: [{name: a}]\n");
    let errors = Catalog::parse([("caps.yaml", caps.as_str())]).unwrap_err();
    assert!(
        errors.errors().iter().any(
            |e| matches!(e.kind(), ErrorKind::RequirementCycle(chain) if chain == &["a", "b", "a"])
        ),
        "{errors}"
    );
}

#[test]
fn requirements_resolve_transitively_through_replacements() {
    let caps = cap("a", "", "  requirements: [{name: b}]\n")
        + &cap("b", "", "  requirements: [{capability: old-c}]\n")
        + &deprecated("old-c", "c")
        + &cap(
            "c",
            "",
            "  requirements: [{name: d, optional: true}, {name: b}]\n",
        );
    // c requires b again: a cycle b -> old-c(c) -> b, refused when the catalog is built.
    let errors = Catalog::parse([("caps.yaml", caps.as_str())]).unwrap_err();
    assert!(
        matches!(errors.errors()[0].kind(), ErrorKind::RequirementCycle(chain) if chain == &["b", "c", "b"]),
        "{errors}"
    );

    let caps = cap("a", "", "  requirements: [{name: b}]\n")
        + &cap("b", "", "  requirements: [{capability: old-c}]\n")
        + &deprecated("old-c", "c")
        + &cap("c", "", "  requirements: [{name: d, optional: true}]\n");
    let c = catalog(&caps, &bind(&[("a", "sam")]));
    let resolution = c.resolution("a", None).unwrap();
    assert_eq!(resolution.requirements(), [r("b"), r("c")]);
    assert_eq!(resolution.replacements(), [(r("old-c"), r("c"))]);
    assert_eq!(resolution.missing_optional(), [r("d")]);
}

#[test]
fn an_unavailable_requirement_refuses_unless_optional() {
    let down = cap("down", "status: {phase: Unavailable}\n", "");
    let c = catalog(
        &(cap("a", "", "  requirements: [down]\n") + &down),
        &bind(&[("a", "sam")]),
    );
    assert_eq!(
        c.resolution("a", None).unwrap_err(),
        ResolveError::RequirementUnavailable {
            capability: r("a"),
            requirement: r("down"),
        }
    );
    let c = catalog(
        &(cap("a", "", "  requirements: [{name: down, optional: true}]\n") + &down),
        &bind(&[("a", "sam")]),
    );
    assert_eq!(
        c.resolution("a", None).unwrap().missing_optional(),
        [r("down")]
    );
}

#[test]
fn capabilities_in_other_namespaces_are_asked_for_as_namespace_slash_name() {
    let caps = "apiVersion: planspec.io/v1alpha1\nkind: Capability\nmetadata: {name: search, namespace: web}\nspec:\n  description: d\n  requirements: [{name: fetch}]\n---\napiVersion: planspec.io/v1alpha1\nkind: Capability\nmetadata: {name: fetch, namespace: web}\nspec: {description: d}\n";
    let binds = "apiVersion: planspec.io/v1alpha1\nkind: Binding\nmetadata: {name: web, namespace: web}\nspec:\n  rules:\n    - {capabilityRef: search, target: {provider: sam}}\n";
    let c = catalog(caps, binds);
    let resolution = c.resolution("web/search", None).unwrap();
    assert_eq!(resolution.provider().as_str(), "sam");
    // A requirement without a namespace is in the capability's own.
    assert_eq!(resolution.requirements(), [r("web/fetch")]);
    assert_eq!(resolution.capability().to_string(), "web/search");
    assert!(matches!(
        c.resolution("search", None),
        Err(ResolveError::Unknown { .. })
    ));
    assert!(matches!(
        c.resolution("Web/Search", None),
        Err(ResolveError::BadName { .. })
    ));
}

#[test]
fn a_node_rule_applies_only_to_its_plan_and_node() {
    let plan = ObjectiveId::from_uuid(Uuid::from_u128(7));
    let binds = format!(
        "apiVersion: planspec.io/v1alpha1\nkind: Binding\nmetadata: {{name: b, namespace: default}}\nspec:\n  rules:\n    - {{capabilityRef: a, target: {{provider: sam}}}}\n    - {{planRef: '{plan}', nodeId: special, target: {{provider: sue}}}}\n"
    );
    let c = catalog(&cap("a", "", ""), &binds);
    let special = TaskKey::parse("special").unwrap();
    let other = TaskKey::parse("other").unwrap();
    let another_plan = ObjectiveId::from_uuid(Uuid::from_u128(8));
    let provider = |plan, node| {
        c.resolution("a", Some((plan, node)))
            .unwrap()
            .provider()
            .to_string()
    };
    assert_eq!(provider(plan, &special), "sue");
    assert_eq!(provider(plan, &other), "sam");
    assert_eq!(provider(another_plan, &special), "sam");
}

#[test]
fn refusals_map_onto_the_domain_variants() {
    let caps = cap("down", "status: {phase: Unavailable}\n", "")
        + &cap("free", "", "")
        + &cap("needy", "", "  requirements: [ghost]\n")
        + &cap(
            "typed",
            "",
            "  inputs: [{name: n, type: integer, required: true}]\n",
        );
    let c = catalog(
        &caps,
        &bind(&[("down", "sam"), ("needy", "sam"), ("typed", "sam")]),
    );
    let task = TaskKey::parse("t").unwrap();
    let inputs = Map::new();
    let refuse = |capability: &str| {
        c.resolve(ResolveRequest {
            plan: ObjectiveId::from_uuid(Uuid::from_u128(1)),
            task: &task,
            capability,
            inputs: &inputs,
        })
        .unwrap_err()
    };
    assert_eq!(refuse("nothing"), Refusal::Unknown);
    assert_eq!(refuse("Not A Name"), Refusal::Unknown);
    assert_eq!(refuse("down"), Refusal::Unavailable);
    assert_eq!(refuse("free"), Refusal::Unbound);
    assert_eq!(
        refuse("needy"),
        Refusal::Other("`needy` requires `ghost`, which is not defined".into())
    );
    assert_eq!(
        refuse("typed"),
        Refusal::InvalidInputs("`n`: expected an integer (it is required), found nothing".into())
    );
}

#[test]
fn the_effect_annotation_decides_the_effect() {
    let annotated = |name: &str, effect: &str| {
        format!(
            "apiVersion: planspec.io/v1alpha1\nkind: Capability\nmetadata:\n  name: {name}\n  namespace: default\n  annotations: {{agentroom.io/effect: {effect}}}\nspec: {{description: d}}\n---\n"
        )
    };
    let caps = annotated("reader", "read")
        + &annotated("drafter", "draft")
        + &annotated("writer", "external-write");
    let c = catalog(
        &caps,
        &bind(&[("reader", "sam"), ("drafter", "sam"), ("writer", "sam")]),
    );
    let effect = |name| c.resolution(name, None).unwrap().effect();
    assert_eq!(effect("reader"), CapabilityEffect::ReadOrDraft);
    assert_eq!(effect("drafter"), CapabilityEffect::ReadOrDraft);
    assert_eq!(effect("writer"), CapabilityEffect::ExternalWrite);
}

proptest! {
    /// Whatever the replacement edges, building the catalog either refuses with a replacement
    /// cycle, or every capability resolves (or is refused) without following any capability
    /// twice.
    #[test]
    fn replacement_chains_terminate_and_cycles_are_refused(
        edges in proptest::collection::vec(proptest::option::of(0usize..6), 6)
    ) {
        let name = |i: usize| format!("c{i}");
        let mut caps = String::new();
        for (i, edge) in edges.iter().enumerate() {
            caps.push_str(&match edge {
                Some(j) => deprecated(&name(i), &name(*j)),
                None => cap(&name(i), "", ""),
            });
        }
        let pairs: Vec<(String, &str)> = (0..6).map(|i| (name(i), "sam")).collect();
        let pairs: Vec<(&str, &str)> = pairs.iter().map(|(c, p)| (c.as_str(), *p)).collect();
        let binds = bind(&pairs);
        // Is there a cycle? Follow from every node at most 6 steps.
        let cyclic = (0..6).any(|start| {
            let mut at = start;
            for _ in 0..=6 {
                match edges[at] {
                    Some(next) => at = next,
                    None => return false,
                }
            }
            true
        });
        match Catalog::parse([("caps.yaml", caps.as_str()), ("binds.yaml", binds.as_str())]) {
            Err(errors) => {
                prop_assert!(cyclic, "{}", errors);
                prop_assert!(errors.errors().iter().all(|e| matches!(e.kind(), ErrorKind::ReplacementCycle(_))));
            }
            Ok(c) => {
                prop_assert!(!cyclic);
                for i in 0..6 {
                    let resolution = c.resolution(&name(i), None).unwrap();
                    let mut seen = vec![resolution.requested().clone()];
                    for (from, to) in resolution.replacements() {
                        prop_assert_eq!(from, seen.last().unwrap());
                        prop_assert!(!seen.contains(to));
                        seen.push(to.clone());
                    }
                    prop_assert_eq!(seen.last().unwrap(), resolution.capability());
                }
            }
        }
    }

    /// Parsing never panics, whatever the text.
    #[test]
    fn parsing_arbitrary_text_never_panics(text in "\\PC{0,200}") {
        let _ = Catalog::parse([("any.yaml", text.as_str())]);
    }
}
