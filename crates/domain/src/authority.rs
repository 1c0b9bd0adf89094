//! Authority at the effect sinks the engine cannot see (T3) and what a principal may see, as
//! pure predicates over the Room as it is now. The IO crates load fresh state and ask these;
//! they never decide authority themselves.
//!
//! - A call is sent only while its principal still holds the role it is called in (the
//!   reasoner is the Room's own and needs none).
//! - A notification leaves the outbox only while its audience may still receive it: a single
//!   principal must still be a member; a role audience is whoever holds the role then.
//! - A notification is addressed to a principal who is that principal or holds that role.
//! - Every task is visible to an overseer (owner, operator, reviewer); a principal that is
//!   only a specialist or agent host sees only the tasks assigned to it.
//! - Every contribution is readable by an overseer; anyone else reads its own, and those its
//!   assigned tasks depend on (what its brief lets it cite).

use crate::engine::Audience;
use crate::ids::PrincipalId;
use crate::plan::Task;
use crate::review::Contribution;
use crate::room::Role;
use crate::state::{CallRole, RoomState};

/// The role a call's principal must hold, if the call goes to a principal.
pub fn required_role(role: CallRole) -> Option<Role> {
    match role {
        CallRole::Reasoner => None,
        CallRole::Specialist => Some(Role::Specialist),
        CallRole::Reviewer => Some(Role::Reviewer),
    }
}

impl RoomState {
    /// T3 at the call sink: whether a call in `role` to `principal` may be sent now.
    pub fn may_be_called(&self, principal: Option<&PrincipalId>, role: CallRole) -> bool {
        match (principal, required_role(role)) {
            (Some(principal), Some(role)) => self.members().has(principal, role),
            (None, Some(_)) => false,
            (_, None) => true,
        }
    }

    /// T3 at the notification sink: whether `audience` may still receive a notification.
    pub fn may_be_notified(&self, audience: &Audience) -> bool {
        match audience {
            Audience::Principal(principal) => self.members().is_member(principal),
            Audience::Owners | Audience::Operators | Audience::Reviewers => true,
        }
    }

    /// Whether a notification for `audience` is addressed to `principal` now.
    pub fn is_addressed_to(&self, principal: &PrincipalId, audience: &Audience) -> bool {
        let holds = |role| self.members().has(principal, role);
        match audience {
            Audience::Owners => holds(Role::Owner),
            Audience::Operators => holds(Role::Operator),
            Audience::Reviewers => holds(Role::Reviewer),
            Audience::Principal(addressee) => addressee == principal,
        }
    }

    /// Whether `principal` sees every task of the Room (an owner, operator or reviewer).
    pub fn oversees(&self, principal: &PrincipalId) -> bool {
        self.members()
            .roles_of(principal)
            .any(|role| matches!(role, Role::Owner | Role::Operator | Role::Reviewer))
    }

    /// Whether `principal` may see `task`: an overseer sees every task, anyone else only the
    /// tasks assigned to it.
    pub fn sees_task(&self, principal: &PrincipalId, task: &Task) -> bool {
        self.oversees(principal) || task.assignee() == principal
    }

    /// Whether `principal` may read `contribution`: an overseer every one; its author; and the
    /// assignee of a task of the objective's current plan that depends on the task it was
    /// produced for (the contributions that task's brief lets it cite).
    pub fn sees_contribution(&self, principal: &PrincipalId, contribution: &Contribution) -> bool {
        if self.oversees(principal) || contribution.author() == principal {
            return true;
        }
        let Some(plan) = self
            .objective(contribution.objective())
            .and_then(|objective| objective.current_plan())
        else {
            return false;
        };
        let Some(produced) = plan.task(contribution.task()) else {
            return false;
        };
        plan.tasks()
            .iter()
            .any(|task| task.assignee() == principal && task.spec().deps.contains(produced.key()))
    }
}
