//! The registry of capabilities: unique by namespace and name, phases, deprecations followed to
//! their replacements (chains allowed, cycles refused) and requirements resolved transitively
//! (optional ones may be missing, cycles refused).

use std::collections::{BTreeMap, BTreeSet};

use agentroom_domain::catalog::CapabilityEffect;

use crate::catalog::ResolveError;
use crate::error::{ErrorKind, ResourceError};
use crate::resource::{Capability, CapabilityRef, Phase};

/// Every capability, by namespace and name.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    capabilities: BTreeMap<CapabilityRef, Capability>,
}

/// A capability reached from a requested name.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Followed<'r> {
    pub(crate) capability: &'r Capability,
}

/// The transitive requirements of a capability.
#[derive(Debug, Clone, Default)]
pub(crate) struct Closure {
    /// Every capability required, directly or not, after replacements, in discovery order.
    pub(crate) required: Vec<CapabilityRef>,
    /// Optional requirements that are not defined or not available.
    pub(crate) missing_optional: Vec<CapabilityRef>,
    /// Deprecated requirements followed to their replacements.
    pub(crate) replacements: Vec<(CapabilityRef, CapabilityRef)>,
    /// Whether any of them writes outside the Room.
    pub(crate) external_write: bool,
}

impl Registry {
    /// Builds the registry; duplicate names and cycles become errors.
    pub(crate) fn build(list: Vec<Capability>, errors: &mut Vec<ResourceError>) -> Self {
        let mut capabilities: BTreeMap<CapabilityRef, Capability> = BTreeMap::new();
        for capability in list {
            let reference = capability.reference();
            if let Some(first) = capabilities.get(&reference) {
                errors.push(ResourceError::new(
                    capability.origin.clone(),
                    ErrorKind::Duplicate {
                        what: "Capability",
                        name: format!("{}/{}", reference.namespace(), reference.name()),
                        first: Box::new(first.origin.clone()),
                    },
                ));
            } else {
                capabilities.insert(reference, capability);
            }
        }
        let registry = Self { capabilities };
        registry.report_replacement_cycles(errors);
        registry.report_requirement_cycles(errors);
        registry
    }

    /// The capability `reference` names.
    pub fn get(&self, reference: &CapabilityRef) -> Option<&Capability> {
        self.capabilities.get(reference)
    }

    /// Every capability, ordered by namespace and name.
    pub fn iter(&self) -> impl Iterator<Item = &Capability> {
        self.capabilities.values()
    }

    /// How many capabilities there are.
    pub fn len(&self) -> usize {
        self.capabilities.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.capabilities.is_empty()
    }

    /// Follows `reference` through deprecations to the capability that serves it, pushing each
    /// replacement taken onto `replacements`.
    pub(crate) fn follow(
        &self,
        reference: &CapabilityRef,
        replacements: &mut Vec<(CapabilityRef, CapabilityRef)>,
    ) -> Result<Followed<'_>, ResolveError> {
        let mut seen = vec![reference.clone()];
        let mut current = reference.clone();
        loop {
            let Some(capability) = self.get(&current) else {
                return Err(match seen.len() {
                    1 => ResolveError::Unknown {
                        capability: current,
                    },
                    _ => ResolveError::ReplacementMissing {
                        deprecated: seen.get(seen.len() - 2).cloned().unwrap_or(current.clone()),
                        replacement: current,
                    },
                });
            };
            match (capability.status.phase, &capability.status.replacement) {
                (Phase::Deprecated, Some(next)) => {
                    let looped = seen.contains(next);
                    seen.push(next.clone());
                    if looped {
                        return Err(ResolveError::ReplacementCycle {
                            chain: seen.iter().map(ToString::to_string).collect(),
                        });
                    }
                    replacements.push((current, next.clone()));
                    current = next.clone();
                }
                _ => return Ok(Followed { capability }),
            }
        }
    }

    /// Resolves the requirements of `capability` transitively.
    pub(crate) fn closure(&self, capability: &Capability) -> Result<Closure, ResolveError> {
        let mut closure = Closure::default();
        let mut path = vec![capability.reference()];
        let mut done = BTreeSet::new();
        self.visit(capability, &mut path, &mut done, &mut closure)?;
        Ok(closure)
    }

    fn visit(
        &self,
        capability: &Capability,
        path: &mut Vec<CapabilityRef>,
        done: &mut BTreeSet<CapabilityRef>,
        closure: &mut Closure,
    ) -> Result<(), ResolveError> {
        for requirement in &capability.spec.requirements {
            let wanted = requirement.capability();
            let mut replacements = Vec::new();
            let followed = match self.follow(wanted, &mut replacements) {
                Ok(f) if f.capability.status.phase == Phase::Unavailable => {
                    if requirement.optional() {
                        closure.missing_optional.push(wanted.clone());
                        continue;
                    }
                    return Err(ResolveError::RequirementUnavailable {
                        capability: capability.reference(),
                        requirement: f.capability.reference(),
                    });
                }
                Ok(f) => f,
                Err(ResolveError::Unknown { .. } | ResolveError::ReplacementMissing { .. })
                    if requirement.optional() =>
                {
                    closure.missing_optional.push(wanted.clone());
                    continue;
                }
                Err(ResolveError::Unknown {
                    capability: missing,
                }) => {
                    return Err(ResolveError::RequirementMissing {
                        capability: capability.reference(),
                        requirement: missing,
                    });
                }
                Err(other) => return Err(other),
            };
            let reached = followed.capability.reference();
            if let Some(at) = path.iter().position(|p| *p == reached) {
                let mut chain: Vec<String> = path
                    .get(at..)
                    .unwrap_or_default()
                    .iter()
                    .map(ToString::to_string)
                    .collect();
                chain.push(reached.to_string());
                return Err(ResolveError::RequirementCycle { chain });
            }
            closure.replacements.extend(replacements);
            if done.contains(&reached) {
                continue;
            }
            closure.required.push(reached.clone());
            closure.external_write |= followed.capability.effect == CapabilityEffect::ExternalWrite;
            path.push(reached.clone());
            self.visit(followed.capability, path, done, closure)?;
            path.pop();
            done.insert(reached);
        }
        Ok(())
    }

    /// The first requirement cycle reachable from `capability`, as a chain that starts and ends
    /// at the same capability. Unlike [`Registry::closure`], a missing or unavailable
    /// requirement does not stop the walk, so a cycle behind one is still found.
    fn requirement_cycle(&self, capability: &Capability) -> Option<Vec<String>> {
        fn walk(
            registry: &Registry,
            capability: &Capability,
            path: &mut Vec<CapabilityRef>,
            done: &mut BTreeSet<CapabilityRef>,
        ) -> Option<Vec<String>> {
            for requirement in &capability.spec.requirements {
                let Ok(followed) = registry.follow(requirement.capability(), &mut Vec::new())
                else {
                    continue;
                };
                let reached = followed.capability.reference();
                if let Some(at) = path.iter().position(|p| *p == reached) {
                    let mut chain: Vec<String> = path
                        .get(at..)
                        .unwrap_or_default()
                        .iter()
                        .map(ToString::to_string)
                        .collect();
                    chain.push(reached.to_string());
                    return Some(chain);
                }
                if done.contains(&reached) {
                    continue;
                }
                path.push(reached.clone());
                let found = walk(registry, followed.capability, path, done);
                path.pop();
                if found.is_some() {
                    return found;
                }
                done.insert(reached);
            }
            None
        }
        walk(
            self,
            capability,
            &mut vec![capability.reference()],
            &mut BTreeSet::new(),
        )
    }

    /// Reports every replacement cycle once, at the capability of the cycle that sorts first.
    fn report_replacement_cycles(&self, errors: &mut Vec<ResourceError>) {
        for capability in self.capabilities.values() {
            let start = capability.reference();
            if let Err(ResolveError::ReplacementCycle { chain }) =
                self.follow(&start, &mut Vec::new())
            {
                let last = chain.last().cloned().unwrap_or_default();
                let cycle_start = chain.iter().position(|c| *c == last).unwrap_or(0);
                let members = chain.get(cycle_start..).unwrap_or_default();
                let first_member = members.iter().min();
                if first_member == Some(&start.to_string()) {
                    let at = capability
                        .status
                        .replacement_origin
                        .clone()
                        .unwrap_or_else(|| capability.origin.with_path("status.replacement"));
                    errors.push(ResourceError::new(
                        at,
                        ErrorKind::ReplacementCycle(members.to_vec()),
                    ));
                }
            }
        }
    }

    /// Reports every requirement cycle once, at the capability of the cycle that sorts first.
    fn report_requirement_cycles(&self, errors: &mut Vec<ResourceError>) {
        let mut reported = BTreeSet::new();
        for capability in self.capabilities.values() {
            if let Some(chain) = self.requirement_cycle(capability) {
                // Reported from a capability on the cycle, once per cycle.
                if chain.first() != Some(&capability.reference().to_string()) {
                    continue;
                }
                let mut members: Vec<String> = chain.iter().skip(1).cloned().collect();
                members.sort();
                if reported.insert(members) {
                    // At the requirement that starts the cycle.
                    let next = chain.get(1);
                    let at = capability
                        .spec
                        .requirements
                        .iter()
                        .find(|r| {
                            let mut replacements = Vec::new();
                            self.follow(&r.capability, &mut replacements)
                                .is_ok_and(|f| Some(&f.capability.reference().to_string()) == next)
                        })
                        .map_or_else(
                            || capability.origin.with_path("spec.requirements"),
                            |r| r.origin.clone(),
                        );
                    errors.push(ResourceError::new(at, ErrorKind::RequirementCycle(chain)));
                }
            }
        }
    }
}
