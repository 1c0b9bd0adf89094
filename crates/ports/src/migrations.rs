//! Where a store's migrations stand, the same for every store: one [`MigrationStatus`] per
//! migration, classified by [`compare`] from the migrations a binary carries and the rows of
//! the store's migration table, and the refusal a store gives at construction when they
//! differ (D5). The stores read and write their tables; this module only compares.

use std::collections::BTreeMap;
use std::fmt;

/// Where one migration stands in a database.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MigrationState {
    /// Applied successfully, with the checksum this binary expects.
    Applied,
    /// Known to this binary, not applied yet.
    Pending,
    /// Recorded as failed: the database is dirty and needs an operator.
    Failed,
    /// Applied, but its SQL differs from this binary's (an applied migration was edited).
    Changed,
    /// Applied by a binary that knows a migration this one does not (a newer schema).
    Unknown,
}

impl MigrationState {
    /// Its name in `agentroom migrate status`: `applied`, `pending`, `failed`, `changed`,
    /// `unknown`.
    pub fn as_str(self) -> &'static str {
        match self {
            MigrationState::Applied => "applied",
            MigrationState::Pending => "pending",
            MigrationState::Failed => "failed",
            MigrationState::Changed => "changed",
            MigrationState::Unknown => "unknown",
        }
    }

    /// What it means for a store that needs this migration as its binary has it, or `None`
    /// when it is applied as expected.
    fn problem(self) -> Option<&'static str> {
        match self {
            MigrationState::Applied => None,
            MigrationState::Pending => Some("is pending"),
            MigrationState::Failed => Some("failed and left the database dirty"),
            MigrationState::Changed => Some("was applied from different SQL than this binary's"),
            MigrationState::Unknown => {
                Some("is applied but unknown to this binary (a newer schema?)")
            }
        }
    }
}

impl fmt::Display for MigrationState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which migration ledger a migration is recorded in. A PostgreSQL database keeps two: the
/// workflow store's (the `operations` table: calls, their leases and receipts), which a
/// consumer of the workflow store can keep while the planner's state is reverted, and the
/// planner's (everything else). The embedded SQLite file keeps one, the planner's: it belongs
/// to one process, which owns both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Ledger {
    /// The planner's migrations (`migrations/postgres`, `migrations/sqlite`), recorded in
    /// `_sqlx_migrations`.
    Planner,
    /// The workflow store's migrations (`migrations/postgres-workflows`), recorded in
    /// `_agentroom_workflow_migrations`.
    Workflows,
}

impl Ledger {
    /// Its name in `agentroom migrate status`: `planner` or `workflows`.
    pub fn as_str(self) -> &'static str {
        match self {
            Ledger::Planner => "planner",
            Ledger::Workflows => "workflows",
        }
    }

    /// The table that records it.
    pub fn table(self) -> &'static str {
        match self {
            Ledger::Planner => "_sqlx_migrations",
            Ledger::Workflows => "_agentroom_workflow_migrations",
        }
    }

    /// How a refusal names one of its migrations.
    fn noun(self) -> &'static str {
        match self {
            Ledger::Planner => "migration",
            Ledger::Workflows => "workflow store migration",
        }
    }
}

impl fmt::Display for Ledger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One migration and where it stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrationStatus {
    /// The ledger that records it.
    pub ledger: Ledger,
    /// Its version (the `NNNN` of the file name).
    pub version: i64,
    /// Its description (the rest of the file name).
    pub description: String,
    /// Where it stands.
    pub state: MigrationState,
}

impl MigrationStatus {
    /// Whether it is applied as this binary expects.
    pub fn applied(&self) -> bool {
        self.state == MigrationState::Applied
    }
}

/// A migration a binary carries (its up migration).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Carried<'a> {
    /// Its version.
    pub version: i64,
    /// Its description.
    pub description: &'a str,
    /// The checksum of its SQL.
    pub checksum: &'a [u8],
}

/// A row of a store's migration table (`_sqlx_migrations`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    /// Its description as recorded.
    pub description: String,
    /// Whether it was applied successfully.
    pub success: bool,
    /// The checksum of the SQL that was applied.
    pub checksum: Vec<u8>,
}

/// Every migration `carried` and every one `recorded` in `ledger` (by version; `None`: the
/// store has no such migration table), in version order, with where each stands.
pub fn compare<'a>(
    ledger: Ledger,
    carried: impl IntoIterator<Item = Carried<'a>>,
    recorded: Option<&BTreeMap<i64, Recorded>>,
) -> Vec<MigrationStatus> {
    let empty = BTreeMap::new();
    let recorded = recorded.unwrap_or(&empty);
    let mut status: BTreeMap<i64, MigrationStatus> = carried
        .into_iter()
        .map(|m| {
            let state = match recorded.get(&m.version) {
                None => MigrationState::Pending,
                Some(r) if !r.success => MigrationState::Failed,
                Some(r) if r.checksum.as_slice() != m.checksum => MigrationState::Changed,
                Some(_) => MigrationState::Applied,
            };
            (
                m.version,
                MigrationStatus {
                    ledger,
                    version: m.version,
                    description: m.description.to_owned(),
                    state,
                },
            )
        })
        .collect();
    for (version, r) in recorded {
        status.entry(*version).or_insert_with(|| MigrationStatus {
            ledger,
            version: *version,
            description: r.description.clone(),
            state: if r.success {
                MigrationState::Unknown
            } else {
                MigrationState::Failed
            },
        });
    }
    status.into_values().collect()
}

/// Why a store refuses to open a database whose migrations in `ledger` stand as `recorded`
/// says, for a binary that carries `carried` (D5); `None` when every migration is applied as
/// carried and none is applied that it does not carry.
pub fn refusal<'a>(
    ledger: Ledger,
    carried: impl IntoIterator<Item = Carried<'a>>,
    recorded: Option<&BTreeMap<i64, Recorded>>,
) -> Option<String> {
    if recorded.is_none() {
        return Some(format!("there is no migration table {}", ledger.table()));
    }
    let problems: Vec<String> = compare(ledger, carried, recorded)
        .into_iter()
        .filter_map(|m| {
            let what = m.state.problem()?;
            Some(format!(
                "{} {} ({}) {what}",
                ledger.noun(),
                m.version,
                m.description
            ))
        })
        .collect();
    (!problems.is_empty()).then(|| problems.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn carried() -> Vec<Carried<'static>> {
        vec![
            Carried {
                version: 1,
                description: "create planning",
                checksum: b"one",
            },
            Carried {
                version: 2,
                description: "create rooms",
                checksum: b"two",
            },
            Carried {
                version: 3,
                description: "lean room state",
                checksum: b"three",
            },
        ]
    }

    fn row(description: &str, success: bool, checksum: &[u8]) -> Recorded {
        Recorded {
            description: description.to_owned(),
            success,
            checksum: checksum.to_vec(),
        }
    }

    #[test]
    fn d5_every_migration_is_classified_against_the_table() {
        let recorded = BTreeMap::from([
            (1, row("create planning", true, b"one")),
            (2, row("create rooms", true, b"edited")),
            (4, row("from the future", true, b"four")),
            (5, row("half done", false, b"five")),
        ]);
        let states: Vec<(i64, MigrationState)> =
            compare(Ledger::Planner, carried(), Some(&recorded))
                .into_iter()
                .map(|m| (m.version, m.state))
                .collect();
        assert_eq!(
            states,
            vec![
                (1, MigrationState::Applied),
                (2, MigrationState::Changed),
                (3, MigrationState::Pending),
                (4, MigrationState::Unknown),
                (5, MigrationState::Failed),
            ]
        );
        let refusal = refusal(Ledger::Planner, carried(), Some(&recorded)).unwrap();
        assert!(
            refusal.contains("migration 2 (create rooms) was applied from different SQL"),
            "{refusal}"
        );
        assert!(
            refusal.contains("migration 3 (lean room state) is pending"),
            "{refusal}"
        );
        assert!(!refusal.contains("migration 1 "), "{refusal}");
    }

    #[test]
    fn d5_a_database_without_a_table_is_refused_and_one_at_the_binarys_schema_is_not() {
        assert!(
            refusal(Ledger::Planner, carried(), None)
                .unwrap()
                .contains("no migration table")
        );
        assert!(
            compare(Ledger::Planner, carried(), None)
                .iter()
                .all(|m| m.state == MigrationState::Pending)
        );
        let recorded = BTreeMap::from([
            (1, row("create planning", true, b"one")),
            (2, row("create rooms", true, b"two")),
            (3, row("lean room state", true, b"three")),
        ]);
        assert_eq!(refusal(Ledger::Planner, carried(), Some(&recorded)), None);
        assert!(
            compare(Ledger::Planner, carried(), Some(&recorded))
                .iter()
                .all(MigrationStatus::applied)
        );
    }

    #[test]
    fn d5_the_workflow_ledger_is_refused_by_its_own_table_and_name() {
        assert_eq!(
            refusal(Ledger::Workflows, carried(), None).unwrap(),
            "there is no migration table _agentroom_workflow_migrations"
        );
        let recorded = BTreeMap::from([(1, row("create planning", true, b"one"))]);
        let refusal = refusal(Ledger::Workflows, carried(), Some(&recorded)).unwrap();
        assert!(
            refusal.contains("workflow store migration 2 (create rooms) is pending"),
            "{refusal}"
        );
        assert!(
            compare(Ledger::Workflows, carried(), Some(&recorded))
                .iter()
                .all(|m| m.ledger == Ledger::Workflows)
        );
    }
}
