//! Memberships over REST while the Room runs (issue 18, T6): the owner adds a member (with its
//! first token, shown once), changes a member's roles, revokes a member; every bad request is
//! a clear 4xx that changes nothing; a revoked or demoted principal's next request is refused
//! at once (a revoked one's tokens are revoked with it: 401, also after it is added again),
//! its notification stream ends within a second, and its hosted assignment is withdrawn.

use std::time::{Duration, Instant};

use axum::http::{Method, StatusCode};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tokio::time::timeout;

use agentroom_ports::TokenStore;

use crate::support::{App, spawn_app};

const MEMBERS: &str = "/v1/rooms/local/members";

/// Every member and its roles, as `GET …/members` lists them.
async fn members(app: &App) -> Vec<(String, Vec<String>)> {
    let page = app.get("olive", &format!("{MEMBERS}?limit=200")).await;
    page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let roles = m["roles"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r.as_str().unwrap().to_owned())
                .collect();
            (m["principal"].as_str().unwrap().to_owned(), roles)
        })
        .collect()
}

fn roles_of(listed: &[(String, Vec<String>)], who: &str) -> Option<Vec<String>> {
    listed
        .iter()
        .find(|(principal, _)| principal == who)
        .map(|(_, roles)| roles.clone())
}

/// A call as the owner with an Idempotency-Key.
async fn keyed(app: &App, path: &str, body: &str, key: &str) -> crate::support::Answer {
    let auth = format!("Bearer {}", app.token("olive"));
    app.call(
        Method::POST,
        path,
        &[
            ("authorization", &auth),
            ("content-type", "application/json"),
            ("idempotency-key", key),
        ],
        body.to_owned(),
    )
    .await
}

async fn revision(app: &App) -> Value {
    app.get("oscar", "/v1/rooms/local").await["revision"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t6_an_owner_adds_a_member_with_its_first_token_shown_once() {
    let app = spawn_app().await;
    let body = json!({"principal": "bea", "roles": ["reviewer"], "issue_token": true}).to_string();
    let added = keyed(&app, MEMBERS, &body, "add-bea").await;
    assert_eq!(added.status, StatusCode::OK, "{added:?}");
    let added = added.json();
    assert_eq!(added["decision"]["decided"], true, "{added}");
    assert_eq!(added["decision"]["log"][0]["rule"], "T6", "{added}");
    assert_eq!(
        added["decision"]["log"][0]["verdict"], "accepted",
        "{added}"
    );
    let token = added["token"]["token"].as_str().unwrap().to_owned();
    assert!(token.starts_with("ar_"), "{added}");
    assert_eq!(added["token"]["principal"], "bea");
    assert_eq!(
        roles_of(&members(&app).await, "bea"),
        Some(vec!["reviewer".to_owned()])
    );

    // The new member reads the Room with its token, as a reviewer.
    let auth = format!("Bearer {token}");
    let room = app
        .call(
            Method::GET,
            "/v1/rooms/local",
            &[("authorization", &auth)],
            "",
        )
        .await;
    assert_eq!(room.status, StatusCode::OK, "{room:?}");
    assert_eq!(room.json()["you"]["roles"], json!(["reviewer"]));

    // A retry with the same key is the same decision, and issues no second token.
    let before = revision(&app).await;
    let again = keyed(&app, MEMBERS, &body, "add-bea").await;
    assert_eq!(again.status, StatusCode::OK, "{again:?}");
    let again = again.json();
    assert_eq!(again["decision"]["already_done"], true, "{again}");
    assert_eq!(again["token"], Value::Null, "{again}");
    assert_eq!(revision(&app).await, before);

    // Without `issue_token`, no token.
    let plain = app
        .post(
            "olive",
            MEMBERS,
            &json!({"principal": "ben", "roles": ["operator"]}).to_string(),
        )
        .await;
    assert_eq!(plain["token"], Value::Null, "{plain}");
    assert_eq!(
        roles_of(&members(&app).await, "ben"),
        Some(vec!["operator".to_owned()])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t6_an_owner_changes_a_members_roles_in_one_decision_and_it_takes_effect_at_once() {
    let app = spawn_app().await;
    app.get("sam", "/v1/rooms/local/assignments").await;
    let before = revision(&app).await.as_i64().unwrap();
    let changed = app
        .post(
            "olive",
            &format!("{MEMBERS}/sam/roles"),
            &json!({"roles": ["reviewer"]}).to_string(),
        )
        .await;
    assert_eq!(changed["revision"], before + 1, "one decision: {changed}");
    let t6: Vec<&Value> = changed["log"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["rule"] == "T6")
        .collect();
    assert_eq!(t6.len(), 1, "{changed}");
    assert!(
        t6[0]["message"]
            .as_str()
            .unwrap()
            .contains("from specialist to reviewer"),
        "{changed}"
    );
    assert_eq!(
        roles_of(&members(&app).await, "sam"),
        Some(vec!["reviewer".to_owned()])
    );
    // sam reads objectives still (a reviewer may), but has no assignments to fetch any more.
    app.get("sam", "/v1/rooms/local/objectives").await;
    let refused = app
        .as_("sam", Method::GET, "/v1/rooms/local/assignments", "")
        .await;
    assert_eq!(
        refused.assert_error(StatusCode::FORBIDDEN, "forbidden")["permission"],
        "task.update_own"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t6_a_revoked_member_is_refused_401_on_its_next_request_and_its_stream_ends_within_a_second()
 {
    let app = spawn_app().await;
    app.get("sue", "/v1/rooms/local/objectives").await;
    let auth = format!("Bearer {}", app.token("sue"));
    let stream = app
        .send(
            Method::GET,
            "/v1/rooms/local/notifications",
            &[("authorization", &auth)],
            "",
        )
        .await;
    assert_eq!(stream.status(), StatusCode::OK);
    let revoked = app
        .post("olive", &format!("{MEMBERS}/sue/revoke"), "")
        .await;
    assert_eq!(revoked["log"][0]["rule"], "T6", "{revoked}");
    assert_eq!(roles_of(&members(&app).await, "sue"), None);
    let started = Instant::now();
    // Its token was revoked with it: 401, not merely 403.
    app.as_("sue", Method::GET, "/v1/rooms/local/objectives", "")
        .await
        .assert_error(StatusCode::UNAUTHORIZED, "unauthenticated");
    let mut body = stream.into_body();
    let ended = timeout(Duration::from_secs(5), async {
        loop {
            match body.frame().await {
                None | Some(Err(_)) => return started.elapsed(),
                Some(Ok(_)) => {}
            }
        }
    })
    .await
    .expect("the stream outlived the membership");
    assert!(ended < Duration::from_millis(1_500), "{ended:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t6_every_bad_membership_request_is_a_clear_4xx_and_changes_nothing() {
    let app = spawn_app().await;
    let listed = members(&app).await;
    let before = revision(&app).await;
    let cases: Vec<(&str, String, String, StatusCode, &str, &str)> = vec![
        (
            "olive",
            MEMBERS.to_owned(),
            json!({"principal": "bea", "roles": ["boss"]}).to_string(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_body",
            "boss",
        ),
        (
            "olive",
            MEMBERS.to_owned(),
            json!({"principal": "bea", "roles": []}).to_string(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_body",
            "at least one role",
        ),
        (
            "olive",
            MEMBERS.to_owned(),
            json!({"principal": "Bea Smith", "roles": ["reviewer"]}).to_string(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_body",
            "principal id",
        ),
        (
            "olive",
            MEMBERS.to_owned(),
            json!({"principal": "bea", "roles": ["reviewer"], "admin": true}).to_string(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_body",
            "admin",
        ),
        (
            "olive",
            MEMBERS.to_owned(),
            r#"{"principal": "bea", "roles": ["reviewer"]"#.to_owned(),
            StatusCode::BAD_REQUEST,
            "malformed_json",
            "JSON",
        ),
        (
            "olive",
            format!("{MEMBERS}/sam/roles"),
            json!({"roles": ["root"]}).to_string(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_body",
            "root",
        ),
        (
            "olive",
            format!("{MEMBERS}/mallory/roles"),
            json!({"roles": ["reviewer"]}).to_string(),
            StatusCode::NOT_FOUND,
            "not_found",
            "no member mallory",
        ),
        (
            "olive",
            format!("{MEMBERS}/mallory/revoke"),
            String::new(),
            StatusCode::NOT_FOUND,
            "not_found",
            "no member mallory",
        ),
        (
            "oscar",
            MEMBERS.to_owned(),
            json!({"principal": "bea", "roles": ["reviewer"]}).to_string(),
            StatusCode::FORBIDDEN,
            "forbidden",
            "membership.manage",
        ),
        (
            "sam",
            format!("{MEMBERS}/sam/roles"),
            json!({"roles": ["owner"]}).to_string(),
            StatusCode::FORBIDDEN,
            "forbidden",
            "membership.manage",
        ),
        (
            "rita",
            format!("{MEMBERS}/olive/revoke"),
            String::new(),
            StatusCode::FORBIDDEN,
            "forbidden",
            "membership.manage",
        ),
    ];
    for (who, path, body, status, code, says) in &cases {
        let answer = app.as_(who, Method::POST, path, body).await;
        let error = answer.assert_error(*status, code);
        assert!(
            error["message"].as_str().unwrap().contains(says),
            "{who} POST {path} {body}: {error}"
        );
    }
    assert_eq!(
        revision(&app).await,
        before,
        "a refused request decided something"
    );
    assert_eq!(members(&app).await, listed);

    // What the domain refuses by T6 is a 409 naming the rule (the refusal is logged as a
    // decision); the members stay as they were.
    for (path, body, says) in [
        (
            format!("{MEMBERS}/olive/revoke"),
            String::new(),
            "keep an owner",
        ),
        (
            format!("{MEMBERS}/olive/roles"),
            json!({"roles": ["operator"]}).to_string(),
            "keep an owner",
        ),
        (
            MEMBERS.to_owned(),
            json!({"principal": "sam", "roles": ["reviewer"]}).to_string(),
            "member already",
        ),
        (
            format!("{MEMBERS}/sam/roles"),
            json!({"roles": ["specialist"]}).to_string(),
            "nothing to change",
        ),
    ] {
        let answer = app.as_("olive", Method::POST, &path, &body).await;
        let error = answer.assert_error(StatusCode::CONFLICT, "rule_refused");
        assert_eq!(error["rule"], "T6", "{error}");
        assert!(
            error["message"].as_str().unwrap().contains(says),
            "POST {path}: {error}"
        );
    }
    assert_eq!(members(&app).await, listed);
    let budget = app.get("oscar", "/v1/rooms/local/budget?limit=200").await;
    assert_eq!(budget["balances"]["spent"], 0, "{budget}");
}

/// T6 on a hosted specialist: demoted to agent host (it may still fetch assignments), its
/// waiting call is aborted and its assignment withdrawn at once; its result is refused; and
/// once revoked, its next request is a 401 (its token was revoked with it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t6_a_demoted_hosted_specialist_loses_its_assignment_at_once_and_a_revoked_one_is_refused()
{
    let (app, gather) = crate::hosted::objective_with_sams_gather().await;
    let op = gather["operation"].as_str().unwrap().to_owned();
    let changed = app
        .post(
            "olive",
            &format!("{MEMBERS}/sam/roles"),
            &json!({"roles": ["agent_host"]}).to_string(),
        )
        .await;
    let fenced = changed["log"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["rule"] == "T6" && e["message"].as_str().unwrap().contains(&op));
    assert!(fenced, "the call was not fenced: {changed}");
    let listed = app.get("sam", "/v1/rooms/local/assignments").await;
    assert_eq!(listed["items"], json!([]), "{listed}");
    let late = app
        .as_(
            "sam",
            Method::POST,
            &format!("/v1/rooms/local/assignments/{op}/result"),
            &json!({"outcome": "failure", "reason": "too late", "usage_micros": 0}).to_string(),
        )
        .await;
    late.assert_error(StatusCode::CONFLICT, "wrong_state");
    assert!(late.body.contains("not waiting"), "{late:?}");

    app.post("olive", &format!("{MEMBERS}/sam/revoke"), "{}")
        .await;
    let answer = app
        .as_("sam", Method::GET, "/v1/rooms/local/assignments", "")
        .await;
    answer.assert_error(StatusCode::UNAUTHORIZED, "unauthenticated");
    // Nothing of the aborted call was applied: the task is not done.
    app.settle().await;
    let objective = gather["objective"].as_str().unwrap();
    let detail = app
        .get("olive", &format!("/v1/rooms/local/objectives/{objective}"))
        .await;
    let done = &detail["board"]["columns"][3]["tasks"];
    assert_eq!(done, &json!([]), "{detail}");
}

/// T6: revoking a member revokes its tokens in the Room: its token is a 401 (revoked), not
/// merely a 403; a retry of the revocation with the same Idempotency-Key answers the original
/// decision (not a 404, though it is no longer a member); and once the principal is added
/// again, its old token is still a 401 while the newly issued one works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t6_a_revoked_members_old_token_stays_revoked_after_it_is_added_again() {
    let app = spawn_app().await;
    let old = app.token("sue").to_owned();
    let as_sue = |token: String| {
        let app = &app;
        async move {
            let auth = format!("Bearer {token}");
            app.call(
                Method::GET,
                "/v1/rooms/local/objectives",
                &[("authorization", &auth)],
                String::new(),
            )
            .await
        }
    };
    assert_eq!(as_sue(old.clone()).await.status, StatusCode::OK);

    let path = format!("{MEMBERS}/sue/revoke");
    let revoked = keyed(&app, &path, "", "revoke-sue").await;
    assert_eq!(revoked.status, StatusCode::OK, "{revoked:?}");
    let revoked = revoked.json();
    assert_eq!(revoked["decided"], true, "{revoked}");
    as_sue(old.clone())
        .await
        .assert_error(StatusCode::UNAUTHORIZED, "unauthenticated");
    let tokens = app
        .store
        .list_tokens(&crate::support::local())
        .await
        .unwrap();
    let sues: Vec<_> = tokens
        .iter()
        .filter(|t| t.principal.as_str() == "sue")
        .collect();
    assert!(!sues.is_empty());
    assert!(sues.iter().all(|t| t.revoked_at.is_some()), "{sues:?}");

    // The same request again: the original decision, not a 404.
    let again = keyed(&app, &path, "", "revoke-sue").await;
    assert_eq!(again.status, StatusCode::OK, "{again:?}");
    let again = again.json();
    assert_eq!(again["already_done"], true, "{again}");
    assert_eq!(again["revision"], revoked["revision"], "{again}");
    // Under another key it is no member to revoke.
    keyed(&app, &path, "", "revoke-sue-2")
        .await
        .assert_error(StatusCode::NOT_FOUND, "not_found");

    // Added again with a new token: the old one stays revoked, the new one works.
    tokio::time::sleep(Duration::from_millis(5)).await;
    let body =
        json!({"principal": "sue", "roles": ["specialist"], "issue_token": true}).to_string();
    let added = keyed(&app, MEMBERS, &body, "add-sue-again").await;
    assert_eq!(added.status, StatusCode::OK, "{added:?}");
    let new = added.json()["token"]["token"].as_str().unwrap().to_owned();
    as_sue(old.clone())
        .await
        .assert_error(StatusCode::UNAUTHORIZED, "unauthenticated");
    assert_eq!(as_sue(new.clone()).await.status, StatusCode::OK);
    // A retry of the old revocation leaves the new token alone.
    let retried = keyed(&app, &path, "", "revoke-sue").await;
    assert_eq!(retried.status, StatusCode::OK, "{retried:?}");
    assert_eq!(as_sue(new).await.status, StatusCode::OK);
    as_sue(old)
        .await
        .assert_error(StatusCode::UNAUTHORIZED, "unauthenticated");
}
