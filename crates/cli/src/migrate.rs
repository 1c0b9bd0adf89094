//! `agentroom migrate up|status|down`: the only way a schema changes (D5).

use anyhow::bail;
use clap::Subcommand;

use crate::store::StoreArgs;

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Apply every pending migration (creates the embedded database if need be).
    Up {
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Show every migration this binary carries and whether it is applied.
    Status {
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Revert the planner's migrations, destroying its state; on PostgreSQL the workflow
    /// store's calls (`operations`, its own ledger) are kept. With --workflows, revert the
    /// workflow store's instead.
    Down {
        #[command(flatten)]
        store: StoreArgs,
        /// Required to revert the planner's migrations: says you mean to destroy the
        /// planner's state in this database.
        #[arg(long)]
        confirm_destroy_planner_state: bool,
        /// Revert the workflow store's ledger (PostgreSQL only), once the planner's is
        /// reverted: destroys every recorded call, its lease and its receipt.
        #[arg(long)]
        workflows: bool,
        /// Required with --workflows: says you mean to destroy the recorded calls.
        #[arg(long, requires = "workflows")]
        confirm_destroy_workflow_state: bool,
    },
}

pub(crate) async fn run(command: Command) -> anyhow::Result<String> {
    let url = match &command {
        Command::Up { store } | Command::Status { store } | Command::Down { store, .. } => {
            store.database_url.clone()
        }
    };
    match url {
        Some(url) => postgres(command, &url).await,
        None => sqlite(command),
    }
}

async fn postgres(command: Command, url: &str) -> anyhow::Result<String> {
    use agentroom_store_postgres::migrate;
    let shown = crate::store::redact(url);
    refuse_unconfirmed(&command, REFUSE_DOWN_POSTGRES)?;
    let pool = migrate::connect(url).await?;
    Ok(match command {
        Command::Up { .. } => {
            let applied = migrate::up(&pool).await?;
            if applied.is_empty() {
                format!("{shown}: up to date\n")
            } else {
                let mut parts = Vec::new();
                if !applied.planner.is_empty() {
                    parts.push(format!("planner {}", versions(&applied.planner)));
                }
                if !applied.workflows.is_empty() {
                    parts.push(format!("workflows {}", versions(&applied.workflows)));
                }
                format!("{shown}: applied {}\n", parts.join("; "))
            }
        }
        Command::Status { .. } => {
            let mut out = format!("{shown}\n");
            for state in migrate::status(&pool).await? {
                out.push_str(&format!(
                    "{:<9} {:04} {:<8} {}\n",
                    state.ledger.as_str(),
                    state.version,
                    state.state.as_str(),
                    state.description
                ));
            }
            out
        }
        Command::Down {
            workflows: true, ..
        } => {
            let reverted = migrate::down_workflows(&pool).await?;
            format!("{shown}: reverted workflows {}\n", versions(&reverted))
        }
        Command::Down { .. } => {
            let reverted = migrate::down(&pool).await?;
            let kept = migrate::status(&pool)
                .await?
                .iter()
                .filter(|m| m.ledger == migrate::Ledger::Workflows)
                .all(|m| m.applied());
            format!(
                "{shown}: reverted planner {}{}\n",
                versions(&reverted),
                if kept {
                    " (the workflow store's operations are kept)"
                } else {
                    ""
                }
            )
        }
    })
}

/// Refuses a `down` without the confirmation its ledger asks for, before anything connects.
fn refuse_unconfirmed(command: &Command, planner_refusal: &str) -> anyhow::Result<()> {
    match command {
        Command::Down {
            workflows: true,
            confirm_destroy_workflow_state: false,
            ..
        } => bail!("{REFUSE_DOWN_WORKFLOWS}"),
        Command::Down {
            workflows: false,
            confirm_destroy_planner_state: false,
            ..
        } => bail!("{planner_refusal}"),
        _ => Ok(()),
    }
}

const REFUSE_DOWN_POSTGRES: &str = "migrate down destroys the planner's state (plans, tasks, \
     Rooms and their history, the ledger, the outbox, tokens, contents, budget pools); the \
     workflow store's operations are kept; nothing was changed. Run it again with \
     --confirm-destroy-planner-state if you mean it";

const REFUSE_DOWN_SQLITE: &str = "migrate down destroys everything in the embedded database \
     (plans, tasks, Rooms and their history, operations, the ledger, the outbox); nothing was \
     changed. Run it again with --confirm-destroy-planner-state if you mean it";

const REFUSE_DOWN_WORKFLOWS: &str = "migrate down --workflows destroys every call the workflow \
     store recorded (operations, their leases and receipts); nothing was changed. Run it again \
     with --confirm-destroy-workflow-state if you mean it";

/// The embedded file keeps one ledger: it belongs to one process, which owns both the
/// planner's state and its calls, and no other consumer shares it.
const SQLITE_ONE_LEDGER: &str = "the embedded SQLite database keeps one migration ledger (its \
     file belongs to one process, which owns both the planner's state and its calls); \
     --workflows applies to PostgreSQL only; nothing was changed";

fn sqlite(command: Command) -> anyhow::Result<String> {
    if !matches!(
        command,
        Command::Down {
            workflows: true,
            ..
        }
    ) {
        refuse_unconfirmed(&command, REFUSE_DOWN_SQLITE)?;
    }
    match command {
        Command::Up { store } => {
            let path = store.sqlite_path();
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            let applied = agentroom_store_sqlite::migrate::up(&path)?;
            Ok(if applied.is_empty() {
                format!("{}: up to date\n", path.display())
            } else {
                format!("{}: applied {}\n", path.display(), versions(&applied))
            })
        }
        Command::Status { store } => {
            let path = store.sqlite_path();
            let states = agentroom_store_sqlite::migrate::status(&path)?;
            let mut out = format!("{}\n", path.display());
            for state in states {
                let mark = state.state.as_str();
                out.push_str(&format!(
                    "{:<9} {:04} {:<8} {}\n",
                    state.ledger.as_str(),
                    state.version,
                    mark,
                    state.description
                ));
            }
            Ok(out)
        }
        Command::Down {
            workflows: true, ..
        } => bail!("{SQLITE_ONE_LEDGER}"),
        Command::Down { store, .. } => {
            let path = store.sqlite_path();
            let reverted = agentroom_store_sqlite::migrate::down(&path)?;
            Ok(format!(
                "{}: reverted {}\n",
                path.display(),
                versions(&reverted)
            ))
        }
    }
}

fn versions(list: &[i64]) -> String {
    if list.is_empty() {
        return "nothing".to_owned();
    }
    list.iter()
        .map(|v| format!("{v:04}"))
        .collect::<Vec<_>>()
        .join(", ")
}
