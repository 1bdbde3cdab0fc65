//! Warnings about bad or idle connections, at most one line a second per
//! kind: whoever can connect can otherwise fill the daemon's log (or the
//! journal) a line per connection.
//!
//! The first warning of a kind is logged; others within the next second
//! are counted, and the count is logged with the next warning of that kind
//! or, if none comes, by [`flush`] (every tick of the manager's loop) once
//! the second is over. Every line stays at warn level.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Where the lines come from, as the rest of the service's.
const TARGET: &str = "trace_manager::service";

/// The least time between two lines of one kind.
const INTERVAL: Duration = Duration::from_secs(1);

/// One kind of warning, and what was held back of it.
pub struct Throttle {
    /// What the held-back warnings were about, for the count's line
    /// (`"connections said nothing in time"`).
    what: &'static str,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// When a line of this kind was last logged.
    last: Option<Instant>,
    /// Warnings held back since.
    held: u64,
}

/// A connection that did not say what it is in time.
pub static IDLE: Throttle = Throttle::new("connections said nothing in time");
/// A first message that is neither a client's nor a provider's
/// registration.
pub static BAD_HELLO: Throttle = Throttle::new("connections sent an undecodable first message");
/// A client's undecodable request.
pub static BAD_REQUEST: Throttle = Throttle::new("clients sent an undecodable request");

/// A provider's registration refused (the registry's limits).
pub static PROVIDER_REFUSED: Throttle = Throttle::new("providers refused");

/// Every kind, for [`flush`].
static ALL: [&Throttle; 4] = [&IDLE, &BAD_HELLO, &BAD_REQUEST, &PROVIDER_REFUSED];

impl Throttle {
    /// A kind of warning about `what`.
    pub const fn new(what: &'static str) -> Throttle {
        Throttle {
            what,
            state: Mutex::new(State {
                last: None,
                held: 0,
            }),
        }
    }

    /// Logs `message` at warn level, unless a line of this kind went out
    /// less than a second ago (then it is counted).
    pub fn warn(&self, message: std::fmt::Arguments<'_>) {
        if let Some(line) = self.line_at(Instant::now(), message) {
            log::warn!(target: TARGET, "{line}");
        }
    }

    /// The line to log for `message` at `now`, if any.
    fn line_at(&self, now: Instant, message: std::fmt::Arguments<'_>) -> Option<String> {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if s.last
            .is_some_and(|last| now.duration_since(last) < INTERVAL)
        {
            s.held += 1;
            return None;
        }
        let line = match std::mem::take(&mut s.held) {
            0 => message.to_string(),
            n => format!("{message} (and {n} like it before, not logged one by one)"),
        };
        s.last = Some(now);
        Some(line)
    }

    /// The line saying how many were held back, once the second is over.
    fn flush_at(&self, now: Instant) -> Option<String> {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if s.held == 0
            || s.last
                .is_some_and(|last| now.duration_since(last) < INTERVAL)
        {
            return None;
        }
        let n = std::mem::take(&mut s.held);
        s.last = Some(now);
        Some(format!("{}: {n} more, not logged one by one", self.what))
    }
}

/// Logs the count of every kind's held-back warnings whose second is over.
pub fn flush() {
    let now = Instant::now();
    for t in ALL {
        if let Some(line) = t.flush_at(now) {
            log::warn!(target: TARGET, "{line}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_a_second_and_the_count_of_the_rest() {
        let t = Throttle::new("connections said nothing in time");
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let first = t.line_at(at(0), format_args!("connection from pid 1 said nothing"));
        assert_eq!(first.as_deref(), Some("connection from pid 1 said nothing"));
        for i in 0..500 {
            assert_eq!(t.line_at(at(1 + i), format_args!("pid {i}")), None);
        }
        // Nothing to say before the second is over.
        assert_eq!(t.flush_at(at(999)), None);
        // The next one says how many were held back.
        let next = t.line_at(at(1000), format_args!("connection from pid 7 said nothing"));
        assert_eq!(
            next.as_deref(),
            Some(
                "connection from pid 7 said nothing (and 500 like it before, not logged one by one)"
            )
        );
        // Held back with none after: the tick says how many.
        assert_eq!(t.line_at(at(1500), format_args!("x")), None);
        assert_eq!(t.line_at(at(1600), format_args!("y")), None);
        assert_eq!(t.flush_at(at(1900)), None);
        assert_eq!(
            t.flush_at(at(2000)).as_deref(),
            Some("connections said nothing in time: 2 more, not logged one by one")
        );
        assert_eq!(t.flush_at(at(5000)), None);
        // After a quiet second, a warning goes out at once.
        assert_eq!(t.line_at(at(5000), format_args!("z")).as_deref(), Some("z"));
    }

    #[test]
    fn kinds_are_throttled_apart() {
        let a = Throttle::new("a");
        let b = Throttle::new("b");
        let now = Instant::now();
        assert!(a.line_at(now, format_args!("a1")).is_some());
        assert!(b.line_at(now, format_args!("b1")).is_some());
        assert!(a.line_at(now, format_args!("a2")).is_none());
        assert!(b.line_at(now, format_args!("b2")).is_none());
    }
}
