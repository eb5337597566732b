//! The HTTP config provider against a real HTTP server (axum, on a free port), which
//! answers as the test tells it: the configs, an error, a failure that passes, one
//! that does not.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use axum::http::{HeaderMap, StatusCode, Uri};

use crate::{Config, ConnectorConfig as _};

/// The active configs as an Iggy config server answers them: a random source and a
/// stdout sink, with the fields Iggy leaves `null`.
const ACTIVE: &str = r#"{
  "sources": {
    "random": {
      "key": "random", "enabled": true, "version": 1, "name": "Random source",
      "path": "target/release/libiggy_connector_random_source", "transforms": null,
      "streams": [{"stream": "example_stream", "topic": "example_topic", "schema": "json",
                   "batch_length": 1000, "linger_time": "5ms"}],
      "plugin_config_format": "json", "plugin_config": {"interval": "100ms", "max_count": 500}
    }
  },
  "sinks": {
    "stdout": {
      "key": "stdout", "enabled": true, "version": 0, "name": "Stdout sink",
      "path": "target/release/libiggy_connector_stdout_sink", "transforms": null,
      "streams": [{"stream": "example_stream", "topics": ["example_topic"], "schema": "json",
                   "batch_length": 100, "poll_interval": "5ms", "consumer_group": null}],
      "plugin_config_format": null, "plugin_config": null
    }
  }
}"#;

/// What the server answers, in turn; when the list is empty, `otherwise`.
struct Script {
    answers: VecDeque<(StatusCode, String)>,
    otherwise: (StatusCode, String),
    /// Every request: its path and its `authorization` header.
    seen: Vec<(String, Option<String>)>,
}

/// An HTTP server on a free port of 127.0.0.1, running until dropped.
struct Server {
    url: String,
    script: Arc<Mutex<Script>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    fn start(otherwise: (StatusCode, String)) -> Server {
        let script = Arc::new(Mutex::new(Script { answers: VecDeque::new(), otherwise, seen: Vec::new() }));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let shared = script.clone();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                let app = axum::Router::new().fallback(move |uri: Uri, headers: HeaderMap| {
                    let script = shared.clone();
                    async move {
                        let mut script = script.lock().unwrap();
                        let authorization =
                            headers.get("authorization").map(|v| v.to_str().unwrap_or_default().to_string());
                        script.seen.push((uri.path().to_string(), authorization));
                        script.answers.pop_front().unwrap_or_else(|| script.otherwise.clone())
                    }
                });
                axum::serve(listener, app)
                    .with_graceful_shutdown(async {
                        stopped.await.ok();
                    })
                    .await
                    .unwrap();
            });
        });
        Server { url, script, stop: Some(stop), thread: Some(thread) }
    }

    fn then(&self, status: StatusCode, body: &str) {
        self.script.lock().unwrap().answers.push_back((status, body.to_string()));
    }

    fn seen(&self) -> Vec<(String, Option<String>)> {
        self.script.lock().unwrap().seen.clone()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            stop.send(()).ok();
        }
        if let Some(thread) = self.thread.take() {
            thread.join().ok();
        }
    }
}

/// A runtime directory whose `[connectors]` is `connectors` (and the components of
/// the random source and the stdout sink), and no connector files.
fn site(connectors: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("components")).unwrap();
    for component in ["random_source.wasm", "stdout_sink.wasm"] {
        std::fs::write(dir.path().join("components").join(component), b"\0asm").unwrap();
    }
    let runtime = dir.path().join("config.toml");
    std::fs::write(&runtime, format!("[http]\nenabled = false\n\n[connectors]\n{connectors}")).unwrap();
    (dir, runtime)
}

fn load(runtime: &Path) -> Result<Config, String> {
    Config::load_with_env(runtime, Vec::new()).map_err(|e| e.to_string())
}

#[test]
fn configs_fetched_from_a_url_are_read_as_the_same_files_would_be_after_a_failure_that_passes() {
    let wrapped = format!(r#"{{"error": null, "data": {ACTIVE}}}"#);
    let server = Server::start((StatusCode::OK, wrapped));
    server.then(StatusCode::SERVICE_UNAVAILABLE, "starting up");
    let (dir, runtime) = site(&format!(
        r#"config_type = "http"
base_url = "{}/api/"
timeout = "5s"
url_templates = {{ get_active_configs = "/v2/active" }}
request_headers = {{ authorization = "Bearer let-me-in" }}
response = {{ data_path = "data", error_path = "error" }}
retry = {{ initial_backoff = "10ms", max_attempts = 2 }}
"#,
        server.url
    ));
    let config = load(&runtime).unwrap();

    // One answer of 503, then the configs: asked twice, at the template's path, with the header.
    let seen = server.seen();
    assert_eq!(seen.len(), 2, "{seen:?}");
    for (path, authorization) in &seen {
        assert_eq!((path.as_str(), authorization.as_deref()), ("/api/v2/active", Some("Bearer let-me-in")));
    }

    let [random] = &config.sources[..] else { panic!("{:?}", config.sources) };
    assert_eq!(random.key, "random");
    assert_eq!(random.plugin_config_json().unwrap(), r#"{"interval":"100ms","max_count":500}"#);
    assert_eq!(random.path, dir.path().join("components/random_source.wasm"));
    assert_eq!(random.streams[0].topic, "example_topic");
    let [stdout] = &config.sinks[..] else { panic!("{:?}", config.sinks) };
    // A `null` consumer group is Iggy's default one, as in a file without it.
    assert_eq!(stdout.consumer_group.as_deref(), Some("iggy-connect-sink-stdout"));
    assert_eq!((stdout.batch_length, stdout.poll_interval), (100, std::time::Duration::from_millis(5)));
    assert_eq!(stdout.topics().collect::<Vec<_>>(), [("example_stream", "example_topic")]);

    // Their versions are the config server's to show.
    let error = crate::iggy_runtime::versions(&runtime, ferry_contract::Role::Source, "random", &[]).unwrap_err();
    assert!(
        error.contains("kept by the config server (active ones at ") && error.contains("/api/v2/active"),
        "{error}"
    );

    // What `ferry config from-iggy` prints is a Ferry config with the fetched connectors in it.
    let text = std::fs::read_to_string(&runtime).unwrap();
    let ferry = crate::iggy_runtime::as_ferry(&runtime, &text, &[]).unwrap().expect("an Iggy runtime file");
    let native = dir.path().join("ferry.toml");
    std::fs::write(&native, &ferry).unwrap();
    let again = load(&native).unwrap();
    assert_eq!(format!("{:?}", again.sinks), format!("{:?}", config.sinks), "{ferry}");
    assert_eq!(format!("{:?}", again.sources), format!("{:?}", config.sources), "{ferry}");
}

#[test]
fn the_servers_error_a_refusal_and_a_server_that_never_answers_are_each_named() {
    // The server's own error, at error_path: said as it is, with the URL.
    let server = Server::start((StatusCode::OK, r#"{"error": {"message": "no such tenant"}, "data": null}"#.into()));
    let (_dir, runtime) = site(&format!(
        "config_type = \"http\"\nbase_url = \"{}\"\nresponse = {{ data_path = \"data\", error_path = \"error.message\" \
         }}\n",
        server.url
    ));
    let error = load(&runtime).unwrap_err();
    assert!(
        error.contains(&format!("GET {}/configs/active", server.url))
            && error.contains("the server answered with an error at `error.message`: no such tenant"),
        "{error}"
    );

    // The server's words are escaped and bounded before they reach a terminal.
    let loud = format!("\u{1b}[2J{}", "x".repeat(5000));
    let server = Server::start((StatusCode::OK, serde_json::json!({ "error": loud, "data": null }).to_string()));
    let (_dir, runtime) = site(&format!(
        "config_type = \"http\"\nbase_url = \"{}\"\nresponse = {{ data_path = \"data\", error_path = \"error\" }}\n",
        server.url
    ));
    let error = load(&runtime).unwrap_err();
    assert!(!error.contains('\u{1b}') && error.len() < 1000, "{error}");
    let server = Server::start((StatusCode::INTERNAL_SERVER_ERROR, loud.clone()));
    let (_dir, runtime) =
        site(&format!("config_type = \"http\"\nbase_url = \"{}\"\nretry = {{ enabled = false }}\n", server.url));
    let error = load(&runtime).unwrap_err();
    assert!(error.contains("HTTP 500") && !error.contains('\u{1b}') && error.len() < 1000, "{error}");

    // A refusal will not change: asked once, not retried.
    let server = Server::start((StatusCode::UNAUTHORIZED, "who are you?".into()));
    let (_dir, runtime) = site(&format!(
        "config_type = \"http\"\nbase_url = \"{}\"\nretry = {{ initial_backoff = \"1ms\" }}\n",
        server.url
    ));
    let error = load(&runtime).unwrap_err();
    assert!(error.contains("HTTP 401 Unauthorized: who are you?"), "{error}");
    assert_eq!(server.seen().len(), 1, "a 401 is not retried");

    // A failure that does not pass: retried max_attempts times, then named with the count.
    let server = Server::start((StatusCode::BAD_GATEWAY, "upstream down".into()));
    let (_dir, runtime) = site(&format!(
        "config_type = \"http\"\nbase_url = \"{}\"\nretry = {{ initial_backoff = \"1ms\", max_backoff = \"2ms\", \
         max_attempts = 3 }}\n",
        server.url
    ));
    let error = load(&runtime).unwrap_err();
    assert!(error.contains("HTTP 502 Bad Gateway: upstream down (after 4 attempts)"), "{error}");
    assert_eq!(server.seen().len(), 4);

    // Nobody listening: the connection's failure, retried, then named.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    let (_dir, runtime) = site(&format!(
        "config_type = \"http\"\nbase_url = \"http://{closed}\"\nretry = {{ initial_backoff = \"1ms\", max_attempts \
         = 1 }}\n"
    ));
    let error = load(&runtime).unwrap_err();
    assert!(
        error.contains(&format!("GET http://{closed}/configs/active")) && error.contains("(after 2 attempts)"),
        "{error}"
    );
}

#[test]
fn a_bad_answer_or_a_bad_config_in_it_is_named_by_the_url_and_the_connector() {
    let cases: [(&str, String, &[&str]); 5] = [
        ("not JSON", "<html>".into(), &["the answer is not JSON"]),
        ("no data at data_path", r#"{"result": {}}"#.into(), &["nothing at data_path `data`", "keys {result}"]),
        (
            "a typo in a config",
            format!(r#"{{"data": {}}}"#, ACTIVE.replace("\"batch_length\": 100,", "\"batch_lenght\": 100,")),
            &["/configs/active sinks.stdout", "unknown field `batch_lenght`"],
        ),
        (
            "a key unlike the one it is listed under",
            format!(r#"{{"data": {}}}"#, ACTIVE.replace("\"key\": \"stdout\"", "\"key\": \"other\"")),
            &["sinks.stdout: its key is \"other\", not the `stdout` it is listed under"],
        ),
        (
            "avro with no Avro schema",
            format!(
                r#"{{"data": {}}}"#,
                ACTIVE.replace(
                    "\"topics\": [\"example_topic\"], \"schema\": \"json\"",
                    "\"topics\": [\"example_topic\"], \"schema\": \"avro\""
                )
            ),
            &["sinks.stdout: [[streams]] 1 schema: \"avro\" needs the Avro schema"],
        ),
    ];
    for (case, answer, words) in cases {
        let server = Server::start((StatusCode::OK, answer));
        let (_dir, runtime) = site(&format!(
            "config_type = \"http\"\nbase_url = \"{}\"\nresponse = {{ data_path = \"data\" }}\n",
            server.url
        ));
        let error = load(&runtime).expect_err(case);
        for word in words {
            assert!(error.contains(word), "{case}: {word:?} in {error}");
        }
    }

    // The provider's own keys are checked before anything is asked.
    for (connectors, words) in [
        ("base_url = \"ftp://x\"", "base_url \"ftp://x\" is not an http:// or https:// URL"),
        ("base_url = \"http://x\"\nconfig_dir = \"c\"", "unknown field `config_dir`"),
        (
            "base_url = \"http://x\"\nurl_templates = { get_everything = \"/\" }",
            "url_templates.get_everything: not one",
        ),
        ("base_url = \"http://x\"\ntimeout = 5", "a duration needs a unit"),
    ] {
        let (_dir, runtime) = site(&format!("config_type = \"http\"\n{connectors}\n"));
        let error = load(&runtime).unwrap_err();
        assert!(error.contains("[connectors] (config_type = \"http\")") && error.contains(words), "{words}: {error}");
    }
}
