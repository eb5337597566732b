use std::path::Path;
use std::time::Duration;

use super::*;

const MINIMAL: &str = r#"
[[sources]]
key = "random"
path = "random_source.wasm"

[[sources.streams]]
stream = "demo"
topic = "random"
"#;

fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::parse(Path::new("conf/ferry.toml"), text, Vec::new())
}

fn parse_env(text: &str, vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
    let vars = vars.iter().map(|(k, v)| (k.to_string(), v.to_string()));
    Config::parse(Path::new("conf/ferry.toml"), text, vars)
}

fn problem(text: &str) -> String {
    parse(text).unwrap_err().to_string()
}

#[test]
fn defaults_and_paths_relative_to_the_file() {
    let config = parse(MINIMAL).unwrap();
    let source = &config.sources[0];
    assert!(source.enabled);
    assert_eq!(source.path, Path::new("conf/random_source.wasm"));
    assert_eq!(config.state.path, Path::new("conf/state"));
    assert_eq!(config.local_log.path, Path::new("conf/log"));
    assert_eq!(source.poll_interval, Duration::from_millis(100));
    assert_eq!(source.max_consecutive_nacks, 5);
    assert_eq!(source.plugin_config_json(), "{}");
}

#[test]
fn plugin_config_becomes_json() {
    let text = format!(
        "{MINIMAL}\n[sources.plugin_config]\nmessages_per_batch = 3\nname = \"x\"\nnested = {{ a = [1, 2] }}\n"
    );
    let config = parse(&text).unwrap();
    let json: serde_json::Value = serde_json::from_str(&config.sources[0].plugin_config_json()).unwrap();
    assert_eq!(json, serde_json::json!({ "messages_per_batch": 3, "name": "x", "nested": { "a": [1, 2] } }));
}

#[test]
fn malformed_toml_names_the_file_and_the_line() {
    let error = problem("[[sources]\nkey = 1");
    assert!(error.starts_with("conf/ferry.toml: "), "{error}");
    assert!(error.contains("line 1"), "{error}");
}

#[test]
fn unknown_keys_are_errors_naming_the_key() {
    let error = problem(&MINIMAL.replace("key = \"random\"", "key = \"random\"\npoll_intervall = \"1s\""));
    assert!(error.contains("poll_intervall"), "{error}");
    assert!(error.contains("line 4"), "{error}");
    let error = problem("[stat]\npath = \"x\"");
    assert!(error.contains("stat"), "{error}");
}

#[test]
fn bad_values_say_what_is_expected() {
    let error =
        problem(&MINIMAL.replace("path = \"random_source.wasm\"", "path = \"r.wasm\"\npoll_interval = \"soon\""));
    assert!(error.contains("invalid duration \"soon\""), "{error}");
    let error =
        problem(&MINIMAL.replace("path = \"random_source.wasm\"", "path = \"r.wasm\"\nmax_consecutive_nacks = 0"));
    assert!(error.contains("sources[0] (key `random`): max_consecutive_nacks: must be at least 1"), "{error}");
    let error = problem(&MINIMAL.replace(
        "path = \"random_source.wasm\"",
        "path = \"r.wasm\"\nnack_backoff = { initial = \"5s\", max = \"1s\" }",
    ));
    assert!(error.contains("nack_backoff"), "{error}");
    let error = problem(&MINIMAL.replace("topic = \"random\"", "topic = \"../etc\""));
    assert!(error.contains("streams.topic") && error.contains("../etc"), "{error}");
}

#[test]
fn keys_are_unique_and_safe() {
    let twice = format!("{MINIMAL}{MINIMAL}");
    let error = problem(&twice);
    assert!(error.contains("already used by sources[0]"), "{error}");
    let error = problem(&MINIMAL.replace("key = \"random\"", "key = \"a/b\""));
    assert!(error.contains("\"a/b\"") && error.contains("'/'"), "{error}");
}

#[test]
fn an_enabled_source_needs_a_stream() {
    let text = "[[sources]]\nkey = \"k\"\npath = \"x.wasm\"\n";
    assert!(problem(text).contains("at least one [[sources.streams]]"));
    let disabled = "[[sources]]\nkey = \"k\"\nenabled = false\npath = \"x.wasm\"\n";
    assert!(parse(disabled).is_ok());
}

#[test]
fn environment_overrides_reach_sections_and_sources_with_types() {
    let text = format!("{MINIMAL}\n[sources.plugin_config]\nmessages_per_batch = 3\n");
    let config = parse_env(
        &text,
        &[
            ("FERRY__STATE__PATH", "/var/lib/ferry"),
            ("FERRY__SOURCES__RANDOM__PLUGIN_CONFIG__MESSAGES_PER_BATCH", "7"),
            ("FERRY__SOURCES__RANDOM__PLUGIN_CONFIG__API_TOKEN", "s3cret"),
            ("FERRY__SOURCES__RANDOM__MAX_CONSECUTIVE_NACKS", "9"),
            ("FERRY_LOG", "debug"),
        ],
    )
    .unwrap();
    assert_eq!(config.state.path, Path::new("/var/lib/ferry"));
    let source = &config.sources[0];
    assert_eq!(source.max_consecutive_nacks, 9);
    let json: serde_json::Value = serde_json::from_str(&source.plugin_config_json()).unwrap();
    assert_eq!(json["messages_per_batch"], 7);
    assert_eq!(json["api_token"], "s3cret");
}

#[test]
fn bad_overrides_name_the_variable() {
    let error = parse_env(MINIMAL, &[("FERRY__SOURCES__NOPE__ENABLED", "false")]).unwrap_err().to_string();
    assert!(
        error.contains("FERRY__SOURCES__NOPE__ENABLED") && error.contains("no source has the key `nope`"),
        "{error}"
    );
    let error = parse_env(MINIMAL, &[("FERRY__SOURCES__RANDOM__ENABLED", "maybe")]).unwrap_err().to_string();
    assert!(error.contains("FERRY__SOURCES__RANDOM__ENABLED"), "{error}");
    let error = parse_env(MINIMAL, &[("FERRY__RUNTIME__SHUTDOWN_GRACE", "1s")]).unwrap_err().to_string();
    assert!(error.contains("FERRY__RUNTIME__SHUTDOWN_GRACE") && error.contains("shutdown_grace"), "{error}");
}

#[test]
fn a_missing_file_is_named() {
    let error = Config::load_with_env(Path::new("/nonexistent/ferry.toml"), Vec::new()).unwrap_err().to_string();
    assert!(error.starts_with("/nonexistent/ferry.toml: cannot read the file"), "{error}");
}

const WITH_IGGY: &str = r#"
[iggy]
address = "10.0.0.5:8090"
username = "ferry"
password = "hunter2"

[[sources]]
key = "random"
path = "random_source.wasm"

[[sources.streams]]
stream = "demo"
topic = "random"
partitioning = { header = "customer" }
create = { partitions = 3, retention = "7d" }

[[sources.streams]]
stream = "audit"
topic = "all"
partitioning = { partition_id = 2 }

[[sources.streams]]
stream = "audit"
topic = "by-id"
partitioning = "message_id"
"#;

#[test]
fn the_iggy_section_partitioning_and_auto_creation_parse() {
    let config = parse(WITH_IGGY).unwrap();
    let iggy = config.iggy.as_ref().unwrap();
    assert_eq!((iggy.address.as_str(), iggy.transport, iggy.no_delay), ("10.0.0.5:8090", Transport::Tcp, true));
    assert_eq!(
        iggy.credentials().unwrap(),
        Credentials::UsernamePassword { username: "ferry".into(), password: Secret::new("hunter2") }
    );
    let streams = &config.sources[0].streams;
    assert_eq!(streams[0].partitioning, Partitioning::Header("customer".into()));
    assert_eq!(
        streams[0].create,
        Some(CreateTopic {
            partitions: 3,
            retention: Some(Duration::from_secs(7 * 86400)),
            enforce_fsync: None,
            messages_required_to_save: None
        })
    );
    assert_eq!(streams[1].partitioning, Partitioning::PartitionId(2));
    assert_eq!(streams[2].partitioning, Partitioning::MessageId);
    assert_eq!(streams[2].create, None);
}

#[test]
fn secrets_never_show_in_debug_output() {
    let config = parse(WITH_IGGY).unwrap();
    let shown = format!("{config:?}");
    assert!(!shown.contains("hunter2"), "{shown}");
    assert!(shown.contains("***"));
}

#[test]
fn credentials_must_be_exactly_one_way_to_sign_in() {
    let without = WITH_IGGY.replace("username = \"ferry\"\npassword = \"hunter2\"\n", "");
    assert!(problem(&without).contains("[iggy]: no credentials"), "{}", problem(&without));
    let both = WITH_IGGY.replace("password = \"hunter2\"", "password = \"hunter2\"\ntoken = \"abc\"");
    assert!(problem(&both).contains("more than one of"), "{}", problem(&both));
    let orphan = WITH_IGGY.replace("password = \"hunter2\"", "token = \"abc\"");
    assert!(problem(&orphan).contains("username is set without a password"), "{}", problem(&orphan));
    let no_user = WITH_IGGY.replace("username = \"ferry\"\n", "");
    assert!(problem(&no_user).contains("password is set but username is not"));
}

#[test]
fn a_token_can_come_from_a_file_or_a_variable_and_a_bad_one_is_named() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("token"), "s3cr3t-token\n").unwrap();
    let text = WITH_IGGY.replace("username = \"ferry\"\npassword = \"hunter2\"", "token_file = \"token\"");
    let config = Config::parse(&dir.path().join("ferry.toml"), &text, Vec::new()).unwrap();
    assert_eq!(config.iggy.unwrap().credentials().unwrap(), Credentials::Token(Secret::new("s3cr3t-token")));

    let missing = WITH_IGGY.replace("username = \"ferry\"\npassword = \"hunter2\"", "token_file = \"nope\"");
    let error = Config::parse(&dir.path().join("ferry.toml"), &missing, Vec::new()).unwrap_err().to_string();
    assert!(error.contains("token_file") && error.contains("nope") && error.contains("cannot read it"), "{error}");

    let unset =
        WITH_IGGY.replace("username = \"ferry\"\npassword = \"hunter2\"", "token_env = \"FERRY_TEST_SURELY_UNSET\"");
    let error = problem(&unset);
    assert!(error.contains("FERRY_TEST_SURELY_UNSET is not set"), "{error}");
}

#[test]
fn the_password_can_come_from_the_environment() {
    let text = WITH_IGGY.replace("password = \"hunter2\"\n", "");
    let config = parse_env(&text, &[("FERRY__IGGY__PASSWORD", "from-env")]).unwrap();
    let credentials = config.iggy.unwrap().credentials().unwrap();
    assert_eq!(
        credentials,
        Credentials::UsernamePassword { username: "ferry".into(), password: Secret::new("from-env") }
    );
}

#[test]
fn bad_iggy_values_are_named() {
    let error = problem(&WITH_IGGY.replace("partitioning = \"message_id\"", "partitioning = \"random\""));
    assert!(error.contains("partitioning") || error.contains("random"), "{error}");
    let error = problem(&WITH_IGGY.replace("partitions = 3", "partitions = 0"));
    assert!(error.contains("streams.create.partitions: must be at least 1"), "{error}");
    let error =
        problem(&WITH_IGGY.replace("address = \"10.0.0.5:8090\"", "address = \"10.0.0.5:8090\"\ntransport = \"http\""));
    assert!(error.contains("must be a URL"), "{error}");
    let error = problem(&WITH_IGGY.replace("address = \"10.0.0.5:8090\"", "adress = \"x\""));
    assert!(error.contains("unknown field `adress`"), "{error}");
}
