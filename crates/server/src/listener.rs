//! The accept loop of [`crate::serve`]: connection hygiene, so that no client can hold the
//! host's connections or descriptors (issue 17).
//!
//! - **Header read.** A new connection must deliver its first request's headers within
//!   [`ConnectionLimits::header_read_timeout`], else it is closed.
//! - **Idle (keep-alive).** After a response, the next request's headers must arrive within
//!   [`ConnectionLimits::idle_timeout`] (hyper's header-read timer, which runs from the moment
//!   a connection waits for a request), else the connection is closed.
//! - **Body read.** A request body must arrive whole within
//!   [`ConnectionLimits::body_read_timeout`] of its headers: a reader of the body then gets an
//!   error that the HTTP edge answers with `408 body_timeout` and `Connection: close`.
//! - **Connections.** At most [`ConnectionLimits::max_connections`] are served at once. One
//!   more is still accepted, and the connection idle the longest (no request in progress) is
//!   closed to make room: so a flood of idle connections never keeps `GET /health`, or any
//!   request, from being served. When every connection has a request in progress, the new one
//!   is answered `503` and closed. When the process runs out of descriptors, accepting sheds an
//!   idle connection the same way and tries again.
//!
//! A graceful stop closes idle connections at once and lets requests in progress finish
//! (open streams end by [`crate::state::Stopping`]).

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes, HttpBody};
use axum::http::{Request, Response};
use http_body_util::BodyExt;
use hyper::body::{Frame, Incoming, SizeHint};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, watch};
use tokio::task::JoinSet;

use crate::config::ConnectionLimits;

/// Why a request body stopped: it did not arrive whole within the body-read timeout. The
/// HTTP edge finds it in a body error's sources and answers 408.
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive within {0:?}")]
pub(crate) struct BodyTimedOut(pub(crate) Duration);

/// Whether `error` (a body read's error) is, or is caused by, [`BodyTimedOut`].
pub(crate) fn timed_out(error: &(dyn std::error::Error + 'static)) -> Option<Duration> {
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(error) = next {
        if let Some(BodyTimedOut(after)) = error.downcast_ref::<BodyTimedOut>() {
            return Some(*after);
        }
        next = error.source();
    }
    None
}

/// A request body that fails with [`BodyTimedOut`] once its deadline passes.
struct Deadline {
    inner: Incoming,
    after: Duration,
    sleep: Pin<Box<tokio::time::Sleep>>,
}

impl HttpBody for Deadline {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if let Poll::Ready(frame) = Pin::new(&mut self.inner).poll_frame(cx) {
            return Poll::Ready(frame.map(|frame| frame.map_err(Into::into)));
        }
        if self.sleep.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Some(Err(Box::new(BodyTimedOut(self.after)))));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// One served connection, as the accept loop and its sheds see it.
#[derive(Debug)]
struct Conn {
    id: u64,
    state: Mutex<ConnState>,
    /// Told when the connection is to be closed now (shed, or its first request is late).
    close: Notify,
}

#[derive(Debug)]
struct ConnState {
    /// Requests whose response has not been written whole yet.
    in_flight: usize,
    /// Requests begun on it.
    requests: u64,
    /// When it was accepted or last finished a response.
    since: Instant,
}

impl Conn {
    fn lock(&self) -> MutexGuard<'_, ConnState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether no request is in progress, and since when.
    fn idle_since(&self) -> Option<Instant> {
        let state = self.lock();
        (state.in_flight == 0).then_some(state.since)
    }
}

/// Held by a request from its headers until its response is written whole (or dropped).
struct InFlight(Arc<Conn>);

impl InFlight {
    fn begin(conn: &Arc<Conn>) -> Self {
        let mut state = conn.lock();
        state.in_flight += 1;
        state.requests += 1;
        drop(state);
        InFlight(Arc::clone(conn))
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut state = self.0.lock();
        state.in_flight = state.in_flight.saturating_sub(1);
        state.since = Instant::now();
    }
}

/// Every connection served now.
#[derive(Debug, Default)]
struct Registry {
    conns: Mutex<HashMap<u64, Arc<Conn>>>,
    next: AtomicU64,
}

impl Registry {
    fn lock(&self) -> MutexGuard<'_, HashMap<u64, Arc<Conn>>> {
        self.conns.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn add(&self) -> (Arc<Conn>, usize) {
        let conn = Arc::new(Conn {
            id: self.next.fetch_add(1, Ordering::Relaxed),
            state: Mutex::new(ConnState {
                in_flight: 0,
                requests: 0,
                since: Instant::now(),
            }),
            close: Notify::new(),
        });
        let mut conns = self.lock();
        conns.insert(conn.id, Arc::clone(&conn));
        (conn, conns.len())
    }

    fn remove(&self, id: u64) {
        self.lock().remove(&id);
    }

    /// Closes the connection idle the longest, other than `keep`; whether there was one.
    fn shed_one(&self, keep: Option<u64>) -> bool {
        let victim = self
            .lock()
            .values()
            .filter(|conn| Some(conn.id) != keep)
            .filter_map(|conn| conn.idle_since().map(|since| (since, Arc::clone(conn))))
            .min_by_key(|(since, _)| *since)
            .map(|(_, conn)| conn);
        match victim {
            Some(conn) => {
                // Removed at once, so the next shed picks another even before its task ends.
                self.remove(conn.id);
                conn.close.notify_one();
                true
            }
            None => false,
        }
    }

    fn len(&self) -> usize {
        self.lock().len()
    }
}

/// Serves `router` on `listener` within `limits` until `stop` turns true, then waits for the
/// connections to finish (see the module docs).
pub(crate) async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ConnectionLimits,
    mut stop: watch::Receiver<bool>,
) -> std::io::Result<()> {
    let registry = Arc::new(Registry::default());
    let mut tasks = JoinSet::new();
    let max = limits.connections();
    loop {
        while tasks.try_join_next().is_some() {}
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stop.wait_for(|stop| *stop) => break,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(error) => {
                if out_of_descriptors(&error) {
                    let shed = registry.shed_one(None);
                    tracing::warn!(
                        %error,
                        connections = registry.len(),
                        shed,
                        "out of file descriptors: an idle connection is closed to accept"
                    );
                    let pause = if shed { 5 } else { 100 };
                    tokio::time::sleep(Duration::from_millis(pause)).await;
                } else {
                    // Per-connection errors (a client that reset before accept): go on.
                    tracing::debug!(%error, "accept failed");
                }
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let (conn, count) = registry.add();
        if count > max && !registry.shed_one(Some(conn.id)) {
            registry.remove(conn.id);
            tracing::warn!(
                max,
                "every connection has a request in progress: a new one is refused"
            );
            tasks.spawn(refuse(stream));
            continue;
        }
        tasks.spawn(serve_connection(
            stream,
            router.clone(),
            limits.clone(),
            conn,
            Arc::clone(&registry),
            stop.clone(),
        ));
    }
    drop(listener);
    while tasks.join_next().await.is_some() {}
    Ok(())
}

/// EMFILE or ENFILE: the process (or the system) has no descriptor for the new connection.
fn out_of_descriptors(error: &std::io::Error) -> bool {
    // 24 = EMFILE, 23 = ENFILE on Linux and the BSDs.
    matches!(error.raw_os_error(), Some(23 | 24))
}

/// Answers a connection the host has no room for: `503` and close.
async fn refuse(mut stream: TcpStream) {
    let body = r#"{"error":"too_many_connections","message":"the server serves as many connections as it may, each with a request in progress; try again"}"#;
    let response = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
         retry-after: 1\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        let _ = stream.write_all(response.as_bytes()).await;
        let _ = stream.shutdown().await;
    })
    .await;
}

async fn serve_connection(
    stream: TcpStream,
    router: Router,
    limits: ConnectionLimits,
    conn: Arc<Conn>,
    registry: Arc<Registry>,
    mut stop: watch::Receiver<bool>,
) {
    let tower = TowerToHyperService::new(router);
    let body_timeout = limits.body_read_timeout();
    let tracked = Arc::clone(&conn);
    let service = hyper::service::service_fn(move |request: Request<Incoming>| {
        let in_flight = InFlight::begin(&tracked);
        let request = request.map(|inner| {
            Body::new(Deadline {
                inner,
                after: body_timeout,
                sleep: Box::pin(tokio::time::sleep(body_timeout)),
            })
        });
        let response = hyper::service::Service::call(&tower, request);
        async move {
            let response: Response<Body> = match response.await {
                Ok(response) => response,
                Err(never) => match never {},
            };
            // The request stays in progress until its body is written whole (a stream's
            // connection is never idle).
            Ok::<_, Infallible>(response.map(|body| {
                Body::new(body.map_frame(move |frame| {
                    let _held = &in_flight;
                    frame
                }))
            }))
        }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.idle());
    let connection = builder.serve_connection(TokioIo::new(stream), service);
    tokio::pin!(connection);
    let first_request = tokio::time::sleep(limits.header_read());
    tokio::pin!(first_request);
    let mut first_pending = true;
    let mut stopping = false;
    loop {
        tokio::select! {
            result = connection.as_mut() => {
                if let Err(error) = result {
                    tracing::debug!(%error, "connection ended");
                }
                break;
            }
            () = conn.close.notified() => {
                tracing::debug!("connection closed to make room");
                break;
            }
            () = &mut first_request, if first_pending => {
                first_pending = false;
                if conn.lock().requests == 0 {
                    tracing::debug!("no request headers in time: connection closed");
                    break;
                }
            }
            _ = stop.wait_for(|stop| *stop), if !stopping => {
                stopping = true;
                if conn.idle_since().is_some() {
                    break;
                }
                connection.as_mut().graceful_shutdown();
            }
        }
    }
    registry.remove(conn.id);
}
