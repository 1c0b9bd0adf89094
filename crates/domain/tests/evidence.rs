//! Contributions with bodies and sources kept by digest (DESIGN.md "Artifact and source"),
//! their bounds (T2: refused, charged, not applied), source sets over content digests (R2) and
//! evidence-checked verdicts (R7).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use agentroom_domain::artifact::ContentDigest;
use agentroom_domain::catalog::{DeclaredOutput, MemoryEntry, OutputType};
use agentroom_domain::engine::{
    CallRequest, CallResult, Charge, Decision, Input, SpecialistResult,
};
use agentroom_domain::ids::{CriterionId, Timestamp};
use agentroom_domain::objective::ObjectiveStatus;
use agentroom_domain::policy::{ContentBounds, RoomPolicy};
use agentroom_domain::review::{
    Body, ContributionDraft, CriterionVerdict, DocumentDraft, ReviewOutcome, ReviewSubmission,
    Source, SourceDraft, Verdict,
};
use agentroom_domain::room::Role;
use agentroom_domain::rules::Rule;
use common::*;

const FACT: &str = "In 2026 the Hamlin runtime recovered 4,000 calls in 1.2 s.";

fn document(id: &str, excerpt: &str) -> SourceDraft {
    SourceDraft::Document(DocumentDraft {
        id: id.into(),
        uri: format!("https://example.org/{id}"),
        title: format!("Paper {id}"),
        excerpt: excerpt.into(),
        retrieved_at: Timestamp::from_millis(1_764_460_800_000),
        content_digest: ContentDigest::of(format!("whole {id}: {excerpt}").as_bytes()),
    })
}

/// gather cites one document; write reports from it; returns the review call.
fn reviewed(room: &mut Room, report_body: &str) -> CallRequest {
    let d = room.start_objective();
    let gather = specialist_call(&d);
    let d = room.contribute_body(
        &gather,
        "Notes: a recovery figure [s1].",
        vec![document("s1", FACT)],
    );
    let write = specialist_call(&d);
    let dep = match &write.brief {
        agentroom_domain::engine::CallBrief::Execute(t) => t.dep_contributions[0],
        _ => panic!("not a task"),
    };
    let d = room.contribute_body(
        &write,
        report_body,
        vec![document("s1", FACT), SourceDraft::Contribution { id: dep }],
    );
    review_call(&d)
}

fn verdict(criterion: &str, sources: &[&str], quote: &str) -> CriterionVerdict {
    CriterionVerdict::new(
        CriterionId::parse(criterion).unwrap(),
        Verdict::Met,
        "checked",
    )
    .citing(sources, quote)
}

fn review_with(
    room: &mut Room,
    call: &CallRequest,
    verdicts: Vec<CriterionVerdict>,
) -> agentroom_domain::engine::Decision {
    let agentroom_domain::engine::CallBrief::Review { report, .. } = &call.brief else {
        panic!("not a review call");
    };
    let submission = ReviewSubmission {
        model: None,
        report: report.clone(),
        observed: call.observed,
        verdicts,
    };
    room.apply(Input::CallReturned {
        op: call.op,
        charge: agentroom_domain::engine::Charge::Actual(micros(REVIEWER / 2)),
        result: agentroom_domain::engine::CallResult::Reviewer(
            agentroom_domain::engine::ReviewerResult::Review(submission),
        ),
    })
}

#[test]
fn r7_a_met_quoting_the_report_or_a_cited_excerpt_completes_the_objective() {
    let mut room = Room::new();
    let call = reviewed(
        &mut room,
        "Every claim is cited [s1]. Recovery took 1.2 s in 2026.",
    );
    let d = review_with(
        &mut room,
        &call,
        vec![
            // Whitespace differs from the report's: compared normalized.
            verdict("cites-sources", &["s1"], "Every claim   is cited\n[s1]."),
            // Found in the excerpt of the source it names, not in the report.
            verdict("covers-2026", &["s1"], "recovered 4,000 calls in 1.2 s"),
        ],
    );
    assert!(!accepted_by(&d, Rule::R7), "{:#?}", d.log);
    assert_eq!(room.objective().status(), ObjectiveStatus::Completed);
}

#[test]
fn r7_a_met_with_an_invented_quote_is_recorded_as_unknown_and_waits_for_the_owner() {
    let mut room = Room::new();
    let call = reviewed(&mut room, "Every claim is cited [s1].");
    let d = review_with(
        &mut room,
        &call,
        vec![
            verdict("cites-sources", &["s1"], "Every claim is cited"),
            verdict("covers-2026", &["s1"], "recovered 9,000 calls in 0.1 s"),
        ],
    );
    assert!(accepted_by(&d, Rule::R7), "{:#?}", d.log);
    let review = room.objective().reviews().last().unwrap().clone();
    assert_eq!(review.outcome(), ReviewOutcome::Unknown);
    let covers = &review.verdicts()[1];
    assert_eq!(covers.verdict, Verdict::Unknown);
    assert!(
        covers.evidence.starts_with("R7: recorded as unknown"),
        "{}",
        covers.evidence
    );
    assert!(covers.evidence.contains("9,000"), "{}", covers.evidence);
    assert_eq!(review.verdicts()[0].verdict, Verdict::Met);
    // R5: an unknown waits for the owner.
    assert_eq!(room.objective().status(), ObjectiveStatus::WaitingForOwner);
}

#[test]
fn r7_a_met_without_sources_naming_an_unknown_source_or_quoting_nothing_is_unknown() {
    for (sources, quote, why) in [
        (vec![], "Every claim is cited", "names none"),
        (
            vec!["s9"],
            "Every claim is cited",
            "`s9`, which is not a source",
        ),
        (vec!["s1"], "  ", "quotes nothing"),
    ] {
        let mut room = Room::new();
        let call = reviewed(&mut room, "Every claim is cited [s1].");
        let mut bad = verdict("covers-2026", &sources, quote);
        if sources.is_empty() {
            bad.sources.clear();
        }
        let d = review_with(
            &mut room,
            &call,
            vec![
                verdict("cites-sources", &["s1"], "Every claim is cited"),
                bad,
            ],
        );
        assert!(accepted_by(&d, Rule::R7), "{:#?}", d.log);
        let review = room.objective().reviews().last().unwrap();
        assert_eq!(review.verdicts()[1].verdict, Verdict::Unknown);
        assert!(
            review.verdicts()[1].evidence.contains(why),
            "{}",
            review.verdicts()[1].evidence
        );
    }
}

#[test]
fn r7_a_quote_from_a_source_the_verdict_does_not_name_does_not_count() {
    let mut room = Room::new();
    let call = reviewed(&mut room, "Every claim is cited [s1].");
    // The fact is in s1's excerpt, but the verdict names only the research contribution,
    // whose body does not hold it.
    let contribution = room
        .state()
        .contributions()
        .values()
        .find(|c| c.task().to_string().ends_with("/gather"))
        .unwrap()
        .id()
        .to_string();
    let d = review_with(
        &mut room,
        &call,
        vec![
            verdict("cites-sources", &["s1"], "Every claim is cited"),
            verdict(
                "covers-2026",
                &[contribution.as_str()],
                "recovered 4,000 calls",
            ),
        ],
    );
    assert!(accepted_by(&d, Rule::R7), "{:#?}", d.log);
    assert_eq!(room.objective().status(), ObjectiveStatus::WaitingForOwner);
}

#[test]
fn r7_a_human_reviews_met_is_checked_the_same_way() {
    let mut policy_text = String::from("[review]\nsource = \"human\"\n");
    policy_text.push('\n');
    let mut room = Room::with_policy(RoomPolicy::from_toml(&policy_text).unwrap(), 1_000_000);
    room.grant("rita", Role::Reviewer);
    let d = room.start_objective();
    let gather = specialist_call(&d);
    let d = room.contribute_body(&gather, "Notes [s1].", vec![document("s1", FACT)]);
    let write = specialist_call(&d);
    room.contribute_body(
        &write,
        "Every claim is cited [s1].",
        vec![document("s1", FACT)],
    );
    let report = room.objective().awaiting_review().unwrap().report().clone();
    let objective = room.objective_id();
    let d = room.apply(Input::RecordReview {
        by: p("rita"),
        objective,
        review: ReviewSubmission {
            model: None,
            report,
            observed: room.objective().observed(),
            verdicts: vec![
                verdict("cites-sources", &["s1"], "Every claim is cited"),
                verdict("covers-2026", &["s1"], "a sentence nobody wrote"),
            ],
        },
    });
    assert!(accepted_by(&d, Rule::R7), "{:#?}", d.log);
    assert_eq!(room.objective().status(), ObjectiveStatus::WaitingForOwner);
}

#[test]
fn r2_the_source_set_changes_when_a_sources_content_changes() {
    let digest_with = |excerpt: &str| {
        let mut room = Room::new();
        let d = room.start_objective();
        let gather = specialist_call(&d);
        let d = room.contribute_body(&gather, "Notes.", vec![document("s1", FACT)]);
        let write = specialist_call(&d);
        room.contribute_body(&write, "Report [s1].", vec![document("s1", excerpt)]);
        let report = room.objective().awaiting_review().unwrap().report().clone();
        assert!(matches!(
            report.source_set.sources()[0],
            Source::Document(_)
        ));
        report.source_set.digest().to_owned()
    };
    assert_eq!(digest_with(FACT), digest_with(FACT));
    assert_ne!(
        digest_with(FACT),
        digest_with("In 2026 nothing was measured.")
    );
}

/// The first specialist call of a fresh objective in a Room with `bounds`.
fn first_task(bounds: ContentBounds) -> (Room, CallRequest) {
    let policy = RoomPolicy::default().with_content(bounds);
    let mut room = Room::with_policy(policy, 1_000_000);
    let d = room.start_objective();
    let gather = specialist_call(&d);
    (room, gather)
}

#[test]
fn t2_an_oversized_contribution_is_refused_charged_and_not_applied() {
    let bounds = ContentBounds::new(64, 100);
    let (mut room, gather) = first_task(bounds);
    let before = room.state().ledger().balances().spent;
    // One excerpt above the 64-byte bound per piece.
    let d = room.contribute_body(&gather, "Notes.", vec![document("s1", &"x".repeat(65))]);
    assert_rejected(&d, Rule::T2);
    let refusal = d.log.iter().find(|l| l.rule == Some(Rule::T2)).unwrap();
    assert!(
        refusal
            .message
            .contains("excerpt of source `s1` has 65 bytes"),
        "{}",
        refusal.message
    );
    assert!(
        refusal.message.contains("content.max_artifact_bytes"),
        "{}",
        refusal.message
    );
    assert!(room.state().contributions().is_empty(), "nothing applied");
    assert!(room.state().ledger().balances().spent > before, "charged");
    // The task failed: the reasoner is asked for a repair plan (O7).
    reasoner_call(&d);

    // All pieces together above 100 bytes, each within 64.
    let (mut room, gather) = first_task(bounds);
    let d = room.contribute_body(
        &gather,
        &"y".repeat(60),
        vec![document("s1", &"z".repeat(60))],
    );
    assert_rejected(&d, Rule::T2);
    let refusal = d.log.iter().find(|l| l.rule == Some(Rule::T2)).unwrap();
    assert!(
        refusal.message.contains("120 bytes of content"),
        "{}",
        refusal.message
    );
    assert!(room.state().contributions().is_empty());
}

#[test]
fn t2_an_empty_body_or_two_sources_under_one_id_are_refused() {
    for (body, sources, why) in [
        ("   ", vec![], "non-empty body"),
        (
            "Notes.",
            vec![document("s1", FACT), document("s1", "other")],
            "two sources have the id `s1`",
        ),
        ("Notes.", vec![document("a b", FACT)], "without spaces"),
    ] {
        let (mut room, gather) = first_task(ContentBounds::default());
        let d = room.contribute_body(&gather, body, sources);
        assert_rejected(&d, Rule::T2);
        let refusal = d.log.iter().find(|l| l.rule == Some(Rule::T2)).unwrap();
        assert!(refusal.message.contains(why), "{}", refusal.message);
        assert!(room.state().contributions().is_empty());
    }
}

/// A Room whose research capability declares `findings` (an array) and `count` (an integer).
fn with_declared_outputs() -> (Room, CallRequest) {
    let declared = vec![
        DeclaredOutput {
            name: "findings".into(),
            kind: OutputType::Array,
            description: None,
        },
        DeclaredOutput {
            name: "count".into(),
            kind: OutputType::Integer,
            description: None,
        },
    ];
    let catalog = catalog().with(
        "research",
        MemoryEntry {
            provider: Some(p("sam")),
            outputs: declared,
            ..MemoryEntry::default()
        },
    );
    let mut room = Room::with_catalog(RoomPolicy::default(), 1_000_000, catalog);
    let d = room.start_objective();
    let gather = specialist_call(&d);
    (room, gather)
}

fn contribute_outputs(room: &mut Room, call: &CallRequest, outputs: serde_json::Value) -> Decision {
    let serde_json::Value::Object(outputs) = outputs else {
        panic!("outputs are an object");
    };
    let id = room.next_contribution_id();
    room.apply(Input::CallReturned {
        op: call.op,
        charge: Charge::Actual(micros(SPECIALIST / 2)),
        result: CallResult::Specialist(SpecialistResult::Contribution(ContributionDraft {
            id,
            artifacts: Vec::new(),
            body: Some(Body {
                media_type: "text/markdown".into(),
                text: "Two findings [s1].".into(),
            }),
            sources: vec![document("s1", FACT)],
            outputs,
        })),
    })
}

#[test]
fn t2_a_contribution_missing_a_declared_output_is_refused_by_its_rule() {
    let (mut room, gather) = with_declared_outputs();
    let d = contribute_outputs(
        &mut room,
        &gather,
        serde_json::json!({"findings": ["a", "b"]}),
    );
    assert_rejected(&d, Rule::T2);
    let refusal = d.log.iter().find(|l| l.rule == Some(Rule::T2)).unwrap();
    assert!(
        refusal
            .message
            .contains("declared output `count` is missing"),
        "{}",
        refusal.message
    );
    assert!(
        refusal.message.contains("charged, not applied"),
        "{}",
        refusal.message
    );
    assert!(room.state().contributions().is_empty());
}

#[test]
fn t2_a_declared_output_of_the_wrong_type_is_refused_and_a_right_one_completes_the_task() {
    let (mut room, gather) = with_declared_outputs();
    let d = contribute_outputs(
        &mut room,
        &gather,
        serde_json::json!({"findings": "not a list", "count": 2}),
    );
    assert_rejected(&d, Rule::T2);
    let refusal = d.log.iter().find(|l| l.rule == Some(Rule::T2)).unwrap();
    assert!(
        refusal
            .message
            .contains("`findings` must be an array, found a string"),
        "{}",
        refusal.message
    );

    let (mut room, gather) = with_declared_outputs();
    let d = contribute_outputs(
        &mut room,
        &gather,
        serde_json::json!({"findings": ["a", "b"], "count": 2, "extra": true}),
    );
    assert!(!d.rejected_by(Rule::T2), "{:#?}", d.log);
    let kept = room.state().contributions().values().next().unwrap();
    let outputs = room.sim.content(&kept.outputs().unwrap().digest).unwrap();
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(outputs).unwrap()["count"],
        2
    );
}
