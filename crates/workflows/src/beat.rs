//! One heartbeat per process per interval (issue 21, item 4): every call a runner holds a lease
//! for registers its lease here, and one loop extends them all with one store call
//! ([`WorkflowStore::heartbeat_all`], one write transaction) every heartbeat interval, then
//! tells each call its answer. So the write commits an idle process makes depend on the
//! interval, not on how many calls it has in flight.
//!
//! The loop runs while leases are registered and stops when the last one leaves; a call's
//! lease keeper (`crate::lease`) reads its answers and decides, as before, when to abort: a
//! fenced lease, a cancel asked for (D3), or no extension for a whole lease.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use agentroom_ports::domain::ids::OperationId;
use agentroom_ports::{Heartbeat, WorkflowStore};
use tokio::sync::watch;
use tokio::time::{Instant, sleep_until, timeout};

/// What the last heartbeat said about one lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Answer {
    /// No heartbeat answered for it yet.
    Pending,
    /// Extended, by a heartbeat sent at `at`; `cancel` when an abort was asked for (D3).
    Extended { at: Instant, cancel: bool },
    /// Its generation is no longer current.
    Fenced,
    /// The heartbeat failed or timed out.
    Missed(String),
}

struct Lease {
    generation: i64,
    answers: watch::Sender<Answer>,
}

#[derive(Default)]
struct Registry {
    leases: HashMap<OperationId, Lease>,
    /// Whether the loop runs.
    beating: bool,
}

/// The process's heartbeat: the leases it holds and the one loop that extends them.
pub(crate) struct Beater {
    store: Arc<dyn WorkflowStore>,
    lease: Duration,
    every: Duration,
    registry: Mutex<Registry>,
}

/// A lease registered with the [`Beater`]: its answers; it leaves the registry when dropped.
pub(crate) struct Registered {
    beater: Arc<Beater>,
    op: OperationId,
    generation: i64,
    pub(crate) answers: watch::Receiver<Answer>,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.beater.leave(self.op, self.generation);
    }
}

impl Beater {
    /// A beater over `store` extending leases by `lease` every `every`.
    pub(crate) fn new(store: Arc<dyn WorkflowStore>, lease: Duration, every: Duration) -> Self {
        Self {
            store,
            lease,
            every: every.max(Duration::from_millis(1)),
            registry: Mutex::new(Registry::default()),
        }
    }

    fn registry(&self) -> MutexGuard<'_, Registry> {
        self.registry.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers the lease of `op` at `generation`, extended from the next heartbeat on;
    /// starts the loop if it is not running. Must be called within a tokio runtime.
    pub(crate) fn join(self: &Arc<Self>, op: OperationId, generation: i64) -> Registered {
        let (sender, answers) = watch::channel(Answer::Pending);
        let start = {
            let mut registry = self.registry();
            registry.leases.insert(
                op,
                Lease {
                    generation,
                    answers: sender,
                },
            );
            !std::mem::replace(&mut registry.beating, true)
        };
        if start {
            tokio::spawn(Arc::clone(self).run());
        }
        Registered {
            beater: Arc::clone(self),
            op,
            generation,
            answers,
        }
    }

    /// Takes the lease of `op` at `generation` out of the registry (a later generation of
    /// the same operation, registered since, stays).
    fn leave(&self, op: OperationId, generation: i64) {
        let mut registry = self.registry();
        if registry
            .leases
            .get(&op)
            .is_some_and(|lease| lease.generation == generation)
        {
            registry.leases.remove(&op);
        }
    }

    /// The loop: one heartbeat every interval for every registered lease, until none is.
    async fn run(self: Arc<Self>) {
        let mut next = Instant::now() + self.every;
        loop {
            sleep_until(next).await;
            let started = Instant::now();
            next = started + self.every;
            let leases: Vec<(OperationId, i64)> = {
                let mut registry = self.registry();
                if registry.leases.is_empty() {
                    registry.beating = false;
                    return;
                }
                registry
                    .leases
                    .iter()
                    .map(|(op, lease)| (*op, lease.generation))
                    .collect()
            };
            // Given until a lease would run out, never less than one interval: cutting a
            // slow heartbeat off and sending the next at once only piles work on a server
            // that is slow already. Each call's keeper aborts on its own once its lease ran
            // out without an extension.
            let patience = self.lease.max(self.every);
            let answers = match timeout(patience, self.store.heartbeat_all(&leases, self.lease))
                .await
            {
                Ok(Ok(answers)) if answers.len() == leases.len() => answers
                    .into_iter()
                    .map(|answer| match answer {
                        Heartbeat::Extended { cancel } => Answer::Extended {
                            at: started,
                            cancel,
                        },
                        Heartbeat::Fenced => Answer::Fenced,
                    })
                    .collect(),
                Ok(Ok(answers)) => vec![
                    Answer::Missed(format!(
                        "the store answered {} of {} leases",
                        answers.len(),
                        leases.len()
                    ));
                    leases.len()
                ],
                Ok(Err(err)) => vec![Answer::Missed(err.to_string()); leases.len()],
                Err(_) => vec![Answer::Missed("the heartbeat timed out".to_owned()); leases.len()],
            };
            let registry = self.registry();
            for ((op, generation), answer) in leases.into_iter().zip(answers) {
                if let Some(lease) = registry.leases.get(&op)
                    && lease.generation == generation
                {
                    lease.answers.send_replace(answer);
                }
            }
        }
    }
}
