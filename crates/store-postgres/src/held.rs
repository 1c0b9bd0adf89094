//! Connections kept open between the statements of the hot path (a Room's commit and load, a
//! call's heartbeat and receipt), handed out without a round trip.
//!
//! sqlx's pool pings a connection when it takes it back (always) and when it hands it out
//! (by default): two extra round trips per statement, each about as long as the statement's
//! own on loopback, and with a one-connection pool the next statement waits for the release
//! ping. Here a statement borrows a connection from a stack of idle ones and gives it back
//! itself when it ends cleanly; nothing is sent but the statement.
//!
//! What the pings were for is kept:
//! - A connection comes back only after a statement that ended with an answer from the
//!   server (rows, or an error the server reported that leaves the session open: the
//!   protocol is then in step, and sqlx drains to the next `ReadyForQuery` before its next
//!   statement). After a transport error, a FATAL from the server (a terminated backend, a
//!   shutdown), or when the borrowing future is dropped mid-statement (a timeout), the
//!   connection is closed, never reused.
//! - A transport error closes every idle connection too: they share the server that just
//!   failed (a restart, a network cut), so the next statement connects afresh instead of
//!   finding each dead one in turn.
//! - A connection idle longer than [`STALE_AFTER`] is pinged before use (a server may have
//!   closed it meanwhile); busy connections never are.
//!
//! At most as many connections are open here as the pool may open (a semaphore); the pool
//! keeps serving every other statement.
//!
//! A connection can be dead before a statement is sent on it (its backend terminated with
//! `pg_terminate_backend`, the server restarted) and nothing tells us until the statement's
//! answer is the error. [`Held::rerunnable`] runs a statement that is safe to run twice once
//! more on a fresh connection after such a broken-connection error; see [`broken`] for which
//! errors those are and [`Held::rerunnable`] for which statements. (The pool's own statements
//! need none of this: sqlx pings a pooled connection before it hands it out.)

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use sqlx::Connection;
use sqlx::postgres::{PgConnectOptions, PgConnection, PgDatabaseError, PgPool, PgSeverity};
use tokio::sync::{Semaphore, SemaphorePermit};

/// A connection idle this long is pinged before it is used again.
pub(crate) const STALE_AFTER: Duration = Duration::from_secs(10);

/// The idle connections and the permits to open more.
#[derive(Debug, Clone)]
pub(crate) struct Held {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    options: PgConnectOptions,
    idle: Mutex<Vec<Idle>>,
    permits: Semaphore,
}

#[derive(Debug)]
struct Idle {
    conn: PgConnection,
    since: Instant,
}

/// A borrowed connection. [`Lent::finish`] gives it back when the statement's result allows;
/// dropped any other way (a dropped future), it is closed with it.
pub(crate) struct Lent<'a> {
    conn: PgConnection,
    home: &'a Inner,
    _permit: SemaphorePermit<'a>,
}

impl Held {
    /// Connections like `pool`'s (same options), at most as many as it may open.
    pub(crate) fn like(pool: &PgPool) -> Self {
        let max = usize::try_from(pool.options().get_max_connections()).unwrap_or(1);
        Self {
            inner: Arc::new(Inner {
                options: (*pool.connect_options()).clone(),
                idle: Mutex::new(Vec::new()),
                permits: Semaphore::new(max.max(1)),
            }),
        }
    }

    /// Borrows an idle connection, or opens one.
    pub(crate) async fn lend(&self) -> Result<Lent<'_>, sqlx::Error> {
        let permit = self
            .inner
            .permits
            .acquire()
            .await
            .map_err(|_| sqlx::Error::PoolClosed)?;
        loop {
            let idle = self
                .inner
                .idle
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .pop();
            let Some(mut idle) = idle else {
                let conn = PgConnection::connect_with(&self.inner.options).await?;
                return Ok(Lent {
                    conn,
                    home: &self.inner,
                    _permit: permit,
                });
            };
            if idle.since.elapsed() >= STALE_AFTER && idle.conn.ping().await.is_err() {
                // Dead: try the next idle one, or open a new one.
                continue;
            }
            return Ok(Lent {
                conn: idle.conn,
                home: &self.inner,
                _permit: permit,
            });
        }
    }

    /// Runs `statement` on a held connection; when its answer is a broken-connection error
    /// ([`broken`]), runs it once more on a connection opened afresh, and returns that
    /// answer.
    ///
    /// Only for statements that are safe to run twice: those that only read, and writes a
    /// second run leaves as the first did (a heartbeat sets the same lease expiry from the
    /// server's clock, fenced on the same generation). Why it has to be this and not "a
    /// statement that never ran": a broken connection does not say whether the statement got
    /// through. The common case is a backend terminated while its connection sat idle here,
    /// where the statement was never executed; but a backend terminated while it ran the
    /// statement gives the very same error (FATAL 57P01), and between its commit and its
    /// answer the statement has run. So a statement that may have changed something before
    /// the connection broke — a Room's commit, a receipt, an uncertain mark, whose second run
    /// would answer "conflict" or "fenced" for a write that in fact went through — is never
    /// run again here: its caller gets the error, and the compare-and-swap, the fencing and
    /// recovery (D1, D2) decide from what was stored. Since a broken connection also drops
    /// every idle one ([`Lent::finish`]), the statement after a rerun read finds fresh
    /// connections: a Room's load precedes its commit, so the commit of the first request
    /// after a termination runs on a live connection.
    pub(crate) async fn rerunnable<T, F, Fut>(&self, mut statement: F) -> Result<T, sqlx::Error>
    where
        F: FnMut(PgConnection) -> Fut,
        Fut: std::future::Future<Output = (PgConnection, Result<T, sqlx::Error>)>,
    {
        let lent = self.lend().await?;
        let Lent {
            conn,
            home,
            _permit,
        } = lent;
        let (conn, result) = statement(conn).await;
        let was_broken = matches!(&result, Err(error) if broken(error));
        let first = Lent {
            conn,
            home,
            _permit,
        };
        if !was_broken {
            return first.finish(result);
        }
        // Closes this connection and every idle one, keeping the permit for the fresh one.
        let Lent {
            conn,
            home,
            _permit,
        } = first;
        drop(conn);
        home.idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        if let Err(error) = &result {
            tracing::warn!(%error, "a held connection was broken; running the statement again on a fresh one");
        }
        let conn = PgConnection::connect_with(&home.options).await?;
        let (conn, result) = statement(conn).await;
        Lent {
            conn,
            home,
            _permit,
        }
        .finish(result)
    }

    /// Closes the idle connections (e.g. before dropping the database they are on).
    pub(crate) async fn close(&self) {
        let idle = std::mem::take(
            &mut *self
                .inner
                .idle
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        for idle in idle {
            // Closing politely is best effort: the server ends the session either way.
            let _ = idle.conn.close().await;
        }
    }
}

impl Lent<'_> {
    /// The connection, to run one statement on.
    pub(crate) fn conn(&mut self) -> &mut PgConnection {
        &mut self.conn
    }

    /// Ends the loan with the statement's `result`: the connection goes back when the server
    /// answered; after a transport error it is closed with every idle one.
    pub(crate) fn finish<T>(self, result: Result<T, sqlx::Error>) -> Result<T, sqlx::Error> {
        let Lent { conn, home, .. } = self;
        let mut idle = home.idle.lock().unwrap_or_else(PoisonError::into_inner);
        let reusable = match &result {
            Ok(_) | Err(sqlx::Error::RowNotFound) => true,
            Err(sqlx::Error::Database(error)) => !ends_the_session(&**error),
            Err(_) => false,
        };
        if reusable {
            idle.push(Idle {
                conn,
                since: Instant::now(),
            });
        } else {
            drop(conn);
            idle.clear();
        }
        result
    }
}

/// Whether `error` says the connection itself is gone: an I/O error on its socket (reset,
/// closed, end of stream) or an error with which the server ended the session
/// ([`ends_the_session`]). Any other error is the server's answer to the statement on a live
/// connection, and running it again would only answer the same.
pub(crate) fn broken(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::Io(_) => true,
        sqlx::Error::Database(error) => ends_the_session(&**error),
        _ => false,
    }
}

/// Whether the server ended the session with `error`: a FATAL or PANIC (e.g. the backend
/// was terminated, the server is shutting down) or a connection exception (class 08).
/// Other errors the server reports leave the session usable.
fn ends_the_session(error: &dyn sqlx::error::DatabaseError) -> bool {
    let fatal = error
        .try_downcast_ref::<PgDatabaseError>()
        .is_some_and(|pg| matches!(pg.severity(), PgSeverity::Fatal | PgSeverity::Panic));
    fatal || error.code().is_some_and(|code| code.starts_with("08"))
}
