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
