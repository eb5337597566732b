//! `cargo bench -p ferry-tests --bench group_commit`: what `[state] sync =
//! "every-batch"` costs against `"interval"` when many sources share one state
//! directory, whose writer takes the commits that arrive together into one
//! transaction and one fsync (group commit, `ferry-store`'s `committer.rs`).
//!
//! For each count N (`FERRY_BENCH_SOURCES`, comma-separated, `1,10,100` by default)
//! one host runs N random sources into the null target, each committing its cursor
//! to the same state directory after every batch of 100 records of 100 B, first
//! with `every-batch` (fsynced before the ACK), then with `interval` (fsynced at
//! most once a second). Both runs do the same work in the same process; the clock
//! runs from the start of the host to the moment every source is idle (the start of
//! N instances is in both). Printed: messages/s over all sources, batches/s, and the
//! mean time one batch of one source took (N × elapsed / batches).
//!
//! `FERRY_BENCH_SCALE=0.1` runs a tenth of the batches.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry::contract::Durability;
use ferry::engine::delivery::NullTarget;
use ferry::engine::source::SourceConnector;
use ferry::engine::status::Phase;
use ferry::host::Host;
use ferry::runtime::{Runtime, SourceComponent};
use ferry::store::state::StateDir;
use ferry_tests::components::RANDOM_SOURCE;
use ferry_tests::harness::{Running, quick_settings};
use ferry_tests::iggy_server::created_stream;

const BATCH: u64 = 100;
const PAYLOAD: usize = 100;
/// Batches all sources together produce, at scale 1, whatever N is.
const TOTAL_BATCHES: u64 = 60_000;

/// Run `sources` sources committing to one state directory with `durability`;
/// the time until all of them are idle.
async fn run(
    runtime: &Arc<Runtime>,
    component: &Arc<SourceComponent>,
    sources: u64,
    per_source: u64,
    durability: Durability,
) -> Duration {
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::new(dir.path().join("state")).with_durability(durability);
    let mut host = Host::new(runtime.clone());
    let keys: Vec<String> = (0..sources).map(|n| format!("source-{n}")).collect();
    for key in &keys {
        let mut settings = quick_settings();
        settings.poll_interval = Duration::from_millis(1);
        host.add_source(
            SourceConnector {
                key: key.as_str().into(),
                tenant: None,
                component: component.clone().into(),
                plugin_config: serde_json::json!({
                    "messages_per_batch": BATCH, "payload_size": PAYLOAD, "max_count": BATCH * per_source
                })
                .to_string(),
                streams: vec![created_stream("bench", key)].into(),
                settings,
                sandbox: Default::default(),
                target: Arc::new(NullTarget),
                transforms: None,
                cursor: Arc::new(state.open(key).expect("state")),
            },
            None,
        );
    }
    let board = host.status();
    let start = Instant::now();
    let running = Running::start(host);
    for key in &keys {
        board.wait_until(key, |status| status.phase == Phase::Idle).await;
    }
    let elapsed = start.elapsed();
    running.stop().await;
    elapsed
}

fn main() {
    let scale = ferry_tests::bench::scale();
    let counts: Vec<u64> = std::env::var("FERRY_BENCH_SOURCES")
        .unwrap_or_else(|_| "1,10,100".into())
        .split(',')
        .map(|n| n.trim().parse().expect("FERRY_BENCH_SOURCES: numbers, comma-separated"))
        .collect();
    let tokio = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let runtime = Arc::new(Runtime::new().expect("runtime"));
    let component = runtime.load_source(std::path::Path::new(RANDOM_SOURCE)).expect("the random source loads");
    println!(
        "{} x {} B a batch, every source's cursor committed after each batch to one state directory",
        BATCH, PAYLOAD
    );
    println!();
    println!(
        "{:>7} {:<12} {:>8} {:>12} {:>11} {:>16}",
        "sources", "sync", "batches", "msg/s", "batches/s", "µs/batch/source"
    );
    for sources in counts {
        let per_source = (((TOTAL_BATCHES as f64 * scale) as u64) / sources).max(5);
        let batches = per_source * sources;
        let mut rates = Vec::new();
        for (name, durability) in
            [("every-batch", Durability::EveryCommit), ("interval", Durability::Interval(Duration::from_secs(1)))]
        {
            let elapsed = tokio.block_on(run(&runtime, &component, sources, per_source, durability));
            let seconds = elapsed.as_secs_f64();
            let rate = (batches * BATCH) as f64 / seconds;
            rates.push(rate);
            println!(
                "{:>7} {:<12} {:>8} {:>12.0} {:>11.0} {:>16.1}",
                sources,
                name,
                batches,
                rate,
                batches as f64 / seconds,
                seconds * 1e6 * sources as f64 / batches as f64
            );
        }
        println!("{:>7} every-batch / interval = {:.2}", sources, rates[0] / rates[1]);
    }
}
