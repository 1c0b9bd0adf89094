//! The notification stream and the decision timeline of this process.
//!
//! [`Feed`] is the coordinator's [`Notifier`]: the outbox delivers each notification to it at
//! least once (T5) and it keeps each stable id once, in delivery order, per Room. A stream
//! (`GET /v1/rooms/{room}/notifications`) sends the caller's notifications from that log as
//! Server-Sent Events whose `id:` is the notification's stable id; a client that reconnects
//! with `Last-Event-ID` gets only those after it, so no id reaches it twice. A dropped
//! connection cancels nothing: the log is the coordinator's delivery target, not the
//! connection. The log lives in this process; after a restart the outbox's undelivered
//! notifications arrive again and a client resuming from an id the new process never saw
//! gets the whole new log.
//!
//! The decision timeline is every decision committed in this process (the coordinator's
//! `watch`), kept per Room for `GET …/objectives/{objective}/decisions`.

use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::sync::{Arc, Mutex, PoisonError};

use agentroom_coordinator::Committed;
use agentroom_domain::engine::{Audience, LogEntry, Notification};
use agentroom_domain::ids::{NotificationId, RoomId};
use agentroom_domain::room::Role;
use agentroom_ports::{Notifier, NotifyError};
use async_trait::async_trait;
use axum::Extension;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use tokio::sync::watch;

use super::auth::Caller;
use super::error::RestError;
use super::{Api, State as ApiState};
use crate::state::Stopping;

/// One committed decision's log entry, as the timeline keeps it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Decided {
    /// The Room revision after the commit.
    pub(crate) revision: i64,
    /// The kind of input decided.
    pub(crate) input: &'static str,
    /// The entry: objective, verdict, rule, message, time.
    #[serde(flatten)]
    pub(crate) entry: LogEntry,
}

#[derive(Default)]
struct RoomFeed {
    notifications: Vec<Notification>,
    seen: HashSet<NotificationId>,
    decisions: Vec<Decided>,
}

/// The notification log and decision timeline of this process (see the module docs).
pub struct Feed {
    rooms: Mutex<HashMap<RoomId, RoomFeed>>,
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
            changed,
        }
    }

    fn with_room<T>(&self, room: &RoomId, f: impl FnOnce(&mut RoomFeed) -> T) -> T {
        let mut rooms = self.rooms.lock().unwrap_or_else(PoisonError::into_inner);
        f(rooms.entry(room.clone()).or_default())
    }

    /// Keeps `committed`'s log entries on the timeline.
    pub fn record(&self, committed: &Committed) {
        self.with_room(&committed.room, |feed| {
            feed.decisions
                .extend(committed.log.iter().map(|entry| Decided {
                    revision: committed.revision.0,
                    input: committed.input,
                    entry: entry.clone(),
                }));
        });
    }

    /// The notifications delivered for `room`, each stable id once, in delivery order.
    pub fn notifications(&self, room: &RoomId) -> Vec<Notification> {
        self.with_room(room, |feed| feed.notifications.clone())
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

    /// The timeline of `room`.
    pub(crate) fn decisions(&self, room: &RoomId) -> Vec<Decided> {
        self.with_room(room, |feed| feed.decisions.clone())
    }

    /// The notifications of `room` after position `from`, and the next position.
    fn after(&self, room: &RoomId, from: usize) -> (Vec<Notification>, usize) {
        self.with_room(room, |feed| {
            let items = feed.notifications.get(from..).unwrap_or_default().to_vec();
            (items, feed.notifications.len())
        })
    }

    /// The position just after the notification `id` in `room`'s log (0 when unknown).
    fn position_after(&self, room: &RoomId, id: &str) -> usize {
        self.with_room(room, |feed| {
            feed.notifications
                .iter()
                .position(|n| n.id.to_string() == id)
                .map_or(0, |at| at + 1)
        })
    }
}

#[async_trait]
impl Notifier for Feed {
    async fn deliver(&self, room: &RoomId, notification: &Notification) -> Result<(), NotifyError> {
        let fresh = self.with_room(room, |feed| {
            if feed.seen.insert(notification.id) {
                feed.notifications.push(notification.clone());
                true
            } else {
                false
            }
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
    match &notification.audience {
        Audience::Owners => caller.roles.contains(&Role::Owner),
        Audience::Operators => caller.roles.contains(&Role::Operator),
        Audience::Reviewers => caller.roles.contains(&Role::Reviewer),
        Audience::Principal(principal) => principal == &caller.principal,
    }
}

#[derive(Serialize)]
struct Data<'a> {
    id: String,
    objective: Option<String>,
    text: &'a str,
}

/// `GET /v1/rooms/{room}/notifications`.
pub(crate) async fn stream(
    State(api): State<ApiState>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    stopping: Option<Extension<Stopping>>,
) -> Result<Response, RestError> {
    let mut position = match headers.get("last-event-id") {
        None => 0,
        Some(value) => {
            let id = value.to_str().map_err(|_| {
                RestError::BadRequest("Last-Event-ID is not visible ASCII".to_owned())
            })?;
            api.feed.position_after(&caller.room, id.trim())
        }
    };
    let mut changed = api.feed.changed.subscribe();
    let mut stopping = stopping.map(|Extension(Stopping(rx))| rx);
    let (sender, receiver) = tokio::sync::mpsc::channel::<Result<Event, Infallible>>(16);
    // The stream runs as its own task that ends when the client goes away, the server stops
    // or the feed is dropped; nothing else depends on it, so a dropped connection cancels
    // nothing.
    tokio::spawn(async move {
        loop {
            changed.borrow_and_update();
            let (items, next) = api.feed.after(&caller.room, position);
            position = next;
            for notification in items.iter().filter(|n| addressed_to(&caller, n)) {
                let data = Data {
                    id: notification.id.to_string(),
                    objective: notification.objective.map(|o| o.to_string()),
                    text: &notification.text,
                };
                let event = Event::default()
                    .id(notification.id.to_string())
                    .event("notification")
                    .json_data(&data);
                match event {
                    Ok(event) => {
                        if sender.send(Ok(event)).await.is_err() {
                            return;
                        }
                    }
                    Err(error) => tracing::warn!(%error, "notification not serializable"),
                }
            }
            let stop = async {
                match stopping.as_mut() {
                    Some(rx) => {
                        let _ = rx.wait_for(|stop| *stop).await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                result = changed.changed() => if result.is_err() { return },
                () = sender.closed() => return,
                () = stop => return,
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
