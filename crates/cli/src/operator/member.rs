//! `agentroom member list|add|role|revoke` (issue 18, T6): the members of a Room on a running
//! host, and the owner's changes to them while the Room runs, each one decision. `add` can
//! issue the new member's first bearer token, printed once, so an owner onboards a member
//! remotely; `revoke` ends the member's access at its next request, aborts its running calls
//! (what they return is charged and held, never applied) and withdraws its assignments.

use agentroom_api_model::responses::{Decision, Member, MemberAdded, Page};
use agentroom_domain::ids::PrincipalId;
use agentroom_domain::room::Role;
use clap::Subcommand;
use serde_json::json;

use super::client::{Client, decided_or_refused, typed};
use super::print::{clean, json_text, log_lines, table, wire};
use super::{EXIT_CODES, OperatorError, PAGE, Target};

/// `agentroom member …`
#[derive(Subcommand, Debug)]
pub(crate) enum MemberCommand {
    /// The Room's members and their roles.
    #[command(after_help = EXIT_CODES)]
    List {
        #[command(flatten)]
        target: Target,
    },
    /// Add a principal to the Room with its roles (needs `membership.manage`, held by owners);
    /// with --issue-token, also its first bearer token, printed once.
    #[command(after_help = EXIT_CODES)]
    Add {
        #[command(flatten)]
        target: Target,
        /// The principal: 1 to 64 lower-case letters, digits, `-` or `_`.
        #[arg(value_parser = PrincipalId::parse)]
        principal: PrincipalId,
        /// A role (owner, operator, reviewer, specialist, agent_host); repeat it, or separate
        /// roles with commas, for several.
        #[arg(long = "role", value_name = "ROLE", required = true, value_delimiter = ',', value_parser = parse_role)]
        roles: Vec<Role>,
        /// Also issue the member's first bearer token: printed once, never shown again.
        #[arg(long)]
        issue_token: bool,
    },
    /// Change a member's roles in one decision: they become exactly the roles given. Running
    /// calls in a role it loses abort; what they return is charged and held (D4).
    #[command(after_help = EXIT_CODES)]
    Role {
        #[command(flatten)]
        target: Target,
        /// The member.
        #[arg(value_parser = PrincipalId::parse)]
        principal: PrincipalId,
        /// A role it holds from now on; repeat it, or separate roles with commas.
        #[arg(long = "role", value_name = "ROLE", required = true, value_delimiter = ',', value_parser = parse_role)]
        roles: Vec<Role>,
    },
    /// Revoke a member: every role at once, and its tokens in the Room (its next request is
    /// refused, 401; they stay revoked if it is added again). Its running calls abort (what
    /// they return is charged and held, never applied), its assignments are withdrawn. The
    /// Room keeps an owner.
    #[command(after_help = EXIT_CODES)]
    Revoke {
        #[command(flatten)]
        target: Target,
        /// The member.
        #[arg(value_parser = PrincipalId::parse)]
        principal: PrincipalId,
    },
}

fn parse_role(text: &str) -> Result<Role, String> {
    text.parse::<Role>().map_err(|error| error.to_string())
}

fn names(roles: &[Role]) -> String {
    roles
        .iter()
        .map(|role| role.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Runs `agentroom member …`; returns what to print.
pub(crate) async fn member(command: MemberCommand) -> Result<String, OperatorError> {
    match command {
        MemberCommand::List { target } => {
            let client = Client::new(&target)?;
            let first = client
                .get("members", &[("limit", PAGE.to_string())])
                .await?;
            let list = client.rest_of_pages("members", first, "items").await?;
            let members: Page<Member> = typed("GET members", &list)?;
            if target.json {
                return Ok(json_text(&list));
            }
            let rows: Vec<Vec<String>> = members
                .items
                .iter()
                .map(|m| vec![wire(&m.principal), clean(&names(&m.roles))])
                .collect();
            Ok(table(&["PRINCIPAL", "ROLES"], &rows))
        }
        MemberCommand::Add {
            target,
            principal,
            roles,
            issue_token,
        } => {
            let client = Client::new(&target)?;
            let body = json!({"principal": principal, "roles": roles, "issue_token": issue_token});
            let answer = client.post("members", &body).await?;
            let added: MemberAdded = typed("POST members", &answer)?;
            decided_or_refused(&added.decision)?;
            if target.json {
                return Ok(json_text(&answer));
            }
            let mut out = format!("added member {principal}: {}\n", names(&roles));
            out.push_str(&log_lines(&added.decision));
            if let Some(token) = &added.token {
                out.push_str(&format!(
                    "token ({}): {}\n(shown once: hand it to {} now; revoke it with `agentroom token revoke {}`)\n",
                    wire(&token.principal),
                    clean(&token.token),
                    wire(&token.principal),
                    clean(&token.id)
                ));
            }
            Ok(out)
        }
        MemberCommand::Role {
            target,
            principal,
            roles,
        } => {
            let client = Client::new(&target)?;
            let path = format!("members/{principal}/roles");
            let answer = client.post(&path, &json!({"roles": roles})).await?;
            let decision: Decision = typed(&format!("POST {path}"), &answer)?;
            decided_or_refused(&decision)?;
            if target.json {
                return Ok(json_text(&answer));
            }
            let mut out = format!("changed the roles of {principal} to {}\n", names(&roles));
            out.push_str(&log_lines(&decision));
            Ok(out)
        }
        MemberCommand::Revoke { target, principal } => {
            let client = Client::new(&target)?;
            let path = format!("members/{principal}/revoke");
            let answer = client.post(&path, &json!({})).await?;
            let decision: Decision = typed(&format!("POST {path}"), &answer)?;
            decided_or_refused(&decision)?;
            if target.json {
                return Ok(json_text(&answer));
            }
            let mut out = format!("revoked member {principal}\n");
            out.push_str(&log_lines(&decision));
            Ok(out)
        }
    }
}
