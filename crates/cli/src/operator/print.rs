//! The readable tables of the operator commands, from the API's JSON. Every string the API
//! returns is printed with its control characters escaped.

use std::fmt::Write as _;

use agentroom_domain::ids::RoomId;
use serde_json::{Value, json};

// Printing
// ---------------------------------------------------------------------------------------------

pub(super) fn json_text(value: &Value) -> String {
    let mut text = serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string());
    text.push('\n');
    text
}

/// `$1.234567` for micros, exactly.
pub(super) fn dollars(micros: i64) -> String {
    let sign = if micros < 0 { "-" } else { "" };
    let abs = micros.unsigned_abs();
    format!("{sign}${}.{:06}", abs / 1_000_000, abs % 1_000_000)
}

pub(super) fn micros_of(value: &Value) -> i64 {
    value.as_i64().unwrap_or(0)
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

pub(super) fn log_lines(answer: &Value) -> String {
    let mut out = String::new();
    for entry in items(answer, "log") {
        let _ = writeln!(
            out,
            "  {} {}: {}",
            text(&entry["verdict"]),
            text(&entry["rule"]),
            text(&entry["message"])
        );
    }
    out
}

pub(super) fn budget_table(room: &RoomId, budget: &Value) -> String {
    let balances = &budget["balances"];
    let mut out = format!("budget of room {room}\n");
    let rows: Vec<Vec<String>> = ["limit", "reserved", "spent", "uncertain", "available"]
        .iter()
        .map(|name| {
            let micros = micros_of(&balances[*name]);
            vec![(*name).to_owned(), dollars(micros), micros.to_string()]
        })
        .collect();
    out.push_str(&table(&["", "USD", "MICROS"], &rows));
    if !budget["overrun"].is_null() {
        let _ = writeln!(out, "overrun: {}", text(&budget["overrun"]));
    }
    for (title, field) in [
        ("objective", "spent_micros_by_objective"),
        ("role", "spent_micros_by_role"),
        ("principal", "spent_micros_by_principal"),
        ("model", "spent_micros_by_model"),
    ] {
        let _ = writeln!(out, "\nspent by {title}");
        let rows: Vec<Vec<String>> = budget[field]
            .as_object()
            .map(|map| {
                map.iter()
                    .map(|(key, micros)| {
                        let micros = micros_of(micros);
                        vec![clean(key), dollars(micros), micros.to_string()]
                    })
                    .collect()
            })
            .unwrap_or_default();
        out.push_str(&table(&[&title.to_uppercase(), "USD", "MICROS"], &rows));
    }
    let _ = writeln!(out, "\nledger");
    let rows: Vec<Vec<String>> = items(budget, "entries")
        .iter()
        .enumerate()
        .map(|(i, entry)| {
            let kind = text(&entry["entry"]);
            let (amount, detail) = match kind.as_str() {
                "opened" => (micros_of(&entry["limit"]), String::new()),
                "reserved" | "released" => (micros_of(&entry["amount"]), String::new()),
                "settled" => (
                    micros_of(&entry["charged"]),
                    format!("of {} reserved", dollars(micros_of(&entry["reserved"]))),
                ),
                "limit_raised" => (micros_of(&entry["by"]), String::new()),
                _ => (0, String::new()),
            };
            let amount = if kind == "marked_uncertain" || kind == "overrun_acknowledged" {
                "-".to_owned()
            } else {
                dollars(amount)
            };
            vec![
                (i + 1).to_string(),
                kind,
                text(&entry["op"]),
                amount,
                detail,
            ]
        })
        .collect();
    out.push_str(&table(&["#", "ENTRY", "OPERATION", "AMOUNT", ""], &rows));
    out
}

pub(super) fn objectives_table(list: &Value) -> String {
    let rows: Vec<Vec<String>> = items(list, "items")
        .iter()
        .map(|o| {
            vec![
                text(&o["id"]),
                text(&o["status"]),
                text(&o["plan_versions"]),
                text(&o["owner"]),
                text(&o["title"]),
            ]
        })
        .collect();
    if rows.is_empty() {
        return "no objectives\n".to_owned();
    }
    table(&["OBJECTIVE", "STATUS", "PLANS", "OWNER", "TITLE"], &rows)
}

pub(super) fn objective_text(whole: &Value) -> String {
    let o = &whole["objective"];
    let mut out = String::new();
    let _ = writeln!(out, "objective {}", text(&o["id"]));
    let _ = writeln!(out, "title:   {}", text(&o["title"]));
    let _ = writeln!(out, "status:  {}", text(&o["status"]));
    let _ = writeln!(out, "owner:   {}", text(&o["owner"]));
    let _ = writeln!(
        out,
        "revision {} (control {})",
        text(&o["revision"]),
        text(&o["control_revision"])
    );
    if !o["awaiting_review"].is_null() {
        let _ = writeln!(
            out,
            "awaiting review: report v{}",
            text(&o["awaiting_review"]["version"])
        );
    }
    let _ = writeln!(out, "\ncriteria");
    let rows: Vec<Vec<String>> = items(o, "criteria")
        .iter()
        .map(|c| vec![text(&c["id"]), text(&c["text"])])
        .collect();
    out.push_str(&table(&["CRITERION", "TEXT"], &rows));
    match o["board"].as_object() {
        None => {
            let _ = writeln!(out, "\nboard: no plan yet");
        }
        Some(board) => {
            let _ = writeln!(
                out,
                "\nboard (plan v{})",
                text(board.get("plan_version").unwrap_or(&Value::Null))
            );
            for column in board
                .get("columns")
                .and_then(Value::as_array)
                .map_or(&[][..], Vec::as_slice)
            {
                let tasks = items(column, "tasks");
                let _ = writeln!(out, "{} ({})", text(&column["column"]), tasks.len());
                for task in tasks {
                    let _ = writeln!(
                        out,
                        "  {}  {}  [{} by {}, {}]",
                        text(&task["key"]),
                        text(&task["title"]),
                        text(&task["capability"]),
                        text(&task["assignee"]),
                        task_state(&task["state"]),
                    );
                }
            }
        }
    }
    let _ = writeln!(out, "\nplan versions");
    let rows: Vec<Vec<String>> = items(&whole["plans"], "items")
        .iter()
        .map(|plan| {
            let diff = &plan["diff"];
            let keys = |field: &str| {
                items(diff, field)
                    .iter()
                    .map(text)
                    .collect::<Vec<_>>()
                    .join(",")
            };
            let mut change = Vec::new();
            for field in ["added", "removed", "changed", "reused"] {
                let list = keys(field);
                if !list.is_empty() {
                    change.push(format!("{field} {list}"));
                }
            }
            vec![
                format!(
                    "v{}{}",
                    text(&plan["number"]),
                    if plan["current"] == json!(true) {
                        "*"
                    } else {
                        ""
                    }
                ),
                text(&plan["trigger"]["trigger"]),
                change.join("; "),
                text(&plan["explanation"]),
            ]
        })
        .collect();
    out.push_str(&table(&["PLAN", "TRIGGER", "DIFF", "EXPLANATION"], &rows));
    let _ = writeln!(out, "\ndecision log");
    let rows: Vec<Vec<String>> = items(&whole["decisions"], "items")
        .iter()
        .map(|d| {
            vec![
                text(&d["revision"]),
                text(&d["input"]),
                text(&d["verdict"]),
                text(&d["rule"]),
                text(&d["message"]),
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

pub(super) fn task_state(state: &Value) -> String {
    let name = text(&state["state"]);
    match state["reason"].as_str() {
        Some(reason) => format!("{name}: {}", clean(reason)),
        None => name,
    }
}

pub(super) fn reviews_text(reviews: &Value) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "reviews of objective {}", text(&reviews["objective"]));
    let criteria = items(reviews, "criteria");
    let _ = writeln!(out, "\ncriteria");
    let rows: Vec<Vec<String>> = criteria
        .iter()
        .map(|c| vec![text(&c["id"]), text(&c["text"])])
        .collect();
    out.push_str(&table(&["CRITERION", "TEXT"], &rows));
    if !reviews["awaiting_review"].is_null() {
        let _ = writeln!(
            out,
            "\nawaiting review: report v{}",
            text(&reviews["awaiting_review"]["version"])
        );
    }
    let all_reviews = items(reviews, "reviews");
    for report in items(reviews, "reports") {
        let version = &report["version"];
        let _ = writeln!(out, "\nreport v{}", text(version));
        let _ = writeln!(out, "  task:         {}", text(&report["task"]));
        let _ = writeln!(out, "  contribution: {}", text(&report["contribution"]));
        let _ = writeln!(
            out,
            "  author:       {}",
            text(&report["content"]["author"])
        );
        let _ = writeln!(
            out,
            "  source set:   {}",
            text(&report["source_set"]["digest"])
        );
        for source in items(&report["source_set"], "sources") {
            let what = source
                .as_object()
                .map(|fields| {
                    fields
                        .iter()
                        .filter(|(name, _)| name.as_str() != "kind")
                        .map(|(_, value)| text(value))
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .unwrap_or_default();
            let _ = writeln!(out, "    - {} {what}", text(&source["kind"]));
        }
        let of_version: Vec<&Value> = all_reviews
            .iter()
            .filter(|r| &r["report_version"] == version)
            .collect();
        if of_version.is_empty() {
            let _ = writeln!(out, "  no review yet");
        }
        for review in of_version {
            let _ = writeln!(
                out,
                "  review {} by {}: {}",
                text(&review["id"]),
                text(&review["reviewer"]),
                text(&review["outcome"])
            );
            let rows: Vec<Vec<String>> = items(review, "verdicts")
                .iter()
                .map(|v| {
                    vec![
                        format!("    {}", text(&v["criterion"])),
                        text(&v["verdict"]),
                        text(&v["evidence"]),
                    ]
                })
                .collect();
            out.push_str(&table(&["    CRITERION", "VERDICT", "EVIDENCE"], &rows));
        }
    }
    if items(reviews, "reports").is_empty() {
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
