//! `agentroom token issue|revoke|list`: bearer tokens of the REST API, on the embedded
//! database (`--root`) or PostgreSQL (`--database-url`), which must be migrated already. A
//! token's text is printed once, when issued; the store keeps only the hash of its secret.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use agentroom_coordinator::{Coordinator, CoordinatorConfig, Store};
use agentroom_domain::ids::{PrincipalId, RoomId, Timestamp};
use agentroom_ports::{NewToken, TokenId, TokenRecord};
use agentroom_store_sqlite::{Durability, SqliteRooms};
use anyhow::{Context, bail};
use clap::Subcommand;
use serde_json::json;

use crate::store::{StoreArgs, redact};

/// `agentroom token …`.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Issue a token for a principal in a Room; its text is printed once and never again.
    Issue {
        /// The Room it acts in (it never reaches another).
        #[arg(long, value_parser = RoomId::parse)]
        room: RoomId,
        /// Whom it authenticates; their roles come from their membership in the Room.
        #[arg(long, value_parser = PrincipalId::parse)]
        principal: PrincipalId,
        /// How long it is valid: a whole number with `s`, `m`, `h` or `d` (`90d`, `12h`);
        /// never expires when omitted.
        #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
        expires_in: Option<Duration>,
        /// A note for people (`laptop`, `ci`), never a secret.
        #[arg(long)]
        label: Option<String>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Revoke a token by its id (the 16 hex digits after `ar_`); it stops authenticating.
    Revoke {
        /// The token's id.
        #[arg(value_parser = TokenId::parse)]
        token_id: TokenId,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// List a Room's tokens (ids, principals, expiry, revocation; never secrets).
    List {
        /// The Room.
        #[arg(long, value_parser = RoomId::parse)]
        room: RoomId,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        store: StoreArgs,
    },
}

/// Parses `30s`, `15m`, `12h`, `90d` (a positive whole number and a unit).
fn parse_duration(text: &str) -> Result<Duration, String> {
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a duration like 30s, 15m, 12h or 90d"))?;
    let seconds = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3_600,
        "d" => 86_400,
        _ => return Err(format!("`{text}`: the unit must be s, m, h or d")),
    };
    if number == 0 {
        return Err(format!("`{text}`: a token must be valid for some time"));
    }
    number
        .checked_mul(seconds)
        .filter(|s| *s <= 100 * 365 * 86_400)
        .map(Duration::from_secs)
        .ok_or_else(|| format!("`{text}` is longer than 100 years"))
}

/// The service over the store of `store`, which must exist already.
async fn open(store: &StoreArgs) -> anyhow::Result<Coordinator> {
    let store = open_store(store).await?;
    Ok(Coordinator::builder(store, CoordinatorConfig::for_command("agentroom-token")).build())
}

async fn open_store(store: &StoreArgs) -> anyhow::Result<Arc<dyn Store>> {
    if let Some(url) = &store.database_url {
        let pg = agentroom_store_postgres::PgRooms::connect(url)
            .await
            .with_context(|| format!("opening {}", redact(url)))?;
        return Ok(Arc::new(pg));
    }
    let path = store.sqlite_path();
    if !path.exists() {
        bail!(
            "no database at {}: create it with `agentroom migrate up`",
            path.display()
        );
    }
    let durability = if store.fsync {
        Durability::PowerLoss
    } else {
        Durability::ProcessCrash
    };
    let sqlite = SqliteRooms::open(&path, durability)
        .with_context(|| format!("opening {}", path.display()))?;
    Ok(Arc::new(sqlite))
}

/// Runs the command and returns what it prints.
pub(crate) async fn run(command: Command) -> anyhow::Result<String> {
    let mut out = String::new();
    match command {
        Command::Issue {
            room,
            principal,
            expires_in,
            label,
            json,
            store,
        } => {
            let tokens = open(&store).await?;
            let now = tokens.now();
            let expires_at = expires_in.map(|d| {
                let millis = i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
                Timestamp::from_millis(now.as_millis().saturating_add(millis))
            });
            let issued = tokens
                .issue_token(NewToken {
                    room,
                    principal,
                    created_at: now,
                    expires_at,
                    label,
                })
                .await?;
            let record = &issued.record;
            if json {
                let mut value = json!(record);
                value["token"] = json!(issued.text());
                writeln!(out, "{value}")?;
            } else {
                writeln!(
                    out,
                    "token {} for {} in room {}, {}",
                    record.id,
                    record.principal,
                    record.room,
                    match record.expires_at {
                        Some(at) => format!("expires {}", utc(at)),
                        None => "never expires".to_owned(),
                    }
                )?;
                writeln!(out, "{}", issued.text())?;
                writeln!(
                    out,
                    "(shown once: keep it secret; revoke it with `agentroom token revoke {}`)",
                    record.id
                )?;
            }
        }
        Command::Revoke { token_id, store } => {
            let tokens = open(&store).await?;
            let record = tokens.revoke_token(&token_id).await?;
            writeln!(
                out,
                "revoked token {} ({} in room {}) at {}",
                record.id,
                record.principal,
                record.room,
                record.revoked_at.map_or_else(|| "-".to_owned(), utc)
            )?;
        }
        Command::List { room, json, store } => {
            let tokens = open(&store).await?;
            let records = tokens.tokens(&room).await?;
            if json {
                writeln!(out, "{}", serde_json::to_string(&records)?)?;
            } else {
                table(&mut out, &records)?;
            }
        }
    }
    Ok(out)
}

fn table(out: &mut String, records: &[TokenRecord]) -> anyhow::Result<()> {
    writeln!(
        out,
        "{:<16}  {:<16}  {:<20}  {:<20}  {:<20}  label",
        "id", "principal", "created", "expires", "revoked"
    )?;
    for record in records {
        writeln!(
            out,
            "{:<16}  {:<16}  {:<20}  {:<20}  {:<20}  {}",
            record.id,
            record.principal,
            utc(record.created_at),
            record.expires_at.map_or_else(|| "never".to_owned(), utc),
            record.revoked_at.map_or_else(|| "-".to_owned(), utc),
            record.label.as_deref().unwrap_or("")
        )?;
    }
    Ok(())
}

/// A timestamp as `YYYY-MM-DDTHH:MM:SSZ` (UTC, proleptic Gregorian calendar).
pub(crate) fn utc(at: Timestamp) -> String {
    let seconds = at.as_millis().div_euclid(1000);
    let days = seconds.div_euclid(86_400);
    let rest = seconds.rem_euclid(86_400);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rest / 3_600,
        rest % 3_600 / 60,
        rest % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_a_number_and_a_unit() {
        assert_eq!(parse_duration("90d"), Ok(Duration::from_secs(90 * 86_400)));
        assert_eq!(parse_duration("12h"), Ok(Duration::from_secs(12 * 3_600)));
        assert_eq!(parse_duration("15m"), Ok(Duration::from_secs(900)));
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        for bad in ["", "d", "12", "12w", "-1d", "0h", "1.5h", "999999999999d"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn timestamps_print_as_utc() {
        assert_eq!(utc(Timestamp::from_millis(0)), "1970-01-01T00:00:00Z");
        assert_eq!(
            utc(Timestamp::from_millis(1_709_210_096_000)),
            "2024-02-29T12:34:56Z"
        );
    }
}
