//! The resources, as validated: `Capability` (seed 002) and `Binding` (`planspec.io/v1alpha1`).
//! They are built only by [`crate::Resources::parse`], so every value here has passed
//! validation; fields are read through getters. Fields agentroom does not read are kept in
//! `extra`, as written.

use std::collections::BTreeMap;
use std::fmt;

use agentroom_domain::catalog::{CapabilityEffect, DeclaredOutput};
use agentroom_domain::ids::{ObjectiveId, PrincipalId, TaskKey};
use serde_json::{Map, Value};

use crate::error::Location;
use crate::schema::{ValueSchema, ValueType};

/// The API version of every resource.
pub const API_VERSION: &str = "planspec.io/v1alpha1";

/// The namespace of a reference that names none, and of a capability asked for by bare name.
pub const DEFAULT_NAMESPACE: &str = "default";

/// The annotation saying what a capability does to the world (T4).
pub const EFFECT_ANNOTATION: &str = "agentroom.io/effect";

/// A capability by namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CapabilityRef {
    namespace: String,
    name: String,
}

impl CapabilityRef {
    pub(crate) fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    /// Reads `name` (in the default namespace) or `namespace/name`, as tasks and the command
    /// line name capabilities; `None` when either part is not a DNS label.
    pub fn parse(text: &str) -> Option<Self> {
        let (namespace, name) = text.split_once('/').unwrap_or((DEFAULT_NAMESPACE, text));
        (is_dns_label(namespace) && is_dns_label(name)).then(|| Self::new(namespace, name))
    }

    /// The namespace.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// `name` in the default namespace, else `namespace/name`: the form [`CapabilityRef::parse`]
/// reads back.
impl fmt::Display for CapabilityRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.namespace == DEFAULT_NAMESPACE {
            f.write_str(&self.name)
        } else {
            write!(f, "{}/{}", self.namespace, self.name)
        }
    }
}

/// Whether `text` is a DNS label (RFC 1123): 1 to 63 lower-case letters, digits or `-`,
/// starting and ending with a letter or digit. Resource names and namespaces are DNS labels.
pub fn is_dns_label(text: &str) -> bool {
    let bytes = text.as_bytes();
    let edge = |b: Option<&u8>| b.is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    (1..=63).contains(&bytes.len())
        && edge(bytes.first())
        && edge(bytes.last())
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
}

/// Whether `text` may name an input, output or object property: a letter, then letters,
/// digits, `_` or `-` (camelCase allowed, as in the seed's `readOnly`), at most 63.
pub fn is_field_name(text: &str) -> bool {
    let mut chars = text.chars();
    text.len() <= 63
        && chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// `metadata` of any resource.
#[derive(Debug, Clone, PartialEq)]
pub struct Metadata {
    pub(crate) name: String,
    pub(crate) namespace: String,
    pub(crate) labels: BTreeMap<String, String>,
    pub(crate) annotations: BTreeMap<String, String>,
    pub(crate) extra: Map<String, Value>,
}

impl Metadata {
    /// The name, a DNS label.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The namespace, a DNS label.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The labels.
    pub fn labels(&self) -> &BTreeMap<String, String> {
        &self.labels
    }

    /// The annotations.
    pub fn annotations(&self) -> &BTreeMap<String, String> {
        &self.annotations
    }

    /// Other metadata fields, kept as written.
    pub fn extra(&self) -> &Map<String, Value> {
        &self.extra
    }
}

/// A capability's availability (`status.phase`); a capability without a status is Available.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Usable.
    Available,
    /// Not usable now; tasks needing it are refused.
    Unavailable,
    /// Superseded: resolution follows `status.replacement` when there is one.
    Deprecated,
}

impl Phase {
    pub(crate) fn parse(text: &str) -> Option<Self> {
        match text {
            "Available" => Some(Self::Available),
            "Unavailable" => Some(Self::Unavailable),
            "Deprecated" => Some(Self::Deprecated),
            _ => None,
        }
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Available => "Available",
            Self::Unavailable => "Unavailable",
            Self::Deprecated => "Deprecated",
        })
    }
}

/// A `Capability` resource.
#[derive(Debug, Clone, PartialEq)]
pub struct Capability {
    pub(crate) metadata: Metadata,
    pub(crate) spec: CapabilitySpec,
    pub(crate) status: CapabilityStatus,
    pub(crate) effect: CapabilityEffect,
    pub(crate) origin: Location,
}

impl Capability {
    /// Its namespace and name.
    pub fn reference(&self) -> CapabilityRef {
        CapabilityRef::new(&self.metadata.namespace, &self.metadata.name)
    }

    /// `metadata`.
    pub fn metadata(&self) -> &Metadata {
        &self.metadata
    }

    /// `spec`.
    pub fn spec(&self) -> &CapabilitySpec {
        &self.spec
    }

    /// `status` (phase Available when the resource has none).
    pub fn status(&self) -> &CapabilityStatus {
        &self.status
    }

    /// What it does to the world, from the `agentroom.io/effect` annotation (`read` or `draft`
    /// by default; `external-write` is refused at plan admission, T4).
    pub fn effect(&self) -> CapabilityEffect {
        self.effect
    }

    /// Where the resource is defined.
    pub fn origin(&self) -> &Location {
        &self.origin
    }
}

/// `spec` of a Capability.
#[derive(Debug, Clone, PartialEq)]
pub struct CapabilitySpec {
    pub(crate) description: String,
    pub(crate) display_name: Option<String>,
    pub(crate) category: Option<String>,
    pub(crate) inputs: Vec<InputDef>,
    pub(crate) outputs: Vec<OutputDef>,
    pub(crate) requirements: Vec<Requirement>,
    pub(crate) extra: Map<String, Value>,
}

impl CapabilitySpec {
    /// What the capability provides.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// A human-friendly name.
    pub fn display_name(&self) -> Option<&str> {
        self.display_name.as_deref()
    }

    /// The category (`code`, `data`, `test`, ...).
    pub fn category(&self) -> Option<&str> {
        self.category.as_deref()
    }

    /// The inputs it accepts, in order.
    pub fn inputs(&self) -> &[InputDef] {
        &self.inputs
    }

    /// What it produces, in order.
    pub fn outputs(&self) -> &[OutputDef] {
        &self.outputs
    }

    /// The capabilities it depends on.
    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }

    /// Other spec fields, kept as written.
    pub fn extra(&self) -> &Map<String, Value> {
        &self.extra
    }
}

/// One input of a capability.
#[derive(Debug, Clone, PartialEq)]
pub struct InputDef {
    pub(crate) name: String,
    pub(crate) schema: ValueSchema,
}

impl InputDef {
    /// The input's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its definition: type, required, default, format, enum, item type, properties.
    pub fn schema(&self) -> &ValueSchema {
        &self.schema
    }
}

/// One output of a capability.
#[derive(Debug, Clone, PartialEq)]
pub struct OutputDef {
    pub(crate) name: String,
    pub(crate) value_type: ValueType,
    pub(crate) description: Option<String>,
    pub(crate) extra: Map<String, Value>,
}

impl OutputDef {
    /// The output's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its type.
    pub fn value_type(&self) -> ValueType {
        self.value_type
    }

    /// Its description.
    pub fn description(&self) -> Option<&str> {
        self.description.as_deref()
    }

    /// Other fields, kept as written.
    pub fn extra(&self) -> &Map<String, Value> {
        &self.extra
    }

    /// The output as the domain checks a contribution against it (T2).
    pub fn declared(&self) -> DeclaredOutput {
        DeclaredOutput {
            name: self.name.clone(),
            kind: self.value_type.into(),
            description: self.description.clone(),
        }
    }
}

/// A capability another one depends on (`spec.requirements[]`, written `name:` or
/// `capability:`).
#[derive(Debug, Clone, PartialEq)]
pub struct Requirement {
    pub(crate) capability: CapabilityRef,
    pub(crate) optional: bool,
    pub(crate) origin: Location,
}

impl Requirement {
    /// The capability required.
    pub fn capability(&self) -> &CapabilityRef {
        &self.capability
    }

    /// Whether it may be missing (`optional: true`).
    pub fn optional(&self) -> bool {
        self.optional
    }

    /// Where it is written.
    pub fn origin(&self) -> &Location {
        &self.origin
    }
}

/// `status` of a Capability.
#[derive(Debug, Clone, PartialEq)]
pub struct CapabilityStatus {
    pub(crate) phase: Phase,
    pub(crate) replacement: Option<CapabilityRef>,
    pub(crate) replacement_origin: Option<Location>,
    pub(crate) deprecation_message: Option<String>,
    pub(crate) conditions: Vec<Value>,
    pub(crate) observed_generation: Option<u64>,
    pub(crate) extra: Map<String, Value>,
}

impl CapabilityStatus {
    pub(crate) fn available() -> Self {
        Self {
            phase: Phase::Available,
            replacement: None,
            replacement_origin: None,
            deprecation_message: None,
            conditions: Vec::new(),
            observed_generation: None,
            extra: Map::new(),
        }
    }

    /// The phase.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// The capability replacing this deprecated one.
    pub fn replacement(&self) -> Option<&CapabilityRef> {
        self.replacement.as_ref()
    }

    /// The deprecation notice.
    pub fn deprecation_message(&self) -> Option<&str> {
        self.deprecation_message.as_deref()
    }

    /// The status conditions, as written.
    pub fn conditions(&self) -> &[Value] {
        &self.conditions
    }

    /// The last observed generation.
    pub fn observed_generation(&self) -> Option<u64> {
        self.observed_generation
    }

    /// Other status fields, kept as written.
    pub fn extra(&self) -> &Map<String, Value> {
        &self.extra
    }
}

/// A `Binding` resource: rules that say which specialist provides a capability.
#[derive(Debug, Clone, PartialEq)]
pub struct Binding {
    pub(crate) metadata: Metadata,
    pub(crate) rules: Vec<BindingRule>,
    pub(crate) extra: Map<String, Value>,
    pub(crate) origin: Location,
}

impl Binding {
    /// `metadata`.
    pub fn metadata(&self) -> &Metadata {
        &self.metadata
    }

    /// `spec.rules`, in order.
    pub fn rules(&self) -> &[BindingRule] {
        &self.rules
    }

    /// Other spec fields, kept as written.
    pub fn extra(&self) -> &Map<String, Value> {
        &self.extra
    }

    /// Where the resource is defined.
    pub fn origin(&self) -> &Location {
        &self.origin
    }
}

/// What a binding rule applies to.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Selector {
    /// Every task needing this capability (`capabilityRef`).
    Capability(CapabilityRef),
    /// One task of one plan (`planRef` + `nodeId`): the plan is the objective's id, the node
    /// the task's key. It wins over a capability rule.
    Node {
        /// The plan (objective) id.
        plan: ObjectiveId,
        /// The task key.
        node: TaskKey,
    },
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Capability(c) => write!(f, "capability `{c}`"),
            Self::Node { plan, node } => write!(f, "node `{node}` of plan {plan}"),
        }
    }
}

/// One rule of a binding: a selector and its target.
#[derive(Debug, Clone, PartialEq)]
pub struct BindingRule {
    pub(crate) selector: Selector,
    pub(crate) provider: PrincipalId,
    pub(crate) config: Map<String, Value>,
    pub(crate) origin: Location,
}

impl BindingRule {
    /// What it applies to.
    pub fn selector(&self) -> &Selector {
        &self.selector
    }

    /// The specialist that provides the capability (`target.provider`).
    pub fn provider(&self) -> &PrincipalId {
        &self.provider
    }

    /// Provider configuration (`target.config`), as written.
    pub fn config(&self) -> &Map<String, Value> {
        &self.config
    }

    /// Where the rule is written.
    pub fn origin(&self) -> &Location {
        &self.origin
    }
}
