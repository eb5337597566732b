//! `cargo bench -p ferry-tests --bench transforms`: what a connector's transform chain
//! costs per message, next to the same transform done natively, in the same run.
//!
//! Both sides get the same batches of `{"seq":N,"name":"..."}` records (about 100
//! bytes each, ids set, as a source's batch has them when its chain runs) and do the
//! same work on every record:
//!
//! * `fields`: Iggy's `add_fields` (one static field) then `delete_fields` (one
//!   field), run by ferry's chain, against serde_json doing the same by hand (parse,
//!   insert, remove, write back as compact JSON);
//! * `component`: a transform component (the test guest `faulty-transform`, adding
//!   a `tag` and dropping every 7th `seq`) run by ferry's chain in its sandbox (one
//!   call per batch, records lifted into and out of the guest), against the same
//!   done natively in this process: the price of the sandbox and the crossing.
//!
//! Printed per shape: µs per batch and ns per message of each side, and ferry's
//! rate over the native one (the median of `FERRY_BENCH_ROUNDS` rounds, the two
//! sides taking turns to go first, with the lowest and highest round's ratio).
//! `FERRY_BENCH_SCALE=0.1` is a quick look.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferry::capabilities::logging::{GuestLog, LogBudget};
use ferry::config::transforms::Transforms;
use ferry::contract::{Message, Uint128};
use ferry::engine::transform::{Chain, ComponentLink, Schemas};
use ferry::runtime::{InstanceMeters, PendingComponent, Runtime, Sandbox, TransformWorld};
use ferry_tests::bench::{Measured, Rounds, compare};
use ferry_tests::components::FAULTY_TRANSFORM;
use serde::Deserialize;
use serde_json::Value;

/// Every 7th `seq` is dropped by the component and by its native twin.
const DROP_EVERY: u64 = 7;

fn main() {
    let scale = ferry_tests::bench::scale();
    let tokio = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let runtime = Arc::new(Runtime::new().expect("a runtime"));
    let fields = chain(&runtime, FIELDS);
    let component = chain(&runtime, &component_toml());

    println!(
        "transform chains against the same work done natively (median of {} rounds)",
        ferry_tests::bench::rounds()
    );
    println!(
        "{:<10} {:>6} {:>14} {:>14} {:>12} {:>12}  ferry/native",
        "chain", "batch", "ferry µs/batch", "native µs/batch", "ferry ns/msg", "native ns/msg"
    );
    for batch in [10u64, 100, 1000] {
        let total = ((200_000.0 * scale) as u64).max(batch * 10) / batch * batch;
        let batches: Vec<Vec<Message>> = (0..total / batch).map(|b| records(b * batch, batch)).collect();
        for (name, chain, native) in [
            ("fields", &fields, native_fields as fn(Vec<Message>) -> Vec<Message>),
            ("component", &component, native_component),
        ] {
            let (ferry_side, native_side) = compare(
                |_| Measured::after_first(total, batch, tokio.block_on(run_chain(chain, &batches))),
                |_| Measured::after_first(total, batch, run_native(native, &batches)),
            );
            let ns = |m: &Measured| m.elapsed.as_secs_f64() * 1e9 / m.messages as f64;
            println!(
                "{name:<10} {batch:>6} {:>14.1} {:>14.1} {:>12.0} {:>12.0}  {}",
                ferry_side.median.micros_per_batch(),
                native_side.median.micros_per_batch(),
                ns(&ferry_side.median),
                ns(&native_side.median),
                Rounds::ratio(&ferry_side, &native_side)
            );
        }
    }
}

const FIELDS: &str = r#"
[transforms.add_fields]
enabled = true
fields = [{ key = "source", value.static = "orders" }]

[transforms.delete_fields]
enabled = true
fields = ["name"]
"#;

fn component_toml() -> String {
    format!(
        r#"
[transforms.tagger]
enabled = true
component = "{FAULTY_TRANSFORM}"
plugin_config = {{ tag = "t", drop_multiples_of = {DROP_EVERY} }}
"#
    )
}

/// The chain the TOML `transforms` table describes, its components compiled now.
fn chain(runtime: &Arc<Runtime>, text: &str) -> Chain {
    #[derive(Deserialize)]
    struct Holder {
        transforms: Transforms,
    }
    let transforms = toml::from_str::<Holder>(text).expect("the bench's transforms").transforms;
    Chain::new(Schemas::None, &transforms, |transform| {
        let component = runtime.load::<TransformWorld>(&transform.component).expect("the transform component");
        let budget = LogBudget::new(1000, 1000, Arc::new(AtomicU64::new(0)));
        ComponentLink {
            name: transform.name.clone(),
            runtime: runtime.clone(),
            component: PendingComponent::ready(component),
            sandbox: Sandbox::default(),
            plugin_config: transform.plugin_config_json(),
            log: GuestLog::new(tracing::Span::none(), budget),
            meters: InstanceMeters::default(),
            instance: tokio::sync::Mutex::new(None),
        }
    })
    .expect("the bench's transforms")
    .expect("some transforms")
}

/// `count` records from `seq` `first`, about 100 bytes each, with ids.
fn records(first: u64, count: u64) -> Vec<Message> {
    (first..first + count)
        .map(|seq| Message {
            id: Some(Uint128::from(u128::from(seq) + 1)),
            headers: Vec::new(),
            payload: Bytes::from(format!(r#"{{"seq":{seq},"name":"{:0>70}"}}"#, seq)),
            origin_timestamp: None,
        })
        .collect()
}

async fn run_chain(chain: &Chain, batches: &[Vec<Message>]) -> Duration {
    let mut start = Instant::now();
    for (index, batch) in batches.iter().enumerate() {
        let transformed = chain.messages(batch.clone()).await.expect("the chain transforms");
        std::hint::black_box(transformed);
        if index == 0 {
            start = Instant::now();
        }
    }
    start.elapsed()
}

fn run_native(native: fn(Vec<Message>) -> Vec<Message>, batches: &[Vec<Message>]) -> Duration {
    let mut start = Instant::now();
    for (index, batch) in batches.iter().enumerate() {
        std::hint::black_box(native(batch.clone()));
        if index == 0 {
            start = Instant::now();
        }
    }
    start.elapsed()
}

/// `add_fields` + `delete_fields`, by hand.
fn native_fields(batch: Vec<Message>) -> Vec<Message> {
    batch
        .into_iter()
        .map(|mut message| {
            if let Ok(Value::Object(mut fields)) = serde_json::from_slice::<Value>(&message.payload) {
                fields.insert("source".into(), "orders".into());
                fields.shift_remove("name");
                message.payload = serde_json::to_vec(&Value::Object(fields)).unwrap().into();
            }
            message
        })
        .collect()
}

/// The component's work, by hand: every 7th `seq` dropped, a `tag` added.
fn native_component(batch: Vec<Message>) -> Vec<Message> {
    batch
        .into_iter()
        .filter_map(|mut message| {
            let Ok(mut value) = serde_json::from_slice::<Value>(&message.payload) else { return Some(message) };
            if value["seq"].as_u64().is_some_and(|seq| seq.is_multiple_of(DROP_EVERY)) {
                return None;
            }
            value["tag"] = "t".into();
            message.payload = serde_json::to_vec(&value).unwrap().into();
            Some(message)
        })
        .collect()
}
