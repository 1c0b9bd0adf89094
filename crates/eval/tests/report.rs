//! The qualification report (issue 19): a table per metric, an SVG that parses as SVG, JSON
//! that reads back, escaping of what a scenario name may hold, and the "where the planner costs
//! more" section with its ratio and its reasons by role.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use agentroom_eval::{Mode, Report, RunFigures, Trace, evaluate};
use support::*;

fn runs() -> Vec<RunFigures> {
    let planner = honest();
    // The same scenario in the baselines: the report's trace, half the cost, no reviewer.
    let mut routing: Trace = honest();
    routing.mode = Mode::Routing;
    let mut sessions: Trace = honest();
    sessions.mode = Mode::Sessions;
    [planner, routing, sessions]
        .into_iter()
        .map(|mut t| {
            if t.mode != Mode::Planner {
                let reviewer: Vec<String> = t
                    .operations
                    .iter()
                    .filter(|o| o.role == agentroom_eval::trace::CallRole::Reviewer)
                    .map(|o| o.id.clone())
                    .collect();
                t.ledger.retain(|e| match e {
                    agentroom_eval::trace::LedgerEntry::Settled { op, .. }
                    | agentroom_eval::trace::LedgerEntry::Reserved { op, .. } => {
                        !reviewer.contains(op)
                    }
                    _ => true,
                });
                t.receipts.retain(|r| !reviewer.contains(&r.op));
                t.operations.retain(|o| !reviewer.contains(&o.id));
                t.reviews.clear();
            }
            let m = evaluate(&t, &truth()).unwrap();
            RunFigures::of(m, &t)
        })
        .collect()
}

fn report() -> Report {
    Report::new(
        "2026-12-04",
        runs(),
        vec![("store".to_owned(), "embedded <sqlite> & \"x\"".to_owned())],
    )
    .unwrap()
}

#[test]
fn the_markdown_has_the_date_the_boundary_the_definitions_and_a_table_per_metric() {
    let md = report().render().unwrap().markdown;
    assert!(md.starts_with("# agentroom qualification report, 2026-12-04"));
    assert!(md.contains("## Evidence boundary"));
    assert!(md.contains("does not show model judgment"));
    for mode in ["sessions", "routing", "planner"] {
        assert!(md.contains(&format!("- **{mode}**: ")), "{mode} defined");
    }
    for table in [
        "## Completion",
        "## False completions",
        "## Human corrections",
        "## Repeated work attempts",
        "## Duplicate confirmed effects",
        "## Wall latency (ms)",
        "## In-model latency (ms)",
        "## Total cost (USD)",
    ] {
        let at = md.find(table).unwrap_or_else(|| panic!("{table} missing"));
        let rest = &md[at..];
        assert!(
            rest.contains("| scenario | sessions | routing | planner |"),
            "{table} has a column per mode"
        );
        assert!(
            rest.contains(&format!("| {SCENARIO} |")),
            "{table} has a row"
        );
    }
}

#[test]
fn where_the_planner_costs_more_says_by_how_much_and_why() {
    let report = report();
    let more: Vec<_> = report
        .costs_more
        .iter()
        .filter(|c| c.measure == "total cost (micros)")
        .collect();
    assert_eq!(more.len(), 2, "{:?}", report.costs_more);
    for c in more {
        assert!(c.planner > c.other);
        assert_eq!(c.more, c.planner - c.other);
        let ratio = c.ratio.unwrap();
        assert!((ratio - c.planner as f64 / c.other as f64).abs() < 1e-9);
        assert!(c.why.contains("the reviewer's gate (+"), "{}", c.why);
    }
    let md = report.render().unwrap().markdown;
    assert!(md.contains("## Where the planner costs more"));
    assert!(md.contains("×)"), "the ratio is written");
}

#[test]
fn the_svg_parses_as_svg_with_a_bar_per_mode_per_metric() {
    let svg = report().render().unwrap().svg;
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "svg");
    assert_eq!(
        root.tag_name().namespace(),
        Some("http://www.w3.org/2000/svg")
    );
    assert!(root.attribute("viewBox").is_some());
    let bars = doc
        .descendants()
        .filter(|n| n.attribute("class") == Some("bar"))
        .count();
    assert_eq!(bars, 6 * 3);
}

#[test]
fn the_json_reads_back_and_text_is_escaped() {
    let rendered = report().render().unwrap();
    let back: Report = serde_json::from_str(&rendered.json).unwrap();
    assert_eq!(back, report());
    let mut runs = runs();
    for r in &mut runs {
        r.metrics.scenario = "a|b <c> & \"d\"".to_owned();
    }
    let odd = Report::new("2026-12-04 <&>", runs, Vec::new()).unwrap();
    let rendered = odd.render().unwrap();
    roxmltree::Document::parse(&rendered.svg).unwrap();
    assert!(rendered.markdown.contains("| a\\|b <c> & \"d\" |"));
}

#[test]
fn a_report_of_one_scenario_twice_in_a_mode_is_refused() {
    let mut runs = runs();
    let again = runs[0].clone();
    runs.push(again);
    let error = Report::new("2026-12-04", runs, Vec::new()).unwrap_err();
    assert!(error.to_string().contains("appears twice"), "{error}");
}
