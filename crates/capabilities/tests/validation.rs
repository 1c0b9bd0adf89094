//! Validation of Capability and Binding files: the seed's examples are valid, and every file of
//! the invalid corpus (`tests/fixtures/invalid/`) fails with exactly the error its first line
//! (`# expect: ...`) names.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use agentroom_capabilities::{
    CapabilityRef, Catalog, ErrorKind, Format, Phase, ResolveError, Resources, Selector, ValueType,
};
use agentroom_domain::catalog::CapabilityEffect;
use serde_json::json;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn fixture(name: &str) -> (String, String) {
    let text = std::fs::read_to_string(fixtures().join(name)).unwrap();
    (name.to_owned(), text)
}

fn parse(files: &[(String, String)]) -> Result<Catalog, agentroom_capabilities::ResourceErrors> {
    Catalog::parse(files.iter().map(|(n, t)| (n.as_str(), t.as_str())))
}

fn r(name: &str) -> CapabilityRef {
    CapabilityRef::parse(name).unwrap()
}

#[test]
fn the_seed_examples_validate() {
    let resources = Resources::parse("seed_examples.yaml", &fixture("seed_examples.yaml").1)
        .unwrap_or_else(|e| panic!("{e}"));
    let names: Vec<&str> = resources
        .capabilities()
        .iter()
        .map(|c| c.metadata().name())
        .collect();
    assert_eq!(
        names,
        ["code-generation", "database-access", "test-execution"]
    );

    let code = &resources.capabilities()[0];
    assert_eq!(code.metadata().labels()["category"], "code");
    assert_eq!(code.spec().display_name(), Some("Code Generation"));
    assert_eq!(code.status().phase(), Phase::Available);
    assert_eq!(code.effect(), CapabilityEffect::ReadOrDraft);
    let language = &code.spec().inputs()[0];
    assert_eq!(language.name(), "language");
    assert!(language.schema().required());
    assert_eq!(
        language.schema().allowed().unwrap(),
        [
            json!("typescript"),
            json!("python"),
            json!("go"),
            json!("rust"),
            json!("java")
        ]
    );
    assert_eq!(
        code.spec().inputs()[2].schema().default(),
        Some(&json!("standard"))
    );
    assert_eq!(
        code.spec().inputs()[3].schema().item_type(),
        Some(ValueType::String)
    );

    let database = &resources.capabilities()[1];
    let connection = &database.spec().inputs()[2];
    assert_eq!(connection.name(), "connectionConfig");
    let properties = connection.schema().properties();
    assert_eq!(
        properties.keys().collect::<Vec<_>>(),
        ["database", "host", "port"]
    );
    assert_eq!(properties["port"].value_type(), ValueType::Number);
    let requirement = &database.spec().requirements()[0];
    assert_eq!(requirement.capability(), &r("network-access"));
    assert!(!requirement.optional());

    let tests = &resources.capabilities()[2];
    assert_eq!(
        tests.spec().inputs()[1].schema().default(),
        Some(&json!(false))
    );
    assert_eq!(tests.spec().outputs()[1].value_type(), ValueType::Object);
}

#[test]
fn the_seed_examples_resolve_once_their_requirements_are_defined() {
    let seed = fixture("seed_examples.yaml");
    let bindings = fixture("bindings.yaml");

    // database-access requires network-access, which the seed does not define.
    let catalog = parse(&[seed.clone(), bindings.clone()]).unwrap();
    assert_eq!(
        catalog.resolution("database-access", None).unwrap_err(),
        ResolveError::RequirementMissing {
            capability: r("database-access"),
            requirement: r("network-access"),
        }
    );
    for (name, provider) in [("code-generation", "coder"), ("test-execution", "tester")] {
        let resolution = catalog.resolution(name, None).unwrap();
        assert_eq!(resolution.provider().as_str(), provider);
    }

    let catalog = parse(&[seed, fixture("network_access.yaml"), bindings]).unwrap();
    let resolution = catalog.resolution("database-access", None).unwrap();
    assert_eq!(resolution.provider().as_str(), "dba");
    assert_eq!(resolution.requirements(), [r("network-access")]);
    // network-access's own requirement is optional and not defined.
    assert_eq!(resolution.missing_optional(), [r("dns-lookup")]);
    assert_eq!(resolution.effect(), CapabilityEffect::ReadOrDraft);
    let rule = catalog.resolution("code-generation", None).unwrap();
    assert_eq!(rule.rule().config()["model"], json!("small"));
}

#[test]
fn real_file_variants_are_accepted_and_unknown_fields_kept() {
    let (name, text) = fixture("network_access.yaml");
    let resources = Resources::parse(&name, &text).unwrap();
    let network = &resources.capabilities()[0];
    assert_eq!(network.spec().extra()["x-owner"], json!("platform-team"));
    let timeout = &network.spec().inputs()[1];
    assert_eq!(timeout.schema().value_type(), ValueType::Integer);
    assert_eq!(timeout.schema().default(), Some(&json!(30)));
    assert_eq!(
        network.spec().inputs()[0].schema().format(),
        Some(&Format::Uri)
    );
    let requirement = &network.spec().requirements()[0];
    assert_eq!(requirement.capability(), &r("dns-lookup"));
    assert!(requirement.optional());
}

#[test]
fn bindings_read_both_selector_forms() {
    let (name, text) = fixture("bindings.yaml");
    let resources = Resources::parse(&name, &text).unwrap();
    let rules = resources.bindings()[0].rules();
    let selectors: Vec<&Selector> = rules.iter().map(|r| r.selector()).collect();
    assert_eq!(
        selectors,
        [
            &Selector::Capability(r("code-generation")),
            &Selector::Capability(r("database-access")),
            &Selector::Capability(r("test-execution")),
        ]
    );
    assert_eq!(rules[2].provider().as_str(), "tester");
}

/// Every file of the corpus fails with one error, the one its first line names.
#[test]
fn every_invalid_file_fails_with_the_error_that_names_its_fault() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(fixtures().join("invalid"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(files.len() >= 40, "the corpus shrank: {}", files.len());
    let mut failures = Vec::new();
    for path in files {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&path).unwrap();
        let expect = text
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("# expect: "))
            .unwrap_or_else(|| panic!("{name} has no `# expect:` line"));
        match Catalog::parse([(name.as_str(), text.as_str())]) {
            Ok(_) => failures.push(format!("{name}: accepted")),
            Err(errors) => {
                let shown: Vec<String> = errors.errors().iter().map(ToString::to_string).collect();
                if shown.len() != 1 || !shown[0].contains(expect) {
                    failures.push(format!(
                        "{name}\n  expected: {expect}\n  got:      {}",
                        shown.join("\n            ")
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

#[test]
fn errors_of_several_files_are_all_reported_in_file_order() {
    let bad_type = "apiVersion: planspec.io/v1alpha1\nkind: Capability\nmetadata: {name: a, namespace: default}\nspec:\n  description: d\n  inputs: [{name: x, type: text}]\n";
    let bad_kind = "apiVersion: planspec.io/v1alpha1\nkind: Capabilities\n";
    let errors = Catalog::parse([("b.yaml", bad_kind), ("a.yaml", bad_type)]).unwrap_err();
    let files: Vec<&str> = errors
        .errors()
        .iter()
        .map(|e| e.location().file())
        .collect();
    assert_eq!(files, ["a.yaml", "b.yaml"]);
    let first = &errors.errors()[0];
    assert_eq!(first.location().path(), "spec.inputs[0].type");
    assert_eq!(
        (first.location().line(), first.location().column()),
        (6, 28)
    );
    assert!(matches!(first.kind(), ErrorKind::Expected { .. }));
}

#[test]
fn one_document_may_hold_many_problems_and_all_are_listed() {
    let text = "apiVersion: planspec.io/v2\nkind: Capability\nmetadata: {name: Bad, namespace: default}\nspec:\n  inputs: [{name: x, type: text}]\n";
    let errors = Resources::parse("many.yaml", text).unwrap_err();
    let paths: Vec<&str> = errors
        .errors()
        .iter()
        .map(|e| e.location().path())
        .collect();
    assert_eq!(
        paths,
        [
            "apiVersion",
            "metadata.name",
            "spec.description",
            "spec.inputs[0].type"
        ]
    );
}

#[test]
fn empty_documents_and_comments_are_skipped() {
    let text = "# nothing here\n---\n---\n";
    let resources = Resources::parse("empty.yaml", text).unwrap();
    assert!(resources.capabilities().is_empty() && resources.bindings().is_empty());
}

#[test]
fn capabilities_and_bindings_may_share_one_file() {
    let (_, caps) = fixture("seed_examples.yaml");
    let (_, binds) = fixture("bindings.yaml");
    let both = format!("{caps}---\n{binds}");
    let catalog = Catalog::parse([("all.yaml", both.as_str())]).unwrap();
    assert_eq!(catalog.registry().len(), 3);
    assert_eq!(catalog.bindings().len(), 3);
}

#[test]
fn the_same_name_in_two_namespaces_is_two_capabilities() {
    let text = "apiVersion: planspec.io/v1alpha1\nkind: Capability\nmetadata: {name: search, namespace: default}\nspec: {description: d}\n---\napiVersion: planspec.io/v1alpha1\nkind: Capability\nmetadata: {name: search, namespace: web}\nspec: {description: d}\n";
    let catalog = Catalog::parse([("ns.yaml", text)]).unwrap();
    assert!(catalog.registry().get(&r("search")).is_some());
    assert!(catalog.registry().get(&r("web/search")).is_some());
    assert_eq!(r("web/search").to_string(), "web/search");
    assert_eq!(r("search").to_string(), "search");
}

#[test]
fn conflicts_among_valid_resources_are_listed_beside_invalid_documents() {
    let (conflict_name, conflict) = {
        let path = fixtures().join("invalid/binding_conflict.yaml");
        ("conflict.yaml", std::fs::read_to_string(path).unwrap())
    };
    let broken = "apiVersion: planspec.io/v1alpha1\nkind: Binding\n";
    let errors =
        Catalog::parse([(conflict_name, conflict.as_str()), ("broken.yaml", broken)]).unwrap_err();
    let kinds: Vec<(&str, bool)> = errors
        .errors()
        .iter()
        .map(|e| {
            (
                e.location().file(),
                matches!(e.kind(), ErrorKind::Conflict { .. }),
            )
        })
        .collect();
    // broken.yaml lacks `metadata` and `spec`.
    assert_eq!(
        kinds,
        [
            ("broken.yaml", false),
            ("broken.yaml", false),
            ("conflict.yaml", true)
        ]
    );
}

#[test]
fn the_shipped_policies_validate_and_route_the_demo_capabilities() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../policies");
    let files: Vec<(String, String)> = [
        "capabilities/research.yaml",
        "capabilities/writing.yaml",
        "bindings.yaml",
    ]
    .iter()
    .map(|f| {
        (
            (*f).to_owned(),
            std::fs::read_to_string(root.join(f)).unwrap(),
        )
    })
    .collect();
    let catalog = parse(&files).unwrap_or_else(|e| panic!("{e}"));
    let provider = |name| {
        catalog
            .resolution(name, None)
            .unwrap()
            .provider()
            .to_string()
    };
    assert_eq!(provider("research"), "sam");
    assert_eq!(provider("writing"), "sue");
    assert_eq!(
        catalog.resolution("publish", None).unwrap().effect(),
        CapabilityEffect::ExternalWrite
    );
}
