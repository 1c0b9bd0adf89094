//! `agentroom event post --room R --as PRINCIPAL TEXT`: persists a message to a Room, authored
//! by PRINCIPAL, and prints its id. It is only persisted (T1); a running `agentroom serve`
//! accepts it by id from the store, and one that starts later accepts it on start. Until the
//! HTTP API authenticates sessions, whoever runs this command on the store speaks for
//! PRINCIPAL, which must be a current member of the Room.

use std::sync::Arc;

use agentroom_coordinator::{Coordinator, CoordinatorConfig, CoordinatorError, Store};
use agentroom_domain::ids::{PrincipalId, RoomId};
use anyhow::bail;
use clap::Subcommand;

use crate::store::{Missing, StoreArgs};

/// `agentroom event …`
#[derive(Subcommand)]
pub(crate) enum Command {
    /// Persist a message to a Room and print its id; `serve` accepts it.
    Post {
        /// The Room.
        #[arg(long, value_parser = RoomId::parse)]
        room: RoomId,
        /// Who says it: a current member of the Room (only the owner's messages can start
        /// objectives, O9).
        #[arg(long = "as", value_name = "PRINCIPAL", value_parser = PrincipalId::parse)]
        author: PrincipalId,
        /// The message.
        text: String,
        #[command(flatten)]
        store: StoreArgs,
    },
}

/// Runs `command`; returns what it prints.
pub(crate) async fn run(command: Command) -> anyhow::Result<String> {
    let Command::Post {
        room,
        author,
        text,
        store,
    } = command;
    if text.trim().is_empty() {
        bail!("the message is empty; nothing was posted");
    }
    let rooms = store.open_rooms(Missing::Refuse).await?;
    post(rooms, room, author, text).await
}

async fn post(
    store: Arc<dyn Store>,
    room: RoomId,
    author: PrincipalId,
    text: String,
) -> anyhow::Result<String> {
    let coordinator =
        Coordinator::builder(store, CoordinatorConfig::for_command("agentroom-event")).build();
    match coordinator.record_message(&room, &author, text).await {
        Ok(id) => Ok(format!("{id}\n")),
        Err(CoordinatorError::UnknownRoom(room)) => {
            bail!("no room {room}: create it with `agentroom room create`; nothing was posted")
        }
        Err(CoordinatorError::NotMember { principal, room }) => {
            bail!("{principal} is not a member of room {room}; nothing was posted")
        }
        Err(err) => Err(err.into()),
    }
}
