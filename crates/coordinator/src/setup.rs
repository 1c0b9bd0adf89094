//! The use cases that open a Room and let people in: create a Room with its members and its
//! first bearer tokens, issue a token, record an event for the host that coordinates the Room,
//! and draw a fresh input id. Randomness comes from the service's one [`Random`] port: no
//! randomness is an error ([`CoordinatorError::NoRandomness`]), never a guessable id.
//!
//! [`Random`]: agentroom_ports::Random

use agentroom_ports::domain::engine::{MembershipChange, Verdict};
use agentroom_ports::domain::event::{Event, EventBody};
use agentroom_ports::domain::ids::{EventId, InputId, PrincipalId, RoomId};
use agentroom_ports::domain::room::Role;
use agentroom_ports::domain::state::RoomState;
use agentroom_ports::tokens::RANDOM_BYTES;
use agentroom_ports::{
    EventAppend, IssuedToken, NewToken, StoreError, TokenId, TokenMaterial, TokenRecord,
};

use crate::{Coordinator, CoordinatorError};

/// A member of a new Room and the roles it is granted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewMember {
    /// The principal.
    pub principal: PrincipalId,
    /// Its roles.
    pub roles: Vec<Role>,
}

/// A bearer token issued when a Room was created; its text exists only here.
#[derive(Debug)]
pub struct FirstToken {
    /// Whose it is: `owner` or `operator`.
    pub label: &'static str,
    /// The principal it authenticates.
    pub principal: PrincipalId,
    /// The token (its text is shown once).
    pub issued: IssuedToken,
}

impl Coordinator {
    /// The host's administrator replaces `room`'s stored access policy (T3), e.g. with the
    /// host's `access.toml` after a release added a permission; the domain logs what each
    /// role gains and loses, and refuses a policy that changes nothing.
    pub async fn replace_access(
        &self,
        room: &RoomId,
        id: InputId,
        access: agentroom_ports::domain::policy::AccessPolicy,
    ) -> Result<crate::Outcome, CoordinatorError> {
        self.submit(room, id, crate::OperatorInput::ReplaceAccess { access })
            .await
    }

    /// Creates the Room `state` describes (a fresh ledger, `owner` its first owner; an
    /// existing Room is an error and is left as it is), grants `members` their roles through the domain (each grant a
    /// decided input with its own revision, so history holds them; a refused grant stops
    /// here, naming its rule's message), and issues bearer tokens to the owner and the first
    /// operator.
    #[tracing::instrument(skip_all, fields(room = %state.room()))]
    pub async fn open_room(
        &self,
        state: &RoomState,
        owner: &PrincipalId,
        members: &[NewMember],
    ) -> Result<Vec<FirstToken>, CoordinatorError> {
        let room = state.room().clone();
        match self
            .shared
            .store
            .create(state, self.shared.clock.now())
            .await
        {
            Ok(_) => {}
            Err(StoreError::RoomExists(room)) => return Err(CoordinatorError::RoomExists(room)),
            Err(err) => return Err(err.into()),
        }
        for member in members {
            for role in &member.roles {
                let outcome = self
                    .change_membership(
                        &room,
                        InputId::named(&format!(
                            "room create {room}: grant {} {}",
                            member.principal,
                            role.as_str()
                        )),
                        owner.clone(),
                        member.principal.clone(),
                        *role,
                        MembershipChange::Grant,
                    )
                    .await?;
                if let Some(refused) = outcome
                    .log()
                    .iter()
                    .find(|e| e.verdict == Verdict::Rejected)
                {
                    return Err(CoordinatorError::GrantRefused {
                        principal: member.principal.clone(),
                        role: *role,
                        message: refused.message.clone(),
                    });
                }
            }
        }
        let operator = members
            .iter()
            .find(|m| m.roles.contains(&Role::Operator))
            .map(|m| &m.principal);
        let mut tokens = Vec::new();
        for (label, principal) in [("owner", Some(owner)), ("operator", operator)] {
            let Some(principal) = principal else {
                continue;
            };
            let issued = self
                .issue_token(NewToken {
                    room: room.clone(),
                    principal: principal.clone(),
                    created_at: self.shared.clock.now(),
                    expires_at: None,
                    label: Some(format!("room create ({label})")),
                })
                .await?;
            tokens.push(FirstToken {
                label,
                principal: principal.clone(),
                issued,
            });
        }
        Ok(tokens)
    }

    /// Issues a bearer token for `new` from fresh random bytes; its text is shown once, in
    /// the answer, and the store keeps only the hash of its secret. Only for a current
    /// member of a Room that exists (`UnknownRoom`, `NotMember` otherwise, nothing stored).
    pub async fn issue_token(&self, new: NewToken) -> Result<IssuedToken, CoordinatorError> {
        let stored = self.room(&new.room).await?;
        if !stored.state.members().is_member(&new.principal) {
            return Err(CoordinatorError::NotMember {
                principal: new.principal,
                room: new.room,
            });
        }
        let mut bytes = [0u8; RANDOM_BYTES];
        self.shared.random.fill(&mut bytes)?;
        Ok(self
            .shared
            .store
            .issue_token(new, TokenMaterial::from_random(bytes))
            .await?)
    }

    /// The tokens of `room` (records only: no secret, no hash), oldest first.
    pub async fn tokens(&self, room: &RoomId) -> Result<Vec<TokenRecord>, CoordinatorError> {
        Ok(self.shared.store.list_tokens(room).await?)
    }

    /// Revokes token `id` now (revoking it again keeps the first time); it no longer
    /// authenticates.
    pub async fn revoke_token(&self, id: &TokenId) -> Result<TokenRecord, CoordinatorError> {
        Ok(self
            .shared
            .store
            .revoke_token(id, self.shared.clock.now())
            .await?)
    }

    /// Persists an owner message of `author` (a current member of `room`) under a fresh id,
    /// for the host that coordinates the Room to accept (T1); returns its id.
    pub async fn record_message(
        &self,
        room: &RoomId,
        author: &PrincipalId,
        text: String,
    ) -> Result<EventId, CoordinatorError> {
        let stored = self.room(room).await?;
        if stored.state.members().roles_of(author).next().is_none() {
            return Err(CoordinatorError::NotMember {
                principal: author.clone(),
                room: room.clone(),
            });
        }
        let event = Event {
            id: EventId::from_uuid(self.shared.random.uuid()?),
            room: room.clone(),
            author: author.clone(),
            body: EventBody::OwnerMessage { text },
        };
        match self
            .shared
            .store
            .append_event(&event, self.shared.clock.now())
            .await?
        {
            EventAppend::Inserted => Ok(event.id),
            // A fresh random id collides only by a bug.
            EventAppend::Existed => {
                Err(CoordinatorError::Store(StoreError::EventMismatch(event.id)))
            }
        }
    }

    /// A fresh input id, for an operator input its caller did not name.
    pub fn fresh_input_id(&self) -> Result<InputId, CoordinatorError> {
        Ok(InputId::from_uuid(self.shared.random.uuid()?))
    }

    /// A fresh 128-bit id in hex (request ids at the edge).
    pub fn fresh_hex_id(&self) -> Result<String, CoordinatorError> {
        Ok(self.shared.random.hex_id()?)
    }
}
