//! `cargo bench -p ferry-tests --bench influxdb_sink`: the InfluxDB sink draining the
//! local log into an InfluxDB 1.x server, next to a native program doing the same job
//! in the same run, against the same server.
//!
//! The server is Debian's `influxd` started by the benchmark
//! (`ferry_tests::influxdb_server`). For each shape (`payload_format` × messages per
//! batch), with a topic of ~100-byte JSON records (`{"seq":N,"text":"xx..."}`) filled
//! first, each run writing into a database of its own:
//!
//! * ferry: the `influxdb-sink` component reading the topic through the host's sink
//!   loop (read a batch, lift it into the guest, which maps each record to a point of
//!   line protocol and `POST`s the batch to `/write` through `wasi:http`), then the
//!   position stored in the state file;
//! * native: a loop reading the same batches with the same reader, building the same
//!   lines (serde_json, the same escaping) and `POST`ing them with `reqwest` (one
//!   kept-alive connection, each request awaited), then storing the position the
//!   same way.
//!
//! The points: measurement `bench`, tags `stream`, `topic`, `partition`, the
//! record's `seq` as the timestamp (ns), so every record is its own point of one
//! series; `fields` writes `text` as a field, `json` Iggy's `message_id` and
//! `payload_json`. Three rounds each (`FERRY_BENCH_ROUNDS`), taking turns to go
//! first; the medians and the ratio `ferry / native` are printed.
//! `FERRY_BENCH_SCALE=0.2` writes a fifth.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry::engine::cursor::CursorStore;
use ferry::engine::delivery::{LogMark, Receipt};
use ferry::engine::sink::SinkConnector;
use ferry::runtime::{Runtime, Sandbox, SinkWorld};
use ferry::store::local_log::{LocalLogInput, Record, TopicReader};
use ferry::store::state::StateDir;
use ferry_tests::bench::{Measured, Rounds, SinkEnd, compare, fill_local_log, time_sink};
use ferry_tests::components::INFLUXDB_SINK;
use ferry_tests::harness::quick_sink_settings;
use ferry_tests::influxdb_server::InfluxServer;
use serde_json::{Value, json};

/// `payload_format`, messages a batch, messages in all (times the scale).
const SHAPES: &[(&str, u32, u64)] = &[("fields", 500, 100_000), ("json", 500, 100_000), ("fields", 5000, 200_000)];
const PAYLOAD: usize = 100;

fn main() {
    let scale = ferry_tests::bench::scale();
    let server = InfluxServer::start();
    let tokio = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let runtime = Arc::new(Runtime::new().expect("runtime"));
    println!(
        "the server: influxd on {}; each side {} times, taking turns",
        server.address(),
        ferry_tests::bench::rounds()
    );
    println!(
        "{:<8} {:>6} {:>8} {:>12} {:>12} {:>10} {:>10}  ratio ferry/native (of the medians; lowest-highest)",
        "format", "batch", "messages", "ferry msg/s", "native msg/s", "ferry µs", "native µs"
    );
    for &(format, batch, messages) in SHAPES {
        let messages = ((messages as f64 * scale) as u64).max(u64::from(batch) * 20);
        let dir = tempfile::tempdir().unwrap();
        tokio.block_on(fill_local_log(&dir.path().join("log"), messages, PAYLOAD));
        let ferry = |run| {
            let db = format!("ferry_{format}_{batch}_{run}");
            server.create_database(&db);
            let measured = tokio.block_on(ferry_sink(&runtime, dir.path(), &server, &db, format, batch, messages));
            assert_eq!(count(&server, &db), messages, "ferry wrote every point");
            measured
        };
        let native = |run| {
            let db = format!("native_{format}_{batch}_{run}");
            server.create_database(&db);
            let measured = native_sink(dir.path(), &server, &db, format, batch, messages);
            assert_eq!(count(&server, &db), messages, "the native side wrote every point");
            measured
        };
        let (ferry, native) = compare(ferry, native);
        let (f, n) = (&ferry.median, &native.median);
        println!(
            "{:<8} {:>6} {:>8} {:>12.0} {:>12.0} {:>10.1} {:>10.1}  {}",
            format,
            batch,
            messages,
            f.rate(),
            n.rate(),
            f.micros_per_batch(),
            n.micros_per_batch(),
            Rounds::ratio(&ferry, &native)
        );
    }
}

/// The points in `bench` of `db`.
fn count(server: &InfluxServer, db: &str) -> u64 {
    let rows = server.select(db, "SELECT count(*) FROM bench");
    rows.first()
        .and_then(|row| row.iter().find(|(k, _)| k.starts_with("count_")))
        .and_then(|(_, v)| v.as_u64())
        .unwrap_or(0)
}

fn plugin_config(server: &InfluxServer, db: &str, format: &str, batch: u32) -> Value {
    json!({
        "url": server.url(""), "db": db, "measurement": "bench", "payload_format": format, "batch_size": batch,
        "timestamp_field": "seq", "precision": "ns", "include_offset_tag": false, "include_origin_timestamp": false,
    })
}

async fn ferry_sink(
    runtime: &Arc<Runtime>,
    dir: &Path,
    server: &InfluxServer,
    db: &str,
    format: &str,
    batch: u32,
    messages: u64,
) -> Measured {
    let key = db.to_string();
    let state = StateDir::new(dir.join("state")).open(&key).expect("state");
    let input =
        Arc::new(LocalLogInput::new("bench", dir.join("log"), vec![("bench".into(), "t".into())], Arc::new(state)));
    let mut sandbox = Sandbox::default();
    sandbox.grants.network = vec![server.address()];
    let connector = SinkConnector {
        key: key.as_str().into(),
        tenant: None,
        component: runtime.load::<SinkWorld>(Path::new(INFLUXDB_SINK)).expect("the sink loads").into(),
        plugin_config: plugin_config(server, db, format, batch).to_string(),
        settings: ferry::engine::sink::SinkSettings {
            poll_interval: Duration::from_millis(1),
            batch_length: batch,
            ..quick_sink_settings()
        },
        sandbox,
        input,
        transforms: None,
        dead_letters: None,
    };
    let elapsed = time_sink(runtime, connector, messages, SinkEnd::Drained).await;
    Measured::after_first(messages, u64::from(batch), elapsed)
}

/// A string field's value in quotes, `"` and `\` escaped, as line protocol wants.
fn quoted(out: &mut String, text: &str) {
    out.push('"');
    for c in text.chars() {
        if matches!(c, '"' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
}

/// The point of `record`, as the sink writes it with [`plugin_config`].
fn line(out: &mut String, format: &str, record: &Record) {
    let payload: Value = serde_json::from_slice(&record.payload).expect("JSON");
    let object = payload.as_object().expect("an object");
    out.push_str("bench,stream=bench,topic=t,partition=0 ");
    if format == "fields" {
        let mut first = true;
        for (key, value) in object.iter().filter(|(key, _)| *key != "seq") {
            if !first {
                out.push(',');
            }
            first = false;
            out.push_str(key);
            out.push('=');
            match value {
                Value::String(text) => quoted(out, text),
                Value::Number(n) if n.is_i64() => out.push_str(&format!("{n}i")),
                other => out.push_str(&other.to_string()),
            }
        }
    } else {
        out.push_str(&format!("message_id=\"{}\",payload_json=", record.id.unwrap_or(0)));
        quoted(out, &serde_json::to_string(&payload).unwrap());
    }
    out.push_str(&format!(" {}", object["seq"]));
}

/// The same job natively: the same reader, lines, requests and position store.
fn native_sink(dir: &Path, server: &InfluxServer, db: &str, format: &str, batch: u32, messages: u64) -> Measured {
    let state = StateDir::new(dir.join("state")).open(db).expect("state");
    let reader = TopicReader::open(&dir.join("log"), "bench", "t").expect("the topic");
    let tokio = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let client = reqwest::Client::builder().build().unwrap();
    let url = server.url(&format!("/write?db={db}&precision=n"));
    let (mut at, mut batches, mut start) = (0u64, 0u64, None);
    while at < messages {
        let records = reader.read(at, u64::from(batch)).expect("reading");
        let mut body = String::with_capacity(records.len() * 160);
        for (i, record) in records.iter().enumerate() {
            if i > 0 {
                body.push('\n');
            }
            line(&mut body, format, record);
        }
        let request = client
            .post(&url)
            .header("Content-Type", "text/plain; charset=utf-8")
            .timeout(Duration::from_secs(30))
            .body(body.into_bytes());
        tokio.block_on(async {
            let response = request.send().await.expect("an answer");
            assert_eq!(response.status().as_u16(), 204, "{}", response.text().await.unwrap_or_default());
        });
        at = records.last().map_or(at, |r| r.offset + 1);
        let positions = serde_json::to_vec(&json!({ "bench/t": at })).unwrap();
        let receipt = Receipt { marks: vec![LogMark::new("bench", "t", at)] };
        tokio.block_on(state.commit(positions, receipt)).expect("storing the position");
        if start.is_none() {
            start = Some(Instant::now());
        } else {
            batches += 1;
        }
    }
    Measured { messages: messages - u64::from(batch), batches, elapsed: start.unwrap().elapsed() }
}
