//! T3 at the call sink: between the commit that reserved a call and the moment it is sent,
//! its specialist or reviewer may have lost the role (another process, an operator). The
//! domain checked at dispatch; this checks again against the Room as stored now, just before
//! the provider is called. A refused call never ran: the runner settles it at zero.

use std::sync::Arc;

use agentroom_ports::RoomStore;
use agentroom_ports::domain::authority::required_role;
use agentroom_ports::domain::engine::CallRequest;
use agentroom_ports::domain::ids::RoomId;
use agentroom_workflows::{Abort, CallOutcome, Provider};
use async_trait::async_trait;

/// A provider that sends a call only while its principal still holds the role it is called
/// in.
pub(crate) struct Authorized<S: ?Sized, P: ?Sized> {
    room: RoomId,
    store: Arc<S>,
    inner: Arc<P>,
}

impl<S: ?Sized, P: ?Sized> Authorized<S, P> {
    pub(crate) fn new(room: RoomId, store: Arc<S>, inner: Arc<P>) -> Self {
        Self { room, store, inner }
    }
}

#[async_trait]
impl<S, P> Provider for Authorized<S, P>
where
    S: RoomStore + ?Sized + 'static,
    P: Provider + ?Sized + 'static,
{
    async fn call(&self, request: &CallRequest, abort: Abort) -> CallOutcome {
        if let (Some(principal), Some(role)) = (&request.principal, required_role(request.role)) {
            match self.store.load(&self.room).await {
                Ok(Some(room)) if room.state.may_be_called(Some(principal), request.role) => {}
                Ok(_) => {
                    tracing::warn!(%principal, ?role, op = %request.op, "T3: not sent");
                    return CallOutcome::Refused {
                        reason: format!("T3: {principal} no longer holds the role {role:?}"),
                    };
                }
                Err(err) => {
                    return CallOutcome::NotSent {
                        retry_after: None,
                        reason: format!("checking authorization: {err}"),
                    };
                }
            }
        }
        self.inner.call(request, abort).await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use agentroom_ports::domain::engine::CallBrief;
    use agentroom_ports::domain::ids::{OperationId, PrincipalId, Timestamp};
    use agentroom_ports::domain::money::UsdMicros;
    use agentroom_ports::domain::objective::ObservedRevisions;
    use agentroom_ports::domain::policy::{AccessPolicy, RoomPolicy};
    use agentroom_ports::domain::state::{Quotes, RoomSetup, RoomState};
    use agentroom_ports::memory::MemoryStore;

    use agentroom_ports::domain::state::CallRole;

    use super::*;

    /// Remembers the calls that reached it.
    #[derive(Default)]
    struct Reached(Mutex<Vec<OperationId>>);

    #[async_trait]
    impl Provider for Reached {
        async fn call(&self, request: &CallRequest, _abort: Abort) -> CallOutcome {
            self.0.lock().unwrap().push(request.op);
            CallOutcome::Refused {
                reason: "a test provider".into(),
            }
        }
    }

    fn call(n: u128, role: CallRole, principal: Option<&str>) -> CallRequest {
        CallRequest {
            op: OperationId::from_uuid(uuid::Uuid::from_u128(n)),
            role,
            principal: principal.map(|p| PrincipalId::parse(p).unwrap()),
            objective: None,
            observed: ObservedRevisions::default(),
            reservation: UsdMicros::new(1_000),
            brief: CallBrief::Interpret {
                text: "t".into(),
                objective: None,
                criteria: Vec::new(),
                progress: Vec::new(),
                unmet: Vec::new(),
                feedback: Vec::new(),
                attempt: 1,
            },
        }
    }

    #[tokio::test]
    async fn t3_a_call_is_sent_only_while_its_principal_holds_the_role() {
        let room = RoomId::parse("local").unwrap();
        let state = RoomState::new(RoomSetup {
            room: room.clone(),
            owner: PrincipalId::parse("olive").unwrap(),
            policy: RoomPolicy::default(),
            access: AccessPolicy::default(),
            quotes: Quotes {
                reasoner: UsdMicros::new(1_000),
                specialist: UsdMicros::new(1_000),
                reviewer: UsdMicros::new(1_000),
            },
            limit: UsdMicros::new(1_000_000),
        })
        .unwrap();
        let store = Arc::new(MemoryStore::new());
        store
            .create(&state, Timestamp::from_millis(0))
            .await
            .unwrap();
        let reached = Arc::new(Reached::default());
        let sink = Authorized::new(room, store, Arc::clone(&reached));
        // sam holds no role in the stored Room: neither a specialist nor a reviewer call to
        // sam is sent; the reasoner call (no principal) is.
        let refused = sink
            .call(&call(1, CallRole::Specialist, Some("sam")), Abort::never())
            .await;
        assert!(
            matches!(&refused, CallOutcome::Refused { reason } if reason.starts_with("T3")),
            "{refused:?}"
        );
        let refused = sink
            .call(&call(2, CallRole::Reviewer, Some("sam")), Abort::never())
            .await;
        assert!(matches!(refused, CallOutcome::Refused { .. }));
        sink.call(&call(3, CallRole::Reasoner, None), Abort::never())
            .await;
        let reached = reached.0.lock().unwrap().clone();
        assert_eq!(
            reached,
            vec![OperationId::from_uuid(uuid::Uuid::from_u128(3))]
        );
    }
}
