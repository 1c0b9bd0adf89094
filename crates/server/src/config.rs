//! What an operator may tune about the HTTP edge: the Room sessions act in and the bounds on
//! A2E sessions (how long an idle one lives, how much output one may hold, how many exist).

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
}

impl ServerConfig {
    /// The defaults, acting in `room`.
    pub fn new(room: RoomId) -> Self {
        Self {
            room,
            session_idle_timeout: DEFAULT_SESSION_IDLE_TIMEOUT,
            session_buffer: DEFAULT_SESSION_BUFFER,
            max_sessions: DEFAULT_MAX_SESSIONS,
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
}
