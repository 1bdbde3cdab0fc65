//! What a manager lets its clients and providers use: memory for trace
//! buffers, and connections.
//!
//! Trace buffers are the memory a client can make the manager hold: the
//! kernel provider's ring buffers and one sealed memfd per userspace
//! provider, sized as the client asks. A session may hold at most
//! [`Limits::session_memory_budget`] bytes of them, all sessions together
//! [`Limits::memory_budget`]. Connections are counted per user (root's
//! are not limited per user) and in total, an eighth of the total kept
//! for root ([`Quota`]); a connection over a limit is told why and
//! closed at once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The limits of one manager.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Bytes of trace buffers every session together may hold.
    pub memory_budget: u64,
    /// Bytes of trace buffers one session may hold (kernel rings and
    /// provider buffers).
    pub session_memory_budget: u64,
    /// Connections open at once (providers and clients).
    pub max_connections: usize,
    /// Connections one user other than root may have open at once.
    pub max_connections_per_uid: usize,
}

/// The smallest buffer a provider is given when the budget cannot give it
/// what was asked for; below it, the provider is left out of the session.
pub const MIN_PROVIDER_BUFFER: u64 = 256 << 10;

impl Limits {
    /// The defaults for this machine: a quarter of its memory for trace
    /// buffers (all of it for one session, since a manager runs one at a
    /// time), 8192 connections, 1024 per user.
    pub fn for_this_machine() -> Limits {
        let memory = physical_memory().unwrap_or(4 << 30);
        Limits {
            memory_budget: memory / 4,
            session_memory_budget: memory / 4,
            max_connections: 8192,
            max_connections_per_uid: 1024,
        }
    }

    /// What one new session may hold: its own budget, within what the
    /// others leave of the manager's.
    pub fn session_budget(&self, others: u64) -> u64 {
        self.session_memory_budget
            .min(self.memory_budget.saturating_sub(others))
    }
}

impl Limits {
    /// The connections users may have open.
    pub fn connections(&self) -> Quota {
        Quota {
            what: "connections open",
            total: self.max_connections,
            per_user: self.max_connections_per_uid,
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits::for_this_machine()
    }
}

/// The machine's memory in bytes (`MemTotal` of /proc/meminfo).
pub fn physical_memory() -> Option<u64> {
    crate::procfs::mem_total()
}

/// A size with an optional unit: `512M`, `2G`, `1.5G`, `65536` (bytes),
/// `64K`; units are powers of 1024.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (number, unit) = match t.char_indices().find(|(_, c)| c.is_ascii_alphabetic()) {
        Some((i, _)) => (&t[..i], t[i..].to_ascii_uppercase()),
        None => (t, String::new()),
    };
    let shift = match unit.trim_end_matches("IB").trim_end_matches('B') {
        "" => 0,
        "K" => 10,
        "M" => 20,
        "G" => 30,
        "T" => 40,
        _ => return Err(format!("{s:?}: unknown unit (use K, M, G or T)")),
    };
    let value: f64 = number
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a size"))?;
    if !value.is_finite() || value < 0.0 {
        return Err(format!("{s:?} is not a size"));
    }
    let bytes = value * (1u64 << shift) as f64;
    if bytes >= u64::MAX as f64 {
        return Err(format!("{s:?} is too large"));
    }
    Ok(bytes as u64)
}

/// `bytes` in MiB, for messages.
pub fn mib(bytes: u64) -> String {
    let m = bytes as f64 / (1u64 << 20) as f64;
    if m >= 10.0 || m.fract() == 0.0 {
        format!("{m:.0} MiB")
    } else {
        format!("{m:.2} MiB")
    }
}

/// A limit on what users hold at once (connections, registered
/// providers): `total` in all, `per_user` for one user other than root;
/// and users other than root together stop an eighth short of `total`,
/// so that root still gets in when every other user is at its own limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Quota {
    /// What is counted, plural (`"connections"`), for messages.
    pub what: &'static str,
    /// How many at once in all.
    pub total: usize,
    /// How many one user other than root may hold.
    pub per_user: usize,
}

impl Quota {
    /// What users other than root may hold together.
    pub fn for_users(&self) -> usize {
        self.total - self.total / 8
    }

    /// Whether user `uid`, holding `mine` of the `held` in all, may take
    /// one more.
    pub fn check(&self, uid: u32, mine: usize, held: usize) -> Result<(), Refused> {
        if held >= self.total {
            return Err(Refused {
                limit: Limit::Total,
                held,
                what: self.what,
            });
        }
        if uid != 0 && mine >= self.per_user {
            return Err(Refused {
                limit: Limit::PerUser,
                held: mine,
                what: self.what,
            });
        }
        if uid != 0 && held >= self.for_users() {
            return Err(Refused {
                limit: Limit::Reserved,
                held,
                what: self.what,
            });
        }
        Ok(())
    }
}

/// Which limit of a [`Quota`] refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    /// The total.
    Total,
    /// The user's own.
    PerUser,
    /// What users other than root may hold together (the rest is kept
    /// for root).
    Reserved,
}

/// Why something was not admitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Refused {
    /// The limit reached.
    pub limit: Limit,
    /// How many were held (by the user, for [`Limit::PerUser`]).
    pub held: usize,
    /// What is counted.
    pub what: &'static str,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Refused { limit, held, what } = self;
        match limit {
            Limit::Total => write!(f, "the manager has {held} {what}, its limit"),
            Limit::PerUser => write!(f, "the user has {held} {what}, the limit per user"),
            Limit::Reserved => write!(
                f,
                "the manager has {held} {what}, all that users other than root may have \
                 together (the rest are kept for root)"
            ),
        }
    }
}

#[derive(Debug, Default)]
struct Open {
    total: usize,
    by_uid: HashMap<u32, usize>,
}

/// The connections open, by user.
#[derive(Clone, Debug, Default)]
pub struct Connections {
    open: Arc<Mutex<Open>>,
}

impl Connections {
    /// Admits a connection of user `uid` within `limits`; the slot counts
    /// it until dropped.
    pub fn admit(&self, uid: u32, limits: &Limits) -> Result<Slot, Refused> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let mine = open.by_uid.get(&uid).copied().unwrap_or(0);
        limits.connections().check(uid, mine, open.total)?;
        open.total += 1;
        *open.by_uid.entry(uid).or_default() += 1;
        Ok(Slot {
            open: self.open.clone(),
            uid,
        })
    }

    /// Connections open now.
    pub fn total(&self) -> usize {
        self.open.lock().unwrap_or_else(|e| e.into_inner()).total
    }
}

/// One admitted connection; dropping it frees its place.
#[derive(Debug)]
pub struct Slot {
    open: Arc<Mutex<Open>>,
    uid: u32,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        open.total = open.total.saturating_sub(1);
        if let Some(n) = open.by_uid.get_mut(&self.uid) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.by_uid.remove(&self.uid);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_units() {
        assert_eq!(parse_size("65536"), Ok(65536));
        assert_eq!(parse_size("64K"), Ok(64 << 10));
        assert_eq!(parse_size("512M"), Ok(512 << 20));
        assert_eq!(parse_size("512MiB"), Ok(512 << 20));
        assert_eq!(parse_size("1.5G"), Ok(3 << 29));
        assert_eq!(parse_size("2g"), Ok(2 << 30));
        assert!(parse_size("12Q").is_err());
        assert!(parse_size("-1M").is_err());
        assert!(parse_size("lots").is_err());
    }

    #[test]
    fn the_defaults_follow_the_machine() {
        let l = Limits::for_this_machine();
        let mem = physical_memory().unwrap();
        assert_eq!(l.memory_budget, mem / 4);
        assert!(l.session_memory_budget <= l.memory_budget);
        assert_eq!(l.session_budget(0), l.session_memory_budget);
        assert_eq!(l.session_budget(l.memory_budget), 0);
    }

    #[test]
    fn connections_are_limited_per_user_and_in_total() {
        let limits = Limits {
            memory_budget: 0,
            session_memory_budget: 0,
            max_connections: 5,
            max_connections_per_uid: 2,
        };
        let c = Connections::default();
        let a = c.admit(1000, &limits).unwrap();
        let _b = c.admit(1000, &limits).unwrap();
        assert_eq!(c.admit(1000, &limits).unwrap_err().limit, Limit::PerUser);
        // Another user, and root (not limited per user).
        let _d = c.admit(1001, &limits).unwrap();
        let _e = c.admit(0, &limits).unwrap();
        let _f = c.admit(0, &limits).unwrap();
        let full = c.admit(0, &limits).unwrap_err();
        assert_eq!((full.limit, full.held), (Limit::Total, 5));
        // Closing one frees its place.
        drop(a);
        assert_eq!(c.total(), 4);
        let _g = c.admit(1000, &limits).unwrap();
    }

    #[test]
    fn users_other_than_root_leave_an_eighth_for_root() {
        let q = Quota {
            what: "connections open",
            total: 16,
            per_user: 10,
        };
        assert_eq!(q.for_users(), 14);
        // Two users at their own limits fill what users may have...
        assert!(q.check(1000, 9, 13).is_ok());
        let r = q.check(1001, 4, 14).unwrap_err();
        assert_eq!(r.limit, Limit::Reserved);
        assert!(r.to_string().contains("kept for root"), "{r}");
        // ...and root still gets in, up to the total.
        assert!(q.check(0, 0, 14).is_ok());
        assert!(q.check(0, 2, 15).is_ok());
        assert_eq!(q.check(0, 2, 16).unwrap_err().limit, Limit::Total);
    }
}
