//! The call loop, in one place: a call a decision reserved runs as its own task; the runner
//! says what became of it and this turns each call event into the Room's next decision.
//!
//! - T3 at the call sink: between the commit that reserved a call and the moment it is sent,
//!   its specialist or reviewer may have lost the role (another process, an operator). The
//!   domain checked at dispatch; the sink asks the domain again, against the Room as stored
//!   now, just before the provider is called. A refused call never ran: settled at zero.
//! - A returned call's receipt is committed with the decision it settles, fenced on its
//!   generation, in one commit (DESIGN.md "A durable call", step 4). When that commit cannot
//!   be made (the store failed, the host is stopping, the Room did not expect it now) the
//!   receipt is recorded alone and handed over again, by this task or the next recovery (D2).
//! - A call a control change aborted (D3) comes back uncertain with what the reconciler
//!   confirmed at once, so a resumed objective goes on and a cancelled one closes, never a
//!   micro lost.
//! - Recovery's evidence (receipts, confirmations, operators' resolutions) is decided the
//!   same way, one call event at a time.

use std::collections::BTreeMap;
use std::sync::Arc;

use agentroom_ports::domain::authority::required_role;
use agentroom_ports::domain::engine::{CallEvent, CallFailure, FailureKind};
use agentroom_ports::domain::ids::{OperationId, RoomId};
use agentroom_ports::{CallContext, CommitError, Receipt};
use agentroom_workflows::{Executed, Leased, Recovery, RecoveryReport, Runner, WorkflowError};

use crate::actor::Guard;
use crate::context;
use crate::ids::IdSeed;
use crate::{CoordinatorError, Outcome, Shared};

impl Shared {
    /// Decides call event `event` of operation `op` in `room`, with `receipt` (not recorded
    /// yet, at its lease generation) in the same commit. Ids derive from the operation and the
    /// kind of event, so the Room decides each outcome once however often it is delivered.
    pub(crate) async fn call_event(
        self: &Arc<Self>,
        room: &RoomId,
        op: OperationId,
        event: CallEvent,
        receipt: Option<(i64, Receipt)>,
    ) -> Result<Outcome, CoordinatorError> {
        let seed = IdSeed::Outcome(op, event.kind());
        let input = event.clone().input(op);
        let guard = Guard::Outcome {
            op,
            event: Box::new(event),
            receipt: receipt.map(Box::new),
        };
        self.submit(room, input, seed, guard).await
    }

    /// Decides `events` in order; `true` when the last was taken.
    async fn call_events(
        self: &Arc<Self>,
        room: &RoomId,
        op: OperationId,
        events: Vec<CallEvent>,
    ) -> bool {
        let mut taken = false;
        for event in events {
            let kind = event.kind();
            taken = match self.call_event(room, op, event, None).await {
                Ok(_) => true,
                Err(err) => {
                    tracing::warn!(%op, kind, %err, "the room did not take the call event; recovery hands it over again");
                    false
                }
            };
        }
        taken
    }

    /// What `call` sees of the Room (C1), assembled from the Room as stored now; or why it
    /// may not be sent now: its principal no longer holds the role it is called in (T3), or
    /// the store could not be read (nothing was sent; the provider is not to blame, but the
    /// call could not reach it).
    async fn prepare(self: &Arc<Self>, call: &Leased) -> Result<CallContext, CallFailure> {
        let unreachable = |cause: String| CallFailure::new(FailureKind::Unreachable, cause);
        let request = &call.request;
        let loaded = self
            .runner
            .retrying("load", || self.stored_now(&call.room))
            .await;
        // Nothing was sent: the call is settled at zero and its work open again.
        let room = match loaded {
            Ok(Some(room)) => room,
            Ok(None) => {
                return Err(CallFailure::new(
                    FailureKind::Refused,
                    format!("room {} is not in the store", call.room),
                ));
            }
            Err(err) => return Err(unreachable(format!("checking authorization: {err}"))),
        };
        // The reasoner is the Room's own: no role to hold.
        if let Some(role) = required_role(request.role) {
            let principal = request.principal.as_ref();
            if !room.state.may_be_called(principal, request.role) {
                let who = principal.map_or_else(|| "nobody".to_owned(), ToString::to_string);
                tracing::warn!(%who, ?role, op = %request.op, "T3: not sent");
                return Err(CallFailure::new(
                    FailureKind::Unauthorized,
                    format!("T3: {who} holds no role {role:?} in the room now"),
                ));
            }
        }
        let assembled = self
            .runner
            .retrying("read context", || {
                context::assemble(self, &call.room, &room.state, request)
            })
            .await;
        assembled.map_err(|err| unreachable(format!("reading the call's context: {err}")))
    }

    /// Runs `call` and has the Room decide what became of it.
    async fn run_call(self: &Arc<Self>, call: &Leased) -> Result<(), WorkflowError> {
        let executed = match self.prepare(call).await {
            Err(failure) => Executed::NotSent(failure),
            Ok(context) => {
                // The Room shows the call waits for its provider (once per call); the
                // outcome that ends the call is decided after it, in the Room's order.
                let on_wait = {
                    let shared = Arc::clone(self);
                    let (room, op) = (call.room.clone(), call.op());
                    move |cause: String| {
                        let shared = Arc::clone(&shared);
                        let room = room.clone();
                        tokio::spawn(async move {
                            let event = CallEvent::Waiting { cause };
                            if let Err(err) = shared.call_event(&room, op, event, None).await {
                                tracing::info!(%op, %err, "the room did not record that the call waits");
                            }
                        });
                    }
                };
                self.runner
                    .execute_watched(call, &context, &on_wait)
                    .await?
            }
        };
        let (room, op) = (&call.room, call.op());
        match executed {
            Executed::Returned(receipt) => {
                let event = receipt.event();
                let committed = self
                    .call_event(room, op, event, Some((call.generation, receipt.clone())))
                    .await;
                match committed {
                    Ok(Outcome::Decided { .. }) => return Ok(()),
                    Err(CoordinatorError::Commit(CommitError::Fenced { .. })) => {
                        tracing::warn!(%op, "receipt fenced: another runner holds the operation; result dropped");
                        return Ok(());
                    }
                    Ok(Outcome::AlreadyDone | Outcome::AlreadyDecided { .. }) => {}
                    Err(err) => {
                        tracing::warn!(%op, %err, "the receipt was not committed with its decision: recording it alone");
                    }
                }
                if self.runner.record_alone(call, &receipt).await? {
                    self.call_events(room, op, vec![receipt.event()]).await;
                }
            }
            Executed::Fenced => {}
            other => {
                self.call_events(room, op, other.events()).await;
            }
        }
        Ok(())
    }

    /// Decides what a recovery pass found due, each Room its own in the order found, up to
    /// [`RECOVERING_ROOMS`] Rooms at once, and completes its report.
    pub(crate) async fn settle_recovered(
        self: &Arc<Self>,
        mut recovery: Recovery,
    ) -> RecoveryReport {
        // Each Room decides what is due to it in the order found; Rooms decide concurrently
        // (issue 21: recovery is not one operation at a time across the whole store).
        let due = recovery.take_due();
        let mut by_room: BTreeMap<RoomId, Vec<usize>> = BTreeMap::new();
        for (n, d) in due.iter().enumerate() {
            by_room.entry(d.record.room.clone()).or_default().push(n);
        }
        let mut rooms = tokio::task::JoinSet::new();
        let mut taken = vec![false; due.len()];
        for (room, found) in by_room {
            // At most RECOVERING_ROOMS at once, so that a store of many Rooms does not queue
            // more decisions on the connection pool than it can serve before its timeout.
            if rooms.len() >= RECOVERING_ROOMS {
                Self::decided(rooms.join_next().await, &mut taken);
            }
            let shared = Arc::clone(self);
            let events: Vec<_> = found
                .iter()
                .map(|&n| (n, due[n].record.op(), due[n].events.clone()))
                .collect();
            rooms.spawn(async move {
                let mut decided = Vec::with_capacity(events.len());
                for (n, op, events) in events {
                    decided.push((n, shared.call_events(&room, op, events).await));
                }
                decided
            });
        }
        while !rooms.is_empty() {
            Self::decided(rooms.join_next().await, &mut taken);
        }
        // Reported in the order found, whichever Room finished first.
        for (d, taken) in due.iter().zip(taken) {
            recovery.taken(d, taken);
        }
        recovery.report
    }

    /// Notes what one Room's recovery task decided. What a Room could not decide (its task
    /// ended early) stays: the next pass hands its evidence over again.
    fn decided(
        joined: Option<Result<Vec<(usize, bool)>, tokio::task::JoinError>>,
        taken: &mut [bool],
    ) {
        match joined {
            Some(Ok(decided)) => {
                for (n, was) in decided {
                    if let Some(slot) = taken.get_mut(n) {
                        *slot = was;
                    }
                }
            }
            Some(Err(err)) => tracing::warn!(%err, "a Room's recovery task ended early"),
            None => {}
        }
    }
}

/// How many Rooms decide what recovery found at once.
const RECOVERING_ROOMS: usize = 16;

/// Runs one leased call as its own task, counted in flight until the Room decided it.
pub(crate) fn dispatch(shared: &Arc<Shared>, call: Leased) {
    shared.in_flight.send_modify(|n| *n += 1);
    shared.running.started(call.op(), call.generation);
    let op = call.op();
    let task = tokio::spawn({
        let shared = Arc::clone(shared);
        async move {
            if let Err(err) = shared.run_call(&call).await {
                tracing::warn!(%op, %err, "call failed; recovery will find it");
            }
            shared.running.ended(op);
            shared.in_flight.send_modify(|n| *n = n.saturating_sub(1));
        }
    });
    // A graceful stop aborts the calls still running after its grace (`shutdown`).
    shared.running.attach(op, task.abort_handle());
}

/// The runner of a coordinator's calls.
pub(crate) fn runner(shared: &crate::CoordinatorBuilder) -> Runner {
    Runner::new(
        shared.store.clone(),
        Arc::clone(&shared.provider),
        Arc::clone(&shared.reconciler),
        shared.config.runner.clone(),
    )
}
