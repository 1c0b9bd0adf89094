//! `agentroom demo [--scenario NAME|FILE] [--root DIR]`: the durable demo. On a fresh embedded
//! SQLite database (a temporary directory, or `--root`), migrated by the command that creates
//! it (D5), a Room with an owner, specialists, a reviewer and a budget runs the scenario's
//! owner messages through the coordinator, with scripted agents answering every call. It
//! prints the timeline (every committed decision: what was accepted or rejected, by which
//! rule, and the calls it reserved), the final board and the ledger, and fails unless every
//! objective completed with an approving review and the ledger adds up to the micro.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use agentroom_agents::PriceTable;
use agentroom_agents::scripted::{Journal, Scenario, Scripted};
use agentroom_coordinator::{
    CollectingNotifier, Committed, Coordinator, CoordinatorConfig, InputId,
};
use agentroom_domain::catalog::MemoryCatalog;
use agentroom_domain::engine::{Effect, MembershipChange, Verdict as LogVerdict};
use agentroom_domain::event::{Event, EventBody};
use agentroom_domain::ids::{EventId, OperationId, RoomId};
use agentroom_domain::ledger::LedgerEntry;
use agentroom_domain::money::UsdMicros;
use agentroom_domain::objective::ObjectiveStatus;
use agentroom_domain::plan::DEFAULT_COLUMNS;
use agentroom_domain::policy::{AccessPolicy, RoomPolicy};
use agentroom_domain::review::Verdict;
use agentroom_domain::state::{RoomSetup, RoomState};
use agentroom_ports::{RoomStore, SystemClock, WorkflowStore};
use agentroom_store_sqlite::{Durability, SqliteRooms};
use agentroom_workflows::RunnerConfig;
use anyhow::{Context, anyhow, bail};
use uuid::Uuid;

use crate::demo::shorten_ids;
use crate::store::PLANNING_DB;

/// The built-in scenario: `scenarios/demo.toml`.
const BUILT_IN: &str = include_str!("../../../scenarios/demo.toml");

/// The name of the built-in scenario.
pub(crate) const DEFAULT_SCENARIO: &str = "demo";

/// The model whose shipped prices give the scripted agents' quotes.
const SCRIPTED_MODEL: &str = "scripted";

fn load_scenario(name: &str) -> anyhow::Result<Scenario> {
    if name == DEFAULT_SCENARIO {
        return Ok(Scenario::parse(BUILT_IN)?);
    }
    let path = Path::new(name);
    if path.exists() {
        return Scenario::from_file(path).with_context(|| format!("scenario {name}"));
    }
    bail!(
        "no scenario {name}: give `demo`, `supervised`, `budget`, `replanning`, `shared` or a \
         scenario file"
    )
}

/// Runs the scenario `name` on a fresh database under `root` (a temporary directory when
/// none) and returns what it prints.
pub(crate) async fn run(name: &str, root: Option<PathBuf>) -> anyhow::Result<String> {
    let scenario = load_scenario(name)?;
    let spec = scenario
        .room()
        .cloned()
        .ok_or_else(|| anyhow!("scenario {name} has no [room]"))?;
    let temporary;
    let root = match root {
        Some(root) => root,
        None => {
            temporary = tempfile::tempdir().context("creating a temporary directory")?;
            temporary.path().to_path_buf()
        }
    };
    std::fs::create_dir_all(&root).with_context(|| format!("creating {}", root.display()))?;
    let path = root.join(PLANNING_DB);
    if path.exists() {
        bail!(
            "{} exists: the demo runs on a fresh database; give an empty --root",
            path.display()
        );
    }
    agentroom_store_sqlite::migrate::up(&path)?;
    let store = Arc::new(SqliteRooms::open(&path, Durability::ProcessCrash)?);
    let journal = Arc::new(Journal::open(root.join("scripted-journal.jsonl"))?);
    let scripted = Arc::new(Scripted::new(scenario.clone()).with_journal(journal));
    let reconciler = scripted
        .reconciler()
        .ok_or_else(|| anyhow!("the scripted agents keep no journal"))?;
    let catalog = spec
        .bindings
        .iter()
        .fold(MemoryCatalog::new(), |c, (capability, provider)| {
            c.bind(capability, provider)
        });
    let notifier = Arc::new(CollectingNotifier::new());
    let coordinator = Coordinator::builder(
        store.clone(),
        CoordinatorConfig::new(RunnerConfig::new(
            "agentroom-demo",
            std::time::Duration::from_secs(30),
        )),
    )
    .provider(Arc::new(scripted.agents()))
    .reconciler(Arc::new(reconciler))
    .clock(Arc::new(SystemClock))
    .catalog(Arc::new(catalog))
    .notifier(Arc::clone(&notifier) as _)
    .build();
    let mut watch = coordinator.watch();
    let room = RoomId::parse("local")?;
    let policy = match &spec.policy {
        Some(text) => RoomPolicy::from_toml(text)?,
        None => RoomPolicy::default(),
    };
    let state = RoomState::new(RoomSetup {
        room: room.clone(),
        owner: spec.owner.clone(),
        policy,
        access: AccessPolicy::default(),
        quotes: PriceTable::shipped()?.quotes(SCRIPTED_MODEL)?,
        limit: UsdMicros::new(spec.limit_micros),
    })?;

    let mut out = String::new();
    writeln!(out, "agentroom demo: {name} — {}", scenario.description())?;
    writeln!(out, "database: {}", path.display())?;
    coordinator.recover().await?;
    coordinator.create_room(&state).await?;
    for (principal, roles) in &spec.members {
        for role in roles {
            coordinator
                .change_membership(
                    &room,
                    InputId::named(&format!("demo: grant {principal} {role:?}")),
                    spec.owner.clone(),
                    principal.clone(),
                    *role,
                    MembershipChange::Grant,
                )
                .await?;
        }
    }
    coordinator.accept_pending(&room).await?;
    writeln!(out, "\n== timeline")?;
    timeline(&mut out, &mut watch)?;
    for (n, message) in scenario.owner_messages().iter().enumerate() {
        writeln!(out, "-- {} (owner): {}", spec.owner, message.text)?;
        let event = Event {
            id: EventId::from_uuid(Uuid::new_v5(
                &Uuid::NAMESPACE_OID,
                format!("agentroom-demo/owner/{n}").as_bytes(),
            )),
            room: room.clone(),
            author: spec.owner.clone(),
            body: EventBody::OwnerMessage {
                text: message.text.clone(),
            },
        };
        coordinator.post(&event).await?;
        coordinator.wait_idle().await;
        timeline(&mut out, &mut watch)?;
    }
    let delivered = coordinator.deliver_notifications().await?;
    writeln!(
        out,
        "({delivered} notifications delivered through the outbox)"
    )?;
    // Every objective the Room held, closed ones read back from their records.
    let stored = coordinator.room_with_history(&room).await?;
    let approved = board(&mut out, &stored.state)?;
    let adds_up = ledger(&mut out, &*store, &room, &stored.state).await?;
    if !approved {
        bail!("not every objective completed with an approving review\n{out}");
    }
    if !adds_up {
        bail!("the ledger does not add up\n{out}");
    }
    Ok(out)
}

/// Prints the decisions committed since the last call.
fn timeline(
    out: &mut String,
    watch: &mut tokio::sync::mpsc::UnboundedReceiver<Committed>,
) -> anyhow::Result<()> {
    while let Ok(committed) = watch.try_recv() {
        for entry in &committed.log {
            let rule = entry.rule.map(|r| format!("[{r}] ")).unwrap_or_default();
            let mark = match entry.verdict {
                LogVerdict::Accepted => "  ",
                LogVerdict::Rejected => "✗ ",
            };
            writeln!(
                out,
                "r{:<3} {:<20} {mark}{rule}{}",
                committed.revision.0,
                committed.input,
                shorten_ids(&entry.message)
            )?;
        }
        for effect in &committed.effects {
            match effect {
                Effect::ReserveAndCall(call) => writeln!(
                    out,
                    "{:25}→ {} call {}{} reserved {}",
                    "",
                    call.role.as_str(),
                    shorten_ids(&call.op.to_string()),
                    call.principal
                        .as_ref()
                        .map(|p| format!(" to {p}"))
                        .unwrap_or_default(),
                    call.reservation
                )?,
                Effect::Notify(n) => {
                    writeln!(out, "{:25}✉ {:?}: {}", "", n.audience, shorten_ids(&n.text))?
                }
                Effect::CancelCall { op } => {
                    writeln!(out, "{:25}⨯ cancel {}", "", shorten_ids(&op.to_string()))?;
                }
                Effect::StopForAttention { rule, .. } => {
                    writeln!(out, "{:25}⚠ stopped for attention ({rule})", "")?;
                }
            }
        }
    }
    Ok(())
}

/// Prints every objective's board; whether all completed with an approving last review.
fn board(out: &mut String, state: &RoomState) -> anyhow::Result<bool> {
    let mut approved = !state.objectives().is_empty();
    for objective in state.objectives() {
        writeln!(
            out,
            "\n== board: {} ({}, revision {})",
            objective.title(),
            objective.status(),
            objective.revision()
        )?;
        let last_met = objective
            .reviews()
            .last()
            .is_some_and(|r| r.verdicts().iter().all(|v| v.verdict == Verdict::Met));
        approved &= objective.status() == ObjectiveStatus::Completed && last_met;
        let Some(plan) = objective.current_plan() else {
            continue;
        };
        writeln!(
            out,
            "plan v{} of {}",
            plan.number(),
            objective.plans().len()
        )?;
        for column in DEFAULT_COLUMNS {
            let titles: Vec<String> = plan
                .tasks()
                .iter()
                .filter(|t| plan.column_of(t).as_str() == column)
                .map(|t| format!("{} [{}]", t.spec().title, t.assignee()))
                .collect();
            writeln!(out, "  {column:<12} {}", titles.join(", "))?;
        }
        for review in objective.reviews() {
            let verdicts: Vec<String> = review
                .verdicts()
                .iter()
                .map(|v| format!("{}={:?}", v.criterion, v.verdict))
                .collect();
            writeln!(
                out,
                "  review of report v{} by {}: {}",
                review.report().version,
                review.reviewer(),
                verdicts.join(" ")
            )?;
        }
    }
    Ok(approved)
}

/// Prints the balances and every operation from the ledger rows; whether the charges add up
/// to the spend and nothing stays reserved.
async fn ledger<S: RoomStore + WorkflowStore>(
    out: &mut String,
    store: &S,
    room: &RoomId,
    state: &RoomState,
) -> anyhow::Result<bool> {
    let b = state.ledger().balances();
    writeln!(out, "\n== ledger")?;
    writeln!(
        out,
        "limit {}  reserved {}  uncertain {}  spent {}  available {}",
        b.limit, b.reserved, b.uncertain, b.spent, b.available
    )?;
    let rows = store.ledger(room).await?;
    let mut ends: BTreeMap<OperationId, (UsdMicros, &'static str)> = BTreeMap::new();
    for row in &rows {
        match row {
            LedgerEntry::Settled { op, charged, .. } => {
                ends.insert(*op, (*charged, "settled"));
            }
            LedgerEntry::SettlementRefused { op, reserved, .. } => {
                ends.insert(*op, (*reserved, "settlement refused"));
            }
            LedgerEntry::Released { op, .. } => {
                ends.insert(*op, (UsdMicros::ZERO, "released"));
            }
            _ => {}
        }
    }
    let mut charged = 0_i64;
    for row in &rows {
        let LedgerEntry::Reserved { op, amount } = row else {
            continue;
        };
        let record = store.operation(*op).await?;
        let (role, principal) = record
            .map(|r| {
                (
                    r.request.role.as_str(),
                    r.request.principal.map(|p| p.to_string()),
                )
            })
            .unwrap_or(("?", None));
        let (charge, end) = ends.get(op).copied().unwrap_or((UsdMicros::ZERO, "open"));
        charged += charge.micros();
        writeln!(
            out,
            "  {} {:<10} {:<5} reserved {} charged {} ({end})",
            shorten_ids(&op.to_string()),
            role,
            principal.unwrap_or_default(),
            amount,
            charge
        )?;
    }
    let adds_up = charged == b.spent.micros() && b.reserved == UsdMicros::ZERO;
    writeln!(
        out,
        "sum of charges {} {} spent, reserved {}",
        UsdMicros::new(charged),
        if charged == b.spent.micros() {
            "="
        } else {
            "≠"
        },
        b.reserved
    )?;
    Ok(adds_up)
}
