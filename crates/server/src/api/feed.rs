//! The notification stream and this process's decision counts.
//!
//! A stream (`GET /v1/rooms/{room}/notifications`) sends the caller's notifications as
//! Server-Sent Events whose `id:` is the notification's stable id, read from the store: the
//! outbox numbers each notification in the order it was delivered (T5), so a client that
//! reconnects with `Last-Event-ID` — to this process, after a restart, or to another process
//! on the same database — gets only those delivered after it. An id the Room's outbox does not
//! hold starts the stream from the first notification.
//!
//! Live updates come from [`Feed`], the coordinator's [`Notifier`]: the outbox hands it each
//! notification (at least once; it keeps each stable id once) just before marking it
//! delivered, and a stream pushes it at once. A stream never sends one stable id twice: what
//! it pushed live is skipped when the store lists it, and what the store listed is skipped
//! when it comes live. Notifications another process delivers arrive by polling the store. A
//! dropped connection cancels nothing: the outbox is the coordinator's delivery target, not
//! the connection.
//!
//! [`Feed`] also keeps this process's committed decisions (the coordinator's `watch`) for the
//! metrics; the decision log of `GET …/objectives/{objective}/decisions` is the store's
//! history.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::convert::Infallible;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use agentroom_coordinator::Committed;
use agentroom_domain::engine::Notification;
use agentroom_domain::ids::{NotificationId, PrincipalId, RoomId};
use agentroom_domain::room::Permission;
use agentroom_ports::{Notifier, NotifyError, OutboxPosition};
use async_trait::async_trait;
use axum::Extension;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use tokio::sync::watch;

use super::auth::Caller;
use super::{Api, State as ApiState};
use crate::error::ApiError;
use crate::state::Stopping;

/// How many delivered notifications of a Room the live log keeps. The log only speeds
/// streams up (the store holds every delivered notification, and streams poll it), so older
/// ones can go; a redelivery of one (the outbox delivers at least once, and retries soon) is
/// still recognized while it is kept.
const LIVE_LOG: usize = 4_096;

#[derive(Default)]
struct RoomFeed {
    /// The newest notifications handed to this process, at most [`LIVE_LOG`].
    notifications: VecDeque<Notification>,
    /// How many were handed over in all: the position after the newest.
    handed: usize,
    /// The ids of those kept.
    seen: HashSet<NotificationId>,
    /// The decision log entries this process committed, counted by verdict and rule.
    decisions: BTreeMap<(String, String), u64>,
}

/// One open notification stream's place in its principal's share.
struct StreamPlace {
    streams: Arc<Mutex<HashMap<(RoomId, PrincipalId), usize>>>,
    key: (RoomId, PrincipalId),
}

impl Drop for StreamPlace {
    fn drop(&mut self) {
        let mut streams = self.streams.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(open) = streams.get_mut(&self.key) {
            *open = open.saturating_sub(1);
            if *open == 0 {
                streams.remove(&self.key);
            }
        }
    }
}

/// Calls counted as their decisions were committed by this process.
#[derive(Debug, Clone, Default)]
pub(crate) struct CallCounts {
    /// Calls reserved and dispatched, by role.
    pub(crate) reserved: BTreeMap<&'static str, u64>,
    /// Call outcomes decided, by the kind of input.
    pub(crate) outcomes: BTreeMap<&'static str, u64>,
}

/// The notification log and decision timeline of this process (see the module docs).
pub struct Feed {
    rooms: Mutex<HashMap<RoomId, RoomFeed>>,
    /// The calls this process decided, counted as they were committed (for the metrics).
    calls: Mutex<CallCounts>,
    /// Open notification streams per Room and principal.
    streams: Arc<Mutex<HashMap<(RoomId, PrincipalId), usize>>>,
    /// The most open streams one principal of one Room may hold.
    streams_per_principal: usize,
    /// Bumped on every new notification, so streams wake up.
    changed: watch::Sender<u64>,
}

impl Default for Feed {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Feed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Feed").finish_non_exhaustive()
    }
}

impl Feed {
    /// An empty feed.
    pub fn new() -> Self {
        let (changed, _) = watch::channel(0);
        Self {
            rooms: Mutex::new(HashMap::new()),
            calls: Mutex::new(CallCounts::default()),
            streams: Arc::new(Mutex::new(HashMap::new())),
            streams_per_principal: crate::config::DEFAULT_STREAMS_PER_PRINCIPAL,
            changed,
        }
    }

    /// This feed with at most `limit` open notification streams per principal of a Room
    /// (at least one); beyond it a new stream is answered 429 naming the limit, and other
    /// principals and Rooms are not affected.
    pub fn with_streams_per_principal(mut self, limit: usize) -> Self {
        self.streams_per_principal = limit.max(1);
        self
    }

    /// A place for one more stream of `principal` in `room`, if it holds fewer than the
    /// limit; freed when the returned guard is dropped.
    fn open_stream(&self, room: &RoomId, principal: &PrincipalId) -> Result<StreamPlace, ApiError> {
        let key = (room.clone(), principal.clone());
        let mut streams = self.streams.lock().unwrap_or_else(PoisonError::into_inner);
        let open = streams.entry(key.clone()).or_insert(0);
        if *open >= self.streams_per_principal {
            tracing::info!(%room, %principal, limit = self.streams_per_principal, "a stream above the principal's share is refused");
            return Err(ApiError::TooManyStreams {
                limit: self.streams_per_principal,
            });
        }
        *open += 1;
        Ok(StreamPlace {
            streams: Arc::clone(&self.streams),
            key,
        })
    }

    fn with_room<T>(&self, room: &RoomId, f: impl FnOnce(&mut RoomFeed) -> T) -> T {
        let mut rooms = self.rooms.lock().unwrap_or_else(PoisonError::into_inner);
        f(rooms.entry(room.clone()).or_default())
    }

    /// Counts `committed`'s log entries, the calls it reserved (by role) and, when it
    /// decided a call's outcome, that outcome (by the kind of input).
    pub fn record(&self, committed: &Committed) {
        {
            let mut calls = self.calls.lock().unwrap_or_else(PoisonError::into_inner);
            for effect in &committed.effects {
                if let agentroom_domain::engine::Effect::ReserveAndCall(request) = effect {
                    *calls.reserved.entry(request.role.as_str()).or_insert(0) += 1;
                }
            }
            if committed.input.starts_with("call_") || committed.input == "reconciled" {
                *calls.outcomes.entry(committed.input).or_insert(0) += 1;
            }
        }
        self.with_room(&committed.room, |feed| {
            for entry in &committed.log {
                let verdict = serde_json::to_value(entry.verdict)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default();
                let rule = entry.rule.map(|r| r.to_string()).unwrap_or_default();
                *feed.decisions.entry((verdict, rule)).or_insert(0) += 1;
            }
        });
    }

    /// The notifications of `room` the live log keeps, each stable id once, in delivery
    /// order.
    pub fn notifications(&self, room: &RoomId) -> Vec<Notification> {
        self.with_room(room, |feed| feed.notifications.iter().cloned().collect())
    }

    /// The Rooms this feed has seen a decision or notification of.
    pub(crate) fn rooms(&self) -> Vec<RoomId> {
        self.rooms
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .keys()
            .cloned()
            .collect()
    }

    /// How many decision log entries this process committed in `room`, by verdict and rule
    /// (for the metrics).
    pub(crate) fn decisions(&self, room: &RoomId) -> BTreeMap<(String, String), u64> {
        self.with_room(room, |feed| feed.decisions.clone())
    }

    /// The calls this process reserved, by role, and the call outcomes it decided, by the
    /// kind of input (`call_returned`, `call_uncertain`, …).
    pub(crate) fn calls(&self) -> CallCounts {
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The notifications of `room` handed over after position `from` that the live log still
    /// keeps, and the next position.
    fn after(&self, room: &RoomId, from: usize) -> (Vec<Notification>, usize) {
        self.with_room(room, |feed| {
            let first = feed.handed - feed.notifications.len();
            let skip = from.saturating_sub(first);
            let items = feed.notifications.iter().skip(skip).cloned().collect();
            (items, feed.handed)
        })
    }

    /// How many notifications of `room` this process has been handed.
    fn len(&self, room: &RoomId) -> usize {
        self.with_room(room, |feed| feed.handed)
    }
}

#[async_trait]
impl Notifier for Feed {
    async fn deliver(&self, room: &RoomId, notification: &Notification) -> Result<(), NotifyError> {
        let fresh = self.with_room(room, |feed| {
            if !feed.seen.insert(notification.id) {
                return false;
            }
            feed.notifications.push_back(notification.clone());
            feed.handed += 1;
            if feed.notifications.len() > LIVE_LOG
                && let Some(oldest) = feed.notifications.pop_front()
            {
                feed.seen.remove(&oldest.id);
            }
            true
        });
        if fresh {
            self.changed.send_modify(|n| *n += 1);
        }
        Ok(())
    }
}

/// Feeds the timeline from the coordinator's committed decisions while the API lives.
pub(crate) fn follow(api: &Arc<Api>) {
    let mut committed = api.rooms.watch();
    let feed = Arc::downgrade(&api.feed);
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => {
            runtime.spawn(async move {
                while let Some(decision) = committed.recv().await {
                    let Some(feed) = feed.upgrade() else { return };
                    feed.record(&decision);
                }
            });
        }
        Err(_) => tracing::warn!("no Tokio runtime: the decision timeline stays empty"),
    }
}

/// Whether the caller is in a notification's audience (checked again at delivery, T3).
fn addressed_to(caller: &Caller, notification: &Notification) -> bool {
    caller
        .stored
        .state
        .is_addressed_to(&caller.principal, &notification.audience)
}

#[derive(Serialize)]
struct Data<'a> {
    id: String,
    objective: Option<String>,
    text: &'a str,
}

/// How often a stream also polls the store, for notifications other processes delivered.
const POLL: Duration = Duration::from_secs(2);

/// How often a stream checks its token and its principal's roles again: a revoked or expired
/// token, or a membership that no longer reads objectives, ends it; a changed role narrows
/// what it sends from then on (issue 17).
const RECHECK: Duration = Duration::from_millis(500);

/// The caller as its token and the Room say now; `None` when the stream must end (the token
/// no longer authenticates, or its principal may no longer read objectives). A store that
/// cannot answer keeps the caller as it was: the next check asks again.
async fn recheck(api: &Api, token: &str, caller: &Caller) -> Option<Caller> {
    match super::authorize_token(
        api,
        token,
        Some(caller.room.as_str()),
        Permission::ObjectiveRead,
    )
    .await
    {
        Ok(now) => Some(now),
        Err(
            refusal @ (ApiError::Unauthenticated | ApiError::Forbidden(_) | ApiError::NotFound(_)),
        ) => {
            tracing::info!(principal = %caller.principal, %refusal, "a notification stream's caller may no longer read it; the stream ends");
            None
        }
        Err(error) => {
            tracing::warn!(%error, "re-checking a stream's token failed; checking again later");
            Some(caller.clone())
        }
    }
}

/// Notifications read from the store per round trip.
const BATCH: usize = 64;

/// Where a stream resumes after the notification `id`: its delivery position; 0 (from the
/// first) when the Room's outbox does not hold it. One being delivered right now (pushed live,
/// not yet marked) is waited for briefly.
async fn resume_after(api: &Api, room: &RoomId, id: &str) -> Result<i64, ApiError> {
    let Ok(id) = id.parse::<NotificationId>() else {
        return Ok(0);
    };
    for _ in 0..20 {
        match api.rooms.outbox_position(room, id).await? {
            Some(OutboxPosition::Delivered(position)) => return Ok(position),
            None => return Ok(0),
            Some(OutboxPosition::Undelivered) => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    tracing::warn!(%id, "Last-Event-ID names a notification still undelivered; resuming from the first");
    Ok(0)
}

fn sse_event(notification: &Notification) -> Option<Event> {
    let data = Data {
        id: notification.id.to_string(),
        objective: notification.objective.map(|o| o.to_string()),
        text: &notification.text,
    };
    match Event::default()
        .id(notification.id.to_string())
        .event("notification")
        .json_data(&data)
    {
        Ok(event) => Some(event),
        Err(error) => {
            tracing::warn!(%error, "notification not serializable");
            None
        }
    }
}

/// `GET /v1/rooms/{room}/notifications`.
pub(crate) async fn stream(
    State(api): State<ApiState>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    stopping: Option<Extension<Stopping>>,
) -> Result<Response, ApiError> {
    // The guard authenticated this very header.
    let token = super::auth::bearer(&headers)
        .ok_or(ApiError::Unauthenticated)?
        .to_owned();
    let place = api.feed.open_stream(&caller.room, &caller.principal)?;
    let mut caller = caller;
    let mut position = match headers.get("last-event-id") {
        None => 0,
        Some(value) => {
            let id = value.to_str().map_err(|_| {
                ApiError::BadRequest("Last-Event-ID is not visible ASCII".to_owned())
            })?;
            resume_after(&api, &caller.room, id.trim()).await?
        }
    };
    let mut changed = api.feed.changed.subscribe();
    // Live pushes: only notifications this process delivers from now on.
    let mut live = api.feed.len(&caller.room);
    let mut stopping = stopping.map(|Extension(Stopping(rx))| rx);
    let (sender, receiver) = tokio::sync::mpsc::channel::<Result<Event, Infallible>>(16);
    // The stream runs as its own task that ends when the client goes away, the server stops,
    // the store fails or the feed is dropped; nothing else depends on it, so a dropped
    // connection cancels nothing.
    tokio::spawn(async move {
        // Held while the stream is open: the principal's share.
        let _place = place;
        let mut rechecks = tokio::time::interval(RECHECK);
        rechecks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // Pushed live, not yet listed by the store.
        let mut pushed: HashSet<NotificationId> = HashSet::new();
        // Listed by the store in this round, maybe still to come live.
        let mut listed: HashSet<NotificationId> = HashSet::new();
        loop {
            changed.borrow_and_update();
            loop {
                let page = match api.rooms.delivered(&caller.room, position, BATCH).await {
                    Ok(page) => page,
                    Err(error) => {
                        tracing::warn!(%error, "reading delivered notifications; closing the stream");
                        return;
                    }
                };
                let more = page.len() == BATCH;
                for delivered in page {
                    position = delivered.position;
                    let notification = delivered.notification;
                    if pushed.remove(&notification.id) {
                        continue;
                    }
                    listed.insert(notification.id);
                    if addressed_to(&caller, &notification)
                        && let Some(event) = sse_event(&notification)
                        && sender.send(Ok(event)).await.is_err()
                    {
                        return;
                    }
                }
                if !more {
                    break;
                }
            }
            // Every notification the store listed was handed to the feed before it was marked
            // delivered, so it is in the live log by now: after this, `listed` is done with.
            let (items, next) = api.feed.after(&caller.room, live);
            live = next;
            for notification in items {
                // Listed by the store this round, or pushed before: a notification the live
                // log dropped and then took again (an outbox retry after a failed mark)
                // comes back at a new position, and is still sent once (T5).
                if listed.contains(&notification.id) || !pushed.insert(notification.id) {
                    continue;
                }
                if addressed_to(&caller, &notification)
                    && let Some(event) = sse_event(&notification)
                    && sender.send(Ok(event)).await.is_err()
                {
                    return;
                }
            }
            listed.clear();
            let poll = tokio::time::sleep(POLL);
            tokio::pin!(poll);
            loop {
                let stop = async {
                    match stopping.as_mut() {
                        Some(rx) => {
                            let _ = rx.wait_for(|stop| *stop).await;
                        }
                        None => std::future::pending::<()>().await,
                    }
                };
                tokio::select! {
                    result = changed.changed() => if result.is_err() { return } else { break },
                    () = &mut poll => break,
                    () = sender.closed() => return,
                    () = stop => return,
                    _ = rechecks.tick() => match recheck(&api, &token, &caller).await {
                        Some(now) => caller = now,
                        None => return,
                    },
                }
            }
        }
    });
    let events = futures_util::stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|event| (event, receiver))
    });
    Ok(Sse::new(events)
        .keep_alive(KeepAlive::default())
        .into_response())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn note(n: u128) -> Notification {
        Notification {
            id: NotificationId::from_uuid(uuid::Uuid::from_u128(n)),
            audience: agentroom_domain::engine::Audience::Owners,
            objective: None,
            text: format!("note {n}"),
        }
    }

    #[tokio::test]
    async fn t5_the_live_log_keeps_the_newest_notifications_and_positions_go_on() {
        let feed = Feed::new();
        let room = RoomId::parse("lab").unwrap();
        let total = LIVE_LOG + 10;
        for n in 0..total {
            feed.deliver(&room, &note(n as u128)).await.unwrap();
        }
        // A redelivery of one still kept changes nothing (T5: each stable id once).
        feed.deliver(&room, &note(total as u128 - 1)).await.unwrap();
        assert_eq!(feed.len(&room), total);
        let kept = feed.notifications(&room);
        assert_eq!(kept.len(), LIVE_LOG, "bounded");
        assert_eq!(kept[0].id, note(10).id, "the oldest went first");
        // A stream behind the log gets what is kept (the store has the rest); one in the
        // window gets exactly what came after it.
        let (items, next) = feed.after(&room, 0);
        assert_eq!((items.len(), next), (LIVE_LOG, total));
        let (items, next) = feed.after(&room, total - 3);
        assert_eq!(next, total);
        assert_eq!(
            items.iter().map(|n| n.id).collect::<Vec<_>>(),
            (total - 3..total)
                .map(|n| note(n as u128).id)
                .collect::<Vec<_>>()
        );
        assert!(feed.after(&room, total).0.is_empty());
    }
}
