//! Misbehaving scripted agents (`scenarios/misbehaving/*.toml`) played through the domain:
//! each test names the rule that refuses what the agent did.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "clippy.toml allows these in #[test] functions only; the helpers here are test code \
              too, and a failed unwrap or panic in them is a failed test"
)]

mod support;

use std::sync::Arc;

use agentroom_agents::scripted::Scripted;
use agentroom_ports::domain::engine::Input;
use agentroom_ports::domain::objective::ObjectiveStatus;
use agentroom_ports::domain::plan::Column;
use agentroom_ports::domain::rules::Rule;
use agentroom_ports::{AgentOutcome, Reviewer, ReviewerCall};
use support::{Drive, p, scenario};

async fn play(name: &str) -> Drive {
    let scripted = Arc::new(Scripted::new(scenario(name)));
    Drive::play(scripted.scenario(), &scripted.agents()).await
}

#[tokio::test]
async fn o8_a_reasoner_that_replans_forever_is_stopped_for_attention() {
    let drive = play("misbehaving/replans-forever.toml").await;
    assert_eq!(drive.stopped_by(), Some(Rule::O8), "{}", drive.timeline());
    assert!(drive.rejected_by(Rule::O8));
    assert_eq!(
        drive.objective().status(),
        ObjectiveStatus::StoppedForAttention
    );
    assert_eq!(
        drive.objective().plans().len(),
        3,
        "the third replan was not admitted"
    );
}

#[tokio::test]
async fn t2_a_specialist_that_claims_done_without_a_contribution_completes_nothing() {
    let drive = play("misbehaving/done-without-contribution.toml").await;
    assert!(drive.rejected_by(Rule::T2), "{}", drive.timeline());
    assert!(
        drive
            .timeline()
            .contains("a contribution needs a non-empty body")
    );
    assert!(drive.objective().contributions().is_empty());
    let plan = drive.objective().plans()[0].clone();
    let gather = plan
        .task_by_key(&"gather".parse().unwrap())
        .unwrap()
        .clone();
    assert_ne!(plan.column_of(&gather), Column::Done);
    assert_ne!(drive.objective().status(), ObjectiveStatus::Completed);
}

#[tokio::test]
async fn r2_a_reviewer_that_omits_a_criterion_is_refused() {
    let drive = play("misbehaving/omits-a-criterion.toml").await;
    assert!(drive.rejected_by(Rule::R2), "{}", drive.timeline());
    assert!(
        drive
            .timeline()
            .contains("criterion `covers-2026` has 0 verdicts")
    );
    assert!(
        drive.objective().reviews().is_empty(),
        "no review was accepted"
    );
    assert_eq!(drive.stopped_by(), Some(Rule::R2), "bounded: it stops");
    assert_ne!(drive.objective().status(), ObjectiveStatus::Completed);
}

#[tokio::test]
async fn r1_an_author_that_reviews_its_own_work_is_refused() {
    let scripted = Arc::new(Scripted::new(scenario("misbehaving/reviews-own-work.toml")));
    let mut drive = Drive::play(scripted.scenario(), &scripted.agents()).await;
    let objective = drive.objective_id();
    let report = drive
        .objective()
        .awaiting_review()
        .expect("the report waits for a human review")
        .report()
        .clone();
    assert!(
        drive
            .state()
            .contributions()
            .values()
            .any(|c| c.author() == &p("sam")),
        "sam authored work of this objective"
    );
    let call = ReviewerCall {
        op: support::op(0x5e1f),
        reservation: drive.state().quotes().reviewer,
        principal: p("sam"),
        objective: Some(objective),
        observed: drive.objective().observed(),
        context: drive.review_context(&report),
        report,
        criteria: drive.objective().criteria().to_vec(),
    };
    let own = match scripted.review(&call).await {
        AgentOutcome::Returned {
            result: agentroom_ports::domain::engine::ReviewerResult::Review(review),
            ..
        } => review,
        other => panic!("sam's scripted review: {other:?}"),
    };
    let d = drive.apply(Input::RecordReview {
        by: p("sam"),
        objective,
        review: own,
    });
    assert!(d.rejected_by(Rule::R1), "{:#?}", d.log);
    assert!(drive.objective().reviews().is_empty());

    let call = ReviewerCall {
        op: support::op(0x5e20),
        principal: p("rita"),
        ..call
    };
    let AgentOutcome::Returned {
        result: agentroom_ports::domain::engine::ReviewerResult::Review(distinct),
        ..
    } = scripted.review(&call).await
    else {
        panic!("rita's scripted review");
    };
    drive.apply(Input::RecordReview {
        by: p("rita"),
        objective,
        review: distinct,
    });
    assert_eq!(drive.objective().status(), ObjectiveStatus::Completed);
}

#[tokio::test]
async fn o10_a_proposal_bound_to_a_stale_revision_is_rejected() {
    let drive = play("misbehaving/stale-revision.toml").await;
    assert!(drive.rejected_by(Rule::O10), "{}", drive.timeline());
    let plans = drive.objective().plans();
    assert_eq!(
        plans.len(),
        2,
        "the stale plan was not admitted, the next one was"
    );
    assert!(
        drive
            .timeline()
            .contains("claims revision 0/0 but was shown 1/0"),
        "{}",
        drive.timeline()
    );
}

#[tokio::test]
async fn r3_a_reasoner_that_weakens_a_criterion_after_an_unmet_is_refused() {
    let drive = play("misbehaving/weakens-a-criterion.toml").await;
    assert!(drive.rejected_by(Rule::R3), "{}", drive.timeline());
    assert!(drive.timeline().contains("criteria are frozen"));
    let covers = drive
        .objective()
        .criteria()
        .iter()
        .find(|c| c.id.as_str() == "covers-2026")
        .unwrap();
    assert_eq!(covers.text, "covers work published in 2026", "still frozen");
    assert_eq!(drive.objective().plans().len(), 1);
}
