//! A capture of everything logged in the test process, with the connector key of the
//! span each line was logged in: how a test sees what a guest logged.

use std::sync::{Arc, Mutex, OnceLock};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

/// One captured line.
#[derive(Debug, Clone)]
pub struct Line {
    pub key: Option<String>,
    pub target: String,
    pub level: Level,
    pub message: String,
}

#[derive(Default)]
pub struct Captured {
    lines: Mutex<Vec<Line>>,
}

impl Captured {
    /// Every line captured so far.
    pub fn all(&self) -> Vec<Line> {
        self.lines.lock().unwrap().clone()
    }

    /// Lines logged under connector `key`.
    pub fn of(&self, key: &str) -> Vec<Line> {
        self.lines.lock().unwrap().iter().filter(|l| l.key.as_deref() == Some(key)).cloned().collect()
    }

    /// Lines the guest of connector `key` logged.
    pub fn guest_lines(&self, key: &str) -> Vec<String> {
        self.of(key).into_iter().filter(|l| l.target == "ferry::guest").map(|l| l.message).collect()
    }
}

/// The capture, installed as the global subscriber on first use. Set
/// `FERRY_TEST_LOG` to a filter (`info`, `ferry=debug`) to also print the log.
pub fn capture() -> Arc<Captured> {
    static CAPTURE: OnceLock<Arc<Captured>> = OnceLock::new();
    CAPTURE
        .get_or_init(|| {
            let captured = Arc::new(Captured::default());
            let print = std::env::var("FERRY_TEST_LOG").ok().map(|filter| {
                tracing_subscriber::fmt::layer()
                    .with_test_writer()
                    .with_filter(tracing_subscriber::EnvFilter::new(filter))
            });
            let subscriber = tracing_subscriber::registry().with(CaptureLayer(captured.clone())).with(print);
            tracing::subscriber::set_global_default(subscriber).expect("no other global subscriber in the suite");
            captured
        })
        .clone()
}

struct CaptureLayer(Arc<Captured>);

struct ConnectorKey(String);

#[derive(Default)]
struct Fields {
    key: Option<String>,
    message: String,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "key" => self.key = Some(value.to_string()),
            "message" => self.message = value.to_string(),
            _ => {}
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        match field.name() {
            "key" => self.key = Some(format!("{value:?}")),
            "message" => self.message = format!("{value:?}"),
            _ => {}
        }
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for CaptureLayer {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        if let (Some(key), Some(span)) = (fields.key, ctx.span(id)) {
            span.extensions_mut().insert(ConnectorKey(key));
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        let key = fields.key.or_else(|| {
            ctx.event_scope(event)?
                .from_root()
                .find_map(|span| span.extensions().get::<ConnectorKey>().map(|k| k.0.clone()))
        });
        let metadata = event.metadata();
        self.0.lines.lock().unwrap().push(Line {
            key,
            target: metadata.target().to_string(),
            level: *metadata.level(),
            message: fields.message,
        });
    }
}
