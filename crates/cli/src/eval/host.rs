//! The evaluation's host: one coordinator for every Room this process runs, as `serve` runs
//! many Rooms, with each Room's own scripted agents and journal behind it. A call is routed to
//! the agents of the Room its operation belongs to (read from the store), and an uncertain
//! call to that Room's journal: a recovery pass this host runs for one Room's crash never asks
//! another scenario's agents.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, PoisonError, RwLock};

use agentroom_agents::scripted::{Journal, JournalReconciler, Scripted};
use agentroom_coordinator::{Coordinator, CoordinatorConfig, Store};
use agentroom_domain::catalog::MemoryCatalog;
use agentroom_domain::engine::{CallRequest, Reconciliation};
use agentroom_domain::ids::{PrincipalId, RoomId};
use agentroom_ports::{CallContext, OperationRecord, ReconcileError, Reconciler, SystemClock};
use agentroom_workflows::{Abort, CallOutcome, Provider, RunnerConfig};
use anyhow::{anyhow, bail};
use async_trait::async_trait;

use super::corpus::EvalScenario;
use super::play::LEASE;

/// One Room's agents.
struct RoomAgents {
    provider: Arc<dyn Provider>,
    /// `None` for models, whose APIs keep no record this host can read.
    reconciler: Option<JournalReconciler>,
}

/// Routes each call and each reconciliation to the agents of its operation's Room.
pub(crate) struct Agents {
    store: Arc<dyn Store>,
    rooms: RwLock<HashMap<RoomId, RoomAgents>>,
    /// The models every Room uses instead of its scenario's scripted agents (`--openai`).
    models: Option<Arc<dyn Provider>>,
}

impl Agents {
    fn new(store: Arc<dyn Store>, models: Option<Arc<dyn Provider>>) -> Self {
        Self {
            store,
            rooms: RwLock::default(),
            models,
        }
    }

    /// Puts `scenario`'s scripted agents behind `room`, journaling to `journal` (reopened
    /// after a crash: the script resumes where the journal says it was).
    pub(crate) fn register(
        &self,
        room: &RoomId,
        scenario: &EvalScenario,
        journal: &Path,
    ) -> anyhow::Result<()> {
        if let Some(models) = &self.models {
            let agents = RoomAgents {
                provider: Arc::clone(models),
                reconciler: None,
            };
            self.rooms
                .write()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(room.clone(), agents);
            return Ok(());
        }
        let journal = Arc::new(Journal::open(journal)?);
        let scripted = Arc::new(Scripted::new(scenario.agents.clone()).with_journal(journal));
        let reconciler = scripted
            .reconciler()
            .ok_or_else(|| anyhow!("the scripted agents keep no journal"))?;
        let agents = RoomAgents {
            provider: Arc::new(scripted.agents()),
            reconciler: Some(reconciler),
        };
        self.rooms
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(room.clone(), agents);
        Ok(())
    }

    fn provider(&self, room: &RoomId) -> Option<Arc<dyn Provider>> {
        self.rooms
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(room)
            .map(|a| Arc::clone(&a.provider))
    }

    fn reconciler(&self, room: &RoomId) -> Option<JournalReconciler> {
        self.rooms
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(room)
            .and_then(|a| a.reconciler.clone())
    }
}

#[async_trait]
impl Provider for Agents {
    async fn call(
        &self,
        request: &CallRequest,
        context: &CallContext,
        abort: Abort,
    ) -> CallOutcome {
        let room = match self.store.operation(request.op).await {
            Ok(Some(record)) => record.room,
            Ok(None) => {
                return CallOutcome::Refused {
                    reason: format!("operation {} is not stored", request.op),
                };
            }
            Err(e) => {
                return CallOutcome::NotSent {
                    retry_after: None,
                    reason: format!("reading operation {}: {e}", request.op),
                };
            }
        };
        match self.provider(&room) {
            Some(provider) => provider.call(request, context, abort).await,
            None => CallOutcome::Refused {
                reason: format!("this evaluation runs no agents for room {room}"),
            },
        }
    }
}

#[async_trait]
impl Reconciler for Agents {
    async fn reconcile(
        &self,
        operation: &OperationRecord,
    ) -> Result<Option<Reconciliation>, ReconcileError> {
        match self.reconciler(&operation.room) {
            Some(reconciler) => reconciler.reconcile(operation).await,
            // Not this process's Room: nobody here knows; it stays uncertain.
            None => Ok(None),
        }
    }
}

/// OpenAI-compatible models serving every role (`eval --openai CONFIG`), in place of the
/// scenarios' scripted agents: the Rooms' quotes must cover them (B6).
pub(crate) struct Models {
    pub(crate) provider: Arc<dyn Provider>,
    pub(crate) served: Option<agentroom_domain::state::Served>,
    pub(crate) quotes: agentroom_domain::state::Quotes,
}

impl Models {
    /// The models a providers configuration names (the file `serve --openai` reads), priced
    /// by the policy files under `policies` (the built-in ones when it does not exist).
    pub(crate) fn open(config: &Path, policies: &Path) -> anyhow::Result<Self> {
        let dir = policies.exists().then(|| policies.to_path_buf());
        let prices = crate::policies::load(&crate::policies::PolicyFiles::new(dir)?)?.prices;
        let (agents, _, served) = crate::host::agents(
            &crate::host::AgentsChoice::OpenAi {
                config: config.to_path_buf(),
            },
            &prices,
        )?;
        Ok(Self {
            provider: Arc::new(agents),
            served: crate::serve::served_to_rooms(&served, &[]),
            quotes: agentroom_agents::providers::quotes_needed(&served),
        })
    }
}

/// The host: the coordinator and the agents behind it.
pub(crate) struct Host {
    pub(crate) coordinator: Coordinator,
    pub(crate) agents: Arc<Agents>,
}

impl Host {
    /// A host of `runner` over `store`, with a catalog binding every capability the corpus's
    /// Rooms bind (one provider per capability across the corpus).
    pub(crate) fn new(
        store: Arc<dyn Store>,
        runner: &str,
        corpus: &[EvalScenario],
        models: Option<&Models>,
    ) -> anyhow::Result<Self> {
        let mut bindings: HashMap<&str, &PrincipalId> = HashMap::new();
        for scenario in corpus {
            let Some(spec) = scenario.agents.room() else {
                bail!("{}: no [room]", scenario.name);
            };
            for (capability, provider) in &spec.bindings {
                if let Some(other) = bindings.insert(capability, provider)
                    && other != provider
                {
                    bail!(
                        "{}: binds `{capability}` to {provider}, another scenario to {other}: \
                         the evaluation's host has one catalog",
                        scenario.name
                    );
                }
            }
        }
        let catalog = bindings
            .into_iter()
            .fold(MemoryCatalog::new(), |c, (capability, provider)| {
                c.bind(capability, provider)
            });
        let agents = Arc::new(Agents::new(
            Arc::clone(&store),
            models.map(|m| Arc::clone(&m.provider)),
        ));
        let mut builder = Coordinator::builder(
            store,
            CoordinatorConfig::new(RunnerConfig::new(runner, LEASE)),
        )
        .provider(Arc::clone(&agents) as Arc<dyn Provider>)
        .reconciler(Arc::clone(&agents) as Arc<dyn Reconciler>)
        .clock(Arc::new(SystemClock))
        .catalog(Arc::new(catalog));
        if let Some(served) = models.and_then(|m| m.served.clone()) {
            builder = builder.served(served);
        }
        Ok(Self {
            coordinator: builder.build(),
            agents,
        })
    }
}
