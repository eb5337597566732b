//! The Redis sink against a real Redis server of the test's own
//! (`ferry_tests::redis_server`): every message one stream entry, once, through a
//! `kill -9` of ferry and one of the server mid-flow (a replay adds nothing: the
//! entry's id marker is there); keys and hashes set to the message, with their TTL; a
//! message the server refuses, or that has no key, dead-lettered with the reason; a
//! server not granted refused before any connection; refused credentials said and
//! nothing written until they are right.

use std::collections::BTreeMap;

use ferry::capabilities::redis::{RedisServer as RedisSection, RedisServers};
use ferry::engine::sink::SinkConnector;
use ferry::engine::status::Event;
use ferry::store::local_log::LocalLog;
use ferry_tests::components::{RANDOM_SOURCE, REDIS_SINK};
use ferry_tests::harness::{Harness, Running};
use ferry_tests::records::seq_messages;
use ferry_tests::redis_server::{PASSWORD, RedisServer};
use nix::sys::signal::Signal;
use redis::aio::MultiplexedConnection;
use serde_json::{Value, json};

use crate::iggy_sinks::until;
use crate::process::{Ferry, Site};
use crate::sinks::{drain_orders as drain, wait_written_orders as wait_written};

/// The server `server` as `[redis.NAME]` defines it, its password (if it has one)
/// read from the environment variable `password_env`.
pub(crate) fn section(server: &RedisServer, password_env: &str) -> RedisSection {
    toml::from_str(&server.ferry_section("x", password_env).replace("[redis.x]\n", "")).unwrap()
}

/// A `redis-sink` `key` reading topic `orders`, granted `server` as `cache`, with
/// `plugin_config` added; its dead letters into topic `orders-dead`.
fn sink(h: &Harness, server: &RedisServer, key: &str, plugin_config: Value) -> SinkConnector {
    let mut config = json!({ "connection": "cache" });
    config.as_object_mut().unwrap().extend(plugin_config.as_object().unwrap().clone());
    let mut sink = h.sink(key, REDIS_SINK, config, &["orders"]);
    sink.dead_letters = Some(h.dead_letters("orders-dead"));
    sink.sandbox.grants.redis = vec!["cache".into()];
    let servers = BTreeMap::from([("cache".to_string(), section(server, "FERRY_TEST_REDIS_PASSWORD"))]);
    sink.sandbox.shared.redis = RedisServers::granted(&sink.sandbox.grants.redis, &servers).unwrap();
    sink
}

/// Each entry of the stream `key`: its fields, by name.
pub(crate) async fn entries(connection: &mut MultiplexedConnection, key: &str) -> Vec<BTreeMap<String, String>> {
    let raw: Vec<(String, Vec<Vec<u8>>)> =
        redis::cmd("XRANGE").arg(key).arg("-").arg("+").query_async(connection).await.expect("XRANGE");
    raw.into_iter()
        .map(|(_, fields)| {
            fields
                .chunks(2)
                .map(|pair| {
                    (String::from_utf8_lossy(&pair[0]).into_owned(), String::from_utf8_lossy(&pair[1]).into_owned())
                })
                .collect()
        })
        .collect()
}

/// The `seq` of each entry's JSON payload, with how many entries hold it.
async fn seqs(connection: &mut MultiplexedConnection, key: &str) -> BTreeMap<u64, usize> {
    let mut seqs = BTreeMap::new();
    for entry in entries(connection, key).await {
        let payload: Value = serde_json::from_str(&entry["payload"]).unwrap();
        *seqs.entry(payload["seq"].as_u64().unwrap()).or_insert(0) += 1;
    }
    seqs
}

/// The dead letters of `h`'s `orders-dead`: payload and reason.
fn dead_letters(h: &Harness) -> Vec<(String, String)> {
    h.records("orders-dead")
        .iter()
        .map(|r| {
            let reason = r.headers.as_ref().unwrap()["ferry-dead-letter-reason"]["string"].as_str().unwrap();
            (String::from_utf8_lossy(&r.payload).into_owned(), reason.to_string())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_adds_no_entry_and_a_refused_or_keyless_message_is_dead_lettered() {
    let server = RedisServer::start();
    let mut client = server.client().await;
    // `orders:bad` is a string: an entry cannot be added to it (WRONGTYPE).
    let _: () = redis::cmd("SET").arg("orders:bad").arg("not a stream").query_async(&mut client).await.unwrap();
    let h = Harness::new();
    let mut messages = seq_messages(0..30);
    messages[7].payload = br#"{"seq":7,"kind":"bad"}"#.to_vec().into();
    messages[13].payload = br#"{"seq":13}"#.to_vec().into();
    for (seq, message) in messages.iter_mut().enumerate() {
        if ![7, 13].contains(&seq) {
            message.payload = format!(r#"{{"seq":{seq},"kind":"good"}}"#).into_bytes().into();
        }
    }
    h.append("orders", messages).await;
    let keyed = json!({ "key": "orders:{payload.kind}", "max_len": 1000 });
    drain(&h, sink(&h, &server, "cache-sink", keyed.clone()), 30).await;

    let written = seqs(&mut client, "orders:good").await;
    let expected: Vec<u64> = (0..30).filter(|s| ![7, 13].contains(s)).collect();
    assert_eq!(written.keys().copied().collect::<Vec<_>>(), expected, "every entry but the two");
    assert!(written.values().all(|n| *n == 1), "once each: {written:?}");
    let first = &entries(&mut client, "orders:good").await[0];
    assert_eq!((first["stream"].as_str(), first["topic"].as_str(), first["offset"].as_str()), ("test", "orders", "0"));
    let dead = dead_letters(&h);
    assert_eq!(dead.len(), 2, "{dead:?}");
    assert!(dead[0].0.contains("\"seq\":7") && dead[0].1.contains("WRONGTYPE"), "{dead:?}");
    assert!(dead[1].0.contains("\"seq\":13") && dead[1].1.contains("no field \"kind\""), "{dead:?}");

    // The same messages again, from the start (another sink's position): nothing added.
    drain(&h, sink(&h, &server, "cache-replay", keyed), 30).await;
    assert_eq!(seqs(&mut client, "orders:good").await, written, "a replay adds no entry");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_and_hashes_are_set_to_the_message_with_their_ttl() {
    let server = RedisServer::start();
    let mut client = server.client().await;
    let h = Harness::new();
    let users = (0..5u64).map(|n| json!({ "user": format!("u{n}"), "age": 30 + n, "name": "ada" }).to_string());
    let mut messages = seq_messages(0..5);
    for (message, payload) in messages.iter_mut().zip(users) {
        message.payload = payload.into_bytes().into();
    }
    h.append("orders", messages).await;
    drain(&h, sink(&h, &server, "as-keys", json!({ "mode": "set", "key": "user:{payload.user}", "ttl": "1h" })), 5)
        .await;
    drain(&h, sink(&h, &server, "as-hashes", json!({ "mode": "hash", "key": "profile:{payload.user}" })), 5).await;

    let value: String = redis::cmd("GET").arg("user:u3").query_async(&mut client).await.unwrap();
    assert_eq!(serde_json::from_str::<Value>(&value).unwrap()["age"], 33);
    let ttl: i64 = redis::cmd("PTTL").arg("user:u3").query_async(&mut client).await.unwrap();
    assert!(ttl > 3_500_000 && ttl <= 3_600_000, "about an hour: {ttl} ms");
    let hash: BTreeMap<String, String> =
        redis::cmd("HGETALL").arg("profile:u4").query_async(&mut client).await.unwrap();
    assert_eq!(
        hash,
        BTreeMap::from([("age".into(), "34".into()), ("name".into(), "ada".into()), ("user".into(), "u4".into())])
    );
    let no_ttl: i64 = redis::cmd("PTTL").arg("profile:u4").query_async(&mut client).await.unwrap();
    assert_eq!(no_ttl, -1, "no ttl configured, none set");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_not_granted_is_refused_before_any_connection() {
    let server = RedisServer::start();
    let mut client = server.client().await;
    let connections = || async {
        let mut client = server.client().await;
        let info: String = redis::cmd("INFO").arg("stats").query_async(&mut client).await.unwrap();
        let line = info.lines().find(|l| l.starts_with("total_connections_received:")).unwrap().to_string();
        line.split(':').nth(1).unwrap().trim().parse::<u64>().unwrap()
    };
    let h = Harness::new();
    h.append("orders", seq_messages(0..3)).await;
    let before = connections().await;
    // Granted `cache` (the same server), asked for `elsewhere`.
    let refused = sink(&h, &server, "ungranted", json!({ "connection": "elsewhere" }));
    let mut running = Running::start(h.host_with(Vec::new(), vec![refused]));
    let event = running
        .wait_for(
            "the open to fail",
            |e| matches!(e, Event::Failed { key, .. } | Event::GuestError { key, .. } if &**key == "ungranted"),
        )
        .await;
    running.stop().await;
    assert!(format!("{event:?}").contains("not in this connector's grants.redis"), "{event:?}");
    // One connection since: `connections` itself.
    assert_eq!(connections().await, before + 1, "ferry never connected");
    let len: u64 = redis::cmd("DBSIZE").query_async(&mut client).await.unwrap();
    assert_eq!(len, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_credentials_are_said_and_nothing_is_written_until_they_are_right() {
    let server = RedisServer::start_with_password();
    let mut client = server.client().await;
    let h = Harness::new();
    h.append("orders", seq_messages(0..10)).await;
    // SAFETY: the variable is this test's alone; nothing else reads it concurrently.
    unsafe { std::env::set_var("FERRY_TEST_REDIS_PASSWORD", "wrong") };
    let wrong = sink(&h, &server, "locked-out", json!({ "key": "locked" }));
    unsafe { std::env::set_var("FERRY_TEST_REDIS_PASSWORD", PASSWORD) };
    let mut running = Running::start(h.host_with(Vec::new(), vec![wrong]));
    let event =
        running.wait_for("the refusal", |e| matches!(e, Event::Retried { key, .. } if &**key == "locked-out")).await;
    running.stop().await;
    let said = format!("{event:?}");
    assert!(said.contains("credentials") || said.contains("WRONGPASS"), "{said}");
    let len: u64 = redis::cmd("DBSIZE").query_async(&mut client).await.unwrap();
    assert_eq!(len, 0, "nothing written");
    assert!(h.records("orders-dead").is_empty(), "nothing dead-lettered");

    drain(&h, sink(&h, &server, "let-in", json!({ "key": "locked" })), 10).await;
    assert_eq!(seqs(&mut client, "locked").await.len(), 10);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_killed_mid_flow_is_waited_for_and_every_message_is_one_entry() {
    const COUNT: u64 = 300;
    let mut server = RedisServer::start();
    let h = Harness::new();
    h.append("orders", seq_messages(0..COUNT)).await;
    let mut flowing = sink(&h, &server, "steady", json!({ "key": "steady" }));
    flowing.settings.batch_length = 10;
    let mut running = Running::start(h.host_with(Vec::new(), vec![flowing]));
    wait_written(&mut running, "steady", 50).await;
    tokio::task::block_in_place(|| server.kill_9());
    running
        .wait_for("a retry while it is down", |e| matches!(e, Event::Retried { key, .. } if &**key == "steady"))
        .await;
    tokio::task::block_in_place(|| server.restart());
    wait_written(&mut running, "steady", COUNT).await;
    running.stop().await;

    let mut client = server.client().await;
    let written = seqs(&mut client, "steady").await;
    assert_eq!(written.keys().copied().collect::<Vec<_>>(), (0..COUNT).collect::<Vec<_>>());
    assert!(written.values().all(|n| *n == 1), "once each, through the kill: {written:?}");
}

const COUNT: u64 = 400;

#[test]
fn every_message_is_one_entry_through_a_kill_9_of_ferry() {
    let server = RedisServer::start();
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
key = "feed"
path = "{RANDOM_SOURCE}"
poll_interval = "1ms"
streams = [{{ stream = "demo", topic = "feed" }}]
plugin_config = {{ max_count = {COUNT}, messages_per_batch = 2, interval = "5ms", payload_size = 40 }}

[[sinks]]
key = "cache"
path = "{REDIS_SINK}"
poll_interval = "2ms"
batch_length = 20
retry_backoff = {{ initial = "5ms", max = "50ms" }}
streams = [{{ stream = "demo", topics = ["feed"] }}]
dead_letters = {{ stream = "dead", topic = "cache" }}
grants = {{ redis = ["cache"] }}
plugin_config = {{ connection = "cache", key = "feed" }}
"#,
            section = server.ferry_section("cache", "UNUSED"),
        ),
    );
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let mut client = runtime.block_on(server.client());
    let mut count =
        || runtime.block_on(async { redis::cmd("XLEN").arg("feed").query_async::<u64>(&mut client).await.unwrap() });
    let mut run = Ferry::start(&config, &[]);
    run.wait_for_line(&["key=cache", "running"]);
    until("a hundred entries", || count() >= 100);
    run.kill_9();
    let before_the_kill = count();
    let mut run = Ferry::start(&config, &[]);
    run.wait_for_line(&["key=cache", "running"]);
    until("every entry", || count() >= COUNT);
    run.signal(Signal::SIGTERM);
    assert!(run.wait().success(), "{}", run.log());

    let written = runtime.block_on(async { seqs(&mut server.client().await, "feed").await });
    assert_eq!(written.keys().copied().collect::<Vec<_>>(), (0..COUNT).collect::<Vec<_>>());
    assert!(written.values().all(|n| *n == 1), "once each, through the kill: {written:?}");
    assert!(before_the_kill < COUNT, "the kill landed mid-flow");
    assert!(!LocalLog::topic_file(&site.log_dir(), "dead", "cache").exists(), "nothing dead-lettered");
}
