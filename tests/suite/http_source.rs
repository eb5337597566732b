//! The HTTP source against a real HTTP server the test runs (axum, on a free port)
//! serving a growing list in pages: every record arrives in the local log exactly
//! once through `kill -9`s of ferry (the cursor is committed in the batch's own
//! transaction), a failing endpoint is said in the log and polled again until the
//! records flow, and an address not granted is never reached.

use std::sync::{Arc, Mutex};

use axum::extract::Query;
use axum::http::StatusCode;
use nix::sys::signal::Signal;
use serde_json::{Value, json};

use crate::iggy_sinks::until;
use crate::process::{Ferry, Site};
use ferry::store::local_log::LocalLog;
use ferry_tests::components::HTTP_SOURCE;

/// The list the endpoint serves, and how it answers.
#[derive(Default)]
struct List {
    /// Records `0..len`, as `{"id": n, "name": "record n"}`.
    len: u64,
    /// How many requests are still answered 500.
    failing: u32,
    requests: u64,
}

/// `GET /records?page=N&per_page=M`: page N (from 1) of the list.
pub(crate) struct Endpoint {
    pub address: String,
    list: Arc<Mutex<List>>,
    _runtime: tokio::runtime::Runtime,
}

impl Endpoint {
    pub fn start(len: u64, failing: u32) -> Endpoint {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let list = Arc::new(Mutex::new(List { len, failing, requests: 0 }));
        let shared = list.clone();
        let app = axum::Router::new().route(
            "/records",
            axum::routing::get(move |Query(query): Query<std::collections::HashMap<String, u64>>| {
                let shared = shared.clone();
                async move {
                    let mut list = shared.lock().unwrap();
                    list.requests += 1;
                    if list.failing > 0 {
                        list.failing -= 1;
                        return (StatusCode::INTERNAL_SERVER_ERROR, "the database is away".to_string());
                    }
                    let (page, size) = (query["page"], query["per_page"]);
                    let records: Vec<Value> = ((page - 1) * size..(page * size).min(list.len))
                        .map(|id| json!({"id": id, "name": format!("record {id}")}))
                        .collect();
                    (StatusCode::OK, json!({ "data": { "records": records } }).to_string())
                }
            }),
        );
        let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
        let address = listener.local_addr().unwrap().to_string();
        runtime.spawn(async move { axum::serve(listener, app).await.unwrap() });
        Endpoint { address, list, _runtime: runtime }
    }

    fn grow_to(&self, len: u64) {
        self.list.lock().unwrap().len = len;
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

[[sources]]
key = "api"
path = "{HTTP_SOURCE}"
poll_interval = "5ms"
nack_backoff = {{ initial = "5ms", max = "50ms" }}
streams = [{{ stream = "demo", topic = "records" }}]
grants = {{ network = ["{granted}"] }}

[sources.plugin_config]
url = "http://{endpoint}/records"
records = "$.data.records"
cursor = {{ kind = "page", size = 7, size_param = "per_page" }}
"#
        ),
    )
}

/// The ids in the local log, in order.
fn delivered(site: &Site) -> Vec<u64> {
    LocalLog::read_all(&site.log_dir(), "demo", "records")
        .unwrap_or_default()
        .iter()
        .map(|record| serde_json::from_slice::<Value>(&record.payload).unwrap()["id"].as_u64().unwrap())
        .collect()
}

#[test]
fn every_record_of_a_paged_endpoint_arrives_once_through_kill_9s_and_what_is_added_to_the_last_page_too() {
    const FIRST: u64 = 3000;
    let endpoint = Endpoint::start(FIRST, 0);
    let site = Site::new();
    let config = config(&site, &endpoint.address, &endpoint.address);
    let mut kills_mid_flow = 0;
    for at in [300, 1200, 2100] {
        let mut run = Ferry::start(&config, &[]);
        run.wait_for_line(&["key=api", "running"]);
        until(&format!("{at} records delivered"), || delivered(&site).len() >= at);
        run.kill_9();
        kills_mid_flow += usize::from(delivered(&site).len() < FIRST as usize);
    }
    let mut run = Ferry::start(&config, &[]);
    run.wait_for_line(&["key=api", "running"]);
    until("the first records delivered", || delivered(&site).len() == FIRST as usize);
    // A last page not full (3000 = 428 × 7 + 4) fills up, and more pages follow.
    endpoint.grow_to(FIRST + 10);
    until("the records added", || delivered(&site).len() >= (FIRST + 10) as usize);
    run.signal(Signal::SIGTERM);
    assert!(run.wait().success(), "{}", run.log());
    assert!(kills_mid_flow >= 1, "a kill landed mid-flow");
    assert_eq!(delivered(&site), (0..FIRST + 10).collect::<Vec<_>>(), "every record once, in order");
}

#[test]
fn a_failing_endpoint_is_said_and_polled_again_until_its_records_flow() {
    let endpoint = Endpoint::start(20, 3);
    let site = Site::new();
    let config = config(&site, &endpoint.address, &endpoint.address);
    let mut run = Ferry::start(&config, &[]);
    let line = run.wait_for_line(&["key=api", "answered 500"]);
    assert!(line.contains("the database is away") && line.contains("/records?page=1&per_page=7"), "{line}");
    until("every record", || delivered(&site).len() == 20);
    run.signal(Signal::SIGTERM);
    assert!(run.wait().success(), "{}", run.log());
    assert_eq!(delivered(&site), (0..20).collect::<Vec<_>>());
    assert_eq!(endpoint.list.lock().unwrap().failing, 0, "the failures were polled through");
}

#[test]
fn an_endpoint_not_granted_is_never_reached() {
    let endpoint = Endpoint::start(20, 0);
    let site = Site::new();
    let config = config(&site, &endpoint.address, "127.0.0.1:9");
    let mut run = Ferry::start(&config, &[]);
    run.wait_for_line(&["key=api", "not in grants.network"]);
    run.signal(Signal::SIGTERM);
    assert!(run.wait().success(), "{}", run.log());
    assert_eq!(endpoint.list.lock().unwrap().requests, 0, "nothing reached the endpoint");
    assert!(delivered(&site).is_empty());
}
