//! `agentroom event post --room R --as PRINCIPAL TEXT`: persists a message to a Room, authored
//! by PRINCIPAL, and prints its id. It is only persisted (T1); a running `agentroom serve`
//! accepts it by id from the store, and one that starts later accepts it on start. Until the
//! HTTP API authenticates sessions, whoever runs this command on the store speaks for
//! PRINCIPAL, which must be a current member of the Room.

use std::sync::Arc;

use agentroom_coordinator::Store;
use agentroom_domain::event::{Event, EventBody};
use agentroom_domain::ids::{EventId, PrincipalId, RoomId};
use agentroom_ports::{Clock, EventAppend, SystemClock};
use anyhow::{anyhow, bail};
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
    let Some(stored) = store.load(&room).await? else {
        bail!("no room {room}: create it with `agentroom room create`; nothing was posted");
    };
    if stored.state.members().roles_of(&author).next().is_none() {
        bail!("{author} is not a member of room {room}; nothing was posted");
    }
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| anyhow!("no randomness for an event id: {e}"))?;
    let event = Event {
        id: EventId::from_uuid(uuid::Builder::from_random_bytes(bytes).into_uuid()),
        room,
        author,
        body: EventBody::OwnerMessage { text },
    };
    match store.append_event(&event, SystemClock.now()).await? {
        EventAppend::Inserted => Ok(format!("{}\n", event.id)),
        // A fresh random id never collides but by a bug.
        EventAppend::Existed => bail!("event {} exists already", event.id),
    }
}
