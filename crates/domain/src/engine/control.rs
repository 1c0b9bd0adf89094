//! Control and budget: D3 (pause and cancel bump the control revision and abort running
//! calls), B4 (a limit raise adds balance), B5 (acknowledging an overrun), memberships and
//! T6 (revoking or demoting a principal fences its open calls).

use std::collections::BTreeSet;

use super::calls::Target;
use super::{ControlAction, Ctx, InputError, MemberChange, MembershipChange};
use crate::ids::{EventId, ObjectiveId, OperationId, PrincipalId};
use crate::money::UsdMicros;
use crate::objective::ObjectiveStatus;
use crate::policy::AccessPolicy;
use crate::policy::ReviewSource;
use crate::room::{Permission, Role};
use crate::rules::Rule;
use crate::state::{CallRole, Served};

impl Ctx<'_, '_> {
    /// D3: pause, resume or cancel an objective (owners and operators).
    pub(super) fn control(
        &mut self,
        by: &PrincipalId,
        objective: ObjectiveId,
        action: ControlAction,
    ) -> Result<(), InputError> {
        let Some(idx) =
            self.live_objective(by, Permission::ObjectiveControl, objective, Rule::D3, |s| {
                format!("the objective is already {s}")
            })?
        else {
            return Ok(());
        };
        if !self.authorized(by, Permission::ObjectiveControl, Some(objective)) {
            return Ok(());
        }
        let status = self.objective(idx).status;
        if status.is_terminal() {
            self.reject(
                Some(objective),
                Rule::D3,
                format!("the objective is already {status}"),
            );
            return Ok(());
        }
        match action {
            ControlAction::Pause if status == ObjectiveStatus::Paused => {
                self.reject(
                    Some(objective),
                    Rule::D3,
                    "the objective is already paused".to_owned(),
                );
            }
            ControlAction::Pause => {
                let o = self.objective_mut(idx);
                o.control_revision += 1;
                // A stop for a provider stays resumable through a pause.
                let back_to = match (status, o.resume_to) {
                    (ObjectiveStatus::StoppedForAttention, Some(before)) => before,
                    _ => status,
                };
                o.resume_to = Some(back_to);
                o.status = ObjectiveStatus::Paused;
                let revision = o.control_revision;
                self.cancel_calls(idx);
                self.accept(
                    Some(objective),
                    Some(Rule::D3),
                    format!("{by} paused the objective (control revision {revision}); running calls abort"),
                );
            }
            ControlAction::Resume
                if status != ObjectiveStatus::Paused
                    && !(status == ObjectiveStatus::StoppedForAttention
                        && self.objective(idx).resume_to.is_some()) =>
            {
                self.reject(
                    Some(objective),
                    Rule::D3,
                    format!("the objective is {status}, not paused"),
                );
            }
            ControlAction::Resume => {
                let o = self.objective_mut(idx);
                o.control_revision += 1;
                o.status = o.resume_to.take().unwrap_or(ObjectiveStatus::Running);
                let revision = o.control_revision;
                self.accept(
                    Some(objective),
                    Some(Rule::D3),
                    format!("{by} resumed the objective (control revision {revision})"),
                );
                self.advance(idx);
                if self.state.policy.review_source() == ReviewSource::Human {
                    self.ask_human_review(idx);
                }
            }
            ControlAction::Cancel => {
                let o = self.objective_mut(idx);
                o.control_revision += 1;
                o.status = ObjectiveStatus::Canceled;
                o.resume_to = None;
                o.interpretation = None;
                o.awaiting_review = None;
                self.cancel_calls(idx);
                self.accept(
                    Some(objective),
                    Some(Rule::D3),
                    format!("{by} canceled the objective; running calls abort"),
                );
            }
        }
        Ok(())
    }

    /// Retries a pending owner message a provider failed (owners and operators, like any
    /// control): its interpretation is issued again, with the attempts it had.
    pub(super) fn retry_message(
        &mut self,
        by: &PrincipalId,
        event: EventId,
    ) -> Result<(), InputError> {
        let held = self
            .state
            .intake
            .get(&event)
            .ok_or(InputError::NotPending(event))?
            .held
            .is_some();
        if !self.authorized(by, Permission::ObjectiveControl, None) {
            return Ok(());
        }
        if !held {
            self.reject(
                None,
                Rule::D3,
                format!("the owner's message {event} is not waiting for attention"),
            );
            return Ok(());
        }
        if let Some(i) = self.state.intake.get_mut(&event) {
            i.held = None;
        }
        self.accept(
            None,
            Some(Rule::D3),
            format!("{by} retried the owner's message {event}"),
        );
        self.issue_interpretation(Target::Intake(event));
        Ok(())
    }

    /// B6: an operator brings the Room's quotes up to what the host serves; calls that
    /// waited for it go ahead. Recorded with each role's model.
    pub(super) fn update_quotes(&mut self, by: &PrincipalId, served: &Served) {
        if !self.authorized(by, Permission::BudgetRaise, None) {
            return;
        }
        let before = self.state.quotes;
        let after = served.quotes(&before);
        if after.reasoner <= UsdMicros::ZERO
            || after.specialist <= UsdMicros::ZERO
            || after.reviewer <= UsdMicros::ZERO
        {
            self.reject(
                None,
                Rule::B6,
                "quotes not updated: every quote must be positive".to_owned(),
            );
            return;
        }
        let describe = |role: CallRole| {
            let model = served.for_role(role).map_or_else(
                || "unchanged".to_owned(),
                |s| format!("model `{}`", s.model),
            );
            format!(
                "{} {} → {} ({model})",
                role.as_str(),
                before.for_role(role),
                after.for_role(role)
            )
        };
        self.state.quotes = after;
        self.accept(
            None,
            Some(Rule::B6),
            format!(
                "{by} updated the Room's quotes: {}; {}; {}",
                describe(CallRole::Reasoner),
                describe(CallRole::Specialist),
                describe(CallRole::Reviewer)
            ),
        );
        self.advance_all();
    }

    /// B4: an operator raises the limit; spent is untouched and waiting work may go ahead.
    pub(super) fn raise_limit(&mut self, by: &PrincipalId, amount: UsdMicros) {
        if !self.authorized(by, Permission::BudgetRaise, None) {
            return;
        }
        match self.state.ledger.raise_limit(amount) {
            Ok(()) => {
                let b = self.state.ledger.balances();
                self.accept(
                    None,
                    Some(Rule::B4),
                    format!(
                        "{by} raised the limit by {amount} to {}; spent stays {}",
                        b.limit, b.spent
                    ),
                );
                self.advance_all();
            }
            Err(err) => self.reject(None, Rule::B4, format!("limit not raised: {err}")),
        }
    }

    /// T3: the host's administrator replaces the Room's access policy. What each role gains
    /// and loses is logged; every later check (dispatch included) reads the new one.
    pub(super) fn replace_access(&mut self, access: AccessPolicy) {
        let mut changes = Vec::new();
        for role in Role::ALL {
            let before: BTreeSet<Permission> = self.state.access.permissions(role).collect();
            let after: BTreeSet<Permission> = access.permissions(role).collect();
            let gained: Vec<String> = after
                .difference(&before)
                .map(|p| format!("+{}", p.as_str()))
                .collect();
            let lost: Vec<String> = before
                .difference(&after)
                .map(|p| format!("-{}", p.as_str()))
                .collect();
            if !gained.is_empty() || !lost.is_empty() {
                changes.push(format!(
                    "{} {}",
                    role.as_str(),
                    [gained, lost].concat().join(" ")
                ));
            }
        }
        if changes.is_empty() {
            self.reject(
                None,
                Rule::T3,
                "the Room's access policy is already this one; nothing changed".to_owned(),
            );
            return;
        }
        // A policy under which no role may manage members would leave nobody able to add a
        // reviewer, fix a role or revoke a member again.
        if !Role::ALL
            .iter()
            .any(|role| access.allows(*role, Permission::MembershipManage))
        {
            self.reject(
                None,
                Rule::T3,
                format!(
                    "the policy grants {} to no role: nobody could change the Room's members \
                     again; nothing changed",
                    Permission::MembershipManage.as_str()
                ),
            );
            return;
        }
        self.state.access = access;
        self.accept(
            None,
            Some(Rule::T3),
            format!(
                "the host's administrator replaced the Room's access policy: {}",
                changes.join("; ")
            ),
        );
    }

    /// B5: an operator acknowledges an overrun; admissions resume within the balance.
    pub(super) fn acknowledge_overrun(&mut self, by: &PrincipalId) {
        if !self.authorized(by, Permission::BudgetAcknowledge, None) {
            return;
        }
        match self.state.ledger.acknowledge_overrun() {
            Ok(()) => {
                self.accept(
                    None,
                    Some(Rule::B5),
                    format!("{by} acknowledged the overrun"),
                );
                self.advance_all();
            }
            Err(err) => self.reject(None, Rule::B5, format!("{err}")),
        }
    }

    /// Grants or revokes a role (owners). The Room always keeps an owner.
    pub(super) fn change_membership(
        &mut self,
        by: &PrincipalId,
        principal: PrincipalId,
        role: Role,
        change: MembershipChange,
    ) {
        if !self.authorized(by, Permission::MembershipManage, None) {
            return;
        }
        match change {
            MembershipChange::Grant => {
                self.state.members.grant(principal.clone(), role);
                self.accept(None, None, format!("{by} granted {role} to {principal}"));
            }
            MembershipChange::Revoke => {
                let last_owner = role == Role::Owner
                    && self.state.members.holders(Role::Owner).count() == 1
                    && self.state.members.has(&principal, Role::Owner);
                if last_owner {
                    self.reject(None, Rule::T3, "the room must keep an owner".to_owned());
                } else if self.state.members.revoke(&principal, role) {
                    self.accept(None, Some(Rule::T3), format!("{by} revoked {role} from {principal}; it is checked again at every effect sink"));
                    self.fence_calls_of(&principal);
                } else {
                    self.reject(None, Rule::T3, format!("{principal} does not hold {role}"));
                }
            }
        }
    }

    /// T6: adds a member, changes a member's roles, or revokes a member (`membership.manage`,
    /// owners by default), each one decision. The Room keeps an owner. Whatever role a
    /// principal loses, its open calls in that role are fenced (`fence_calls_of`); a role
    /// gained lets waiting work go ahead (a task whose assignee was not a specialist).
    pub(super) fn change_member(
        &mut self,
        by: &PrincipalId,
        principal: PrincipalId,
        change: MemberChange,
    ) {
        if !self.authorized(by, Permission::MembershipManage, None) {
            return;
        }
        let before: BTreeSet<Role> = self.state.members.roles_of(&principal).collect();
        let after: BTreeSet<Role> = match &change {
            MemberChange::Add { roles } => {
                if !before.is_empty() {
                    self.reject(
                        None,
                        Rule::T6,
                        format!(
                            "{principal} is a member already ({}); change its roles instead",
                            names(&before)
                        ),
                    );
                    return;
                }
                roles.iter().copied().collect()
            }
            MemberChange::SetRoles { roles } => {
                if before.is_empty() {
                    self.reject(
                        None,
                        Rule::T6,
                        format!("{principal} is not a member of this room; add it first"),
                    );
                    return;
                }
                roles.iter().copied().collect()
            }
            MemberChange::Revoke => {
                if before.is_empty() {
                    self.reject(
                        None,
                        Rule::T6,
                        format!("{principal} is not a member of this room"),
                    );
                    return;
                }
                BTreeSet::new()
            }
        };
        if after.is_empty() && change != MemberChange::Revoke {
            self.reject(
                None,
                Rule::T6,
                "a member holds at least one role; to remove a member, revoke it".to_owned(),
            );
            return;
        }
        if after == before {
            self.reject(
                None,
                Rule::T6,
                format!(
                    "{principal} holds exactly these roles already ({}); nothing to change",
                    names(&before)
                ),
            );
            return;
        }
        let owners = self.state.members.holders(Role::Owner).count();
        if before.contains(&Role::Owner) && !after.contains(&Role::Owner) && owners == 1 {
            self.reject(
                None,
                Rule::T6,
                format!(
                    "the room must keep an owner, and {principal} is its only one; add another owner first"
                ),
            );
            return;
        }
        let gained = after.difference(&before).next().is_some();
        self.state.members.set(principal.clone(), after.clone());
        let message = match change {
            MemberChange::Add { .. } => format!("{by} added {principal} as {}", names(&after)),
            MemberChange::SetRoles { .. } => format!(
                "{by} changed the roles of {principal} from {} to {}",
                names(&before),
                names(&after)
            ),
            MemberChange::Revoke => format!(
                "{by} revoked {principal} ({}): it has no access to the room from now on",
                names(&before)
            ),
        };
        self.accept(None, Some(Rule::T6), message);
        self.fence_calls_of(&principal);
        if gained {
            self.advance_all();
        }
    }

    /// T6: every open call of `principal` in a role it no longer holds is fenced: one still
    /// running is asked to abort cooperatively (as under D3); whatever any of them returns is
    /// charged (B3) and held (D4) or not used, never applied as it is.
    pub(super) fn fence_calls_of(&mut self, principal: &PrincipalId) {
        let state = &self.state;
        let fenced: Vec<(OperationId, Option<ObjectiveId>, &'static str)> = state
            .operations
            .values()
            .filter(|o| {
                !o.fenced
                    && o.principal.as_ref() == Some(principal)
                    && !state.may_be_called(Some(principal), o.role)
            })
            .map(|o| (o.id, o.objective, o.role.as_str()))
            .collect();
        for (op, objective, role) in fenced {
            if let Some(stored) = self.state.operations.get_mut(&op) {
                stored.fenced = true;
            }
            self.cancel_call(op);
            self.accept(
                objective,
                Some(Rule::T6),
                format!(
                    "{role} call {op} fenced: {principal} no longer holds the role it runs in; it aborts, and what it returns is charged and held, never applied as it is"
                ),
            );
        }
    }
}

/// Roles as people read them: `reviewer, specialist`.
fn names(roles: &BTreeSet<Role>) -> String {
    if roles.is_empty() {
        return "no role".to_owned();
    }
    roles
        .iter()
        .map(|r| r.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}
