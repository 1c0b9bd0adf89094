//! Principals, roles, permissions and Room memberships.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::ids::PrincipalId;

/// A role a principal holds in a Room.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Creates objectives and corrects them; the Room's authority.
    Owner,
    /// Adjusts the shared budget and controls objectives.
    Operator,
    /// Audits source-bound reports.
    Reviewer,
    /// Executes tasks for the capabilities it is bound to.
    Specialist,
    /// Runs a supervised Room on behalf of agents.
    AgentHost,
}

impl Role {
    /// Every role, in a fixed order.
    pub const ALL: [Role; 5] = [
        Role::Owner,
        Role::Operator,
        Role::Reviewer,
        Role::Specialist,
        Role::AgentHost,
    ];

    /// The role's name as written in policies and on the wire.
    pub const fn as_str(self) -> &'static str {
        match self {
            Role::Owner => "owner",
            Role::Operator => "operator",
            Role::Reviewer => "reviewer",
            Role::Specialist => "specialist",
            Role::AgentHost => "agent_host",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A name that is not a role.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a role (owner, operator, reviewer, specialist, agent_host)")]
pub struct UnknownRole(pub String);

impl FromStr for Role {
    type Err = UnknownRole;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Role::ALL
            .into_iter()
            .find(|r| r.as_str() == text)
            .ok_or_else(|| UnknownRole(text.to_owned()))
    }
}

/// A permission, checked by name against `policies/access.toml`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub enum Permission {
    /// Post events to the Room.
    EventPost,
    /// Read objectives, plans, boards and the decision log.
    ObjectiveRead,
    /// Pause, resume and cancel objectives.
    ObjectiveControl,
    /// Readmit or discard a result that landed after a control change (D4).
    LateResultDecide,
    /// Read the budget ledger.
    BudgetRead,
    /// Raise the Room's budget limit (B4).
    BudgetRaise,
    /// Acknowledge a budget overrun (B5).
    BudgetAcknowledge,
    /// Resolve uncertain or dead-lettered operations (D2).
    OperationResolve,
    /// Read reports and reviews.
    ReportRead,
    /// Record a review.
    ReviewRecord,
    /// Update one's own tasks through the planning messages.
    TaskUpdateOwn,
    /// Use the planning messages on standalone plans.
    PlanningUse,
    /// Grant and revoke memberships.
    MembershipManage,
    /// Add, correct and retract the Room's memory entries (M1).
    MemoryManage,
    /// Redact an artifact's content or a memory entry that holds a secret or personal data:
    /// it is removed from the store and a redaction record takes its place.
    ContentRedact,
}

impl Permission {
    /// Every permission, in a fixed order.
    pub const ALL: [Permission; 15] = [
        Permission::EventPost,
        Permission::ObjectiveRead,
        Permission::ObjectiveControl,
        Permission::LateResultDecide,
        Permission::BudgetRead,
        Permission::BudgetRaise,
        Permission::BudgetAcknowledge,
        Permission::OperationResolve,
        Permission::ReportRead,
        Permission::ReviewRecord,
        Permission::TaskUpdateOwn,
        Permission::PlanningUse,
        Permission::MembershipManage,
        Permission::MemoryManage,
        Permission::ContentRedact,
    ];

    /// The permission's name as written in `policies/access.toml`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Permission::EventPost => "event.post",
            Permission::ObjectiveRead => "objective.read",
            Permission::ObjectiveControl => "objective.control",
            Permission::LateResultDecide => "late_result.decide",
            Permission::BudgetRead => "budget.read",
            Permission::BudgetRaise => "budget.raise",
            Permission::BudgetAcknowledge => "budget.acknowledge",
            Permission::OperationResolve => "operation.resolve",
            Permission::ReportRead => "report.read",
            Permission::ReviewRecord => "review.record",
            Permission::TaskUpdateOwn => "task.update_own",
            Permission::PlanningUse => "planning.use",
            Permission::MembershipManage => "membership.manage",
            Permission::MemoryManage => "memory.manage",
            Permission::ContentRedact => "content.redact",
        }
    }
}

impl fmt::Display for Permission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A name that is not a permission.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a permission")]
pub struct UnknownPermission(pub String);

impl FromStr for Permission {
    type Err = UnknownPermission;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Permission::ALL
            .into_iter()
            .find(|p| p.as_str() == text)
            .ok_or_else(|| UnknownPermission(text.to_owned()))
    }
}

/// The Room's current memberships: each principal and the roles it holds now.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
pub struct Members {
    roles: BTreeMap<PrincipalId, BTreeSet<Role>>,
}

impl Members {
    /// Grants `role` to `principal`; granting a role already held changes nothing.
    pub fn grant(&mut self, principal: PrincipalId, role: Role) {
        self.roles.entry(principal).or_default().insert(role);
    }

    /// Revokes `role` from `principal`; returns whether the principal held it.
    pub fn revoke(&mut self, principal: &PrincipalId, role: Role) -> bool {
        let Some(roles) = self.roles.get_mut(principal) else {
            return false;
        };
        let held = roles.remove(&role);
        if roles.is_empty() {
            self.roles.remove(principal);
        }
        held
    }

    /// `principal`'s roles become exactly `roles` (none: it is no longer a member); returns
    /// the roles it held before.
    pub fn set(&mut self, principal: PrincipalId, roles: BTreeSet<Role>) -> BTreeSet<Role> {
        let before = if roles.is_empty() {
            self.roles.remove(&principal)
        } else {
            self.roles.insert(principal, roles)
        };
        before.unwrap_or_default()
    }

    /// Whether `principal` currently holds `role`.
    pub fn has(&self, principal: &PrincipalId, role: Role) -> bool {
        self.roles.get(principal).is_some_and(|r| r.contains(&role))
    }

    /// Whether `principal` is currently a member in any role.
    pub fn is_member(&self, principal: &PrincipalId) -> bool {
        self.roles.contains_key(principal)
    }

    /// The roles `principal` holds now (empty when not a member).
    pub fn roles_of(&self, principal: &PrincipalId) -> impl Iterator<Item = Role> + '_ {
        self.roles.get(principal).into_iter().flatten().copied()
    }

    /// Every principal holding `role`, in id order.
    pub fn holders(&self, role: Role) -> impl Iterator<Item = &PrincipalId> + '_ {
        self.roles
            .iter()
            .filter(move |(_, r)| r.contains(&role))
            .map(|(p, _)| p)
    }

    /// Every member and its roles, in id order.
    pub fn iter(&self) -> impl Iterator<Item = (&PrincipalId, &BTreeSet<Role>)> + '_ {
        self.roles.iter()
    }
}
