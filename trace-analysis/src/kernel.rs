//! The kernel provider's slices decoded into what they describe: system
//! calls ([`Syscall`], category `kernel:syscall`) and block requests
//! ([`BlockRequest`], category `kernel:block`). The names the recorder
//! writes are interned in every [`Context`] before any of a trace's
//! strings, so decoding compares symbols, never text.

use crate::context::Context;
use crate::errno;
use crate::event::{Slice, Value};
use crate::strings::Sym;

/// How a system call ended, as far as the trace tells.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallEnd {
    /// It returned this value (negative: `-errno` for most calls).
    Returned(i64),
    /// Its thread exited inside it (`exit`, `exit_group`): it never
    /// returns; the slice ends where the thread did.
    Exited,
    /// Its return was lost (a full buffer); the slice ends where the
    /// thread's next call began.
    ReturnLost,
    /// The recording ended inside it (`unfinished`); the slice runs to the
    /// end of the trace.
    Running,
}

/// A system call: a slice of category `kernel:syscall` whose name is the
/// call's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Syscall {
    /// The call's number (`nr`), when written.
    pub nr: Option<i64>,
    /// How it ended.
    pub end: CallEnd,
    /// Its entry came before the recording started (its arguments are
    /// unknown, its start is the recording's).
    pub began_before_recording: bool,
    /// Its entry was lost (its arguments are unknown, its start is the
    /// thread's previous return).
    pub entry_lost: bool,
}

impl Syscall {
    /// The system call `s` is, if it is one.
    pub fn from_slice(s: &Slice, cx: &Context) -> Option<Syscall> {
        let k = &cx.kernel;
        if s.category != k.syscall {
            return None;
        }
        let (mut nr, mut ret) = (None, None);
        let (mut unfinished, mut lost, mut before, mut entry_lost) = (false, false, false, false);
        for (name, value) in &s.args {
            let n = *name;
            if n == k.nr {
                nr = value.as_i64();
            } else if n == k.ret {
                ret = value.as_i64();
            } else if n == k.unfinished {
                unfinished = value.is_true();
            } else if n == k.return_lost {
                lost = value.is_true();
            } else if n == k.began_before_recording {
                before = value.is_true();
            } else if n == k.entry_lost {
                entry_lost = value.is_true();
            }
        }
        let end = match ret {
            _ if unfinished || s.unfinished => CallEnd::Running,
            Some(r) => CallEnd::Returned(r),
            None if lost => CallEnd::ReturnLost,
            None => CallEnd::Exited,
        };
        Some(Syscall {
            nr,
            end,
            began_before_recording: before,
            entry_lost,
        })
    }

    /// Its return value, when it returned.
    pub fn ret(&self) -> Option<i64> {
        match self.end {
            CallEnd::Returned(r) => Some(r),
            _ => None,
        }
    }

    /// The error it returned (a positive errno), if it failed.
    pub fn errno(&self) -> Option<i64> {
        self.ret().and_then(errno::from_return)
    }

    /// Whether the trace has its return, so that its slice is its latency.
    pub fn returned(&self) -> bool {
        matches!(self.end, CallEnd::Returned(_))
    }

    /// Whether the recording ended inside it.
    pub fn unfinished(&self) -> bool {
        self.end == CallEnd::Running
    }

    /// Whether the argument `name` of a system call slice is one of the
    /// call's own arguments, not one the recorder adds (`nr`, `ret` and
    /// the flags).
    pub fn is_call_arg(name: Sym, cx: &Context) -> bool {
        let k = &cx.kernel;
        ![
            k.nr,
            k.ret,
            k.unfinished,
            k.began_before_recording,
            k.entry_lost,
            k.return_lost,
        ]
        .contains(&name)
    }
}

/// A block I/O request: a slice of category `kernel:block` from the
/// request's issue to its completion, named by its operation (`read`,
/// `write`, `flush`, `discard`, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockRequest<'a> {
    /// The device's name (`vda`, `nvme0n1p2`), or `major:minor` when the
    /// recorder could not name it; `""` when not written.
    pub device: &'a str,
    /// The device's `major:minor`; `""` when not written.
    pub dev: &'a str,
    /// First sector.
    pub sector: Option<u64>,
    /// Sectors.
    pub sectors: Option<u32>,
    /// Bytes.
    pub bytes: Option<u64>,
    /// The kernel's `rwbs` flags; `""` when not written.
    pub rwbs: &'a str,
    /// The thread that issued it.
    pub issuer: Option<u64>,
    /// The completion's error (0: success); `None` while unfinished.
    pub error: Option<i32>,
    /// The recording ended before it completed; the slice runs to the end
    /// of the trace.
    pub unfinished: bool,
}

impl<'a> BlockRequest<'a> {
    /// The block request `s` is, if it is one.
    pub fn from_slice(s: &'a Slice, cx: &Context) -> Option<BlockRequest<'a>> {
        let k = &cx.kernel;
        if s.category != k.block {
            return None;
        }
        let uint = |v: &Value| v.as_i64().and_then(|v| u64::try_from(v).ok());
        let mut r = BlockRequest {
            device: "",
            dev: "",
            sector: None,
            sectors: None,
            bytes: None,
            rwbs: "",
            issuer: None,
            error: None,
            unfinished: s.unfinished,
        };
        for (name, value) in &s.args {
            let n = *name;
            if n == k.device {
                r.device = value.as_str().unwrap_or("");
            } else if n == k.dev {
                r.dev = value.as_str().unwrap_or("");
            } else if n == k.sector {
                r.sector = uint(value);
            } else if n == k.sectors {
                r.sectors = uint(value).and_then(|v| u32::try_from(v).ok());
            } else if n == k.bytes {
                r.bytes = uint(value);
            } else if n == k.rwbs {
                r.rwbs = value.as_str().unwrap_or("");
            } else if n == k.issuer {
                r.issuer = uint(value);
            } else if n == k.error {
                r.error = value.as_i64().and_then(|v| i32::try_from(v).ok());
            } else if n == k.unfinished {
                r.unfinished |= value.is_true();
            }
        }
        if r.unfinished {
            r.error = None;
        }
        Some(r)
    }

    /// Whether it completed with an error.
    pub fn failed(&self) -> bool {
        self.error.is_some_and(|e| e != 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Args, Track};

    fn slice(cx: &mut Context, category: &str, name: &str, args: &[(&str, Value)]) -> Slice {
        let args: Args = args
            .iter()
            .map(|(n, v)| (cx.strings.intern(n), v.clone()))
            .collect();
        Slice {
            id: 1,
            ts: 10,
            dur: 5,
            track: Track::default(),
            category: cx.strings.intern(category),
            name: cx.strings.intern(name),
            depth: 0,
            parent: None,
            args,
            unfinished: false,
        }
    }

    #[test]
    fn system_calls_and_how_they_ended() {
        let mut cx = Context::default();
        let s = slice(
            &mut cx,
            "kernel:syscall",
            "openat",
            &[
                ("nr", Value::Int(257)),
                ("dfd", Value::Int(-100)),
                ("ret", Value::Int(-2)),
            ],
        );
        let c = Syscall::from_slice(&s, &cx).unwrap();
        assert_eq!(c.nr, Some(257));
        assert_eq!(c.end, CallEnd::Returned(-2));
        assert_eq!(c.errno(), Some(2));
        assert!(c.returned() && !c.unfinished());
        let call_args: Vec<&str> = s
            .args
            .iter()
            .filter(|(n, _)| Syscall::is_call_arg(*n, &cx))
            .map(|(n, _)| cx.strings.get(*n))
            .collect();
        assert_eq!(call_args, ["dfd"]);
        let end = |cx: &mut Context, args: &[(&str, Value)]| {
            let s = slice(cx, "kernel:syscall", "x", args);
            Syscall::from_slice(&s, cx).unwrap().end
        };
        assert_eq!(end(&mut cx, &[("nr", Value::Int(231))]), CallEnd::Exited);
        assert_eq!(
            end(&mut cx, &[("unfinished", Value::Bool(true))]),
            CallEnd::Running
        );
        assert_eq!(
            end(&mut cx, &[("return_lost", Value::Bool(true))]),
            CallEnd::ReturnLost
        );
        let s = slice(
            &mut cx,
            "kernel:syscall",
            "read",
            &[("ret", Value::Int(0)), ("entry_lost", Value::Bool(true))],
        );
        let c = Syscall::from_slice(&s, &cx).unwrap();
        assert!(c.entry_lost && !c.began_before_recording && c.ret() == Some(0));
        let other = slice(&mut cx, "app", "read", &[]);
        assert_eq!(Syscall::from_slice(&other, &cx), None);
    }

    #[test]
    fn block_requests() {
        let mut cx = Context::default();
        let s = slice(
            &mut cx,
            "kernel:block",
            "write",
            &[
                ("device", Value::Str("vda".into())),
                ("dev", Value::Str("253:0".into())),
                ("sector", Value::Uint(2048)),
                ("sectors", Value::Uint(8)),
                ("bytes", Value::Uint(4096)),
                ("rwbs", Value::Str("WS".into())),
                ("issuer", Value::Koid(99)),
                ("error", Value::Int(-5)),
            ],
        );
        let r = BlockRequest::from_slice(&s, &cx).unwrap();
        assert_eq!(
            r,
            BlockRequest {
                device: "vda",
                dev: "253:0",
                sector: Some(2048),
                sectors: Some(8),
                bytes: Some(4096),
                rwbs: "WS",
                issuer: Some(99),
                error: Some(-5),
                unfinished: false,
            }
        );
        assert!(r.failed());
        let s = slice(
            &mut cx,
            "kernel:block",
            "flush",
            &[("unfinished", Value::Bool(true))],
        );
        let r = BlockRequest::from_slice(&s, &cx).unwrap();
        assert!(r.unfinished && !r.failed() && r.device.is_empty());
        assert_eq!(Syscall::from_slice(&s, &cx), None);
    }
}
