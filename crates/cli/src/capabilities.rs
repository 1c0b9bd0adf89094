//! `agentroom capabilities`: validate Capability and Binding files, and resolve a capability
//! to the specialist that provides it. Exit 0 when valid or resolved; exit 2, with every
//! problem on standard error, when not.
// Problems go to standard error, one per line, each naming its file: that is this command's
// output format.
#![allow(clippy::print_stderr)]

use std::io::Write;
use std::path::PathBuf;

use agentroom_capabilities::{CapabilityRef, Catalog, ResourceError, ResourceErrors};
use agentroom_domain::catalog::CapabilityEffect;
use agentroom_domain::ids::{ObjectiveId, TaskKey};
use anyhow::Context;
use clap::Subcommand;

/// The exit status for invalid files or a capability that cannot be resolved.
const REFUSED: i32 = 2;

/// What `agentroom capabilities` can do.
#[derive(Subcommand)]
pub(crate) enum Command {
    /// Validate Capability and Binding files (planspec.io/v1alpha1 YAML, one or more documents
    /// each), together: exit 0 when valid, 2 listing every error.
    Validate {
        /// The files.
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
    },
    /// Print the specialist that provides capability NAME (`name` or `namespace/name`), or
    /// exit 2 with the reason. With --capabilities, the capability's phase, replacements and
    /// requirements are resolved too; without, only the bindings are read.
    Resolve {
        /// A file of Binding resources (repeat for several).
        #[arg(long = "bindings", required = true, value_name = "FILE")]
        bindings: Vec<PathBuf>,
        /// A file of Capability resources (repeat for several).
        #[arg(long = "capabilities", value_name = "FILE")]
        capabilities: Vec<PathBuf>,
        /// The plan (objective id) of the task, for node-specific rules.
        #[arg(long, requires = "node", value_name = "OBJECTIVE_ID")]
        plan: Option<ObjectiveId>,
        /// The task key within that plan, for node-specific rules.
        #[arg(long, requires = "plan", value_name = "TASK_KEY")]
        node: Option<TaskKey>,
        /// The capability.
        name: String,
    },
}

/// Runs `command`; exits the process with status 2 when files are invalid or the capability
/// cannot be resolved.
pub(crate) fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Validate { files } => {
            let catalog = load(&files);
            crate::output::print_line(&format!(
                "valid: {} capabilities, {} binding rules in {} files",
                catalog.registry().len(),
                catalog.bindings().len(),
                files.len()
            ))?;
            Ok(())
        }
        Command::Resolve {
            bindings,
            capabilities,
            plan,
            node,
            name,
        } => {
            let files: Vec<PathBuf> = capabilities.iter().chain(&bindings).cloned().collect();
            let catalog = load(&files);
            let node = plan.zip(node.as_ref());
            if capabilities.is_empty() {
                resolve_by_bindings(&catalog, &name, node)
            } else {
                resolve_fully(&catalog, &name, node)
            }
        }
    }
}

/// Reads and checks `files` together; exits 2 listing every problem, unreadable files too.
fn load(files: &[PathBuf]) -> Catalog {
    let mut texts = Vec::new();
    let mut errors = Vec::new();
    for path in files {
        let name = path.display().to_string();
        match std::fs::read_to_string(path) {
            Ok(text) => texts.push((name, text)),
            Err(e) => errors.push(ResourceError::unreadable(&name, e.to_string())),
        }
    }
    match Catalog::parse(texts.iter().map(|(n, t)| (n.as_str(), t.as_str()))) {
        Ok(catalog) if errors.is_empty() => catalog,
        Ok(_) => refuse_with(errors),
        Err(found) => {
            errors.extend(found.into_errors());
            refuse_with(errors)
        }
    }
}

fn resolve_by_bindings(
    catalog: &Catalog,
    name: &str,
    node: Option<(ObjectiveId, &TaskKey)>,
) -> anyhow::Result<()> {
    let Some(reference) = CapabilityRef::parse(name) else {
        refuse(&format!(
            "cannot resolve `{name}`: not a capability name (`name` or `namespace/name`)"
        ))
    };
    match catalog.bindings().rule_for(&reference, node) {
        Some(rule) => {
            crate::output::print_line(&rule.provider().to_string())?;
            Ok(())
        }
        None => refuse(&format!(
            "cannot resolve `{reference}`: no binding names a provider for `{reference}`"
        )),
    }
}

fn resolve_fully(
    catalog: &Catalog,
    name: &str,
    node: Option<(ObjectiveId, &TaskKey)>,
) -> anyhow::Result<()> {
    let resolution = match catalog.resolution(name, node) {
        Ok(resolution) => resolution,
        Err(why) => refuse(&format!("cannot resolve `{name}`: {why}")),
    };
    for (from, to) in resolution.replacements() {
        eprintln!("note: `{from}` is deprecated; replaced by `{to}`");
    }
    for missing in resolution.missing_optional() {
        eprintln!("note: optional requirement `{missing}` is not available");
    }
    if resolution.effect() == CapabilityEffect::ExternalWrite {
        eprintln!(
            "note: `{}` writes outside the room: plan admission refuses it (T4)",
            resolution.capability()
        );
    }
    crate::output::print_line(&resolution.provider().to_string())?;
    Ok(())
}

fn refuse_with(errors: Vec<ResourceError>) -> ! {
    let errors = ResourceErrors::from_errors(errors);
    for error in errors.errors() {
        eprintln!("{error}");
    }
    let count = errors.errors().len();
    refuse(&format!(
        "{count} error{} found",
        if count == 1 { "" } else { "s" }
    ))
}

fn refuse(message: &str) -> ! {
    eprintln!("error: {message}");
    let flushed = std::io::stdout()
        .flush()
        .context("cannot write to standard output");
    if let Err(e) = flushed {
        eprintln!("error: {e:#}");
    }
    std::process::exit(REFUSED)
}
