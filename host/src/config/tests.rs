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
    assert_eq!(source.plugin_config_json().unwrap(), "{}");
}

#[test]
fn plugin_config_becomes_json() {
    let text = format!(
        "{MINIMAL}\n[sources.plugin_config]\nmessages_per_batch = 3\nname = \"x\"\nnested = {{ a = [1, 2] }}\n"
    );
    let config = parse(&text).unwrap();
    let json: serde_json::Value = serde_json::from_str(&config.sources[0].plugin_config_json().unwrap()).unwrap();
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
    let json: serde_json::Value = serde_json::from_str(&source.plugin_config_json().unwrap()).unwrap();
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

#[test]
fn limits_have_safe_defaults_and_parse_sizes_and_durations() {
    let config = parse(MINIMAL).unwrap();
    assert_eq!(config.sources[0].limits, Limits::default());
    assert_eq!(config.sources[0].grants, Grants::default(), "nothing is granted by default");
    let text = format!(
        "{MINIMAL}\n[sources.limits]\nmemory = \"16MiB\"\ncall_timeout = \"250ms\"\nfuel = 1000\nmax_message_bytes = 512\n"
    );
    let limits = parse(&text).unwrap().sources[0].limits.clone();
    assert_eq!(limits.memory, ByteSize::mib(16));
    assert_eq!(limits.call_timeout, Duration::from_millis(250));
    assert_eq!(limits.fuel, Some(1000));
    assert_eq!(limits.max_message_bytes, ByteSize(512));
    assert_eq!(limits.max_batch_bytes, Limits::default().max_batch_bytes, "the rest keep their defaults");
}

#[test]
fn bad_limits_are_named() {
    let with = |limits: &str| problem(&format!("{MINIMAL}\n[sources.limits]\n{limits}\n"));
    let error = with("memory = \"64MB\"");
    assert!(error.contains("unknown unit \"MB\""), "{error}");
    let error = with("memory = \"100KiB\"");
    assert!(error.contains("limits.memory") && error.contains("at least 1 MiB"), "{error}");
    assert!(with("call_timeout = \"0s\"").contains("limits.call_timeout: must be greater than zero"));
    assert!(with("max_messages_per_batch = 0").contains("limits.max_messages_per_batch"));
    assert!(with("fuel = 0").contains("limits.fuel"));
    assert!(with("stack = 1").contains("unknown field `stack`"));
}

#[test]
fn grants_are_checked_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let with = |grants: &str| {
        let text = format!("{MINIMAL}\n[sources.grants]\n{grants}\n");
        Config::parse(&dir.path().join("ferry.toml"), &text, Vec::new())
    };
    std::fs::create_dir(dir.path().join("in")).unwrap();
    let config =
        with("dirs = [{ host = \"in\", guest = \"/in\" }]\nnetwork = [\"localhost:9000\"]\nenv = [\"TZ\"]").unwrap();
    let grants = &config.sources[0].grants;
    assert_eq!(grants.dirs[0].host, dir.path().join("in"), "relative to the config file");
    assert!(!grants.dirs[0].writable, "read-only unless asked");
    let error = with("dirs = [{ host = \"missing\", guest = \"/m\" }]").unwrap_err().to_string();
    assert!(error.contains("grants.dirs.host") && error.contains("missing"), "{error}");
    let error = with("dirs = [{ host = \"in\", guest = \"in\" }]").unwrap_err().to_string();
    assert!(error.contains("must be an absolute path"), "{error}");
    let error = with("network = [\"localhost\"]").unwrap_err().to_string();
    assert!(error.contains("grants.network") && error.contains("is not `host:port`"), "{error}");
    let error = with("network = [\"localhost:http\"]").unwrap_err().to_string();
    assert!(error.contains("not a port number"), "{error}");
}

#[test]
fn secrets_are_added_to_plugin_config_and_a_missing_one_is_named_without_a_value() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("token"), "s3cret\n").unwrap();
    let text = format!(
        "{MINIMAL}\n[sources.plugin_config]\nurl = \"x\"\n[sources.secrets]\ntoken = {{ file = \"token\" }}\nkey = {{ env = \"FERRY_TEST_UNSET_SECRET_VARIABLE\" }}\n"
    );
    let config = Config::parse(&dir.path().join("ferry.toml"), &text, Vec::new()).unwrap();
    let error = config.sources[0].plugin_config_json().unwrap_err();
    assert!(error.contains("secrets.key") && error.contains("FERRY_TEST_UNSET_SECRET_VARIABLE"), "{error}");
    let mut source = config.sources[0].clone();
    source.secrets.remove("key");
    let json: serde_json::Value = serde_json::from_str(&source.plugin_config_json().unwrap()).unwrap();
    assert_eq!(json, serde_json::json!({ "url": "x", "token": "s3cret" }));
    let clash =
        format!("{MINIMAL}\n[sources.plugin_config]\ntoken = \"x\"\n[sources.secrets]\ntoken = {{ env = \"X\" }}\n");
    assert!(problem(&clash).contains("`token` is also a key of plugin_config"));
}

const TENANTS: &str = r#"
[[tenants]]
key = "acme"
max_connectors = 1
max_memory = "100MiB"

[[sources]]
key = "a"
tenant = "acme"
path = "a.wasm"
streams = [{ stream = "s", topic = "t" }]
limits = { memory = "64MiB" }
"#;

#[test]
fn tenants_namespace_state_and_cap_their_connectors() {
    let config = parse(TENANTS).unwrap();
    let source = config.source("a").unwrap();
    assert_eq!(config.state_dir_of(source), Path::new("conf/state/tenants/acme"));
    let second = "[[sources]]\nkey = \"b\"\ntenant = \"acme\"\npath = \"b.wasm\"\nstreams = [{ stream = \"s\", topic = \"u\" }]\nlimits = { memory = \"16MiB\" }\n";
    let error = problem(&format!("{TENANTS}\n{second}"));
    assert!(error.contains("tenant `acme` has 2 enabled connectors, more than its max_connectors (1)"), "{error}");
    let roomy = TENANTS.replace("max_connectors = 1", "max_connectors = 2");
    assert!(parse(&format!("{roomy}\n{second}")).is_ok(), "80 MiB fits in 100 MiB");
    let big = TENANTS.replace("max_connectors = 1", "max_connectors = 2").replace("100MiB", "70MiB");
    let error = problem(&format!("{big}\n{second}"));
    assert!(error.contains("limits.memory add up to 80 MiB, more than its max_memory (70 MiB)"), "{error}");
    let error = problem(&TENANTS.replace("tenant = \"acme\"", "tenant = \"other\""));
    assert!(error.contains("tenant: no [[tenants]] entry has key `other`"), "{error}");
    let error = problem(&format!("{TENANTS}\n[tenants.iggy]\nusername = \"acme\"\npassword = \"pw\"\n"));
    assert!(error.contains("needs an [iggy] section"), "{error}");
}
