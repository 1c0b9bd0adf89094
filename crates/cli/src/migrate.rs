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
    /// Revert every migration, destroying all planner state in the database.
    Down {
        #[command(flatten)]
        store: StoreArgs,
        /// Required: says you mean to destroy every plan and task in this database.
        #[arg(long)]
        confirm_destroy_planner_state: bool,
    },
}

pub(crate) async fn run(command: Command) -> anyhow::Result<String> {
    match command {
        Command::Up { store } => {
            reject_postgres(&store)?;
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
            reject_postgres(&store)?;
            let path = store.sqlite_path();
            let states = agentroom_store_sqlite::migrate::status(&path)?;
            let mut out = format!("{}\n", path.display());
            for state in states {
                let mark = if state.applied { "applied" } else { "pending" };
                out.push_str(&format!(
                    "{:04} {:<8} {}\n",
                    state.version, mark, state.description
                ));
            }
            Ok(out)
        }
        Command::Down {
            store,
            confirm_destroy_planner_state,
        } => {
            if !confirm_destroy_planner_state {
                bail!(
                    "migrate down destroys every plan and task in the database; nothing was \
                     changed. Run it again with --confirm-destroy-planner-state if you mean it"
                );
            }
            reject_postgres(&store)?;
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

fn reject_postgres(store: &StoreArgs) -> anyhow::Result<()> {
    if let Some(url) = &store.database_url {
        bail!(
            "PostgreSQL is not available in this build yet (asked for {})",
            crate::store::redact(url)
        );
    }
    Ok(())
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
