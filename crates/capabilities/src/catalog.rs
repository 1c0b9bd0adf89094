//! The catalog the engine resolves capabilities through at plan admission: the registry and
//! the binding rules together, implementing the domain's [`CapabilityCatalog`].

use agentroom_domain::catalog::{
    CapabilityCatalog, CapabilityEffect, CapabilityInfo, InputInfo, Refusal, ResolveRequest,
    Resolved,
};
use agentroom_domain::ids::{ObjectiveId, PrincipalId, TaskKey};
use serde_json::{Map, Value};

use crate::bindings::Bindings;
use crate::error::{ResourceError, ResourceErrors};
use crate::parse::Resources;
use crate::registry::Registry;
use crate::resource::{BindingRule, Capability, CapabilityRef, OutputDef, Phase};
use crate::schema::{ValueError, check_fields};

/// Why a capability cannot be resolved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    /// The name is not a capability name (`name` or `namespace/name`, DNS labels).
    #[error("`{name}` is not a capability name (`name` or `namespace/name`)")]
    BadName {
        /// The name as asked.
        name: String,
    },
    /// No capability of that name.
    #[error("no such capability `{capability}`")]
    Unknown {
        /// The capability asked for.
        capability: CapabilityRef,
    },
    /// The capability's phase is Unavailable.
    #[error("the capability `{capability}` is unavailable")]
    Unavailable {
        /// The capability, after replacements.
        capability: CapabilityRef,
    },
    /// A deprecated capability's replacement is not defined.
    #[error("`{deprecated}` is deprecated and its replacement `{replacement}` is not defined")]
    ReplacementMissing {
        /// The deprecated capability.
        deprecated: CapabilityRef,
        /// Its replacement.
        replacement: CapabilityRef,
    },
    /// Replacements lead back to a capability already followed.
    #[error("replacement cycle: {}", .chain.join(" -> "))]
    ReplacementCycle {
        /// The capabilities followed, the repeated one last.
        chain: Vec<String>,
    },
    /// A required (not optional) requirement is not defined.
    #[error("`{capability}` requires `{requirement}`, which is not defined")]
    RequirementMissing {
        /// The capability that requires it.
        capability: CapabilityRef,
        /// The requirement.
        requirement: CapabilityRef,
    },
    /// A required requirement is unavailable.
    #[error("`{capability}` requires `{requirement}`, which is unavailable")]
    RequirementUnavailable {
        /// The capability that requires it.
        capability: CapabilityRef,
        /// The requirement.
        requirement: CapabilityRef,
    },
    /// Requirements lead back to a capability on the way.
    #[error("requirement cycle: {}", .chain.join(" -> "))]
    RequirementCycle {
        /// The capabilities on the cycle, the repeated one last.
        chain: Vec<String>,
    },
    /// No binding rule names a provider.
    #[error("no binding names a provider for `{capability}`")]
    Unbound {
        /// The capability, after replacements.
        capability: CapabilityRef,
    },
    /// The task's inputs do not satisfy the capability's input definitions.
    #[error("invalid inputs for `{capability}`: {error}")]
    InvalidInputs {
        /// The capability, after replacements.
        capability: CapabilityRef,
        /// What is wrong.
        error: ValueError,
    },
}

/// The domain's refusal for each resolution error; the ones without a variant of their own
/// carry their message.
impl From<ResolveError> for Refusal {
    fn from(error: ResolveError) -> Self {
        match error {
            ResolveError::BadName { .. } | ResolveError::Unknown { .. } => Refusal::Unknown,
            ResolveError::Unavailable { .. } => Refusal::Unavailable,
            ResolveError::Unbound { .. } => Refusal::Unbound,
            ResolveError::InvalidInputs { error, .. } => Refusal::InvalidInputs(error.to_string()),
            other => Refusal::Other(other.to_string()),
        }
    }
}

/// A capability resolved to its provider.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolution {
    requested: CapabilityRef,
    capability: CapabilityRef,
    replacements: Vec<(CapabilityRef, CapabilityRef)>,
    requirements: Vec<CapabilityRef>,
    missing_optional: Vec<CapabilityRef>,
    effect: CapabilityEffect,
    rule: BindingRule,
}

impl Resolution {
    /// The capability asked for.
    pub fn requested(&self) -> &CapabilityRef {
        &self.requested
    }

    /// The capability used, after replacements.
    pub fn capability(&self) -> &CapabilityRef {
        &self.capability
    }

    /// Deprecated capabilities followed to their replacements (`from`, `to`): the requested
    /// capability's chain first, then those of its requirements.
    pub fn replacements(&self) -> &[(CapabilityRef, CapabilityRef)] {
        &self.replacements
    }

    /// Every capability it requires, directly or not, after replacements.
    pub fn requirements(&self) -> &[CapabilityRef] {
        &self.requirements
    }

    /// Optional requirements that are not defined or not available.
    pub fn missing_optional(&self) -> &[CapabilityRef] {
        &self.missing_optional
    }

    /// What it does to the world: external-write when the capability or any requirement is
    /// annotated so.
    pub fn effect(&self) -> CapabilityEffect {
        self.effect
    }

    /// The specialist that provides it.
    pub fn provider(&self) -> &PrincipalId {
        &self.rule.provider
    }

    /// The binding rule that chose the provider.
    pub fn rule(&self) -> &BindingRule {
        &self.rule
    }
}

/// Capabilities and bindings, checked together; the engine's capability catalog.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    registry: Registry,
    bindings: Bindings,
}

impl Catalog {
    /// Builds the catalog from validated resources. Refused with every problem that concerns
    /// several resources: a capability or binding defined twice in a namespace, two rules for
    /// one selector, replacement or requirement cycles.
    pub fn new(resources: Resources) -> Result<Self, ResourceErrors> {
        let mut errors = Vec::new();
        let catalog = Self::build(resources, &mut errors);
        ResourceErrors::check(errors, catalog)
    }

    /// Reads, validates and builds in one step; `files` are (name, text) pairs. The problems
    /// across resources (duplicates, conflicts, cycles) are checked among the valid ones even
    /// when others are invalid, so one run lists every problem.
    pub fn parse<'a>(
        files: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Self, ResourceErrors> {
        let (resources, mut errors) = Resources::read_all(files);
        let catalog = Self::build(resources, &mut errors);
        ResourceErrors::check(errors, catalog)
    }

    fn build(resources: Resources, errors: &mut Vec<ResourceError>) -> Self {
        let (capabilities, bindings) = resources.into_parts();
        let registry = Registry::build(capabilities, errors);
        let bindings = Bindings::build(bindings, errors);
        Self { registry, bindings }
    }

    /// The capabilities.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The binding rules.
    pub fn bindings(&self) -> &Bindings {
        &self.bindings
    }

    /// Resolves `name` (`name` or `namespace/name`) for `node` (a plan and task key, when
    /// known): deprecations followed, phase checked, requirements resolved, provider bound.
    pub fn resolution(
        &self,
        name: &str,
        node: Option<(ObjectiveId, &TaskKey)>,
    ) -> Result<Resolution, ResolveError> {
        let requested = CapabilityRef::parse(name).ok_or_else(|| ResolveError::BadName {
            name: name.to_owned(),
        })?;
        let mut replacements = Vec::new();
        let capability = self
            .registry
            .follow(&requested, &mut replacements)?
            .capability;
        let reference = capability.reference();
        if capability.status.phase == Phase::Unavailable {
            return Err(ResolveError::Unavailable {
                capability: reference,
            });
        }
        let closure = self.registry.closure(capability)?;
        replacements.extend(closure.replacements);
        let rule =
            self.bindings
                .rule_for(&reference, node)
                .ok_or_else(|| ResolveError::Unbound {
                    capability: reference.clone(),
                })?;
        let effect = effect_of(capability, closure.external_write);
        Ok(Resolution {
            requested,
            capability: reference,
            replacements,
            requirements: closure.required,
            missing_optional: closure.missing_optional,
            effect,
            rule: rule.clone(),
        })
    }

    /// Checks a task's `inputs` against `capability`'s input definitions and returns them with
    /// defaults applied: unknown inputs are refused, required ones must be given (`null` counts
    /// as absent), and each value must match its type, `enum`, `format`, `itemType` and
    /// `objectProperties`.
    pub fn check_inputs(
        capability: &Capability,
        inputs: &Map<String, Value>,
    ) -> Result<Map<String, Value>, ResolveError> {
        let defined = capability
            .spec
            .inputs
            .iter()
            .map(|input| (&input.name, &input.schema));
        check_fields("", defined, inputs).map_err(|error| ResolveError::InvalidInputs {
            capability: capability.reference(),
            error,
        })
    }
}

impl CapabilityCatalog for Catalog {
    fn resolve(&self, request: ResolveRequest<'_>) -> Result<Resolved, Refusal> {
        let resolution = self.resolution(request.capability, Some((request.plan, request.task)))?;
        let capability = self
            .registry
            .get(resolution.capability())
            .ok_or(Refusal::Unknown)?;
        let inputs = Self::check_inputs(capability, request.inputs)?;
        Ok(Resolved {
            provider: resolution.provider().clone(),
            capability: resolution.capability().to_string(),
            replacements: resolution
                .replacements()
                .iter()
                .map(|(from, to)| (from.to_string(), to.to_string()))
                .collect(),
            effect: resolution.effect(),
            inputs,
            outputs: capability
                .spec
                .outputs
                .iter()
                .map(OutputDef::declared)
                .collect(),
        })
    }

    /// Every capability of the registry, by the name a task asks for it (`name`, or
    /// `namespace/name` outside the default namespace), with its own spec and status as
    /// written; the provider and effect are those a task asking for it without a node rule
    /// would get: after replacements, external-write when the capability served or any of its
    /// requirements is annotated so.
    fn describe(&self) -> Vec<CapabilityInfo> {
        let mut described: Vec<CapabilityInfo> =
            self.registry.iter().map(|c| self.info(c)).collect();
        described.sort_by(|a, b| a.name.cmp(&b.name));
        described
    }
}

impl Catalog {
    /// What [`CapabilityCatalog::describe`] says of `capability`.
    fn info(&self, capability: &Capability) -> CapabilityInfo {
        let served = self
            .registry
            .follow(&capability.reference(), &mut Vec::new())
            .ok()
            .map(|followed| followed.capability);
        let provider = served
            .and_then(|s| self.bindings.rule_for(&s.reference(), None))
            .map(|rule| rule.provider.clone());
        let effect = match served {
            Some(s) => effect_of(s, self.registry.closure(s).is_ok_and(|c| c.external_write)),
            None => capability.effect,
        };
        let spec = &capability.spec;
        let status = &capability.status;
        CapabilityInfo {
            name: capability.reference().to_string(),
            display_name: spec.display_name.clone(),
            description: spec.description.clone(),
            inputs: spec
                .inputs
                .iter()
                .map(|input| InputInfo {
                    name: input.name.clone(),
                    kind: input.schema.value_type().name().to_owned(),
                    required: input.schema.required(),
                    default: input.schema.default().cloned(),
                    enum_values: input.schema.allowed().unwrap_or_default().to_vec(),
                    description: input.schema.description().map(str::to_owned),
                })
                .collect(),
            outputs: spec.outputs.iter().map(OutputDef::declared).collect(),
            phase: status.phase.to_string(),
            deprecation_message: status.deprecation_message.clone(),
            replacement: status.replacement.as_ref().map(ToString::to_string),
            provider,
            effect,
        }
    }
}

/// What `capability` does to the world, counting its requirements' effect
/// (`requirements_write`): external-write when either writes outside the Room (T4).
fn effect_of(capability: &Capability, requirements_write: bool) -> CapabilityEffect {
    if capability.effect == CapabilityEffect::ExternalWrite || requirements_write {
        CapabilityEffect::ExternalWrite
    } else {
        CapabilityEffect::ReadOrDraft
    }
}
