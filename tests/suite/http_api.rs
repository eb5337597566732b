//! The HTTP API and metrics of `ferry run` (`[http]`), run as a process on a free
//! port: `/health` follows the connectors (503 naming the one that is not running,
//! 200 once every one is), a trap and NACKs show in `/health` and move the counters
//! of `/metrics`, `/sources/{key}`, `/sinks/{key}` and their `/state` say what the
//! status file and `ferry state show` say, errors are JSON naming what is wrong, the
//! API key is required, and no secret appears in any answer, even when a guest
//! repeats its secret in its error.

use nix::sys::signal::Signal;
use serde_json::{Value, json};

use crate::process::{Ferry, Site, ferry, file_sink_table};
use ferry_tests::components::{FAULTY_SOURCE, FILE_SINK, HOSTILE_SOURCE};
use ferry_tests::free_port;
use ferry_tests::http_client::{Response, get, get_tls, get_until, request};

/// The `[runtime]`, `[state]` and `[local_log]` of every config here.
pub(crate) const BASE: &str = r#"
[runtime]
shutdown_grace_period = "20s"

[state]
path = "state"

[local_log]
path = "log"
"#;

/// [`BASE`] and `[http]`.
pub(crate) fn head(port: u16, http: &str) -> String {
    format!(
        r#"{BASE}
[http]
address = "127.0.0.1:{port}"
{http}
"#
    )
}

/// A faulty source `key` delivering to `demo/<key>`, with these extra settings.
pub(crate) fn faulty(key: &str, plugin_config: &str, settings: &str) -> String {
    format!(
        r#"
[[sources]]
key = "{key}"
path = "{FAULTY_SOURCE}"
poll_interval = "5ms"
streams = [{{ stream = "demo", topic = "{key}" }}]
plugin_config = {{ {plugin_config} }}
{settings}
"#
    )
}

/// Start ferry and wait until its API listens.
pub(crate) fn start(site: &Site, text: &str, env: &[(&str, &str)]) -> Ferry {
    let config = site.config("ferry.toml", text);
    let mut run = Ferry::start(&config, env);
    run.wait_until_logged(&["HTTP API listening on http://127.0.0.1:"]);
    run
}

/// `/health`'s list of connectors that are not running, by key.
fn not_running(health: &Response) -> Vec<Value> {
    health.json()["not_running"].as_array().cloned().unwrap_or_default()
}

fn keys(entries: &[Value]) -> Vec<&str> {
    entries.iter().map(|e| e["key"].as_str().unwrap()).collect()
}

/// The value of the sample `name{labels...}` in Prometheus text, if it is there.
fn sample(metrics: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    metrics.lines().find_map(|line| {
        let rest = line.strip_prefix(name)?.strip_prefix('{')?;
        let (set, value) = rest.split_once("} ")?;
        labels
            .iter()
            .all(|(k, v)| set.split(',').any(|pair| pair == format!("{k}=\"{v}\"")))
            .then(|| value.parse().ok())?
    })
}

pub(crate) fn sample_of(metrics: &str, name: &str, key: &str, more: &[(&str, &str)]) -> f64 {
    let mut labels = vec![("connector_key", key)];
    labels.extend_from_slice(more);
    sample(metrics, name, &labels).unwrap_or_else(|| panic!("no {name} for {key} {more:?} in:\n{metrics}"))
}

#[test]
fn health_is_503_naming_a_connector_until_it_runs_then_200() {
    let site = Site::new();
    std::fs::create_dir(site.path("gate")).unwrap();
    let port = free_port();
    let address = format!("127.0.0.1:{port}");
    let text = format!(
        "{}{}{}",
        head(port, ""),
        faulty(
            "gated",
            r#"max_count = 50, open_when_exists = "/gate/open""#,
            r#"restart_backoff = { initial = "20ms", max = "50ms" }
grants = { dirs = [{ host = "gate", guest = "/gate" }] }"#
        ),
        faulty("steady", "max_count = 50", ""),
    );
    let mut run = start(&site, &text, &[]);

    // `gated` cannot have run yet: the gate does not exist.
    let first = get(&address, "/health", &[]).unwrap();
    assert_eq!(first.status, 503, "{first:?}");
    assert_eq!(first.json()["status"], "unhealthy");
    let gated = not_running(&first).into_iter().find(|e| e["key"] == "gated").expect("gated is named");
    assert!(["not-started", "starting", "failed"].contains(&gated["status"].as_str().unwrap()), "{gated}");

    // Once `steady` runs, `gated` alone is named, failing to open and restarting.
    let health = get_until(&address, "/health", &[], |r| {
        let listed = not_running(r);
        keys(&listed) == ["gated"] && listed[0]["status"] == "failed"
    });
    assert_eq!(health.status, 503);
    let gated = &not_running(&health)[0];
    assert_eq!(gated["connector_type"], "source");
    let error = gated["last_error"].as_str().unwrap();
    assert!(error.contains("configured to wait for /gate/open"), "the error says why: {error}");
    // Every connector has been through its first start: ferry is ready, not healthy.
    let ready = get_until(&address, "/ready", &[], |r| r.status == 200);
    assert_eq!(ready.json(), json!({ "status": "ready" }));

    std::fs::write(site.path("gate/open"), "").unwrap();
    let healthy = get_until(&address, "/health", &[], |r| r.status == 200);
    assert_eq!(healthy.json(), json!({ "status": "healthy", "connectors": 2 }));
    let gated = get(&address, "/sources/gated", &[]).unwrap().json();
    assert!(gated["running"].as_bool().unwrap() && gated["restarts"].as_u64().unwrap() >= 1, "{gated}");

    run.signal(Signal::SIGTERM);
    assert!(run.wait().success(), "{}", run.log());
    assert!(get(&address, "/health", &[]).is_err(), "the API stopped with ferry");
}

#[test]
fn a_trap_and_nacks_show_in_health_and_move_the_metrics() {
    let site = Site::new();
    let port = free_port();
    let address = format!("127.0.0.1:{port}");
    let text = format!(
        r#"{}{}{}
[[sources]]
key = "rejected"
path = "{HOSTILE_SOURCE}"
poll_interval = "5ms"
max_consecutive_nacks = 100000
nack_backoff = {{ initial = "1ms", max = "5ms" }}
streams = [{{ stream = "demo", topic = "rejected" }}]
plugin_config = {{ mode = "too_many_messages", n = 30, good_batches = 2, messages_per_batch = 5 }}
limits = {{ max_messages_per_batch = 20 }}
"#,
        head(port, ""),
        // Traps on its third poll, and then waits a day to restart.
        faulty(
            "trapper",
            "max_count = 1000, trap_on_poll = 3",
            r#"restart_backoff = { initial = "1day", max = "1day" }"#
        ),
        faulty("steady", "max_count = 100", ""),
    );
    let mut run = start(&site, &text, &[]);

    let nacks =
        |m: &str| sample(m, "ferry_connector_nacks_total", &[("connector_key", "rejected"), ("reason", "rejected")]);
    let first = get_until(&address, "/metrics", &[], |r| {
        let m = &r.body;
        nacks(m).is_some_and(|n| n >= 3.0)
            && sample(m, "ferry_connector_traps_total", &[("connector_key", "trapper")]) == Some(1.0)
            && sample(m, "iggy_connector_messages_sent_total", &[("connector_key", "steady")]) == Some(100.0)
            // The last ACK is timed once the guest has answered it, after the count above.
            && sample(m, "iggy_connector_stage_duration_seconds_count", &[("connector_key", "steady"), ("stage", "ack")])
                == Some(20.0)
    });
    assert!(first.header("content-type").unwrap().starts_with("application/openmetrics-text"), "{first:?}");
    let m = &first.body;
    let source = [("connector_type", "source"), ("tenant", "")];

    // The flow: every message of `steady` produced, delivered, committed, each stage timed.
    assert_eq!(sample_of(m, "iggy_connector_messages_produced_total", "steady", &source), 100.0);
    assert_eq!(sample_of(m, "iggy_connector_errors_total", "steady", &[]), 0.0);
    assert_eq!(sample_of(m, "ferry_connector_committed_generation", "steady", &[]), 20.0);
    for stage in ["deliver", "state_save", "ack", "total"] {
        let count = sample_of(m, "iggy_connector_stage_duration_seconds_count", "steady", &[("stage", stage)]);
        assert_eq!(count, 20.0, "stage {stage}: one per batch");
        let all =
            sample_of(m, "iggy_connector_stage_duration_seconds_bucket", "steady", &[("stage", stage), ("le", "+Inf")]);
        assert_eq!(all, count, "stage {stage}: the +Inf bucket holds every observation");
    }
    assert!(sample_of(m, "iggy_connector_stage_duration_seconds_count", "steady", &[("stage", "poll")]) > 20.0);

    // The trap: counted, the connector failed (waiting a day), nothing restarted yet.
    assert_eq!(sample_of(m, "iggy_connector_messages_sent_total", "trapper", &[]), 10.0, "two batches before the trap");
    assert_eq!(sample_of(m, "ferry_connector_restarts_total", "trapper", &[]), 0.0);
    assert_eq!(sample_of(m, "ferry_connector_phase", "trapper", &[("phase", "failed")]), 1.0);
    assert!(sample_of(m, "iggy_connector_errors_total", "trapper", &[]) >= 1.0);

    // The NACKs: the oversized batches were produced, never sent; the two good ones were.
    let nacked = nacks(m).unwrap();
    assert_eq!(sample_of(m, "iggy_connector_messages_sent_total", "rejected", &[]), 10.0);
    let produced = sample_of(m, "iggy_connector_messages_produced_total", "rejected", &[]);
    assert!(produced >= 10.0 + 30.0 * nacked, "{produced} produced for {nacked} NACKs of 30");
    assert!(sample_of(m, "iggy_connector_errors_total", "rejected", &[]) >= nacked);
    // ... and they keep coming: the counter moves between scrapes.
    get_until(&address, "/metrics", &[], |r| nacks(&r.body).is_some_and(|n| n > nacked));

    // `/health` names the trapped connector, with its phase and the trap; the one
    // being NACKed is running (its NACKs are in the metrics), the others too.
    let health = get(&address, "/health", &[]).unwrap();
    assert_eq!(health.status, 503, "{health:?}");
    let listed = not_running(&health);
    assert_eq!(keys(&listed), ["trapper"], "{listed:?}");
    assert_eq!(listed[0]["status"], "failed");
    assert!(listed[0]["last_error"].as_str().unwrap().contains("the guest trapped in `poll`"), "{listed:?}");

    // `/stats`: the same counters in Iggy's shape.
    let stats = get(&address, "/stats", &[]).unwrap().json();
    assert_eq!((stats["sources_total"].as_u64(), stats["sources_running"].as_u64()), (Some(3), Some(2)), "{stats}");
    assert!(stats["memory_usage"].as_u64().unwrap() > 1 << 20, "{stats}");
    let trapper = stats["connectors"].as_array().unwrap().iter().find(|c| c["key"] == "trapper").unwrap();
    assert_eq!((trapper["status"].as_str(), trapper["traps"].as_u64()), (Some("failed"), Some(1)), "{trapper}");
    assert_eq!(trapper["messages_sent"], 10);

    run.signal(Signal::SIGTERM);
    assert!(run.wait().success(), "{}", run.log());
}

pub(crate) const API_KEY: &str = "k3y-8d1f-for-the-http-api";
const SECRET: &str = "s3cr3t-51aa-a-guest-repeats";

#[test]
fn the_api_agrees_with_the_state_store_requires_its_key_and_shows_no_secret() {
    let site = Site::new();
    std::fs::create_dir(site.path("archive-out")).unwrap();
    let port = free_port();
    let address = format!("127.0.0.1:{port}");
    let text = format!(
        "{}{}{}{}",
        head(port, r#"api_key = { env = "FERRY_TEST_API_KEY" }"#),
        faulty("feed", "max_count = 60, messages_per_batch = 6", ""),
        // Refuses to open with its secret in the error: its last_error holds it.
        faulty(
            "leaky",
            "max_count = 10",
            r#"restart_backoff = { initial = "1day", max = "1day" }
secrets = { open_error = { env = "FERRY_TEST_SECRET" } }"#
        ),
        file_sink_table("archive", "", ""),
    );
    let mut run = start(&site, &text, &[("FERRY_TEST_API_KEY", API_KEY), ("FERRY_TEST_SECRET", SECRET)]);
    let key = [("api-key", API_KEY)];

    // Without the key, or with another, nothing is answered but 401.
    for path in ["/health", "/metrics", "/sources", "/sources/feed/state", "/sinks/archive", "/nowhere"] {
        for headers in [&[][..], &[("api-key", "k3y-8d1f-for-the-http-apX")][..]] {
            let answer = get(&address, path, headers).unwrap();
            assert_eq!(answer.status, 401, "{path} {headers:?}: {answer:?}");
            assert!(answer.json()["error"].as_str().unwrap().contains("api-key"), "{answer:?}");
        }
    }

    // Let everything settle: all 60 messages delivered and written, `leaky` failed.
    get_until(&address, "/sinks/archive", &key, |r| {
        let body = r.json();
        body["messages_delivered"] == 60 && body["status"] == "idle"
    });
    get_until(&address, "/sources/feed", &key, |r| r.json()["status"] == "idle");
    get_until(&address, "/sources/leaky", &key, |r| r.json()["status"] == "failed");

    // The committed state, as `ferry state show` reads it.
    let config = site.path("ferry.toml");
    let shown = |connector: &str| -> Value {
        let out = ferry(&["state", "show", config.to_str().unwrap(), connector, "--json"]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let (feed_shown, archive_shown) = (shown("feed"), shown("archive"));
    assert_eq!(feed_shown["generation"], 10, "{feed_shown}");

    let feed = get(&address, "/sources/feed", &key).unwrap().json();
    assert_eq!(feed["committed"]["generation"], feed_shown["generation"], "{feed}");
    assert_eq!(feed["committed"]["committed_at"], feed_shown["committed_at"], "{feed}");
    assert_eq!(feed["committed_generation"], feed_shown["generation"]);
    assert_eq!(feed["streams"], json!([{ "stream": "demo", "topic": "feed" }]));
    let feed_state = get(&address, "/sources/feed/state", &key).unwrap().json();
    let committed = &feed_state["committed"];
    assert_eq!(committed["generation"], feed_shown["generation"]);
    assert_eq!(committed["state_text"], feed_shown["state"]);
    assert_eq!(committed["state_text"], r#"{"next_seq":60}"#);
    assert_eq!(committed["state_base64"], "eyJuZXh0X3NlcSI6NjB9", "base64 of the same bytes");
    assert_eq!(committed["delivered"], feed_shown["delivered"]);

    let archive_state = get(&address, "/sinks/archive/state", &key).unwrap().json();
    assert_eq!(archive_state["committed"]["generation"], archive_shown["generation"], "{archive_state}");
    assert_eq!(archive_state["committed"]["offsets"], json!({ "demo/feed": 60 }));
    assert_eq!(archive_state["committed"]["state_text"], archive_shown["state"]);

    // The sink's side of the metrics: every message read and written, each write timed.
    let metrics = get(&address, "/metrics", &key).unwrap().body;
    assert_eq!(
        sample_of(&metrics, "iggy_connector_messages_consumed_total", "archive", &[("connector_type", "sink")]),
        60.0
    );
    assert_eq!(sample_of(&metrics, "iggy_connector_messages_processed_total", "archive", &[]), 60.0);
    assert_eq!(sample_of(&metrics, "ferry_connector_dead_lettered_total", "archive", &[]), 0.0);
    let batches = sample_of(&metrics, "ferry_connector_batches_total", "archive", &[]);
    let writes = sample_of(&metrics, "iggy_connector_stage_duration_seconds_count", "archive", &[("stage", "write")]);
    let saves =
        sample_of(&metrics, "iggy_connector_stage_duration_seconds_count", "archive", &[("stage", "state_save")]);
    assert!(
        batches >= 1.0 && writes == batches && saves == batches,
        "{batches} batches, {writes} writes, {saves} saves"
    );

    // The status file says what the API says, once it has been written since.
    let status_of = |connector: &str| -> Value {
        let out = ferry(&["status", config.to_str().unwrap(), "--json"]);
        let status: Value = serde_json::from_slice(&out.stdout).unwrap();
        status["connectors"].as_array().unwrap().iter().find(|c| c["key"] == connector).cloned().unwrap()
    };
    const FIELDS: [&str; 11] = [
        "status",
        "tenant",
        "instances",
        "batches_acked",
        "messages_delivered",
        "bytes_delivered",
        "nacks",
        "traps",
        "guest_errors",
        "committed_generation",
        "messages_polled",
    ];
    for (connector, path) in [("feed", "/sources/feed"), ("archive", "/sinks/archive"), ("leaky", "/sources/leaky")] {
        let api = get(&address, path, &key).unwrap().json();
        // The file is rewritten shortly after each change: wait for it to catch up.
        let deadline = std::time::Instant::now() + crate::process::PATIENCE;
        let mut file = status_of(connector);
        while FIELDS.iter().any(|f| api[f] != file[f]) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(50));
            file = status_of(connector);
        }
        for field in FIELDS {
            assert_eq!(api[field], file[field], "{connector}.{field}: API {api} vs status file {file}");
        }
    }

    // Errors are JSON naming what is wrong.
    for (method, path, status, words) in [
        ("GET", "/sources/nope", 404, "no source has the key `nope`"),
        ("GET", "/sinks/feed", 404, "`feed` is a source, not a sink"),
        ("GET", "/sources/archive/state", 404, "`archive` is a sink, not a source"),
        ("GET", "/nowhere", 404, "no endpoint GET /nowhere"),
        ("PUT", "/sources/feed/state", 405, "/sources/feed/state does not answer PUT"),
        ("POST", "/sources/feed/explode", 404, "no action `explode`"),
    ] {
        let answer = request(&address, method, path, &key).unwrap();
        assert_eq!(answer.status, status, "{method} {path}: {answer:?}");
        let error = answer.json()["error"].as_str().unwrap().to_string();
        assert!(error.contains(words), "{method} {path}: {error}");
    }

    // No secret in any answer, though `leaky`'s error carried one.
    let leaky = get(&address, "/sources/leaky", &key).unwrap().json();
    assert!(
        leaky["last_error"].as_str().unwrap().contains("configured to refuse to open: [redacted]"),
        "the secret was there to leak, and was taken out: {leaky}"
    );
    for path in [
        "/health",
        "/ready",
        "/stats",
        "/metrics",
        "/sources",
        "/sinks",
        "/sources/leaky",
        "/sources/leaky/state",
        "/sources/feed",
        "/sources/feed/state",
        "/sinks/archive",
        "/sinks/archive/state",
    ] {
        let answer = get(&address, path, &key).unwrap();
        assert!(answer.status == 200 || path == "/health", "{path}: {answer:?}");
        for secret in [SECRET, API_KEY] {
            assert!(!answer.body.contains(secret), "{path} shows a secret: {}", answer.body);
        }
    }

    run.signal(Signal::SIGTERM);
    assert!(run.wait().success(), "{}", run.log());
}

#[test]
fn an_address_ferry_cannot_listen_on_stops_it_naming_the_key() {
    let site = Site::new();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let config = site.config("ferry.toml", &format!("{}{}", head(port, ""), faulty("feed", "max_count = 5", "")));
    let mut run = Ferry::start(&config, &[]);
    assert!(!run.wait().success(), "{}", run.log());
    let log = run.log();
    for words in ["ferry.toml", "[http] address", &format!("cannot listen on 127.0.0.1:{port}")] {
        assert!(log.contains(words), "the error says {words:?}:\n{log}");
    }
    drop(taken);
}

/// A self-signed certificate for `localhost`: its PEM, its key's PEM, and its DER.
pub(crate) fn certificate() -> (String, String, Vec<u8>) {
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    (certified.cert.pem(), certified.signing_key.serialize_pem(), certified.cert.der().to_vec())
}

#[test]
fn with_tls_the_api_speaks_https_only() {
    let site = Site::new();
    let (cert, key, der) = certificate();
    std::fs::create_dir(site.path("tls")).unwrap();
    std::fs::write(site.path("tls/cert.pem"), cert).unwrap();
    std::fs::write(site.path("tls/key.pem"), key).unwrap();
    let port = free_port();
    let address = format!("127.0.0.1:{port}");
    let http = r#"api_key = { env = "FERRY_TEST_API_KEY" }
tls = { cert_file = "tls/cert.pem", key_file = "tls/key.pem" }"#;
    let text = format!("{}{}", head(port, http), faulty("feed", "max_count = 30", ""));
    let config = site.config("ferry.toml", &text);
    let mut run = Ferry::start(&config, &[("FERRY_TEST_API_KEY", API_KEY)]);
    run.wait_until_logged(&[&format!("HTTP API listening on https://{address}")]);

    let feed = get_tls(&address, "/sources/feed", &[("api-key", API_KEY)], &der).unwrap();
    assert_eq!(feed.status, 200, "{feed:?}");
    assert_eq!(feed.json()["key"], "feed");
    let refused = get_tls(&address, "/sources/feed", &[], &der).unwrap();
    assert_eq!(refused.status, 401, "the key is still required over TLS: {refused:?}");
    assert!(get(&address, "/health", &[]).is_err(), "plain HTTP gets no answer");
    let (_, _, stranger) = certificate();
    assert!(get_tls(&address, "/health", &[], &stranger).is_err(), "a client trusting another certificate refuses it");

    run.signal(Signal::SIGTERM);
    assert!(run.wait().success(), "{}", run.log());

    // A key file that holds no key, and a certificate file that is not there: each
    // stops ferry run, naming the key and the file.
    for (cert_file, key_file, words) in [
        ("tls/cert.pem", "tls/cert.pem", ["[http] tls.key_file", "tls/cert.pem: holds no private key"]),
        ("tls/missing.pem", "tls/key.pem", ["[http] tls.cert_file", "tls/missing.pem: cannot open it"]),
    ] {
        let http = format!(r#"tls = {{ cert_file = "{cert_file}", key_file = "{key_file}" }}"#);
        let config =
            site.config("ferry.toml", &format!("{}{}", head(port, &http), faulty("feed", "max_count = 30", "")));
        let mut run = Ferry::start(&config, &[]);
        assert!(!run.wait().success(), "{}", run.log());
        let log = run.log();
        for words in words.iter().chain(&["ferry.toml"]) {
            assert!(log.contains(words), "the error says {words:?}:\n{log}");
        }
    }
}

#[test]
fn cors_lets_the_pages_of_the_origins_it_names_call_the_api_and_no_other() {
    let site = Site::new();
    let port = free_port();
    let address = format!("127.0.0.1:{port}");
    let http = r#"api_key = { env = "FERRY_TEST_API_KEY" }

[http.cors]
enabled = true
allowed_origins = ["https://console.example"]
allowed_methods = ["get", "POST"]
allowed_headers = ["api-key", "content-type"]
exposed_headers = ["content-length"]
"#;
    let text = format!("{}{}", head(port, http), faulty("feed", "max_count = 10", ""));
    let mut run = start(&site, &text, &[("FERRY_TEST_API_KEY", API_KEY)]);
    let origin = ("origin", "https://console.example");

    // A browser's preflight carries no key: it is answered, naming what may follow.
    let preflight = [origin, ("access-control-request-method", "POST"), ("access-control-request-headers", "api-key")];
    let answer = request(&address, "OPTIONS", "/reload", &preflight).unwrap();
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(answer.header("access-control-allow-origin"), Some("https://console.example"), "{answer:?}");
    let methods = answer.header("access-control-allow-methods").unwrap_or_default();
    assert!(methods.contains("GET") && methods.contains("POST"), "{answer:?}");
    assert!(answer.header("access-control-allow-headers").unwrap_or_default().contains("api-key"), "{answer:?}");

    // The request itself still needs the key, and its answer may be read by the page.
    let answer = get(&address, "/health", &[origin]).unwrap();
    assert_eq!(answer.status, 401, "{answer:?}");
    let answer = get(&address, "/health", &[origin, ("api-key", API_KEY)]).unwrap();
    assert_eq!(answer.header("access-control-allow-origin"), Some("https://console.example"), "{answer:?}");
    assert_eq!(answer.header("access-control-expose-headers"), Some("content-length"), "{answer:?}");

    // Another origin's page may not read it: no header lets it.
    let other = ("origin", "https://elsewhere.example");
    let answer = get(&address, "/health", &[other, ("api-key", API_KEY)]).unwrap();
    assert_eq!(answer.header("access-control-allow-origin"), None, "{answer:?}");
    let answer = request(&address, "OPTIONS", "/health", &[other, ("access-control-request-method", "GET")]).unwrap();
    assert_eq!(answer.header("access-control-allow-origin"), None, "{answer:?}");
    run.signal(Signal::SIGTERM);
    assert!(run.wait().success(), "{}", run.log());

    // Without [http.cors], a preflight is a request like another: 401 without the key.
    let port = free_port();
    let site = Site::new();
    let text = format!(
        "{}{}",
        head(port, r#"api_key = { env = "FERRY_TEST_API_KEY" }"#),
        faulty("feed", "max_count = 10", "")
    );
    let mut run = start(&site, &text, &[("FERRY_TEST_API_KEY", API_KEY)]);
    let answer = request(&format!("127.0.0.1:{port}"), "OPTIONS", "/reload", &preflight).unwrap();
    assert_eq!((answer.status, answer.header("access-control-allow-origin")), (401, None), "{answer:?}");
    run.signal(Signal::SIGTERM);
    assert!(run.wait().success(), "{}", run.log());
}

#[test]
fn a_connectors_plugin_config_and_transforms_are_shown_as_iggys_runtime_shows_them() {
    let site = Site::new();
    let port = free_port();
    let address = format!("127.0.0.1:{port}");
    let transforms = r#"transforms = { add_fields = { enabled = true, fields = [{ key = "origin", value.static = "feed" }] }, delete_fields = { enabled = false, fields = ["x"] } }"#;
    let bare = format!(
        r#"
[[sinks]]
key = "bare"
path = "{FILE_SINK}"
streams = [{{ stream = "demo", topics = ["feed"] }}]
"#
    );
    let text =
        format!("{}{}{bare}", head(port, ""), faulty("feed", "max_count = 10, messages_per_batch = 2", transforms));
    let mut run = start(&site, &text, &[]);

    // Without `?format=` (and without plugin_config_format), TOML, as Iggy's runtime.
    let answer = get(&address, "/sources/feed/configs/plugin", &[]).unwrap();
    assert_eq!((answer.status, answer.header("content-type")), (200, Some("application/toml")), "{answer:?}");
    let table: toml::Table = toml::from_str(&answer.body).unwrap_or_else(|e| panic!("{e}: {answer:?}"));
    assert_eq!(table.get("max_count").and_then(toml::Value::as_integer), Some(10), "{answer:?}");
    let answer = get(&address, "/sources/feed/configs/plugin?format=JSON", &[]).unwrap();
    assert_eq!(answer.header("content-type"), Some("application/json"), "{answer:?}");
    assert_eq!(answer.json(), json!({"max_count": 10, "messages_per_batch": 2}));
    let answer = get(&address, "/sources/feed/configs/plugin?format=yaml", &[]).unwrap();
    assert_eq!(answer.header("content-type"), Some("application/yaml"), "{answer:?}");
    assert!(answer.body.lines().any(|line| line == "max_count: 10"), "{answer:?}");
    let answer = get(&address, "/sources/feed/configs/plugin?format=xml", &[]).unwrap();
    assert_eq!(answer.status, 400, "{answer:?}");
    assert!(answer.json()["error"].as_str().unwrap().contains("none of json, yaml, toml, text"), "{answer:?}");
    let answer = get(&address, "/sinks/bare/configs/plugin", &[]).unwrap();
    assert_eq!(answer.status, 404, "{answer:?}");
    assert_eq!(answer.json()["error"], "the sink `bare` has no plugin_config");

    // The transforms that run, in order (a disabled one does not).
    let answer = get(&address, "/sources/feed/transforms", &[]).unwrap();
    assert_eq!(
        answer.json(),
        json!([{"type": "add_fields", "config": {"enabled": true, "fields": [{"key": "origin", "value": {"static": "feed"}}]}}])
    );
    assert_eq!(get(&address, "/sinks/bare/transforms", &[]).unwrap().json(), json!([]));
    let answer = get(&address, "/sinks/feed/transforms", &[]).unwrap();
    assert_eq!(answer.status, 404, "{answer:?}");
    assert!(answer.json()["error"].as_str().unwrap().contains("`feed` is a source, not a sink"), "{answer:?}");
    run.signal(Signal::SIGTERM);
    run.wait();
}

/// The metric names a dashboard's queries (and variable queries) ask for.
fn metrics_asked_for(dashboard: &Value) -> std::collections::BTreeSet<String> {
    let mut queries: Vec<&str> = Vec::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            queries.push(target["expr"].as_str().unwrap());
        }
    }
    for variable in dashboard["templating"]["list"].as_array().unwrap() {
        if variable["type"] == "query" {
            queries.push(variable["query"].as_str().unwrap());
        }
    }
    queries
        .iter()
        .flat_map(|query| query.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')))
        .filter(|word| ["iggy_", "ferry_", "process_"].iter().any(|prefix| word.starts_with(prefix)))
        .map(str::to_string)
        .collect()
}

#[test]
fn the_grafana_dashboard_asks_only_for_metrics_ferry_serves() {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/grafana/ferry-dashboard.json"))
            .unwrap();
    let dashboard: Value = serde_json::from_str(&text).unwrap();
    let asked = metrics_asked_for(&dashboard);
    assert!(asked.len() >= 15, "{asked:?}");

    let site = Site::new();
    std::fs::create_dir(site.path("archive-out")).unwrap();
    let port = free_port();
    let address = format!("127.0.0.1:{port}");
    let text = format!(
        "{}{}{}",
        head(port, ""),
        faulty("feed", "max_count = 10, messages_per_batch = 2", ""),
        file_sink_table("archive", "", "")
    );
    let mut run = start(&site, &text, &[]);
    let metrics = get_until(&address, "/metrics", &[], |m| m.body.contains("iggy_connector_messages_sent_total{")).body;
    // A family is declared by its `# TYPE` line; a counter's samples add `_total`, a
    // histogram's `_bucket`, `_sum` and `_count` (a gauge may be named `..._total`).
    for name in &asked {
        let family = ["_total", "_bucket", "_sum", "_count"].iter().find_map(|suffix| name.strip_suffix(suffix));
        let declared = |family: &str| metrics.contains(&format!("# TYPE {family} "));
        assert!(
            declared(name) || family.is_some_and(declared),
            "the dashboard asks for {name}, not served:\n{metrics}"
        );
    }
    run.signal(Signal::SIGTERM);
    run.wait();
}
