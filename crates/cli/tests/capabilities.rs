//! `agentroom capabilities validate|resolve`, run as the built binary: exit 0 when valid or
//! resolved, exit 2 listing every error (each naming its file) or the reason.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn policy(file: &str) -> String {
    root().join("policies").join(file).display().to_string()
}

fn agentroom(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_agentroom"))
        .arg("capabilities")
        .args(args)
        .output()
        .unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).unwrap()
}

/// Writes `text` to a fresh file under the test's scratch folder.
fn scratch(name: &str, text: &str) -> String {
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("cli-capabilities-{name}"));
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

#[test]
fn validate_accepts_the_shipped_policies() {
    let out = agentroom(&[
        "validate",
        &policy("capabilities/research.yaml"),
        &policy("capabilities/writing.yaml"),
        &policy("bindings.yaml"),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "valid: 4 capabilities, 3 binding rules in 3 files\n"
    );
}

#[test]
fn validate_lists_every_error_naming_its_file_and_exits_2() {
    let bad_type = scratch(
        "bad-type.yaml",
        "apiVersion: planspec.io/v1alpha1\nkind: Capability\nmetadata: {name: a, namespace: default}\nspec:\n  description: d\n  inputs: [{name: x, type: text}]\n",
    );
    let bad_name = scratch(
        "bad-name.yaml",
        "apiVersion: planspec.io/v1alpha1\nkind: Capability\nmetadata: {name: Not_A_Label, namespace: default}\nspec: {description: d}\n",
    );
    let missing = root().join("no-such-file.yaml").display().to_string();
    let out = agentroom(&["validate", &bad_type, &bad_name, &missing]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(stdout(&out), "");
    let err = stderr(&out);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 4, "{err}");
    assert!(
        lines.iter().any(|l| l.starts_with(&format!(
            "{bad_type}: document 1, line 6, column 28, field `spec.inputs[0].type`: expected one of"
        ))),
        "{err}"
    );
    assert!(
        lines.iter().any(|l| l.starts_with(&format!(
            "{bad_name}: document 1, line 3, column 18, field `metadata.name`: expected a DNS label"
        ))),
        "{err}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with(&format!("{missing}: cannot read"))),
        "{err}"
    );
    assert_eq!(lines[3], "error: 3 errors found");
}

#[test]
fn resolve_prints_the_provider_a_binding_names() {
    let out = agentroom(&["resolve", "--bindings", &policy("bindings.yaml"), "writing"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "sue\n");
}

#[test]
fn resolve_with_capabilities_follows_deprecations_and_notes_them() {
    let caps = scratch(
        "deprecated.yaml",
        "apiVersion: planspec.io/v1alpha1\nkind: Capability\nmetadata: {name: old-research, namespace: default}\nspec: {description: d}\nstatus: {phase: Deprecated, replacement: {name: research}}\n",
    );
    let out = agentroom(&[
        "resolve",
        "--bindings",
        &policy("bindings.yaml"),
        "--capabilities",
        &policy("capabilities/research.yaml"),
        "--capabilities",
        &caps,
        "old-research",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "sam\n");
    assert_eq!(
        stderr(&out),
        "note: `old-research` is deprecated; replaced by `research`\n"
    );
}

#[test]
fn resolve_exits_2_with_the_reason() {
    let bindings = policy("bindings.yaml");
    let research = policy("capabilities/research.yaml");
    for (args, reason) in [
        (
            vec!["resolve", "--bindings", &bindings, "web-fetch"],
            "error: cannot resolve `web-fetch`: no binding names a provider for `web-fetch`\n",
        ),
        (
            vec![
                "resolve",
                "--bindings",
                &bindings,
                "--capabilities",
                &research,
                "telepathy",
            ],
            "error: cannot resolve `telepathy`: no such capability `telepathy`\n",
        ),
        (
            vec!["resolve", "--bindings", &bindings, "Bad Name"],
            "error: cannot resolve `Bad Name`: not a capability name (`name` or `namespace/name`)\n",
        ),
    ] {
        let out = agentroom(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert_eq!(stdout(&out), "");
        assert_eq!(stderr(&out), reason);
    }
}

#[test]
fn resolve_honours_a_node_rule_for_its_plan_and_node() {
    let plan = "7f1c1f0e-2a7c-4a8e-9d0e-3b1f2c4d5e6f";
    let node_rule = scratch(
        "node-rule.yaml",
        &format!(
            "apiVersion: planspec.io/v1alpha1\nkind: Binding\nmetadata: {{name: one-task, namespace: default}}\nspec:\n  rules:\n    - {{planRef: {{name: {plan}}}, nodeId: gather, target: {{provider: rita}}}}\n"
        ),
    );
    let bindings = policy("bindings.yaml");
    let base = ["resolve", "--bindings", &bindings, "--bindings", &node_rule];
    let run = |extra: &[&str]| {
        let mut args = base.to_vec();
        args.extend_from_slice(extra);
        let out = agentroom(&args);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        stdout(&out)
    };
    assert_eq!(
        run(&["--plan", plan, "--node", "gather", "research"]),
        "rita\n"
    );
    assert_eq!(
        run(&["--plan", plan, "--node", "write", "research"]),
        "sam\n"
    );
    assert_eq!(run(&["research"]), "sam\n");
}

#[test]
fn resolve_refuses_conflicting_rules_naming_both() {
    let twice = scratch(
        "twice.yaml",
        "apiVersion: planspec.io/v1alpha1\nkind: Binding\nmetadata: {name: again, namespace: default}\nspec:\n  rules:\n    - {capabilityRef: research, target: {provider: sue}}\n",
    );
    let out = agentroom(&[
        "resolve",
        "--bindings",
        &policy("bindings.yaml"),
        "--bindings",
        &twice,
        "research",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("conflicting binding rules: capability `research` is already bound at"),
        "{err}"
    );
    assert!(err.contains(&policy("bindings.yaml")), "{err}");
}
