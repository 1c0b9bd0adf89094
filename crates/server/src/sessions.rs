//! The A2E HTTP sessions: each one a `planning::Session` with an inbox processed in arrival
//! order, a bounded outbound queue that `/stream` drains, and the idle expiry that removes
//! sessions nobody uses.
//!
//! Delivery: a reply is queued the moment the session answers, whether or not a stream is
//! connected, and is removed from the queue only when a stream takes it. A reconnect therefore
//! resumes with what was not taken yet. One stream reads a session at a time: a new
//! connection ends the previous one, which is how a client's reconnect replaces a stream
//! whose connection died without the server noticing.
//!
//! Bound: a session holds at most `buffer` messages, counting both the accepted messages not
//! yet answered and the replies not yet taken. A message is admitted only when it fits, so
//! every admitted message's reply has room and none is ever dropped.
//!
//! Identity: each session carries whom its messages act for ([`Acting`]), read by its
//! processor before each message; the handshake that binds an unbound session changes it
//! before the next message is taken, so every message is answered as the binding its
//! position in the order gives. Unbound sessions (made without a header, so by anyone) may
//! fill at most half of `max_sessions`, so they can never crowd out sessions of token
//! holders.

use std::collections::{HashMap, VecDeque};
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use futures_util::{FutureExt, Stream};
use tokio::sync::{Notify, watch};

use agentroom_domain::ids::PrincipalId;
use agentroom_planning::{RoomId, Session, Step};

use crate::error::ApiError;
use crate::handshake::Acting;

/// Every session of one router.
#[derive(Debug)]
pub(crate) struct Sessions {
    map: Mutex<HashMap<String, Arc<Slot>>>,
    buffer: usize,
    max_sessions: usize,
    /// The most sessions one principal of one Room may hold.
    per_principal: usize,
    idle_timeout: Duration,
}

impl Sessions {
    pub(crate) fn new(
        buffer: usize,
        max_sessions: usize,
        per_principal: usize,
        idle_timeout: Duration,
    ) -> Self {
        Self {
            map: Mutex::new(HashMap::new()),
            buffer,
            max_sessions,
            per_principal,
            idle_timeout,
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Arc<Slot>>> {
        // Every critical section leaves the map whole; a panic elsewhere does not poison it.
        self.map.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers a new session whose messages act for `acting`; when the bound is reached,
    /// expires idle sessions first. An unbound session is refused, like one above the bound,
    /// when unbound sessions already fill half of it.
    pub(crate) fn create(&self, session: Session, acting: Acting) -> Result<Arc<Slot>, ApiError> {
        let unbound_limit = acting.is_unbound().then(|| (self.max_sessions / 2).max(1));
        let owner = acting.principal().cloned();
        let room = session.room().clone();
        let slot = Arc::new(Slot::new(session, acting, self.buffer));
        let mut map = self.lock();
        let held = |map: &HashMap<String, Arc<Slot>>| {
            owner.as_ref().map_or(0, |owner| held_by(map, &room, owner))
        };
        let full = |map: &HashMap<String, Arc<Slot>>| {
            map.len() >= self.max_sessions
                || unbound_limit.is_some_and(|limit| unbound(map) >= limit)
                || held(map) >= self.per_principal
        };
        if full(&map) {
            expire(&mut map, Instant::now(), self.idle_timeout);
        }
        // A principal's share first: one principal filling it is refused alone (429), and
        // never fills the table for another principal or Room.
        if held(&map) >= self.per_principal {
            tracing::info!(
                room = %room,
                principal = ?owner,
                limit = self.per_principal,
                "a principal's sessions fill its share; one more is refused"
            );
            return Err(ApiError::TooManySessionsForPrincipal {
                limit: self.per_principal,
            });
        }
        if map.len() >= self.max_sessions {
            return Err(ApiError::TooManySessions {
                limit: self.max_sessions,
            });
        }
        if let Some(limit) = unbound_limit
            && unbound(&map) >= limit
        {
            tracing::info!(
                limit,
                "unbound sessions fill their share; one more is refused"
            );
            return Err(ApiError::TooManySessions { limit });
        }
        let id = slot.session.id().to_owned();
        if map.contains_key(&id) {
            // Session ids are 128 random bits; a repeat means the ids are not random (a
            // test ambient), and reusing one would hand a client someone else's session.
            return Err(ApiError::internal(format!(
                "the fresh session id {id} is already in use; the service's ids are not random"
            )));
        }
        map.insert(id, Arc::clone(&slot));
        tracing::debug!(session = %slot.session.id(), sessions = map.len(), "session created");
        Ok(slot)
    }

    /// The live session `id` acting in `room`. A session of another Room is as unknown as
    /// one that never existed.
    pub(crate) fn get(&self, id: &str, room: &RoomId) -> Result<Arc<Slot>, ApiError> {
        let map = self.lock();
        match map.get(id) {
            Some(slot) if slot.session.room() == room => Ok(Arc::clone(slot)),
            _ => Err(ApiError::UnknownSession),
        }
    }

    /// The live session `id` acting in `room` as `principal` (a request with a bearer
    /// header): a session is used only by the principal it acts for. Another principal's
    /// session, or one no handshake has bound yet, is as unknown as one that never existed
    /// (404), and nothing about it changes.
    pub(crate) fn get_as(
        &self,
        id: &str,
        room: &RoomId,
        principal: &PrincipalId,
    ) -> Result<Arc<Slot>, ApiError> {
        let slot = self.get(id, room)?;
        if slot.lock().acting.principal() != Some(principal) {
            tracing::info!(%principal, "a session of another principal was asked for");
            return Err(ApiError::UnknownSession);
        }
        Ok(slot)
    }

    /// How many live sessions act for `principal` in `room`.
    pub(crate) fn held_by(&self, room: &RoomId, principal: &PrincipalId) -> usize {
        held_by(&self.lock(), room, principal)
    }

    /// The most sessions one principal of one Room may hold.
    pub(crate) fn per_principal(&self) -> usize {
        self.per_principal
    }

    /// The live session `id` acting in `room`, for a request without an `Authorization`
    /// header: a session made with the header needs it (401, as before sessions could be
    /// bound by their handshake); one of another Room, or none, is unknown (404).
    pub(crate) fn get_without_header(
        &self,
        id: &str,
        room: &RoomId,
    ) -> Result<Arc<Slot>, ApiError> {
        let slot = self.get(id, room)?;
        if slot.made_with_header {
            return Err(ApiError::Unauthenticated);
        }
        Ok(slot)
    }

    fn remove(&self, id: &str) {
        let removed = self.lock().remove(id);
        if removed.is_some() {
            tracing::debug!(session = %id, "session ended");
        }
    }

    /// Removes the sessions idle for the timeout; returns how many.
    pub(crate) fn sweep(&self) -> usize {
        let mut map = self.lock();
        expire(&mut map, Instant::now(), self.idle_timeout)
    }

    /// How often the background sweep runs: a few times per timeout.
    pub(crate) fn sweep_interval(&self) -> Duration {
        (self.idle_timeout / 4).clamp(Duration::from_millis(10), Duration::from_secs(30))
    }
}

/// How many sessions act for `principal` in `room` (bound by header or handshake).
fn held_by(map: &HashMap<String, Arc<Slot>>, room: &RoomId, principal: &PrincipalId) -> usize {
    map.values()
        .filter(|slot| {
            slot.session.room() == room && slot.lock().acting.principal() == Some(principal)
        })
        .count()
}

/// How many sessions wait for the handshake that binds them.
fn unbound(map: &HashMap<String, Arc<Slot>>) -> usize {
    map.values()
        .filter(|slot| slot.lock().acting.is_unbound())
        .count()
}

fn expire(map: &mut HashMap<String, Arc<Slot>>, now: Instant, idle: Duration) -> usize {
    let before = map.len();
    map.retain(|_, slot| !slot.expire_if_idle(now, idle));
    let expired = before - map.len();
    if expired > 0 {
        tracing::debug!(expired, sessions = map.len(), "idle sessions expired");
    }
    expired
}

/// Runs the idle sweep every `interval` until the sessions are dropped with their router.
pub(crate) async fn sweep_forever(sessions: Weak<Sessions>, interval: Duration) {
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let Some(sessions) = sessions.upgrade() else {
            return;
        };
        sessions.sweep();
    }
}

/// One session and its queues.
#[derive(Debug)]
pub(crate) struct Slot {
    /// The session as `POST /session` made it: its id, Room and reply numbering.
    session: Session,
    /// Whether `POST /session` carried the bearer header: then every request for the session
    /// must too.
    made_with_header: bool,
    buffer: usize,
    state: Mutex<SlotState>,
    /// Woken on every change a stream may care about: a reply queued, the session closed,
    /// a newer stream connected.
    changed: Notify,
}

#[derive(Debug)]
struct SlotState {
    /// Admitted messages not yet taken by the processor, in arrival order.
    inbox: VecDeque<Bytes>,
    /// Whether a processor task is running for this session.
    processing: bool,
    /// Admitted messages whose step has not finished (the inbox and the one in hand).
    unanswered: usize,
    /// Replies not yet taken by a stream, in the order they were produced.
    outbound: VecDeque<String>,
    /// Streams connected now (0 or 1, briefly 2 while a reconnect replaces a stream).
    streams: usize,
    /// Bumped by each new stream; a stream whose number is not current ends.
    stream_generation: u64,
    /// The last send, stream connect or stream disconnect.
    last_active: Instant,
    /// `shutdown` was processed, or the session expired: nothing more is admitted.
    closed: bool,
    /// Whom the session's messages act for; changed only by the handshake that binds it.
    acting: Acting,
}

impl Slot {
    fn new(session: Session, acting: Acting, buffer: usize) -> Self {
        Self {
            session,
            made_with_header: matches!(acting, Acting::Bound { .. }),
            buffer,
            state: Mutex::new(SlotState {
                inbox: VecDeque::new(),
                processing: false,
                unanswered: 0,
                outbound: VecDeque::new(),
                streams: 0,
                stream_generation: 0,
                last_active: Instant::now(),
                closed: false,
                acting,
            }),
            changed: Notify::new(),
        }
    }

    /// The session's id (the one `POST /session` returns and the handshake echoes).
    pub(crate) fn id(&self) -> &str {
        self.session.id()
    }

    fn lock(&self) -> MutexGuard<'_, SlotState> {
        // Every critical section leaves the state whole; a panic elsewhere does not poison it.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Admits one message, or refuses it whole when the session is full or closed. The
    /// message is processed after every message admitted before it.
    pub(crate) fn admit(
        self: &Arc<Self>,
        message: Bytes,
        sessions: &Arc<Sessions>,
    ) -> Result<(), ApiError> {
        let mut state = self.lock();
        if state.closed {
            return Err(ApiError::UnknownSession);
        }
        if state.unanswered + state.outbound.len() >= self.buffer {
            return Err(ApiError::SessionBufferFull { limit: self.buffer });
        }
        state.inbox.push_back(message);
        state.unanswered += 1;
        state.last_active = Instant::now();
        if !state.processing {
            state.processing = true;
            drop(state);
            tokio::spawn(process(Arc::clone(self), Arc::clone(sessions)));
        }
        Ok(())
    }

    /// Queues an answer the transport made itself (the `too_large` error) when it fits.
    pub(crate) fn answer_directly(&self, line: String) {
        let mut state = self.lock();
        if state.closed || state.unanswered + state.outbound.len() >= self.buffer {
            tracing::debug!(session = %self.id(), "no room to queue a transport error");
            return;
        }
        state.outbound.push_back(line);
        state.last_active = Instant::now();
        drop(state);
        self.changed.notify_waiters();
    }

    /// The A2E error line for a message above the size limit, with its `req_id` if known.
    pub(crate) fn too_large(&self, bytes: usize, req_id: Option<&str>) -> String {
        crate::body::too_large_line(&self.session, bytes, req_id)
    }

    fn expire_if_idle(&self, now: Instant, idle: Duration) -> bool {
        let mut state = self.lock();
        let idle_for = now.saturating_duration_since(state.last_active);
        let expired = state.streams == 0 && state.unanswered == 0 && idle_for >= idle;
        if expired {
            state.closed = true;
            tracing::debug!(session = %self.id(), ?idle_for, "session expired");
        }
        expired
    }

    /// Connects a stream: it yields every reply not yet taken, then each new one, and ends
    /// when the session closes and its queue is empty, when a newer stream connects, or
    /// when the server stops.
    pub(crate) fn stream(
        self: &Arc<Self>,
        stopping: Option<watch::Receiver<bool>>,
    ) -> impl Stream<Item = String> + Send + 'static {
        let generation = {
            let mut state = self.lock();
            state.stream_generation += 1;
            state.streams += 1;
            state.last_active = Instant::now();
            state.stream_generation
        };
        // A newer stream replaces an older one: wake the older so it ends.
        self.changed.notify_waiters();
        let reader = StreamReader {
            slot: Arc::clone(self),
            generation,
            stopping,
        };
        futures_util::stream::unfold(reader, |mut reader| async move {
            let line = reader.next().await?;
            Some((line, reader))
        })
    }
}

/// Takes a session's messages from its inbox one at a time, in arrival order, and queues
/// each reply. Runs while the inbox has messages; `admit` starts it again.
async fn process(slot: Arc<Slot>, sessions: Arc<Sessions>) {
    loop {
        let message = {
            let mut state = slot.lock();
            match state.inbox.pop_front() {
                Some(message) => message,
                None => {
                    state.processing = false;
                    return;
                }
            }
        };
        // Messages are taken one at a time, so the binding read here is the one every
        // message before this one left.
        let acting = slot.lock().acting.clone();
        // A panic in the service must not leave the session waiting forever for a reply
        // that will not come: it closes the session (its id then answers 404) instead.
        let (step, bound) = AssertUnwindSafe(acting.answer(&slot.session, &message))
            .catch_unwind()
            .await
            .unwrap_or_else(|_| {
                tracing::error!(session = %slot.id(), "a message panicked; the session is closed");
                (Step::Close, None)
            });
        // A handshake that would bind the session to a principal holding its whole share of
        // sessions is refused like a session above it: `unauthorized` naming the limit, and
        // the session stays unbound.
        let (step, bound) = match bound {
            Some(bound) => match bound.principal() {
                Some(principal)
                    if sessions.held_by(slot.session.room(), principal)
                        >= sessions.per_principal() =>
                {
                    tracing::info!(%principal, "a handshake would bind a principal above its share of sessions");
                    let req_id = agentroom_planning::wire::decode(&message)
                        .map(|inbound| inbound.req_id)
                        .unwrap_or_default();
                    let refusal = agentroom_planning::wire::ProtocolError::unauthorized(
                        &req_id,
                        format!(
                            "auth_token's principal holds {} sessions in this Room, the most one \
                             principal may; end one with `shutdown` first",
                            sessions.per_principal()
                        ),
                    );
                    (slot.session.answer_error(refusal), None)
                }
                _ => (step, Some(bound)),
            },
            None => (step, None),
        };
        let mut state = slot.lock();
        if let Some(bound) = bound {
            state.acting = bound;
        }
        state.unanswered = state.unanswered.saturating_sub(1);
        match step {
            Step::Reply(line) => state.outbound.push_back(line),
            Step::Silent => {}
            Step::Close => {
                // `shutdown` ends this session only. What was sent after it is ignored
                // (as the SDK host does); replies already queued are still streamed, and
                // then the stream ends.
                state.closed = true;
                state.unanswered = state.unanswered.saturating_sub(state.inbox.len());
                state.inbox.clear();
                state.processing = false;
                drop(state);
                sessions.remove(slot.id());
                slot.changed.notify_waiters();
                return;
            }
        }
        drop(state);
        slot.changed.notify_waiters();
    }
}

/// One connected stream's place: its session and its generation. Dropping it (the client
/// went away, or the stream ended) marks the session as having one stream fewer.
struct StreamReader {
    slot: Arc<Slot>,
    generation: u64,
    stopping: Option<watch::Receiver<bool>>,
}

impl StreamReader {
    async fn next(&mut self) -> Option<String> {
        loop {
            let changed = self.slot.changed.notified();
            tokio::pin!(changed);
            // Registered before the state is read, so a change between the read and the
            // wait still wakes this stream.
            changed.as_mut().enable();
            {
                let mut state = self.slot.lock();
                if state.stream_generation != self.generation {
                    return None;
                }
                if let Some(line) = state.outbound.pop_front() {
                    return Some(line);
                }
                if state.closed {
                    return None;
                }
            }
            match self.stopping.as_mut() {
                Some(stopping) => {
                    tokio::select! {
                        () = &mut changed => {}
                        // Ends when the server stops, and also if the signal's sender is
                        // gone (the server future was dropped).
                        _ = stopping.wait_for(|stop| *stop) => return None,
                    }
                }
                None => changed.await,
            }
        }
    }
}

impl Drop for StreamReader {
    fn drop(&mut self) {
        let mut state = self.slot.lock();
        state.streams = state.streams.saturating_sub(1);
        state.last_active = Instant::now();
    }
}
