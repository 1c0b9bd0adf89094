//! What a coordinator is built from in the commands that run one on a real store (`serve`,
//! `room create`): the capability catalog named by a Room policy, the agents that execute
//! calls (scripted from a scenario file with its journal, an OpenAI-compatible API, or none),
//! the hosted specialists whose work agent hosts submit over the REST API, the reconciler that
//! goes with them, and where notifications leave to.

use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};

use agentroom_agents::hosted::{HostedReconciler, HostedSpecialists};
use agentroom_agents::scripted::{Journal, JournalReconciler, Scenario, Scripted};
use agentroom_agents::{Agents, PriceTable, ProvidersConfig, Served};
use agentroom_capabilities::{Catalog, ResourceError, ResourceErrors};
use agentroom_coordinator::Admission;
use agentroom_domain::catalog::{
    CapabilityCatalog, CapabilityInfo, Refusal, ResolveRequest, Resolved,
};
use agentroom_domain::engine::{Notification, Reconciliation};
use agentroom_domain::ids::{PrincipalId, RoomId};
use agentroom_domain::policy::RoomPolicy;
use agentroom_domain::state::RoomState;
use agentroom_ports::{Notifier, NotifyError, OperationRecord, ReconcileError, Reconciler};
use anyhow::Context;

use crate::policies::PolicyFiles;
use async_trait::async_trait;

/// The capability catalog a Room policy names: its `[capabilities] files` and `bindings`,
/// paths relative to the policy folder (`base`, over the built-in shipped files). Every
/// problem names its file, line and field.
pub(crate) fn catalog(
    policies: &[&RoomPolicy],
    base: &PolicyFiles,
) -> Result<Catalog, ResourceErrors> {
    let mut names: Vec<&str> = Vec::new();
    for policy in policies {
        for file in policy
            .capability_files()
            .iter()
            .chain(policy.binding_files())
        {
            if !names.contains(&file.as_str()) {
                names.push(file);
            }
        }
    }
    let mut texts = Vec::new();
    let mut unreadable = Vec::new();
    for name in names {
        match base.read(name) {
            Ok((file, text)) => texts.push((file.display().to_string(), text)),
            Err(e) => unreadable.push(ResourceError::unreadable(name, e.to_string())),
        }
    }
    match Catalog::parse(texts.iter().map(|(n, t)| (n.as_str(), t.as_str()))) {
        Ok(catalog) if unreadable.is_empty() => Ok(catalog),
        Ok(_) => Err(ResourceErrors::from_errors(unreadable)),
        Err(found) => {
            unreadable.extend(found.into_errors());
            Err(ResourceErrors::from_errors(unreadable))
        }
    }
}

/// The capability catalog of the Rooms a host coordinates: the files every admitted Room's
/// policy names ([`catalog`]), reloaded whole when a Room created while the host runs names
/// files it has not loaded, and swapped under a lock, so every decision resolves against one
/// consistent catalog.
pub(crate) struct HostCatalog {
    base: PolicyFiles,
    loaded: RwLock<Loaded>,
}

struct Loaded {
    /// The distinct policies whose files are loaded.
    policies: Vec<RoomPolicy>,
    catalog: Arc<Catalog>,
}

impl HostCatalog {
    /// The catalog of `policies`' files, relative to `base`.
    pub(crate) fn load(
        policies: &[&RoomPolicy],
        base: &PolicyFiles,
    ) -> Result<Self, ResourceErrors> {
        let catalog = catalog(policies, base)?;
        let mut distinct: Vec<RoomPolicy> = Vec::new();
        for policy in policies {
            if !distinct.contains(policy) {
                distinct.push((*policy).clone());
            }
        }
        Ok(Self {
            base: base.clone(),
            loaded: RwLock::new(Loaded {
                policies: distinct,
                catalog: Arc::new(catalog),
            }),
        })
    }

    fn current(&self) -> Arc<Catalog> {
        Arc::clone(
            &self
                .loaded
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .catalog,
        )
    }

    /// Adds the files `policy` names; on a bad file the catalog stays as it was.
    fn extend(&self, policy: &RoomPolicy) -> Result<(), ResourceErrors> {
        let mut loaded = self.loaded.write().unwrap_or_else(PoisonError::into_inner);
        let names = |p: &RoomPolicy| {
            p.capability_files()
                .iter()
                .chain(p.binding_files())
                .cloned()
                .collect::<Vec<_>>()
        };
        let wanted = names(policy);
        let known: Vec<String> = loaded.policies.iter().flat_map(names).collect();
        if loaded.policies.contains(policy) || wanted.iter().all(|f| known.contains(f)) {
            return Ok(());
        }
        let mut policies: Vec<&RoomPolicy> = loaded.policies.iter().collect();
        policies.push(policy);
        let catalog = catalog(&policies, &self.base)?;
        loaded.policies.push(policy.clone());
        loaded.catalog = Arc::new(catalog);
        Ok(())
    }
}

impl CapabilityCatalog for HostCatalog {
    fn resolve(&self, request: ResolveRequest<'_>) -> Result<Resolved, Refusal> {
        self.current().resolve(request)
    }

    /// The capabilities of every policy loaded so far, from the catalog as it is now.
    fn describe(&self) -> Vec<CapabilityInfo> {
        self.current().describe()
    }
}

/// Admits a Room created while the host runs once the capability files its policy names are
/// loaded into the host's catalog.
pub(crate) struct CatalogAdmission(pub(crate) Arc<HostCatalog>);

impl Admission for CatalogAdmission {
    fn admit(&self, room: &RoomState) -> Result<(), String> {
        self.0
            .extend(room.policy())
            .map_err(|e| format!("the capability files named by its policy: {e}"))
    }
}

/// Which agents execute calls.
#[derive(Debug, Clone)]
pub(crate) enum AgentsChoice {
    /// Scripted agents playing a scenario file, journaling every execution to `journal`,
    /// synced before each call returns unless `synced` is false (`--journal-unsynced`).
    Scripted {
        scenario: PathBuf,
        journal: PathBuf,
        synced: bool,
    },
    /// OpenAI-compatible APIs, a model per role, configured by a providers file
    /// (`agentroom_agents::providers`; the single-model form too).
    OpenAi { config: PathBuf },
    /// None: every call is refused (nothing is sent, the reservation is released).
    None,
}

/// Reads the providers configuration at `path` (either form), naming the file in errors.
pub(crate) fn providers_config(path: &Path) -> anyhow::Result<ProvidersConfig> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    ProvidersConfig::from_toml(&text).with_context(|| format!("{}", path.display()))
}

/// The agents, the reconciler that goes with them, and what the models serve (empty unless
/// they are OpenAI-compatible APIs).
pub(crate) fn agents(
    choice: &AgentsChoice,
    prices: &PriceTable,
) -> anyhow::Result<(Agents, HostReconciler, Vec<Served>)> {
    match choice {
        AgentsChoice::Scripted {
            scenario,
            journal,
            synced,
        } => {
            let scenario = Scenario::from_file(scenario)
                .with_context(|| format!("scenario {}", scenario.display()))?;
            if let Some(dir) = journal.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("creating {}", dir.display()))?;
            }
            let journal = Journal::open(journal)?;
            let journal = Arc::new(if *synced { journal } else { journal.unsynced() });
            let scripted = Arc::new(Scripted::new(scenario).with_journal(journal));
            let reconciler = scripted
                .reconciler()
                .map_or(HostReconciler::Unknown, HostReconciler::Journal);
            Ok((scripted.agents(), reconciler, Vec::new()))
        }
        AgentsChoice::OpenAi { config: path } => {
            let providers = providers_config(path)?
                .build_from_env(prices)
                .with_context(|| format!("{}", path.display()))?;
            // The APIs keep no record this host can read: uncertain calls wait for an
            // operator (`agentroom operations resolve`).
            Ok((
                providers.agents().clone(),
                HostReconciler::Unknown,
                providers.served().to_vec(),
            ))
        }
        AgentsChoice::None => Ok((Agents::new(), HostReconciler::Unknown, Vec::new())),
    }
}

/// The hosted specialists (`serve --hosted`): their calls wait for the results their agent
/// hosts submit over the REST API, recorded in the journal at `journal` before use (D2).
/// `agents` execute every other call; the reconciler answers for hosted calls from the
/// journal and asks `reconciler` about the rest.
pub(crate) fn hosted(
    principals: &[PrincipalId],
    journal: &Path,
    agents: Agents,
    reconciler: HostReconciler,
) -> anyhow::Result<(Agents, HostReconciler, Option<Arc<HostedSpecialists>>)> {
    if principals.is_empty() {
        return Ok((agents, reconciler, None));
    }
    if let Some(dir) = journal.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let journal = Arc::new(
        Journal::open(journal)
            .with_context(|| format!("hosted specialists' journal {}", journal.display()))?,
    );
    let hosted = Arc::new(HostedSpecialists::new(principals.iter().cloned(), journal));
    let reconciler = HostReconciler::Hosted {
        hosted: hosted.reconciler(),
        others: Box::new(reconciler),
    };
    Ok((hosted.install(agents), reconciler, Some(hosted)))
}

/// Confirms uncertain calls from the scripted agents' journal, hosted specialists' calls from
/// theirs, or knows nothing (D2: they stay uncertain, reservation held, until an operator
/// resolves them).
#[derive(Debug, Clone)]
pub(crate) enum HostReconciler {
    Journal(JournalReconciler),
    Hosted {
        hosted: HostedReconciler,
        others: Box<HostReconciler>,
    },
    Unknown,
}

#[async_trait]
impl Reconciler for HostReconciler {
    async fn reconcile(
        &self,
        operation: &OperationRecord,
    ) -> Result<Option<Reconciliation>, ReconcileError> {
        match self {
            HostReconciler::Journal(journal) => journal.reconcile(operation).await,
            HostReconciler::Hosted { hosted, others } => {
                if hosted.covers(operation) {
                    hosted.reconcile(operation).await
                } else {
                    others.reconcile(operation).await
                }
            }
            HostReconciler::Unknown => Ok(None),
        }
    }
}

/// Writes each notification to the log (target `agentroom::notify`), then hands it to the
/// host's feed, which serves it to the REST API's subscribers once by its id (T5).
pub(crate) struct LogNotifier {
    next: Arc<dyn Notifier>,
}

impl LogNotifier {
    pub(crate) fn new(next: Arc<dyn Notifier>) -> Self {
        Self { next }
    }
}

#[async_trait]
impl Notifier for LogNotifier {
    async fn deliver(&self, room: &RoomId, notification: &Notification) -> Result<(), NotifyError> {
        tracing::info!(
            target: "agentroom::notify",
            %room,
            id = %notification.id,
            audience = ?notification.audience,
            text = %notification.text,
            "notification"
        );
        self.next.deliver(room, notification).await
    }
}
