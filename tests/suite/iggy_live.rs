//! Against a live Iggy server (opt-in: see `ferry_tests::iggy_server`): batches flow
//! in, nothing is lost when the server or `ferry` is killed, duplicates keep their
//! ids, and bad credentials or a missing stream are clear errors with nothing
//! committed.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use ferry::config::BackoffConfig;
use ferry::contract::NackReason;
use ferry::engine::status::Event;
use ferry::iggy::IggyTarget;
use ferry_tests::components::RANDOM_SOURCE;
use ferry_tests::faults::FaultyCursor;
use ferry_tests::harness::{Harness, Running};
use ferry_tests::iggy_server::{IggyServer, PASSWORD, durable_stream, live_server};
use ferry_tests::logs::capture;
use ferry_tests::records::{assert_complete, next_seq, seq_of};
use iggy::prelude::IggyMessage;
use serde_json::json;

fn seqs_and_ids(messages: &[IggyMessage]) -> Vec<(u64, u128)> {
    messages.iter().map(|m| (seq_of(&m.payload), m.header.id)).collect()
}

/// Every copy of a `seq` carries the same id, and different seqs different ids.
fn assert_ids_stable(records: &[(u64, u128)]) -> usize {
    let mut by_seq: HashMap<u64, u128> = HashMap::new();
    let mut duplicates = 0;
    for (seq, id) in records {
        assert_ne!(*id, 0, "seq {seq} has no id");
        if let Some(first) = by_seq.insert(*seq, *id) {
            duplicates += 1;
            assert_eq!(first, *id, "a duplicate of seq {seq} carries another id than its original");
        }
    }
    let distinct: std::collections::HashSet<_> = by_seq.values().collect();
    assert_eq!(distinct.len(), by_seq.len(), "two seqs share an id");
    duplicates
}

fn is_nack(key: &'static str) -> impl FnMut(&Event) -> bool {
    move |e| matches!(e, Event::Nacked { key: k, .. } if &**k == key)
}

async fn wait_generation(running: &mut Running, key: &'static str, at_least: u64) {
    running
        .wait_for(
            "ACKs",
            |e| matches!(e, Event::Acked { key: k, generation: Some(g), .. } if &**k == key && *g >= at_least),
        )
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_flow_into_iggy_and_every_seq_is_there_once() {
    let Some(server) = live_server("iggy_live::batches_flow_into_iggy_and_every_seq_is_there_once") else { return };
    let h = Harness::new();
    let target = Arc::new(IggyTarget::start(&server.ferry_config(PASSWORD)).unwrap());
    let mut big = h.source("live-flow", RANDOM_SOURCE, json!({ "messages_per_batch": 25, "max_count": 2000 }));
    big.target = target.clone();
    big.streams = vec![durable_stream("live", "flow")].into();
    // Many batches of one message: no wedge after the first.
    let mut small = h.source("live-ones", RANDOM_SOURCE, json!({ "messages_per_batch": 1, "max_count": 300 }));
    small.target = target;
    small.streams = vec![durable_stream("live", "ones")].into();
    let mut running = h.start(vec![big, small]);
    running.wait_idle("live-flow").await;
    running.wait_idle("live-ones").await;
    running.stop().await;

    let flow = seqs_and_ids(&server.read_all("live", "flow").await);
    assert_eq!(
        flow.iter().map(|(s, _)| *s).collect::<Vec<_>>(),
        (0..2000).collect::<Vec<_>>(),
        "every seq once, in order"
    );
    assert_eq!(assert_ids_stable(&flow), 0);
    let ones = seqs_and_ids(&server.read_all("live", "ones").await);
    assert_eq!(ones.iter().map(|(s, _)| *s).collect::<Vec<_>>(), (0..300).collect::<Vec<_>>());
    assert_eq!(h.committed("live-ones").unwrap().generation, 300);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_delivered_but_not_committed_comes_again_with_the_same_ids() {
    let Some(server) = live_server("iggy_live::a_batch_delivered_but_not_committed_comes_again_with_the_same_ids")
    else {
        return;
    };
    let h = Harness::new();
    let target = Arc::new(IggyTarget::start(&server.ferry_config(PASSWORD)).unwrap());
    let mut source = h.source("live-dup", RANDOM_SOURCE, json!({ "messages_per_batch": 10, "max_count": 200 }));
    source.target = target;
    source.streams = vec![durable_stream("live", "dup")].into();
    let cursor = FaultyCursor::new(source.cursor.clone());
    source.cursor = cursor.clone();
    let mut running = h.start(vec![source]);

    wait_generation(&mut running, "live-dup", 3).await;
    cursor.set_failing(true);
    for _ in 0..3 {
        running
            .wait_for("a state-save NACK", |e| matches!(e, Event::Nacked { reason: NackReason::StateSaveFailed, .. }))
            .await;
    }
    cursor.set_failing(false);
    running.wait_idle("live-dup").await;
    running.stop().await;

    let records = seqs_and_ids(&server.read_all("live", "dup").await);
    let duplicates = assert_ids_stable(&records);
    assert!(duplicates >= 30, "each NACKed batch reached Iggy before its save failed: {duplicates} duplicates");
    assert_complete(&records.iter().map(|(s, _)| *s).collect::<Vec<_>>(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_killed_mid_flow_loses_nothing_and_flow_resumes_by_itself() {
    let Some(mut server) =
        live_server("iggy_live::the_server_killed_mid_flow_loses_nothing_and_flow_resumes_by_itself")
    else {
        return;
    };
    let h = Harness::new();
    let target = Arc::new(IggyTarget::start(&server.ferry_config(PASSWORD)).unwrap());
    let mut source =
        h.source("live-kill", RANDOM_SOURCE, json!({ "messages_per_batch": 10, "interval": "2ms", "max_count": 3000 }));
    source.target = target;
    source.streams = vec![durable_stream("live", "kill")].into();
    source.settings.delivery_timeout = Duration::from_secs(2);
    source.settings.nack_backoff =
        BackoffConfig { initial: Duration::from_millis(50), max: Duration::from_millis(200) };
    let mut running = h.start(vec![source]);

    wait_generation(&mut running, "live-kill", 20).await;
    tokio::task::block_in_place(|| server.kill());
    running.wait_for("a NACK with the server down", is_nack("live-kill")).await;
    let before = h.committed("live-kill");
    for _ in 0..4 {
        running.wait_for("more NACKs", is_nack("live-kill")).await;
    }
    assert_eq!(before, h.committed("live-kill"), "the committed cursor must not move while the server is down");
    let heard = capture().guest_lines("live-kill");
    assert!(heard.iter().any(|l| l.contains("not acknowledged")), "the guest heard the NACKs: {heard:?}");

    tokio::task::block_in_place(|| server.restart());
    // A paced source idles between batches: wait for the last commit (3000 / 10).
    wait_generation(&mut running, "live-kill", 300).await;
    running.stop().await;
    assert_eq!(next_seq(&h.committed("live-kill").unwrap().state), 3000);

    let records = seqs_and_ids(&server.read_all("live", "kill").await);
    let duplicates = assert_ids_stable(&records);
    assert_complete(&records.iter().map(|(s, _)| *s).collect::<Vec<_>>(), 3000);
    eprintln!("server killed mid-flow: {} records for 3000 seqs ({duplicates} duplicates, same ids)", records.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_password_is_reported_as_such_with_backoff_and_nothing_is_committed() {
    let Some(server) =
        live_server("iggy_live::a_wrong_password_is_reported_as_such_with_backoff_and_nothing_is_committed")
    else {
        return;
    };
    let h = Harness::new();
    let target = Arc::new(IggyTarget::start(&server.ferry_config("not-the-password")).unwrap());
    let mut source = h.source("live-auth", RANDOM_SOURCE, json!({ "messages_per_batch": 5, "max_count": 50 }));
    source.target = target;
    source.streams = vec![durable_stream("live", "auth")].into();
    let mut running = h.start(vec![source]);

    let mut nacks = 0;
    let detail = loop {
        let event = running.wait_for("a NACK", is_nack("live-auth")).await;
        let Event::Nacked { detail, .. } = event else { unreachable!() };
        nacks += 1;
        if detail.contains("authentication failed") {
            break detail;
        }
    };
    assert!(detail.contains("user `iggy`") && !detail.contains("not-the-password"), "{detail}");
    for _ in 0..20 {
        running.wait_for("more NACKs", is_nack("live-auth")).await;
        nacks += 1;
    }
    running.stop().await;
    let attempts =
        capture().all().into_iter().filter(|l| l.message.contains("Iggy refused to sign in user `iggy`")).count();
    assert!(attempts >= 1, "the authentication failure is logged as such");
    assert!(
        attempts * 3 < nacks,
        "sign-in is retried with backoff, not per batch: {attempts} attempts for {nacks} NACKs"
    );
    assert_eq!(h.committed("live-auth"), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_stream_without_auto_create_is_a_clear_error_and_nothing_is_committed() {
    let Some(server) =
        live_server("iggy_live::an_unknown_stream_without_auto_create_is_a_clear_error_and_nothing_is_committed")
    else {
        return;
    };
    let h = Harness::new();
    let target = Arc::new(IggyTarget::start(&server.ferry_config(PASSWORD)).unwrap());
    let mut source = h.source("live-nostream", RANDOM_SOURCE, json!({ "messages_per_batch": 5, "max_count": 50 }));
    source.target = target;
    source.streams = vec![ferry::config::StreamConfig::new("nowhere", "nothing")].into();
    let mut running = h.start(vec![source]);
    let event = running
        .wait_for(
            "a NACK naming the missing stream",
            |e| matches!(e, Event::Nacked { detail, .. } if detail.contains("does not exist")),
        )
        .await;
    let Event::Nacked { detail, .. } = event else { unreachable!() };
    assert!(detail.contains("the stream `nowhere`") && detail.contains("auto-creation is off"), "{detail}");
    running.stop().await;
    assert_eq!(h.committed("live-nostream"), None);
}

/// A config running the random source into `server`.
fn live_config(server: &IggyServer, key: &str, plugin_config: &str) -> String {
    format!(
        r#"
[state]
path = "state"

[iggy]
address = "{address}"
username = "iggy"
password = "{PASSWORD}"
reconnect_backoff = {{ initial = "100ms", max = "1s" }}

[[sources]]
key = "{key}"
path = "{component}"
poll_interval = "2ms"

[[sources.streams]]
stream = "crash"
topic = "{key}"
create = {{ partitions = 1, enforce_fsync = true, messages_required_to_save = 1 }}

[sources.plugin_config]
{plugin_config}
"#,
        address = server.address(),
        component = RANDOM_SOURCE
    )
}

#[test]
fn ferry_killed_at_random_moments_while_the_server_runs_loses_nothing() {
    kill_loop("iggy_live::ferry_killed_at_random_moments_while_the_server_runs_loses_nothing", "");
}

/// The same with `[state] sync = "interval"`: the cursor is not fsynced at each
/// commit, and a kill of ferry loses none of it all the same.
#[test]
fn ferry_killed_at_random_moments_with_the_cursor_synced_at_an_interval_loses_nothing() {
    kill_loop(
        "iggy_live::ferry_killed_at_random_moments_with_the_cursor_synced_at_an_interval_loses_nothing",
        "sync = \"interval\"\n",
    );
}

/// Kill ferry (its config's `[state]` with `state` added) at random moments while the
/// server runs, checking after each kill that the cursor is not ahead of the topic.
fn kill_loop(test: &str, state: &str) {
    use crate::process::{Ferry, Site};
    let Some(server) = live_server(test) else {
        return;
    };
    let live_config = |server: &IggyServer, key: &str, plugin_config: &str| {
        live_config(server, key, plugin_config).replace("[state]\n", &format!("[state]\n{state}"))
    };
    const MAX: u64 = 2000;
    let seed = fastrand::u64(..);
    eprintln!("FERRY_CRASH_SEED={seed}");
    let mut rng = fastrand::Rng::with_seed(seed);
    let site = Site::new();
    let paced = site.config(
        "paced.toml",
        &live_config(&server, "k9", &format!("messages_per_batch = 3\ninterval = \"2ms\"\nmax_count = {MAX}")),
    );
    let runtime = tokio::runtime::Runtime::new().unwrap();
    for round in 0..10 {
        let mut ferry = Ferry::start(&paced, &[]);
        if rng.u8(0..5) > 0 {
            ferry.wait_for_line(&["key=k9", "running"]);
        }
        std::thread::sleep(Duration::from_millis(rng.u64(0..300)));
        ferry.kill_9();
        let committed = site.states().read("k9").unwrap().map(|c| next_seq(&c.state)).unwrap_or(0);
        if committed > 0 {
            let seqs: std::collections::HashSet<u64> =
                runtime.block_on(server.read_all("crash", "k9")).iter().map(|m| seq_of(&m.payload)).collect();
            if let Some(missing) = (0..committed).find(|s| !seqs.contains(s)) {
                panic!("round {round}: committed at {committed}, but seq {missing} is not in Iggy");
            }
        }
    }
    let unpaced = site.config("finish.toml", &live_config(&server, "k9", &format!("max_count = {MAX}")));
    let mut ferry = Ferry::start(&unpaced, &[]);
    ferry.wait_for_line(&["key=k9", "idle"]);
    ferry.signal(nix::sys::signal::Signal::SIGTERM);
    assert!(ferry.wait().success(), "{}", ferry.log());
    let records = seqs_and_ids(&runtime.block_on(server.read_all("crash", "k9")));
    let duplicates = assert_ids_stable(&records);
    assert_complete(&records.iter().map(|(s, _)| *s).collect::<Vec<_>>(), MAX);
    eprintln!("{test}: killed 10 times: {} records for {MAX} seqs ({duplicates} duplicates, same ids)", records.len());
}
