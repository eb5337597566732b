//! Sink connectors reading the local log, with the faulty sink
//! (`tests/guests/faulty-sink`) answering each way the contract allows: `retry`, a
//! trap, `reject`, `unwritable`; and what the host must make of each: the same
//! messages again with the offset where it was, dead letters with where they came
//! from, bisection down to the poison messages, nothing ever dropped. Then graceful
//! shutdown, and (as a process) bad sink configs, `ferry status` and `ferry state
//! show`, the counters of what was written apart from what was dead-lettered, and
//! positions tampered with (refused, never applied to a file they do not fit), and
//! records whose stored headers cannot be read (dead-lettered, or skipped by hand).

mod answers;
mod cli;
mod contract_patch;
mod counters;
mod positions;
mod shutdown;
mod tampered;
mod unreadable;

use std::path::PathBuf;
use std::sync::Arc;

use ferry::capabilities::dirs::DirGrant;
use ferry::engine::cursor::CursorStore;
use ferry::engine::sink::SinkConnector;
use ferry::engine::status::Event;
use ferry_tests::components::FAULTY_SINK;
use ferry_tests::harness::Harness;
use ferry_tests::records::positions;
use serde_json::json;

/// A faulty sink `key` reading `test/<topic>` of each of `topics`, recording what it
/// writes in a directory of its own (returned, granted as `/out`; the same for every
/// sink `key` of a test), with `modes` (its `plugin_config` keys) and its positions
/// kept in `positions`.
fn faulty_sink_keeping(
    h: &Harness,
    key: &str,
    topics: &[&str],
    modes: serde_json::Value,
    positions: Arc<dyn CursorStore>,
) -> (SinkConnector, PathBuf) {
    let out = h.dir.path().join(format!("{key}-out"));
    std::fs::create_dir_all(&out).unwrap();
    let mut config = json!({ "dir": "/out" });
    config.as_object_mut().unwrap().extend(modes.as_object().expect("modes are a JSON object").clone());
    let mut sink = h.sink_keeping(key, FAULTY_SINK, config, topics, positions);
    sink.sandbox.grants.dirs.push(DirGrant { host: out.clone(), guest: "/out".into(), writable: true });
    (sink, out)
}

/// [`faulty_sink_keeping`] with its positions in the harness's state.
fn faulty_sink(h: &Harness, key: &str, topics: &[&str], modes: serde_json::Value) -> (SinkConnector, PathBuf) {
    faulty_sink_keeping(h, key, topics, modes, h.cursor(key))
}

/// A config for `ferry run` with the faulty sink `reader` reading `topics` of the
/// local log's stream `demo`, writing into `out` of the site, with `settings` (keys
/// of its table).
fn reader_config(settings: &str, topics: &[&str]) -> String {
    format!(
        r#"
[runtime]
shutdown_grace_period = "20s"
[state]
path = "state"
[local_log]
path = "log"

[[sinks]]
key = "reader"
path = "{FAULTY_SINK}"
poll_interval = "2ms"
{settings}
[[sinks.streams]]
stream = "demo"
topics = {topics:?}
[sinks.grants]
dirs = [{{ host = "out", guest = "/out", writable = true }}]
[sinks.plugin_config]
dir = "/out"
"#
    )
}

fn committed_position(h: &Harness, key: &str, topic: &str) -> Option<u64> {
    let committed = h.committed(key)?;
    let positions = positions(&committed.state);
    assert_eq!(positions.len(), 1, "one topic read, one position: {positions:?}");
    Some(
        *positions
            .get(&format!("test/{topic}"))
            .unwrap_or_else(|| panic!("no position of test/{topic}: {positions:?}")),
    )
}

/// Sink `key` settled a batch, storing the position `end`.
fn written(key: &'static str, end: u64) -> impl FnMut(&Event) -> bool {
    move |e| matches!(e, Event::Written { key: k, end: e, .. } if &**k == key && *e == end)
}

/// Wait until `running`'s sink `key` stored its position at `end` of `orders`: the
/// topic the connector sinks' tests read.
pub(crate) async fn wait_written_orders(running: &mut ferry_tests::harness::Running, key: &str, end: u64) {
    running
        .wait_for(&format!("{key} to write up to {end}"), |e| {
            matches!(e, Event::Written { key: k, topic, end: e, .. } if **k == *key && topic == "orders" && *e == end)
        })
        .await;
}

/// Run `sink` until it stored its position past offset `end - 1` of `orders`.
pub(crate) async fn drain_orders(h: &Harness, sink: SinkConnector, end: u64) {
    let key = sink.key.to_string();
    let mut running = ferry_tests::harness::Running::start(h.host_with(Vec::new(), vec![sink]));
    wait_written_orders(&mut running, &key, end).await;
    running.stop().await;
}
