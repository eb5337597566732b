//! `cargo bench -p ferry-tests --bench isolation`: what the sandbox costs, and what a
//! hostile neighbour costs a well-behaved connector.
//!
//! Printed:
//!
//! * instantiation: µs to instantiate and open the random source, with the on-demand
//!   and the pooling allocator;
//! * restart: ms from a guest's trap to its restarted instance delivering again (the
//!   restart backoff is 1 ms, so this is nearly all instantiate + open + poll);
//! * idle RSS: the host's resident memory with 1, 100 and 1,000 idle connectors;
//! * neighbours: messages/s of a well-behaved random source alone, and next to a
//!   guest that spins in `poll`, one that allocates until its cap, and one that
//!   floods its log;
//! * compile cache: ms from a component file to a linked component, as `ferry run`
//!   gets it, with a cold cache (compiled in a child process, then kept) and a warm
//!   one (loaded from the cache), for the random source and a component that is slow
//!   to compile (20,000 functions, standing in for a large Python or JS guest).
//!
//! Everything runs in this process against a null target with cursors in memory, so
//! the figures are the host's, not the disk's. `FERRY_BENCH_SCALE=0.1` is a quick look.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

use ferry::capabilities::logging::{GuestLog, LogBudget};
use ferry::config::{Allocator, BackoffConfig, ByteSize, StreamConfig};
use ferry::engine::delivery::NullTarget;
use ferry::engine::source::SourceConnector;
use ferry::engine::status::Event;
use ferry::host::Host;
use ferry::runtime::{
    Compiler, EngineOptions, Isolation, PoolSize, Provenance, Runtime, Sandbox, SourceComponent, SourceWorld,
};
use ferry_tests::components::{FAULTY_SOURCE, HOSTILE_SOURCE, RANDOM_SOURCE};
use ferry_tests::harness::{MemoryCursor, Running, quick_settings};
use serde_json::json;

fn main() {
    let scale = ferry_tests::bench::scale();
    let scaled = |n: u64| ((n as f64 * scale) as u64).max(10);
    let tokio = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();

    println!("instantiation (instantiate + open of the random source)");
    for allocator in [Allocator::OnDemand, Allocator::Pooling] {
        let options = EngineOptions {
            allocator,
            pool: PoolSize { instances: 16, max_memory_bytes: 64 << 20 },
            ..Default::default()
        };
        let runtime = Runtime::with_options(&options).expect("runtime");
        let component = load(&runtime, RANDOM_SOURCE);
        let micros = tokio.block_on(instantiate_many(&runtime, &component, scaled(500)));
        println!("  {:<10} {micros:>8.0} µs per instance", format!("{allocator:?}"));
    }

    let runtime = Arc::new(Runtime::new().expect("runtime"));
    println!();
    let millis = tokio.block_on(trap_to_delivering(&runtime, scaled(100)));
    println!("restart: {millis:.2} ms from a trap to the restarted instance delivering again (median)");

    println!();
    println!("idle connectors (random source, nothing to deliver), on-demand allocator");
    let mut running = None::<Running>;
    for count in [1usize, 100, 1000] {
        if let Some(previous) = running.take() {
            tokio.block_on(previous.stop());
        }
        let (started, rss) = tokio.block_on(idle_host(&runtime, count));
        println!("  {count:>5} connectors: RSS {rss:>8.1} MiB");
        running = Some(started);
    }
    if let Some(previous) = running.take() {
        tokio.block_on(previous.stop());
    }
    // The pooling allocator's reservation is virtual; what it costs in RSS is measured
    // in a runtime of its own, sized as `ferry run` would size it for 1,000 connectors.
    let pool = PoolSize { instances: 2004, max_memory_bytes: 64 << 20 };
    let options = EngineOptions { allocator: Allocator::Pooling, pool, ..Default::default() };
    let pooled = Arc::new(Runtime::with_options(&options).expect("a pooling runtime"));
    let before = rss_mib();
    let (started, rss) = tokio.block_on(idle_host(&pooled, 1000));
    println!("  pooling allocator, 1000 connectors: RSS {rss:>8.1} MiB ({:+.1} MiB)", rss - before);
    tokio.block_on(started.stop());

    println!();
    println!("a well-behaved random source (100 × 100 B batches) alone and next to a hostile guest");
    // `alone` comes first and last: the difference between the two is the noise.
    let neighbours: [(&str, Option<serde_json::Value>); 5] = [
        ("alone", None),
        ("spinning", Some(json!({ "mode": "spin", "messages_per_batch": 1 }))),
        ("allocating", Some(json!({ "mode": "allocate", "messages_per_batch": 1 }))),
        ("flooding", Some(json!({ "mode": "flood", "lines": 1000, "messages_per_batch": 1 }))),
        ("alone", None),
    ];
    for (name, hostile) in neighbours {
        let rate = tokio.block_on(throughput_next_to(&runtime, hostile, scaled(3000)));
        println!("  {name:<11} {rate:>10.0} msg/s");
    }
    // What metering costs: the same connector alone in an engine that meters fuel
    // (as every connector's engine does once any connector sets `limits.fuel`).
    let metered =
        Arc::new(Runtime::with_options(&EngineOptions { fuel: true, ..Default::default() }).expect("runtime"));
    let rate = tokio.block_on(throughput_next_to(&metered, None, scaled(3000)));
    println!("  {:<11} {rate:>10.0} msg/s (alone, fuel metered)", "metered");

    println!();
    println!("compile cache: component file to linked component, as `ferry run` gets it (compiled in a child)");
    let site = tempfile::tempdir().expect("a temporary directory");
    let slow = site.path().join("many_functions.wasm");
    let functions = ferry_tests::raw_component::many_functions(20_000);
    std::fs::write(&slow, ferry_tests::raw_component::source_with(&functions)).expect("writing the component");
    for (name, path) in [("random source", std::path::Path::new(RANDOM_SOURCE)), ("20,000 functions", &slow)] {
        let (cold, warm) = tokio.block_on(cold_and_warm(path, &site.path().join(name), scaled(20)));
        let kib = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0) / 1024;
        println!("  {name:<17} {kib:>6} KiB: cold {cold:>9.1} ms, warm {warm:>7.1} ms (median)");
    }
}

/// Ms for the first compile of `component` into an empty cache in `cache`, and the
/// median of `rounds` loads from it afterwards.
async fn cold_and_warm(component: &std::path::Path, cache: &std::path::Path, rounds: u64) -> (f64, f64) {
    let isolation =
        Isolation { exe: env!("CARGO_BIN_EXE_ferry").into(), timeout: Duration::from_secs(600), memory: 8 << 30 };
    let runtime = Runtime::new()
        .expect("runtime")
        .with_compiler(Compiler::Isolated(isolation))
        .with_compile_cache(cache.to_path_buf());
    let once = async || {
        let start = Instant::now();
        let checked = runtime.check::<SourceWorld>(component, 1 << 30).unwrap_or_else(|e| panic!("{e}"));
        let compiled = runtime.compile(checked).await.unwrap_or_else(|e| panic!("{e}"));
        (start.elapsed().as_secs_f64() * 1e3, compiled.provenance)
    };
    let (cold, provenance) = once().await;
    assert!(matches!(provenance, Provenance::Compiled { .. }), "an empty cache is a miss: {provenance:?}");
    let mut warm = Vec::new();
    for _ in 0..rounds.min(20) {
        let (millis, provenance) = once().await;
        assert!(matches!(provenance, Provenance::CacheHit { .. }), "then it hits: {provenance:?}");
        warm.push(millis);
    }
    warm.sort_by(f64::total_cmp);
    (cold, warm[warm.len() / 2])
}

fn load(runtime: &Runtime, path: &str) -> Arc<SourceComponent> {
    runtime.load_source(std::path::Path::new(path)).unwrap_or_else(|e| panic!("{e}"))
}

/// Mean µs to instantiate and open one instance (each dropped before the next).
async fn instantiate_many(runtime: &Runtime, component: &SourceComponent, count: u64) -> f64 {
    let sandbox = Sandbox::default();
    let budget = LogBudget::new(100, 1000, Arc::new(AtomicU64::new(0)));
    let start = Instant::now();
    for _ in 0..count {
        let log = GuestLog::new(tracing::Span::none(), budget.clone());
        let mut instance =
            runtime.instantiate(component, &sandbox, log, &Default::default()).await.expect("instantiates");
        instance.open("{}", None).await.expect("opens");
    }
    start.elapsed().as_secs_f64() * 1e6 / count as f64
}

fn connector(runtime: &Runtime, key: &str, component: &str, plugin_config: serde_json::Value) -> SourceConnector {
    SourceConnector {
        key: key.into(),
        tenant: None,
        component: load(runtime, component).into(),
        plugin_config: plugin_config.to_string(),
        streams: vec![StreamConfig::new("bench", key)].into(),
        settings: quick_settings(),
        sandbox: Sandbox::default(),
        target: Arc::new(NullTarget),
        transforms: None,
        cursor: Arc::new(MemoryCursor::default()),
    }
}

/// Median time from a `Trapped` event to the next `Acked` of the restarted instance.
async fn trap_to_delivering(runtime: &Arc<Runtime>, rounds: u64) -> f64 {
    // Traps on its second poll, every instance: deliver one, trap, restart, ...
    let config = json!({ "messages_per_batch": 1, "max_count": 1_000_000, "trap_on_poll": 2 });
    let mut trapper = connector(runtime, "trapper", FAULTY_SOURCE, config);
    let fast = BackoffConfig { initial: Duration::from_millis(1), max: Duration::from_millis(1) };
    trapper.settings.restart_backoff = fast;
    let mut host = Host::new(runtime.clone());
    host.add_source(trapper, None);
    let mut running = Running::start(host);
    let mut samples = Vec::new();
    while (samples.len() as u64) < rounds {
        running.wait_for("a trap", |e| matches!(e, Event::Trapped { .. })).await;
        let trapped = Instant::now();
        running.wait_for("the restarted instance's ACK", |e| matches!(e, Event::Acked { .. })).await;
        samples.push(trapped.elapsed().as_secs_f64() * 1e3);
    }
    running.stop().await;
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

/// A host with `count` idle random sources, once all are idle, and its RSS.
async fn idle_host(runtime: &Arc<Runtime>, count: usize) -> (Running, f64) {
    let mut host = Host::new(runtime.clone());
    for i in 0..count {
        let mut idle = connector(runtime, &format!("idle-{i}"), RANDOM_SOURCE, json!({ "max_count": 0 }));
        idle.settings.poll_interval = Duration::from_secs(1);
        host.add_source(idle, None);
    }
    let mut running = Running::start(host);
    let mut idle = std::collections::HashSet::new();
    while idle.len() < count {
        if let Event::Idle { key } =
            running.wait_for("connectors to go idle", |e| matches!(e, Event::Idle { .. })).await
        {
            idle.insert(key);
        }
    }
    (running, rss_mib())
}

/// Messages/s of a random source delivering `batches` batches, with `hostile` (a
/// hostile-source config) running next to it.
async fn throughput_next_to(runtime: &Arc<Runtime>, hostile: Option<serde_json::Value>, batches: u64) -> f64 {
    let batch = 100;
    let config = json!({ "messages_per_batch": batch, "payload_size": 100, "max_count": batch * batches });
    let steady = connector(runtime, "steady", RANDOM_SOURCE, config);
    let mut host = Host::new(runtime.clone());
    host.add_source(steady, None);
    if let Some(config) = hostile {
        let mut offender = connector(runtime, "offender", HOSTILE_SOURCE, config);
        offender.sandbox.limits.call_timeout = Duration::from_millis(200);
        offender.sandbox.limits.memory = ByteSize::mib(64);
        offender.settings.restart_backoff =
            BackoffConfig { initial: Duration::from_millis(5), max: Duration::from_millis(5) };
        host.add_source(offender, None);
    }
    let mut running = Running::start(host);
    let is_steady_ack = |e: &Event| matches!(e, Event::Acked { key, .. } if &**key == "steady");
    running.wait_for("the first ACK", is_steady_ack).await;
    let start = Instant::now();
    running.wait_idle("steady").await;
    let elapsed = start.elapsed().as_secs_f64();
    running.stop().await;
    ((batches - 1) * batch) as f64 / elapsed
}

fn rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0);
    kib / 1024.0
}
