//! Where the planning data lives: the embedded SQLite file under `--root` (the default) or a
//! PostgreSQL database named by `--database-url`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use agentroom_coordinator::Store;
use agentroom_planning::PlanningRepository;
use agentroom_store_sqlite::{Durability, SqlitePlanning, SqliteRooms};
use anyhow::Context;
use clap::Args;

/// The embedded database's file name under the root.
pub(crate) const PLANNING_DB: &str = "planning.db";

/// `--root DIR | --database-url URL`.
#[derive(Debug, Clone, Args)]
pub(crate) struct StoreArgs {
    /// The data directory of the embedded database (`planning.db` inside it).
    #[arg(
        long,
        value_name = "DIR",
        default_value = "./agentroom-data",
        conflicts_with = "database_url"
    )]
    pub(crate) root: PathBuf,
    /// A PostgreSQL database instead of the embedded file (`postgres://user@host/db`).
    #[arg(long, value_name = "URL", env = "AGENTROOM_DATABASE_URL")]
    pub(crate) database_url: Option<String>,
    /// fsync every commit of the embedded database (survives power loss) instead of
    /// committing to the operating system (survives the process being killed).
    #[arg(long)]
    pub(crate) fsync: bool,
}

impl StoreArgs {
    pub(crate) fn sqlite_path(&self) -> PathBuf {
        self.root.join(PLANNING_DB)
    }

    fn durability(&self) -> Durability {
        if self.fsync {
            Durability::PowerLoss
        } else {
            Durability::ProcessCrash
        }
    }

    /// Opens the planning repository. The embedded file is created and migrated when it does
    /// not exist yet (the CLI migrates only the file it creates itself, D5); an existing
    /// database is opened as it is and must be migrated already.
    pub(crate) async fn open_planning(&self) -> anyhow::Result<Arc<dyn PlanningRepository>> {
        if let Some(url) = &self.database_url {
            return open_postgres(url).await;
        }
        let path = self.sqlite_path();
        if !path.exists() {
            create_embedded(&self.root, &path)?;
        }
        let store = SqlitePlanning::open(&path, self.durability())?;
        Ok(Arc::new(store))
    }
}

/// Whether opening the Room store may create the embedded database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Missing {
    /// Create and migrate the embedded file when it does not exist (D5: the CLI migrates the
    /// file it creates itself).
    Create,
    /// Refuse: the database must exist and be migrated already.
    Refuse,
}

impl StoreArgs {
    /// Opens the Room store (rooms, events, operations, outbox, tokens).
    pub(crate) async fn open_rooms(&self, missing: Missing) -> anyhow::Result<Arc<dyn Store>> {
        if let Some(url) = &self.database_url {
            let store = agentroom_store_postgres::PgRooms::connect(url)
                .await
                .with_context(|| format!("opening {}", redact(url)))?;
            return Ok(Arc::new(store));
        }
        let path = self.sqlite_path();
        if !path.exists() {
            match missing {
                Missing::Create => create_embedded(&self.root, &path)?,
                Missing::Refuse => anyhow::bail!(
                    "no database at {}: give the --root (or --database-url) of an existing one",
                    path.display()
                ),
            }
        }
        let store = SqliteRooms::open(&path, self.durability())
            .with_context(|| format!("opening {}", path.display()))?;
        Ok(Arc::new(store))
    }
}

impl StoreArgs {
    /// The Room store and the planning repository of one database, for a process that uses
    /// both (`serve`): the embedded file is created and migrated when missing (D5: the CLI
    /// migrates only the file it creates) and opened once, one writer and its readers shared
    /// by both.
    pub(crate) async fn open_host(
        &self,
    ) -> anyhow::Result<(Arc<dyn Store>, Arc<dyn PlanningRepository>)> {
        if let Some(url) = &self.database_url {
            let rooms = self.open_rooms(Missing::Refuse).await?;
            return Ok((rooms, open_postgres(url).await?));
        }
        let path = self.sqlite_path();
        if !path.exists() {
            create_embedded(&self.root, &path)?;
        }
        let rooms = SqliteRooms::open(&path, self.durability())
            .with_context(|| format!("opening {}", path.display()))?;
        let planning = rooms.planning();
        Ok((Arc::new(rooms), Arc::new(planning)))
    }
}

pub(crate) fn create_embedded(root: &Path, path: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(root)
        .with_context(|| format!("creating the data directory {}", root.display()))?;
    agentroom_store_sqlite::migrate::up(path)?;
    Ok(())
}

async fn open_postgres(url: &str) -> anyhow::Result<Arc<dyn PlanningRepository>> {
    let store = agentroom_store_postgres::PgPlanning::connect(url)
        .await
        .with_context(|| format!("opening {}", redact(url)))?;
    Ok(Arc::new(store))
}

/// A database URL without its password, for messages.
pub(crate) fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let credentials = &url[scheme + 3..at];
            match credentials.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..scheme + 3], &url[at..]),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

/// The coordinator of the host's administrative commands (`room create|access`, `pool …`)
/// over `store`: no agents, `name` as its runner's lease owner.
pub(crate) fn admin_coordinator(
    store: Arc<dyn Store>,
    name: &str,
) -> agentroom_coordinator::Coordinator {
    agentroom_coordinator::Coordinator::builder(
        store,
        agentroom_coordinator::CoordinatorConfig::new(agentroom_workflows::RunnerConfig::new(
            name,
            std::time::Duration::from_secs(30),
        )),
    )
    .build()
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn passwords_never_reach_messages() {
        assert_eq!(
            redact("postgres://app:s3cret@db:5432/x"),
            "postgres://app:***@db:5432/x"
        );
        assert_eq!(redact("postgres://app@db/x"), "postgres://app@db/x");
        assert_eq!(redact("not a url"), "not a url");
    }
}
