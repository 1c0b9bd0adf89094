//! `agentroom planning --stdio`: the A2E stdio transport. One JSON message per stdin line,
//! one reply line per answered message on stdout and nothing else there, serving on after
//! every error, ending at EOF or `shutdown`. A line longer than the message limit is skipped
//! to its end and answered with a `schema_violation`, so the buffer stays bounded.

use std::sync::Arc;

use agentroom_domain::ids::RoomId;
use agentroom_planning::limits::MAX_MESSAGE_BYTES;
use agentroom_planning::{PlanningService, Session, Step, SystemAmbient};
use anyhow::Context as _;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt, BufReader, BufWriter};

use crate::store::StoreArgs;

/// Serves one session on stdin/stdout until EOF or `shutdown`.
pub(crate) async fn run(store: &StoreArgs, room: RoomId) -> anyhow::Result<()> {
    let repo = store.open_planning().await?;
    let service = Arc::new(PlanningService::new(repo, Arc::new(SystemAmbient)));
    // No randomness, no session: `error: …` on stderr and a failing exit, before a line is
    // read, rather than serve under a guessable id.
    let session = Session::new(service, room).context("cannot start a planning session")?;
    let stdin = BufReader::with_capacity(64 * 1024, tokio::io::stdin());
    let stdout = BufWriter::with_capacity(64 * 1024, tokio::io::stdout());
    serve(&session, stdin, stdout).await?;
    Ok(())
}

/// One line read from the client.
enum Line {
    /// A complete message (without its newline).
    Message(Vec<u8>),
    /// A line over the limit, skipped; how many bytes it had.
    TooLarge(usize),
    /// End of input.
    Eof,
}

/// Reads the next line, keeping at most `MAX_MESSAGE_BYTES` of it in memory.
async fn next_line<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    line: &mut Vec<u8>,
) -> std::io::Result<Line> {
    line.clear();
    let mut skipped = 0usize;
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            // EOF: a last line without a newline is still a message.
            return Ok(match (skipped, line.is_empty()) {
                (0, true) => Line::Eof,
                (0, false) => Line::Message(std::mem::take(line)),
                (n, _) => Line::TooLarge(n),
            });
        }
        let (chunk, done) = match available.iter().position(|b| *b == b'\n') {
            Some(end) => (&available[..end], Some(end + 1)),
            None => (available, None),
        };
        if skipped > 0 || line.len() + chunk.len() > MAX_MESSAGE_BYTES {
            skipped += line.len() + chunk.len();
            line.clear();
        } else {
            line.extend_from_slice(chunk);
        }
        let consumed = done.unwrap_or(available.len());
        reader.consume(consumed);
        if done.is_some() {
            return Ok(if skipped > 0 {
                Line::TooLarge(skipped)
            } else {
                Line::Message(std::mem::take(line))
            });
        }
    }
}

/// The most messages one group commit answers: bounds the replies held back and the time
/// the database's write lock is held.
const GROUP: usize = 256;

/// The transport loop, over any reader and writer (the tests drive it with pipes too). The
/// lines a pipelining client has already sent (whole lines in the buffer) are answered as one
/// group whose writes commit together ([`Session::steps`]); a reply goes out only after the
/// commit that made what it acknowledges durable.
pub(crate) async fn serve<R, W>(
    session: &Session,
    mut input: BufReader<R>,
    mut output: W,
) -> std::io::Result<()>
where
    R: tokio::io::AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut line = Vec::with_capacity(4096);
    let mut group: Vec<Line> = Vec::with_capacity(GROUP);
    'serving: loop {
        group.clear();
        group.push(next_line(&mut input, &mut line).await?);
        while group.len() < GROUP && input.buffer().contains(&b'\n') {
            group.push(next_line(&mut input, &mut line).await?);
        }
        let messages: Vec<&[u8]> = group
            .iter()
            .filter_map(|l| match l {
                Line::Message(bytes) if !bytes.trim_ascii().is_empty() => Some(bytes.trim_ascii()),
                _ => None,
            })
            .collect();
        let mut steps = if messages.is_empty() {
            Vec::new()
        } else {
            session.steps(&messages).await
        }
        .into_iter();
        for l in &group {
            let reply = match l {
                Line::Eof => break 'serving,
                Line::TooLarge(bytes) => Some(session.too_large(*bytes)),
                Line::Message(bytes) if bytes.trim_ascii().is_empty() => None,
                Line::Message(_) => match steps.next() {
                    Some(Step::Reply(reply)) => Some(reply),
                    Some(Step::Silent) => None,
                    // `shutdown`, or a message after it (not answered).
                    Some(Step::Close) | None => break 'serving,
                },
            };
            if let Some(reply) = reply {
                output.write_all(reply.as_bytes()).await?;
                output.write_all(b"\n").await?;
            }
        }
        // Every reply is flushed before we could wait for more input; while whole lines are
        // already buffered, their replies go out together.
        if !input.buffer().contains(&b'\n') {
            output.flush().await?;
        }
    }
    output.flush().await?;
    Ok(())
}
