use std::path::Path;
use std::time::Duration;

use ferry_contract::settings::MAX_SECRET_BYTES;

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
        error.contains("FERRY__SOURCES__NOPE__ENABLED") && error.contains("no [[sources]] entry has the key `nope`"),
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
    assert!(error.contains("[iggy]: token_file: ") && error.contains("nope: cannot open it"), "{error}");

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
    assert!(error.contains("limits.memory: 100 KiB is less than the minimum, 1 MiB"), "{error}");
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

#[test]
fn a_secret_named_table_dot_key_goes_into_that_table_of_plugin_config() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("token"), "Bearer s3cret\n").unwrap();
    let text = format!(
        "{MINIMAL}\n[sources.plugin_config]\nurl = \"x\"\nheaders = {{ Accept = \"text/plain\" }}\n[sources.secrets]\n\"headers.Authorization\" = {{ file = \"token\" }}\n\"auth.basic.user\" = {{ file = \"token\" }}\n"
    );
    let config = Config::parse(&dir.path().join("ferry.toml"), &text, Vec::new()).unwrap();
    let json: serde_json::Value = serde_json::from_str(&config.sources[0].plugin_config_json().unwrap()).unwrap();
    assert_eq!(
        json,
        serde_json::json!({
            "url": "x",
            "headers": { "Accept": "text/plain", "Authorization": "Bearer s3cret" },
            "auth": { "basic": { "user": "Bearer s3cret" } },
        })
    );
    // Into a value that is not a table: named.
    let text = format!(
        "{MINIMAL}\n[sources.plugin_config]\nurl = \"x\"\n[sources.secrets]\n\"url.part\" = {{ file = \"token\" }}\n"
    );
    let config = Config::parse(&dir.path().join("ferry.toml"), &text, Vec::new()).unwrap();
    let error = config.sources[0].plugin_config_json().unwrap_err();
    assert_eq!(error, "secrets.url.part: plugin_config.url is not a table");
    // Over a header the file sets, or with an empty part: refused at load.
    let clash = format!(
        "{MINIMAL}\n[sources.plugin_config]\nheaders = {{ Authorization = \"x\" }}\n[sources.secrets]\n\"headers.Authorization\" = {{ env = \"X\" }}\n"
    );
    assert!(problem(&clash).contains("`headers.Authorization` is also a key of plugin_config"));
    let empty = format!("{MINIMAL}\n[sources.secrets]\n\"headers.\" = {{ env = \"X\" }}\n");
    assert!(problem(&empty).contains("no empty part"), "{}", problem(&empty));
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

// Addressing (issue 8): a value meant for one connector never reaches another.

/// Two sources with these keys, the second in tenant `evil`.
fn two_sources(first: &str, second: &str) -> String {
    format!(
        "[[tenants]]\nkey = \"evil\"\n\n[[sources]]\nkey = \"{first}\"\npath = \"a.wasm\"\n\
         streams = [{{ stream = \"s\", topic = \"a\" }}]\n\n[[sources]]\nkey = \"{second}\"\ntenant = \"evil\"\n\
         path = \"b.wasm\"\nstreams = [{{ stream = \"s\", topic = \"b\" }}]\n"
    )
}

#[test]
fn keys_an_override_cannot_tell_apart_are_refused() {
    let error = problem(&two_sources("a_b", "a-b"));
    assert!(
        error.contains(
            "sources[1] (key `a-b`): key: `a-b` and `a_b` (sources[0]) are one name to an environment override \
             (…__A_B__…)"
        ),
        "{error}"
    );
    let error = problem(&two_sources("orders", "Orders"));
    assert!(error.contains("`Orders` and `orders` (sources[0])"), "{error}");
    let tenants = "[[tenants]]\nkey = \"Acme\"\n[[tenants]]\nkey = \"acme\"\n";
    assert!(problem(tenants).contains("tenants[1] (key `acme`): key: `acme` and `Acme` (tenants[0])"));
    let twice = "[[tenants]]\nkey = \"acme\"\n[[tenants]]\nkey = \"acme\"\n";
    assert!(problem(twice).contains("tenants[1] (key `acme`): key: already used by tenants[0]"));
    assert!(parse(&two_sources("a_b", "a_c")).is_ok(), "keys that differ otherwise are fine");
}

#[test]
fn an_iggy_key_names_one_connector_of_its_role() {
    let sink = |key: &str, iggy_key: &str| {
        format!(
            "[[sinks]]\nkey = \"{key}\"\niggy_key = \"{iggy_key}\"\npath = \"s.wasm\"\nstreams = [{{ stream = \"demo\", topics = [\"random\"] }}]\n"
        )
    };
    let config = parse(&format!("{MINIMAL}{}", sink("random-sink", "random"))).unwrap();
    assert_eq!(
        (config.sinks[0].key.as_str(), crate::ConnectorConfig::iggy_key(&config.sinks[0])),
        ("random-sink", "random")
    );
    assert_eq!(crate::ConnectorConfig::iggy_key(&config.sources[0]), "random", "its key, without one");
    let twice = problem(&format!("{MINIMAL}{}{}", sink("a", "x"), sink("b", "x")));
    assert!(twice.contains("sinks[1] (key `b`): iggy_key: `x` names sinks[0] too"), "{twice}");
    let shadow = problem(&format!("{MINIMAL}{}{}", sink("a", "b"), sink("b", "c")));
    assert!(shadow.contains("sinks[1] (key `b`): iggy_key: `b` names sinks[0] too"), "{shadow}");
}

#[test]
fn the_key_check_takes_any_list_of_connector_keys() {
    let keys = [("sources[0]".to_string(), "x-1"), ("sinks[0]".to_string(), "y"), ("sinks[1]".to_string(), "X_1")];
    let error = validate::distinct_keys(keys).unwrap_err();
    assert!(error.starts_with("sinks[1] (key `X_1`): key: `X_1` and `x-1` (sources[0])"), "{error}");
    assert_eq!(validate::distinct_keys([("sinks[0]".to_string(), "a"), ("sources[0]".to_string(), "b")]), Ok(()));
}

#[test]
fn an_override_that_could_reach_two_connectors_is_refused_naming_both() {
    // The attack of issue 8: `FERRY__SOURCES__A_B__...` meant for `a_b` went to `a-b`.
    let error = parse_env(&two_sources("a_b", "a-b"), &[("FERRY__SOURCES__A_B__PLUGIN_CONFIG__TOKEN", "s3cret")])
        .unwrap_err()
        .to_string();
    assert!(
        error.contains(
            "environment variable FERRY__SOURCES__A_B__PLUGIN_CONFIG__TOKEN: A_B matches both [[sources]] entries \
             `a_b` and `a-b`"
        ),
        "{error}"
    );
    assert!(!error.contains("s3cret"), "{error}");
}

#[test]
fn an_override_that_could_set_two_keys_is_refused_naming_both() {
    let text = format!("{MINIMAL}\n[sources.plugin_config]\napi-token = \"x\"\napi_token = \"y\"\n");
    let error =
        parse_env(&text, &[("FERRY__SOURCES__RANDOM__PLUGIN_CONFIG__API_TOKEN", "s3cret")]).unwrap_err().to_string();
    assert!(error.contains("environment variable FERRY__SOURCES__RANDOM__PLUGIN_CONFIG__API_TOKEN"), "{error}");
    assert!(error.contains("matches both `api-token` and `api_token`"), "{error}");
    let one = format!("{MINIMAL}\n[sources.plugin_config]\napi-token = \"x\"\n");
    let config = parse_env(&one, &[("FERRY__SOURCES__RANDOM__PLUGIN_CONFIG__API_TOKEN", "s3cret")]).unwrap();
    let json: serde_json::Value = serde_json::from_str(&config.sources[0].plugin_config_json().unwrap()).unwrap();
    assert_eq!(json, serde_json::json!({ "api-token": "s3cret" }), "one key that matches is the one set");
}

#[test]
fn two_variables_for_one_place_are_refused() {
    let error = parse_env(MINIMAL, &[("FERRY__STATE__PATH", "/a"), ("FERRY__state__path", "/b")]).unwrap_err();
    assert!(
        error.to_string().contains("environment variables FERRY__STATE__PATH and FERRY__state__path set the same key"),
        "{error}"
    );
}

#[test]
fn an_override_names_an_entry_by_its_key_and_cannot_rename_it() {
    let error = parse_env(MINIMAL, &[("FERRY__SOURCES__RANDOM", "x")]).unwrap_err().to_string();
    assert!(error.contains("FERRY__SOURCES__RANDOM: names an entry of `sources`, not a setting in it"), "{error}");
    let error = parse_env(MINIMAL, &[("FERRY__SOURCES__RANDOM__KEY", "other")]).unwrap_err().to_string();
    assert!(error.contains("the key of a `sources` entry cannot be overridden"), "{error}");
    let error = parse_env(MINIMAL, &[("FERRY__TENANTS__ACME__MAX_CONNECTORS", "3")]).unwrap_err().to_string();
    assert!(error.contains("FERRY__TENANTS__ACME__MAX_CONNECTORS: the file has no [[tenants]]"), "{error}");
    let error = parse_env(MINIMAL, &[("FERRY__SOURCES__RANDOM__STREAMS__DEMO__TOPIC", "x")]).unwrap_err();
    assert!(error.to_string().contains("the entries of `streams` have no `key`"), "{error}");
}

#[test]
fn a_tenant_is_addressed_by_its_key_too() {
    let text = format!("{WITH_IGGY}\n[[tenants]]\nkey = \"acme\"\n[tenants.iggy]\nusername = \"acme\"\n");
    let config = parse_env(&text, &[("FERRY__TENANTS__ACME__IGGY__PASSWORD", "pw")]).unwrap();
    let own = config.tenant("acme").unwrap().iggy.as_ref().unwrap();
    assert_eq!(own.password, Some(Secret::new("pw")));
}

// Files that are not files (issue 8).

#[test]
fn the_config_file_must_be_a_regular_file_of_sane_size() {
    let load = |path: &Path| Config::load_with_env(path, Vec::new()).unwrap_err().to_string();
    let error = load(Path::new("/dev/zero"));
    assert_eq!(error, "/dev/zero: cannot read the file: it is a character device, not a regular file");
    let dir = tempfile::tempdir().unwrap();
    let pipe = dir.path().join("ferry.toml");
    ferry_contract::files::mkfifo(&pipe);
    // Without a non-blocking open this would wait forever for a writer.
    assert!(load(&pipe).ends_with("cannot read the file: it is a named pipe, not a regular file"));
    let big = dir.path().join("big.toml");
    std::fs::File::create(&big).unwrap().set_len(MAX_CONFIG_BYTES + 1).unwrap();
    assert!(load(&big).contains("it is 16777217 bytes, over the limit for a config file (16777216 bytes)"));
    // A directory is read as its config.toml, and without one is named as such.
    assert!(load(dir.path()).ends_with("a directory without a config.toml: give the config file, or the directory of Iggy's connectors runtime holding its config.toml"));
    std::fs::create_dir(dir.path().join("config.toml")).unwrap();
    assert!(load(dir.path()).ends_with("a directory without a config.toml: give the config file, or the directory of Iggy's connectors runtime holding its config.toml"));
}

#[test]
fn state_and_log_directories_must_be_directories_or_absent() {
    let error = problem(&format!("[local_log]\npath = \"/dev/null\"\n{MINIMAL}"));
    assert_eq!(error, "conf/ferry.toml: [local_log] path: /dev/null: it is a character device, not a directory");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("state"), "").unwrap();
    let error = Config::parse(&dir.path().join("ferry.toml"), MINIMAL, Vec::new()).unwrap_err().to_string();
    assert!(error.contains("[state] path: ") && error.ends_with("state: it is a regular file, not a directory"));
    std::fs::remove_file(dir.path().join("state")).unwrap();
    assert!(Config::parse(&dir.path().join("ferry.toml"), MINIMAL, Vec::new()).is_ok(), "absent: ferry creates it");
}

#[test]
fn secret_token_and_certificate_files_must_be_small_regular_files() {
    let dir = tempfile::tempdir().unwrap();
    ferry_contract::files::mkfifo(&dir.path().join("pipe"));
    std::fs::File::create(dir.path().join("big")).unwrap().set_len(MAX_SECRET_BYTES + 1).unwrap();
    let file = dir.path().join("ferry.toml");
    let secret = |path: &str| {
        let text = format!("{MINIMAL}\n[sources.secrets]\ntoken = {{ file = \"{path}\" }}\n");
        Config::parse(&file, &text, Vec::new()).unwrap().sources[0].plugin_config_json().unwrap_err()
    };
    assert_eq!(secret("/dev/zero"), "secrets.token: /dev/zero: it is a character device, not a regular file");
    assert!(secret("pipe").ends_with("pipe: it is a named pipe, not a regular file"));
    assert!(secret("big").ends_with("it is 65537 bytes, over the limit for a secret's file (65536 bytes)"));

    let iggy = |credentials: &str| {
        let text = WITH_IGGY.replace("username = \"ferry\"\npassword = \"hunter2\"", credentials);
        Config::parse(&file, &text, Vec::new()).unwrap_err().to_string()
    };
    let error = iggy("token_file = \"/dev/zero\"");
    assert!(error.contains("[iggy]: token_file: /dev/zero: it is a character device, not a regular file"));
    let error = iggy("username = \"ferry\"\npassword = \"pw\"\ntls = { ca_file = \"pipe\" }");
    assert!(error.contains("[iggy]: tls.ca_file: ") && error.ends_with("it is a named pipe, not a regular file"));
    let tenant = "[[tenants]]\nkey = \"acme\"\n[tenants.iggy]\ntoken_file = \"pipe\"\n";
    let error = Config::parse(&file, &format!("{WITH_IGGY}\n{tenant}"), Vec::new()).unwrap_err().to_string();
    assert!(error.contains("tenants[0] (key `acme`): [tenants.iggy]: token_file: "), "{error}");
    assert!(error.ends_with("it is a named pipe, not a regular file"), "{error}");
}

#[test]
fn a_granted_directory_must_be_an_existing_directory() {
    let with = |host: &str| {
        problem(&format!("{MINIMAL}\n[sources.grants]\ndirs = [{{ host = \"{host}\", guest = \"/d\" }}]\n"))
    };
    assert!(with("/dev/null").ends_with("grants.dirs.host: /dev/null: it is a character device, not a directory"));
    assert!(with("/nonexistent/in").ends_with("grants.dirs.host: /nonexistent/in: it does not exist"));
}

// Durations and sizes that overflow (issue 8).

#[test]
fn absurd_durations_are_refused_naming_the_key_and_the_maximum() {
    let huge = "\"10000000000000000000s\"";
    let error = problem(&format!("[runtime]\nshutdown_grace_period = {huge}\n{MINIMAL}"));
    assert!(
        error.contains("[runtime] shutdown_grace_period: 316880878140years")
            && error.ends_with("more than the maximum, 1day"),
        "{error}"
    );
    let source = |setting: &str| {
        problem(&MINIMAL.replace("path = \"random_source.wasm\"", &format!("path = \"r.wasm\"\n{setting}")))
    };
    let error = source(&format!("nack_backoff = {{ initial = \"1s\", max = {huge} }}"));
    assert!(
        error.contains("sources[0] (key `random`): nack_backoff: max: ") && error.ends_with("maximum, 1day"),
        "{error}"
    );
    let error = source("restart_backoff = { initial = \"0s\", max = \"1s\" }");
    assert!(error.contains("restart_backoff: initial: must be greater than zero; the minimum is 1ms"), "{error}");
    assert!(source("poll_interval = \"0s\"").contains("poll_interval: must be greater than zero"));
    assert!(source("delivery_timeout = \"0ms\"").contains("delivery_timeout: must be greater than zero"));
    let error = problem(&format!("[runtime]\nprogress_interval = \"1ms\"\n{MINIMAL}"));
    assert!(error.contains("[runtime] progress_interval: 1ms is less than the minimum, 100ms"), "{error}");
    let error =
        problem(&WITH_IGGY.replace(
            "address = \"10.0.0.5:8090\"",
            &format!("reconnect_backoff = {{ initial = \"1s\", max = {huge} }}"),
        ));
    assert!(error.contains("[iggy]: reconnect_backoff: max: "), "{error}");
    let error = problem(&WITH_IGGY.replace("address = \"10.0.0.5:8090\"", "connect_timeout = \"0s\""));
    assert!(error.contains("[iggy]: connect_timeout: must be greater than zero"), "{error}");
    let error = problem(&WITH_IGGY.replace("retention = \"7d\"", "retention = \"1000years\""));
    assert!(error.contains("streams.create.retention: 1000years is more than the maximum, 100years"), "{error}");

    // At the maximum everything is accepted, and the host's arithmetic on it is safe.
    let day = "\"1day\"";
    let text = MINIMAL.replace(
        "path = \"random_source.wasm\"",
        &format!("path = \"r.wasm\"\nnack_backoff = {{ initial = {day}, max = {day} }}\ndelivery_timeout = {day}"),
    );
    let config = parse(&format!("[runtime]\nshutdown_grace_period = {day}\n{text}")).unwrap();
    assert!(std::time::Instant::now().checked_add(config.runtime.shutdown_grace_period).is_some());
    let mut backoff = ferry_contract::settings::Backoff::new(config.sources[0].nack_backoff);
    assert!((0..100).all(|_| backoff.next_delay() == Duration::from_secs(86_400)));
}

#[test]
fn a_call_timeout_shorter_than_the_engine_tick_is_refused() {
    let with = |timeout: &str| parse(&format!("{MINIMAL}\n[sources.limits]\ncall_timeout = \"{timeout}\"\n"));
    let error = with("1ns").unwrap_err().to_string();
    assert!(
        error.contains(
            "sources[0] (key `random`): limits.call_timeout: 1ns is less than the minimum, 10ms (the engine checks \
             call deadlines every 10 ms"
        ),
        "{error}"
    );
    assert_eq!(ferry_contract::settings::EPOCH_TICK, Duration::from_millis(10), "the message says 10 ms");
    assert_eq!(with("10ms").unwrap().sources[0].limits.call_timeout, Duration::from_millis(10));
}

#[test]
fn sizes_say_what_is_wrong_with_them() {
    let with = |limits: &str| problem(&format!("{MINIMAL}\n[sources.limits]\n{limits}\n"));
    assert!(with("memory = -5").contains("invalid size -5: a size cannot be negative"));
    assert!(with("memory = \"-5MiB\"").contains("a size cannot be negative"));
    assert!(with("memory = 1.5").contains("invalid size 1.5: write a whole number of bytes"));
    assert!(with("memory = \"65GiB\"").contains("limits.memory: 65 GiB is more than the maximum, 64 GiB"));
    assert!(
        with("max_state_bytes = \"1GiB\"").contains("limits.max_state_bytes: 1 GiB is more than the maximum, 512 MiB")
    );
    assert!(with("max_batch_bytes = 0").contains("limits.max_batch_bytes: must be greater than zero"));
    assert!(
        with("max_message_bytes = \"5GiB\"")
            .contains("limits.max_message_bytes: 5 GiB is more than the maximum, 4 GiB")
    );
    let tenant = TENANTS.replace("max_memory = \"100MiB\"", "max_memory = \"2TiB\"");
    assert!(problem(&tenant).contains("tenants[0] (key `acme`): max_memory: 2 TiB is more than the maximum, 1 TiB"));
    let error = problem(&WITH_IGGY.replace("partitions = 3", "partitions = 5000"));
    assert!(error.contains("streams.create.partitions: 5000 is more than an Iggy topic may have, 1000"), "{error}");
}

#[test]
fn compiling_has_defaults_and_bounds() {
    let runtime = parse(MINIMAL).unwrap().runtime;
    assert_eq!(runtime.max_component_bytes, ByteSize::mib(64));
    assert_eq!(runtime.compile_timeout, Duration::from_secs(60));
    assert_eq!(runtime.compile_memory, ByteSize::gib(2));
    let with = |settings: &str| parse(&format!("[runtime]\n{settings}\n{MINIMAL}"));
    let runtime =
        with("max_component_bytes = \"8MiB\"\ncompile_timeout = \"5s\"\ncompile_memory = \"512MiB\"").unwrap().runtime;
    assert_eq!(
        (runtime.max_component_bytes, runtime.compile_timeout, runtime.compile_memory),
        (ByteSize::mib(8), Duration::from_secs(5), ByteSize::mib(512))
    );
    let problem = |settings: &str| with(settings).unwrap_err().to_string();
    assert!(problem("max_component_bytes = 0").contains("[runtime] max_component_bytes: must be greater than zero"));
    assert!(problem("max_component_bytes = \"2GiB\"").contains("2 GiB is more than the maximum, 1 GiB"));
    assert!(problem("compile_timeout = \"2h\"").contains("[runtime] compile_timeout: 2h is more than the maximum, 1h"));
    assert!(
        problem("compile_memory = \"1MiB\"")
            .contains("[runtime] compile_memory: 1 MiB is less than the minimum, 64 MiB")
    );
}

/// `n` enabled sources with this much memory each, and one disabled with more.
fn many_sources(n: usize, memory: &str, allocator: &str) -> String {
    let mut text = format!("[runtime]\nallocator = \"{allocator}\"\n");
    for i in 0..n {
        text += &format!(
            "[[sources]]\nkey = \"s{i}\"\npath = \"s.wasm\"\nstreams = [{{ stream = \"s\", topic = \"t{i}\" }}]\nlimits = {{ memory = \"{memory}\" }}\n"
        );
    }
    text + "[[sources]]\nkey = \"off\"\nenabled = false\npath = \"s.wasm\"\nlimits = { memory = \"64GiB\" }\n"
}

#[test]
fn a_pooling_reservation_beyond_reason_is_refused_naming_its_parts() {
    // 6 connectors: 16 slots of 64 GiB, exactly 1 TiB; 7: 18 slots, over.
    let config = parse(&many_sources(6, "64GiB", "pooling")).unwrap();
    assert_eq!(
        (config.pool_slots(), config.largest_memory()),
        (16, ByteSize::gib(64)),
        "the disabled one does not count"
    );
    let error = problem(&many_sources(7, "64GiB", "pooling"));
    assert_eq!(
        error,
        "conf/ferry.toml: [runtime] allocator: \"pooling\" would reserve 18 slots (2 per enabled connector + 4) of \
         64 GiB (the largest limits.memory), more than the maximum, 1 TiB; lower limits.memory or use \"on-demand\""
    );
    assert!(parse(&many_sources(7, "64GiB", "on-demand")).is_ok(), "on-demand reserves nothing up front");
    assert!(parse(&many_sources(7, "1GiB", "pooling")).is_ok());
}

#[test]
fn postgres_servers_are_defined_by_name_and_granted_only_by_a_defined_name() {
    let servers = r#"
[postgres.orders]
host = "db.internal"
database = "shop"
user = "ferry"
password = { file = "secrets/orders" }
"#;
    let granted = format!("{servers}{MINIMAL}\n[sources.grants]\npostgres = [\"orders\"]\n");
    let config = parse(&granted).unwrap();
    let orders = &config.sections.postgres["orders"];
    assert_eq!((orders.port, orders.max_connections, orders.connect_timeout), (5432, 2, Duration::from_secs(5)));
    assert_eq!(orders.password, Some(SecretSource::File("conf/secrets/orders".into())), "relative to the file");
    assert_eq!(config.sources[0].grants.postgres, ["orders"]);

    let error = problem(&format!("{servers}{MINIMAL}\n[sources.grants]\npostgres = [\"billing\"]\n"));
    assert!(
        error.ends_with(
            "sources[0] (key `random`): grants.postgres: no [postgres.billing] is defined (defined: orders)"
        ),
        "{error}"
    );
    let error =
        problem(&format!("{}{MINIMAL}", servers.replace("user = \"ferry\"", "user = \"ferry\"\nmax_connections = 0")));
    assert!(error.ends_with("[postgres.orders]: max_connections: 0 is not between 1 and 16"), "{error}");
    let error = problem(&format!(
        "{}{MINIMAL}",
        servers.replace("host = \"db.internal\"", "host = \"db\"\npassword_text = \"x\"")
    ));
    assert!(error.contains("unknown field `password_text`"), "a password is never written in the config: {error}");
}

#[test]
fn postgres_tls_is_required_with_a_ca_file_and_a_bad_one_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let config_file = dir.path().join("ferry.toml");
    let load = |settings: &str| {
        let text = format!("[postgres.orders]\nhost = \"db\"\ndatabase = \"d\"\nuser = \"u\"\n{settings}\n{MINIMAL}");
        Config::parse(&config_file, &text, Vec::new()).map_err(|e| e.to_string())
    };
    let plain = load("").unwrap();
    assert!(!plain.sections.postgres["orders"].tls_required().unwrap(), "plain TCP unless asked for");
    assert!(load("tls = \"require\"").unwrap().sections.postgres["orders"].tls_required().unwrap());

    // Refused before it is read.
    std::fs::write(dir.path().join("ca.pem"), "").unwrap();
    let missing = load("ca_file = \"nowhere.pem\"").unwrap_err();
    assert!(
        missing.contains("[postgres.orders]: ca_file: ") && missing.contains("nowhere.pem: cannot open it"),
        "{missing}"
    );
    std::fs::write(dir.path().join("empty.pem"), "no certificate here\n").unwrap();
    let empty = load("ca_file = \"empty.pem\"").unwrap_err();
    assert!(
        empty.contains("[postgres.orders]: ca_file: ") && empty.contains("empty.pem: holds no certificate"),
        "{empty}"
    );
    let both = load("tls = \"disable\"\nca_file = \"ca.pem\"").unwrap_err();
    assert!(both.contains("ca_file: ") && both.contains("is given with tls = \"disable\""), "{both}");
    let mode = load("tls = \"prefer\"").unwrap_err();
    assert!(mode.contains("unknown variant `prefer`, expected `disable` or `require`"), "{mode}");
}

#[test]
fn the_cursors_durability_is_every_batch_unless_an_interval_is_asked_for() {
    use ferry_contract::Durability;
    assert_eq!(parse(MINIMAL).unwrap().state.durability(), Durability::EveryCommit);
    let interval = parse(&format!("[state]\nsync = \"interval\"\nsync_interval = \"250ms\"\n{MINIMAL}")).unwrap();
    assert_eq!(interval.state.durability(), Durability::Interval(Duration::from_millis(250)));
    let wrong = problem(&format!("[state]\nsync = \"sometimes\"\n{MINIMAL}"));
    assert!(wrong.contains("sometimes") && wrong.contains("every-batch") && wrong.contains("interval"), "{wrong}");
}

#[test]
fn an_unknown_top_level_key_is_named_with_its_line_and_a_capability_without_a_section_says_so() {
    let error = problem(&format!("{MINIMAL}\n[postgress.orders]\nhost = \"db\"\n"));
    assert!(error.contains("unknown field `postgress`, expected one of `runtime`,"), "{error}");
    assert!(error.contains("`sinks`, `http`, `env`, `dirs`, `network`, `postgres`"), "{error}");
    let line = MINIMAL.lines().count() + 2;
    assert!(error.contains(&format!("line {line}: unknown field")), "{error}");
    let error = problem(&format!("state_dir = \"x\"\n{MINIMAL}"));
    assert!(error.contains("line 1: unknown field `state_dir`"), "{error}");
    let error = problem(&format!("{MINIMAL}\n[env]\nTZ = \"UTC\"\n"));
    assert!(error.contains("this capability has no host-wide section"), "{error}");
}
