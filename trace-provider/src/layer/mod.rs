//! A `tracing` layer: programs instrumented with the `tracing` crate become
//! trace providers by adding [`TraceLayer`] to their subscriber.
//!
//! Spans become complete duration events (one per enter/exit), events become
//! instants; the category is the target (`my_app::net`), the name is the
//! span name or the event's message, and fields become arguments, with the
//! level as a `level` argument.
//!
//! A span entered more than once — an instrumented future, polled each time
//! it is woken, on whatever thread the runtime picks — is also an async
//! slice from its creation to its close (on its own track, named by the
//! span), with `polls`, `busy_ns` (time in its polls), `idle_ns` and the
//! scheduling delays of its wakes as arguments; its polls are joined by a
//! flow, poll to poll. A span that `follows_from` another gets a flow from
//! the other's last poll to its first. Tokio's own instrumentation
//! (`--cfg tokio_unstable`, target `tokio::task::waker`) tells when a task
//! is woken: a wake from inside a poll is a flow to the task's next poll,
//! and the time from the wake to that poll is its scheduling delay.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use tracing_core::field::{Field, Visit};
use tracing_core::span::{Attributes, Id, Record};
use tracing_core::{Event, Metadata, Subscriber};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::registry::LookupSpan;

use crate::__private::{event_type, now};
use crate::engine::{current_thread, write_event_dyn, write_event_on};
use crate::{Callsite, StaticName, Value};

/// The layer; add it with `tracing_subscriber::registry().with(TraceLayer)`.
#[derive(Clone, Copy, Debug, Default)]
pub struct TraceLayer;

#[derive(Clone, Debug)]
enum Owned {
    I64(i64),
    U64(u64),
    F64(f64),
    Bool(bool),
    Str(String),
}

impl Owned {
    fn value(&self) -> Value<'_> {
        match self {
            Owned::I64(v) => Value::I64(*v),
            Owned::U64(v) => Value::U64(*v),
            Owned::F64(v) => Value::F64(*v),
            Owned::Bool(v) => Value::Bool(*v),
            Owned::Str(s) => Value::Str(s),
        }
    }
}

#[derive(Default)]
struct Fields {
    message: Option<String>,
    args: Vec<(&'static str, Owned)>,
}

impl Visit for Fields {
    fn record_i64(&mut self, f: &Field, v: i64) {
        self.args.push((f.name(), Owned::I64(v)));
    }
    fn record_u64(&mut self, f: &Field, v: u64) {
        self.args.push((f.name(), Owned::U64(v)));
    }
    fn record_f64(&mut self, f: &Field, v: f64) {
        self.args.push((f.name(), Owned::F64(v)));
    }
    fn record_bool(&mut self, f: &Field, v: bool) {
        self.args.push((f.name(), Owned::Bool(v)));
    }
    fn record_str(&mut self, f: &Field, v: &str) {
        if f.name() == "message" {
            self.message = Some(v.to_owned());
        } else {
            self.args.push((f.name(), Owned::Str(v.to_owned())));
        }
    }
    fn record_debug(&mut self, f: &Field, v: &dyn std::fmt::Debug) {
        if f.name() == "message" {
            self.message = Some(format!("{v:?}"));
        } else {
            self.args.push((f.name(), Owned::Str(format!("{v:?}"))));
        }
    }
}

/// A poll: when it began, on which thread (`(pid, tid)`).
type Poll = (u64, (u64, u64));

struct SpanData {
    fields: Fields,
    starts: Vec<u64>,
    /// When the span was created.
    created: u64,
    /// Polls (enters) finished, and their time (clock ticks, as the
    /// delays below).
    polls: u32,
    busy_ns: u64,
    /// Its first poll, until a second makes it a flow's begin.
    first_poll: Option<Poll>,
    /// Its last poll, for the spans that follow from it.
    last_poll: Option<Poll>,
    /// The flow joining its polls (0: none yet).
    flow: u64,
    /// Flows waiting to end in its next poll: from a wake, or from a span
    /// it follows, each `(id, when it was woken)`.
    incoming: Vec<(u64, Option<u64>)>,
    /// The earliest wake since its last poll, for the scheduling delay.
    woken_at: Option<u64>,
    /// Scheduling delays: their sum, the longest and how many.
    delay_ns: u64,
    max_delay_ns: u64,
    delays: u32,
}

impl SpanData {
    fn new(fields: Fields) -> Self {
        SpanData {
            fields,
            starts: Vec::new(),
            created: now(),
            polls: 0,
            busy_ns: 0,
            first_poll: None,
            last_poll: None,
            flow: 0,
            incoming: Vec::new(),
            woken_at: None,
            delay_ns: 0,
            max_delay_ns: 0,
            delays: 0,
        }
    }
}

/// The next flow or async id of this process: its pid in the upper half,
/// so that no two processes' ids meet in one trace.
fn next_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed) + 1;
    (u64::from(std::process::id()) << 32) | (n & 0xFFFF_FFFF)
}

/// A flow event of `kind` with `id` at `ts` on `thread` (the current one
/// when `None`).
fn flow(site: &'static Callsite, kind: u8, id: u64, ts: u64, thread: Option<(u64, u64)>) {
    match thread {
        Some(t) if t != current_thread() => write_event_on(t, site, kind, ts, &[], &[id]),
        _ => write_event_dyn(site, kind, ts, &[], &[id]),
    }
}

thread_local! {
    static SITES: RefCell<HashMap<(usize, usize), &'static Callsite>> = RefCell::new(HashMap::new());
    static NAMES: RefCell<HashMap<&'static str, &'static StaticName>> = RefCell::new(HashMap::new());
}

/// The call site of (target, name); leaked once per pair and thread.
fn site(target: &'static str, name: &'static str) -> &'static Callsite {
    let key = (
        target.as_ptr() as usize ^ target.len(),
        name.as_ptr() as usize ^ name.len(),
    );
    SITES.with(|m| {
        *m.borrow_mut()
            .entry(key)
            .or_insert_with(|| Box::leak(Box::new(Callsite::new(target, name))))
    })
}

fn arg_name(name: &'static str) -> &'static StaticName {
    NAMES.with(|m| {
        *m.borrow_mut()
            .entry(name)
            .or_insert_with(|| Box::leak(Box::new(StaticName::new(name))))
    })
}

fn level_arg(meta: &Metadata<'_>) -> (&'static StaticName, Value<'static>) {
    (arg_name("level"), Value::Str(meta.level().as_str()))
}

fn write(
    site: &'static Callsite,
    kind: u8,
    ts: u64,
    meta: &Metadata<'_>,
    fields: &Fields,
    extra: &[(&'static str, Value<'_>)],
    trailer: &[u64],
) {
    let mut args: Vec<(&'static StaticName, Value<'_>)> =
        Vec::with_capacity(fields.args.len() + extra.len() + 1);
    args.push(level_arg(meta));
    for (n, v) in extra {
        args.push((arg_name(n), *v));
    }
    for (n, v) in fields.args.iter() {
        if args.len() == crate::engine::MAX_ARGS {
            break;
        }
        args.push((arg_name(n), v.value()));
    }
    write_event_dyn(site, kind, ts, &args, trailer);
}

/// The name tokio gives the task a `runtime.spawn` span is (`task.name`,
/// from `tokio::task::Builder::name`), if any.
fn task_name<'a>(meta: &Metadata<'_>, fields: &'a Fields) -> Option<&'a str> {
    if meta.target() != "tokio::task" || meta.name() != "runtime.spawn" {
        return None;
    }
    fields.args.iter().find_map(|(n, v)| match v {
        Owned::Str(s) if *n == "task.name" && !s.is_empty() => Some(s.as_str()),
        _ => None,
    })
}

/// `ticks` of the clock in nanoseconds.
fn ns(ticks: u64) -> u64 {
    let tps = u128::from(crate::clock::ticks_per_second().max(1));
    u64::try_from(u128::from(ticks) * 1_000_000_000 / tps).unwrap_or(u64::MAX)
}

/// Clock ticks for two nanoseconds (at least one): how far into a poll its
/// flows are put, so that they lie inside it once ticks are nanoseconds.
fn nudge() -> u64 {
    (crate::clock::ticks_per_second() * 2)
        .div_ceil(1_000_000_000)
        .max(1)
}

/// The site of the flows joining polls and wakes.
fn flow_site(target: &'static str) -> &'static Callsite {
    site(target, "poll")
}

impl<S> Layer<S> for TraceLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let meta = attrs.metadata();
        if !site(meta.target(), meta.name()).enabled() {
            return;
        }
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(SpanData::new(fields));
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id)
            && let Some(data) = span.extensions_mut().get_mut::<SpanData>()
        {
            values.record(&mut data.fields);
        }
    }

    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id)
            && let Some(data) = span.extensions_mut().get_mut::<SpanData>()
        {
            let ts = now();
            if let Some(woken) = data.woken_at.take() {
                let delay = ts.saturating_sub(woken);
                data.delay_ns += delay;
                data.max_delay_ns = data.max_delay_ns.max(delay);
                data.delays += 1;
            }
            data.starts.push(ts);
        }
    }

    fn on_follows_from(&self, id: &Id, follows: &Id, ctx: Context<'_, S>) {
        let Some(from) = ctx
            .span(follows)
            .and_then(|s| s.extensions().get::<SpanData>().and_then(|d| d.last_poll))
        else {
            return;
        };
        let Some(span) = ctx.span(id) else { return };
        let meta = span.metadata();
        let site = flow_site(meta.target());
        if !site.enabled() {
            return;
        }
        if let Some(data) = span.extensions_mut().get_mut::<SpanData>() {
            let id = next_id();
            flow(
                site,
                event_type::FLOW_BEGIN,
                id,
                from.0 + nudge(),
                Some(from.1),
            );
            data.incoming.push((id, None));
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else { return };
        let meta = span.metadata();
        let site = site(meta.target(), meta.name());
        let ext = span.extensions();
        let Some(data) = ext.get::<SpanData>() else {
            return;
        };
        if data.polls < 2 || !site.enabled() {
            return;
        }
        // Polled more than once: one async slice from creation to close,
        // a tokio task's named by its name.
        let site = match task_name(meta, &data.fields) {
            Some(name) => site_dynamic(meta.target(), leak_message(name)),
            None => site,
        };
        let end = now();
        let id = next_id();
        let idle = end
            .saturating_sub(data.created)
            .saturating_sub(data.busy_ns);
        let extra = [
            ("polls", Value::U64(u64::from(data.polls))),
            ("busy_ns", Value::U64(ns(data.busy_ns))),
            ("idle_ns", Value::U64(ns(idle))),
            ("wakes", Value::U64(u64::from(data.delays))),
            ("sched_delay_ns", Value::U64(ns(data.delay_ns))),
            ("max_sched_delay_ns", Value::U64(ns(data.max_delay_ns))),
        ];
        write(
            site,
            event_type::ASYNC_BEGIN,
            data.created,
            meta,
            &data.fields,
            &[],
            &[id],
        );
        write(
            site,
            event_type::ASYNC_END,
            end,
            meta,
            &Fields::default(),
            &extra,
            &[id],
        );
    }

    fn on_exit(&self, id: &Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let meta = span.metadata();
        let site = site(meta.target(), meta.name());
        let mut ext = span.extensions_mut();
        let Some(data) = ext.get_mut::<SpanData>() else {
            return;
        };
        let Some(start) = data.starts.pop() else {
            return;
        };
        let end = now();
        if !site.enabled() {
            return;
        }
        write(
            site,
            event_type::DURATION_COMPLETE,
            start,
            meta,
            &data.fields,
            &[],
            &[end],
        );
        if !data.starts.is_empty() {
            // A re-entry inside itself: not a poll.
            return;
        }
        let here = (start, current_thread());
        data.polls += 1;
        data.busy_ns += end.saturating_sub(start);
        // Flows bind to the innermost slice on their thread at their time:
        // two nanoseconds into the poll it is this poll's.
        let fsite = flow_site(meta.target());
        if fsite.enabled() {
            for (id, _) in data.incoming.drain(..) {
                flow(fsite, event_type::FLOW_END, id, start + nudge(), None);
            }
            match data.polls {
                1 => data.first_poll = Some(here),
                _ => {
                    if let Some(first) = data.first_poll.take() {
                        data.flow = next_id();
                        flow(
                            fsite,
                            event_type::FLOW_BEGIN,
                            data.flow,
                            first.0 + nudge(),
                            Some(first.1),
                        );
                    }
                    flow(
                        fsite,
                        event_type::FLOW_STEP,
                        data.flow,
                        start + nudge(),
                        None,
                    );
                }
            }
        }
        data.last_poll = Some(here);
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let meta = event.metadata();
        let target = meta.target();
        if target == TOKIO_WAKER {
            woken(event, &ctx);
        }
        if !site(target, meta.name()).enabled() {
            return;
        }
        let mut fields = Fields::default();
        event.record(&mut fields);
        // The message names the instant; messages are dynamic, so they are
        // interned through a leaked call site only once per distinct text.
        let site = match &fields.message {
            Some(m) => {
                let m: &'static str = leak_message(m);
                site_dynamic(target, m)
            }
            None => site(target, meta.name()),
        };
        write(site, event_type::INSTANT, now(), meta, &fields, &[], &[]);
    }
}

thread_local! {
    static MESSAGES: RefCell<HashMap<String, &'static str>> = RefCell::new(HashMap::new());
}

/// Messages become names; each distinct text is leaked once per thread, up
/// to a bound, after which the generic name "message" is used.
fn leak_message(m: &str) -> &'static str {
    MESSAGES.with(|map| {
        let mut map = map.borrow_mut();
        if let Some(s) = map.get(m) {
            return *s;
        }
        if map.len() >= 4096 {
            return "message";
        }
        let s: &'static str = Box::leak(m.to_owned().into_boxed_str());
        map.insert(m.to_owned(), s);
        s
    })
}

fn site_dynamic(target: &'static str, name: &'static str) -> &'static Callsite {
    let s = site(target, name);
    // Registers the new site so it knows whether its category is enabled.
    let _ = s.enabled();
    s
}

/// The target of tokio's waker events (`--cfg tokio_unstable`): `op` is
/// `waker.wake`, `waker.wake_by_ref`, `waker.clone` or `waker.drop`,
/// `task.id` the task's span.
const TOKIO_WAKER: &str = "tokio::task::waker";

/// What a tokio waker event says: the op and the task's span id.
#[derive(Default)]
struct WakerOp {
    op: Option<String>,
    task: Option<u64>,
}

impl Visit for WakerOp {
    fn record_u64(&mut self, f: &Field, v: u64) {
        if f.name() == "task.id" {
            self.task = Some(v);
        }
    }
    fn record_str(&mut self, f: &Field, v: &str) {
        if f.name() == "op" {
            self.op = Some(v.to_owned());
        }
    }
    fn record_debug(&mut self, f: &Field, v: &dyn std::fmt::Debug) {
        match f.name() {
            "op" => self.op = Some(format!("{v:?}").trim_matches('"').to_owned()),
            "task.id" => self.task = format!("{v:?}").parse().ok(),
            _ => {}
        }
    }
}

/// A tokio task was woken: the time waits for its next poll (its
/// scheduling delay), and a wake from inside a span is a flow from there to
/// that poll.
fn woken<S>(event: &Event<'_>, ctx: &Context<'_, S>)
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    let mut w = WakerOp::default();
    event.record(&mut w);
    let (Some(op), Some(task)) = (w.op, w.task) else {
        return;
    };
    if op != "waker.wake" && op != "waker.wake_by_ref" {
        return;
    }
    let Some(span) = std::num::NonZeroU64::new(task)
        .map(Id::from_non_zero_u64)
        .and_then(|id| ctx.span(&id))
    else {
        return;
    };
    let ts = now();
    // The waking span's current slice began at its last enter: a flow two
    // nanoseconds in binds to it, not to a slice nested in it since.
    let waking = ctx.lookup_current().and_then(|cur| {
        let ext = cur.extensions();
        ext.get::<SpanData>().and_then(|d| d.starts.last().copied())
    });
    let fsite = flow_site(span.metadata().target());
    let mut ext = span.extensions_mut();
    let Some(data) = ext.get_mut::<SpanData>() else {
        return;
    };
    if data.woken_at.is_some() {
        return;
    }
    data.woken_at = Some(ts);
    if let Some(start) = waking
        && fsite.enabled()
    {
        let id = next_id();
        flow(fsite, event_type::FLOW_BEGIN, id, start + nudge(), None);
        data.incoming.push((id, Some(ts)));
    }
}

#[cfg(test)]
mod tests;
