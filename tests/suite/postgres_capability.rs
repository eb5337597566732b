//! The host's PostgreSQL import, against a real server of the test's own: a granted
//! connection queries, executes and runs transactions, every carried type going
//! both ways (`numeric` as its exact decimal text); a refused statement is a value
//! naming its SQLSTATE and, in a transaction, its index, with everything rolled
//! back; a name not granted is refused and logged, and a name the config defines
//! but grants another connector (or no one) is refused without a connection attempt
//! to its server; a statement past the call's deadline is cancelled on the server
//! and comes back as `timed-out`, and the next one works; a result past
//! `limits.max_batch_bytes` (10 M rows, one value of 300 MiB) is refused naming the
//! limit, with no copy of the huge row, and the next query works; a wrong password
//! is a connection error, and no password ever reaches the log; a guest that opens
//! connections without end is stopped at the instance's handle limit with an error
//! value, and goes on working once it drops them.
//!
//! The guest is `pg-probe`: each poll runs one step and delivers its outcome as a
//! JSON message, which the test reads back from the local log.

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::time::{Duration, Instant};

use ferry::capabilities::postgres::PgPools;
use ferry::config::Config;
use ferry::engine::source::SourceConnector;
use ferry::engine::status::Event;
use ferry::host::Host;
use ferry::runtime::Compiler;
use ferry::store::local_log::LocalLog;
use ferry_tests::components::PG_PROBE;
use ferry_tests::harness::{Harness, Running};
use ferry_tests::logs::capture;
use ferry_tests::postgres_server::{PASSWORD, PgServer};
use serde_json::{Value as Json, json};

use crate::process::Site;

/// A `pg-probe` source `key` opening `connection`, granted `grants`, running `steps`.
fn probe(h: &Harness, server: &PgServer, key: &str, connection: &str, grants: &[&str], steps: Json) -> SourceConnector {
    probe_with(h, server, key, connection, grants, steps, PASSWORD)
}

fn probe_with(
    h: &Harness,
    server: &PgServer,
    key: &str,
    connection: &str,
    grants: &[&str],
    steps: Json,
    password: &str,
) -> SourceConnector {
    let mut source = h.source(key, PG_PROBE, json!({ "connection": connection, "steps": steps }));
    source.sandbox.grants.postgres = grants.iter().map(|g| g.to_string()).collect();
    let servers = BTreeMap::from([("db".to_string(), server.ferry_server(h.dir.path(), "db", password))]);
    source.sandbox.shared.postgres = PgPools::granted(&source.sandbox.grants.postgres, &servers).unwrap();
    source
}

/// Run `source` until it idles (every step done); the outcome of each step.
async fn outcomes(h: &Harness, source: SourceConnector) -> Vec<Json> {
    let key = source.key.to_string();
    let mut running = h.start(vec![source]);
    running.wait_for("every step", |e| matches!(e, Event::Idle { key: k } if **k == *key)).await;
    running.stop().await;
    h.records(&key).iter().map(|r| serde_json::from_slice(&r.payload).unwrap()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_granted_connection_round_trips_every_carried_type() {
    let server = PgServer::start();
    server
        .execute(
            "CREATE TABLE kinds (id int8 PRIMARY KEY, flag bool, small int2, ratio float8, label text, blob bytea, \
             doc jsonb, plain json, at timestamptz, local timestamp, nothing text)",
        )
        .await;
    let h = Harness::new();
    let row = json!([
        { "int": 1 }, { "boolean": true }, { "int": -7 }, { "float": 2.5 }, { "text": "zoë \"quoted\"" },
        { "bytes": [0, 255, 10] }, { "json": "{\"a\": [1, 2]}" }, { "json": "[true]" },
        { "timestamp": 1_700_000_000_123_456i64 }, { "timestamp": -1_000_000 }, { "null": null }
    ]);
    let steps = json!([
        { "execute": { "sql": "INSERT INTO kinds VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)", "params": row } },
        { "query": { "sql": "SELECT * FROM kinds WHERE id = $1", "params": [{ "int": 1 }] } },
        { "query_packed": { "sql": "SELECT * FROM kinds WHERE id = $1", "params": [{ "int": 1 }] } },
        { "transaction": [
            { "sql": "INSERT INTO kinds (id) VALUES ($1)", "params": [{ "int": 2 }] },
            { "sql": "UPDATE kinds SET label = $1", "params": [{ "text": "both" }] }
        ] },
        { "query": { "sql": "SELECT id, label FROM kinds ORDER BY id" } },
        { "query_packed": { "sql": "SELECT id, label FROM kinds ORDER BY id" } },
        { "query_packed": { "sql": "SELECT id FROM kinds WHERE id < 0" } },
    ]);
    let outcomes = outcomes(&h, probe(&h, &server, "kinds", "db", &["db"], steps)).await;
    assert_eq!(outcomes[0], json!({ "step": 0, "ok": 1 }), "one row inserted");
    // jsonb comes back normalised by the server; everything else exactly as sent.
    let mut expected = row.clone();
    expected[6] = json!({ "json": "{\"a\": [1, 2]}" });
    assert_eq!(outcomes[1], json!({ "step": 1, "ok": [expected] }), "{}", outcomes[1]);
    // The packed form: the same values, read in place by the guest, with the columns.
    let columns = ["id", "flag", "small", "ratio", "label", "blob", "doc", "plain", "at", "local", "nothing"];
    assert_eq!(outcomes[2], json!({ "step": 2, "ok": { "columns": columns, "rows": [expected] } }), "{}", outcomes[2]);
    assert_eq!(outcomes[3], json!({ "step": 3, "ok": [1, 2] }), "rows affected per statement");
    assert_eq!(
        outcomes[4],
        json!({ "step": 4, "ok": [[{ "int": 1 }, { "text": "both" }], [{ "int": 2 }, { "text": "both" }]] })
    );
    assert_eq!(outcomes[5]["ok"]["rows"], outcomes[4]["ok"], "{}", outcomes[5]);
    assert_eq!(outcomes[6], json!({ "step": 6, "ok": { "columns": ["id"], "rows": [] } }), "no rows");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn numeric_crosses_exactly_as_decimal_text_both_ways() {
    let server = PgServer::start();
    server.execute("CREATE TABLE amounts (id int8 PRIMARY KEY, amount numeric, price numeric(6, 2))").await;
    let h = Harness::new();
    let exact = "123456789012345678901234567890.000000001";
    let tiny = format!("0.{}1", "0".repeat(200));
    let insert = "INSERT INTO amounts VALUES ($1, $2, $3)";
    let steps = json!([
        { "execute": { "sql": insert, "params": [{ "int": 1 }, { "text": exact }, { "text": "-0.5" }] } },
        { "execute": { "sql": insert, "params": [{ "int": 2 }, { "text": "NaN" }, { "int": 7 }] } },
        { "execute": { "sql": insert, "params": [{ "int": 3 }, { "text": tiny }, { "null": null }] } },
        { "query": { "sql": "SELECT amount, price FROM amounts ORDER BY id" } },
        { "query_packed": { "sql": "SELECT amount, price FROM amounts ORDER BY id" } },
        // Compared by the server with what was sent: equal to the last digit.
        { "query": { "sql": "SELECT id FROM amounts WHERE amount = $1", "params": [{ "text": exact }] } },
        { "execute": { "sql": insert, "params": [{ "int": 4 }, { "text": "twelve" }, { "null": null }] } },
        { "execute": { "sql": insert, "params": [{ "int": 4 }, { "float": 0.1 }, { "null": null }] } },
    ]);
    let outcomes = outcomes(&h, probe(&h, &server, "numeric", "db", &["db"], steps)).await;
    assert_eq!(
        outcomes[..3],
        [json!({ "step": 0, "ok": 1 }), json!({ "step": 1, "ok": 1 }), json!({ "step": 2, "ok": 1 })]
    );
    // As PostgreSQL prints them, to their scale: `numeric(6, 2)` shows two places.
    let expected = json!([
        [{ "text": exact }, { "text": "-0.50" }],
        [{ "text": "NaN" }, { "text": "7.00" }],
        [{ "text": tiny }, { "null": null }],
    ]);
    assert_eq!(outcomes[3], json!({ "step": 3, "ok": expected }), "{}", outcomes[3]);
    assert_eq!(outcomes[4]["ok"]["rows"], expected, "{}", outcomes[4]);
    assert_eq!(outcomes[5]["ok"], json!([[{ "int": 1 }]]), "{}", outcomes[5]);
    // Not a number: the server's own refusal, naming the value.
    let error = &outcomes[6]["error"];
    assert_eq!((&error["code"], &error["permanent"]), (&json!("22P02"), &json!(true)), "{error}");
    assert!(error["message"].as_str().unwrap().contains("\"twelve\""), "{error}");
    // A float has lost digits already: refused, saying how to send it.
    let error = outcomes[7]["error"]["message"].as_str().unwrap();
    assert!(
        error.contains("a float value (cast the parameter in the statement") && error.contains("numeric"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_statement_is_a_value_and_a_transaction_rolls_back_whole() {
    let server = PgServer::start();
    server.execute("CREATE TABLE t (id int8 PRIMARY KEY, n int4)").await;
    let h = Harness::new();
    let steps = json!([
        // Sent pipelined: the statement after the refused one is refused too (the
        // transaction is aborted), and the error names the one at fault.
        { "transaction": [
            { "sql": "INSERT INTO t VALUES ($1, 0)", "params": [{ "int": 10 }] },
            { "sql": "INSERT INTO t VALUES ($1, 0)", "params": [{ "int": 10 }] },
            { "sql": "INSERT INTO t VALUES ($1, 0)", "params": [{ "int": 11 }] }
        ] },
        { "execute": { "sql": "INSERT INTO t VALUES ($1, $2)", "params": [{ "int": 1 }, { "int": 1_i64 << 40 }] } },
        { "execute": { "sql": "INSERT INTO t VALUES ($1, $2)", "params": [{ "int": 1 }, { "text": "x" }] } },
        { "query": { "sql": "SELECT nope FROM t" } },
        { "query": { "sql": "SELECT current_date AS today" } },
        { "execute": { "sql": "INSERT INTO t VALUES ($1, 1)", "params": [{ "int": 3 }] } },
    ]);
    let outcomes = outcomes(&h, probe(&h, &server, "refusals", "db", &["db"], steps)).await;
    let error = |step: usize| outcomes[step]["error"].clone();
    assert_eq!(
        (&error(0)["kind"], &error(0)["code"], &error(0)["permanent"], &error(0)["statement"]),
        (&json!("refused"), &json!("23505"), &json!(true), &json!(1)),
        "{}",
        outcomes[0]
    );
    assert!(error(1)["message"].as_str().unwrap().contains("an int out of range for a parameter of type int4"));
    assert!(error(2)["message"].as_str().unwrap().contains("a text value (cast the parameter in the statement"));
    assert_eq!((&error(3)["code"], &error(3)["permanent"]), (&json!("42703"), &json!(true)), "{}", outcomes[3]);
    let uncarried = error(4)["message"].as_str().unwrap().to_string();
    assert!(
        uncarried.contains("column `today` is of type date") && uncarried.contains("cast it in the query"),
        "{uncarried}"
    );
    assert_eq!(outcomes[5], json!({ "step": 5, "ok": 1 }), "the connection still works after each refusal");
    assert_eq!(server.query_i64s("SELECT id FROM t ORDER BY id").await, [3], "the transaction left nothing");
    let warnings: Vec<String> = capture().of("refusals").into_iter().map(|l| l.message).collect();
    assert!(
        warnings.iter().any(|w| w.contains("postgres `db`: transaction failed: statement 1 refused (23505)")),
        "{warnings:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_not_granted_is_refused_and_logged() {
    let server = PgServer::start();
    let h = Harness::new();
    let steps = json!([{ "query": { "sql": "SELECT 1::int8" } }]);
    // Granted `db`, asking for `other`; and granted nothing at all.
    let outcomes_other = outcomes(&h, probe(&h, &server, "asks-other", "other", &["db"], steps.clone())).await;
    let outcomes_none = outcomes(&h, probe(&h, &server, "ungranted", "db", &[], steps)).await;
    for (key, outcomes, name) in [("asks-other", outcomes_other, "other"), ("ungranted", outcomes_none, "db")] {
        let error = &outcomes[0]["error"];
        assert_eq!(error["kind"], "not-granted", "{key}: {}", outcomes[0]);
        let expected = format!("the connection `{name}` is not in this connector's grants.postgres");
        assert_eq!(error["message"], expected.as_str());
        let logged = capture().of(key).into_iter().map(|l| l.message).collect::<Vec<_>>();
        assert!(logged.iter().any(|l| l.contains(&expected)), "{key}: {logged:?}");
    }
}

/// A `[postgres.NAME]` table pointing at `listener`, a server that is not PostgreSQL
/// and must never be reached.
fn listener_toml(name: &str, listener: &TcpListener) -> String {
    let port = listener.local_addr().unwrap().port();
    format!("\n[postgres.{name}]\nhost = \"127.0.0.1\"\nport = {port}\ndatabase = \"d\"\nuser = \"u\"\n")
}

/// A `pg-probe` source `key` in a ferry config, granted `grants`, opening `connection`
/// for its `steps` (a TOML array).
fn probe_toml(key: &str, grants: &[&str], connection: &str, steps: &str) -> String {
    format!(
        "\n[[sources]]\nkey = \"{key}\"\npath = \"{PG_PROBE}\"\n\n[[sources.streams]]\nstream = \"demo\"\ntopic = \"{key}\"\n\n\
         [sources.grants]\npostgres = {}\n\n[sources.plugin_config]\nconnection = \"{connection}\"\nsteps = {steps}\n",
        json!(grants),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_defined_name_not_granted_is_refused_without_a_connection_attempt() {
    let logs = capture();
    // Two servers that are listening sockets of the test's own: the kernel completes a
    // connection to either without anyone accepting, so a pending one shows any attempt.
    let ours = TcpListener::bind("127.0.0.1:0").unwrap();
    let other = TcpListener::bind("127.0.0.1:0").unwrap();
    let steps = r#"[{ query = { sql = "SELECT 1::int8" } }]"#;
    // `asker` is granted `db` only; alone, and beside `owner`, a connector of the same
    // ferry granted `other` that never opens it.
    let owner = probe_toml("owner", &["other"], "other", "[]");
    for (asker, with_owner) in [("asker-alone", false), ("asker-beside-owner", true)] {
        let mut connectors = probe_toml(asker, &["db"], "other", steps);
        if with_owner {
            connectors.push_str(&owner);
        }
        let site = Site::new();
        let text = [
            "[state]\npath = \"state\"\n\n[local_log]\npath = \"log\"\n".to_string(),
            listener_toml("db", &ours),
            listener_toml("other", &other),
            connectors,
        ]
        .concat();
        let config = Config::load(&site.config("ferry.toml", &text)).unwrap_or_else(|e| panic!("{asker}: {e}"));
        let mut running = Running::start(Host::from_config(&config, Compiler::InProcess).unwrap());
        running.wait_for("the asker's step", |e| matches!(e, Event::Idle { key } if &**key == asker)).await;
        running.stop().await;
        let records = LocalLog::read_all(&site.log_dir(), "demo", asker).unwrap();
        let outcome: Json = serde_json::from_slice(&records[0].payload).unwrap();
        let expected = "the connection `other` is not in this connector's grants.postgres";
        assert_eq!(outcome["error"], json!({ "kind": "not-granted", "message": expected }), "{asker}: {outcome}");
        let logged = logs.of(asker).into_iter().map(|l| l.message).collect::<Vec<_>>();
        assert!(logged.iter().any(|l| l.contains(expected)), "{asker}: {logged:?}");
        // The batch has settled: nothing knocked at either server.
        for (name, listener) in [("db", &ours), ("other", &other)] {
            listener.set_nonblocking(true).unwrap();
            let knocked = listener.accept().map(|(_, from)| from);
            assert_eq!(
                knocked.map_err(|e| e.kind()),
                Err(std::io::ErrorKind::WouldBlock),
                "{asker}: a connection reached `{name}`"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statement_past_the_call_deadline_is_cancelled_and_the_next_one_works() {
    let server = PgServer::start();
    let h = Harness::new();
    let steps = json!([
        { "query": { "sql": "SELECT pg_sleep(30)::text" } },
        { "query": { "sql": "SELECT 41 + 1" } },
    ]);
    let mut source = probe(&h, &server, "slow", "db", &["db"], steps);
    source.sandbox.limits.call_timeout = Duration::from_millis(700);
    let started = Instant::now();
    let outcomes = outcomes(&h, source).await;
    assert!(started.elapsed() < Duration::from_secs(20), "not waited out: {:?}", started.elapsed());
    let error = &outcomes[0]["error"];
    assert_eq!(error["kind"], "timed-out", "a value, not a trap: {}", outcomes[0]);
    assert!(error["message"].as_str().unwrap().contains("ran past the call's deadline"), "{error}");
    assert_eq!(outcomes[1], json!({ "step": 1, "ok": [[{ "int": 42 }]] }), "a fresh connection serves the next");
    // The server was told to cancel it: no pg_sleep left running.
    let deadline = Instant::now() + Duration::from_secs(10);
    let sleeping = "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query LIKE 'SELECT pg_sleep%'";
    while server.query_i64s(sleeping).await != [0] {
        assert!(Instant::now() < deadline, "the timed-out statement is still running on the server");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let instances: Vec<_> = capture().of("slow").into_iter().filter(|l| l.message.starts_with("starting")).collect();
    assert_eq!(instances.len(), 1, "no trap, no restart: {instances:?}");
}

/// The most this process has held in memory so far (VmHWM), in bytes.
fn high_water_mark() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).expect("VmHWM in /proc/self/status");
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_past_the_batch_limit_is_refused_naming_it_and_the_next_query_works() {
    const VALUE: u64 = 300 * 1024 * 1024;
    let server = PgServer::start();
    let h = Harness::new();
    let steps = json!([
        { "query": { "sql": "SELECT n::int8 FROM generate_series(1, 10000000) AS n" } },
        { "query_packed": { "sql": format!("SELECT repeat('x', {VALUE}) AS big") } },
        { "query": { "sql": "SELECT 41 + 1" } },
    ]);
    let mut source = probe(&h, &server, "huge", "db", &["db"], steps);
    // Time is bounded by the call's deadline; here it is long enough for a loaded machine.
    source.sandbox.limits.call_timeout = Duration::from_secs(60);
    let limit = source.sandbox.limits.max_batch_bytes.bytes();
    let before = high_water_mark();
    let outcomes = outcomes(&h, source).await;
    let grown = high_water_mark().saturating_sub(before);
    for (step, what) in [(0, "10 M rows"), (1, "a value of 300 MiB")] {
        let error = &outcomes[step]["error"];
        assert_eq!((&error["kind"], &error["code"]), (&json!("refused"), &json!("54000")), "{what}: {error}");
        let message = error["message"].as_str().unwrap();
        assert!(message.contains(&format!("over {limit} bytes (limits.max_batch_bytes)")), "{what}: {message}");
    }
    assert_eq!(outcomes[2], json!({ "step": 2, "ok": [[{ "int": 42 }]] }), "the next query works");
    // The driver holds the one huge row whole (PostgreSQL caps a value at 1 GB); the
    // host makes no copy of it (with one, the mark grew by 604 MiB; without, by 319),
    // nor keeps the 10 M rows. The margin allows for tests running beside this one.
    eprintln!("high-water mark grew by {} MiB", grown >> 20);
    assert!(grown < VALUE * 3 / 2, "the host held {} MiB for a value of {} MiB", grown >> 20, VALUE >> 20);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_password_is_a_connection_error_and_no_password_is_logged() {
    let server = PgServer::start();
    let h = Harness::new();
    let steps = json!([{ "query": { "sql": "SELECT 1::int8" } }]);
    let wrong = "not-the-password-7f3a";
    let outcomes = outcomes(&h, probe_with(&h, &server, "wrong-pw", "db", &["db"], steps.clone(), wrong)).await;
    let error = &outcomes[0]["error"];
    assert_eq!(error["kind"], "connection", "{}", outcomes[0]);
    assert!(error["message"].as_str().unwrap().contains("password authentication failed"), "{error}");
    let right = outcomes_of_right(&h, &server, steps).await;
    assert_eq!(right[0], json!({ "step": 0, "ok": [[{ "int": 1 }]] }));
    for line in capture().all() {
        assert!(!line.message.contains(wrong) && !line.message.contains(PASSWORD), "a password in the log: {line:?}");
    }
}

async fn outcomes_of_right(h: &Harness, server: &PgServer, steps: Json) -> Vec<Json> {
    outcomes(h, probe(h, server, "right-pw", "db", &["db"], steps)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_sending_ever_new_statements_does_not_grow_the_prepared_cache_without_end() {
    let server = PgServer::start();
    let h = Harness::new();
    let mut steps: Vec<Json> = (0..300).map(|i| json!({ "query": { "sql": format!("SELECT {i}::int8") } })).collect();
    steps.push(json!({ "query": { "sql": "SELECT count(*)::int8 FROM pg_prepared_statements" } }));
    let outcomes = outcomes(&h, probe(&h, &server, "many", "db", &["db"], json!(steps))).await;
    assert_eq!(outcomes[299], json!({ "step": 299, "ok": [[{ "int": 299 }]] }));
    let prepared = outcomes[300]["ok"][0][0]["int"].as_i64().expect("a count");
    assert!(prepared <= 257, "prepared statements kept on the connection: {prepared}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_hoarding_connections_is_stopped_at_the_handle_limit_and_goes_on() {
    let server = PgServer::start();
    let h = Harness::new();
    let over = ferry::runtime::MAX_HANDLES * 2;
    let steps = json!([
        { "open_many": { "count": over } },
        { "query": { "sql": "SELECT 1::int8" } },
    ]);
    let logs = capture();
    let outcomes = outcomes(&h, probe(&h, &server, "hoard", "db", &["db"], steps)).await;
    let hoard = &outcomes[0]["ok"];
    let opened = hoard["opened"].as_u64().unwrap() as usize;
    // The adapter's own handles (stdio, ...) share the table: a few fewer than the limit.
    assert!(
        opened < ferry::runtime::MAX_HANDLES && opened > ferry::runtime::MAX_HANDLES - 100,
        "opened {opened} of {over}: {outcomes:?}"
    );
    assert_eq!(hoard["error"]["kind"], "connection", "{hoard}");
    let message = hoard["error"]["message"].as_str().unwrap();
    assert!(message.contains(&format!("{} handles", ferry::runtime::MAX_HANDLES)), "{message}");
    let warnings: Vec<String> = logs.of("hoard").into_iter().map(|l| l.message).collect();
    assert!(warnings.iter().any(|w| w.contains("drop the connections it no longer uses")), "{warnings:?}");
    // The handles dropped, the same instance queries again.
    assert_eq!(outcomes[1], json!({ "step": 1, "ok": [[{ "int": 1 }]] }));
}
