//! A guest that attacks its sandbox (spins, eats memory, overflows its stack,
//! blocks in a host call, floods the log, returns oversized batches, reaches for
//! files, environment and network it was not granted) is contained: the host keeps
//! running, the offender is trapped or NACKed and restarted from a committed state
//! that the attack did not touch, a well-behaved neighbour keeps delivering all the
//! while, and the log says what happened. What *is* granted works.

use std::io::Read;
use std::net::TcpListener;
use std::path::Path;
use std::time::{Duration, Instant};

use ferry::capabilities::dirs::DirGrant;
use ferry::config::{BackoffConfig, ByteSize};
use ferry::contract::NackReason;
use ferry::engine::source::SourceConnector;
use ferry::engine::status::Event;
use ferry_tests::components::{HOSTILE_SOURCE, RANDOM_SOURCE};
use ferry_tests::harness::{Harness, Running};
use ferry_tests::logs::capture;
use ferry_tests::records::{next_seq, seqs};
use serde_json::{Value, json};

/// Restart after a fixed 100 ms: long enough to see the neighbour deliver meanwhile.
const RESTART: BackoffConfig = BackoffConfig { initial: Duration::from_millis(100), max: Duration::from_millis(100) };

/// Short enough to keep the tests quick, long enough for an honest poll.
const CALL_TIMEOUT: Duration = Duration::from_millis(300);

/// Every offender delivers two good batches of five (`seq` 0..10) and then attacks.
/// `max_count` is 10, so an instance restarted at the committed cursor has nothing
/// to produce and never reaches its attack: it goes idle, and the test ends there.
const GOOD_BATCHES: u64 = 2;
const GOOD_RECORDS: u64 = 10;

/// The offender's `plugin_config`: `mode` after the good batches, plus `extra`.
fn hostile(mode: &str, extra: Value) -> Value {
    let mut config = json!({
        "messages_per_batch": 5,
        "max_count": GOOD_RECORDS,
        "good_batches": GOOD_BATCHES,
        "mode": mode,
    });
    if let (Some(config), Value::Object(extra)) = (config.as_object_mut(), extra) {
        config.extend(extra);
    }
    config
}

/// An offender `key` in `mode`, restarting after [`RESTART`].
fn offender(h: &Harness, key: &str, mode: &str, extra: Value) -> SourceConnector {
    let mut connector = h.source(key, HOSTILE_SOURCE, hostile(mode, extra));
    connector.settings.restart_backoff = RESTART;
    connector
}

/// The well-behaved connector beside each offender: a batch every millisecond.
fn neighbour(h: &Harness, key: &str) -> SourceConnector {
    h.source(key, RANDOM_SOURCE, json!({ "messages_per_batch": 1, "interval": "1ms" }))
}

fn neighbour_key(key: &str) -> String {
    format!("{key}-neighbour")
}

/// What happened to an offender, from its start until its restarted instance idled.
#[derive(Default, Debug)]
struct Episode {
    acks: u32,
    traps: Vec<String>,
    nacks: Vec<(NackReason, String)>,
    failures: Vec<String>,
    /// The instance that went idle at the end (the last `Started`).
    instance: u64,
    /// ACKs of the neighbour from the offender's last good batch to its restart:
    /// while the attack and its consequences lasted.
    neighbour_acks_in_trouble: u32,
}

/// Follow the events until `key`, restarted at least once, is idle.
async fn follow(running: &mut Running, key: &str, neighbour: &str) -> Episode {
    let mut episode = Episode::default();
    let mut in_trouble = false;
    loop {
        let event = running.wait_for(&format!("{key} to be restarted and idle"), |_| true).await;
        if event.key() == neighbour {
            if in_trouble && matches!(event, Event::Acked { .. }) {
                episode.neighbour_acks_in_trouble += 1;
            }
            continue;
        }
        if event.key() != key {
            continue;
        }
        match event {
            Event::Started { instance, .. } => {
                episode.instance = instance;
                in_trouble = false;
            }
            Event::Acked { .. } => {
                episode.acks += 1;
                // The first instance attacks right after its last good batch.
                in_trouble = episode.instance == 1 && u64::from(episode.acks) == GOOD_BATCHES;
            }
            Event::Trapped { message, .. } => episode.traps.push(message),
            Event::Nacked { reason, detail, .. } => episode.nacks.push((reason, detail)),
            Event::Failed { reason, .. } => episode.failures.push(reason),
            Event::Idle { .. } if episode.instance >= 2 => return episode,
            _ => {}
        }
    }
}

/// Run `offender` beside a neighbour until it was restarted and went idle, and
/// check what no attack may harm: the neighbour delivered during the trouble, and
/// the offender's committed cursor and log are exactly its good batches.
async fn contain(h: &Harness, offender: SourceConnector) -> (Running, Episode) {
    let neighbour = neighbour(h, &neighbour_key(&offender.key));
    contain_beside(h, offender, neighbour).await
}

/// [`contain`] with a neighbour of the caller's.
async fn contain_beside(h: &Harness, offender: SourceConnector, neighbour: SourceConnector) -> (Running, Episode) {
    let key = offender.key.to_string();
    let neighbour_key = neighbour.key.to_string();
    let mut running = h.start(vec![offender, neighbour]);
    let episode = follow(&mut running, &key, &neighbour_key).await;
    assert_eq!(episode.instance, 2, "restarted once, then idle at max_count: {episode:?}");
    assert_eq!(u64::from(episode.acks), GOOD_BATCHES, "{episode:?}");
    assert!(
        episode.neighbour_acks_in_trouble > 0,
        "the neighbour must deliver while the offender is in trouble: {episode:?}"
    );
    assert_good_batches_intact(h, &key);
    let neighbour = running.status.get(&neighbour_key).expect("the neighbour's status");
    assert_eq!(neighbour.traps, 0, "{neighbour:?}");
    (running, episode)
}

/// The committed cursor is the one of the good batches, and the log holds each
/// good record exactly once and nothing else.
fn assert_good_batches_intact(h: &Harness, key: &str) {
    let committed = h.committed(key).expect("the good batches were committed");
    assert_eq!(committed.generation, GOOD_BATCHES, "one commit per good batch");
    assert_eq!(next_seq(&committed.state), GOOD_RECORDS, "{}", String::from_utf8_lossy(&committed.state));
    let records = h.records(key);
    assert_eq!(seqs(&records), (0..GOOD_RECORDS).collect::<Vec<_>>());
    for record in &records {
        let payload = String::from_utf8_lossy(&record.payload);
        assert!(!payload.contains("oversized"), "an oversized record reached the log: {payload}");
    }
}

/// The single trap of an episode.
fn the_trap(episode: &Episode) -> &str {
    assert_eq!(episode.traps.len(), 1, "{episode:?}");
    &episode.traps[0]
}

/// Whether a line under `key` contains `text`.
fn logged(key: &str, text: &str) -> bool {
    capture().of(key).iter().any(|l| l.message.contains(text))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spinning_guest_is_interrupted_at_its_call_timeout() {
    let h = Harness::new();
    let mut spinner = offender(&h, "spinner", "spin", json!({}));
    spinner.sandbox.limits.call_timeout = CALL_TIMEOUT;
    let (running, episode) = contain(&h, spinner).await;
    let trap = the_trap(&episode);
    assert!(trap.contains("limits.call_timeout"), "{trap}");
    assert!(logged("spinner", "limits.call_timeout"), "the log says why: {:?}", capture().of("spinner"));
    assert!(capture().guest_lines("spinner").iter().any(|l| l == "hostile source: spinning"));
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_blocked_in_a_host_call_is_interrupted_at_its_call_timeout() {
    let h = Harness::new();
    let mut sleeper = offender(&h, "sleeper", "sleep", json!({}));
    sleeper.sandbox.limits.call_timeout = CALL_TIMEOUT;
    let (running, episode) = contain(&h, sleeper).await;
    let trap = the_trap(&episode);
    assert!(trap.contains("limits.call_timeout"), "{trap}");
    assert!(logged("sleeper", "limits.call_timeout"), "{:?}", capture().of("sleeper"));
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_eating_memory_is_stopped_at_its_memory_limit() {
    let h = Harness::new();
    let mut eater = offender(&h, "eater", "allocate", json!({}));
    eater.sandbox.limits.memory = ByteSize::mib(16);
    let (running, episode) = contain(&h, eater).await;
    let trap = the_trap(&episode);
    assert!(
        trap.starts_with("the guest trapped in `poll`: out of memory (the guest asked for ")
            && trap.contains("refused: limits.memory is 16 MiB; raise the connector's limits.memory)"),
        "the trap names the limit to raise: {trap}"
    );
    let refused = capture()
        .of("eater")
        .into_iter()
        .filter(|l| l.target == "ferry::limits" && l.level == tracing::Level::WARN)
        .map(|l| l.message)
        .collect::<Vec<_>>();
    assert!(refused.iter().any(|l| l.contains("limits.memory")), "the refused growth is logged: {refused:?}");
    let status = running.status.get("eater").unwrap();
    assert_eq!(status.traps, 1, "it dies of the refusal: {status:?}");
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_overflowing_its_stack_traps() {
    let h = Harness::new();
    let recurser = offender(&h, "recurser", "stack_overflow", json!({}));
    let (running, episode) = contain(&h, recurser).await;
    let trap = the_trap(&episode);
    assert!(trap.to_lowercase().contains("stack"), "{trap}");
    assert!(logged("recurser", trap), "{:?}", capture().of("recurser"));
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_guest_traps_and_its_panic_is_logged() {
    let h = Harness::new();
    let panicker = offender(&h, "panicker", "panic", json!({}));
    let (running, episode) = contain(&h, panicker).await;
    the_trap(&episode);
    let guest = capture().guest_lines("panicker");
    assert!(guest.iter().any(|l| l.contains("hostile source: configured to panic")), "{guest:?}");
    running.stop().await;
}

/// An offender returning `mode`'s oversized batch, NACKed until it is failed.
async fn assert_oversize_refused(
    key: &str,
    mode: &str,
    extra: Value,
    cap: &str,
    limit: impl FnOnce(&mut SourceConnector),
) {
    let h = Harness::new();
    let mut connector = offender(&h, key, mode, extra);
    connector.settings.max_consecutive_nacks = 3;
    limit(&mut connector);
    let (running, episode) = contain(&h, connector).await;
    assert!(episode.traps.is_empty(), "an oversized batch is refused, not a trap: {episode:?}");
    assert_eq!(episode.nacks.len(), 3, "NACKed until max_consecutive_nacks: {episode:?}");
    for (reason, detail) in &episode.nacks {
        assert_eq!(*reason, NackReason::Rejected, "{detail}");
        assert!(detail.contains(cap), "the NACK names {cap}: {detail}");
    }
    assert_eq!(episode.failures.len(), 1, "{episode:?}");
    assert!(logged(key, cap), "{:?}", capture().of(key));
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_of_too_many_messages_is_refused_and_names_the_limit() {
    let extra = json!({ "n": 101 });
    assert_oversize_refused("crowd", "too_many_messages", extra, "limits.max_messages_per_batch", |c| {
        c.sandbox.limits.max_messages_per_batch = 100;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_over_the_default_size_limit_is_refused_and_names_the_limit() {
    // The default limit, 1 MiB, plus one byte.
    let extra = json!({ "bytes": ByteSize::mib(1).0 + 1 });
    assert_oversize_refused("whale", "message_too_big", extra, "limits.max_message_bytes", |_| {}).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_over_its_size_limit_is_refused_and_names_the_limit() {
    // Each message is well under limits.max_message_bytes; together they are not.
    let extra = json!({ "n": 8, "bytes": 3000 });
    assert_oversize_refused("convoy", "batch_too_big", extra, "limits.max_batch_bytes", |c| {
        c.sandbox.limits.max_batch_bytes = ByteSize::kib(16);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cursor_over_its_size_limit_is_refused_and_names_the_limit() {
    let extra = json!({ "bytes": 2000 });
    assert_oversize_refused("hoarder", "state_too_big", extra, "limits.max_state_bytes", |c| {
        c.sandbox.limits.max_state_bytes = ByteSize::kib(1);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_with_a_flood_of_headers_is_refused_at_the_header_cap_at_once() {
    // 100,000 distinct keys: compared pairwise this was minutes of the host's CPU per
    // batch, on a tokio worker, again after every NACK. The cap is checked first.
    let extra = json!({ "n": 100_000 });
    assert_oversize_refused("hydra", "many_headers", extra, "limits.max_headers_per_message", |c| {
        c.sandbox.limits.memory = ByteSize::mib(256);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_origin_timestamp_no_target_can_store_is_refused_naming_the_rule() {
    assert_oversize_refused("time-traveller", "far_future", json!({}), "origin-timestamp", |_| {}).await;
}

/// A message of `bytes` bytes, after the good batches, with `limits.memory` room
/// for the guest to build it.
fn whale(h: &Harness, key: &str, bytes: u64) -> SourceConnector {
    let mut whale = offender(h, key, "message_too_big", json!({ "bytes": bytes }));
    whale.sandbox.limits.memory = ByteSize::mib(768);
    whale
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_within_raised_limits_is_delivered_not_trapped_by_the_engine() {
    // 130 MiB is past what wasmtime lets a call hand the host by default (128 MiB),
    // and within the limits the operator raised: the host raises the engine's cap
    // with them.
    let h = Harness::new();
    let mut big = whale(&h, "big", 130 << 20);
    big.sandbox.limits.max_message_bytes = ByteSize::mib(160);
    big.sandbox.limits.max_batch_bytes = ByteSize::mib(160);
    let mut running = h.start(vec![big]);
    let event = running
        .wait_for("the big batch to settle", |e| {
            e.key() == "big"
                && matches!(e, Event::Acked { messages: 1, .. } | Event::Trapped { .. } | Event::Nacked { .. })
        })
        .await;
    assert!(matches!(event, Event::Acked { .. }), "delivered, not refused by the engine: {event:?}");
    running.stop().await;
    let records = h.records("big");
    assert!(records.iter().any(|r| r.payload.len() as u64 >= 130 << 20), "the big message is in the log");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_far_over_its_limits_traps_before_the_host_allocates_it_naming_the_limits() {
    // With the default limits (16 MiB a batch) the host takes about 110 MB out of a
    // guest in one call, not the 130 MiB it offers.
    let h = Harness::new();
    let (running, episode) = contain(&h, whale(&h, "leviathan", 130 << 20)).await;
    let trap = the_trap(&episode);
    assert!(trap.contains("more data in one call than its limits allow"), "{trap}");
    assert!(trap.contains("limits.max_batch_bytes"), "{trap}");
    running.stop().await;
}

/// No line about connector `key`, and none of its status, carries a control
/// character: its guest forged no line and sent nothing to the operator's terminal.
fn assert_nothing_forged(running: &Running, key: &str) {
    for line in capture().of(key) {
        assert!(
            !line.message.chars().any(|c| c.is_control() && c != '\t'),
            "a guest's control characters reached the log: {line:?}"
        );
    }
    let status = running.status.get(key).unwrap();
    let last_error = status.last_error.unwrap_or_default();
    assert!(!last_error.chars().any(char::is_control), "{last_error:?}");
    assert!(last_error.len() <= 2200, "the status keeps a bounded error: {} bytes", last_error.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_header_key_quoted_in_a_nack_cannot_forge_a_line_or_flood_the_log() {
    let h = Harness::new();
    let extra = json!({ "bytes": 60_000 });
    let mut forger = offender(&h, "forger", "repeated_key", extra);
    forger.settings.max_consecutive_nacks = 3;
    forger.sandbox.limits.max_header_bytes = ByteSize::kib(200);
    forger.sandbox.limits.max_message_bytes = ByteSize::kib(200);
    let (running, episode) = contain(&h, forger).await;
    assert_eq!(episode.nacks.len(), 3, "{episode:?}");
    for (reason, detail) in &episode.nacks {
        assert_eq!(*reason, NackReason::Rejected);
        assert!(detail.starts_with("message 0 repeats the header key \"k\\u{a}2030-01-01"), "{detail}");
        assert!(detail.len() < 300 && detail.contains("bytes in all"), "cut, its size noted: {detail}");
    }
    assert_nothing_forged(&running, "forger");
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_error_cannot_forge_a_line_steer_the_terminal_or_flood_the_log() {
    let h = Harness::new();
    // 30 MiB of error message, returned by every poll.
    let mut forger = offender(&h, "shouter", "error_text", json!({ "bytes": 30 << 20 }));
    forger.settings.max_consecutive_nacks = 3;
    forger.sandbox.limits.memory = ByteSize::mib(256);
    let (running, episode) = contain(&h, forger).await;
    assert_eq!(episode.failures.len(), 1, "three errors in a row fail it: {episode:?}");
    let errors: Vec<_> =
        capture().of("shouter").into_iter().filter(|l| l.message.starts_with("guest error:")).collect();
    assert_eq!(errors.len(), 3, "{errors:?}");
    for line in &errors {
        assert!(line.message.contains("oops\\u{a}2030-01-01T00:00:00Z  INFO connector{key=victim}"), "{line:?}");
        let size = line.message.rsplit("[cut: ").next().and_then(|t| t.strip_suffix(" bytes in all]"));
        assert!(size.and_then(|n| n.parse::<u64>().ok()).is_some_and(|n| n > 30 << 20), "its size is noted: {line:?}");
        assert!(line.message.len() < 2200, "{} bytes", line.message.len());
    }
    assert_nothing_forged(&running, "shouter");
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_flooding_the_log_is_rate_limited_and_keeps_delivering() {
    const RATE: u32 = 20;
    const BURST: u32 = 50;
    let h = Harness::new();
    let mut config = hostile("flood", json!({ "lines": 200 }));
    config["max_count"] = json!(30);
    let mut flooder = h.source("flooder", HOSTILE_SOURCE, config);
    flooder.sandbox.limits.log_lines_per_second = RATE;
    flooder.sandbox.limits.log_burst = BURST;
    let started = Instant::now();
    let mut running = h.start(vec![flooder, neighbour(&h, "flooder-neighbour")]);

    // From its third poll on, every poll of the flooder logs 200 lines, idle polls
    // included: the flood goes on after its last record.
    let mut acks = 0;
    loop {
        match running.wait_for("the flooder to deliver everything", |_| true).await {
            Event::Acked { key, .. } if &*key == "flooder" => acks += 1,
            Event::Trapped { key, message } if &*key == "flooder" => {
                panic!("flooding the log is not a trap: {message}")
            }
            Event::Idle { key } if &*key == "flooder" => break,
            _ => {}
        }
    }
    assert_eq!(acks, 6, "six batches of five");
    assert_eq!(seqs(&h.records("flooder")), (0..30).collect::<Vec<_>>(), "the flood does not cost a record");

    // The neighbour keeps delivering while the flood goes on, and the host reports
    // the drops by itself, in the log.
    let mut neighbour_acks_in_flood = 0;
    while neighbour_acks_in_flood < 10 || !logged("flooder", "log lines dropped") {
        let event = running.wait_for("neighbour ACKs and a line about dropped log lines", |_| true).await;
        if matches!(&event, Event::Acked { key, .. } if &**key == "flooder-neighbour") {
            neighbour_acks_in_flood += 1;
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    let status = running.status.get("flooder").unwrap();
    assert!(status.log_lines_dropped > 0, "{status:?}");
    let flood = capture().guest_lines("flooder").into_iter().filter(|l| l.contains("flood line")).count();
    let allowed = f64::from(BURST) + f64::from(RATE) * (elapsed + 1.0);
    assert!(flood as f64 <= allowed, "{flood} flood lines got through in {elapsed:.1} s, more than {allowed}");
    assert_eq!(running.status.get("flooder-neighbour").unwrap().log_lines_dropped, 0, "the limit is per connector");
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_out_of_fuel_traps_and_fuel_is_counted() {
    let h = Harness::with_fuel();
    let mut burner = offender(&h, "burner", "spin", json!({}));
    burner.sandbox.limits.fuel = Some(10_000_000);
    // Only the fuel can end the spin: the deadline is far away.
    burner.sandbox.limits.call_timeout = Duration::from_secs(60);
    let mut metered = neighbour(&h, &neighbour_key("burner"));
    metered.sandbox.limits.fuel = Some(1_000_000_000);
    let (running, episode) = contain_beside(&h, burner, metered).await;
    let trap = the_trap(&episode);
    assert!(trap.contains("fuel"), "{trap}");
    assert!(logged("burner", "fuel"), "{:?}", capture().of("burner"));
    let neighbour = running.status.get(&neighbour_key("burner")).unwrap();
    assert!(neighbour.fuel_consumed > 0, "a metered connector's fuel is counted: {neighbour:?}");
    assert_eq!(neighbour.traps, 0, "its budget is its own: {neighbour:?}");
    assert!(running.status.get("burner").unwrap().fuel_consumed > 0);
    running.stop().await;
}

/// A probe connector `key` in `mode` with `extra`; grants are the caller's to add.
fn prober(h: &Harness, key: &str, mode: &str, extra: Value) -> SourceConnector {
    h.source(key, HOSTILE_SOURCE, hostile(mode, extra))
}

/// What a probe saw: `ok`, and what it read or the error.
#[derive(Debug)]
struct Outcome {
    ok: bool,
    detail: String,
}

/// No connection reached any of `listeners`: the host refused it before it left.
fn assert_nothing_reached(listeners: &[&TcpListener]) {
    for listener in listeners {
        listener.set_nonblocking(true).unwrap();
        match listener.accept() {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            other => panic!("a connection reached a listener: {other:?}"),
        }
    }
}

/// The host logged a refusal for connector `key`: a `ferry::grants` warning that
/// says "not granted" and every one of `words`.
fn assert_refusal_logged(key: &str, words: &[&str]) {
    let lines = capture().of(key);
    assert!(
        lines.iter().any(|l| l.target == "ferry::grants"
            && l.level == tracing::Level::WARN
            && l.message.contains("not granted")
            && words.iter().all(|w| l.message.contains(w))),
        "the host logs the refusal of {key} naming {words:?}: {lines:?}"
    );
}

/// Run `probes` beside a neighbour until each has delivered its one record and
/// gone idle, and return their outcomes, by position. None of them may trap or
/// err: a refused grant is an ordinary error inside the guest.
async fn run_probes(h: &Harness, probes: Vec<SourceConnector>) -> (Running, Vec<Outcome>) {
    let keys: Vec<String> = probes.iter().map(|p| p.key.to_string()).collect();
    let neighbour_key = neighbour_key(&keys[0]);
    let mut connectors = probes;
    connectors.push(neighbour(h, &neighbour_key));
    let mut running = h.start(connectors);
    let mut idle = std::collections::BTreeSet::new();
    while idle.len() < keys.len() {
        let event = running.wait_for("every probe to be idle", |_| true).await;
        if let Event::Idle { key } = &event
            && keys.iter().any(|k| k == &**key)
        {
            idle.insert(key.to_string());
        }
    }
    // The host is unaffected: the neighbour still delivers after every probe ran.
    running
        .wait_for(
            "the neighbour to deliver after the probes",
            |e| matches!(e, Event::Acked { key, .. } if **key == *neighbour_key),
        )
        .await;
    let outcomes = keys
        .iter()
        .map(|key| {
            let status = running.status.get(key).unwrap();
            assert_eq!((status.traps, status.guest_errors, status.instances), (0, 0, 1), "{status:?}");
            let records = h.records(key);
            assert_eq!(records.len(), 1, "one record per probe: {records:?}");
            let record: Value = serde_json::from_slice(&records[0].payload).expect("a probe record");
            Outcome {
                ok: record["ok"].as_bool().expect("ok"),
                detail: record["detail"].as_str().expect("detail").to_string(),
            }
        })
        .collect();
    (running, outcomes)
}

/// A file on the host the guest was not granted.
fn secret(h: &Harness) -> std::path::PathBuf {
    let path = h.dir.path().join("secret.txt");
    std::fs::write(&path, "the host's secret").unwrap();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_env_and_network_are_out_of_reach_without_grants() {
    let h = Harness::new();
    let secret = secret(&h);
    let planted = h.dir.path().join("planted.txt");
    assert!(std::env::var_os("PATH").is_some(), "the host has a PATH for the guest not to see");
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let probes = vec![
        prober(&h, "nogrant-read", "read_file", json!({ "path": secret })),
        prober(&h, "nogrant-write", "write_file", json!({ "path": planted, "contents": "planted" })),
        prober(&h, "nogrant-env", "env", json!({ "name": "PATH" })),
        prober(&h, "nogrant-connect", "connect", json!({ "address": address })),
    ];
    let (running, outcomes) = run_probes(&h, probes).await;
    for outcome in &outcomes {
        assert!(!outcome.ok, "nothing was granted: {outcomes:?}");
    }
    assert!(!planted.exists(), "the guest wrote a host file");

    // The connect was refused by the host, so nothing reached the listener.
    assert_nothing_reached(&[&listener]);
    assert_refusal_logged("nogrant-connect", &[&address]);
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_beyond_the_granted_addresses_is_refused_and_logged() {
    let h = Harness::new();
    let granted = TcpListener::bind("127.0.0.1:0").unwrap();
    let other = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = other.local_addr().unwrap().to_string();
    let mut connect = prober(&h, "net-beyond", "connect", json!({ "address": address }));
    connect.sandbox.grants.network.push(granted.local_addr().unwrap().to_string());
    let (running, outcomes) = run_probes(&h, vec![connect]).await;
    assert!(!outcomes[0].ok, "only the granted address may be connected to: {:?}", outcomes[0]);
    assert_nothing_reached(&[&granted, &other]);
    assert_refusal_logged("net-beyond", &[&address]);
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn granted_directories_work_as_granted_and_nothing_beyond_them() {
    let h = Harness::new();
    let secret = secret(&h);
    let (ro, rw) = (h.dir.path().join("ro"), h.dir.path().join("rw"));
    std::fs::create_dir_all(&ro).unwrap();
    std::fs::create_dir_all(&rw).unwrap();
    std::fs::write(ro.join("greeting.txt"), "hello from the host").unwrap();
    let grant = |connector: &mut SourceConnector, host: &Path, writable: bool| {
        let dir = DirGrant { host: host.to_path_buf(), guest: "/data".into(), writable };
        connector.sandbox.grants.dirs.push(dir);
    };

    let mut read = prober(&h, "dir-read", "read_file", json!({ "path": "/data/greeting.txt" }));
    grant(&mut read, &ro, false);
    let mut write_ro = prober(&h, "dir-write-ro", "write_file", json!({ "path": "/data/new.txt", "contents": "no" }));
    grant(&mut write_ro, &ro, false);
    let contents = "written by the guest";
    let mut write_rw =
        prober(&h, "dir-write-rw", "write_file", json!({ "path": "/data/new.txt", "contents": contents }));
    grant(&mut write_rw, &rw, true);
    let mut escape = prober(&h, "dir-escape", "read_file", json!({ "path": "/data/../secret.txt" }));
    grant(&mut escape, &ro, false);
    let mut absolute = prober(&h, "dir-absolute", "read_file", json!({ "path": secret }));
    grant(&mut absolute, &ro, false);

    let (running, outcomes) = run_probes(&h, vec![read, write_ro, write_rw, escape, absolute]).await;
    let [read, write_ro, write_rw, escape, absolute] = &outcomes[..] else { unreachable!() };
    assert!(read.ok && read.detail == "hello from the host", "{read:?}");
    assert!(!write_ro.ok, "a read-only grant refuses writes: {write_ro:?}");
    assert!(!ro.join("new.txt").exists());
    assert!(write_rw.ok && write_rw.detail == contents, "{write_rw:?}");
    assert_eq!(std::fs::read_to_string(rw.join("new.txt")).unwrap(), contents);
    assert!(!escape.ok, "`..` does not leave the granted directory: {escape:?}");
    assert!(!absolute.ok, "a host path outside the grant is out of reach: {absolute:?}");
    for outcome in [escape, absolute] {
        assert!(!outcome.detail.contains("the host's secret"), "{outcome:?}");
    }
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_granted_environment_variable_is_passed_through() {
    let h = Harness::new();
    let path = std::env::var("PATH").expect("the host has a PATH");
    let mut env = prober(&h, "env-granted", "env", json!({ "name": "PATH" }));
    env.sandbox.grants.env.push("PATH".into());
    let (running, outcomes) = run_probes(&h, vec![env]).await;
    assert!(outcomes[0].ok, "{:?}", outcomes[0]);
    assert_eq!(outcomes[0].detail, path);
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_granted_address_can_be_connected_to() {
    let h = Harness::new();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let mut connect = prober(&h, "net-granted", "connect", json!({ "address": address }));
    connect.sandbox.grants.network.push(address.clone());
    let (running, outcomes) = run_probes(&h, vec![connect]).await;
    assert!(outcomes[0].ok, "{:?}", outcomes[0]);

    // The guest connected and flushed its greeting before its record was delivered,
    // so the connection is waiting in the backlog with the bytes behind it.
    listener.set_nonblocking(true).unwrap();
    let (mut stream, _) = listener.accept().expect("the guest's connection");
    stream.set_nonblocking(false).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut greeting = [0u8; 11];
    stream.read_exact(&mut greeting).expect("the guest's greeting");
    assert_eq!(&greeting, b"hello ferry");
    running.stop().await;
}

/// Answer one HTTP request on `listener` with `200 OK` and `body`, in a thread; the
/// request's head is what the thread returns.
fn serve_one_http_request(listener: TcpListener, body: &'static str) -> std::thread::JoinHandle<String> {
    use std::io::Write;
    std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().expect("the guest's HTTP connection");
        stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            stream.read_exact(&mut byte).expect("the request head");
            head.push(byte[0]);
        }
        let response = format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}", body.len());
        stream.write_all(response.as_bytes()).expect("the response");
        String::from_utf8_lossy(&head).into_owned()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_granted_address_can_be_reached_over_wasi_http() {
    let h = Harness::new();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let server = serve_one_http_request(listener, "hi from the test");
    let mut get = prober(&h, "http-granted", "http_get", json!({ "address": address }));
    get.sandbox.grants.network.push(address.clone());
    let (running, outcomes) = run_probes(&h, vec![get]).await;
    assert!(outcomes[0].ok, "{:?}", outcomes[0]);
    assert_eq!(outcomes[0].detail, "200 hi from the test");
    let head = server.join().expect("the server thread");
    assert!(head.starts_with("GET /probe HTTP/1.1\r\n"), "{head}");
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_request_beyond_the_granted_addresses_is_refused_and_logged() {
    let h = Harness::new();
    let granted = TcpListener::bind("127.0.0.1:0").unwrap();
    let other = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = other.local_addr().unwrap().to_string();
    let mut get = prober(&h, "http-beyond", "http_get", json!({ "address": address }));
    get.sandbox.grants.network.push(granted.local_addr().unwrap().to_string());
    let mut ungranted = prober(&h, "http-none", "http_get", json!({ "address": address }));
    ungranted.sandbox.grants = Default::default();
    let (running, outcomes) = run_probes(&h, vec![get, ungranted]).await;
    for outcome in &outcomes {
        assert!(!outcome.ok, "only granted addresses may be requested: {outcome:?}");
        assert!(outcome.detail.contains("HttpRequestDenied"), "the guest is told why: {outcome:?}");
    }
    assert_nothing_reached(&[&granted, &other]);
    for key in ["http-beyond", "http-none"] {
        assert_refusal_logged(key, &["HTTP request", &address]);
    }
    running.stop().await;
}
