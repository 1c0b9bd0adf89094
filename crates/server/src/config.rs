//! What an operator may tune about the HTTP edge: the Room sessions act in, the bounds on
//! A2E sessions (how long an idle one lives, how much output one may hold, how many exist, how
//! many one principal may hold) and on connections ([`ConnectionLimits`]: timeouts and how
//! many are served at once).

use std::time::Duration;

use agentroom_planning::RoomId;

/// How long a session with no `/send` and no connected `/stream` lives. Above the SDK
/// client's longest reconnect backoff (30 s), so a client that is only reconnecting keeps it.
pub const DEFAULT_SESSION_IDLE_TIMEOUT: Duration = Duration::from_secs(300);
/// Messages one session may hold: accepted but unanswered, plus replies not yet streamed.
/// The SDK client's own receive queue holds 1,000.
pub const DEFAULT_SESSION_BUFFER: usize = 1024;
/// Sessions that may exist at once.
pub const DEFAULT_MAX_SESSIONS: usize = 4096;
/// Sessions one principal may hold at once (of all the Rooms it is a member of, counted per
/// Room and principal): one principal filling its share never refuses another's session.
pub const DEFAULT_SESSIONS_PER_PRINCIPAL: usize = 64;
/// Notification streams (`GET /v1/rooms/{room}/notifications`) one principal of one Room
/// may hold open at once.
pub const DEFAULT_STREAMS_PER_PRINCIPAL: usize = 16;

/// How long a new connection may take to send its first request's headers.
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a request body may take to arrive whole after its headers.
pub const DEFAULT_BODY_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a kept-alive connection may wait for its next request's headers.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// Connections served at once (beyond it, the one idle the longest is closed for a new one).
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;

/// The connection hygiene of [`crate::serve_with`] (see `listener` for what each does).
/// Zero durations and bounds are raised to their minimum where they are used (1 ms, one
/// connection), so every value is usable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// A new connection must deliver its first request's headers within this, else it is
    /// closed.
    pub header_read_timeout: Duration,
    /// A request body must arrive whole within this after its headers, else the request is
    /// answered `408 body_timeout` and the connection closed.
    pub body_read_timeout: Duration,
    /// After a response, a kept-alive connection must deliver the next request's headers
    /// within this, else it is closed.
    pub idle_timeout: Duration,
    /// The most connections served at once; one more closes the connection idle the longest
    /// (503 for the new one when every connection has a request in progress).
    pub max_connections: usize,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        Self {
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT,
            body_read_timeout: DEFAULT_BODY_READ_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
        }
    }
}

impl ConnectionLimits {
    pub(crate) fn header_read(&self) -> Duration {
        self.header_read_timeout.max(Duration::from_millis(1))
    }

    pub(crate) fn body_read_timeout(&self) -> Duration {
        self.body_read_timeout.max(Duration::from_millis(1))
    }

    pub(crate) fn idle(&self) -> Duration {
        self.idle_timeout.max(Duration::from_millis(1))
    }

    pub(crate) fn connections(&self) -> usize {
        self.max_connections.max(1)
    }
}

/// The settings of [`crate::router`].
///
/// Zero bounds make no sense and are raised to their minimum where they are used (a buffer
/// of 1, one session, an idle timeout of 1 ms), so every value of this struct is usable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    /// The Room every session acts in, as its owner, with [`crate::router`] (the embedded
    /// default is `local`). With [`crate::authenticated_router`], the Room of the sessions
    /// made without an `Authorization` header, which their handshake's `auth_token` binds to a
    /// principal of this Room; sessions made with the header act in the token's Room.
    pub room: RoomId,
    /// A session with no `/send` and no connected `/stream` for this long is expired: its
    /// id then answers 404.
    pub session_idle_timeout: Duration,
    /// The most messages one session may hold (accepted but not yet answered, plus replies
    /// not yet delivered on `/stream`). When full, `/send` answers 429 and processes nothing.
    pub session_buffer: usize,
    /// The most sessions at once. When reached (after expiring idle ones), `POST /session`
    /// answers 503.
    pub max_sessions: usize,
    /// The most sessions one principal of one Room may hold at once (unbound sessions, made
    /// without a header, count as nobody's and share half of `max_sessions`). When reached
    /// (after expiring idle ones), its `POST /session` answers 429 naming the limit, and
    /// nobody else is refused for it.
    pub sessions_per_principal: usize,
}

impl ServerConfig {
    /// The defaults, acting in `room`.
    pub fn new(room: RoomId) -> Self {
        Self {
            room,
            session_idle_timeout: DEFAULT_SESSION_IDLE_TIMEOUT,
            session_buffer: DEFAULT_SESSION_BUFFER,
            max_sessions: DEFAULT_MAX_SESSIONS,
            sessions_per_principal: DEFAULT_SESSIONS_PER_PRINCIPAL,
        }
    }

    pub(crate) fn idle_timeout(&self) -> Duration {
        self.session_idle_timeout.max(Duration::from_millis(1))
    }

    pub(crate) fn buffer(&self) -> usize {
        self.session_buffer.max(1)
    }

    pub(crate) fn sessions(&self) -> usize {
        self.max_sessions.max(1)
    }

    pub(crate) fn per_principal(&self) -> usize {
        self.sessions_per_principal.max(1)
    }
}
