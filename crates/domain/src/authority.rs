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
//! - A plan's diff lists to each principal only the keys of tasks it sees, in either version.
//! - Money (reservations, charges, limits, quotes: the decision log's entries of budget
//!   rules) is read only by a principal holding `budget.read`.
//!
//! REST, the planning messages, the board and the notification stream ask these; none
//! decides visibility itself.

use crate::engine::{Audience, LogEntry};
use crate::ids::{PrincipalId, TaskKey};
use crate::plan::{PlanChanges, PlanVersion, Task};
use crate::review::Contribution;
use crate::room::{Permission, Role};
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

    /// Whether one of `principal`'s current roles holds `permission`.
    pub fn may(&self, principal: &PrincipalId, permission: Permission) -> bool {
        self.members()
            .roles_of(principal)
            .any(|role| self.access().allows(role, permission))
    }

    /// Whether `principal` may read money: balances, reservations, charges and quotes.
    pub fn sees_money(&self, principal: &PrincipalId) -> bool {
        self.may(principal, Permission::BudgetRead)
    }

    /// Whether `principal` may read `entry` of the decision log: an entry of a budget rule
    /// speaks of money, which only `budget.read` reads; every other entry names no amount
    /// (the engine writes each amount in an entry of its budget rule).
    pub fn sees_log_entry(&self, principal: &PrincipalId, entry: &LogEntry) -> bool {
        !entry.rule.is_some_and(|rule| rule.is_budget()) || self.sees_money(principal)
    }

    /// What `plan` changed since `previous` that `principal` may see: an overseer every key,
    /// anyone else only the keys of tasks it sees in this version or the previous one.
    pub fn visible_changes(
        &self,
        principal: &PrincipalId,
        plan: &PlanVersion,
        previous: Option<&PlanVersion>,
    ) -> PlanChanges {
        let changes = plan.changes_since(previous);
        if self.oversees(principal) {
            return changes;
        }
        let sees = |key: &TaskKey| {
            plan.task_by_key(key)
                .into_iter()
                .chain(previous.and_then(|p| p.task_by_key(key)))
                .any(|task| self.sees_task(principal, task))
        };
        let keep = |keys: Vec<TaskKey>| keys.into_iter().filter(|k| sees(k)).collect();
        PlanChanges {
            added: keep(changes.added),
            removed: keep(changes.removed),
            changed: keep(changes.changed),
            unchanged: keep(changes.unchanged),
            reused: keep(changes.reused),
        }
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
