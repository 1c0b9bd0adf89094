//! Memberships while the Room runs (T6): add a member (with its first bearer token when asked,
//! its text shown once), change a member's roles, revoke a member; each one decided input with
//! its own revision. The domain decides who may, keeps the Room an owner, and fences the open
//! calls of a principal that loses the role they run in; authentication reads the membership
//! as stored at every request, so a revoked principal's next request is refused at once, and
//! revoking a member also revokes its tokens in the Room, so they never work again.

use agentroom_ports::domain::engine::{MemberChange, Verdict};
use agentroom_ports::domain::ids::{PrincipalId, RoomId, Timestamp};
use agentroom_ports::domain::room::Role;
use agentroom_ports::{IssuedToken, NewToken};

use crate::{Coordinator, CoordinatorError, InputId, OperatorInput, Outcome};

/// The terms of the first token a new member is given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TokenTerms {
    /// When it expires, if ever.
    pub expires_at: Option<Timestamp>,
    /// A note for people, never a secret.
    pub label: Option<String>,
}

/// What adding a member did.
#[derive(Debug)]
pub struct MemberAdded {
    /// The decision (the domain's verdict first).
    pub outcome: Outcome,
    /// The member's first token, when one was asked for and the member was added now: its
    /// text exists only here. A retry of the same input issues none.
    pub token: Option<IssuedToken>,
}

impl Coordinator {
    /// Adds `principal` to `room` with `roles` (T6: refused when it is a member already), and
    /// when `token` says so, issues its first bearer token, so an owner onboards a member
    /// remotely. The token is issued only by the decision that added the member.
    pub async fn add_member(
        &self,
        room: &RoomId,
        id: InputId,
        by: PrincipalId,
        principal: PrincipalId,
        roles: Vec<Role>,
        token: Option<TokenTerms>,
    ) -> Result<MemberAdded, CoordinatorError> {
        let outcome = self
            .submit(
                room,
                id,
                OperatorInput::ChangeMember {
                    by: by.clone(),
                    principal: principal.clone(),
                    change: MemberChange::Add { roles },
                },
            )
            .await?;
        let added = matches!(outcome, Outcome::Decided { .. })
            && outcome
                .log()
                .first()
                .is_some_and(|e| e.verdict == Verdict::Accepted);
        let token = match token {
            Some(terms) if added => Some(
                self.issue_token(NewToken {
                    room: room.clone(),
                    principal,
                    created_at: self.shared.clock.now(),
                    expires_at: terms.expires_at,
                    label: terms.label.or_else(|| Some(format!("member add by {by}"))),
                })
                .await?,
            ),
            _ => None,
        };
        Ok(MemberAdded { outcome, token })
    }

    /// `principal`'s roles in `room` become exactly `roles`, in one decision (T6): the open
    /// calls of a role it loses are fenced.
    pub async fn change_member_roles(
        &self,
        room: &RoomId,
        id: InputId,
        by: PrincipalId,
        principal: PrincipalId,
        roles: Vec<Role>,
    ) -> Result<Outcome, CoordinatorError> {
        self.submit(
            room,
            id,
            OperatorInput::ChangeMember {
                by,
                principal,
                change: MemberChange::SetRoles { roles },
            },
        )
        .await
    }

    /// Revokes `principal` from `room` (T6): every role at once, its open calls fenced, and
    /// once the revocation is accepted, every token of `principal` in `room` issued until the
    /// decision is revoked in the token store, so its next request is a 401 and adding the
    /// principal again later never revives an old (possibly leaked) token.
    ///
    /// The decision commits first, then the tokens are revoked. If revoking them fails, the
    /// member stays revoked (authentication refuses it by membership anyway) and the answer
    /// is [`CoordinatorError::TokensNotRevoked`]: a retry of the same `id` finds the decision
    /// ([`Outcome::AlreadyDecided`]) and revokes the tokens issued until it again (revoking
    /// is idempotent; a token issued to the principal added again later is left alone).
    pub async fn revoke_member(
        &self,
        room: &RoomId,
        id: InputId,
        by: PrincipalId,
        principal: PrincipalId,
    ) -> Result<Outcome, CoordinatorError> {
        let outcome = self
            .submit(
                room,
                id,
                OperatorInput::ChangeMember {
                    by,
                    principal: principal.clone(),
                    change: MemberChange::Revoke,
                },
            )
            .await?;
        let revision = match &outcome {
            Outcome::Decided { revision, .. } | Outcome::AlreadyDecided { revision, .. } => {
                *revision
            }
            Outcome::AlreadyDone => return Ok(outcome),
        };
        let Some(decided) = outcome
            .log()
            .first()
            .filter(|entry| entry.verdict == Verdict::Accepted)
        else {
            return Ok(outcome);
        };
        self.shared
            .store
            .revoke_principal_tokens(room, &principal, decided.at, self.shared.clock.now())
            .await
            .map_err(|source| CoordinatorError::TokensNotRevoked {
                room: room.clone(),
                principal,
                revision,
                source,
            })?;
        Ok(outcome)
    }
}
