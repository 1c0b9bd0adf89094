//! The readable tables of the operator commands, from the API's typed answers
//! (`agentroom-api-model`). Every string the API
//! returns is printed with its control characters escaped.

use std::fmt::Write as _;

use agentroom_api_model::responses::{
    Budget, Corrections, Decided, Decision, ObjectiveBrief, ObjectiveDetail, Page, PlanVersionView,
    ReportContent, Reviews,
};
use agentroom_domain::ids::RoomId;
use agentroom_domain::ledger::LedgerEntry;
use agentroom_domain::money::UsdMicros;
use agentroom_domain::objective::Criterion;
use agentroom_domain::plan::TaskState;
use serde::Serialize;
use serde_json::Value;

// Printing
// ---------------------------------------------------------------------------------------------

pub(super) fn json_text(value: &Value) -> String {
    let mut text = serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string());
    text.push('\n');
    text
}

/// `$1.234567` for micros, exactly (the domain's one money format).
pub(super) fn dollars(micros: i64) -> String {
    UsdMicros::new(micros).to_string()
}

/// A value as one line of text, with control characters shown escaped (a title cannot
/// move the cursor or recolor the terminal).
pub(super) fn text(value: &Value) -> String {
    let raw = match value {
        Value::Null => "-".to_owned(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    clean(&raw)
}

pub(super) fn clean(raw: &str) -> String {
    raw.chars()
        .flat_map(|c| {
            if c.is_control() {
                c.escape_default().collect::<Vec<_>>()
            } else {
                vec![c]
            }
        })
        .collect()
}

pub(super) fn items<'a>(value: &'a Value, field: &str) -> &'a [Value] {
    value[field].as_array().map_or(&[], Vec::as_slice)
}

/// Left-aligned columns, two spaces apart.
pub(super) fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if let Some(width) = widths.get_mut(i) {
                *width = (*width).max(cell.chars().count());
            }
        }
    }
    let mut out = String::new();
    let mut line = |cells: Vec<&str>| {
        let mut text = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                text.push_str(cell);
            } else {
                let width = widths.get(i).copied().unwrap_or(0);
                let pad = width.saturating_sub(cell.chars().count());
                text.push_str(cell);
                text.push_str(&" ".repeat(pad + 2));
            }
        }
        out.push_str(text.trim_end());
        out.push('\n');
    };
    line(headers.to_vec());
    for row in rows {
        line(row.iter().map(String::as_str).collect());
    }
    out
}

/// A domain value as the API wrote it, as one line of text (enums by their wire names).
pub(super) fn wire<T: Serialize>(value: &T) -> String {
    text(&serde_json::to_value(value).unwrap_or(Value::Null))
}

pub(super) fn log_lines(answer: &Decision) -> String {
    let mut out = String::new();
    for entry in &answer.log {
        let _ = writeln!(
            out,
            "  {} {}: {}",
            wire(&entry.verdict),
            wire(&entry.rule),
            clean(&entry.message)
        );
    }
    out
}

pub(super) fn budget_table(room: &RoomId, budget: &Budget) -> String {
    let balances = &budget.balances;
    let mut out = format!("budget of room {room}\n");
    let rows: Vec<Vec<String>> = [
        ("limit", balances.limit),
        ("reserved", balances.reserved),
        ("spent", balances.spent),
        ("uncertain", balances.uncertain),
        ("available", balances.available),
    ]
    .iter()
    .map(|(name, amount)| {
        let micros = amount.micros();
        vec![(*name).to_owned(), dollars(micros), micros.to_string()]
    })
    .collect();
    out.push_str(&table(&["", "USD", "MICROS"], &rows));
    if let Some(overrun) = &budget.overrun {
        let _ = writeln!(out, "overrun: {}", wire(overrun));
    }
    for (title, spent) in [
        ("objective", &budget.spent_micros_by_objective),
        ("role", &budget.spent_micros_by_role),
        ("principal", &budget.spent_micros_by_principal),
        ("model", &budget.spent_micros_by_model),
    ] {
        let _ = writeln!(out, "\nspent by {title}");
        let rows: Vec<Vec<String>> = spent
            .iter()
            .map(|(key, &micros)| vec![clean(key), dollars(micros), micros.to_string()])
            .collect();
        out.push_str(&table(&[&title.to_uppercase(), "USD", "MICROS"], &rows));
    }
    let _ = writeln!(out, "\nledger");
    let rows: Vec<Vec<String>> = budget
        .entries
        .iter()
        .enumerate()
        .map(|(i, entry)| {
            let (op, amount, detail) = match entry {
                LedgerEntry::Opened { limit } => (None, Some(*limit), String::new()),
                LedgerEntry::Reserved { op, amount } | LedgerEntry::Released { op, amount } => {
                    (Some(op), Some(*amount), String::new())
                }
                LedgerEntry::Settled {
                    op,
                    reserved,
                    charged,
                } => (
                    Some(op),
                    Some(*charged),
                    format!("of {} reserved", dollars(reserved.micros())),
                ),
                LedgerEntry::SettlementRefused {
                    op,
                    reserved,
                    reported,
                } => (
                    Some(op),
                    Some(*reserved),
                    format!(
                        "whole reservation: reported usage of {} refused",
                        dollars(reported.micros())
                    ),
                ),
                LedgerEntry::LimitRaised { by } => (None, Some(*by), String::new()),
                LedgerEntry::MarkedUncertain { op } => (Some(op), None, String::new()),
                LedgerEntry::OverrunAcknowledged => (None, None, String::new()),
            };
            let kind = serde_json::to_value(entry)
                .ok()
                .and_then(|v| v.get("entry").and_then(Value::as_str).map(clean))
                .unwrap_or_default();
            vec![
                (i + 1).to_string(),
                kind,
                op.map_or_else(|| "-".to_owned(), ToString::to_string),
                amount.map_or_else(|| "-".to_owned(), |a| dollars(a.micros())),
                detail,
            ]
        })
        .collect();
    out.push_str(&table(&["#", "ENTRY", "OPERATION", "AMOUNT", ""], &rows));
    out
}

pub(super) fn objectives_table(list: &Page<ObjectiveBrief>) -> String {
    let rows: Vec<Vec<String>> = list
        .items
        .iter()
        .map(|o| {
            vec![
                clean(&o.id),
                wire(&o.status),
                o.plan_versions.to_string(),
                wire(&o.owner),
                clean(&o.title),
            ]
        })
        .collect();
    if rows.is_empty() {
        return "no objectives\n".to_owned();
    }
    table(&["OBJECTIVE", "STATUS", "PLANS", "OWNER", "TITLE"], &rows)
}

fn criteria_table(criteria: &[Criterion]) -> String {
    let rows: Vec<Vec<String>> = criteria
        .iter()
        .map(|c| vec![wire(&c.id), clean(&c.text)])
        .collect();
    table(&["CRITERION", "TEXT"], &rows)
}

pub(super) fn objective_text(
    o: &ObjectiveDetail,
    plans: &Page<PlanVersionView>,
    decisions: &Page<Decided>,
) -> String {
    let brief = &o.brief;
    let mut out = String::new();
    let _ = writeln!(out, "objective {}", clean(&brief.id));
    let _ = writeln!(out, "title:   {}", clean(&brief.title));
    let _ = writeln!(out, "status:  {}", wire(&brief.status));
    let _ = writeln!(out, "owner:   {}", wire(&brief.owner));
    let _ = writeln!(
        out,
        "revision {} (control {})",
        brief.revision, brief.control_revision
    );
    if let Some(report) = &o.awaiting_review {
        let _ = writeln!(out, "awaiting review: report v{}", report.version);
    }
    let _ = writeln!(out, "\ncriteria");
    out.push_str(&criteria_table(&o.criteria));
    match &o.board {
        None => {
            let _ = writeln!(out, "\nboard: no plan yet");
        }
        Some(board) => {
            let _ = writeln!(out, "\nboard (plan v{})", board.plan_version);
            for column in &board.columns {
                let _ = writeln!(out, "{} ({})", wire(&column.column), column.tasks.len());
                for task in &column.tasks {
                    let _ = writeln!(
                        out,
                        "  {}  {}  [{} by {}, {}]",
                        wire(&task.key),
                        clean(&task.title),
                        clean(&task.capability),
                        wire(&task.assignee),
                        task_state(&task.state),
                    );
                    // Why its call waits or is uncertain, in the provider's words.
                    if let Some(call) = &task.call
                        && call.status != "running"
                    {
                        let cause = call
                            .cause
                            .as_deref()
                            .map(|c| format!(": {}", clean(c)))
                            .unwrap_or_default();
                        let _ = writeln!(
                            out,
                            "    call {} {}{cause}",
                            clean(&call.op),
                            clean(&call.status).replace('_', " ")
                        );
                    }
                }
            }
        }
    }
    let _ = writeln!(out, "\nplan versions");
    let rows: Vec<Vec<String>> = plans
        .items
        .iter()
        .map(|plan| {
            let diff = &plan.diff;
            let mut change = Vec::new();
            for (field, keys) in [
                ("added", &diff.added),
                ("removed", &diff.removed),
                ("changed", &diff.changed),
                ("reused", &diff.reused),
            ] {
                let list = keys.iter().map(|k| clean(k)).collect::<Vec<_>>().join(",");
                if !list.is_empty() {
                    change.push(format!("{field} {list}"));
                }
            }
            let trigger = serde_json::to_value(&plan.trigger)
                .ok()
                .and_then(|v| v.get("trigger").cloned())
                .unwrap_or(Value::Null);
            vec![
                format!("v{}{}", plan.number, if plan.current { "*" } else { "" }),
                text(&trigger),
                change.join("; "),
                clean(&plan.explanation),
            ]
        })
        .collect();
    out.push_str(&table(&["PLAN", "TRIGGER", "DIFF", "EXPLANATION"], &rows));
    let _ = writeln!(out, "\ndecision log");
    let rows: Vec<Vec<String>> = decisions
        .items
        .iter()
        .map(|d| {
            vec![
                d.revision.to_string(),
                clean(&d.input),
                wire(&d.entry.verdict),
                wire(&d.entry.rule),
                clean(&d.entry.message),
            ]
        })
        .collect();
    if rows.is_empty() {
        let _ = writeln!(
            out,
            "(no decisions recorded by this host process since it started)"
        );
    } else {
        out.push_str(&table(
            &["REVISION", "INPUT", "VERDICT", "RULE", "MESSAGE"],
            &rows,
        ));
    }
    out
}

pub(super) fn task_state(state: &TaskState) -> String {
    let value = serde_json::to_value(state).unwrap_or(Value::Null);
    let name = text(&value["state"]);
    match value["reason"].as_str() {
        Some(reason) => format!("{name}: {}", clean(reason)),
        None => name,
    }
}

/// A report's text, line by line, and each of its sources with its excerpt (every string
/// cleaned of control characters).
fn report_content(out: &mut String, content: &ReportContent) {
    let _ = writeln!(out, "  text:");
    let body = content.body.clone().unwrap_or_else(|| {
        content
            .artifacts
            .iter()
            .map(|a| format!("## {}\n\n{}", a.name, a.content))
            .collect::<Vec<_>>()
            .join("\n\n")
    });
    for line in body.lines() {
        let _ = writeln!(out, "    | {}", clean(line));
    }
    let _ = writeln!(out, "  sources:");
    if content.sources.is_empty() {
        let _ = writeln!(out, "    (none)");
    }
    for source in &content.sources {
        let id = source.id.as_deref().unwrap_or("-");
        let title = source.title.as_deref().unwrap_or_default();
        let uri = source.uri.as_deref().unwrap_or_default();
        let _ = writeln!(
            out,
            "    [{}] {} {} {}",
            clean(id),
            clean(&source.kind),
            clean(title),
            clean(uri)
        );
        if let Some(excerpt) = &source.excerpt {
            for line in excerpt.lines().filter(|l| !l.trim().is_empty()) {
                let _ = writeln!(out, "        > {}", clean(line));
            }
        }
    }
}

/// `objective corrections`: the objective's criteria now, then each correction.
pub(super) fn corrections_text(corrections: &Corrections) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "corrections of objective {}",
        clean(&corrections.objective)
    );
    let _ = writeln!(out, "\ncriteria now");
    out.push_str(&criteria_table(&corrections.criteria));
    if corrections.items.is_empty() {
        let _ = writeln!(out, "\nno correction yet");
    }
    for c in &corrections.items {
        let plan = c
            .plan_version
            .map_or_else(|| "no plan yet".to_owned(), |v| format!("plan v{v}"));
        let _ = writeln!(
            out,
            "\ncorrection {} by {} ({plan})",
            clean(&c.event),
            wire(&c.author)
        );
        let _ = writeln!(out, "  {}", clean(&c.text));
        match &c.criteria {
            Some(criteria) => {
                let _ = writeln!(out, "  criteria set to:");
                out.push_str(&criteria_table(criteria));
            }
            None => {
                let _ = writeln!(out, "  criteria kept");
            }
        }
    }
    out
}

pub(super) fn reviews_text(reviews: &Reviews) -> String {
    let mut out = String::new();
    let observed = format!(
        "{}:{}",
        reviews.observed.objective, reviews.observed.control
    );
    let _ = writeln!(out, "reviews of objective {}", clean(&reviews.objective));
    let _ = writeln!(
        out,
        "revisions: objective {}, control {} (--observed {observed})",
        reviews.observed.objective, reviews.observed.control
    );
    let _ = writeln!(out, "\ncriteria");
    out.push_str(&criteria_table(&reviews.criteria));
    if let Some(report) = &reviews.awaiting_review {
        // What the reviewer passes on to `review record` (R6: the revisions seen here).
        let _ = writeln!(
            out,
            "\nawaiting review: report v{} at revisions {observed}",
            report.version
        );
        let _ = writeln!(
            out,
            "  record your review of it with: agentroom review record {} --report-version {} --observed {observed} --verdict CRITERION=met|unmet|unknown --evidence CRITERION=TEXT …",
            clean(&reviews.objective),
            report.version
        );
    }
    for report in &reviews.reports {
        let _ = writeln!(out, "\nreport v{}", report.version);
        let _ = writeln!(out, "  task:         {}", wire(&report.task));
        let _ = writeln!(out, "  contribution: {}", clean(&report.contribution));
        let author = report
            .content
            .as_ref()
            .map_or_else(|| "-".to_owned(), |c| wire(&c.author));
        let _ = writeln!(out, "  author:       {author}");
        let source_set = serde_json::to_value(&report.source_set).unwrap_or(Value::Null);
        let _ = writeln!(out, "  source set:   {}", text(&source_set["digest"]));
        match &report.content {
            Some(content) => report_content(&mut out, content),
            None => {
                for source in items(&source_set, "sources") {
                    let _ = writeln!(out, "    - {}", clean(&source.to_string()));
                }
            }
        }
        let of_version: Vec<_> = reviews
            .reviews
            .iter()
            .filter(|r| r.report_version == report.version)
            .collect();
        if of_version.is_empty() {
            let _ = writeln!(out, "  no review yet");
        }
        for review in of_version {
            let _ = writeln!(
                out,
                "  review {} by {}{}: {}",
                clean(&review.id),
                wire(&review.reviewer),
                review
                    .model
                    .as_deref()
                    .map(|m| format!(" (model {})", clean(m)))
                    .unwrap_or_default(),
                wire(&review.outcome)
            );
            let rows: Vec<Vec<String>> = review
                .verdicts
                .iter()
                .map(|v| {
                    let quote = v
                        .quote
                        .as_deref()
                        .map(|q| format!("\"{}\"", clean(q)))
                        .unwrap_or_default();
                    vec![
                        format!("    {}", wire(&v.criterion)),
                        wire(&v.verdict),
                        clean(&v.evidence),
                        clean(&v.sources.join(", ")),
                        quote,
                    ]
                })
                .collect();
            out.push_str(&table(
                &["    CRITERION", "VERDICT", "EVIDENCE", "SOURCES", "QUOTE"],
                &rows,
            ));
        }
    }
    if reviews.reports.is_empty() {
        let _ = writeln!(out, "\nno report yet");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dollars_are_exact_for_micros_of_either_sign() {
        assert_eq!(dollars(0), "$0.000000");
        assert_eq!(dollars(9_500), "$0.009500");
        assert_eq!(dollars(1_000_000), "$1.000000");
        assert_eq!(dollars(-2_500_001), "-$2.500001");
        assert_eq!(dollars(i64::MIN), "-$9223372036854.775808");
    }

    #[test]
    fn control_characters_in_titles_are_shown_escaped() {
        assert_eq!(clean("a\u{1b}[31mred\nb"), "a\\u{1b}[31mred\\nb");
    }
}
