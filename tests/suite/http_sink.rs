//! The HTTP sink against a real HTTP server the test runs (axum, on a free port):
//! every message arrives (once per `Idempotency-Key`, duplicates after a `kill -9`
//! counted), a busy server's 503s are retried, a body the server refuses (422) goes
//! to the dead letters with the server's answer, and an address not granted is
//! never reached.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::http::{HeaderMap, StatusCode};
use nix::sys::signal::Signal;
use serde_json::Value;

use crate::iggy_sinks::until;
use crate::process::{Ferry, Site};
use ferry::store::local_log::LocalLog;
use ferry_tests::components::{HTTP_SINK, RANDOM_SOURCE};

const COUNT: u64 = 300;

/// What the server was sent: each message's request key and seq, in order; and how
/// many 503s it still answers.
#[derive(Default)]
pub(crate) struct Received {
    pub requests: Vec<(String, u64)>,
    busy: u32,
    /// The `Authorization` header of the last request taken, if it had one.
    pub authorization: Option<String>,
    /// Each envelope's `metadata.iggy_offset` and `metadata.iggy_checksum`, where it
    /// had a checksum (`include_checksum`).
    pub checksums: Vec<(u64, u64)>,
}

/// The endpoint: `POST /ingest` of Iggy's envelopes (one, or one a line); with
/// `refuse`, a body holding a seq of 7 mod 50 is refused (422); while `busy` lasts
/// every request is answered 503.
pub(crate) struct Endpoint {
    pub address: String,
    pub received: Arc<Mutex<Received>>,
    _runtime: tokio::runtime::Runtime,
}

impl Endpoint {
    pub fn start(busy: u32, refuse: bool) -> Endpoint {
        Endpoint::start_at("127.0.0.1:0", busy, refuse)
    }

    /// The endpoint on `address` (a port chosen by the test).
    pub fn start_at(address: &str, busy: u32, refuse: bool) -> Endpoint {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let received = Arc::new(Mutex::new(Received { busy, ..Received::default() }));
        let shared = received.clone();
        let app = axum::Router::new().route(
            "/ingest",
            axum::routing::post(move |headers: HeaderMap, body: String| {
                let shared = shared.clone();
                async move {
                    let mut received = shared.lock().unwrap();
                    if received.busy > 0 {
                        received.busy -= 1;
                        return (StatusCode::SERVICE_UNAVAILABLE, "busy".to_string());
                    }
                    let values: Vec<Value> = body
                        .lines()
                        .filter(|line| !line.trim().is_empty())
                        .map(|line| serde_json::from_str::<Value>(line).unwrap())
                        .collect();
                    // Iggy's envelope, or the record itself.
                    let seqs: Vec<u64> =
                        values.iter().map(|v| v["payload"]["seq"].as_u64().or(v["seq"].as_u64()).unwrap()).collect();
                    if let Some(seq) = seqs.iter().find(|seq| refuse && *seq % 50 == 7) {
                        return (StatusCode::UNPROCESSABLE_ENTITY, format!("seq {seq} is refused"));
                    }
                    let key = headers["idempotency-key"].to_str().unwrap().to_string();
                    received.authorization =
                        headers.get("authorization").map(|value| value.to_str().unwrap().to_string());
                    received.requests.extend(seqs.into_iter().map(|seq| (key.clone(), seq)));
                    let checksums = values.iter().filter_map(|v| {
                        let metadata = &v["metadata"];
                        Some((metadata["iggy_offset"].as_u64()?, metadata["iggy_checksum"].as_u64()?))
                    });
                    received.checksums.extend(checksums);
                    (StatusCode::OK, "ok".to_string())
                }
            }),
        );
        let listener = runtime.block_on(tokio::net::TcpListener::bind(address)).unwrap();
        let address = listener.local_addr().unwrap().to_string();
        runtime.spawn(async move { axum::serve(listener, app).await.unwrap() });
        Endpoint { address, received, _runtime: runtime }
    }

    /// Each seq received, with how many times.
    pub fn seqs(&self) -> BTreeMap<u64, usize> {
        let mut seqs = BTreeMap::new();
        for (_, seq) in &self.received.lock().unwrap().requests {
            *seqs.entry(*seq).or_insert(0) += 1;
        }
        seqs
    }
}

fn config(site: &Site, endpoint: &str, granted: &str) -> std::path::PathBuf {
    site.config(
        "ferry.toml",
        &format!(
            r#"
[state]
path = "state"

[local_log]
path = "log"

# About 2 records every 5 ms: the kill lands mid-flow.
[[sources]]
key = "feed"
path = "{RANDOM_SOURCE}"
poll_interval = "1ms"
streams = [{{ stream = "demo", topic = "feed" }}]
plugin_config = {{ max_count = {COUNT}, messages_per_batch = 2, interval = "5ms", payload_size = 40 }}

[[sinks]]
key = "http"
path = "{HTTP_SINK}"
poll_interval = "2ms"
batch_length = 20
retry_backoff = {{ initial = "5ms", max = "50ms" }}
streams = [{{ stream = "demo", topics = ["feed"] }}]
dead_letters = {{ stream = "dead", topic = "http" }}
grants = {{ network = ["{granted}"] }}

[sinks.plugin_config]
url = "http://{endpoint}/ingest"
retry_delay = "10ms"
max_retry_delay = "100ms"
"#
        ),
    )
}

fn expected() -> Vec<u64> {
    (0..COUNT).filter(|seq| seq % 50 != 7).collect()
}

#[test]
fn every_message_reaches_the_endpoint_through_503s_and_a_kill_9_and_refused_ones_are_dead_lettered() {
    let endpoint = Endpoint::start(5, true);
    let site = Site::new();
    let config = config(&site, &endpoint.address, &endpoint.address);
    let mut run = Ferry::start(&config, &[]);
    until("a hundred messages at the endpoint", || endpoint.seqs().len() >= 100);
    run.kill_9();
    let taken_before_the_kill = endpoint.seqs().len();
    let mut run = Ferry::start(&config, &[]);
    run.wait_for_line(&["key=http", "running"]);
    until("every message the endpoint takes", || endpoint.seqs().len() == expected().len());
    until("the refused ones in the dead letters", || {
        LocalLog::read_all(&site.log_dir(), "dead", "http").map(|d| d.len()).unwrap_or(0) == 6
    });
    run.signal(Signal::SIGTERM);
    assert!(run.wait().success(), "{}", run.log());

    let seqs = endpoint.seqs();
    assert_eq!(seqs.keys().copied().collect::<Vec<_>>(), expected(), "every message the endpoint takes, there");
    // A message sent again (the batch in flight at the kill) has the same key.
    let received = endpoint.received.lock().unwrap();
    let mut keys: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    for (key, seq) in &received.requests {
        keys.entry(key).or_default().push(*seq);
    }
    assert!(keys.values().all(|seqs| seqs.iter().all(|s| *s == seqs[0])), "one key, one message");
    let duplicates = received.requests.len() - keys.len();
    eprintln!("http sink: {} requests taken, {duplicates} sent again after the kill", received.requests.len());
    assert!(duplicates <= 20, "at most the batch in flight: {duplicates}");
    assert!(taken_before_the_kill < expected().len(), "the kill landed mid-flow");
    assert_eq!(received.busy, 0, "the 503s were tried again");

    let dead = LocalLog::read_all(&site.log_dir(), "dead", "http").unwrap();
    let dead_seqs: Vec<u64> =
        dead.iter().map(|r| serde_json::from_slice::<Value>(&r.payload).unwrap()["seq"].as_u64().unwrap()).collect();
    assert_eq!(dead_seqs, (0..COUNT).filter(|seq| seq % 50 == 7).collect::<Vec<_>>());
    let reason = dead[0].headers.as_ref().unwrap()["ferry-dead-letter-reason"].to_string();
    assert!(reason.contains("HTTP 422: seq 7 is refused"), "{reason}");
}

#[test]
fn an_endpoint_not_granted_is_never_reached_and_the_batch_waits() {
    let endpoint = Endpoint::start(0, true);
    let site = Site::new();
    // Granted another port than the endpoint's.
    let config = config(&site, &endpoint.address, "127.0.0.1:9");
    let mut run = Ferry::start(&config, &[]);
    let line = run.wait_for_line(&["key=http", "not in grants.network"]);
    assert!(line.contains("message at offset 0"), "{line}");
    run.signal(Signal::SIGTERM);
    assert!(run.wait().success(), "{}", run.log());
    assert!(endpoint.received.lock().unwrap().requests.is_empty(), "nothing reached the endpoint");
}

#[test]
fn a_server_down_is_said_and_waited_for_and_everything_arrives_once_it_is_up() {
    let address = format!("127.0.0.1:{}", ferry_tests::free_port());
    let site = Site::new();
    let config = config(&site, &address, &address);
    let mut run = Ferry::start(&config, &[]);
    let line = run.wait_for_line(&["key=http", "message at offset 0", "no answer"]);
    assert!(line.contains("ConnectionRefused") && line.contains("after 4 attempt(s)"), "{line}");
    let endpoint = Endpoint::start_at(&address, 0, true);
    until("every message the endpoint takes", || endpoint.seqs().len() == expected().len());
    run.signal(Signal::SIGTERM);
    assert!(run.wait().success(), "{}", run.log());
    assert_eq!(endpoint.seqs().keys().copied().collect::<Vec<_>>(), expected());
}
