//! A `tracing` subscriber of the tests' own: it keeps every span opened in the process (its
//! name, its fields as declared and as recorded later, whether it closed) and every event
//! (its fields and the span it happened in), for a test to read back.
//!
//! Installed as the global default, once per test binary: the watchdog renews on a thread of
//! its own, which a thread-local default would not see. Tests of one binary run side by side,
//! so each reads only what carries its own client's id.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};

/// A span as the subscriber saw it.
#[derive(Debug, Clone)]
pub struct SpanSeen {
    pub id: u64,
    pub name: &'static str,
    pub level: Level,
    pub fields: HashMap<&'static str, String>,
    /// Closed (its last handle dropped): every field it will have is recorded.
    pub closed: bool,
}

impl SpanSeen {
    /// The value of field `name` (`""` if it has none).
    pub fn field(&self, name: &str) -> &str {
        self.fields.get(name).map_or("", String::as_str)
    }
}

/// An event as the subscriber saw it.
#[derive(Debug, Clone)]
pub struct EventSeen {
    pub level: Level,
    pub fields: HashMap<&'static str, String>,
    /// The span it happened in: its explicit parent, else the span entered on its thread.
    pub span: Option<u64>,
}

impl EventSeen {
    pub fn field(&self, name: &str) -> &str {
        self.fields.get(name).map_or("", String::as_str)
    }
}

#[derive(Default)]
struct Seen {
    /// Span `id` at index `id - 1`, with its count of live handles.
    spans: Vec<(SpanSeen, usize)>,
    events: Vec<EventSeen>,
}

/// The subscriber.
#[derive(Default)]
pub struct Recorder {
    seen: Mutex<Seen>,
}

thread_local! {
    /// The spans entered on this thread, innermost last.
    static ENTERED: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
}

/// Installs the recorder as the process's subscriber (the first call), and returns it.
pub fn install() -> &'static Recorder {
    static RECORDER: OnceLock<&'static Recorder> = OnceLock::new();
    RECORDER.get_or_init(|| {
        let recorder: &'static Recorder = Box::leak(Box::default());
        tracing::subscriber::set_global_default(Shared(recorder))
            .expect("the only subscriber of this test binary");
        recorder
    })
}

impl Recorder {
    /// Spans named `name` whose `client_id` is `client_id`, in the order they were opened.
    pub fn spans(&self, name: &str, client_id: &str) -> Vec<SpanSeen> {
        let seen = self.seen.lock().unwrap();
        (seen.spans.iter().map(|(span, _)| span))
            .filter(|s| s.name == name && s.field("client_id") == client_id)
            .cloned()
            .collect()
    }

    /// Every span and every event (what a test checks for secrets).
    pub fn all(&self) -> (Vec<SpanSeen>, Vec<EventSeen>) {
        let seen = self.seen.lock().unwrap();
        let spans = seen.spans.iter().map(|(span, _)| span.clone()).collect();
        (spans, seen.events.clone())
    }

    /// Events that happened in span `id`.
    pub fn events_in(&self, id: u64) -> Vec<EventSeen> {
        let seen = self.seen.lock().unwrap();
        (seen.events.iter())
            .filter(|e| e.span == Some(id))
            .cloned()
            .collect()
    }

    /// The first closed span named `name` of `client_id` that `pick` accepts, waiting up to
    /// `timeout` for it.
    pub async fn closed(
        &self,
        name: &str,
        client_id: &str,
        timeout: Duration,
        pick: impl Fn(&SpanSeen) -> bool,
    ) -> Option<SpanSeen> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let found = (self.spans(name, client_id).into_iter()).find(|s| s.closed && pick(s));
            if found.is_some() || tokio::time::Instant::now() >= deadline {
                return found;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Fields as text: strings as they are, everything else as `Debug` shows it (a `%` field's
/// `Debug` is its `Display`).
struct Fields<'a>(&'a mut HashMap<&'static str, String>);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name(), value.to_string());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name(), format!("{value:?}"));
    }
}

/// The recorder as a `Subscriber` (a `'static` borrow: the global default needs an owner).
struct Shared(&'static Recorder);

impl Subscriber for Shared {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }

    fn new_span(&self, attrs: &Attributes<'_>) -> Id {
        let mut fields = HashMap::new();
        attrs.record(&mut Fields(&mut fields));
        let mut seen = self.0.seen.lock().unwrap();
        let id = seen.spans.len() as u64 + 1;
        let span = SpanSeen {
            id,
            name: attrs.metadata().name(),
            level: *attrs.metadata().level(),
            fields,
            closed: false,
        };
        seen.spans.push((span, 1));
        Id::from_u64(id)
    }

    fn record(&self, span: &Id, values: &Record<'_>) {
        let mut seen = self.0.seen.lock().unwrap();
        let (span, _) = &mut seen.spans[span.into_u64() as usize - 1];
        values.record(&mut Fields(&mut span.fields));
    }

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let mut fields = HashMap::new();
        event.record(&mut Fields(&mut fields));
        let span = match event.parent() {
            Some(parent) => Some(parent.into_u64()),
            None if event.is_contextual() => ENTERED.with(|e| e.borrow().last().copied()),
            None => None,
        };
        let level = *event.metadata().level();
        let seen = EventSeen {
            level,
            fields,
            span,
        };
        self.0.seen.lock().unwrap().events.push(seen);
    }

    fn enter(&self, span: &Id) {
        ENTERED.with(|e| e.borrow_mut().push(span.into_u64()));
    }

    fn exit(&self, span: &Id) {
        ENTERED.with(|e| {
            let mut entered = e.borrow_mut();
            if let Some(at) = entered.iter().rposition(|s| *s == span.into_u64()) {
                entered.remove(at);
            }
        });
    }

    fn clone_span(&self, span: &Id) -> Id {
        let mut seen = self.0.seen.lock().unwrap();
        seen.spans[span.into_u64() as usize - 1].1 += 1;
        span.clone()
    }

    fn try_close(&self, span: Id) -> bool {
        let mut seen = self.0.seen.lock().unwrap();
        let (seen, handles) = &mut seen.spans[span.into_u64() as usize - 1];
        *handles -= 1;
        seen.closed = *handles == 0;
        seen.closed
    }
}
