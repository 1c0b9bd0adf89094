//! The metrics of many scenarios summed up per mode: counts and money summed, latencies and
//! cost per scenario as medians (a few slow scenarios should not hide the typical one).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::metrics::Metrics;
use crate::trace::Mode;

/// Why metrics cannot be summed up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SummaryError {
    /// The same scenario twice in one mode would count it twice.
    #[error("scenario `{scenario}` appears twice in mode {mode}")]
    DuplicateScenario {
        /// The mode.
        mode: Mode,
        /// The scenario.
        scenario: String,
    },
    /// A sum beyond `i64` micros or milliseconds.
    #[error("the {what} of mode {mode} overflows i64")]
    Overflow {
        /// The mode.
        mode: Mode,
        /// What was summed.
        what: &'static str,
    },
}

/// One mode's metrics over the scenarios it ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModeSummary {
    /// The mode.
    pub mode: Mode,
    /// How many scenarios it ran.
    pub scenarios: u32,
    /// The objectives those scenarios ask for.
    pub objectives_total: u32,
    /// How many it completed.
    pub objectives_completed: u32,
    /// How many it completed falsely.
    pub false_completions: u32,
    /// Owner corrections, summed.
    pub owner_corrections: u32,
    /// Operator interventions, summed.
    pub operator_interventions: u32,
    /// Repeated work attempts, summed.
    pub repeated_work_attempts: u32,
    /// Duplicate confirmed effects, summed.
    pub duplicate_confirmed_effects: u32,
    /// Total cost over every scenario, in micros.
    pub cost_micros: i64,
    /// Reservations still held at the ends of the runs, in micros.
    pub held_micros: i64,
    /// The median cost of one scenario, in micros.
    pub median_cost_micros: Option<i64>,
    /// The median wall latency over the scenarios that have one.
    pub median_wall_latency_ms: Option<i64>,
    /// How many scenarios have no wall latency (no owner message or no status change).
    pub without_wall_latency: u32,
    /// The median in-model latency of one scenario.
    pub median_in_model_latency_ms: Option<i64>,
}

impl ModeSummary {
    /// Owner corrections and operator interventions together.
    pub fn human_corrections(&self) -> u32 {
        self.owner_corrections
            .saturating_add(self.operator_interventions)
    }

    /// Completed objectives over the objectives asked for; none when none were.
    pub fn completion(&self) -> Option<f64> {
        (self.objectives_total > 0)
            .then(|| f64::from(self.objectives_completed) / f64::from(self.objectives_total))
    }
}

/// Sums up `metrics` per mode, in mode order ([`Mode::Sessions`], [`Mode::Routing`],
/// [`Mode::Planner`]); a mode with no metrics has no summary.
pub fn summarize(metrics: &[Metrics]) -> Result<Vec<ModeSummary>, SummaryError> {
    let mut by_mode: BTreeMap<Mode, Vec<&Metrics>> = BTreeMap::new();
    for m in metrics {
        by_mode.entry(m.mode).or_default().push(m);
    }
    by_mode
        .into_iter()
        .map(|(mode, runs)| summarize_mode(mode, &runs))
        .collect()
}

fn summarize_mode(mode: Mode, runs: &[&Metrics]) -> Result<ModeSummary, SummaryError> {
    let mut scenarios = BTreeSet::new();
    for m in runs {
        if !scenarios.insert(m.scenario.as_str()) {
            return Err(SummaryError::DuplicateScenario {
                mode,
                scenario: m.scenario.clone(),
            });
        }
    }
    let sum_u32 =
        |f: fn(&Metrics) -> u32| runs.iter().map(|m| f(m)).fold(0u32, u32::saturating_add);
    let sum_i64 = |what: &'static str, f: fn(&Metrics) -> i64| {
        runs.iter()
            .try_fold(0i64, |sum, m| sum.checked_add(f(m)))
            .ok_or(SummaryError::Overflow { mode, what })
    };
    let walls: Vec<i64> = runs.iter().filter_map(|m| m.wall_latency_ms).collect();
    let costs: Vec<i64> = runs.iter().map(|m| m.cost_micros).collect();
    let in_model: Vec<i64> = runs.iter().map(|m| m.in_model_latency_ms).collect();
    Ok(ModeSummary {
        mode,
        scenarios: u32::try_from(runs.len()).unwrap_or(u32::MAX),
        objectives_total: sum_u32(|m| m.objectives_total),
        objectives_completed: sum_u32(|m| m.objectives_completed),
        false_completions: sum_u32(|m| m.false_completions),
        owner_corrections: sum_u32(|m| m.owner_corrections),
        operator_interventions: sum_u32(|m| m.operator_interventions),
        repeated_work_attempts: sum_u32(|m| m.repeated_work_attempts),
        duplicate_confirmed_effects: sum_u32(|m| m.duplicate_confirmed_effects),
        cost_micros: sum_i64("total cost", |m| m.cost_micros)?,
        held_micros: sum_i64("held reservations", |m| m.held_micros)?,
        median_cost_micros: median(&costs),
        median_wall_latency_ms: median(&walls),
        without_wall_latency: u32::try_from(runs.len().saturating_sub(walls.len()))
            .unwrap_or(u32::MAX),
        median_in_model_latency_ms: median(&in_model),
    })
}

/// The median of `values`: the middle one of an odd count, the mean of the two middle ones of
/// an even count (rounded down); none of no values.
pub fn median(values: &[i64]) -> Option<i64> {
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    let n = sorted.len();
    let upper = *sorted.get(n / 2)?;
    if n % 2 == 1 {
        return Some(upper);
    }
    let lower = *sorted.get(n / 2 - 1)?;
    let mean = (i128::from(lower) + i128::from(upper)).div_euclid(2);
    // The mean of two i64 lies between them, so it fits.
    Some(i64::try_from(mean).unwrap_or(lower))
}
