//! The Redis source against a real Redis server of the test's own
//! (`ferry_tests::redis_server`): every entry of a stream arrives in the local log
//! exactly once through `kill -9`s of ferry at random moments (an entry is
//! acknowledged only after its batch was committed, and one delivered but not yet
//! acknowledged is acknowledged, not delivered again), and through a `kill -9` of the
//! server; a stream key of the wrong type is refused at open, naming it.

use ferry::engine::status::Event;
use ferry::store::local_log::LocalLog;
use ferry_tests::components::REDIS_SOURCE;
use ferry_tests::harness::Harness;
use ferry_tests::records::{assert_complete, seqs};
use ferry_tests::redis_server::RedisServer;
use nix::sys::signal::Signal;
use redis::aio::MultiplexedConnection;
use serde_json::json;
use std::collections::BTreeMap;

use crate::iggy_sinks::until;
use crate::process::{Ferry, Site, crash_plan};
use crate::redis_sink::section;

/// Add the entries `{"seq": n}` for `seqs` to the stream `key`, one pipeline.
async fn add(connection: &mut MultiplexedConnection, key: &str, seqs: std::ops::Range<u64>) {
    let mut pipe = redis::pipe();
    for seq in seqs {
        pipe.cmd("XADD").arg(key).arg("*").arg("payload").arg(json!({ "seq": seq }).to_string()).ignore();
    }
    let _: () = pipe.query_async(connection).await.expect("XADD");
}

/// How many entries of `key` the group `ferry` was handed and has not acknowledged.
async fn pending(connection: &mut MultiplexedConnection, key: &str) -> u64 {
    let summary: redis::Value = redis::cmd("XPENDING").arg(key).arg("ferry").query_async(connection).await.unwrap();
    match summary {
        redis::Value::Array(items) => match &items[0] {
            redis::Value::Int(n) => *n as u64,
            other => panic!("XPENDING's count: {other:?}"),
        },
        other => panic!("XPENDING: {other:?}"),
    }
}

const COUNT: u64 = 600;

#[test]
fn every_entry_arrives_once_through_kill_9s_of_ferry_at_random_moments() {
    let server = RedisServer::start();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let mut client = runtime.block_on(server.client());
    runtime.block_on(add(&mut client, "events", 0..COUNT));
    let site = Site::new();
    let config = site.config(
        "ferry.toml",
        &format!(
            r#"
[state]
path = "state"

[local_log]
path = "log"

{section}
[[sources]]
key = "events"
path = "{REDIS_SOURCE}"
poll_interval = "2ms"
streams = [{{ stream = "demo", topic = "events" }}]
grants = {{ redis = ["cache"] }}
plugin_config = {{ connection = "cache", stream = "events", batch_size = 7 }}
"#,
            section = server.ferry_section("cache", "UNUSED"),
        ),
    );
    let delivered = || {
        let path = LocalLog::topic_file(&site.log_dir(), "demo", "events");
        if !path.exists() {
            return Vec::new();
        }
        seqs(&LocalLog::read_all(&site.log_dir(), "demo", "events").unwrap())
    };
    let (rounds, mut rng) = crash_plan("redis_source::every_entry_arrives_once");
    for _ in 0..rounds.min(6) {
        let mut run = Ferry::start(&config, &[]);
        run.kill_9_at_a_random_moment(&mut rng, &["key=events", "running"]);
    }
    let mut run = Ferry::start(&config, &[]);
    // Running (its signals caught) before it is told to stop, even if the runs before
    // delivered everything.
    run.wait_for_line(&["key=events", "running"]);
    until("every entry in the log", || delivered().len() as u64 >= COUNT);
    run.signal(Signal::SIGTERM);
    assert!(run.wait().success(), "{}", run.log());

    let seqs = delivered();
    assert_eq!(assert_complete(&seqs, COUNT), 0, "nothing delivered twice");
    assert_eq!(seqs, (0..COUNT).collect::<Vec<_>>(), "in the stream's order");
    assert_eq!(runtime.block_on(pending(&mut client, "events")), 0, "every entry acknowledged");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_killed_mid_flow_is_waited_for_and_every_entry_arrives_once() {
    let mut server = RedisServer::start();
    let mut client = server.client().await;
    add(&mut client, "orders", 0..200).await;
    let h = Harness::new();
    let mut source =
        h.source("orders", REDIS_SOURCE, json!({ "connection": "cache", "stream": "orders", "batch_size": 10 }));
    source.sandbox.grants.redis = vec!["cache".into()];
    let servers = BTreeMap::from([("cache".to_string(), section(&server, "UNUSED"))]);
    source.sandbox.shared.redis =
        ferry::capabilities::redis::RedisServers::granted(&source.sandbox.grants.redis, &servers).unwrap();
    let mut running = h.start(vec![source]);
    running.wait_for("a batch", |e| matches!(e, Event::Acked { key, .. } if &**key == "orders")).await;
    tokio::task::block_in_place(|| server.kill_9());
    running
        .wait_for(
            "a failed poll while it is down",
            |e| matches!(e, Event::GuestError { key, .. } | Event::Trapped { key, .. } if &**key == "orders"),
        )
        .await;
    tokio::task::block_in_place(|| server.restart());
    let mut client = server.client().await;
    add(&mut client, "orders", 200..300).await;
    let records = || seqs(&h.records("orders"));
    running.wait_for("every entry", |_| records().len() >= 300).await;
    running.stop().await;

    let seqs = records();
    assert_eq!(assert_complete(&seqs, 300), 0, "once each: {seqs:?}");
    assert_eq!(pending(&mut client, "orders").await, 0, "every entry acknowledged");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_key_of_another_type_is_refused_at_open_naming_it() {
    let server = RedisServer::start();
    let mut client = server.client().await;
    let _: () = redis::cmd("SET").arg("orders").arg("a string").query_async(&mut client).await.unwrap();
    let h = Harness::new();
    let mut source = h.source("orders", REDIS_SOURCE, json!({ "connection": "cache", "stream": "orders" }));
    source.sandbox.grants.redis = vec!["cache".into()];
    let servers = BTreeMap::from([("cache".to_string(), section(&server, "UNUSED"))]);
    source.sandbox.shared.redis =
        ferry::capabilities::redis::RedisServers::granted(&source.sandbox.grants.redis, &servers).unwrap();
    let mut running = h.start(vec![source]);
    let event = running
        .wait_for(
            "the open to fail",
            |e| matches!(e, Event::GuestError { key, .. } | Event::Failed { key, .. } if &**key == "orders"),
        )
        .await;
    running.stop().await;
    let said = format!("{event:?}");
    assert!(
        said.contains("cannot make the group \\\"ferry\\\" of the stream \\\"orders\\\"") && said.contains("WRONGTYPE"),
        "{said}"
    );
    assert!(h.records("orders").is_empty());
}
