//! `agentroom pool create|show|raise|acknowledge|attach|detach`: the host's budget pools (B8),
//! on the store, like `room create`: a pool belongs to the host, not to a Room, so its
//! administrator manages it with the store's credentials rather than a Room's token. Every
//! change is decided by the domain's ledger (B2–B5) and committed with compare-and-swap; a
//! Room draws on a pool by a decided input of its own (refused while it has open calls).

use std::fmt::Write as _;

use agentroom_coordinator::{Coordinator, Outcome};
use agentroom_domain::engine::Verdict;
use agentroom_domain::ids::{PoolId, RoomId};
use agentroom_domain::money::UsdMicros;
use agentroom_ports::StoredPool;
use anyhow::bail;
use clap::Subcommand;

use crate::store::{Missing, StoreArgs, admin_coordinator};

/// `agentroom pool …`
#[derive(Subcommand)]
pub(crate) enum Command {
    /// Create a pool with a limit; Rooms attached to it draw on it (B8).
    Create {
        /// The new pool's id (1 to 64 of `a-z 0-9 - _`).
        #[arg(long, value_parser = PoolId::parse)]
        pool: PoolId,
        /// Its limit in USD micros (1 USD = 1,000,000); no automatic renewal (B2).
        #[arg(long, value_name = "MICROS")]
        limit_micros: i64,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// List the host's pools, each with its limit, spent and available balance.
    List {
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Show a pool: its balances, its overrun, the Rooms drawing on it, what each was
    /// charged, and whether its log replays to its balances.
    Show {
        /// The pool.
        #[arg(long, value_parser = PoolId::parse)]
        pool: PoolId,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Raise a pool's limit (B4: spent is never reset; lifts its overrun, B5), then tell
    /// the Rooms drawing on it.
    Raise {
        /// The pool.
        #[arg(long, value_parser = PoolId::parse)]
        pool: PoolId,
        /// By how much, in USD micros.
        #[arg(long, value_name = "MICROS")]
        by_micros: i64,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Acknowledge a pool's overrun (B5): its Rooms admit calls again within its balance.
    Acknowledge {
        /// The pool.
        #[arg(long, value_parser = PoolId::parse)]
        pool: PoolId,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Make a Room draw on a pool: from now on a call is admitted only when both the Room
    /// and the pool can hold its reservation (B8). Refused while the Room has open calls.
    Attach {
        /// The pool.
        #[arg(long, value_parser = PoolId::parse)]
        pool: PoolId,
        /// The Room.
        #[arg(long, value_parser = RoomId::parse)]
        room: RoomId,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Make a Room draw on no pool. Refused while the Room has open calls.
    Detach {
        /// The Room.
        #[arg(long, value_parser = RoomId::parse)]
        room: RoomId,
        #[command(flatten)]
        store: StoreArgs,
    },
}

/// Runs `command`; returns what it prints.
pub(crate) async fn run(command: Command) -> anyhow::Result<String> {
    match command {
        Command::Create {
            pool,
            limit_micros,
            store,
        } => {
            if limit_micros < 0 {
                bail!("--limit-micros {limit_micros}: a pool's limit cannot be negative");
            }
            let coordinator = coordinator(&store, Missing::Create).await?;
            let created = coordinator
                .create_pool(&pool, UsdMicros::new(limit_micros))
                .await?;
            Ok(format!(
                "created pool {pool}: limit {} ({} micros)\n",
                created.ledger.balances().limit,
                limit_micros
            ))
        }
        Command::List { store } => {
            let coordinator = coordinator(&store, Missing::Refuse).await?;
            let mut out = String::new();
            for id in coordinator.pools().await? {
                let b = coordinator.pool(&id).await?.ledger.balances();
                writeln!(
                    out,
                    "{id}: limit {}, spent {}, reserved {}, available {}",
                    b.limit, b.spent, b.reserved, b.available
                )?;
            }
            if out.is_empty() {
                out.push_str("no pool (`agentroom pool create` makes one)\n");
            }
            Ok(out)
        }
        Command::Show { pool, store } => {
            let coordinator = coordinator(&store, Missing::Refuse).await?;
            show(&coordinator, &pool).await
        }
        Command::Raise {
            pool,
            by_micros,
            store,
        } => {
            let coordinator = coordinator(&store, Missing::Refuse).await?;
            let changed = coordinator
                .raise_pool(&pool, UsdMicros::new(by_micros))
                .await?;
            Ok(changed_text(
                &format!("raised pool {pool} by {}", UsdMicros::new(by_micros)),
                &changed,
            ))
        }
        Command::Acknowledge { pool, store } => {
            let coordinator = coordinator(&store, Missing::Refuse).await?;
            let changed = coordinator.acknowledge_pool(&pool).await?;
            Ok(changed_text(
                &format!("acknowledged the overrun of pool {pool}"),
                &changed,
            ))
        }
        Command::Attach { pool, room, store } => {
            let coordinator = coordinator(&store, Missing::Refuse).await?;
            let id = coordinator.fresh_input_id()?;
            let outcome = coordinator.attach_pool(&room, id, Some(pool)).await?;
            decided(&room, &outcome)
        }
        Command::Detach { room, store } => {
            let coordinator = coordinator(&store, Missing::Refuse).await?;
            let id = coordinator.fresh_input_id()?;
            let outcome = coordinator.attach_pool(&room, id, None).await?;
            decided(&room, &outcome)
        }
    }
}

async fn coordinator(store: &StoreArgs, missing: Missing) -> anyhow::Result<Coordinator> {
    Ok(admin_coordinator(
        store.open_rooms(missing).await?,
        "agentroom-pool",
    ))
}

/// The Room's decision: its log, or an error when the domain refused it.
fn decided(room: &RoomId, outcome: &Outcome) -> anyhow::Result<String> {
    let mut out = String::new();
    for entry in outcome.log() {
        let rule = entry.rule.map(|r| format!("{r}: ")).unwrap_or_default();
        if entry.verdict == Verdict::Rejected {
            bail!("room {room}: {rule}{}; nothing changed", entry.message);
        }
        writeln!(out, "room {room}: {rule}{}", entry.message)?;
    }
    Ok(out)
}

fn balances_text(out: &mut String, pool: &StoredPool) -> std::fmt::Result {
    let b = pool.ledger.balances();
    writeln!(out, "pool {} (revision {})", pool.id, pool.revision)?;
    writeln!(out, "  limit     {} ({} micros)", b.limit, b.limit.micros())?;
    writeln!(
        out,
        "  reserved  {} ({} micros)",
        b.reserved,
        b.reserved.micros()
    )?;
    writeln!(
        out,
        "  uncertain {} ({} micros)",
        b.uncertain,
        b.uncertain.micros()
    )?;
    writeln!(out, "  spent     {} ({} micros)", b.spent, b.spent.micros())?;
    writeln!(
        out,
        "  available {} ({} micros)",
        b.available,
        b.available.micros()
    )?;
    match pool.ledger.overrun() {
        Some(overrun) => writeln!(
            out,
            "  overrun   {overrun}: its Rooms admit no call until `agentroom pool raise` or \
             `agentroom pool acknowledge`"
        ),
        None => writeln!(out, "  overrun   none"),
    }
}

fn changed_text(what: &str, pool: &StoredPool) -> String {
    let mut out = format!("{what}\n");
    let _ = balances_text(&mut out, pool);
    out.push_str(
        "  its Rooms' waiting work goes ahead at their host's next pass (`agentroom serve`)\n",
    );
    out
}

async fn show(coordinator: &Coordinator, id: &PoolId) -> anyhow::Result<String> {
    let pool = coordinator.pool(id).await?;
    let audit = coordinator.audit_pool(id).await?;
    let rooms = coordinator.rooms_drawing_on(id).await?;
    let mut out = String::new();
    balances_text(&mut out, &pool)?;
    if rooms.is_empty() {
        writeln!(out, "  rooms     none draws on it")?;
    }
    for room in &rooms {
        writeln!(out, "  room      {room} draws on it")?;
    }
    for (room, charged) in &audit.charged_by_room {
        writeln!(
            out,
            "  charged   {charged} ({} micros) to room {room}",
            charged.micros()
        )?;
    }
    if audit.replays {
        writeln!(out, "  log       replays to these balances")?;
    }
    if !audit.replays {
        bail!("{out}pool {id}: its log does not replay to its balances (B7)");
    }
    Ok(out)
}
