//! PostgreSQL end to end, as an operator runs it: table `a` → postgres-source → the
//! local log (or, opt-in, a live Iggy server) → postgres-sink → table `b`, in one
//! `ferry run`, while new rows keep arriving in `a` and ferry, the PostgreSQL server
//! (and the Iggy server) are killed with `kill -9` at random moments, alone or
//! together. A server killed under a running ferry is restarted under it, and the
//! connectors carry on once it is back (`postgres_source` and `postgres_sink` show
//! that they log what failed meanwhile). Through Iggy the sink reads alone (no
//! `consumer_group`): the server we can run strands a group's members through its own
//! crash (`iggy_sinks::a_server_crash_strands_the_consumer_group_members_it_had`).
//!
//! After every kill: `b` holds only rows of `a`, with every value as it is in `a`
//! (numbers, text, booleans, timestamps, json, bytea, NULLs), and no row of `a`
//! twice (a source delivers a batch again after a crash, with the same message ids,
//! and the sink's `ON CONFLICT ("id") DO NOTHING` keeps one row per id). Through the
//! local log, also: the log holds `a`'s rows in order with no gap, and the sink has
//! stored no position past a message that is not in `b` (it acknowledges only after
//! COMMIT). At the end, `b` equals `a`.
//!
//! `FERRY_CRASH_ROUNDS` (default 20, here at most 10) and `FERRY_CRASH_SEED` as in
//! the other crash tests.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use ferry::store::local_log::LocalLog;
use ferry_tests::components::{POSTGRES_SINK, POSTGRES_SOURCE};
use ferry_tests::iggy_server::{IggyServer, PASSWORD, USERNAME, live_server};
use ferry_tests::postgres_server::PgServer;
use ferry_tests::records::positions;
use iggy::prelude::{Consumer, ConsumerOffsetClient, Identifier, TopicClient};
use nix::sys::signal::Signal;

use crate::process::{Ferry, PATIENCE, Site, crash_plan};

/// New rows inserted into `a` before each round.
const ROWS_PER_ROUND: i64 = 500;

/// Where the source delivers and the sink reads.
enum Between {
    LocalLog,
    Iggy(IggyServer),
}

/// What a round kills.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Fault {
    Ferry,
    /// PostgreSQL alone, restarted under the running ferry.
    Postgres,
    /// PostgreSQL, then ferry before the server is back.
    Both,
    /// The Iggy server alone, restarted under the running ferry.
    Iggy,
}

#[test]
fn table_b_equals_table_a_through_kill_9_of_ferry_and_of_postgres() {
    run("postgres_end_to_end::table_b_equals_table_a_through_kill_9_of_ferry_and_of_postgres", Between::LocalLog);
}

#[test]
fn through_a_live_iggy_table_b_equals_table_a_through_kill_9_of_ferry_postgres_and_iggy() {
    let test =
        "postgres_end_to_end::through_a_live_iggy_table_b_equals_table_a_through_kill_9_of_ferry_postgres_and_iggy";
    if let Some(iggy) = live_server(test) {
        run(test, Between::Iggy(iggy));
    }
}

fn run(test: &str, mut between: Between) {
    let tokio = tokio::runtime::Runtime::new().unwrap();
    let mut server = PgServer::start();
    tokio.block_on(server.execute(
        "CREATE TABLE a (id int8 PRIMARY KEY, body text NOT NULL, amount float8, at timestamptz, flag bool, \
         doc jsonb, blob bytea)",
    ));
    let site = Site::new();
    let config = site.config("ferry.toml", &config(&site, &server, &between));
    let (rounds, mut rng) = crash_plan(test);
    let faults: &[Fault] = match between {
        Between::LocalLog => &[Fault::Ferry, Fault::Postgres, Fault::Both],
        Between::Iggy(_) => &[Fault::Ferry, Fault::Postgres, Fault::Both, Fault::Iggy],
    };

    let mut ferry: Option<Ferry> = None;
    let mut inserted = 0;
    let mut progress = Vec::new();
    for round in 0..rounds.min(10) {
        tokio.block_on(insert_rows(&server, inserted + 1..=inserted + ROWS_PER_ROUND));
        inserted += ROWS_PER_ROUND;
        // A fresh ferry is killed one time in five while it starts, else in the flow.
        let running = match ferry.take() {
            Some(running) => running,
            None => {
                let mut started = Ferry::start(&config, &[]);
                if rng.u8(0..5) > 0 {
                    started.wait_for_line(&["key=b", "starting"]);
                }
                started
            }
        };
        std::thread::sleep(Duration::from_millis(rng.u64(0..400)));
        let fault = faults[rng.usize(..faults.len())];
        ferry = match fault {
            Fault::Ferry => None,
            Fault::Postgres => {
                server.kill_9();
                std::thread::sleep(Duration::from_millis(rng.u64(0..300)));
                server.restart();
                Some(running)
            }
            Fault::Both => {
                server.kill_9();
                server.restart();
                None
            }
            Fault::Iggy => {
                let Between::Iggy(iggy) = &mut between else { unreachable!() };
                iggy.kill();
                iggy.restart();
                Some(running)
            }
        };
        // (A ferry not kept is dropped here: `kill -9`.)
        tokio.block_on(check(&server, &site, &between, &format!("round {round} ({fault:?})")));
        progress.push((fault, tokio.block_on(rows_in_b(&server))));
    }
    eprintln!("{test}: (fault, rows in b after it) of each round, {ROWS_PER_ROUND} rows added per round: {progress:?}");

    let mut ferry = ferry.unwrap_or_else(|| Ferry::start(&config, &[]));
    let deadline = Instant::now() + PATIENCE;
    while tokio.block_on(rows_in_b(&server)) < inserted {
        if Instant::now() > deadline {
            let topic = match &between {
                Between::Iggy(iggy) => tokio.block_on(iggy_topic(iggy)),
                Between::LocalLog => format!("{} records in the log", ids_in_log(&site).len()),
            };
            panic!("b never caught up with a ({topic}); ferry's log:\n{}", ferry.log());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    ferry.signal(Signal::SIGTERM);
    assert!(ferry.wait().success(), "{}", ferry.log());
    tokio.block_on(check(&server, &site, &between, "the end"));
    let ids_b = tokio.block_on(server.query_i64s("SELECT (payload->>'id')::int8 FROM b ORDER BY 1"));
    assert_eq!(ids_b, (1..=inserted).collect::<Vec<_>>(), "b is a, row for row");
}

/// The config: source `a` reading table `a` into topic `demo/a`, sink `b` reading it
/// into table `b` (created by the sink), both through `[postgres.db]`, in small
/// batches so that a round's rows take a while and kills land mid-flow.
fn config(site: &Site, server: &PgServer, between: &Between) -> String {
    let (transport, create) = match between {
        Between::LocalLog => ("[local_log]\npath = \"log\"\n".to_string(), ""),
        Between::Iggy(iggy) => (
            format!(
                "[iggy]\naddress = \"{}\"\nusername = \"{USERNAME}\"\npassword = \"{PASSWORD}\"\n\
                 reconnect_backoff = {{ initial = \"100ms\", max = \"1s\" }}\n",
                iggy.address()
            ),
            // Acknowledged only once on disk, so that killing the server loses nothing.
            "create = { partitions = 1, enforce_fsync = true, messages_required_to_save = 1 }",
        ),
    };
    format!(
        r#"
[runtime]
shutdown_grace_period = "20s"

[state]
path = "state"

{transport}
{postgres}
[[sources]]
key = "a"
path = "{POSTGRES_SOURCE}"
poll_interval = "2ms"
max_consecutive_nacks = 1000
nack_backoff = {{ initial = "20ms", max = "200ms" }}

[[sources.streams]]
stream = "demo"
topic = "a"
{create}

[sources.grants]
postgres = ["db"]

[sources.plugin_config]
connection = "db"
table = "a"
batch_size = 20

[[sinks]]
key = "b"
path = "{POSTGRES_SINK}"
poll_interval = "2ms"
batch_length = 15
max_consecutive_nacks = 1000
retry_backoff = {{ initial = "20ms", max = "200ms" }}

[[sinks.streams]]
stream = "demo"
topics = ["a"]

[sinks.grants]
postgres = ["db"]

[sinks.plugin_config]
connection = "db"
table = "b"
create_table = true
"#,
        postgres = server.ferry_toml(&site.path("."), "db"),
    )
}

/// Rows `ids` of `a`, every column type the source carries, NULLs among them.
async fn insert_rows(server: &PgServer, ids: std::ops::RangeInclusive<i64>) {
    server
        .execute(&format!(
            "INSERT INTO a SELECT n, 'row ' || n || ' ✓', n * 1.25, \
             timestamptz '2026-01-01 00:00:00+00' + n * interval '1.000001 second', n % 2 = 0, \
             CASE WHEN n % 3 = 0 THEN NULL ELSE jsonb_build_object('n', n, 'tags', jsonb_build_array('x', n)) END, \
             CASE WHEN n % 5 = 0 THEN NULL ELSE decode(md5(n::text), 'hex') END \
             FROM generate_series({}, {}) AS n",
            ids.start(),
            ids.end()
        ))
        .await;
}

/// The rows of `b` (none before the sink created it).
async fn rows_in_b(server: &PgServer) -> i64 {
    if server.query_i64s("SELECT count(*) FROM pg_tables WHERE tablename = 'b'").await != [1] {
        return 0;
    }
    server.query_i64s("SELECT count(*) FROM b").await[0]
}

/// What must hold whenever ferry was just killed (or while it runs: every check
/// holds for a `b` that only grows).
async fn check(server: &PgServer, site: &Site, between: &Between, when: &str) {
    // The sink's position first: whatever it covers must be in `b` when `b` is read.
    let stored = match between {
        Between::LocalLog => sink_position(site),
        Between::Iggy(iggy) => iggy_offset(iggy).await.map_or(0, |offset| offset + 1),
    };
    if rows_in_b(server).await == 0 {
        assert_eq!(stored, 0, "{when}: the sink stored a position with nothing written");
        return;
    }
    let twice = server.query_i64s("SELECT count(*) - count(DISTINCT payload->>'id') FROM b").await;
    assert_eq!(twice, [0], "{when}: a row of a is in b twice");
    let missing = server
        .query_i64s("SELECT count(*) FROM b LEFT JOIN a ON a.id = (b.payload->>'id')::int8 WHERE a.id IS NULL")
        .await;
    assert_eq!(missing, [0], "{when}: b holds rows that are not in a");
    for (column, unlike) in [
        ("body", "b.payload->>'body' IS DISTINCT FROM a.body"),
        ("amount", "(b.payload->>'amount')::float8 IS DISTINCT FROM a.amount"),
        ("at", "(b.payload->>'at')::timestamptz IS DISTINCT FROM a.at"),
        ("flag", "(b.payload->>'flag')::bool IS DISTINCT FROM a.flag"),
        ("doc", "NULLIF(b.payload->'doc', 'null'::jsonb) IS DISTINCT FROM a.doc"),
        ("blob", "decode(b.payload->>'blob', 'base64') IS DISTINCT FROM a.blob"),
        ("the header `table`", "b.headers->'table'->>'string' IS DISTINCT FROM 'a'"),
        ("the header `primary_key`", "(b.headers->'primary_key'->>'int64')::int8 IS DISTINCT FROM a.id"),
    ] {
        let join = format!("FROM b JOIN a ON a.id = (b.payload->>'id')::int8 WHERE {unlike}");
        let count = server.query_i64s(&format!("SELECT count(*) {join}")).await;
        if count != [0] {
            let client = server.client().await;
            let sample = client
                .query_one(
                    &format!("SELECT b.payload::text, b.headers::text, row_to_json(a)::text {join} LIMIT 1"),
                    &[],
                )
                .await
                .unwrap();
            let (payload, headers, row): (String, String, String) = (sample.get(0), sample.get(1), sample.get(2));
            panic!(
                "{when}: {} rows of b differ from a in {column}, e.g. {payload} (headers {headers}) for {row}",
                count[0]
            );
        }
    }
    let logged = match between {
        Between::LocalLog => ids_in_log(site),
        Between::Iggy(iggy) => ids_in_iggy(iggy).await,
    };
    let mut seen = BTreeSet::new();
    let first: Vec<i64> = logged.iter().copied().filter(|id| seen.insert(*id)).collect();
    assert_eq!(first, (1..=first.len() as i64).collect::<Vec<_>>(), "{when}: the topic has a's rows in order");
    let in_b: BTreeSet<i64> = server.query_i64s("SELECT (payload->>'id')::int8 FROM b").await.into_iter().collect();
    let covered: BTreeSet<i64> = logged[..stored as usize].iter().copied().collect();
    assert!(
        covered.is_subset(&in_b),
        "{when}: the sink stored position {stored}, but rows {:?} before it are not in b",
        covered.difference(&in_b).take(10).collect::<Vec<_>>()
    );
}

/// The `id` of each row in the local log, in log order.
fn ids_in_log(site: &Site) -> Vec<i64> {
    let log: PathBuf = site.log_dir();
    if !LocalLog::topic_file(&log, "demo", "a").exists() {
        return Vec::new();
    }
    let records = LocalLog::read_all(&log, "demo", "a").unwrap_or_else(|e| panic!("{e}"));
    records
        .iter()
        .map(|r| serde_json::from_slice::<serde_json::Value>(&r.payload).unwrap()["id"].as_i64().unwrap())
        .collect()
}

/// The sink's stored position in `demo/a` (0 before its first).
fn sink_position(site: &Site) -> u64 {
    match site.states().read("b") {
        Ok(Some(committed)) => positions(&committed.state).get("demo/a").copied().unwrap_or(0),
        Ok(None) => 0,
        Err(e) => panic!("the sink's state is unreadable: {e}"),
    }
}

/// What the Iggy server holds of `demo/a`, and the sink's stored offset there.
async fn iggy_topic(iggy: &IggyServer) -> String {
    let ids = ids_in_iggy(iggy).await;
    format!("Iggy holds {} messages of demo/a; the sink's stored offset: {:?}", ids.len(), iggy_offset(iggy).await)
}

/// The `id` of each row in Iggy's `demo/a`, in offset order (none before the source
/// created the topic).
async fn ids_in_iggy(iggy: &IggyServer) -> Vec<i64> {
    let client = iggy.client().await;
    let (stream, topic) = (Identifier::named("demo").unwrap(), Identifier::named("a").unwrap());
    if !matches!(client.get_topic(&stream, &topic).await, Ok(Some(_))) {
        return Vec::new();
    }
    iggy.read_all("demo", "a")
        .await
        .iter()
        .map(|m| serde_json::from_slice::<serde_json::Value>(&m.payload).unwrap()["id"].as_i64().unwrap())
        .collect()
}

/// The offset the sink (reading alone, as `ferry-b`) stored in `demo/a`.
async fn iggy_offset(iggy: &IggyServer) -> Option<u64> {
    let (consumer, stream, topic) =
        (Identifier::named("ferry-b").unwrap(), Identifier::named("demo").unwrap(), Identifier::named("a").unwrap());
    let offset = iggy.client().await.get_consumer_offset(&Consumer::new(consumer), &stream, &topic, Some(0)).await;
    offset.ok().flatten().map(|info| info.stored_offset)
}
