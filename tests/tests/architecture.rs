//! Architecture tests: the allowed edges between crates, the codemap, a domain without IO.
//!
//! The allowed edges are DESIGN.md's layout table, written out here literally; `ARCHITECTURE.md`
//! must name every crate; the domain's normal dependencies (as resolved by `cargo metadata`)
//! hold no runtime, database, HTTP or randomness crate; and every member shares the workspace's
//! `publish = false` and lints.
#![allow(
    clippy::unwrap_used,
    clippy::panic,
    reason = "clippy.toml allows these in #[test] functions only; the helpers here are test code \
              too, and a failed unwrap or panic in them is a failed test"
)]

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value as Json;
use toml::{Table, Value};

/// Which `agentroom-*` packages a package may name in `[dependencies]` and `[build-dependencies]`.
enum Allowed {
    Only(&'static [&'static str]),
    /// Every other package of this table (composition roots: the CLI and the bench).
    Everything,
}

/// DESIGN.md's layout table, written out literally. Every arrow points inward to the domain.
/// A new crate is added here and to `ARCHITECTURE.md` in the issue that creates it.
const ALLOWED_EDGES: &[(&str, Allowed)] = &[
    ("agentroom-domain", Allowed::Only(&[])),
    ("agentroom-planning", Allowed::Only(&["agentroom-domain"])),
    ("agentroom-api-model", Allowed::Only(&["agentroom-domain"])),
    (
        "agentroom-capabilities",
        Allowed::Only(&["agentroom-domain"]),
    ),
    (
        "agentroom-ports",
        Allowed::Only(&[
            "agentroom-domain",
            "agentroom-planning",
            "agentroom-capabilities",
        ]),
    ),
    ("agentroom-workflows", Allowed::Only(&["agentroom-ports"])),
    (
        "agentroom-coordinator",
        Allowed::Only(&[
            "agentroom-domain",
            "agentroom-ports",
            "agentroom-workflows",
            "agentroom-planning",
            "agentroom-capabilities",
        ]),
    ),
    (
        "agentroom-store-postgres",
        Allowed::Only(&["agentroom-domain", "agentroom-planning", "agentroom-ports"]),
    ),
    (
        "agentroom-store-sqlite",
        Allowed::Only(&["agentroom-domain", "agentroom-planning", "agentroom-ports"]),
    ),
    // DESIGN.md's table gives the agents `ports` only; they also implement the runner's
    // `Provider` (the router), an edge that still points inward: workflows knows no agents.
    (
        "agentroom-agents",
        Allowed::Only(&["agentroom-ports", "agentroom-workflows"]),
    ),
    // The server reaches stores, agents and workflows only through the service (issue 14);
    // it names the domain and ports types the service's API is made of (stored rooms,
    // operation records, submissions), edges that still point inward.
    (
        "agentroom-server",
        Allowed::Only(&[
            "agentroom-domain",
            "agentroom-ports",
            "agentroom-planning",
            "agentroom-coordinator",
            "agentroom-capabilities",
            "agentroom-api-model",
        ]),
    ),
    // The MCP server (issue 20) reaches everything through the service, as the REST API does;
    // it names the domain and ports types the service's answers are made of.
    (
        "agentroom-mcp",
        Allowed::Only(&[
            "agentroom-domain",
            "agentroom-ports",
            "agentroom-planning",
            "agentroom-coordinator",
        ]),
    ),
    ("agentroom-cli", Allowed::Everything),
    ("agentroom-bench", Allowed::Everything),
    // The qualification's evaluator (DESIGN.md: coordinator, ports); today the trace
    // evaluator alone, which reads plain trace data in the domain's own terms (through ports).
    (
        "agentroom-eval",
        Allowed::Only(&["agentroom-coordinator", "agentroom-ports"]),
    ),
    // The test model is a separate "model" that sees only HTTP: it names no workspace crate.
    ("agentroom-testmodel", Allowed::Only(&[])),
];

/// Crates that do IO, keep time or draw randomness; none may be a normal dependency of the domain.
const BANNED_IN_DOMAIN: &[&str] = &[
    "tokio",
    "sqlx",
    "sqlx-core",
    "sqlx-postgres",
    "sqlx-sqlite",
    "reqwest",
    "hyper",
    "axum",
    "mio",
    "rand",
    "getrandom",
    "async-std",
    "rusqlite",
    "libsqlite3-sys",
    "tokio-postgres",
    "ureq",
];

const PREFIX: &str = "agentroom-";

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn read_toml(path: &Path) -> Table {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    text.parse::<Table>()
        .unwrap_or_else(|e| panic!("cannot parse {}: {e}", path.display()))
}

/// A workspace member: its folder relative to the root (`crates/domain`) and its manifest.
struct Member {
    folder: String,
    manifest: Table,
}

impl Member {
    fn package_name(&self) -> &str {
        self.manifest
            .get("package")
            .and_then(|p| p.get("name"))
            .and_then(Value::as_str)
            .unwrap_or_else(|| panic!("{}/Cargo.toml has no package.name", self.folder))
    }
}

/// Every folder under `crates/`, sorted; a folder without a `Cargo.toml` fails (cargo would too).
fn crate_members() -> Vec<Member> {
    let root = workspace_root();
    let mut members: Vec<Member> = std::fs::read_dir(root.join("crates"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.is_dir())
        .map(|path| {
            let folder = format!("crates/{}", path.file_name().unwrap().to_string_lossy());
            let manifest_path = path.join("Cargo.toml");
            assert!(
                manifest_path.is_file(),
                "{folder} has no Cargo.toml, but `crates/*` is a workspace member glob"
            );
            Member {
                folder,
                manifest: read_toml(&manifest_path),
            }
        })
        .collect();
    members.sort_by(|a, b| a.folder.cmp(&b.folder));
    assert!(!members.is_empty(), "no crates found under crates/");
    members
}

fn tests_member() -> Member {
    Member {
        folder: "tests".to_owned(),
        manifest: read_toml(&workspace_root().join("tests/Cargo.toml")),
    }
}

/// `[dependencies]` and `[build-dependencies]`, also under `[target.'cfg(..)'.*]`, as
/// (section, package name) pairs. Dev-dependencies are free for tests and are skipped.
fn normal_and_build_dependencies(
    manifest: &Table,
    workspace_deps: &Table,
) -> Vec<(String, String)> {
    let mut sections: Vec<(String, &Table)> = Vec::new();
    for section in ["dependencies", "build-dependencies"] {
        if let Some(table) = manifest.get(section).and_then(Value::as_table) {
            sections.push((format!("[{section}]"), table));
        }
    }
    if let Some(targets) = manifest.get("target").and_then(Value::as_table) {
        for (cfg, target) in targets {
            for section in ["dependencies", "build-dependencies"] {
                if let Some(table) = target.get(section).and_then(Value::as_table) {
                    sections.push((format!("[target.'{cfg}'.{section}]"), table));
                }
            }
        }
    }
    let mut deps = Vec::new();
    for (label, table) in sections {
        for (key, spec) in table {
            deps.push((label.clone(), dependency_package(key, spec, workspace_deps)));
        }
    }
    deps
}

/// The package a dependency entry names, following `package = ".."` renames here or in
/// `[workspace.dependencies]` when the entry says `workspace = true`.
fn dependency_package(key: &str, spec: &Value, workspace_deps: &Table) -> String {
    if let Some(package) = spec.get("package").and_then(Value::as_str) {
        return package.to_owned();
    }
    let inherits = spec.get("workspace").and_then(Value::as_bool) == Some(true);
    if inherits
        && let Some(package) = workspace_deps
            .get(key)
            .and_then(|s| s.get("package"))
            .and_then(Value::as_str)
    {
        return package.to_owned();
    }
    key.to_owned()
}

fn workspace_dependencies() -> Table {
    let root = read_toml(&workspace_root().join("Cargo.toml"));
    root.get("workspace")
        .and_then(|w| w.get("dependencies"))
        .and_then(Value::as_table)
        .cloned()
        .unwrap_or_default()
}

/// Which members may name the crates that speak to the outside world (normal dependencies;
/// tests are free), written out literally (CONVENTIONS.md "Trait crate, adapter crates").
const IO_CRATES: &[(&str, &[&str])] = &[
    // The stores; the bench measures its floors with raw statements.
    (
        "sqlx",
        &[
            "agentroom-store-postgres",
            "agentroom-store-sqlite",
            "agentroom-bench",
        ],
    ),
    ("rusqlite", &["agentroom-store-sqlite"]),
    // The agents' HTTP adapter; the operator CLI is an HTTP client of a running host (its
    // `budget`, `objective`, `review` … commands), allowed by name until its client moves
    // behind the wire-model crate.
    ("reqwest", &["agentroom-agents", "agentroom-cli"]),
    // The REST edge; and the test model's chat-completions server, a separate process.
    ("axum", &["agentroom-server", "agentroom-testmodel"]),
    // The HTTP edge's own accept loop (`serve`: per-connection timeouts and the connection
    // limit, which axum's `serve` does not expose; issue 17).
    ("hyper", &["agentroom-server"]),
];

#[test]
fn io_crates_are_named_only_where_they_belong() {
    let workspace_deps = workspace_dependencies();
    let mut members = crate_members();
    members.push(tests_member());
    let mut wrong = Vec::new();
    for member in &members {
        let name = member.package_name();
        for (section, package) in normal_and_build_dependencies(&member.manifest, &workspace_deps) {
            if let Some((_, allowed)) = IO_CRATES.iter().find(|(io, _)| *io == package)
                && !allowed.contains(&name)
            {
                wrong.push(format!("{name} names {package} in {section}"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "IO crates named where they do not belong: {wrong:#?}"
    );
}

#[test]
fn allowed_edges_between_crates() {
    let table: BTreeMap<&str, &Allowed> = ALLOWED_EDGES.iter().map(|(k, v)| (*k, v)).collect();
    assert_eq!(
        table.len(),
        ALLOWED_EDGES.len(),
        "a package is listed twice in ALLOWED_EDGES"
    );
    for (package, allowed) in ALLOWED_EDGES {
        if let Allowed::Only(targets) = allowed {
            for target in *targets {
                assert!(
                    table.contains_key(target),
                    "ALLOWED_EDGES: {package} -> {target} names a package that is not in the table"
                );
            }
        }
    }

    let workspace_deps = workspace_dependencies();
    let mut violations = Vec::new();
    for member in crate_members() {
        let name = member.package_name();
        let Some(allowed) = table.get(name) else {
            violations.push(format!(
                "{} is package `{name}`, which is not in ALLOWED_EDGES: add it there (with the \
                 edges DESIGN.md's layout table gives it) and give it a section in ARCHITECTURE.md",
                member.folder
            ));
            continue;
        };
        for (section, dep) in normal_and_build_dependencies(&member.manifest, &workspace_deps) {
            if !dep.starts_with(PREFIX) {
                continue;
            }
            let ok = dep != name
                && match allowed {
                    Allowed::Only(targets) => targets.contains(&dep.as_str()),
                    Allowed::Everything => table.contains_key(dep.as_str()),
                };
            if !ok {
                let allowed_list = match allowed {
                    Allowed::Only([]) => "no workspace crate".to_owned(),
                    Allowed::Only(targets) => targets.join(", "),
                    Allowed::Everything => "every other crate in ALLOWED_EDGES".to_owned(),
                };
                violations.push(format!(
                    "{}/Cargo.toml {section}: edge {name} -> {dep} is not allowed \
                     ({name} may depend on: {allowed_list})",
                    member.folder
                ));
            }
        }
    }
    assert!(
        violations.is_empty(),
        "dependency edges break DESIGN.md's layout table:\n  {}",
        violations.join("\n  ")
    );
}

#[test]
fn architecture_md_names_every_crate() {
    let path = workspace_root().join("ARCHITECTURE.md");
    let codemap = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));

    // Existing crates by their real folder and package name; planned crates by the folder
    // their name implies; and the workspace-level tests package.
    let mut wanted: BTreeSet<String> = BTreeSet::new();
    for member in crate_members() {
        wanted.insert(format!("`{}`", member.folder));
        wanted.insert(format!("`{}`", member.package_name()));
    }
    for (package, _) in ALLOWED_EDGES {
        let folder = package.strip_prefix(PREFIX).unwrap();
        wanted.insert(format!("`crates/{folder}`"));
        wanted.insert(format!("`{package}`"));
    }
    wanted.insert(format!("`{}`", tests_member().package_name()));

    let missing: Vec<&String> = wanted
        .iter()
        .filter(|w| !codemap.contains(w.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md does not name (in backticks): {missing:?}"
    );
}

/// Runs `cargo metadata` on the workspace and returns its JSON.
fn cargo_metadata() -> Json {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(&cargo)
        .args(["metadata", "--format-version", "1", "--locked"])
        .current_dir(workspace_root())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cargo:?} metadata: {e}"));
    assert!(
        output.status.success(),
        "cargo metadata failed ({}):\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

/// The names of the packages the domain's normal dependencies pull in when it is built by
/// itself (`cargo tree -p agentroom-domain -e normal`), its features resolved for it alone.
fn domain_alone() -> BTreeSet<String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(&cargo)
        .args([
            "tree",
            "-p",
            "agentroom-domain",
            "-e",
            "normal",
            "--prefix",
            "none",
            "--format",
            "{p}",
            "--locked",
        ])
        .current_dir(workspace_root())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cargo:?} tree: {e}"));
    assert!(
        output.status.success(),
        "cargo tree failed ({}):\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let names: BTreeSet<String> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_owned)
        .collect();
    assert!(
        names.contains("agentroom-domain") && names.contains("serde"),
        "cargo tree listed no domain dependencies: {names:?}"
    );
    names
}

fn str_field<'a>(value: &'a Json, field: &str) -> &'a str {
    value[field]
        .as_str()
        .unwrap_or_else(|| panic!("cargo metadata: `{field}` is not a string in {value}"))
}

fn array_field<'a>(value: &'a Json, field: &str) -> &'a [Json] {
    value[field]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_else(|| panic!("cargo metadata: `{field}` is not an array in {value}"))
}

/// Whether the resolved edge `dep` of package `package` (with its resolved `features`) is
/// active as a normal dependency. `resolve` comes from cargo's dependency resolver, which
/// keeps optional dependencies that only a weak `dep?/feature` names even though nothing
/// enables them (rust-lang/cargo#10801, #15784: `rust_decimal`'s `std` feature names
/// `rand?/std`, so `rand` and `getrandom` show up in `resolve` but are never built). So an
/// edge counts when a matching `[dependencies]` entry is not optional, or is optional and
/// enabled: by its implicit feature, by `dep:name`, or by a strong `name/feature`. Features
/// in `resolve` are unified over the whole workspace and every target, so this errs towards
/// keeping edges.
fn is_active_normal_edge(
    package: &Json,
    features: &BTreeSet<&str>,
    dep: &Json,
    dep_package: &str,
) -> bool {
    let dep_name = str_field(dep, "name");
    let normal_kind = array_field(dep, "dep_kinds")
        .iter()
        .any(|k| k["kind"].is_null());
    if !normal_kind {
        return false;
    }
    let declared = package["features"].as_object();
    let entries = array_field(package, "dependencies");
    // `name` in `resolve` is the renamed key (`-` as `_`) for a renamed entry, and the
    // dependency's library name otherwise; a non-renamed entry is matched by package name.
    let renamed_key = |entry: &Json| entry["rename"].as_str().map(|r| r.replace('-', "_"));
    let by_rename = entries
        .iter()
        .any(|e| renamed_key(e).as_deref() == Some(dep_name));
    entries.iter().any(|entry| {
        if !entry["kind"].is_null() {
            return false;
        }
        let entry_package = str_field(entry, "name");
        let rename = entry["rename"].as_str();
        let key = rename.unwrap_or(entry_package);
        let matches = if by_rename {
            renamed_key(entry).as_deref() == Some(dep_name)
        } else {
            rename.is_none() && entry_package == dep_package
        };
        if !matches {
            return false;
        }
        if entry["optional"].as_bool() != Some(true) {
            return true;
        }
        let strong = format!("{key}/");
        let explicit = format!("dep:{key}");
        features.contains(key)
            || features.iter().any(|feature| {
                declared
                    .and_then(|d| d.get(*feature))
                    .and_then(Json::as_array)
                    .is_some_and(|enables| {
                        enables
                            .iter()
                            .filter_map(Json::as_str)
                            .any(|e| e == explicit || e.starts_with(&strong))
                    })
            })
    })
}

#[test]
fn domain_has_no_io_dependencies() {
    let metadata = cargo_metadata();
    let packages: BTreeMap<&str, &Json> = array_field(&metadata, "packages")
        .iter()
        .map(|p| (str_field(p, "id"), p))
        .collect();
    let nodes: BTreeMap<&str, &Json> = array_field(&metadata["resolve"], "nodes")
        .iter()
        .map(|n| (str_field(n, "id"), n))
        .collect();
    let label = |id: &str| {
        let p = packages[id];
        format!("{} {}", str_field(p, "name"), str_field(p, "version"))
    };

    let domain: Vec<&str> = packages
        .iter()
        .filter(|(_, p)| p["name"] == "agentroom-domain")
        .map(|(id, _)| *id)
        .collect();
    assert_eq!(
        domain.len(),
        1,
        "cargo metadata lists agentroom-domain {} times",
        domain.len()
    );

    // Breadth-first over normal edges, remembering who pulled each package in.
    let mut pulled_by: BTreeMap<&str, Option<&str>> = BTreeMap::from([(domain[0], None)]);
    let mut queue = VecDeque::from([domain[0]]);
    while let Some(id) = queue.pop_front() {
        let node = nodes[id];
        let package = packages[id];
        let features: BTreeSet<&str> = array_field(node, "features")
            .iter()
            .filter_map(Json::as_str)
            .collect();
        for dep in array_field(node, "deps") {
            let dep_id = str_field(dep, "pkg");
            let dep_package = str_field(packages[dep_id], "name");
            if !pulled_by.contains_key(dep_id)
                && is_active_normal_edge(package, &features, dep, dep_package)
            {
                pulled_by.insert(dep_id, Some(id));
                queue.push_back(dep_id);
            }
        }
    }

    // `cargo metadata` resolves features for the whole workspace, so a feature another member
    // turns on shows under the domain too (rmcp's `server` turns on uuid's `v4`, which pulls
    // getrandom: issue 20). What the domain itself pulls in is what it gets built by itself,
    // which `cargo tree -p` resolves; in a workspace build, `crates/domain/clippy.toml` keeps
    // `Uuid::new_v4` and `Uuid::now_v7` out of its code.
    let alone = domain_alone();
    let mut violations = Vec::new();
    for id in pulled_by.keys() {
        let name = str_field(packages[id], "name");
        if BANNED_IN_DOMAIN.contains(&name) && alone.contains(name) {
            let mut chain = vec![label(id)];
            let mut current = *id;
            while let Some(Some(parent)) = pulled_by.get(current) {
                chain.push(label(parent));
                current = parent;
            }
            chain.reverse();
            violations.push(chain.join(" -> "));
        }
    }
    assert!(
        violations.is_empty(),
        "agentroom-domain must do no IO, keep no time and draw no randomness, but its normal \
         dependencies include:\n  {}",
        violations.join("\n  ")
    );
}

#[test]
fn every_member_is_unpublished_and_uses_workspace_lints() {
    let root = read_toml(&workspace_root().join("Cargo.toml"));
    assert_eq!(
        root.get("workspace")
            .and_then(|w| w.get("package"))
            .and_then(|p| p.get("publish"))
            .and_then(Value::as_bool),
        Some(false),
        "the root Cargo.toml must set `publish = false` in [workspace.package]"
    );

    let mut members = crate_members();
    members.push(tests_member());
    let mut violations = Vec::new();
    for member in &members {
        let manifest = &member.manifest;
        let publish = manifest.get("package").and_then(|p| p.get("publish"));
        let unpublished = match publish {
            Some(Value::Boolean(false)) => true,
            Some(Value::Table(t)) => t.get("workspace").and_then(Value::as_bool) == Some(true),
            _ => false,
        };
        if !unpublished {
            violations.push(format!(
                "{}/Cargo.toml ({}): needs `publish.workspace = true` or `publish = false` \
                 in [package], found {publish:?}",
                member.folder,
                member.package_name()
            ));
        }
        let lints = manifest
            .get("lints")
            .and_then(|l| l.get("workspace"))
            .and_then(Value::as_bool);
        if lints != Some(true) {
            violations.push(format!(
                "{}/Cargo.toml ({}): needs `[lints] workspace = true`",
                member.folder,
                member.package_name()
            ));
        }
    }
    assert!(
        violations.is_empty(),
        "workspace members break the shared settings:\n  {}",
        violations.join("\n  ")
    );
}
