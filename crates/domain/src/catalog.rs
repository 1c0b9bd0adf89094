//! The capability catalog the engine asks at plan admission: a trait the domain defines and
//! `crates/capabilities` implements, what it says about a capability (its declared outputs on
//! resolution, checked against a contribution by [`check_outputs`] (T2); a description of every
//! capability for the reasoner's prompt (C1)), plus a small in-memory catalog for tests and
//! scripted runs.

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

/// The type of a declared output, as a Capability resource writes it: seed 002's `string`,
/// `number`, `boolean`, `object` and `array`, plus `integer` (a whole number), as the capability
/// resources accept for inputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutputType {
    /// A JSON string.
    String,
    /// Any JSON number.
    Number,
    /// A whole JSON number (`3`, `3.0`).
    Integer,
    /// `true` or `false`.
    Boolean,
    /// A JSON object.
    Object,
    /// A JSON array.
    Array,
}

impl OutputType {
    /// The name as written in a resource (`string`, `integer`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Self::String => "string",
            Self::Number => "number",
            Self::Integer => "integer",
            Self::Boolean => "boolean",
            Self::Object => "object",
            Self::Array => "array",
        }
    }

    /// `a string`, `an integer`, ...: how a message names a value of this type.
    pub fn article(self) -> &'static str {
        match self {
            Self::String => "a string",
            Self::Number => "a number",
            Self::Integer => "an integer",
            Self::Boolean => "a boolean",
            Self::Object => "an object",
            Self::Array => "an array",
        }
    }

    /// Whether `value` is of this type (an integer may be written `3.0`).
    pub fn admits(self, value: &Value) -> bool {
        match self {
            Self::String => value.is_string(),
            Self::Number => value.is_number(),
            Self::Integer => {
                value.is_i64()
                    || value.is_u64()
                    || value
                        .as_f64()
                        .is_some_and(|x| x.is_finite() && x.fract() == 0.0)
            }
            Self::Boolean => value.is_boolean(),
            Self::Object => value.is_object(),
            Self::Array => value.is_array(),
        }
    }
}

impl fmt::Display for OutputType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An output a capability declares it produces (`spec.outputs[]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeclaredOutput {
    /// The output's name: the key a contribution's outputs carry it under.
    pub name: String,
    /// Its type.
    pub kind: OutputType,
    /// What it is, as the resource describes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// Why a contribution's outputs do not satisfy the capability's declared outputs (T2).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OutputMismatch {
    /// A declared output is absent, or `null`.
    #[error("declared output `{name}` is missing")]
    Missing {
        /// The output's name.
        name: String,
    },
    /// A declared output is present with a value of another type.
    #[error("declared output `{name}` must be {}, found {found}", .expected.article())]
    WrongType {
        /// The output's name.
        name: String,
        /// The declared type.
        expected: OutputType,
        /// What the value is instead (`a string`, `a number with a fraction`, ...).
        found: &'static str,
    },
}

/// Checks the outputs a contribution gives against the capability's declared outputs, in
/// declared order, and names the first one missing (absent or `null`) or of the wrong type.
/// Outputs given but not declared are allowed.
pub fn check_outputs(
    declared: &[DeclaredOutput],
    given: &Map<String, Value>,
) -> Result<(), OutputMismatch> {
    for output in declared {
        match given.get(&output.name).filter(|v| !v.is_null()) {
            None => {
                return Err(OutputMismatch::Missing {
                    name: output.name.clone(),
                });
            }
            Some(value) if !output.kind.admits(value) => {
                return Err(OutputMismatch::WrongType {
                    name: output.name.clone(),
                    expected: output.kind,
                    found: found_kind(output.kind, value),
                });
            }
            Some(_) => {}
        }
    }
    Ok(())
}

/// How a value of the wrong type reads after "found": its JSON type, or, where an integer was
/// expected, that a number has a fraction.
fn found_kind(expected: OutputType, value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) if expected == OutputType::Integer => "a number with a fraction",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
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
    /// The outputs the capability finally used (after replacements) declares, in declared
    /// order: what a contribution for the task must carry (T2).
    pub outputs: Vec<DeclaredOutput>,
}

/// One input of a capability, as [`CapabilityCatalog::describe`] tells it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputInfo {
    /// The input's name.
    pub name: String,
    /// Its type as written (`string`, `integer`, ...); `any` where the catalog does not type it.
    pub kind: String,
    /// Whether a task must give it.
    pub required: bool,
    /// The value used when a task gives none.
    pub default: Option<Value>,
    /// The values allowed (`enum`); empty when any value of the type is.
    pub enum_values: Vec<Value>,
    /// What it is.
    pub description: Option<String>,
}

/// A capability as the catalog describes it for the reasoner's prompt (C1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CapabilityInfo {
    /// The name a task asks for it by (`name`, or `namespace/name` outside the default
    /// namespace).
    pub name: String,
    /// A human-friendly name.
    pub display_name: Option<String>,
    /// What it provides.
    pub description: String,
    /// The inputs it accepts, in declared order.
    pub inputs: Vec<InputInfo>,
    /// The outputs it declares, in declared order.
    pub outputs: Vec<DeclaredOutput>,
    /// Its phase as written (`Available`, `Unavailable`, `Deprecated`).
    pub phase: String,
    /// Why it is deprecated, as written.
    pub deprecation_message: Option<String>,
    /// The capability replacing it (by the name a task would ask for), when deprecated.
    pub replacement: Option<String>,
    /// The principal a task asking for it by name is routed to (after replacements, by the
    /// capability's own binding; a binding for one task of one plan is not counted); `None`
    /// when nothing binds it or the replacement cannot be followed.
    pub provider: Option<PrincipalId>,
    /// What a task asking for it would do to the world (after replacements; external-write is
    /// refused at plan admission, T4).
    pub effect: CapabilityEffect,
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

    /// Every capability of the catalog, sorted by name, the same on every call for the same
    /// catalog: what the reasoner is told it may plan with (C1).
    fn describe(&self) -> Vec<CapabilityInfo>;
}

/// One capability of a [`MemoryCatalog`]. The default is an available, unbound read/draft
/// capability with no inputs, no outputs and no description.
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
    /// What it provides.
    pub description: String,
    /// The outputs it declares.
    pub outputs: Vec<DeclaredOutput>,
    /// Why it is deprecated.
    pub deprecation_message: Option<String>,
}

impl Default for MemoryEntry {
    fn default() -> Self {
        Self {
            provider: None,
            available: true,
            effect: CapabilityEffect::ReadOrDraft,
            required_inputs: Vec::new(),
            defaults: Map::new(),
            replacement: None,
            description: String::new(),
            outputs: Vec::new(),
            deprecation_message: None,
        }
    }
}

/// A small in-memory catalog for tests and scripted runs; the real one lives in
/// `crates/capabilities`.
#[derive(Debug, Clone, Default)]
pub struct MemoryCatalog {
    entries: BTreeMap<String, MemoryEntry>,
}

/// A capability reached from a requested name through replacements.
struct Followed<'c> {
    name: String,
    replacements: Vec<(String, String)>,
    entry: &'c MemoryEntry,
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
                ..MemoryEntry::default()
            },
        );
        self
    }

    /// Adds `capability` as described by `entry`.
    pub fn with(mut self, capability: &str, entry: MemoryEntry) -> Self {
        self.entries.insert(capability.to_owned(), entry);
        self
    }

    /// Follows `capability` through replacements to the entry that serves it.
    fn follow(&self, capability: &str) -> Result<Followed<'_>, Refusal> {
        let mut name = capability.to_owned();
        let mut replacements: Vec<(String, String)> = Vec::new();
        loop {
            let entry = self.entries.get(&name).ok_or(Refusal::Unknown)?;
            match &entry.replacement {
                Some(next) => {
                    if replacements.iter().any(|(from, _)| from == next) || next == capability {
                        return Err(Refusal::Other(format!("replacement cycle at {next}")));
                    }
                    replacements.push((name.clone(), next.clone()));
                    name = next.clone();
                }
                None => {
                    return Ok(Followed {
                        name,
                        replacements,
                        entry,
                    });
                }
            }
        }
    }
}

impl CapabilityCatalog for MemoryCatalog {
    fn resolve(&self, request: ResolveRequest<'_>) -> Result<Resolved, Refusal> {
        let Followed {
            name,
            replacements,
            entry,
        } = self.follow(request.capability)?;
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
            outputs: entry.outputs.clone(),
        })
    }

    /// Inputs are the required ones (in order), then those with a default (by name); this
    /// catalog does not type inputs, so an input's kind is its default's JSON type, else
    /// `any`. A capability with a replacement is `Deprecated`; its provider and effect are its
    /// replacement's, as [`MemoryCatalog::resolve`] would route it.
    fn describe(&self) -> Vec<CapabilityInfo> {
        self.entries
            .iter()
            .map(|(name, entry)| {
                let mut inputs: Vec<InputInfo> = entry
                    .required_inputs
                    .iter()
                    .map(|input| InputInfo {
                        name: input.clone(),
                        kind: entry
                            .defaults
                            .get(input)
                            .map_or("any", json_kind)
                            .to_owned(),
                        required: true,
                        default: entry.defaults.get(input).cloned(),
                        enum_values: Vec::new(),
                        description: None,
                    })
                    .collect();
                inputs.extend(
                    entry
                        .defaults
                        .iter()
                        .filter(|(input, _)| !entry.required_inputs.contains(input))
                        .map(|(input, default)| InputInfo {
                            name: input.clone(),
                            kind: json_kind(default).to_owned(),
                            required: false,
                            default: Some(default.clone()),
                            enum_values: Vec::new(),
                            description: None,
                        }),
                );
                let phase = if entry.replacement.is_some() {
                    "Deprecated"
                } else if entry.available {
                    "Available"
                } else {
                    "Unavailable"
                };
                let served = self.follow(name).ok();
                CapabilityInfo {
                    name: name.clone(),
                    display_name: None,
                    description: entry.description.clone(),
                    inputs,
                    outputs: entry.outputs.clone(),
                    phase: phase.to_owned(),
                    deprecation_message: entry.deprecation_message.clone(),
                    replacement: entry.replacement.clone(),
                    provider: served.as_ref().and_then(|f| f.entry.provider.clone()),
                    effect: served.map_or(entry.effect, |f| f.entry.effect),
                }
            })
            .collect()
    }
}

/// The JSON type of `value`, named as a resource names types.
fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}
