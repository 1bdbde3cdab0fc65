//! A `tracing` layer: programs instrumented with the `tracing` crate become
//! trace providers by adding [`TraceLayer`] to their subscriber.
//!
//! Spans become complete duration events (one per enter/exit), events become
//! instants; the category is the target (`my_app::net`), the name is the
//! span name or the event's message, and fields become arguments, with the
//! level as a `level` argument.

use std::cell::RefCell;
use std::collections::HashMap;

use tracing_core::field::{Field, Visit};
use tracing_core::span::{Attributes, Id, Record};
use tracing_core::{Event, Metadata, Subscriber};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::registry::LookupSpan;

use crate::__private::{event_type, now};
use crate::engine::write_event_dyn;
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

struct SpanData {
    fields: Fields,
    starts: Vec<u64>,
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
    trailer: &[u64],
) {
    let mut args: Vec<(&'static StaticName, Value<'_>)> = Vec::with_capacity(fields.args.len() + 1);
    args.push(level_arg(meta));
    for (n, v) in fields.args.iter().take(crate::engine::MAX_ARGS - 1) {
        args.push((arg_name(n), v.value()));
    }
    write_event_dyn(site, kind, ts, &args, trailer);
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
            span.extensions_mut().insert(SpanData {
                fields,
                starts: Vec::new(),
            });
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
            data.starts.push(now());
        }
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
        if site.enabled() {
            write(
                site,
                event_type::DURATION_COMPLETE,
                start,
                meta,
                &data.fields,
                &[now()],
            );
        }
    }

    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let meta = event.metadata();
        let target = meta.target();
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
        write(site, event_type::INSTANT, now(), meta, &fields, &[]);
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

/// Spans and events of a program instrumented with the `tracing` crate,
/// written by the real engine into a real buffer.
#[cfg(test)]
mod tests {
    use trace_common::fxt::read::{Reader, TraceState};
    use trace_common::fxt::write::encode;
    use trace_common::fxt::{ArgValue, EventKind, Record};
    use trace_common::provider::buffer::{HEADER_BYTES, Header, Layout, RecordWalk, WalkMode};
    use trace_common::provider::{BufferDisposition, BufferingMode};
    use tracing_subscriber::layer::SubscriberExt;

    use super::TraceLayer;
    use crate::engine;

    #[test]
    fn spans_become_durations_and_events_become_instants() {
        let _g = engine::serial();
        let mut words = vec![0u64; (1 << 20) / 8];
        let len = words.len() * 8;
        // SAFETY: `words` outlives the trace: the engine is terminated below.
        unsafe {
            engine::initialize(
                words.as_mut_ptr().cast(),
                len,
                BufferingMode::Oneshot,
                vec!["layer_test*".to_owned()],
                None,
            )
        }
        .unwrap();
        engine::start(BufferDisposition::ClearEntire, vec![]);
        let subscriber = tracing_subscriber::registry().with(TraceLayer);
        tracing::subscriber::with_default(subscriber, || {
            let span =
                tracing::info_span!(target: "layer_test::net", "send", bytes = 7u64, peer = "a");
            {
                let _e = span.enter();
                tracing::warn!(target: "layer_test::net", attempt = 2i64, "retrying");
            }
            tracing::info!(target: "elsewhere", "not enabled");
        });
        engine::stop();
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        engine::terminate();

        let layout = Layout::new(BufferingMode::Oneshot, len as u64).unwrap();
        let h = Header::read(bytes[..HEADER_BYTES].try_into().unwrap());
        let mut fxt = Vec::new();
        encode(&Record::Magic, &mut fxt).unwrap();
        let d = layout.durable_offset() as usize;
        for r in RecordWalk::new(
            &bytes[d..d + h.durable_data_end as usize],
            WalkMode::Durable,
        ) {
            fxt.extend_from_slice(r.bytes);
        }
        let r0 = layout.rolling_offset(0) as usize;
        for r in RecordWalk::new(
            &bytes[r0..r0 + h.rolling_data_end[0] as usize],
            WalkMode::Chunked,
        ) {
            fxt.extend_from_slice(r.bytes);
        }
        let mut state = TraceState::new();
        let mut seen = Vec::new();
        for r in Reader::new(&fxt) {
            let (_, rec) = r.unwrap();
            state.apply(&rec);
            if let Record::Event {
                category,
                name,
                args,
                kind,
                ..
            } = &rec
            {
                let arg = |n: &str| match state.arg(args, n) {
                    Some(ArgValue::String(s)) => state.string(s).unwrap().to_owned(),
                    Some(v) => format!("{v:?}"),
                    None => String::new(),
                };
                seen.push((
                    state.string(category).unwrap().to_owned(),
                    state.string(name).unwrap().to_owned(),
                    *kind,
                    arg("level"),
                    arg("bytes"),
                    arg("attempt"),
                ));
            }
        }
        assert_eq!(seen.len(), 2, "{seen:?}");
        assert_eq!(seen[0].0, "layer_test::net");
        assert_eq!(seen[0].1, "retrying");
        assert_eq!(seen[0].2, EventKind::Instant);
        assert_eq!(seen[0].3, "WARN");
        assert_eq!(seen[0].5, "Int64(2)");
        assert_eq!(seen[1].1, "send");
        assert!(matches!(seen[1].2, EventKind::DurationComplete { .. }));
        assert_eq!(seen[1].4, "Uint64(7)");
    }
}
