//! Iggy's connectors runtime files, run unchanged by `ferry run` against a live Iggy
//! server: the runtime's `config.toml` and a `config_dir` with two versions of a
//! random source (the higher one active) and a sink in Iggy's format, whose native
//! `path`s name components of the same connectors. Every record the active source
//! produced reaches Iggy and the sink, once; and `ferry config from-iggy` prints a
//! Ferry config that means the same. Then the same connectors served by a config
//! server (Iggy's HTTP provider), asked again at a reload. Iggy's HTTP and ClickHouse
//! sink files run unchanged, and its InfluxDB sink file with the two changes a 1.x
//! server needs. Iggy's PostgreSQL source and sink files carry a table's rows through
//! Iggy into the table Iggy's sink writes, their connection strings given by Iggy's
//! environment overrides.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use nix::sys::signal::Signal;

use crate::iggy_sinks::{seqs_once, until, written};
use serde_json::json;

use crate::process::{Ferry, Site, ferry};
use ferry_tests::clickhouse_server::ChServer;
use ferry_tests::components::{CLICKHOUSE_SINK, FILE_SINK, HTTP_SINK, RANDOM_SOURCE};
use ferry_tests::free_port;
use ferry_tests::http_client::get;
use ferry_tests::iggy_server::{IggyServer, PASSWORD, USERNAME, live_server};

fn random(version: u64, max_count: u64) -> String {
    format!(
        r#"type = "source"
key = "random"
enabled = true
version = {version}
name = "Random source"
path = "target/release/libiggy_connector_random_source"
plugin_config_format = "json"
benchmark = true

[[streams]]
stream = "example_stream"
topic = "example_topic"
schema = "json"
batch_length = 1000
linger_time = "5ms"

[plugin_config]
interval = "1ms"
max_count = {max_count}
payload_size = 50

[transforms.add_fields]
enabled = true
fields = [{{ key = "origin", value.static = "random" }}, {{ key = "at", value.computed = "timestamp_micros" }}]

[transforms.delete_fields]
enabled = true
fields = ["text"]
"#
    )
}

/// A sink in Iggy's format, with the grant ferry's sandbox needs added (the only
/// key Iggy's runtime would not know).
const ARCHIVE: &str = r#"type = "sink"
key = "archive"
enabled = true
version = 0
name = "Archive"
path = "target/release/libiggy_connector_file_sink"
verbose = true

[[streams]]
stream = "example_stream"
topics = ["example_topic"]
schema = "json"
batch_length = 100
poll_interval = "5ms"

[plugin_config]
directory = "/out"

[transforms.update_fields]
enabled = true
fields = [{ key = "origin", value.static = "archived from random", condition = "key_exists" }]

[transforms.filter_fields]
enabled = true
keep_fields = ["seq"]
patterns = [{ key_pattern.exact = "origin" }]

[transforms.avro_convert]
enabled = false

[grants]
dirs = [{ host = "out", guest = "/out", writable = true }]
"#;

fn runtime_config(server: &IggyServer) -> String {
    format!(
        r#"[http]
enabled = false

[iggy]
address = "{address}"
username = "{USERNAME}"
password = "{PASSWORD}"
token = ""

[iggy.tls]
enabled = false
ca_file = "core/certs/iggy_ca_cert.pem"

[state]
path = "local_state"

[connectors]
config_type = "local"
config_dir = "connectors"

[logging]
format = "text"
"#,
        address = server.address()
    )
}

/// The runtime file with Iggy's API on, as Iggy's runtime serves it, and the API's
/// address.
fn runtime_config_with_api(server: &IggyServer) -> (String, String) {
    let api = format!("127.0.0.1:{}", free_port());
    let runtime_file = runtime_config(server)
        .replace("[http]\nenabled = false", &format!("[http]\nenabled = true\naddress = \"{api}\"\napi_key = \"\""));
    (runtime_file, api)
}

/// The seqs in the payloads of `messages` (the random source's JSON records).
fn seqs(messages: &[iggy::prelude::IggyMessage]) -> Vec<u64> {
    let seq = |payload: &[u8]| serde_json::from_slice::<serde_json::Value>(payload).unwrap()["seq"].as_u64().unwrap();
    messages.iter().map(|m| seq(&m.payload)).collect()
}

/// Every payload the file sink wrote under `out`, as JSON.
fn written_payloads(out: &Path) -> Vec<serde_json::Value> {
    let mut payloads = Vec::new();
    for entry in std::fs::read_dir(out).unwrap().filter_map(Result::ok) {
        for line in std::fs::read_to_string(entry.path()).unwrap().lines() {
            let line: serde_json::Value = serde_json::from_str(line).unwrap();
            payloads.push(serde_json::from_str(line["payload"].as_str().unwrap()).unwrap());
        }
    }
    assert!(!payloads.is_empty(), "the sink wrote nothing under {}", out.display());
    payloads
}

fn copy(from: &str, to: &Path) {
    std::fs::create_dir_all(to.parent().unwrap()).unwrap();
    std::fs::copy(from, to).unwrap();
}

#[test]
fn an_iggy_runtime_directory_runs_unchanged_and_prints_as_the_ferry_config_it_means() {
    let Some(server) =
        live_server("iggy_drop_in::an_iggy_runtime_directory_runs_unchanged_and_prints_as_the_ferry_config_it_means")
    else {
        return;
    };
    const COUNT: u64 = 500;
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let client = server.client().await;
        IggyServer::create_topic(&client, "example_stream", "example_topic").await;
    });
    let site = Site::new();
    copy(RANDOM_SOURCE, &site.path("components/random_source.wasm"));
    copy(FILE_SINK, &site.path("components/file_sink.wasm"));
    std::fs::create_dir_all(site.path("out")).unwrap();
    std::fs::create_dir_all(site.path("connectors")).unwrap();
    site.config("connectors/random_v0.toml", &random(0, 50));
    site.config("connectors/random_v1.toml", &random(1, COUNT));
    site.config("connectors/archive.toml", ARCHIVE);
    let (runtime_file, api) = runtime_config_with_api(&server);
    let config = site.config("config.toml", &runtime_file);

    let mut run = Ferry::start(&config, &[]);
    run.wait_for_line(&["key=archive", "joined consumer group `iggy-connect-sink-archive`"]);
    until("every record in the sink's files", || written(&site.path("out")).len() as u64 == COUNT);

    // The versions of a connector's config, as Iggy's API shows them; its plugin
    // config and transforms.
    let versions = get(&api, "/sources/random/configs", &[]).unwrap().json();
    let shown: Vec<(u64, bool)> =
        versions.as_array().unwrap().iter().map(|v| (v["version"].as_u64().unwrap(), v["active"] == true)).collect();
    assert_eq!(shown, [(0, false), (1, true)], "{versions}");
    let active = get(&api, "/sources/random/configs/active", &[]).unwrap().json();
    assert_eq!((active["version"].as_u64(), &active["plugin_config"]["max_count"]), (Some(1), &json!(COUNT)));
    let first = get(&api, "/sources/random/configs/0", &[]).unwrap().json();
    assert_eq!((&first["plugin_config"]["max_count"], &first["active"]), (&json!(50), &json!(false)));
    let none = get(&api, "/sources/random/configs/7", &[]).unwrap();
    assert_eq!(none.status, 404, "{none:?}");
    assert!(none.json()["error"].as_str().unwrap().contains("has no version 7 (it has 0, 1)"), "{none:?}");
    let plugin = get(&api, "/sources/random/configs/plugin", &[]).unwrap().json();
    assert_eq!(plugin, json!({"interval": "1ms", "max_count": COUNT, "payload_size": 50}));
    let transforms = get(&api, "/sinks/archive/transforms", &[]).unwrap().json();
    let types: Vec<&str> = transforms.as_array().unwrap().iter().map(|t| t["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["update_fields", "filter_fields"], "in the order written, the disabled one left out");
    // Iggy's stage names: the source's delivery to Iggy is `iggy_send`, its transforms
    // `prepare`, a whole batch `total`.
    let metrics = get(&api, "/metrics", &[]).unwrap().body;
    for stage in ["iggy_send", "prepare", "state_save", "total"] {
        let count = crate::http_api::sample_of(
            &metrics,
            "iggy_connector_stage_duration_seconds_count",
            "random",
            &[("stage", stage)],
        );
        assert!(count > 0.0, "{stage}: {count}");
    }
    assert!(!metrics.contains("stage=\"deliver\""), "the local log is not used:\n{metrics}");

    run.signal(Signal::SIGTERM);
    assert!(run.wait().success(), "{}", run.log());

    // The sink is `verbose`: each batch it settled is an info line; the source's are not.
    let log = run.log();
    let settled =
        |key: &str, what: &str| log.lines().any(|l| l.contains(" INFO ") && l.contains(key) && l.contains(what));
    assert!(settled("key=archive", "batch written, offset stored"), "{log}");
    assert!(!settled("key=random", "batch delivered, cursor committed"), "{log}");
    // The source has Iggy's `benchmark`: a line per batch with its stage times, on
    // Iggy's target; the sink has not.
    let benchmark: Vec<&str> = log.lines().filter(|l| l.contains("iggy_connectors::benchmark")).collect();
    assert!(!benchmark.is_empty(), "{log}");
    for line in &benchmark {
        for field in
            ["connector_type=\"source\"", "connector_key=\"random\"", "sent_count=", "iggy_send_us=", "total_us="]
        {
            assert!(line.contains(field), "{field} in {line}");
        }
        assert!(!line.contains("deliver_us="), "{line}");
    }
    let sent: u64 = benchmark
        .iter()
        .map(|line| line.split("sent_count=").nth(1).unwrap().split(' ').next().unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(sent, COUNT, "one line per batch, every record in one of them");

    // Version 1 ran (version 0 stops at 50); every record reached Iggy and the sink once.
    let delivered = runtime.block_on(server.read_all("example_stream", "example_topic"));
    assert_eq!(seqs(&delivered), (0..COUNT).collect::<Vec<_>>());
    assert_eq!(seqs_once(&written(&site.path("out"))), (0..COUNT).collect());

    // The source's transforms ran before delivery: a field added, one computed, one
    // deleted; the sink's before the guest: one updated, every other filtered out.
    for message in &delivered {
        let record: serde_json::Value = serde_json::from_slice(&message.payload).unwrap();
        let fields: Vec<&str> = record.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(fields, ["seq", "origin", "at"], "{record}");
        assert_eq!(record["origin"], "random");
        assert!(record["at"].as_u64().unwrap() > 1_700_000_000_000_000, "{record}");
    }
    for payload in written_payloads(&site.path("out")) {
        assert_eq!(payload.as_object().unwrap().len(), 2, "{payload}");
        assert_eq!(payload["origin"], "archived from random", "{payload}");
    }

    // The Ferry config it means, printed, runs as a Ferry config.
    let printed = ferry(&["config", "from-iggy", config.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&printed.stdout).to_string();
    assert!(printed.status.success(), "{}", String::from_utf8_lossy(&printed.stderr));
    for words in [
        "[[sources]]",
        "key = \"random\"",
        "max_count = 500",
        "consumer_group = \"iggy-connect-sink-archive\"",
        "[sources.transforms.add_fields]",
        "[sinks.transforms.filter_fields]",
    ] {
        assert!(text.contains(words), "{words}:\n{text}");
    }
    let native = site.config("ferry.toml", &text);
    let state = ferry(&["state", "show", native.to_str().unwrap(), "random"]);
    let shown = String::from_utf8_lossy(&state.stdout);
    assert!(state.status.success() && shown.contains("500"), "the same state dir, the same cursor: {shown}");

    // A Ferry config is not one to translate.
    let refused = ferry(&["config", "from-iggy", native.to_str().unwrap()]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("not a config file of Iggy's connectors runtime"));
}

/// A config server (axum, on a free port of 127.0.0.1) answering `GET /configs/active`
/// with what the test sets, counting the requests; running until dropped.
struct ConfigServer {
    url: String,
    answer: Arc<Mutex<(String, usize)>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl ConfigServer {
    fn start(runtime: &tokio::runtime::Runtime, answer: String) -> ConfigServer {
        let answer = Arc::new(Mutex::new((answer, 0)));
        let shared = answer.clone();
        let app = axum::Router::new().route(
            "/configs/active",
            axum::routing::get(move || {
                let shared = shared.clone();
                async move {
                    let mut shared = shared.lock().unwrap();
                    shared.1 += 1;
                    ([("content-type", "application/json")], shared.0.clone())
                }
            }),
        );
        let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        runtime.spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    stopped.await.ok();
                })
                .await
                .unwrap();
        });
        ConfigServer { url, answer, stop: Some(stop) }
    }

    fn answer(&self, answer: String) {
        self.answer.lock().unwrap().0 = answer;
    }

    fn asked(&self) -> usize {
        self.answer.lock().unwrap().1
    }
}

impl Drop for ConfigServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            stop.send(()).ok();
        }
    }
}

/// The active configs as an Iggy config server answers them: the random source
/// (Iggy's `messages_range`, stopping at `max_count`) and the archive sink.
fn active_configs(max_count: u64) -> String {
    serde_json::json!({
        "sources": { "random": {
            "key": "random", "enabled": true, "version": 3, "name": "Random source",
            "path": "target/release/libiggy_connector_random_source", "transforms": null,
            "streams": [{ "stream": "example_stream", "topic": "example_topic", "schema": "json",
                          "batch_length": 1000, "linger_time": "5ms" }],
            "plugin_config_format": "json",
            "plugin_config": { "interval": "1ms", "max_count": max_count, "messages_range": [10, 50],
                               "payload_size": 50 }
        }},
        "sinks": { "archive": {
            "key": "archive", "enabled": true, "version": 0, "name": "Archive",
            "path": "target/release/libiggy_connector_file_sink", "transforms": null,
            "streams": [{ "stream": "example_stream", "topics": ["example_topic"], "schema": "json",
                          "batch_length": 100, "poll_interval": "5ms", "consumer_group": null }],
            "plugin_config_format": null, "plugin_config": { "directory": "/out" },
            "grants": { "dirs": [{ "host": "out", "guest": "/out", "writable": true }] }
        }}
    })
    .to_string()
}

#[test]
fn connectors_from_an_iggy_config_server_run_and_a_reload_asks_it_again() {
    let Some(server) =
        live_server("iggy_drop_in::connectors_from_an_iggy_config_server_run_and_a_reload_asks_it_again")
    else {
        return;
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let client = server.client().await;
        IggyServer::create_topic(&client, "example_stream", "example_topic").await;
    });
    let configs = ConfigServer::start(&runtime, active_configs(300));
    let site = Site::new();
    copy(RANDOM_SOURCE, &site.path("components/random_source.wasm"));
    copy(FILE_SINK, &site.path("components/file_sink.wasm"));
    std::fs::create_dir_all(site.path("out")).unwrap();
    // And logs as JSON, as Iggy's `[logging] format = "json"` asks.
    let runtime_file = runtime_config(&server)
        .replace(
            "config_type = \"local\"\nconfig_dir = \"connectors\"",
            &format!("config_type = \"http\"\nbase_url = \"{}\"\ntimeout = \"5s\"", configs.url),
        )
        .replace("format = \"text\"", "format = \"json\"");
    assert!(runtime_file.contains("base_url") && runtime_file.contains("\"json\""), "{runtime_file}");
    let config = site.config("config.toml", &runtime_file);

    let mut run = Ferry::start(&config, &[]);
    until("the first 300 records in the sink's files", || written(&site.path("out")).len() >= 300);
    assert_eq!(configs.asked(), 1, "asked once at the start");
    let log = run.log();
    let lines: Vec<serde_json::Value> = log
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}")))
        .collect();
    assert!(
        lines.iter().any(|line| line["level"] == "INFO"
            && line["span"]["key"] == "random"
            && line["fields"]["message"].as_str().is_some_and(|m| m.starts_with("random source: 10 to 49 records"))),
        "the guest's line, with its connector's key:\n{log}"
    );

    // The server now says 700: a reload asks it again (from within the running host),
    // and the source goes on from its cursor to the new end.
    configs.answer(active_configs(700));
    run.signal(Signal::SIGHUP);
    let line: serde_json::Value = serde_json::from_str(&run.wait_for_line(&["config reloaded"])).unwrap();
    assert_eq!(line["fields"]["changed"], 1, "{line}");
    assert_eq!(configs.asked(), 2);
    until("all 700 records in the sink's files", || written(&site.path("out")).len() >= 700);

    // A reload while the server answers with nonsense is refused; everything runs on.
    configs.answer("{\"sinks\": 7}".into());
    run.signal(Signal::SIGHUP);
    let line = run.wait_for_line(&["reload refused"]);
    assert!(line.contains("`sinks` must map each key to its config"), "{line}");
    run.signal(Signal::SIGTERM);
    assert!(run.wait().success(), "{}", run.log());

    let delivered = runtime.block_on(server.read_all("example_stream", "example_topic"));
    assert_eq!(seqs(&delivered), (0..700).collect::<Vec<_>>());
    assert_eq!(seqs_once(&written(&site.path("out"))), (0..700).collect());
}

/// The random source's records, as Avro.
const RANDOM_AVRO: &str = r#"{"type": "record", "name": "Random", "fields": [{"name": "seq", "type": "long"}, {"name": "text", "type": "string"}]}"#;

#[test]
fn iggys_avro_schema_encodes_a_sources_records_and_decodes_a_sinks_and_what_is_not_avro_is_dead_lettered() {
    let Some(server) = live_server(
        "iggy_drop_in::iggys_avro_schema_encodes_a_sources_records_and_decodes_a_sinks_and_what_is_not_avro_is_dead_lettered",
    ) else {
        return;
    };
    const COUNT: u64 = 300;
    let schema = apache_avro::Schema::parse_str(RANDOM_AVRO).unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    // Two messages already in the topic that are not records of the schema: one cut
    // short, one with a byte after its datum.
    runtime.block_on(async {
        use iggy::prelude::*;
        let client = server.client().await;
        let (stream, topic) = IggyServer::create_topic(&client, "example_stream", "example_topic").await;
        IggyServer::create_topic(&client, "dead", "archive").await;
        let record = apache_avro::types::Value::Record(vec![
            ("seq".into(), apache_avro::types::Value::Long(1_000_000)),
            ("text".into(), apache_avro::types::Value::String("x".into())),
        ]);
        let writer = apache_avro::writer::datum::GenericDatumWriter::builder(&schema).build().unwrap();
        let mut trailing = writer.write_value_to_vec(record).unwrap();
        trailing.push(0);
        let mut bad: Vec<IggyMessage> = [vec![0x02], trailing]
            .into_iter()
            .map(|payload| IggyMessage::builder().payload(payload.into()).build().unwrap())
            .collect();
        client.send_messages(&stream, &topic, &Partitioning::balanced(), &mut bad).await.unwrap();
    });

    let site = Site::new();
    copy(RANDOM_SOURCE, &site.path("components/random_source.wasm"));
    copy(FILE_SINK, &site.path("components/file_sink.wasm"));
    std::fs::create_dir_all(site.path("out")).unwrap();
    std::fs::create_dir_all(site.path("schemas")).unwrap();
    std::fs::create_dir_all(site.path("connectors")).unwrap();
    std::fs::write(site.path("schemas/random.avsc"), RANDOM_AVRO).unwrap();
    // The source writes Avro (its schema in a file); the sink reads it (the schema
    // inline), with ferry's dead letters added to Iggy's file.
    let source = random(0, COUNT)
        .replace("schema = \"json\"", "schema = \"avro\"\navro_schema_path = \"schemas/random.avsc\"")
        .replace("[transforms.add_fields]\nenabled = true", "[transforms.add_fields]\nenabled = false")
        .replace("[transforms.delete_fields]\nenabled = true", "[transforms.delete_fields]\nenabled = false");
    site.config("connectors/random.toml", &source);
    let sink = ARCHIVE
        .replace("schema = \"json\"", &format!("schema = \"avro\"\navro_schema_json = '{RANDOM_AVRO}'"))
        .replace("[transforms.update_fields]\nenabled = true", "[transforms.update_fields]\nenabled = false")
        .replace("[transforms.filter_fields]\nenabled = true", "[transforms.filter_fields]\nenabled = false")
        .replace("[grants]", "[dead_letters]\nstream = \"dead\"\ntopic = \"archive\"\n\n[grants]");
    site.config("connectors/archive.toml", &sink);
    let config = site.config("config.toml", &runtime_config(&server));

    let mut run = Ferry::start(&config, &[]);
    until("every record in the sink's files", || written(&site.path("out")).len() as u64 == COUNT);
    let mut dead = Vec::new();
    until("both dead letters in Iggy", || {
        dead = runtime.block_on(server.read_all("dead", "archive"));
        dead.len() == 2
    });
    run.signal(Signal::SIGTERM);
    assert!(run.wait().success(), "{}", run.log());

    // In Iggy: Avro datums an independent reader reads under the schema, every seq once.
    let delivered = runtime.block_on(server.read_all("example_stream", "example_topic"));
    let reader = apache_avro::reader::datum::GenericDatumReader::builder(&schema).build().unwrap();
    let mut seqs: Vec<u64> = Vec::new();
    for message in &delivered[2..] {
        let value = reader.read_value(&mut &message.payload[..]).expect("an Avro datum");
        let json = serde_json::Value::try_from(value).unwrap();
        seqs.push(json["seq"].as_u64().unwrap());
    }
    assert_eq!(seqs, (0..COUNT).collect::<Vec<_>>());
    // The sink's guest got JSON, decoded: every seq once.
    assert_eq!(seqs_once(&written(&site.path("out"))), (0..COUNT).collect());
    for payload in written_payloads(&site.path("out")) {
        assert!(payload["text"].is_string(), "{payload}");
    }
    // The two that are not Avro of the schema: dead-lettered as they were stored, with why.
    assert_eq!(dead[0].payload.as_ref(), &[0x02]);
    assert_eq!(dead[1].payload.last(), Some(&0));
    for (letter, why) in dead.iter().zip(["not an Avro datum of the schema", "1 byte(s) after the Avro datum"]) {
        let headers = letter.user_headers_map().unwrap().unwrap();
        let key = iggy::prelude::HeaderKey::try_from("ferry-dead-letter-reason").unwrap();
        let reason = headers[&key].as_str().unwrap().to_string();
        assert!(reason.contains("not avro as its stream's schema says") && reason.contains(why), "{reason}");
    }
}

/// Iggy's HTTP sink file as Iggy's repository writes it
/// (`core/connectors/sinks/http_sink/config.toml`), pointed at `url`, with the grant
/// ferry's sandbox needs (the one key Iggy's runtime would not know), and
/// `include_checksum = true` (Iggy's file has `false`, its default).
fn http_sink(url: &str, granted: &str) -> String {
    format!(
        r#"type = "sink"
key = "http"
enabled = true
version = 0
name = "HTTP sink"
path = "../../target/release/libiggy_connector_http_sink"
verbose = false

[[streams]]
stream = "example_stream"
topics = ["example_topic"]
schema = "json"
batch_length = 50
poll_interval = "100ms"
consumer_group = "http_sink_group"

[plugin_config]
url = "{url}"
method = "POST"
timeout = "30s"
max_payload_size_bytes = 10485760
batch_mode = "ndjson"
include_metadata = true
include_checksum = true
include_origin_timestamp = false
health_check_enabled = false
health_check_method = "HEAD"
max_retries = 3
retry_delay = "1s"
retry_backoff_multiplier = 2
max_retry_delay = "30s"
success_status_codes = [200, 201, 202, 204]
tls_danger_accept_invalid_certs = false
max_connections = 10
verbose_logging = false

[plugin_config.headers]
Authorization = "Bearer <YOUR_TOKEN_HERE>"
X-Custom-Header = "custom-value"

[grants]
network = ["{granted}"]
"#
    )
}

#[test]
fn iggys_http_sink_file_runs_unchanged_and_every_record_reaches_the_endpoint() {
    let Some(server) =
        live_server("iggy_drop_in::iggys_http_sink_file_runs_unchanged_and_every_record_reaches_the_endpoint")
    else {
        return;
    };
    const COUNT: u64 = 200;
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let client = server.client().await;
        IggyServer::create_topic(&client, "example_stream", "example_topic").await;
    });
    let endpoint = crate::http_sink::Endpoint::start(0, false);
    let site = Site::new();
    copy(RANDOM_SOURCE, &site.path("components/random_source.wasm"));
    copy(HTTP_SINK, &site.path("components/http_sink.wasm"));
    std::fs::create_dir_all(site.path("connectors")).unwrap();
    site.config("connectors/random.toml", &random(0, COUNT));
    let url = format!("http://{}/ingest", endpoint.address);
    site.config("connectors/http.toml", &http_sink(&url, &endpoint.address));
    let config = site.config("config.toml", &runtime_config(&server));

    let mut run = Ferry::start(&config, &[]);
    until("every record at the endpoint", || endpoint.seqs().len() as u64 == COUNT);
    run.signal(Signal::SIGTERM);
    assert!(run.wait().success(), "{}", run.log());
    let seqs = endpoint.seqs();
    assert_eq!(seqs.keys().copied().collect::<Vec<_>>(), (0..COUNT).collect::<Vec<_>>());
    assert!(seqs.values().all(|times| *times == 1), "each once: {seqs:?}");
    // NDJSON batches of at most batch_length, each under one key.
    let received = endpoint.received.lock().unwrap();
    let mut per_key: BTreeMap<&str, usize> = BTreeMap::new();
    for (key, _) in &received.requests {
        *per_key.entry(key).or_default() += 1;
    }
    assert!(per_key.len() > 1 && per_key.values().all(|n| *n <= 50), "{per_key:?}");
    // Each envelope's iggy_checksum is the one the Iggy server keeps for its offset.
    let sent: BTreeMap<u64, u64> = received.checksums.iter().copied().collect();
    assert_eq!(received.checksums.len() as u64, COUNT, "one checksum per envelope");
    assert_eq!(sent, runtime.block_on(checksums_kept(&server, "example_stream", "example_topic")));
}

/// Iggy's ClickHouse sink file as Iggy's repository writes it
/// (`core/connectors/runtime/example_config/connectors/clickhouse_sink.toml`), with
/// the test server's address and credentials where an operator puts theirs, and the
/// grant ferry's sandbox needs.
fn clickhouse_sink(server: &ChServer) -> String {
    format!(
        r#"type = "sink"
key = "clickhouse"
enabled = true
version = 0
name = "ClickHouse sink"
path = "target/release/libiggy_connector_clickhouse_sink"
verbose = false

[[streams]]
stream = "example_stream"
topics = ["example_topic"]
schema = "json"
batch_length = 1000
poll_interval = "5ms"
consumer_group = "clickhouse_sink_connector"

[plugin_config]
url = "http://{address}"
database = "default"
username = "{user}"
password = "{password}"
table = "events"

# Insert format: "json_each_row" (default), "row_binary", or "string"
insert_format = "json_each_row"

timeout_seconds = 30
max_retries = 3
retry_delay = 1 # seconds
verbose_logging = false

[grants]
network = ["{address}"]
"#,
        address = server.address(),
        user = ferry_tests::clickhouse_server::USER,
        password = ferry_tests::clickhouse_server::PASSWORD,
    )
}

#[test]
fn iggys_clickhouse_sink_file_runs_unchanged_and_every_record_is_a_row() {
    let Some(server) = live_server("iggy_drop_in::iggys_clickhouse_sink_file_runs_unchanged_and_every_record_is_a_row")
    else {
        return;
    };
    const COUNT: u64 = 300;
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let client = server.client().await;
        IggyServer::create_topic(&client, "example_stream", "example_topic").await;
    });
    let clickhouse = ChServer::start();
    // The random source's records, as its transforms leave them.
    clickhouse.query("CREATE TABLE events (seq UInt64, origin String, at UInt64) ENGINE = MergeTree() ORDER BY seq");
    let site = Site::new();
    copy(RANDOM_SOURCE, &site.path("components/random_source.wasm"));
    copy(CLICKHOUSE_SINK, &site.path("components/clickhouse_sink.wasm"));
    std::fs::create_dir_all(site.path("connectors")).unwrap();
    site.config("connectors/random.toml", &random(0, COUNT));
    site.config("connectors/clickhouse.toml", &clickhouse_sink(&clickhouse));
    let config = site.config("config.toml", &runtime_config(&server));

    let mut run = Ferry::start(&config, &[]);
    // Distinct seqs, not rows: the table is Iggy's plain MergeTree (no `id_column`), so
    // an insert taken by the server but answered too late is in it twice (at least once).
    let seqs = || {
        let poll = std::time::Duration::from_secs(5);
        clickhouse.try_query_within("SELECT uniqExact(seq), count() FROM events", poll).map(|n| n.trim().to_string())
    };
    let deadline = std::time::Instant::now() + crate::process::PATIENCE;
    let mut last = seqs();
    while !last.as_ref().is_ok_and(|n| n.starts_with(&format!("{COUNT}\t"))) {
        assert!(
            std::time::Instant::now() < deadline,
            "every record a row: distinct seqs and rows {last:?}\nClickHouse's log:\n{}\nferry's log:\n{}",
            clickhouse.log(),
            run.log()
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
        last = seqs();
    }
    run.signal(Signal::SIGTERM);
    assert!(run.wait().success(), "{}", run.log());
    let seqs = clickhouse.query("SELECT uniqExact(seq), min(seq), max(seq), any(origin) FROM events");
    assert_eq!(seqs.trim(), format!("{COUNT}\t0\t{}\trandom", COUNT - 1));
}

/// Iggy's InfluxDB sink file as Iggy's repository writes it
/// (`core/connectors/sinks/influxdb_sink/config.toml`), pointed at `url`, with the
/// change a 1.x server needs (the README's table): `token` as "user:password" (1.x
/// has users, not tokens); and the grant ferry's sandbox needs. The streams are the random
/// source's.
fn influxdb_sink(url: &str, granted: &str) -> String {
    format!(
        r#"type = "sink"
key = "influxdb"
enabled = true
version = 0
name = "InfluxDB sink"
path = "../../target/release/libiggy_connector_influxdb_sink"
verbose = false

[[streams]]
stream = "example_stream"
topics = ["example_topic"]
schema = "json"
batch_length = 100
poll_interval = "5ms"
consumer_group = "influxdb_sink"

[plugin_config]
version = "v2"
url = "{url}"
org = "iggy"
bucket = "events"
token = "iggy:any-password"
measurement = "iggy_messages"
precision = "ns"
batch_size = 500
include_metadata = true
include_checksum = true
include_origin_timestamp = true
include_stream_tag = true
include_topic_tag = true
include_partition_tag = true
payload_format = "json"
max_retries = 3
retry_delay = "1s"
timeout = "10s"

[grants]
network = ["{granted}"]
"#
    )
}

#[test]
fn iggys_influxdb_sink_file_writes_every_record_as_a_point() {
    let Some(server) = live_server("iggy_drop_in::iggys_influxdb_sink_file_writes_every_record_as_a_point") else {
        return;
    };
    const COUNT: u64 = 200;
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let client = server.client().await;
        IggyServer::create_topic(&client, "example_stream", "example_topic").await;
    });
    let influx = ferry_tests::influxdb_server::InfluxServer::start();
    influx.create_database("events");
    let site = Site::new();
    copy(RANDOM_SOURCE, &site.path("components/random_source.wasm"));
    copy(ferry_tests::components::INFLUXDB_SINK, &site.path("components/influxdb_sink.wasm"));
    std::fs::create_dir_all(site.path("connectors")).unwrap();
    site.config("connectors/random.toml", &random(0, COUNT));
    site.config("connectors/influxdb.toml", &influxdb_sink(&influx.url(""), &influx.address()));
    let config = site.config("config.toml", &runtime_config(&server));

    let points = || influx.select("events", "SELECT * FROM iggy_messages");
    let mut run = Ferry::start(&config, &[]);
    until("every record a point", || points().len() as u64 == COUNT);
    run.wait_until_logged(&["key=influxdb", "running"]);
    run.signal(Signal::SIGTERM);
    assert!(run.wait().success(), "{}", run.log());
    let rows = points();
    let mut seqs: Vec<u64> = rows
        .iter()
        .map(|row| {
            let payload: serde_json::Value = serde_json::from_str(row["payload_json"].as_str().unwrap()).unwrap();
            payload["seq"].as_u64().unwrap()
        })
        .collect();
    seqs.sort();
    assert_eq!(seqs, (0..COUNT).collect::<Vec<_>>(), "every record once");
    assert!(rows.iter().all(|row| row["stream"] == "example_stream" && row["topic"] == "example_topic"), "{rows:?}");
    // Each point's iggy_checksum is the one the Iggy server keeps for its offset.
    let kept = runtime.block_on(checksums_kept(&server, "example_stream", "example_topic"));
    let written: BTreeMap<u64, u64> = rows
        .iter()
        .map(|row| {
            let offset: u64 = row["offset"].as_str().unwrap().parse().unwrap();
            (offset, row["iggy_checksum"].as_i64().unwrap_or_else(|| panic!("no iggy_checksum: {row:?}")) as u64)
        })
        .collect();
    assert_eq!(written, kept);
}

/// The checksum the Iggy server keeps for each message of `stream`/`topic` (one
/// partition), by offset.
async fn checksums_kept(server: &IggyServer, stream: &str, topic: &str) -> BTreeMap<u64, u64> {
    let messages = server.read_all(stream, topic).await;
    assert!(messages.iter().all(|m| m.header.checksum != 0), "the server keeps a checksum of each");
    messages.iter().map(|m| (m.header.offset, m.header.checksum)).collect()
}

/// Iggy's PostgreSQL source file as Iggy's repository writes it
/// (`core/connectors/sources/postgres_source/config.toml`).
fn postgres_source() -> &'static str {
    r#"type = "source"
key = "postgres"
enabled = true
version = 0
name = "Postgres source"
path = "../../target/release/libiggy_connector_postgres_source"
verbose = false

[[streams]]
stream = "user_events"
topic = "users"
schema = "json"
batch_length = 100

[plugin_config]
connection_string = "postgresql://user:pass@localhost:5432/database"
mode = "polling"
tables = ["users", "orders"]
poll_interval = "1s"
batch_size = 1000
tracking_column = "id"
initial_offset = "0"
max_connections = 10
snake_case_columns = false
include_metadata = true
"#
}

/// Iggy's PostgreSQL sink file as Iggy's repository writes it
/// (`core/connectors/sinks/postgres_sink/config.toml`). Its key is the source's, as
/// in Iggy's examples: ferry runs it as `postgres-sink`, Iggy's routes answer by
/// `postgres`.
fn postgres_sink() -> &'static str {
    r#"type = "sink"
key = "postgres"
enabled = true
version = 0
name = "Postgres sink"
path = "../../target/release/libiggy_connector_postgres_sink"
verbose = false

[[streams]]
stream = "user_events"
topics = ["users", "orders"]
schema = "json"
batch_length = 100
poll_interval = "5ms"
consumer_group = "postgres_sink"

[plugin_config]
connection_string = "postgresql://user:pass@localhost:5432/database"
target_table = "iggy_messages"
batch_size = 100
max_connections = 10
auto_create_table = true
include_metadata = true
include_checksum = true
include_origin_timestamp = true
payload_format = "bytea"
"#
}

/// The `table_name` and `data.id` of each record in `iggy_messages` (Iggy's source's
/// records, as Iggy's sink stores them), checking each row's Iggy columns on the way.
async fn rows_carried(pg: &ferry_tests::postgres_server::PgServer) -> Vec<(String, i64)> {
    let client = pg.client().await;
    let sql = "SELECT id::text, iggy_stream, iggy_topic, iggy_offset, payload FROM iggy_messages ORDER BY iggy_offset";
    let rows = match client.query(sql, &[]).await {
        Ok(rows) => rows,
        // Until the sink has created it.
        Err(e) if e.code() == Some(&tokio_postgres::error::SqlState::UNDEFINED_TABLE) => return Vec::new(),
        Err(e) => panic!("{sql}: {e}"),
    };
    let mut ids = Vec::new();
    for row in rows {
        let (stream, topic): (String, String) = (row.get(1), row.get(2));
        assert_eq!((stream.as_str(), topic.as_str()), ("user_events", "users"));
        let id: String = row.get(0);
        assert!(id.parse::<u128>().is_ok_and(|id| id != 0), "the message id: {id}");
        let payload: Vec<u8> = row.get(4);
        let record: serde_json::Value = serde_json::from_slice(&payload).unwrap();
        assert_eq!(record["operation_type"], "SELECT", "{record}");
        assert!(record["timestamp"].as_str().is_some_and(|t| t.ends_with('Z')), "{record}");
        let table = record["table_name"].as_str().unwrap().to_string();
        assert_eq!(record["data"]["email"], json!(format!("{table}{}@example.com", record["data"]["id"])), "{record}");
        ids.push((table, record["data"]["id"].as_i64().unwrap()));
    }
    ids
}

#[test]
fn iggys_postgres_source_and_sink_files_carry_every_row_into_iggys_table_once() {
    let Some(server) =
        live_server("iggy_drop_in::iggys_postgres_source_and_sink_files_carry_every_row_into_iggys_table_once")
    else {
        return;
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let pg = ferry_tests::postgres_server::PgServer::start();
    let insert = |table: &str, from: i64, to: i64| {
        format!(
            "INSERT INTO {table} (id, email) SELECT n, '{table}' || n || '@example.com' FROM generate_series({from}, \
             {to}) AS n;"
        )
    };
    runtime.block_on(async {
        let client = server.client().await;
        IggyServer::create_topic(&client, "user_events", "users").await;
        IggyServer::create_topic(&client, "user_events", "orders").await;
        let tables = "CREATE TABLE users (id bigint PRIMARY KEY, email text NOT NULL); \
                      CREATE TABLE orders (id bigint PRIMARY KEY, email text NOT NULL);";
        pg.execute(&format!("{tables} {} {}", insert("users", 0, 300), insert("orders", 0, 100))).await;
    });
    let site = Site::new();
    copy(ferry_tests::components::POSTGRES_SOURCE, &site.path("components/postgres_source.wasm"));
    copy(ferry_tests::components::POSTGRES_SINK, &site.path("components/postgres_sink.wasm"));
    std::fs::create_dir_all(site.path("connectors")).unwrap();
    site.config("connectors/postgres_source.toml", postgres_source());
    site.config("connectors/postgres_sink.toml", postgres_sink());
    let (runtime_file, api) = runtime_config_with_api(&server);
    let config = site.config("config.toml", &runtime_file);
    // Where an Iggy user keeps the password: Iggy's overrides of connection_string.
    let url = pg.url();
    let env = [
        ("IGGY_CONNECTORS_SOURCE_POSTGRES_PLUGIN_CONFIG_CONNECTION_STRING", url.as_str()),
        ("IGGY_CONNECTORS_SINK_POSTGRES_PLUGIN_CONFIG_CONNECTION_STRING", url.as_str()),
    ];

    // initial_offset = "0": the row with id 0 is not read.
    let carried = || runtime.block_on(rows_carried(&pg));
    let mut run = Ferry::start(&config, &env);
    run.until("rows 1 to 300 of users and 1 to 100 of orders in iggy_messages", || carried().len() == 400);
    run.wait_until_logged(&["key=postgres-sink", "running"]);
    // Iggy's routes answer by Iggy's key, for the source and for the sink.
    // (The test's Iggy password is `iggy`: the API redacts it in `iggy_messages`.)
    let sink = get(&api, "/sinks/postgres/configs/active", &[]).unwrap().json();
    assert_eq!(sink["plugin_config"]["payload_format"], "bytea", "{sink}");
    let source = get(&api, "/sources/postgres/configs/active", &[]).unwrap().json();
    assert_eq!(source["plugin_config"]["mode"], "polling", "{source}");
    assert_eq!(get(&api, "/sinks/postgres", &[]).unwrap().json()["key"], "postgres-sink");
    let paused = ferry_tests::http_client::request(&api, "POST", "/sinks/postgres/pause", &[]).unwrap().json();
    assert_eq!((&paused["key"], &paused["status"]), (&json!("postgres-sink"), &json!("paused")), "{paused}");
    let source_status = get(&api, "/sources/postgres", &[]).unwrap().json()["status"].clone();
    assert!(source_status == "running" || source_status == "idle", "the source is not paused: {source_status}");
    let resumed = ferry_tests::http_client::request(&api, "POST", "/sinks/postgres/resume", &[]).unwrap().json();
    assert_eq!(resumed["key"], "postgres-sink", "{resumed}");
    assert!(!sink.to_string().contains(pg.password()) && !source.to_string().contains(pg.password()));
    run.signal(Signal::SIGTERM);
    assert!(run.wait().success(), "{}", run.log());
    assert!(!run.log().contains(pg.password()), "the password is never logged");

    // Started again: the source reads on after its cursor, the sink after its offset.
    runtime.block_on(pg.execute(&format!("{} {}", insert("users", 301, 350), insert("orders", 101, 120))));
    let mut again = Ferry::start(&config, &env);
    again.until("the rows added meanwhile too", || carried().len() >= 470);
    again.signal(Signal::SIGTERM);
    assert!(again.wait().success(), "{}", again.log());
    let mut ids = carried();
    ids.sort();
    let expected: Vec<(String, i64)> =
        (1..=120).map(|id| ("orders".to_string(), id)).chain((1..=350).map(|id| ("users".to_string(), id))).collect();
    assert_eq!(ids, expected, "every row of both tables once, none before initial_offset");
    // Each row's iggy_checksum is the one the Iggy server keeps for its message.
    let kept = runtime.block_on(checksums_kept(&server, "user_events", "users"));
    let written: BTreeMap<u64, u64> = runtime.block_on(async {
        let rows = pg.client().await.query("SELECT iggy_offset, iggy_checksum FROM iggy_messages", &[]).await.unwrap();
        rows.iter().map(|row| (row.get::<_, i64>(0) as u64, row.get::<_, i64>(1) as u64)).collect()
    });
    assert_eq!(written, kept);

    // The Ferry config it means: the servers by reference, never the password.
    let printed = std::process::Command::new(crate::process::ferry_binary())
        .args(["config", "from-iggy", config.to_str().unwrap()])
        .envs(env)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&printed.stdout).to_string();
    assert!(printed.status.success(), "{}", String::from_utf8_lossy(&printed.stderr));
    for words in [
        "[postgres.sink-postgres-sink]",
        "[postgres.source-postgres]",
        "env = \"IGGY_CONNECTORS_SINK_POSTGRES_PLUGIN_CONFIG_CONNECTION_STRING\"",
        "iggy_key = \"postgres\"",
        "connection = \"source-postgres\"",
    ] {
        assert!(text.contains(words), "{words}:\n{text}");
    }
    assert!(!text.contains(pg.password()), "{text}");
}
