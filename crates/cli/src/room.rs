//! `agentroom room create`: a new Room on the store, from the Room policy (`room.toml`,
//! `access.toml`, `prices.toml` in `--policies`, and the capability and binding files
//! `room.toml` names), with its owner, its members and their roles, and a budget limit. The
//! memberships are granted through the coordinator (decided and committed like any input,
//! so the history holds them); the first owner and the first operator get a bearer token,
//! whose text is printed once and stored only as a hash.
//!
//! Every argument is checked before anything is written: a bad policy, an unknown role, a
//! principal that is not an id, a model without prices or a Room that exists already leave
//! the store as it was.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;

use agentroom_coordinator::{NewMember, Store};
use agentroom_domain::ids::{PrincipalId, RoomId};
use agentroom_domain::money::UsdMicros;
use agentroom_domain::room::Role;
use agentroom_domain::state::{RoomSetup, RoomState};
use anyhow::{Context, anyhow, bail};
use clap::Subcommand;

use crate::host;
use crate::store::{Missing, StoreArgs, admin_coordinator};

/// `agentroom room …`
#[derive(Subcommand)]
pub(crate) enum Command {
    /// Create a Room: its owner, members and roles, budget limit and policy; prints the
    /// owner's and the first operator's bearer tokens (shown once, stored hashed).
    Create {
        /// The new Room's id.
        #[arg(long, value_parser = RoomId::parse)]
        room: RoomId,
        /// Its first owner.
        #[arg(long, value_parser = PrincipalId::parse)]
        owner: PrincipalId,
        /// A member and its roles, `PRINCIPAL=ROLE[,ROLE…]` (roles: owner, operator,
        /// reviewer, specialist, agent_host); repeat for each member.
        #[arg(long = "member", value_name = "PRINCIPAL=ROLES", value_parser = parse_member)]
        members: Vec<Member>,
        /// The budget limit in USD micros (1 USD = 1,000,000).
        #[arg(long, value_name = "MICROS")]
        limit_micros: i64,
        /// The model whose prices in `prices.toml` give the per-role reservations (B6).
        #[arg(long, default_value = "scripted")]
        model: String,
        /// The folder of `room.toml`, `access.toml` and `prices.toml`; the capability and
        /// binding files `room.toml` names are read relative to it.
        /// Its files override the built-in shipped ones (default: `./policies` if it exists,
        /// else the built-in policies alone).
        #[arg(long, value_name = "DIR")]
        policies: Option<PathBuf>,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Replace a Room's stored access policy with `access.toml` from `--policies` (or the
    /// built-in one): a Room keeps the policy it was created with, so a Room created before
    /// a permission existed is granted it this way. Prints what each role gains and loses.
    Access {
        /// The Room.
        #[arg(long, value_parser = RoomId::parse)]
        room: RoomId,
        /// The folder whose `access.toml` overrides the built-in one (default: `./policies`
        /// if it exists, else the built-in policies alone).
        #[arg(long, value_name = "DIR")]
        policies: Option<PathBuf>,
        #[command(flatten)]
        store: StoreArgs,
    },
}

/// A member and the roles it is granted.
#[derive(Debug, Clone)]
pub(crate) struct Member {
    principal: PrincipalId,
    roles: Vec<Role>,
}

fn parse_member(text: &str) -> Result<Member, String> {
    let (principal, roles) = text
        .split_once('=')
        .ok_or_else(|| format!("`{text}` is not PRINCIPAL=ROLE[,ROLE…]"))?;
    let principal =
        PrincipalId::parse(principal).map_err(|e| format!("member `{principal}`: {e}"))?;
    let roles = roles
        .split(',')
        .map(|r| r.trim().parse::<Role>().map_err(|e| e.to_string()))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Member { principal, roles })
}

/// Runs `command`; returns what it prints.
pub(crate) async fn run(command: Command) -> anyhow::Result<String> {
    match command {
        Command::Access {
            room,
            policies,
            store,
        } => access(room, policies, store).await,
        Command::Create {
            room,
            owner,
            members,
            limit_micros,
            model,
            policies,
            store,
        } => {
            let args = CreateArgs {
                room,
                owner,
                members,
                limit_micros,
                model,
                policies,
                store,
            };
            create_command(args).await
        }
    }
}

/// The arguments of `room create`.
struct CreateArgs {
    room: RoomId,
    owner: PrincipalId,
    members: Vec<Member>,
    limit_micros: i64,
    model: String,
    policies: Option<PathBuf>,
    store: StoreArgs,
}

/// `room access`: the Room's access policy replaced by the host's (T3).
async fn access(
    room: RoomId,
    policies: Option<PathBuf>,
    store: StoreArgs,
) -> anyhow::Result<String> {
    let policies = crate::policies::PolicyFiles::new(policies)?;
    let loaded = crate::policies::load(&policies)?;
    let rooms = store.open_rooms(Missing::Refuse).await?;
    let coordinator = admin_coordinator(rooms, "agentroom-room-access");
    let id = coordinator.fresh_input_id()?;
    let outcome = coordinator.replace_access(&room, id, loaded.access).await?;
    let mut out = String::new();
    for entry in outcome.log() {
        if entry.verdict == agentroom_domain::engine::Verdict::Rejected {
            bail!("room {room}: {}", entry.message);
        }
        writeln!(out, "room {room}: {}", entry.message)?;
    }
    Ok(out)
}

async fn create_command(args: CreateArgs) -> anyhow::Result<String> {
    let CreateArgs {
        room,
        owner,
        members,
        limit_micros,
        model,
        policies,
        store,
    } = args;
    // Everything is checked before the store is opened.
    let policies = crate::policies::PolicyFiles::new(policies)?;
    let loaded = crate::policies::load(&policies)?;
    host::catalog(&[&loaded.room], &policies)
        .map_err(|e| anyhow!("the capability files named by room.toml: {e}"))?;
    let quotes = loaded
        .prices
        .quotes(&model)
        .with_context(|| format!("--model {model}"))?;
    if limit_micros < 0 {
        bail!("--limit-micros {limit_micros}: a budget limit cannot be negative");
    }
    let state = RoomState::new(RoomSetup {
        room: room.clone(),
        owner: owner.clone(),
        policy: loaded.room,
        access: loaded.access,
        quotes,
        limit: UsdMicros::new(limit_micros),
    })
    .with_context(|| format!("room {room}"))?;
    let rooms = store.open_rooms(Missing::Create).await?;
    create(rooms, &state, &owner, &members).await
}

async fn create(
    store: Arc<dyn Store>,
    state: &RoomState,
    owner: &PrincipalId,
    members: &[Member],
) -> anyhow::Result<String> {
    let room = state.room().clone();
    let coordinator = admin_coordinator(store, "agentroom-room-create");
    let members: Vec<NewMember> = members
        .iter()
        .map(|m| NewMember {
            principal: m.principal.clone(),
            roles: m.roles.clone(),
        })
        .collect();
    let tokens = coordinator.open_room(state, owner, &members).await?;
    let mut out = String::new();
    writeln!(
        out,
        "created room {room}: owner {owner}, limit {} ({} micros)",
        state.ledger().balances().limit,
        state.ledger().balances().limit.micros()
    )?;
    for member in &members {
        let roles: Vec<&str> = member.roles.iter().map(|r| r.as_str()).collect();
        writeln!(out, "member {}: {}", member.principal, roles.join(", "))?;
    }
    for token in tokens {
        writeln!(
            out,
            "{} token ({}): {}",
            token.label,
            token.principal,
            token.issued.text()
        )?;
    }
    writeln!(
        out,
        "(each token is shown only now; the store keeps its hash)"
    )?;
    Ok(out)
}
