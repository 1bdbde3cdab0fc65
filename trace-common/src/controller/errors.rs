//! The session's states, why a start or a stop was refused, and the codes
//! of a failure.

/// Codes of [`Reply::Failed`](super::Reply::Failed).
pub mod fail {
    /// Anything else: the message says what.
    pub const OTHER: u32 = 0;
    /// Another client's session is active; one session at a time.
    pub const SESSION_ACTIVE: u32 = 1;
    /// This manager runs inside a `trace-cli record` and serves no other
    /// client.
    pub const EMBEDDED: u32 = 2;
    /// The message could not be decoded.
    pub const MALFORMED: u32 = 3;
    /// The request makes no sense in this state of the connection.
    pub const OUT_OF_ORDER: u32 = 4;
    /// The trace configuration cannot be followed.
    pub const BAD_CONFIG: u32 = 5;
    /// Starting the kernel provider failed.
    pub const START_FAILED: u32 = 6;
    /// The session aborted (its output failed, or the kernel could not be
    /// read): an event (txid 0) to the session's owner the moment it
    /// happens, the message saying why (e.g. `writing the trace to /path:
    /// No space left on device (os error 28)`). Nothing more is recorded;
    /// StopTracing answers ABORTED and TerminateTracing fails with this
    /// code and the same cause, as it does when writing the trace's last
    /// records fails.
    pub const ABORTED: u32 = 7;
    /// Follow named a process that does not exist (or has exited).
    pub const NO_SUCH_PROCESS: u32 = 8;
    /// The client may not do this: its user may not read what it asks for
    /// (a snapshot of another user's recording, or of the flight recorder
    /// by anyone but root).
    pub const DENIED: u32 = 9;
    /// The manager turned the connection away, a limit on connections
    /// reached (the message says which); it closes the connection after
    /// this event (txid 0).
    pub const REFUSED: u32 = 10;
}

/// The state of the tracing session (`SessionState`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionState {
    /// Ready for a new session; there is one session at a time.
    Ready,
    /// A session has been initialized.
    Initialized,
    /// Tracing is starting.
    Starting,
    /// Tracing has started.
    Started,
    /// Tracing is stopping.
    Stopping,
    /// Tracing has stopped.
    Stopped,
    /// The session is ending; then the manager is ready again.
    Terminating,
}

impl SessionState {
    /// The protocol value (1 to 7, as in fuchsia.tracing.controller).
    pub const fn value(self) -> u32 {
        match self {
            SessionState::Ready => 1,
            SessionState::Initialized => 2,
            SessionState::Starting => 3,
            SessionState::Started => 4,
            SessionState::Stopping => 5,
            SessionState::Stopped => 6,
            SessionState::Terminating => 7,
        }
    }

    /// The state of a protocol value.
    pub const fn from_value(v: u32) -> Option<Self> {
        Some(match v {
            1 => SessionState::Ready,
            2 => SessionState::Initialized,
            3 => SessionState::Starting,
            4 => SessionState::Started,
            5 => SessionState::Stopping,
            6 => SessionState::Stopped,
            7 => SessionState::Terminating,
            _ => return None,
        })
    }

    /// The state's name, upper case as in the protocol.
    pub const fn name(self) -> &'static str {
        match self {
            SessionState::Ready => "READY",
            SessionState::Initialized => "INITIALIZED",
            SessionState::Starting => "STARTING",
            SessionState::Started => "STARTED",
            SessionState::Stopping => "STOPPING",
            SessionState::Stopped => "STOPPED",
            SessionState::Terminating => "TERMINATING",
        }
    }
}

/// Why StartTracing was refused (`StartError`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StartError {
    /// Tracing hasn't been initialized.
    NotInitialized,
    /// Tracing has already been started.
    AlreadyStarted,
    /// Tracing is being stopped.
    Stopping,
    /// Tracing is being terminated.
    Terminating,
}

impl StartError {
    /// The protocol value (1 to 4).
    pub const fn value(self) -> u32 {
        match self {
            StartError::NotInitialized => 1,
            StartError::AlreadyStarted => 2,
            StartError::Stopping => 3,
            StartError::Terminating => 4,
        }
    }

    /// The error of a protocol value.
    pub const fn from_value(v: u32) -> Option<Self> {
        Some(match v {
            1 => StartError::NotInitialized,
            2 => StartError::AlreadyStarted,
            3 => StartError::Stopping,
            4 => StartError::Terminating,
            _ => return None,
        })
    }
}

impl core::fmt::Display for StartError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            StartError::NotInitialized => "tracing has not been initialized",
            StartError::AlreadyStarted => "tracing has already been started",
            StartError::Stopping => "tracing is being stopped",
            StartError::Terminating => "tracing is being terminated",
        })
    }
}

/// Why StopTracing was refused (`StopError`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopError {
    /// No session: nothing to stop.
    NotInitialized,
    /// Tracing has not started, or has stopped.
    NotStarted,
    /// Tracing aborted because of an error.
    Aborted,
}

impl StopError {
    /// The protocol value (1 to 3).
    pub const fn value(self) -> u32 {
        match self {
            StopError::NotInitialized => 1,
            StopError::NotStarted => 2,
            StopError::Aborted => 3,
        }
    }

    /// The error of a protocol value.
    pub const fn from_value(v: u32) -> Option<Self> {
        Some(match v {
            1 => StopError::NotInitialized,
            2 => StopError::NotStarted,
            3 => StopError::Aborted,
            _ => return None,
        })
    }
}

impl core::fmt::Display for StopError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            StopError::NotInitialized => "no tracing session: nothing to stop",
            StopError::NotStarted => "tracing has not started or has stopped",
            StopError::Aborted => "tracing aborted because of an error",
        })
    }
}
