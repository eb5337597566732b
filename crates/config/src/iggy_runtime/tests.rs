//! Iggy runtime directories, written as Iggy's documentation shows them, read as
//! the Ferry configs they mean; and each refusal naming the file and the key.

use std::path::{Path, PathBuf};

use crate::{Config, ConnectorConfig};
use ferry_contract::Role;

const RUNTIME: &str = r#"
[http]
enabled = true
address = "127.0.0.1:8181"
api_key = ""

[http.cors]
enabled = false
allowed_origins = ["*"]

[http.tls]
enabled = false
cert_file = "core/certs/iggy_cert.pem"
key_file = "core/certs/iggy_key.pem"

[iggy]
address = "localhost:8090"
username = "iggy"
password = "iggy"
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
"#;

fn random(version: u64, max_count: u64) -> String {
    format!(
        r#"
type = "source"
key = "random"
enabled = true
version = {version}
name = "Random source"
path = "target/release/libiggy_connector_random_source"
plugin_config_format = "json"

[[streams]]
stream = "example_stream"
topic = "example_topic"
schema = "json"
batch_length = 1000
linger_time = "5ms"

[plugin_config]
interval = "100ms"
max_count = {max_count}
"#
    )
}

const STDOUT: &str = r#"
type = "sink"
key = "stdout"
enabled = true
version = 0
name = "Stdout sink"
path = "target/release/libiggy_connector_stdout_sink"

[[streams]]
stream = "example_stream"
topics = ["example_topic"]
schema = "json"
batch_length = 100
poll_interval = "5ms"

[plugin_config]
print_payload = false

[transforms.add_fields]
enabled = false
"#;

/// A runtime directory: `config.toml`, `connectors/` with `files`, and
/// `components/` with the components of the random source and the stdout sink.
fn site(files: &[(&str, &str)]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("connectors")).unwrap();
    std::fs::create_dir_all(dir.path().join("components")).unwrap();
    for component in ["random_source.wasm", "stdout-sink.wasm"] {
        std::fs::write(dir.path().join("components").join(component), b"\0asm").unwrap();
    }
    for (name, text) in files {
        std::fs::write(dir.path().join("connectors").join(name), text).unwrap();
    }
    let runtime = dir.path().join("config.toml");
    std::fs::write(&runtime, RUNTIME).unwrap();
    (dir, runtime)
}

fn load(runtime: &Path) -> Result<Config, String> {
    Config::load_with_env(runtime, Vec::new()).map_err(|e| e.to_string())
}

#[test]
fn an_iggy_runtime_directory_is_the_ferry_config_it_means() {
    let (dir, runtime) =
        site(&[("random_v0.toml", &random(0, 10)), ("random_v1.toml", &random(1, 20)), ("stdout.toml", STDOUT)]);
    std::fs::write(dir.path().join("connectors/notes.txt"), "not a connector").unwrap();
    std::fs::write(dir.path().join("connectors/Cargo.toml"), "[package]").unwrap();
    let config = load(&runtime).unwrap();

    let iggy = config.iggy.as_ref().expect("[iggy]");
    assert_eq!((iggy.address.as_str(), iggy.username.as_deref()), ("localhost:8090", Some("iggy")));
    assert!(!iggy.tls.enabled);
    let http = config.http.as_ref().expect("Iggy serves its API unless disabled");
    assert_eq!((http.enabled, http.address.as_str(), &http.api_key), (true, "127.0.0.1:8181", &None));
    assert_eq!(config.state.path, dir.path().join("local_state"));

    // The highest version is active when none is pinned.
    let [random] = &config.sources[..] else { panic!("{:?}", config.sources) };
    assert_eq!(random.key, "random");
    assert_eq!(random.plugin_config_json().unwrap(), r#"{"interval":"100ms","max_count":20}"#);
    assert_eq!(random.path, dir.path().join("components/random_source.wasm"));
    assert_eq!(
        (random.streams[0].stream.as_str(), random.streams[0].topic.as_str()),
        ("example_stream", "example_topic")
    );

    // A sink reads in Iggy's consumer group by default, so it goes on from the
    // offsets Iggy's runtime stored; the component's file may use `-`.
    let [stdout] = &config.sinks[..] else { panic!("{:?}", config.sinks) };
    assert_eq!(stdout.consumer_group.as_deref(), Some("iggy-connect-sink-stdout"));
    assert_eq!(stdout.batch_length, 100);
    assert_eq!(stdout.poll_interval, std::time::Duration::from_millis(5));
    assert_eq!(stdout.path, dir.path().join("components/stdout-sink.wasm"));
    assert_eq!(stdout.topics().collect::<Vec<_>>(), [("example_stream", "example_topic")]);

    // `ferry run DIR` reads the directory's config.toml.
    let from_dir = load(dir.path()).unwrap();
    assert_eq!(from_dir.file, runtime);
    assert_eq!(format!("{:?}", from_dir.sinks), format!("{:?}", config.sinks));
    let error = load(&dir.path().join("connectors")).unwrap_err();
    assert!(error.contains("connectors: a directory without a config.toml"), "{error}");

    // The Ferry config printed for it is the same config.
    let text = std::fs::read_to_string(&runtime).unwrap();
    let ferry = super::as_ferry(&runtime, &text, &[]).unwrap().expect("an Iggy runtime file");
    let native = dir.path().join("ferry.toml");
    std::fs::write(&native, &ferry).unwrap();
    let again = load(&native).unwrap();
    assert_eq!(format!("{:?}", again.sources), format!("{:?}", config.sources), "{ferry}");
    assert_eq!(format!("{:?}", again.sinks), format!("{:?}", config.sinks), "{ferry}");
}

#[test]
fn a_pinned_version_is_active_and_a_pin_to_no_version_is_refused() {
    let (dir, runtime) = site(&[("a.toml", &random(0, 10)), ("b.toml", &random(1, 20))]);
    std::fs::write(dir.path().join("connectors/.active_versions.toml"), "[sources]\nrandom = 0\n").unwrap();
    let config = load(&runtime).unwrap();
    assert_eq!(config.sources[0].plugin_config_json().unwrap(), r#"{"interval":"100ms","max_count":10}"#);

    std::fs::write(dir.path().join("connectors/.active_versions.toml"), "[sources]\nrandom = 7\n").unwrap();
    let error = load(&runtime).unwrap_err();
    assert!(
        error.contains(".active_versions.toml: [sources] random = 7") && error.contains("versions 0, 1"),
        "{error}"
    );
}

#[test]
fn what_ferry_cannot_honour_is_refused_naming_the_file_and_the_key() {
    let cases: [(&str, String, &[&str]); 8] = [
        (
            "benchmark, not a boolean",
            STDOUT.replace("version = 0", "version = 0\nbenchmark = \"yes\""),
            &["stdout.toml: invalid type: string \"yes\", expected a boolean"],
        ),
        (
            "a converting transform with Iggy's protobuf schema",
            STDOUT.replace(
                "[transforms.add_fields]\nenabled = false",
                "[transforms.proto_convert]\nenabled = true\nsource_format = \"proto\"\ntarget_format = \"json\"\n\
                 schema_path = \"a.proto\"",
            ),
            &["stdout.toml: transforms.proto_convert.schema_path: ferry does not support this yet"],
        ),
        (
            "schema",
            STDOUT.replace("schema = \"json\"", "schema = \"protobuf\""),
            &["stdout.toml: [[streams]] 1 schema: \"protobuf\" is none of json, raw, text, proto"],
        ),
        ("a typo of ferry's", format!("limitz = {{}}\n{STDOUT}"), &["stdout.toml: unknown field `limitz`"]),
        ("no key", STDOUT.replace("key = \"stdout\"", ""), &["stdout.toml key: missing"]),
        (
            "two streams of a source",
            format!("{}\n[[streams]]\nstream = \"b\"\ntopic = \"b\"\nschema = \"json\"\n", random(0, 1)),
            &["needs exactly one [[streams]] entry"],
        ),
        (
            "a format Iggy has not",
            STDOUT.replace("version = 0", "version = 0\nplugin_config_format = \"xml\""),
            &["stdout.toml: unknown variant `xml`, expected one of `json`, `yaml`, `toml`, `text`"],
        ),
        (
            "no component",
            STDOUT.replace("libiggy_connector_stdout_sink", "libiggy_connector_elastic_sink"),
            &[
                "stdout.toml: path: \"target/release/libiggy_connector_elastic_sink\" is a native library",
                "elastic_sink.wasm or elastic-sink.wasm",
                "random_source.wasm, stdout-sink.wasm",
            ],
        ),
    ];
    for (case, file, words) in cases {
        let (_dir, runtime) = site(&[("stdout.toml", &file)]);
        let error = load(&runtime).expect_err(case);
        for word in words {
            assert!(error.contains(word), "{case}: {word:?} in {error}");
        }
    }

    // Two files with one version of one key: Iggy would take either.
    let (_dir, runtime) = site(&[("a.toml", &random(3, 1)), ("b.toml", &random(3, 2))]);
    let error = load(&runtime).unwrap_err();
    assert!(
        error.contains("a.toml and ") && error.contains("b.toml: both are version 3 of the source `random`"),
        "{error}"
    );

    // The runtime's own file.
    for (change, words) in [
        (("api_key = \"\"", "api_key = \"plain\""), "[http] api_key: ferry never reads a secret written in the config"),
        (
            (
                "enabled = false\nallowed_origins = [\"*\"]",
                "enabled = true\nallowed_origins = [\"*\", \"https://a.example\"]",
            ),
            "[http] cors.allowed_origins: \"*\" allows any origin",
        ),
        (("format = \"text\"", "format = \"yaml\""), "[logging] format: \"yaml\" is neither"),
        (("config_type = \"local\"", "config_type = \"s3\""), "[connectors] config_type: \"s3\" is neither"),
        (("config_dir = \"connectors\"", "config_dir = \"elsewhere\""), "config_dir \"elsewhere\": no such directory"),
        (("path = \"local_state\"", "path = \"local_state\"\nstorage = \"http\""), "[state] storage: \"http\""),
        (
            ("path = \"local_state\"", "path = \"local_state\"\n[state.http]\nurl = \"http://s\""),
            "[state] http.url: is for storage = \"http\"",
        ),
    ] {
        let (_dir, runtime) = site(&[("stdout.toml", STDOUT)]);
        assert!(RUNTIME.contains(change.0), "{change:?}");
        std::fs::write(&runtime, RUNTIME.replace(change.0, change.1)).unwrap();
        let error = load(&runtime).expect_err(words);
        assert!(error.contains("config.toml") && error.contains(words), "{words:?} in {error}");
    }
}

#[test]
fn ferrys_own_sections_and_keys_may_be_added_to_the_same_files() {
    let sink = format!("{STDOUT}\n[limits]\nmemory = \"32MiB\"\n");
    let (_dir, runtime) = site(&[("stdout.toml", &sink)]);
    let text = format!("{RUNTIME}\n[runtime]\nshutdown_grace_period = \"3s\"\n")
        .replace("path = \"local_state\"", "path = \"local_state\"\nstorage = \"file\"\nsync = \"interval\"");
    std::fs::write(&runtime, text).unwrap();
    let config = load(&runtime).unwrap();
    assert_eq!(config.runtime.shutdown_grace_period, std::time::Duration::from_secs(3));
    assert_eq!(config.state.sync, crate::StateSync::Interval);
    assert_eq!(config.sinks[0].limits.memory.bytes(), 32 << 20);
}

#[test]
fn iggys_json_logs_are_ferrys_log_format() {
    let (_dir, runtime) = site(&[("stdout.toml", STDOUT)]);
    assert_eq!(load(&runtime).unwrap().runtime.log_format, crate::LogFormat::Text);
    // In whatever case, and beside ferry's own [runtime].
    let text = format!("{RUNTIME}\n[runtime]\nshutdown_grace_period = \"3s\"\n").replace("\"text\"", "\"JSON\"");
    std::fs::write(&runtime, text).unwrap();
    let config = load(&runtime).unwrap();
    assert_eq!(config.runtime.log_format, crate::LogFormat::Json);
    assert_eq!(config.runtime.shutdown_grace_period, std::time::Duration::from_secs(3));
}

#[test]
fn iggys_environment_overrides_apply_with_iggys_names_and_one_that_overrides_nothing_is_refused() {
    let (_dir, runtime) =
        site(&[("random_v0.toml", &random(0, 10)), ("random_v1.toml", &random(1, 20)), ("stdout.toml", STDOUT)]);
    let vars = |extra: &[(&str, &str)]| {
        let mut vars: Vec<(String, String)> = [
            ("IGGY_CONNECTORS_IGGY_ADDRESS", "10.0.0.7:8090"),
            ("IGGY_CONNECTORS_HTTP_ENABLED", "false"),
            ("IGGY_CONNECTORS_STATE_PATH", "elsewhere"),
            ("IGGY_CONNECTORS_CONFIG_PATH", "config.toml"),
            ("IGGY_CONNECTORS_SINK_STDOUT_STREAMS_0_TOPICS", "[a, b]"),
            ("IGGY_CONNECTORS_SINK_STDOUT_STREAMS_0_BATCH_LENGTH", "7"),
            ("IGGY_CONNECTORS_SINK_STDOUT_PLUGIN_CONFIG_PRINT_PAYLOAD", "true"),
            // Every version of the key: the active one (1) gets it.
            ("IGGY_CONNECTORS_SOURCE_RANDOM_PLUGIN_CONFIG_MAX_COUNT", "99"),
            ("IGGY_CONNECTORS_SOURCE_RANDOM_ENABLED", ""),
        ]
        .iter()
        .chain(extra)
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        vars.push(("PATH".into(), "/bin".into()));
        vars
    };
    let config = Config::load_with_env(&runtime, vars(&[])).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(config.iggy.as_ref().unwrap().address, "10.0.0.7:8090");
    assert!(config.http.is_none(), "disabled by the variable");
    assert!(config.state.path.ends_with("elsewhere"));
    let stdout = &config.sinks[0];
    assert_eq!(stdout.topics().collect::<Vec<_>>(), [("example_stream", "a"), ("example_stream", "b")]);
    assert_eq!(stdout.batch_length, 7);
    assert_eq!(stdout.plugin_config_json().unwrap(), r#"{"print_payload":true}"#);
    let random = &config.sources[0];
    assert!(random.enabled, "an empty value overrides nothing");
    assert_eq!(random.plugin_config_json().unwrap(), r#"{"interval":"100ms","max_count":99}"#);

    for (name, words) in [
        ("IGGY_CONNECTORS_HTTP_ADRESS", "IGGY_CONNECTORS_HTTP_ADRESS overrides nothing"),
        ("IGGY_CONNECTORS_SINK_NOPE_ENABLED", "IGGY_CONNECTORS_SINK_NOPE_ENABLED overrides nothing"),
        ("IGGY_CONNECTORS_SINK_STDOUT_LIMITS", "IGGY_CONNECTORS_SINK_STDOUT_LIMITS overrides nothing"),
        ("IGGY_CONNECTORS_SINK_STDOUT_STREAMS_5_TOPICS", "STREAMS_5_TOPICS: `streams` has 1 entries, not 6"),
    ] {
        let error = Config::load_with_env(&runtime, vars(&[(name, "x")])).unwrap_err().to_string();
        assert!(error.contains(words), "{name}: {error}");
    }
}

#[test]
fn every_version_of_a_connector_is_shown_as_iggys_api_shows_it() {
    let (dir, runtime) =
        site(&[("random_v0.toml", &random(0, 10)), ("random_v1.toml", &random(1, 20)), ("stdout.toml", STDOUT)]);
    let versions = super::versions(&runtime, Role::Source, "random", &[]).unwrap();
    let shown: Vec<(u64, bool)> = versions.iter().map(|v| (v.version, v.active)).collect();
    assert_eq!(shown, [(0, false), (1, true)], "the highest is active");
    let config = &versions[1].config;
    assert_eq!((config["key"].as_str(), config["version"].as_u64()), (Some("random"), Some(1)));
    assert_eq!(config["plugin_config"]["max_count"], 20);
    assert!(config.get("type").is_none() && config["transforms"].is_null(), "{config}");

    // A pin makes another active; Iggy's overrides apply to what is shown.
    std::fs::write(dir.path().join("connectors/.active_versions.toml"), "[sources]\nrandom = 0\n").unwrap();
    let vars = [("IGGY_CONNECTORS_SOURCE_RANDOM_PLUGIN_CONFIG_MAX_COUNT".to_string(), "7".to_string())];
    let versions = super::versions(&runtime, Role::Source, "random", &vars).unwrap();
    assert_eq!((versions[0].active, versions[1].active), (true, false));
    assert_eq!(versions[0].config["plugin_config"]["max_count"], 7);

    let error = super::versions(&runtime, Role::Sink, "random", &[]).unwrap_err();
    assert!(error.contains("no sink has the key `random`"), "{error}");
    std::fs::write(dir.path().join("ferry.toml"), "[[sources]]\nkey = \"a\"\npath = \"a.wasm\"\n").unwrap();
    let error = super::versions(&dir.path().join("ferry.toml"), Role::Source, "a", &[]).unwrap_err();
    assert!(error.contains("is a Ferry config, which holds one version of each connector"), "{error}");
}

#[test]
fn iggys_benchmark_and_verbose_are_taken_as_ferrys_connectors_take_them() {
    let file = STDOUT.replace("version = 0", "version = 0\nbenchmark = true\nverbose = true");
    let (_dir, runtime) = site(&[("stdout.toml", &file), ("random.toml", &random(0, 1))]);
    let config = load(&runtime).unwrap();
    let stdout = config.sink("stdout").unwrap();
    assert!(stdout.benchmark && stdout.verbose);
    let random = config.source("random").unwrap();
    assert!(!random.benchmark && !random.verbose, "both off unless written");
}

#[test]
fn a_sink_sharing_its_key_with_a_source_is_key_sink_to_ferry_and_key_to_iggy() {
    let sink = STDOUT.replace("key = \"stdout\"", "key = \"random\"");
    let (_dir, runtime) = site(&[("random.toml", &random(0, 5)), ("stdout.toml", &sink)]);
    let config = load(&runtime).unwrap();
    let keys: Vec<(&str, &str, Role)> = config.connectors().map(|c| (c.key(), c.iggy_key(), c.role())).collect();
    assert_eq!(keys, [("random", "random", Role::Source), ("random-sink", "random", Role::Sink)]);
    assert_eq!(
        config.sinks[0].consumer_group.as_deref(),
        Some("iggy-connect-sink-random"),
        "Iggy's group, by Iggy's key"
    );
}
