//! The binding rules of every Binding, by selector: one rule per selector (a second one is a
//! reported conflict, never a silent choice), and a node-specific rule wins over a capability
//! rule.

use std::collections::BTreeMap;

use agentroom_domain::ids::{ObjectiveId, TaskKey};

use crate::error::{ErrorKind, Location, ResourceError};
use crate::resource::{Binding, BindingRule, CapabilityRef, Selector};

/// Every binding rule, by selector.
#[derive(Debug, Clone, Default)]
pub struct Bindings {
    rules: BTreeMap<Selector, BindingRule>,
}

impl Bindings {
    /// Builds the rule table; duplicate Binding names and conflicting rules become errors.
    pub(crate) fn build(list: Vec<Binding>, errors: &mut Vec<ResourceError>) -> Self {
        let mut names: BTreeMap<(String, String), Location> = BTreeMap::new();
        let mut rules: BTreeMap<Selector, BindingRule> = BTreeMap::new();
        for binding in list {
            let key = (
                binding.metadata.namespace.clone(),
                binding.metadata.name.clone(),
            );
            if let Some(first) = names.get(&key) {
                errors.push(ResourceError::new(
                    binding.origin.clone(),
                    ErrorKind::Duplicate {
                        what: "Binding",
                        name: format!("{}/{}", key.0, key.1),
                        first: Box::new(first.clone()),
                    },
                ));
                continue;
            }
            names.insert(key, binding.origin.clone());
            for rule in binding.rules {
                if let Some(first) = rules.get(&rule.selector) {
                    errors.push(ResourceError::new(
                        rule.origin.clone(),
                        ErrorKind::Conflict {
                            selector: rule.selector.to_string(),
                            first: Box::new(first.origin.clone()),
                        },
                    ));
                } else {
                    rules.insert(rule.selector.clone(), rule);
                }
            }
        }
        Self { rules }
    }

    /// The rule that routes `capability` for `node` (a plan and a task key, when known): the
    /// node's own rule if there is one, else the capability's.
    pub fn rule_for(
        &self,
        capability: &CapabilityRef,
        node: Option<(ObjectiveId, &TaskKey)>,
    ) -> Option<&BindingRule> {
        let by_node = node.and_then(|(plan, key)| {
            self.rules.get(&Selector::Node {
                plan,
                node: key.clone(),
            })
        });
        by_node.or_else(|| self.rules.get(&Selector::Capability(capability.clone())))
    }

    /// Every rule, ordered by selector.
    pub fn iter(&self) -> impl Iterator<Item = &BindingRule> {
        self.rules.values()
    }

    /// How many rules there are.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }
}
