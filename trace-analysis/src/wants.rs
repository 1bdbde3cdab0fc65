//! Which kinds of events a read of a trace decodes: [`Wants`].

use trace_common::fxt::wire;

#[cfg(doc)]
use crate::event::Event;

/// Which kinds of events a reader's sink needs: records of the others are
/// skipped by their header, undecoded. Processes, threads, providers,
/// string and thread tables and buffer-overflow notices are always read
/// (every event needs them, and they are few).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Wants {
    /// Durations: begins, ends and complete events ([`Event::Slice`]).
    pub durations: bool,
    /// Instants ([`Event::Instant`]).
    pub instants: bool,
    /// Counters ([`Event::Counter`]), and the losses read from the kernel
    /// provider's `dropped_events` counter ([`Event::Loss`]).
    pub counters: bool,
    /// Async spans ([`Event::Async`]).
    pub asyncs: bool,
    /// Context switches ([`Event::Switch`]).
    pub switches: bool,
    /// Wake-ups ([`Event::Wakeup`]).
    pub wakeups: bool,
    /// Stack samples ([`Event::Sample`]).
    pub samples: bool,
    /// Flows ([`Event::Flow`]).
    pub flows: bool,
    /// The trace's last timestamp, which ends the spans still open at its
    /// end (an unfinished slice's or async span's `dur`): every record
    /// with a time is then looked at for it, skipped or not, so that those
    /// durations are the same whatever else is read.
    pub end_time: bool,
}

impl Wants {
    /// Every event.
    pub const ALL: Wants = Wants {
        durations: true,
        instants: true,
        counters: true,
        asyncs: true,
        switches: true,
        wakeups: true,
        samples: true,
        flows: true,
        end_time: true,
    };

    /// What `self` or `other` needs.
    pub fn or(self, other: Wants) -> Wants {
        Wants {
            durations: self.durations || other.durations,
            instants: self.instants || other.instants,
            counters: self.counters || other.counters,
            asyncs: self.asyncs || other.asyncs,
            switches: self.switches || other.switches,
            wakeups: self.wakeups || other.wakeups,
            samples: self.samples || other.samples,
            flows: self.flows || other.flows,
            end_time: self.end_time || other.end_time,
        }
    }

    /// Whether an event record of type `ty` (`wire::event_type`) is read.
    pub(crate) fn event(&self, ty: u8) -> bool {
        use wire::event_type as e;
        match ty {
            e::INSTANT => self.instants,
            e::COUNTER => self.counters,
            e::DURATION_BEGIN | e::DURATION_END | e::DURATION_COMPLETE => self.durations,
            e::ASYNC_BEGIN | e::ASYNC_END => self.asyncs,
            e::FLOW_BEGIN | e::FLOW_STEP | e::FLOW_END => self.flows,
            // Async instants make no event.
            _ => false,
        }
    }
}
