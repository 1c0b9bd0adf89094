//! The consumer boundary (issue 19, item 5), as a downstream service would meet it: only the
//! public API of the published crates, in an isolated PostgreSQL schema.
//!
//! 1. Apply both migration sets there (`agentroom_store_postgres::migrate`), the planner's and
//!    the workflow store's, and check both ledgers (`_sqlx_migrations`,
//!    `_agentroom_workflow_migrations`): every migration this binary carries is applied with
//!    its checksum, nothing unknown.
//! 2. Run calls: a Room whose scripted agents plan, research, write and review, through the
//!    public coordinator, on that schema; the objective completes.
//! 3. Rebuild the service on the same schema (a new coordinator, new agents over the same
//!    journal), recover and accept what is pending: the calls are reconstructed from the
//!    store and nothing completed runs again — not one new execution in the agents' journal,
//!    not one new operation, the Room at the same revision.
//! 4. The same across a service dropped while a call runs: the rebuilt one finishes the
//!    objective, and every operation executed exactly once.
//!
//! It fails, never skips, when PostgreSQL is unreachable (`DATABASE_URL`, default
//! `postgres://postgres@127.0.0.1:5432/postgres`).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests: a failed unwrap is a failed test"
)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use agentroom_agents::PriceTable;
use agentroom_agents::scripted::{Journal, Scenario, Scripted};
use agentroom_coordinator::{Coordinator, CoordinatorConfig, InputId};
use agentroom_domain::catalog::MemoryCatalog;
use agentroom_domain::engine::MembershipChange;
use agentroom_domain::event::{Event, EventBody};
use agentroom_domain::ids::{EventId, RoomId};
use agentroom_domain::money::UsdMicros;
use agentroom_domain::objective::ObjectiveStatus;
use agentroom_domain::policy::{AccessPolicy, RoomPolicy};
use agentroom_domain::state::{RoomSetup, RoomState};
use agentroom_ports::{OperationStatus, RoomStore, SystemClock, WorkflowStore};
use agentroom_store_postgres::migrate::Ledger;
use agentroom_store_postgres::{MigrationState, PgRooms, migrate};
use agentroom_workflows::RunnerConfig;

fn database_url() -> String {
    std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned())
}

/// A schema of its own, and the URL that makes it every connection's `search_path`.
struct Schema {
    name: String,
    url: String,
}

impl Schema {
    async fn create() -> Schema {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let name = format!("consumer_{}_{}", std::process::id(), nanos % 1_000_000_000);
        let admin = sqlx::PgPool::connect(&database_url()).await.expect(
            "PostgreSQL must be reachable (DATABASE_URL, default postgres://postgres@127.0.0.1:5432/postgres)",
        );
        // The name is this test's own (digits and underscores): safe to splice.
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {name}")))
            .execute(&admin)
            .await
            .unwrap();
        admin.close().await;
        let base = database_url();
        let separator = if base.contains('?') { '&' } else { '?' };
        let url = format!("{base}{separator}options=-c%20search_path%3D{name}");
        Schema { name, url }
    }

    async fn drop(self) {
        let admin = sqlx::PgPool::connect(&database_url()).await.unwrap();
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "DROP SCHEMA IF EXISTS {} CASCADE",
            self.name
        )))
        .execute(&admin)
        .await
        .unwrap();
        admin.close().await;
    }
}

const SCENARIO: &str = r#"
description = "one plan, research then a report, one approving review"

[room]
owner = "olive"
members = { sam = ["specialist"], sue = ["specialist"], rita = ["reviewer"] }
bindings = { research = "sam", writing = "sue" }

[[reasoner]]
charge_micros = 2_100
repeat = true
[reasoner.reply]
kind = "plan"
explanation = "Gather, then write."
criteria = [{ id = "cites-sources", text = "every claim cites a source" }]
[[reasoner.reply.tasks]]
key = "gather"
title = "Gather sources"
capability = "research"
kind = "production"
[[reasoner.reply.tasks]]
key = "write"
title = "Write the summary"
capability = "writing"
kind = "report"
deps = ["gather"]

[[specialist]]
task = "gather"
principal = "sam"
charge_micros = 3_400
reply_after_ms = 600
repeat = true
artifacts = [{ name = "notes", content = "Runtimes journal each step." }]
sources = [{ kind = "external", url = "https://example.org/a", digest = "sha256:f848b5c5faa537795590541cef27232e6cdfcca35ee858f4fa3e539c9fca4f65" }]

[[specialist]]
task = "write"
principal = "sue"
charge_micros = 2_800
repeat = true
artifacts = [{ name = "report", content = "Runtimes journal each step [gather]." }]

[[reviewer]]
principal = "rita"
charge_micros = 1_200
repeat = true
verdicts = [{ criterion = "cites-sources", verdict = "met", evidence = "cited" }]
"#;

/// The service as a consumer builds it: the store on the schema, scripted agents over the
/// journal (a rebuilt service reopens it), their reconciler.
async fn service(url: &str, journal: &Path, lease: Duration) -> (Coordinator, Arc<PgRooms>) {
    let store = Arc::new(PgRooms::connect(url).await.unwrap());
    let scenario = Scenario::parse(SCENARIO).unwrap();
    let journal = Arc::new(Journal::open(journal).unwrap());
    let scripted = Arc::new(Scripted::new(scenario).with_journal(journal));
    let reconciler = scripted.reconciler().unwrap();
    let catalog = MemoryCatalog::new()
        .bind("research", &"sam".parse().unwrap())
        .bind("writing", &"sue".parse().unwrap());
    let coordinator = Coordinator::builder(
        Arc::clone(&store) as _,
        CoordinatorConfig::new(RunnerConfig::new("consumer", lease)),
    )
    .provider(Arc::new(scripted.agents()))
    .reconciler(Arc::new(reconciler))
    .clock(Arc::new(SystemClock))
    .catalog(Arc::new(catalog))
    .build();
    (coordinator, store)
}

/// The lease of every service here: short, so a rebuilt service takes over a cut-off call
/// soon (heartbeats keep a running call's lease alive).
const LEASE: Duration = Duration::from_secs(1);

async fn create_room(coordinator: &Coordinator, room: &RoomId) {
    let state = RoomState::new(RoomSetup {
        room: room.clone(),
        owner: "olive".parse().unwrap(),
        policy: RoomPolicy::default(),
        access: AccessPolicy::default(),
        quotes: PriceTable::shipped().unwrap().quotes("scripted").unwrap(),
        limit: UsdMicros::new(1_000_000),
    })
    .unwrap();
    coordinator.create_room(&state).await.unwrap();
    for (who, role) in [
        ("sam", agentroom_domain::room::Role::Specialist),
        ("sue", agentroom_domain::room::Role::Specialist),
        ("rita", agentroom_domain::room::Role::Reviewer),
    ] {
        coordinator
            .change_membership(
                room,
                InputId::named(&format!("consumer: grant {who}")),
                "olive".parse().unwrap(),
                who.parse().unwrap(),
                role,
                MembershipChange::Grant,
            )
            .await
            .unwrap();
    }
}

async fn say(coordinator: &Coordinator, room: &RoomId, n: u128, text: &str) {
    let event = Event {
        id: EventId::from_uuid(uuid::Uuid::from_u128(0xc0_0000 + n)),
        room: room.clone(),
        author: "olive".parse().unwrap(),
        body: EventBody::OwnerMessage {
            text: text.to_owned(),
        },
    };
    coordinator.post(&event).await.unwrap();
}

/// Each execution the agents journaled, as (role, task identity or op): a call that ran
/// again — under its own id or a new one — shows as a second line for the same work.
fn executions(journal: &Path) -> Vec<(String, String)> {
    std::fs::read_to_string(journal)
        .unwrap()
        .lines()
        .map(|line| {
            let field = |name: &str| {
                line.split(&format!("\"{name}\":"))
                    .nth(1)
                    .map(|rest| rest.trim_start_matches('"'))
                    .and_then(|rest| rest.split(['"', ',']).next())
                    .unwrap_or_default()
                    .to_owned()
            };
            let work = match field("task").as_str() {
                "null" | "" => field("op"),
                task => task.to_owned(),
            };
            (field("role"), work)
        })
        .collect()
}

/// Every specialist task executed once.
fn once_per_task(executions: &[(String, String)]) -> bool {
    let mut seen = BTreeMap::new();
    for (role, work) in executions.iter().filter(|(r, _)| r == "specialist") {
        *seen.entry((role, work)).or_insert(0) += 1;
    }
    seen.values().all(|n| *n == 1)
}

async fn statuses(store: &PgRooms, room: &RoomId) -> Vec<ObjectiveStatus> {
    let stored = store.load(room).await.unwrap().unwrap();
    let records = store.all_objective_records(room).await.unwrap();
    stored
        .with_records(records)
        .state
        .objectives()
        .iter()
        .map(|o| o.status())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_migrates_an_isolated_schema_runs_calls_and_rebuilds_without_repeating_work() {
    let schema = Schema::create().await;
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("journal.jsonl");

    // 1. Both migration sets, applied in the schema, each with its own ledger: the planner's
    // and the workflow store's (operations, their leases and receipts).
    let pool = migrate::connect(&schema.url).await.unwrap();
    let applied = migrate::up(&pool).await.unwrap();
    assert!(
        !applied.planner.is_empty() && !applied.workflows.is_empty(),
        "a fresh schema applies every migration of both sets: {applied:?}"
    );
    let status = migrate::status(&pool).await.unwrap();
    for ledger in [Ledger::Planner, Ledger::Workflows] {
        let recorded: Vec<_> = status.iter().filter(|m| m.ledger == ledger).collect();
        let applied_here = match ledger {
            Ledger::Planner => &applied.planner,
            Ledger::Workflows => &applied.workflows,
        };
        assert_eq!(recorded.len(), applied_here.len(), "{ledger}: {recorded:?}");
        for m in recorded {
            assert_eq!(m.state, MigrationState::Applied, "{m:?}");
        }
        // Each ledger is its own table, in the schema.
        let rows: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT count(*) FROM {}.{}",
            schema.name,
            ledger.table()
        )))
        .fetch_one(&pool)
        .await
        .unwrap();
        assert_eq!(rows, applied_here.len() as i64, "{ledger}");
    }
    // Applied again: nothing is pending.
    assert!(migrate::up(&pool).await.unwrap().is_empty());
    // Nothing leaked outside the schema: the public schema's tables are not touched.
    let in_schema: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM information_schema.tables WHERE table_schema = $1",
    )
    .bind(&schema.name)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!(in_schema > 5, "the tables are in {}", schema.name);
    pool.close().await;

    // 2. Calls, through the public service.
    let room = RoomId::parse("consumer").unwrap();
    let (coordinator, store) = service(&schema.url, &journal, LEASE).await;
    coordinator.recover().await.unwrap();
    create_room(&coordinator, &room).await;
    say(&coordinator, &room, 1, "Summarize how runtimes recover").await;
    coordinator.wait_idle().await;
    assert_eq!(
        statuses(&store, &room).await,
        vec![ObjectiveStatus::Completed]
    );
    let before = executions(&journal);
    assert_eq!(
        before.len(),
        4,
        "reasoner, gather, write, review: {before:?}"
    );
    assert!(once_per_task(&before));
    let ops_before = store.room_operations(&room, None).await.unwrap();
    let revision_before = store.load(&room).await.unwrap().unwrap().revision;
    coordinator.shutdown(Duration::from_secs(5)).await;
    drop(coordinator);

    // 3. The service rebuilt on the same schema: reconstructed, nothing repeated.
    let (coordinator, store) = service(&schema.url, &journal, LEASE).await;
    coordinator.recover().await.unwrap();
    coordinator.accept_pending(&room).await.unwrap();
    coordinator.wait_idle().await;
    assert_eq!(executions(&journal), before, "no completed call ran again");
    assert_eq!(
        store.room_operations(&room, None).await.unwrap(),
        ops_before
    );
    assert_eq!(
        store.load(&room).await.unwrap().unwrap().revision,
        revision_before,
        "nothing was decided again"
    );

    coordinator.shutdown(Duration::from_secs(5)).await;
    drop(coordinator);
    drop(store);

    // 4. A service cut off while a call runs (the research takes 600 ms): its runtime is
    //    shut down where it stands, no graceful stop. The rebuilt service recovers the call
    //    from the store and the journal once its lease expired, and finishes the objective.
    let crashing = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let (posted, was_posted) = tokio::sync::oneshot::channel();
    let (url, path, at) = (schema.url.clone(), journal.clone(), room.clone());
    crashing.spawn(async move {
        let (coordinator, _store) = service(&url, &path, LEASE).await;
        coordinator.recover().await.unwrap();
        say(
            &coordinator,
            &at,
            2,
            "Summarize how runtimes lease their calls",
        )
        .await;
        let _ = posted.send(());
        std::future::pending::<()>().await;
    });
    was_posted.await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    crashing.shutdown_background();
    let (coordinator, store) = service(&schema.url, &journal, LEASE).await;
    tokio::time::sleep(LEASE * 2).await;
    for _ in 0..20 {
        coordinator.recover().await.unwrap();
        coordinator.accept_pending(&room).await.unwrap();
        coordinator.wait_idle().await;
        if statuses(&store, &room).await == vec![ObjectiveStatus::Completed; 2] {
            break;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert_eq!(
        statuses(&store, &room).await,
        vec![ObjectiveStatus::Completed; 2]
    );
    // The cut-off call was recovered, not replayed: marked uncertain, then confirmed from the
    // journal (D2).
    let history = store
        .history(&room, agentroom_ports::Revision(0), 10_000)
        .await
        .unwrap();
    let inputs: Vec<&str> = history.iter().map(|h| h.input.as_str()).collect();
    assert!(inputs.contains(&"call_uncertain"), "{inputs:?}");
    assert!(inputs.contains(&"reconciled"), "{inputs:?}");
    let after = executions(&journal);
    assert_eq!(
        after.len(),
        8,
        "four calls per objective, none again: {after:?}"
    );
    assert!(once_per_task(&after), "{after:?}");
    assert_eq!(
        after[..4],
        before[..],
        "the first objective's calls, untouched"
    );
    let open = store
        .room_operations(&room, Some(OperationStatus::InFlight))
        .await
        .unwrap();
    assert!(open.is_empty(), "{open:?}");
    coordinator.shutdown(Duration::from_secs(5)).await;
    drop(coordinator);
    drop(store);
    schema.drop().await;
}
