//! The loops a long-running host (`agentroom serve`) runs around the coordinator: on every
//! tick, for each Room it coordinates, accept the events persisted since (T1: resolved by id
//! from the store, whoever persisted them: another process, `agentroom event post`, the REST
//! API), deliver the outbox (T5) and, every few ticks, run recovery again (D2), so that calls
//! another process left behind when it died are classified once their leases expire. Several
//! processes may run these loops on one database: acceptance is committed once per event and
//! every decision with compare-and-swap, so no event is accepted twice and no task dispatched
//! twice (D1, B7).
//!
//! The Rooms coordinated are either named at the start, or every Room on the store
//! ([`Coordinated::every`]): the store's Rooms are listed on every pass, so a Room created
//! while the loops run (`agentroom room create`) is coordinated from the next pass on, once the
//! host admits it (e.g. its capability files loaded).
//!
//! The loops stop when the stop signal fires, between two passes; the calls in flight are
//! [`Coordinator::shutdown`]'s (a grace, then their leases released).

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::time::Duration;

use agentroom_ports::RoomSignal;
use agentroom_ports::domain::ids::RoomId;
use agentroom_ports::domain::state::RoomState;

use crate::{Coordinator, CoordinatorError};

/// How often the loops pass.
#[derive(Debug, Clone)]
pub struct BackgroundConfig {
    poll: Duration,
    recover_every: u32,
    fallback: Duration,
}

impl BackgroundConfig {
    /// A pass every `poll`; recovery every `recover_every` × `poll` (at least every `poll`).
    /// On a store with a change feed, a pass over every Room every 25 × `poll` instead, and
    /// over the Rooms the feed names as it names them.
    pub fn new(poll: Duration, recover_every: u32) -> Self {
        Self {
            poll,
            recover_every: recover_every.max(1),
            fallback: poll.saturating_mul(25),
        }
    }

    /// On a store with a change feed: how often to pass over every Room anyway (a missed
    /// notice, work waiting on a pool other Rooms freed, B8).
    pub fn with_fallback(mut self, fallback: Duration) -> Self {
        self.fallback = fallback.max(self.poll);
        self
    }

    /// The time between two passes.
    pub fn poll(&self) -> Duration {
        self.poll
    }
}

impl Default for BackgroundConfig {
    /// A pass every 200 ms, recovery every 10th pass (about every 2 s).
    fn default() -> Self {
        Self::new(Duration::from_millis(200), 10)
    }
}

/// Decides whether this host coordinates a Room the loops found on the store, and gets it
/// ready (the capability files its policy names, loaded into the catalog). Asked once per new
/// Room, and again on later passes while it refuses (a file may get fixed).
pub trait Admission: Send + Sync {
    /// Ready to coordinate `room`, or why not (logged once per distinct reason).
    fn admit(&self, room: &RoomState) -> Result<(), String>;
}

/// Rooms listed from the store a page at a time.
const ROOM_PAGE: usize = 256;

/// The Rooms the loops coordinate.
pub struct Coordinated {
    admission: Option<Box<dyn Admission>>,
    rooms: BTreeSet<RoomId>,
    refused: BTreeMap<RoomId, String>,
}

impl Coordinated {
    /// Exactly these Rooms.
    pub fn named(rooms: impl IntoIterator<Item = RoomId>) -> Self {
        Self {
            admission: None,
            rooms: rooms.into_iter().collect(),
            refused: BTreeMap::new(),
        }
    }

    /// Every Room on the store, `known` ones (ready already) and those `admission` admits
    /// as the loops find them, including Rooms created while they run.
    pub fn every(known: impl IntoIterator<Item = RoomId>, admission: Box<dyn Admission>) -> Self {
        Self {
            admission: Some(admission),
            rooms: known.into_iter().collect(),
            refused: BTreeMap::new(),
        }
    }

    /// The Rooms coordinated now, by id.
    pub fn rooms(&self) -> Vec<RoomId> {
        self.rooms.iter().cloned().collect()
    }

    /// Lists the store's Rooms and admits the new ones (when coordinating every Room).
    /// Returns the Rooms admitted now.
    pub async fn refresh<S: agentroom_ports::RoomStore + ?Sized>(
        &mut self,
        store: &S,
    ) -> Result<Vec<RoomId>, CoordinatorError> {
        let Some(admission) = &self.admission else {
            return Ok(Vec::new());
        };
        let mut found = Vec::new();
        let mut after: Option<RoomId> = None;
        loop {
            let page = store.rooms(after.as_ref(), ROOM_PAGE).await?;
            let last = page.len() < ROOM_PAGE;
            after = page.last().cloned();
            found.extend(page.into_iter().filter(|room| !self.rooms.contains(room)));
            if last {
                break;
            }
        }
        let mut admitted = Vec::new();
        for room in found {
            // Gone since it was listed: nothing to coordinate.
            let Some(stored) = store.load(&room).await? else {
                continue;
            };
            match admission.admit(&stored.state) {
                Ok(()) => {
                    tracing::info!(%room, "a new room: coordinating it");
                    self.refused.remove(&room);
                    self.rooms.insert(room.clone());
                    admitted.push(room);
                }
                Err(why) => {
                    if self.refused.get(&room) != Some(&why) {
                        tracing::warn!(%room, why, "a new room cannot be coordinated yet");
                        self.refused.insert(room, why);
                    }
                }
            }
        }
        Ok(admitted)
    }
}

/// Aborts a task when dropped: the feed's forwarder ends with the loop that reads it.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Why the loop passes next.
enum Wake {
    /// Over every Room: the first pass, the fallback period, or notices missed.
    Full,
    /// Over the Rooms a change feed named.
    Rooms(Vec<RoomId>),
    /// Only the outbox: this process committed (or recovery ran).
    Committed,
}

/// What one pass did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Pass {
    /// Events accepted.
    pub accepted: usize,
    /// Notifications delivered.
    pub delivered: usize,
    /// Rooms whose work waiting on their pool went ahead (B8).
    pub resumed: usize,
}

impl Coordinator {
    /// One pass: accept the pending events of each of `rooms`, then deliver the outbox. A
    /// Room that fails is logged and the others still pass; the first error is returned.
    pub async fn pass(&self, rooms: &[RoomId]) -> Result<Pass, CoordinatorError> {
        let mut pass = Pass::default();
        let mut first = None;
        let full = self.shared.pool_scan.full_pass();
        for room in rooms {
            match self.accept_pending(room).await {
                Ok(n) => pass.accepted += n,
                Err(err) => {
                    tracing::warn!(%room, %err, "accepting pending events failed");
                    first.get_or_insert(err);
                }
            }
            // B8: work that waits on a pool other Rooms have freed since goes ahead. Only the
            // Rooms known to draw on a pool are read each pass; every Room now and then.
            if !full && !self.shared.pool_scan.pooled(room) {
                continue;
            }
            match self.resume_on_pool(room).await {
                Ok(resumed) => pass.resumed += usize::from(resumed),
                Err(err) => {
                    tracing::warn!(%room, %err, "resuming work waiting on its pool failed");
                    first.get_or_insert(err);
                }
            }
        }
        match self.deliver_notifications().await {
            Ok(n) => pass.delivered = n,
            Err(err) => {
                tracing::warn!(%err, "delivering the outbox failed");
                first.get_or_insert(err);
            }
        }
        match first {
            Some(err) => Err(err),
            None => Ok(pass),
        }
    }

    /// Runs [`Coordinator::pass`] over `rooms` (refreshed from the store before each full
    /// pass when it coordinates every Room), with recovery every `recover_every` × `poll`,
    /// until `stop` resolves. Without a change feed, a full pass every `poll`. With one (issue
    /// 21: PostgreSQL's LISTEN/NOTIFY), a pass over the Rooms it names as soon as it names
    /// them, a full pass every `fallback` (and at once when the feed says it missed notices),
    /// and the outbox delivered after this process's own commits, at most every `poll`: idle
    /// Rooms cost no reads. Errors of a pass are logged and the next pass tries again (a
    /// database that restarts comes back). When `stop` fires the loop returns after its
    /// pass; the calls running in this process are left to [`Coordinator::shutdown`], which
    /// gives them a grace and releases the leases of those still running, so the next
    /// recovery finds them at once (D2, D3). Without it they keep running while the runtime
    /// lives.
    pub async fn run_background(
        &self,
        mut rooms: Coordinated,
        config: &BackgroundConfig,
        stop: impl Future<Output = ()>,
    ) {
        let mut stop = std::pin::pin!(stop);
        let feed = match self.shared.store.listen().await {
            Ok(feed) => feed,
            Err(err) => {
                tracing::warn!(%err, "no room change feed; polling every room");
                None
            }
        };
        // The feed runs in a task of its own and hands its signals over a channel, whose
        // receive is cancel-safe: the loop's select never drops a notice half read. The task
        // ends with the loop.
        let (forward, mut signals) = tokio::sync::mpsc::channel::<RoomSignal>(64);
        let forwarder = feed.map(|mut feed| {
            tracing::info!(fallback = ?config.fallback, "listening for room changes");
            AbortOnDrop(tokio::spawn(async move {
                loop {
                    let signal = feed.next().await;
                    if forward.send(signal).await.is_err() {
                        return;
                    }
                }
            }))
        });
        let mut listening = forwarder.is_some();
        let recovery_every = config.poll.saturating_mul(config.recover_every);
        let started = tokio::time::Instant::now();
        let mut last_recovery = started;
        let mut last_full = started;
        let mut next = Wake::Full;
        loop {
            let now = tokio::time::Instant::now();
            if now.duration_since(last_recovery) >= recovery_every {
                last_recovery = now;
                match self.recover().await {
                    Ok(report) if report != Default::default() => {
                        tracing::info!(?report, "recovery pass");
                    }
                    Ok(_) => {}
                    Err(err) => tracing::warn!(%err, "recovery pass failed"),
                }
            }
            let passed = match next {
                Wake::Full => {
                    last_full = now;
                    if let Err(err) = rooms.refresh(&*self.shared.store).await {
                        tracing::warn!(%err, "listing the rooms failed; trying again");
                    }
                    self.pass(&rooms.rooms()).await
                }
                Wake::Rooms(changed) => {
                    if changed.iter().any(|room| !rooms.rooms.contains(room))
                        && let Err(err) = rooms.refresh(&*self.shared.store).await
                    {
                        tracing::warn!(%err, "listing the rooms failed; trying again");
                    }
                    let ours: Vec<RoomId> = changed
                        .into_iter()
                        .filter(|room| rooms.rooms.contains(room))
                        .collect();
                    self.pass(&ours).await
                }
                // B8: a commit of this process may have freed a pool: the work of the Rooms
                // drawing on one that waits for it goes ahead now, not at the next notice for
                // its Room or the fallback (a decision's commit notifies no other process).
                Wake::Committed => {
                    let pooled: Vec<RoomId> = self
                        .shared
                        .pool_scan
                        .rooms()
                        .into_iter()
                        .filter(|room| rooms.rooms.contains(room))
                        .collect();
                    self.pass(&pooled).await
                }
            };
            match passed {
                Ok(pass) if pass != Pass::default() => tracing::debug!(?pass, "pass"),
                Ok(_) => {}
                Err(err) => tracing::warn!(%err, "pass failed; trying again"),
            }
            if !listening {
                tokio::select! {
                    () = &mut stop => return,
                    () = tokio::time::sleep(config.poll) => {}
                }
                next = Wake::Full;
                continue;
            }
            let full_at = last_full + config.fallback;
            let recovery_at = last_recovery + recovery_every;
            let local_at = tokio::time::Instant::now() + config.poll;
            next = tokio::select! {
                () = &mut stop => return,
                () = tokio::time::sleep_until(full_at) => Wake::Full,
                // Recovery is due: run it, then pass over nothing but the outbox.
                () = tokio::time::sleep_until(recovery_at) => Wake::Committed,
                signal = signals.recv() => match signal {
                    Some(RoomSignal::Changed(changed)) => Wake::Rooms(changed),
                    Some(RoomSignal::Missed) => Wake::Full,
                    // The feed's task ended (it never does by itself): poll from now on.
                    None => {
                        tracing::warn!("the room change feed stopped; polling every room");
                        listening = false;
                        Wake::Full
                    }
                },
                () = async {
                    self.shared.commits.notified().await;
                    // At most one delivery pass per `poll` for this process's own commits.
                    tokio::time::sleep_until(local_at).await;
                } => Wake::Committed,
            };
        }
    }
}
