//! Which events a report counts: processes by id, processes or threads by
//! name (a glob), and a time range.

use foldhash::HashMap;
use trace_common::category::glob_matches;

use crate::reader::Context;

/// One end of a time range.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Bound {
    /// Seconds from the trace's start.
    Relative(f64),
    /// CLOCK_BOOTTIME, ns (the file's own timestamps).
    Absolute(u64),
}

impl Bound {
    fn resolve(self, origin: u64) -> u64 {
        match self {
            Bound::Absolute(ns) => ns,
            Bound::Relative(s) if s <= 0.0 => origin,
            Bound::Relative(s) => origin.saturating_add((s * 1e9).round() as u64),
        }
    }
}

/// A time range; a missing end is open.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TimeRange {
    /// From here.
    pub start: Option<Bound>,
    /// Up to here (exclusive).
    pub end: Option<Bound>,
}

/// A time range that does not parse, or says nothing that can be.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("{input:?} is not a time range: {reason}")]
pub struct TimeRangeError {
    input: String,
    reason: String,
}

/// What a time range looks like.
const SYNTAX: &str = "START..END in seconds from the trace's start (either may be left out, e.g. 1.5.. or ..2), or @NS..@NS in absolute CLOCK_BOOTTIME ns";

/// The largest relative bound, s: its ns must fit 64 bits.
const MAX_SECONDS: f64 = 18_446_744_073.0;

impl std::str::FromStr for TimeRange {
    type Err = TimeRangeError;

    /// `START..END`: seconds from the trace's start (`1.5..3`), or
    /// absolute CLOCK_BOOTTIME ns after `@` (`@1234..@5678`); either end
    /// may be left out.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = |reason: &str| TimeRangeError {
            input: s.to_owned(),
            reason: reason.to_owned(),
        };
        let (a, b) = s.split_once("..").ok_or_else(|| err(SYNTAX))?;
        let bound = |t: &str| -> Result<Option<Bound>, TimeRangeError> {
            let t = t.trim();
            if t.is_empty() {
                return Ok(None);
            }
            if let Some(ns) = t.strip_prefix('@') {
                if !ns.is_empty() && ns.bytes().all(|c| c.is_ascii_digit()) {
                    return ns.parse().map(|n| Some(Bound::Absolute(n))).map_err(|_| {
                        err(&format!(
                            "{t} is too large: absolute times are at most @{}",
                            u64::MAX
                        ))
                    });
                }
                return Err(err(SYNTAX));
            }
            match t.parse::<f64>() {
                Ok(v) if v.is_finite() && v > MAX_SECONDS => Err(err(&format!(
                    "{t} s is too large: times are at most {MAX_SECONDS} s from the start"
                ))),
                Ok(v) if v.is_finite() && v >= 0.0 => Ok(Some(Bound::Relative(v))),
                _ => Err(err(SYNTAX)),
            }
        };
        let (start, end) = (bound(a)?, bound(b)?);
        let after = match (start, end) {
            (Some(Bound::Relative(x)), Some(Bound::Relative(y))) => x >= y,
            (Some(Bound::Absolute(x)), Some(Bound::Absolute(y))) => x >= y,
            _ => false,
        };
        if after {
            return Err(err("its start is not before its end"));
        }
        Ok(TimeRange { start, end })
    }
}

/// What the user selected.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Selection {
    /// Only these processes (none: every one).
    pub pids: Vec<u64>,
    /// Only processes or threads whose name matches this glob (`*` any
    /// run of characters).
    pub comm: Option<String>,
    /// Only this time range.
    pub time: TimeRange,
    /// Only processes in this cgroup or below it (a path from the cgroup
    /// v2 root), as the trace labels them.
    pub cgroup: Option<String>,
    /// Only processes of this container: its name, its id, or a prefix of
    /// its id, as the trace labels them.
    pub container: Option<String>,
    /// Only processes of this machine, in a trace recorded on several.
    pub host: Option<HostSelection>,
}

/// One machine of a trace recorded on several (`record --host`), selected
/// by name ([`trace_hosts::Machine`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostSelection {
    /// Its name.
    pub name: String,
    /// Its index among the trace's machines (0: the recording one).
    pub index: u32,
    /// How many machines the trace has.
    pub machines: u32,
}

impl HostSelection {
    /// Whether process (or thread) `koid` is of this machine.
    fn holds(&self, koid: u64) -> bool {
        trace_hosts::MachineIds::machine_of(koid, self.machines) == self.index
    }
}

impl Selection {
    /// Whether anything is filtered out by process.
    pub fn by_thread(&self) -> bool {
        !self.pids.is_empty()
            || self.comm.is_some()
            || self.cgroup.is_some()
            || self.container.is_some()
            || self.host.is_some()
    }

    /// Whether process `pid` is in the cgroup and the container selected
    /// (each when one is).
    fn placed(&self, pid: u64, cx: &Context) -> bool {
        if self.host.as_ref().is_some_and(|h| !h.holds(pid)) {
            return false;
        }
        if let Some(want) = &self.cgroup {
            let want = want.trim_end_matches('/');
            let inside = cx.cgroup_of(pid).is_some_and(|c| {
                want.is_empty()
                    || c == want
                    || c.strip_prefix(want).is_some_and(|r| r.starts_with('/'))
            });
            if !inside {
                return false;
            }
        }
        if let Some(want) = &self.container {
            let Some(l) = cx.labels(pid) else {
                return false;
            };
            let text = |s: Option<crate::strings::Sym>| s.map(|s| cx.strings.get(s));
            let named = text(l.container_name) == Some(want.as_str());
            let by_id = !want.is_empty()
                && text(l.container_id).is_some_and(|id| id.starts_with(want.as_str()));
            if !named && !by_id {
                return false;
            }
        }
        true
    }
}

/// A [`Selection`] applied to a trace being read.
#[derive(Debug, Default)]
pub struct Filter {
    selection: Selection,
    /// The window, once the trace's first timestamp is known: [from, to).
    window: Option<(u64, u64)>,
    /// Threads already decided: (pid, tid) -> selected.
    decided: HashMap<(u64, u64), bool>,
}

impl Filter {
    /// A filter for `selection`.
    pub fn new(selection: Selection) -> Self {
        Filter {
            selection,
            ..Filter::default()
        }
    }

    /// What it selects.
    pub fn selection(&self) -> &Selection {
        &self.selection
    }

    /// Fixes the time window from the first timestamp of the trace (which
    /// relative times count from); later calls change nothing.
    pub fn start_at(&mut self, origin: u64) {
        if self.window.is_none() {
            let from = self.selection.time.start.map_or(0, |b| b.resolve(origin));
            let to = self
                .selection
                .time
                .end
                .map_or(u64::MAX, |b| b.resolve(origin));
            self.window = Some((from, to));
        }
    }

    /// The window, [from, to).
    pub fn window(&self) -> (u64, u64) {
        self.window.unwrap_or((0, u64::MAX))
    }

    /// Whether the selection has a time range.
    pub fn by_time(&self) -> bool {
        self.selection.time != TimeRange::default()
    }

    /// Whether `ts` lies in the window.
    pub fn at(&self, ts: u64) -> bool {
        let (from, to) = self.window();
        from <= ts && ts < to
    }

    /// How much of [a, b) lies in the window.
    pub fn overlap(&self, a: u64, b: u64) -> u64 {
        let (from, to) = self.window();
        b.min(to).saturating_sub(a.max(from))
    }

    /// Names (or labels) changed: decisions by name are taken again.
    pub fn renamed(&mut self) {
        if self.selection.comm.is_some()
            || self.selection.cgroup.is_some()
            || self.selection.container.is_some()
        {
            self.decided.clear();
        }
    }

    /// Whether thread `tid` of process `pid` is selected (`pid` 0: the
    /// process the trace names for it).
    pub fn thread(&mut self, pid: u64, tid: u64, cx: &Context) -> bool {
        if !self.selection.by_thread() {
            return true;
        }
        if let Some(&d) = self.decided.get(&(pid, tid)) {
            return d;
        }
        let pid = if pid == 0 {
            cx.process_of(tid).unwrap_or(0)
        } else {
            pid
        };
        let mut selected = (self.selection.pids.is_empty() || self.selection.pids.contains(&pid))
            && self.selection.placed(pid, cx);
        if let Some(glob) = &self.selection.comm {
            selected &=
                glob_matches(glob, cx.process_name(pid)) || glob_matches(glob, cx.thread_name(tid));
        }
        if self.decided.len() < 1 << 20 {
            self.decided.insert((pid, tid), selected);
        }
        selected
    }

    /// Whether process `pid` is selected (by its own name).
    pub fn process(&mut self, pid: u64, cx: &Context) -> bool {
        self.thread(pid, pid, cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_ranges_parse_relative_and_absolute() {
        let r: TimeRange = "1.5..3".parse().unwrap();
        assert_eq!(r.start, Some(Bound::Relative(1.5)));
        assert_eq!(r.end, Some(Bound::Relative(3.0)));
        let r: TimeRange = "@100..".parse().unwrap();
        assert_eq!((r.start, r.end), (Some(Bound::Absolute(100)), None));
        let r: TimeRange = "..2".parse().unwrap();
        assert_eq!((r.start, r.end), (None, Some(Bound::Relative(2.0))));
        for bad in ["", "3", "a..b", "-1..2", "@x..", "nan..1", "@..", "@-1.."] {
            assert!(bad.parse::<TimeRange>().is_err(), "{bad}");
        }
    }

    #[test]
    fn empty_and_overflowing_time_ranges_are_refused() {
        let e = "3..1".parse::<TimeRange>().unwrap_err().to_string();
        assert!(e.contains("its start is not before its end"), "{e}");
        assert!("2..2".parse::<TimeRange>().is_err());
        assert!("@500..@100".parse::<TimeRange>().is_err());
        let e = "1e300..".parse::<TimeRange>().unwrap_err().to_string();
        assert!(e.contains("too large"), "{e}");
        let e = "@99999999999999999999.."
            .parse::<TimeRange>()
            .unwrap_err()
            .to_string();
        assert!(e.contains("too large"), "{e}");
        assert!("18446744073..".parse::<TimeRange>().is_ok());
        // Mixed bounds are only compared once the trace's start is known.
        assert!("5..@100".parse::<TimeRange>().is_ok());
    }

    #[test]
    fn the_window_counts_from_the_first_timestamp() {
        let mut f = Filter::new(Selection {
            time: "1..2".parse().unwrap(),
            ..Selection::default()
        });
        f.start_at(10_000_000_000);
        f.start_at(0);
        assert_eq!(f.window(), (11_000_000_000, 12_000_000_000));
        assert!(f.at(11_000_000_000) && !f.at(12_000_000_000));
        assert_eq!(f.overlap(10_500_000_000, 11_500_000_000), 500_000_000);
        assert_eq!(f.overlap(13_000_000_000, 14_000_000_000), 0);
        assert_eq!(f.overlap(5, 2), 0);
    }

    #[test]
    fn threads_are_selected_by_cgroup_and_container_labels() {
        let mut cx = Context::default();
        let mut s = |t: &str| Some(cx.strings.intern(t));
        let labelled = crate::ProcessLabels {
            cgroup: s("/system.slice/docker-abc.scope"),
            container_runtime: s("docker"),
            container_id: s("abcdef0123"),
            container_name: s("web"),
            ns_pid: Some(1),
        };
        let plain = crate::ProcessLabels {
            cgroup: s("/system.slice/sshd.service"),
            ..Default::default()
        };
        cx.labels.insert(10, labelled);
        cx.labels.insert(20, plain);
        assert_eq!(cx.container_of(10).as_deref(), Some("docker web"));
        assert_eq!(cx.container_of(20), None);
        let select = |cgroup: Option<&str>, container: Option<&str>| {
            let mut f = Filter::new(Selection {
                cgroup: cgroup.map(str::to_owned),
                container: container.map(str::to_owned),
                ..Selection::default()
            });
            [10, 20, 30].map(|pid| f.thread(pid, pid, &cx))
        };
        assert_eq!(select(Some("/system.slice"), None), [true, true, false]);
        assert_eq!(
            select(Some("/system.slice/sshd.service/"), None),
            [false, true, false]
        );
        assert_eq!(select(Some("/system"), None), [false, false, false]);
        assert_eq!(select(None, Some("web")), [true, false, false]);
        assert_eq!(select(None, Some("abcd")), [true, false, false]);
        assert_eq!(select(None, Some("docker")), [false, false, false]);
    }

    #[test]
    fn threads_are_selected_by_pid_and_name() {
        let cx = Context::default();
        let mut f = Filter::new(Selection {
            pids: vec![7],
            ..Selection::default()
        });
        assert!(f.thread(7, 8, &cx));
        assert!(!f.thread(9, 9, &cx));
        let mut f = Filter::new(Selection {
            comm: Some("*".into()),
            ..Selection::default()
        });
        assert!(f.thread(1, 1, &cx));
        let mut f = Filter::new(Selection {
            comm: Some("sleep*".into()),
            ..Selection::default()
        });
        assert!(!f.thread(1, 1, &cx));
    }
}
