//! The configs in `examples/` are documentation people copy: each must load as it
//! stands, and name components the workspace builds; the PostgreSQL walk-through of
//! the README works as written; and the connector examples run against their real
//! servers (ClickHouse, InfluxDB, HTTP endpoints), only the address changed.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use ferry::config::Config;
use nix::sys::signal::Signal;

use crate::process::{Ferry, PATIENCE, Site};
use ferry::store::local_log::LocalLog;

fn examples() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "toml"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_example_config_loads_and_names_built_components() {
    let files = examples();
    assert!(files.len() >= 3, "quickstart, iggy and sandbox at least: {files:?}");
    for file in files {
        let config = Config::load(&file).unwrap_or_else(|e| panic!("{e}"));
        assert!(config.connectors().next().is_some(), "{}: no connector", file.display());
        for connector in config.connectors() {
            assert!(
                connector.path().exists(),
                "{}: `{}` names {}, which is not built",
                file.display(),
                connector.key(),
                connector.path().display()
            );
        }
    }
}

/// The README's PostgreSQL walk-through, command for command: `scripts/postgres-demo
/// start`, `ferry run examples/postgres.toml`, rows inserted into `orders` with the
/// script's psql, read back from `orders_copy`. Only where things live differs: the
/// server's directory and port (the script's variables) and ferry's state and log
/// (overrides), so that the test touches nothing in the repository and runs beside
/// others.
#[test]
fn the_postgres_walk_through_copies_rows_inserted_into_orders_into_orders_copy() {
    let site = Site::new();
    // The server runs as another user when the tests run as root: let it in.
    std::fs::set_permissions(site.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let server = DemoServer { dir: site.path("pg"), port: ferry_tests::free_port().to_string() };
    server.run(&["start"]);
    let example = examples().into_iter().find(|f| f.ends_with("postgres.toml")).expect("examples/postgres.toml");
    let password = server.dir.join("password");
    let (state, log) = (site.path("state"), site.path("log"));
    let mut ferry = Ferry::start(
        &example,
        &[
            ("FERRY__POSTGRES__DEMO__PORT", &server.port),
            ("FERRY__POSTGRES__DEMO__PASSWORD__FILE", password.to_str().unwrap()),
            ("FERRY__STATE__PATH", state.to_str().unwrap()),
            ("FERRY__LOCAL_LOG__PATH", log.to_str().unwrap()),
        ],
    );
    ferry.wait_for_line(&["key=orders", "idle"]);
    for (customer, cents) in [("ada", 1250), ("grace", 990), ("edsger", 4200)] {
        let insert = format!("INSERT INTO orders (customer, total_cents) VALUES ('{customer}', {cents})");
        server.run(&["psql", "-c", &insert]);
    }
    let copied = "SELECT string_agg(payload->>'customer' || ':' || (payload->>'total_cents'), ' ' ORDER BY payload->>'id') \
                  FROM orders_copy";
    let deadline = Instant::now() + PATIENCE;
    while server.run(&["psql", "-Atc", copied]).trim() != "ada:1250 grace:990 edsger:4200" {
        assert!(Instant::now() < deadline, "the rows never reached orders_copy; ferry's log:\n{}", ferry.log());
        std::thread::sleep(Duration::from_millis(100));
    }
    ferry.signal(Signal::SIGTERM);
    assert!(ferry.wait().success(), "{}", ferry.log());
    assert!(!ferry.log().contains(&std::fs::read_to_string(&password).unwrap()), "the password was logged");
}

/// `scripts/postgres-demo` on a directory and port of the test's own, stopped on drop.
struct DemoServer {
    dir: PathBuf,
    port: String,
}

impl DemoServer {
    /// `scripts/postgres-demo ARGS`, which must succeed; its standard output.
    fn run(&self, args: &[&str]) -> String {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/postgres-demo");
        let output = Command::new(script)
            .args(args)
            .env("FERRY_DEMO_PG_DIR", &self.dir)
            .env("FERRY_DEMO_PG_PORT", &self.port)
            .output()
            .expect("scripts/postgres-demo runs");
        let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        assert!(output.status.success(), "postgres-demo {args:?} failed:\n{stdout}{stderr}");
        stdout.into_owned()
    }
}

impl Drop for DemoServer {
    fn drop(&mut self) {
        if self.dir.join("data/postmaster.pid").exists() {
            self.run(&["stop"]);
        }
    }
}

/// `examples/NAME` as it stands but for `replace` (a server's address, a user), its
/// components found where the workspace builds them and its `data/` in the site:
/// written into the site, and ferry started on it with `env`.
fn run_example(site: &Site, name: &str, replace: &[(&str, &str)], env: &[(&str, &str)]) -> Ferry {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let mut text = std::fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("examples/{name}: {e}"));
    let components = Path::new(ferry_tests::components::RANDOM_SOURCE).parent().unwrap().display().to_string();
    for (from, to) in [("../target/components", components.as_str())].iter().chain(replace) {
        assert!(text.contains(from), "examples/{name} has no {from:?} to replace");
        text = text.replace(from, to);
    }
    let config = site.config(name, &text);
    Ferry::start(&config, env)
}

#[test]
fn the_clickhouse_example_runs_against_a_real_server() {
    let server = ferry_tests::clickhouse_server::ChServer::start();
    // The table its comment says to create.
    server.query(
        "CREATE TABLE events (ferry_id String, seq UInt64, text String) ENGINE = ReplacingMergeTree() ORDER BY ferry_id",
    );
    let site = Site::new();
    let address = server.address();
    let replace = [("127.0.0.1:8123", address.as_str()), ("username = \"default\"", "username = \"ferry\"")];
    let password = ferry_tests::clickhouse_server::PASSWORD;
    let mut ferry = run_example(&site, "clickhouse.toml", &replace, &[("FERRY_CLICKHOUSE_PASSWORD", password)]);
    let rows = || server.try_query("SELECT count() FROM events FINAL").map(|n| n.trim() == "10000").unwrap_or(false);
    ferry.until("10000 rows", rows);
    ferry.signal(Signal::SIGTERM);
    assert!(ferry.wait().success(), "{}", ferry.log());
    assert!(!ferry.log().contains(password), "the password was logged");
}

/// How many records the local log of `site` (the examples' `data/log`) holds in
/// `stream/topic`; 0 before the topic exists.
fn logged(site: &Site, stream: &str, topic: &str) -> usize {
    LocalLog::read_all(&site.path("data/log"), stream, topic).map(|r| r.len()).unwrap_or(0)
}

#[test]
fn the_redis_example_runs_against_a_real_server() {
    let server = ferry_tests::redis_server::RedisServer::start();
    let site = Site::new();
    let port = format!("port = {}", server.port());
    let mut ferry = run_example(&site, "redis.toml", &[("port = 6379", port.as_str())], &[]);
    // Into the stream demo:random and back, once each.
    ferry.until("100 entries read back", || logged(&site, "demo", "from-redis") == 100);
    ferry.signal(Signal::SIGTERM);
    assert!(ferry.wait().success(), "{}", ferry.log());
    assert_eq!(logged(&site, "demo", "from-redis"), 100, "nothing twice");
}

#[test]
fn the_nats_example_runs_against_a_real_server() {
    let server = ferry_tests::nats_server::NatsServer::start();
    // The stream its comment says to make.
    tokio::runtime::Runtime::new().unwrap().block_on(server.create_stream("DEMO", &["demo.*"]));
    let site = Site::new();
    let port = format!("port = {}", server.port());
    let mut ferry = run_example(&site, "nats.toml", &[("port = 4222", port.as_str())], &[]);
    ferry.until("100 messages read back", || logged(&site, "demo", "from-nats") == 100);
    ferry.signal(Signal::SIGTERM);
    assert!(ferry.wait().success(), "{}", ferry.log());
    assert_eq!(logged(&site, "demo", "from-nats"), 100, "nothing twice");
}

#[test]
fn the_mqtt_example_runs_against_a_real_broker() {
    let server = ferry_tests::mqtt_server::MqttServer::start();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let received = runtime.block_on(crate::mqtt_sink::subscriber(&server, "demo/random"));
    let site = Site::new();
    let port = format!("port = {}", server.port());
    let mut ferry = run_example(&site, "mqtt.toml", &[("port = 1883", port.as_str())], &[]);
    ferry.until("100 messages published", || received.lock().unwrap().len() >= 100);
    ferry.signal(Signal::SIGTERM);
    assert!(ferry.wait().success(), "{}", ferry.log());
    let mut seqs = received.lock().unwrap().clone();
    seqs.sort_unstable();
    seqs.dedup();
    assert_eq!(seqs.len(), 100, "every message");
}

#[test]
fn the_mysql_example_runs_against_a_real_server() {
    use ferry_tests::mariadb_server::{DATABASE, MariaDbServer, PASSWORD};
    let server = MariaDbServer::start();
    // The table its comment says to make.
    server.sql(
        "CREATE TABLE orders (id BIGINT PRIMARY KEY, item TEXT, shipped BOOL NOT NULL DEFAULT FALSE); \
         INSERT INTO orders (id, item) VALUES (1, 'tea'), (2, 'cups')",
    );
    let site = Site::new();
    let port = format!("port = {}", server.port());
    let database = format!("database = \"{DATABASE}\"");
    let replace = [("port = 3306", port.as_str()), ("database = \"shop\"", database.as_str())];
    let mut ferry = run_example(&site, "mysql.toml", &replace, &[("MYSQL_PASSWORD", PASSWORD)]);
    let count = |sql: &str| server.try_sql(sql).map(|n| n.trim().to_string()).unwrap_or_default();
    ferry.until("100 rows in events", || count("SELECT COUNT(*) FROM events") == "100");
    ferry.until("both orders read and marked", || {
        logged(&site, "demo", "orders") == 2 && count("SELECT COUNT(*) FROM orders WHERE shipped") == "2"
    });
    ferry.signal(Signal::SIGTERM);
    assert!(ferry.wait().success(), "{}", ferry.log());
    assert!(!ferry.log().contains(PASSWORD), "the password was logged");
}

#[test]
fn the_kafka_example_runs_against_a_real_broker() {
    let broker = ferry_tests::kafka_broker::KafkaBroker::start();
    // The topic its comment says to make.
    tokio::runtime::Runtime::new().unwrap().block_on(broker.create_topic("demo.random", 3));
    let site = Site::new();
    let address = broker.address();
    let mut ferry = run_example(&site, "kafka.toml", &[("127.0.0.1:9092", address.as_str())], &[]);
    ferry.until("100 messages in the topic", || broker.read_all("demo.random").len() == 100);
    // And the source reads them back, once each.
    let read_back = || logged(&site, "demo", "from-kafka");
    ferry.until("100 messages read back", || read_back() == 100);
    let committed = || broker.committed("ferry-demo", "demo.random", 3).iter().flatten().sum::<i64>();
    ferry.until("the group's offsets committed to the end", || committed() == 100);
    ferry.signal(Signal::SIGTERM);
    assert!(ferry.wait().success(), "{}", ferry.log());
    assert_eq!(read_back(), 100, "nothing twice");
}

#[test]
fn the_influxdb_example_runs_against_a_real_server() {
    let server = ferry_tests::influxdb_server::InfluxServer::start();
    server.create_database("metrics");
    let site = Site::new();
    let address = server.address();
    let mut ferry = run_example(&site, "influxdb.toml", &[("127.0.0.1:8086", address.as_str())], &[]);
    let points =
        || server.select("metrics", "SELECT count(seq) FROM random").first().and_then(|row| row["count"].as_u64());
    ferry.until("100 points", || points() == Some(100));
    // And the source reads them back.
    let read_back = || LocalLog::read_all(&site.path("data/log"), "demo", "from-influx").map(|r| r.len()).unwrap_or(0);
    ferry.until("100 points read back", || read_back() == 100);
    ferry.signal(Signal::SIGTERM);
    assert!(ferry.wait().success(), "{}", ferry.log());
}

#[test]
fn the_http_examples_run_against_real_endpoints() {
    let source_endpoint = crate::http_source::Endpoint::start(250, 0);
    let site = Site::new();
    let mut ferry = run_example(&site, "http-source.toml", &[("127.0.0.1:8080", &source_endpoint.address)], &[]);
    let ids = || {
        LocalLog::read_all(&site.path("data/log"), "demo", "records")
            .unwrap_or_default()
            .iter()
            .map(|r| serde_json::from_slice::<serde_json::Value>(&r.payload).unwrap()["id"].as_u64().unwrap())
            .collect::<Vec<_>>()
    };
    ferry.until("250 records", || ids().len() == 250);
    ferry.signal(Signal::SIGTERM);
    assert!(ferry.wait().success(), "{}", ferry.log());
    assert_eq!(ids(), (0..250).collect::<Vec<_>>());

    let sink_endpoint = crate::http_sink::Endpoint::start(0, false);
    let site = Site::new();
    let token = "Bearer example-token-never-logged";
    let env = [("WEBHOOK_AUTHORIZATION", token)];
    let mut ferry = run_example(&site, "http.toml", &[("127.0.0.1:8080", &sink_endpoint.address)], &env);
    ferry.until("100 messages at the endpoint", || sink_endpoint.seqs().len() == 100);
    ferry.signal(Signal::SIGTERM);
    assert!(ferry.wait().success(), "{}", ferry.log());
    assert_eq!(sink_endpoint.seqs().keys().copied().collect::<Vec<_>>(), (0..100).collect::<Vec<_>>());
    // The secret reached the endpoint as the header its name says, and no log line.
    assert_eq!(sink_endpoint.received.lock().unwrap().authorization.as_deref(), Some(token));
    assert!(!ferry.log().contains("example-token-never-logged"), "{}", ferry.log());
}
