//! The capability catalog the engine asks at plan admission: a trait the domain defines and
//! `crates/capabilities` implements, plus a small in-memory catalog for tests and scripted runs.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::ids::{ObjectiveId, PrincipalId, TaskKey};

/// What a capability does to the world (T4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CapabilityEffect {
    /// Reads or drafts; admissible.
    ReadOrDraft,
    /// Writes outside the Room (`agentroom.io/effect: external-write`); refused (T4).
    ExternalWrite,
}

/// A request to resolve one task's capability.
#[derive(Debug, Clone, Copy)]
pub struct ResolveRequest<'a> {
    /// The plan (objective) the task belongs to, for node-specific bindings.
    pub plan: ObjectiveId,
    /// The task's key, for node-specific bindings.
    pub task: &'a TaskKey,
    /// The capability asked for.
    pub capability: &'a str,
    /// The task's inputs as proposed.
    pub inputs: &'a Map<String, Value>,
}

/// A capability resolved for one task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The specialist the binding names.
    pub provider: PrincipalId,
    /// The capability finally used, after replacements.
    pub capability: String,
    /// Deprecated capabilities followed to their replacements, in order (`from`, `to`).
    pub replacements: Vec<(String, String)>,
    /// What the capability does to the world.
    pub effect: CapabilityEffect,
    /// The inputs, validated, with defaults applied.
    pub inputs: Map<String, Value>,
}

/// Why a capability cannot serve a task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// No capability of that name.
    Unknown,
    /// The capability's phase is Unavailable.
    Unavailable,
    /// No binding names a provider for it.
    Unbound,
    /// The inputs do not satisfy the capability's input definitions.
    InvalidInputs(String),
    /// Anything else the catalog refuses (a binding conflict, a replacement cycle, …).
    Other(String),
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::Unknown => f.write_str("no such capability"),
            Refusal::Unavailable => f.write_str("the capability is unavailable"),
            Refusal::Unbound => f.write_str("no binding names a provider"),
            Refusal::InvalidInputs(why) => write!(f, "invalid inputs: {why}"),
            Refusal::Other(why) => f.write_str(why),
        }
    }
}

/// The catalog the engine resolves capabilities through.
pub trait CapabilityCatalog {
    /// Resolves `request` to a provider, or says why it cannot.
    fn resolve(&self, request: ResolveRequest<'_>) -> Result<Resolved, Refusal>;
}

/// One capability of a [`MemoryCatalog`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryEntry {
    /// The provider, or `None` when unbound.
    pub provider: Option<PrincipalId>,
    /// Whether it is available.
    pub available: bool,
    /// What it does to the world.
    pub effect: CapabilityEffect,
    /// Inputs that must be present.
    pub required_inputs: Vec<String>,
    /// Defaults applied to absent inputs.
    pub defaults: Map<String, Value>,
    /// The capability that replaces this deprecated one.
    pub replacement: Option<String>,
}

/// A small in-memory catalog for tests and scripted runs; the real one lives in
/// `crates/capabilities`.
#[derive(Debug, Clone, Default)]
pub struct MemoryCatalog {
    entries: BTreeMap<String, MemoryEntry>,
}

impl MemoryCatalog {
    /// An empty catalog.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an available read/draft capability bound to `provider`.
    pub fn bind(mut self, capability: &str, provider: &PrincipalId) -> Self {
        self.entries.insert(
            capability.to_owned(),
            MemoryEntry {
                provider: Some(provider.clone()),
                available: true,
                effect: CapabilityEffect::ReadOrDraft,
                required_inputs: Vec::new(),
                defaults: Map::new(),
                replacement: None,
            },
        );
        self
    }

    /// Adds `capability` as described by `entry`.
    pub fn with(mut self, capability: &str, entry: MemoryEntry) -> Self {
        self.entries.insert(capability.to_owned(), entry);
        self
    }
}

impl CapabilityCatalog for MemoryCatalog {
    fn resolve(&self, request: ResolveRequest<'_>) -> Result<Resolved, Refusal> {
        let mut name = request.capability.to_owned();
        let mut replacements = Vec::new();
        let entry = loop {
            let entry = self.entries.get(&name).ok_or(Refusal::Unknown)?;
            match &entry.replacement {
                Some(next) => {
                    if replacements
                        .iter()
                        .any(|(from, _): &(String, String)| from == next)
                        || next == request.capability
                    {
                        return Err(Refusal::Other(format!("replacement cycle at {next}")));
                    }
                    replacements.push((name.clone(), next.clone()));
                    name = next.clone();
                }
                None => break entry,
            }
        };
        if !entry.available {
            return Err(Refusal::Unavailable);
        }
        let provider = entry.provider.clone().ok_or(Refusal::Unbound)?;
        let mut inputs = request.inputs.clone();
        for (k, v) in &entry.defaults {
            inputs.entry(k.clone()).or_insert_with(|| v.clone());
        }
        if let Some(missing) = entry
            .required_inputs
            .iter()
            .find(|k| !inputs.contains_key(k.as_str()))
        {
            return Err(Refusal::InvalidInputs(format!(
                "input `{missing}` is required"
            )));
        }
        Ok(Resolved {
            provider,
            capability: name,
            replacements,
            effect: entry.effect,
            inputs,
        })
    }
}
