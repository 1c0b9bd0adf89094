//! A scenario's ground truth: whether each criterion of each objective is truly met, decided
//! by the scenario's author from what the agents really deliver — never by a reviewer's
//! verdict — and which effect ids name the same effect.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::TruthError;

/// What is true of one criterion, independent of any review.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Truth {
    /// The agents' work meets it whenever the objective completes (honest agents).
    Met,
    /// Nothing the agents deliver in this scenario meets it: any completion is false (a
    /// specialist that claims success early, a report that can never carry the fact).
    Unmet,
    /// Met exactly when the objective's completed work carries `marker`: some contribution of
    /// the objective that completed its task by the objective's completion has `marker` in
    /// its text (a report missing a fact until a corrective plan adds it, R3).
    Delivered {
        /// The text that proves the criterion, as the scenario's agents write it.
        marker: String,
    },
}

/// One criterion's truth.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CriterionTruth {
    /// The criterion id, as the scenario fixes it.
    pub criterion: String,
    /// Whether it is truly met: `"met"`, `"unmet"` or `{"delivered": {"marker": ".."}}`.
    pub truth: Truth,
}

/// The truth of one objective the scenario asks for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ObjectiveTruth {
    /// The scenario's key for the objective ([`crate::trace::ObjectiveRecord::key`]).
    pub key: String,
    /// Every criterion of it, each with its truth.
    pub criteria: Vec<CriterionTruth>,
}

/// A scenario's ground truth.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroundTruth {
    /// The scenario's name.
    pub scenario: String,
    /// Every objective the scenario asks for: the denominator of completion.
    pub objectives: Vec<ObjectiveTruth>,
    /// Effect ids that name one effect, a group each (an id in no group is its own effect;
    /// equal ids are always the same effect).
    #[serde(default)]
    pub same_effects: Vec<Vec<String>>,
}

impl GroundTruth {
    /// Checks the ground truth itself: objective keys unique, each objective with at least
    /// one criterion, criterion ids unique within it, marker texts not blank, and no effect id
    /// in two groups.
    pub fn check(&self) -> Result<(), TruthError> {
        let mut keys = std::collections::BTreeSet::new();
        for objective in &self.objectives {
            if !keys.insert(objective.key.as_str()) {
                return Err(TruthError::DuplicateObjective(objective.key.clone()));
            }
            if objective.criteria.is_empty() {
                return Err(TruthError::NoCriteria(objective.key.clone()));
            }
            let mut ids = std::collections::BTreeSet::new();
            for c in &objective.criteria {
                if !ids.insert(c.criterion.as_str()) {
                    return Err(TruthError::DuplicateCriterion {
                        objective: objective.key.clone(),
                        criterion: c.criterion.clone(),
                    });
                }
                if let Truth::Delivered { marker } = &c.truth
                    && marker.trim().is_empty()
                {
                    return Err(TruthError::BlankMarker {
                        objective: objective.key.clone(),
                        criterion: c.criterion.clone(),
                    });
                }
            }
        }
        self.effect_keys().map(|_| ())
    }

    /// The objective of `key`, if the scenario asks for one.
    pub fn objective(&self, key: &str) -> Option<&ObjectiveTruth> {
        self.objectives.iter().find(|o| o.key == key)
    }

    /// Each grouped effect id with its effect's key (the group's first id).
    pub(crate) fn effect_keys(&self) -> Result<BTreeMap<&str, &str>, TruthError> {
        let mut keys = BTreeMap::new();
        for group in &self.same_effects {
            let Some(first) = group.first() else {
                return Err(TruthError::EmptyEffectGroup);
            };
            for id in group {
                if let Some(other) = keys.insert(id.as_str(), first.as_str())
                    && other != first.as_str()
                {
                    return Err(TruthError::EffectInTwoGroups(id.clone()));
                }
            }
        }
        Ok(keys)
    }
}
