//! The dated qualification report (issue 19): Markdown with one table per metric, an SVG
//! chart, and JSON with everything the tables show. It states the evidence boundary and each
//! baseline's definition, and says where the planner costs more than a baseline, by how much
//! and why (the calls the baselines do not make, counted by role from the traces). The date and
//! the run's facts are passed in: nothing here reads a clock or a file.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::metrics::Metrics;
use crate::summary::{ModeSummary, SummaryError, summarize};
use crate::trace::{CallRole, LedgerEntry, Mode, Trace};

/// What the report says a scripted run shows and does not show.
pub const EVIDENCE_BOUNDARY: &str = "Every figure is drawn from the durable trace only (events, decisions, \
operations, receipts, ledger, contributions, reviews) and judged against each scenario's ground \
truth, written from what the agents deliver, never from a reviewer's verdict. The agents are \
scripted: the same replies in every mode, so the comparison isolates coordination — which \
calls are made, what each agent sees, when a run may end, what the budget and the review gate \
stop. It does not show model judgment: whether a real reasoner plans as the script does, \
whether a real reviewer finds an unmet criterion, or how often a real specialist claims \
success early. Latencies are the scripted agents' plus agentroom's own on this machine; costs \
are the scripted charges in USD micros, the same per call in every mode.";

/// One run's figures for the report: its metrics, and its calls and charges by role.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunFigures {
    /// The metrics.
    pub metrics: Metrics,
    /// Operations dispatched, by role (`reasoner`, `specialist`, `reviewer`).
    pub calls: BTreeMap<String, u32>,
    /// Charges settled (B3), by role, in micros.
    pub charged: BTreeMap<String, i64>,
}

impl RunFigures {
    /// The figures of `metrics`, with calls and charges counted from `trace`.
    pub fn of(metrics: Metrics, trace: &Trace) -> Self {
        let roles: BTreeMap<&str, CallRole> = trace
            .operations
            .iter()
            .map(|o| (o.id.as_str(), o.role))
            .collect();
        let mut calls = BTreeMap::new();
        for o in &trace.operations {
            *calls.entry(o.role.as_str().to_owned()).or_insert(0u32) += 1;
        }
        let mut charged = BTreeMap::new();
        for entry in &trace.ledger {
            let (op, amount) = match entry {
                LedgerEntry::Settled { op, charged, .. } => (op, *charged),
                LedgerEntry::SettlementRefused { op, reserved, .. } => (op, *reserved),
                _ => continue,
            };
            if let Some(role) = roles.get(op.as_str()) {
                let sum = charged.entry(role.as_str().to_owned()).or_insert(0i64);
                *sum = sum.saturating_add(amount);
            }
        }
        Self {
            metrics,
            calls,
            charged,
        }
    }
}

/// Where the planner costs more than a baseline on one measure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CostsMore {
    /// The baseline.
    pub baseline: Mode,
    /// The measure (`total cost (micros)`, `median wall latency (ms)`, `calls`).
    pub measure: String,
    /// The planner's figure.
    pub planner: i64,
    /// The baseline's figure.
    pub other: i64,
    /// How much more, absolutely.
    pub more: i64,
    /// The planner's figure over the baseline's, when the baseline's is not 0.
    pub ratio: Option<f64>,
    /// Why, from the traces.
    pub why: String,
}

/// Everything the report shows, as its JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// The report's date, as given.
    pub date: String,
    /// What a scripted run does and does not show.
    pub evidence_boundary: String,
    /// Each mode's definition.
    pub baselines: BTreeMap<Mode, String>,
    /// The run's facts (binary, store, wall time, holdout hashes), as given.
    pub facts: Vec<(String, String)>,
    /// Each mode's summary.
    pub summaries: Vec<ModeSummary>,
    /// Every run.
    pub runs: Vec<RunFigures>,
    /// Where the planner costs more than a baseline.
    pub costs_more: Vec<CostsMore>,
}

/// The report rendered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    /// Markdown.
    pub markdown: String,
    /// An SVG chart of the summaries.
    pub svg: String,
    /// JSON of [`Report`].
    pub json: String,
}

/// Why a report cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The runs cannot be summed up.
    #[error(transparent)]
    Summary(#[from] SummaryError),
    /// JSON could not be written.
    #[error("writing the report's JSON: {0}")]
    Json(#[from] serde_json::Error),
}

impl Report {
    /// The report of `runs`, dated `date`, with `facts`.
    pub fn new(
        date: &str,
        runs: Vec<RunFigures>,
        facts: Vec<(String, String)>,
    ) -> Result<Self, ReportError> {
        let metrics: Vec<Metrics> = runs.iter().map(|r| r.metrics.clone()).collect();
        let summaries = summarize(&metrics)?;
        let costs_more = costs_more(&runs, &summaries);
        Ok(Self {
            date: date.to_owned(),
            evidence_boundary: EVIDENCE_BOUNDARY.to_owned(),
            baselines: [Mode::Sessions, Mode::Routing, Mode::Planner]
                .into_iter()
                .map(|m| (m, m.definition().to_owned()))
                .collect(),
            facts,
            summaries,
            runs,
            costs_more,
        })
    }

    /// Markdown, SVG and JSON.
    pub fn render(&self) -> Result<Rendered, ReportError> {
        Ok(Rendered {
            markdown: self.markdown(),
            svg: self.svg(),
            json: serde_json::to_string_pretty(self)?,
        })
    }

    fn modes(&self) -> Vec<Mode> {
        self.summaries.iter().map(|s| s.mode).collect()
    }

    fn scenarios(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self
            .runs
            .iter()
            .map(|r| r.metrics.scenario.as_str())
            .collect();
        names.sort_unstable();
        names.dedup();
        names
    }

    fn run(&self, scenario: &str, mode: Mode) -> Option<&Metrics> {
        self.runs
            .iter()
            .map(|r| &r.metrics)
            .find(|m| m.scenario == scenario && m.mode == mode)
    }

    /// The Markdown report.
    pub fn markdown(&self) -> String {
        let mut md = String::new();
        let modes = self.modes();
        let _ = writeln!(
            md,
            "# agentroom qualification report, {}\n",
            md_text(&self.date)
        );
        let _ = writeln!(md, "## Evidence boundary\n\n{}\n", self.evidence_boundary);
        let _ = writeln!(md, "## The modes compared\n");
        for (mode, definition) in &self.baselines {
            let _ = writeln!(md, "- **{mode}**: {definition}");
        }
        if !self.facts.is_empty() {
            let _ = writeln!(md, "\n## This run\n");
            for (k, v) in &self.facts {
                let _ = writeln!(md, "- {}: {}", md_text(k), md_text(v));
            }
        }
        let _ = writeln!(md, "\n## Summary\n");
        let _ = writeln!(
            md,
            "| mode | completion | false completions | human corrections | repeated work | duplicate effects | median wall ms | median in-model ms | total cost (USD) |"
        );
        let _ = writeln!(md, "|---|---|---|---|---|---|---|---|---|");
        for s in &self.summaries {
            let _ = writeln!(
                md,
                "| {} | {}/{} | {} | {} | {} | {} | {} | {} | {} |",
                s.mode,
                s.objectives_completed,
                s.objectives_total,
                s.false_completions,
                s.human_corrections(),
                s.repeated_work_attempts,
                s.duplicate_confirmed_effects,
                opt(s.median_wall_latency_ms),
                opt(s.median_in_model_latency_ms),
                usd(s.cost_micros)
            );
        }
        type Cell = fn(&Metrics) -> String;
        let tables: [(&str, &str, Cell); 8] = [
            ("Completion", "objectives completed / asked for", |m| {
                format!("{}/{}", m.objectives_completed, m.objectives_total)
            }),
            (
                "False completions",
                "completed while the ground truth says a criterion is unmet",
                |m| m.false_completions.to_string(),
            ),
            (
                "Human corrections",
                "owner corrections and operator interventions",
                |m| m.human_corrections().to_string(),
            ),
            (
                "Repeated work attempts",
                "specialist calls redoing work done or still running",
                |m| m.repeated_work_attempts.to_string(),
            ),
            (
                "Duplicate confirmed effects",
                "receipts confirming an effect beyond the first",
                |m| m.duplicate_confirmed_effects.to_string(),
            ),
            (
                "Wall latency (ms)",
                "first owner message to the last status change",
                |m| opt(m.wall_latency_ms),
            ),
            (
                "In-model latency (ms)",
                "sum of dispatch-to-receipt times of the runner's receipts",
                |m| m.in_model_latency_ms.to_string(),
            ),
            ("Total cost (USD)", "the ledger's charges (B3)", |m| {
                usd(m.cost_micros)
            }),
        ];
        for (title, what, cell) in tables {
            let _ = writeln!(md, "\n## {title}\n\n{what}.\n");
            let _ = write!(md, "| scenario |");
            for mode in &modes {
                let _ = write!(md, " {mode} |");
            }
            let _ = write!(md, "\n|---|");
            for _ in &modes {
                let _ = write!(md, "---|");
            }
            md.push('\n');
            for scenario in self.scenarios() {
                let _ = write!(md, "| {} |", md_text(scenario));
                for mode in &modes {
                    let value = self.run(scenario, *mode).map(cell).unwrap_or_default();
                    let _ = write!(md, " {value} |");
                }
                md.push('\n');
            }
        }
        let _ = writeln!(md, "\n## Where the planner costs more\n");
        if self.costs_more.is_empty() {
            let _ = writeln!(
                md,
                "Nowhere: the planner costs no more than either baseline."
            );
        }
        for c in &self.costs_more {
            let ratio = c.ratio.map(|r| format!(" ({r:.2}×)")).unwrap_or_default();
            let _ = writeln!(
                md,
                "- **{} vs {}**: {} against {}, {} more{ratio}. {}",
                c.measure, c.baseline, c.planner, c.other, c.more, c.why
            );
        }
        md
    }

    /// An SVG chart: one panel per metric, a bar per mode.
    pub fn svg(&self) -> String {
        const PANEL_W: i64 = 220;
        const PANEL_H: i64 = 180;
        const BAR_AREA: i64 = 120;
        let colors = ["#7a7a7a", "#d08b2c", "#2c6fd0"];
        type Value = fn(&ModeSummary) -> i64;
        let panels: [(&str, Value); 6] = [
            ("completed objectives", |s| {
                i64::from(s.objectives_completed)
            }),
            ("false completions", |s| i64::from(s.false_completions)),
            ("human corrections", |s| i64::from(s.human_corrections())),
            ("repeated work", |s| i64::from(s.repeated_work_attempts)),
            ("duplicate effects", |s| {
                i64::from(s.duplicate_confirmed_effects)
            }),
            ("total cost (micros)", |s| s.cost_micros),
        ];
        let width = PANEL_W * 3 + 40;
        let height = PANEL_H * 2 + 90;
        let mut svg = String::new();
        let _ = writeln!(
            svg,
            r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" height="{height}" font-family="sans-serif" font-size="12">"#
        );
        let _ = writeln!(
            svg,
            r#"<title>agentroom qualification, {}</title>"#,
            xml(&self.date)
        );
        let _ = writeln!(
            svg,
            r##"<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>"##
        );
        let _ = writeln!(
            svg,
            r#"<text x="20" y="24" font-size="16">agentroom qualification, {} — sums per mode</text>"#,
            xml(&self.date)
        );
        for (i, s) in self.summaries.iter().enumerate() {
            let color = colors.get(i).copied().unwrap_or("#444444");
            let x = 20 + i64::try_from(i).unwrap_or(0) * 110;
            let _ = writeln!(
                svg,
                r#"<rect x="{x}" y="36" width="12" height="12" fill="{color}"/><text x="{}" y="46">{}</text>"#,
                x + 16,
                xml(s.mode.as_str())
            );
        }
        for (p, (name, value)) in panels.iter().enumerate() {
            let p = i64::try_from(p).unwrap_or(0);
            let px = 20 + (p % 3) * PANEL_W;
            let py = 60 + (p / 3) * PANEL_H;
            let max = self.summaries.iter().map(value).max().unwrap_or(0).max(1);
            let _ = writeln!(
                svg,
                r#"<g class="panel"><text x="{}" y="{}">{}</text>"#,
                px,
                py + 14,
                xml(name)
            );
            let base = py + 20 + BAR_AREA;
            let _ = writeln!(
                svg,
                r##"<line x1="{px}" y1="{base}" x2="{}" y2="{base}" stroke="#333333"/>"##,
                px + PANEL_W - 30
            );
            for (i, s) in self.summaries.iter().enumerate() {
                let color = colors.get(i).copied().unwrap_or("#444444");
                let v = value(s);
                let h = v.saturating_mul(BAR_AREA) / max;
                let bx = px + 10 + i64::try_from(i).unwrap_or(0) * 60;
                let _ = writeln!(
                    svg,
                    r#"<rect class="bar" x="{bx}" y="{}" width="40" height="{h}" fill="{color}"><title>{}: {v}</title></rect><text x="{}" y="{}" text-anchor="middle">{v}</text>"#,
                    base - h,
                    xml(s.mode.as_str()),
                    bx + 20,
                    base - h - 4
                );
            }
            svg.push_str("</g>\n");
        }
        svg.push_str("</svg>\n");
        svg
    }
}

/// Where the planner's sums exceed a baseline's: total cost, median wall latency, calls.
fn costs_more(runs: &[RunFigures], summaries: &[ModeSummary]) -> Vec<CostsMore> {
    let Some(planner) = summaries.iter().find(|s| s.mode == Mode::Planner) else {
        return Vec::new();
    };
    let sums = |mode: Mode, what: fn(&RunFigures) -> &BTreeMap<String, i64>| {
        let mut by_role: BTreeMap<String, i64> = BTreeMap::new();
        for r in runs.iter().filter(|r| r.metrics.mode == mode) {
            for (role, v) in what(r) {
                let sum = by_role.entry(role.clone()).or_insert(0);
                *sum = sum.saturating_add(*v);
            }
        }
        by_role
    };
    let calls = |mode: Mode| {
        let mut by_role: BTreeMap<String, i64> = BTreeMap::new();
        for r in runs.iter().filter(|r| r.metrics.mode == mode) {
            for (role, n) in &r.calls {
                *by_role.entry(role.clone()).or_insert(0) += i64::from(*n);
            }
        }
        by_role
    };
    let roles = |m: &BTreeMap<String, i64>, unit: &str| {
        m.iter()
            .map(|(role, v)| format!("{role} {v}{unit}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let planner_charged = sums(Mode::Planner, |r| &r.charged);
    let planner_calls = calls(Mode::Planner);
    let mut out = Vec::new();
    for other in summaries.iter().filter(|s| s.mode != Mode::Planner) {
        let other_charged = sums(other.mode, |r| &r.charged);
        let other_calls = calls(other.mode);
        let diff = |role: &str, a: &BTreeMap<String, i64>, b: &BTreeMap<String, i64>| {
            a.get(role).copied().unwrap_or(0) - b.get(role).copied().unwrap_or(0)
        };
        let why_cost = format!(
            "By role the planner spent {} against {} (micros): the reasoner's plans (+{}), the \
             reviewer's gate (+{}) and specialist work the baseline skipped or cut short (+{}); \
             the baseline's runs ended with {} false completions against the planner's {}.",
            roles(&planner_charged, ""),
            roles(&other_charged, ""),
            diff("reasoner", &planner_charged, &other_charged),
            diff("reviewer", &planner_charged, &other_charged),
            diff("specialist", &planner_charged, &other_charged),
            other.false_completions,
            planner.false_completions
        );
        let planner_calls_total: i64 = planner_calls.values().sum();
        let other_calls_total: i64 = other_calls.values().sum();
        let why_calls = format!(
            "Calls by role: planner {}; {} {}. The planner asks a reasoner for every plan and \
             repair, runs each dependency before the report, and asks a reviewer for every \
             report version.",
            roles(&planner_calls, ""),
            other.mode,
            roles(&other_calls, "")
        );
        let why_wall = "The planner waits for every dependency and for the review before it \
                        completes; a baseline ends as soon as one agent says it is done."
            .to_owned();
        let measures = [
            (
                "total cost (micros)",
                planner.cost_micros,
                other.cost_micros,
                why_cost,
            ),
            ("calls", planner_calls_total, other_calls_total, why_calls),
            (
                "median wall latency (ms)",
                planner.median_wall_latency_ms.unwrap_or(0),
                other.median_wall_latency_ms.unwrap_or(0),
                why_wall,
            ),
        ];
        for (measure, p, o, why) in measures {
            if p > o {
                out.push(CostsMore {
                    baseline: other.mode,
                    measure: measure.to_owned(),
                    planner: p,
                    other: o,
                    more: p - o,
                    ratio: (o != 0).then(|| p as f64 / o as f64),
                    why,
                });
            }
        }
    }
    out
}

fn opt(v: Option<i64>) -> String {
    v.map(|v| v.to_string()).unwrap_or_else(|| "–".to_owned())
}

/// Micros as USD with six decimals.
fn usd(micros: i64) -> String {
    let sign = if micros < 0 { "-" } else { "" };
    let m = micros.unsigned_abs();
    format!("{sign}{}.{:06}", m / 1_000_000, m % 1_000_000)
}

/// Text safe in a Markdown table cell.
fn md_text(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

/// Text safe in XML.
fn xml(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&apos;")
}
