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
    /// Revert every migration, destroying everything the database holds.
    Down {
        #[command(flatten)]
        store: StoreArgs,
        /// Required: says you mean to destroy everything in this database.
        #[arg(long)]
        confirm_destroy_planner_state: bool,
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
    if let Command::Down {
        confirm_destroy_planner_state: false,
        ..
    } = command
    {
        bail!("{}", REFUSE_DOWN);
    }
    let pool = migrate::connect(url).await?;
    Ok(match command {
        Command::Up { .. } => {
            let applied = migrate::up(&pool).await?;
            if applied.is_empty() {
                format!("{shown}: up to date\n")
            } else {
                format!("{shown}: applied {}\n", versions(&applied))
            }
        }
        Command::Status { .. } => {
            let mut out = format!("{shown}\n");
            for state in migrate::status(&pool).await? {
                out.push_str(&format!(
                    "{:04} {:<8} {}\n",
                    state.version,
                    format!("{:?}", state.state).to_lowercase(),
                    state.description
                ));
            }
            out
        }
        Command::Down { .. } => {
            let reverted = migrate::down(&pool).await?;
            format!("{shown}: reverted {}\n", versions(&reverted))
        }
    })
}

const REFUSE_DOWN: &str = "migrate down destroys everything in the database (plans, tasks, Rooms \
     and their history, operations, the ledger, the outbox); nothing was changed. Run it again \
     with --confirm-destroy-planner-state if you mean it";

fn sqlite(command: Command) -> anyhow::Result<String> {
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
                bail!("{}", REFUSE_DOWN);
            }
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
