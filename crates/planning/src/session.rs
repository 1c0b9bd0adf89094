//! One A2E session over any transport: decode a message, answer the handshake and ping,
//! hand planning requests to the service, encode the reply. Transports (stdio, HTTP) only
//! move bytes.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use agentroom_domain::ids::{PrincipalId, RoomId, Timestamp};

use crate::service::{NoRandomness, PlanningService};
use crate::wire::{
    self, Body, Envelope, HandshakeReply, Inbound, ProtocolError, Reply, SDK_CAPABILITIES,
};

/// What a session does with one message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Send this line (compact JSON, no newline).
    Reply(String),
    /// Send nothing (the message was itself a reply).
    Silent,
    /// The client said `shutdown`: send nothing and end the session.
    Close,
}

/// A message of a group, answered but not encoded yet.
enum Answer {
    /// Its reply; `planning`: a planning request's (undone when the group's commit fails).
    Reply {
        req_id: String,
        reply: Reply,
        planning: bool,
    },
    /// A reply from the client: nothing to send.
    Silent,
    /// `shutdown`.
    Close,
}

/// A session: its Room, who it acts for (when the transport authenticated someone), its id,
/// when it started and how many replies it has sent.
#[derive(Debug, Clone)]
pub struct Session {
    service: Arc<PlanningService>,
    room: RoomId,
    principal: Option<PrincipalId>,
    id: String,
    started: Timestamp,
    /// The number of the last reply envelope; shared by clones, which are the same session,
    /// so no two of its replies get the same id.
    replies: Arc<AtomicU64>,
}

impl Session {
    /// A session acting in `room`, with a fresh id; [`NoRandomness`] when none can be drawn
    /// (then there is no session: a transport refuses it rather than serve under a guessable
    /// id).
    pub fn new(service: Arc<PlanningService>, room: RoomId) -> Result<Self, NoRandomness> {
        let id = service.ambient().fresh_id()?;
        let started = service.ambient().now();
        Ok(Self {
            service,
            room,
            principal: None,
            id,
            started,
            replies: Arc::new(AtomicU64::new(0)),
        })
    }

    /// The same session acting for `principal`, whom the transport authenticated (a bearer
    /// token, never a field of a message): an agent's status updates of its own tasks on an
    /// objective's plan go to the coordinator as that principal's.
    pub fn acting_as(mut self, principal: PrincipalId) -> Self {
        self.principal = Some(principal);
        self
    }

    /// Who the session acts for, if the transport said.
    pub fn principal(&self) -> Option<&PrincipalId> {
        self.principal.as_ref()
    }

    /// The session's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The Room it acts in.
    pub fn room(&self) -> &RoomId {
        &self.room
    }

    /// Answers one message (a stdio line without its newline, or an HTTP body).
    pub async fn step(&self, bytes: &[u8]) -> Step {
        self.step_decoded(wire::decode(bytes)).await
    }

    /// Answers a message the transport already decoded with [`wire::decode`] (one that looks
    /// at a message before the session answers it, such as a handshake's `auth_token`).
    pub async fn step_decoded(&self, decoded: Result<Inbound, ProtocolError>) -> Step {
        let answer = self.answer_decoded(decoded).await;
        self.to_step(answer)
    }

    /// What a decoded message gets, not encoded yet.
    async fn answer_decoded(&self, decoded: Result<Inbound, ProtocolError>) -> Answer {
        match decoded {
            Err(error) => Answer::Reply {
                req_id: String::new(),
                reply: Reply::Error(error),
                planning: false,
            },
            Ok(Inbound {
                body: Body::Shutdown,
                ..
            }) => Answer::Close,
            Ok(Inbound {
                body: Body::Reply, ..
            }) => Answer::Silent,
            Ok(Inbound { req_id, body }) => {
                let planning = matches!(body, Body::Planning(_));
                let reply = self.answer(&req_id, body).await;
                Answer::Reply {
                    req_id,
                    reply,
                    planning,
                }
            }
        }
    }

    /// An answer as the transport sends it.
    fn to_step(&self, answer: Answer) -> Step {
        match answer {
            Answer::Reply { req_id, reply, .. } => Step::Reply(self.encode(&req_id, &reply)),
            Answer::Silent => Step::Silent,
            Answer::Close => Step::Close,
        }
    }

    /// Answers a client's pipelined messages, in order, with their writes committed together
    /// (issue 21, planning group commit): the repository opens a group, the messages are
    /// answered — a `shutdown` ends them, and what follows it is not answered — and the group
    /// commits before any reply is encoded, so a reply that says a write was done is sent only
    /// once that write is durable, and one commit (one sync) serves them all. When the commit
    /// fails nothing of the group is stored, and every planning reply of it becomes the A2E
    /// `runtime_error` its message gets when the store fails. A store that cannot group
    /// commits each write by itself; the answers are the same.
    pub async fn steps(&self, messages: &[&[u8]]) -> Vec<Step> {
        let grouped = match self.service.repository().begin_group().await {
            Ok(grouped) => grouped,
            Err(error) => {
                tracing::error!(%error, "cannot open a group commit; each write commits alone");
                false
            }
        };
        let mut answers: Vec<Answer> = Vec::with_capacity(messages.len());
        for bytes in messages {
            let answer = self.answer_decoded(wire::decode(bytes)).await;
            let close = matches!(answer, Answer::Close);
            answers.push(answer);
            if close {
                break;
            }
        }
        if grouped && let Err(error) = self.service.repository().end_group().await {
            tracing::error!(%error, messages = answers.len(), "a group commit failed");
            for answer in &mut answers {
                if let Answer::Reply {
                    req_id,
                    reply,
                    planning: true,
                } = answer
                {
                    *reply = Reply::Error(ProtocolError::runtime(req_id));
                }
            }
        }
        answers
            .into_iter()
            .map(|answer| self.to_step(answer))
            .collect()
    }

    /// Answers with an A2E `error` the transport decided on (e.g. `unauthorized`), in this
    /// session's envelope; the error's `req_id` is echoed.
    pub fn answer_error(&self, error: ProtocolError) -> Step {
        let req_id = error.req_id.clone();
        Step::Reply(self.encode(&req_id, &Reply::Error(error)))
    }

    /// The A2E error for a message that was too large to read, as a line.
    pub fn too_large(&self, bytes: usize) -> String {
        self.encode("", &Reply::Error(ProtocolError::too_large(bytes)))
    }

    async fn answer(&self, req_id: &str, body: Body) -> Reply {
        match body {
            Body::Handshake(handshake) => Reply::Handshake(HandshakeReply {
                session_id: self.id.clone(),
                accepted_caps: handshake
                    .agent_caps
                    .into_iter()
                    .filter(|c| c == "planning" && SDK_CAPABILITIES.contains(&c.as_str()))
                    .collect(),
                ok: true,
                reason: String::new(),
            }),
            Body::Ping => {
                let now = self.service.ambient().now().as_millis();
                let millis = now.saturating_sub(self.started.as_millis()).max(0);
                // Seconds with millisecond precision; an f64 holds every such value exactly
                // enough for an uptime.
                #[allow(clippy::cast_precision_loss)]
                let uptime_seconds = millis as f64 / 1000.0;
                Reply::Pong { uptime_seconds }
            }
            // Answered in `step` without a reply.
            Body::Shutdown | Body::Reply => Reply::Error(ProtocolError::runtime(req_id)),
            Body::Planning(request) => match self
                .service
                .handle_as(&self.room, self.principal.as_ref(), request)
                .await
            {
                Ok(reply) => Reply::Planning(reply),
                Err(error) => {
                    tracing::error!(%error, req_id, "planning request failed");
                    Reply::Error(ProtocolError::runtime(req_id))
                }
            },
        }
    }

    fn encode(&self, req_id: &str, reply: &Reply) -> String {
        // A reply needs a fresh envelope `id` (A2E-PROTOCOL.md: unique, opaque; clients match
        // on `req_id` only). `{session}-{n}` is one: the session id is random (128 bits from
        // the ambient), so no other session shares the prefix, and `n` counts this session's
        // replies. So a reply never needs randomness of its own, and cannot fail for the
        // lack of it.
        let n = self.replies.fetch_add(1, Ordering::Relaxed) + 1;
        let id = format!("{}-{n}", self.id);
        #[allow(clippy::cast_precision_loss)]
        let ts = self.service.ambient().now().as_millis() as f64 / 1000.0;
        wire::encode(
            reply,
            Envelope {
                id: &id,
                ts,
                req_id,
            },
        )
    }
}
