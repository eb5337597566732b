//! A property test over the config loader, so that the next hostile input is found by
//! us: configs with absurd numbers, durations and sizes, keys that differ only by case
//! or `-`/`_`, paths that are devices, pipes or oversized files, odd keys and
//! environment overrides. Each must be refused with an error naming the file, or be
//! accepted and then safe to use: no arithmetic the host does on an accepted value may
//! panic, and an override lands exactly where it says or nowhere.
//!
//! Two generators. Whole configs draw a wildness: how often a key gets an absurd or
//! mistyped value instead of a sensible (or sensible but extreme) one; tame ones are
//! often accepted, wild ones test the refusals. And a sane config naming every
//! duration, size and count gets one absurd value at a time, so that a missing bound
//! is an accepted config whose use overflows, not one refused for something else.
//!
//! The case count is fixed (`CASES`, under a second in all), so CI's time is bounded;
//! each run draws new inputs. A failure prints the smallest config proptest could
//! shrink it to (and saves its seed under `crates/config/proptest-regressions/`): make it a test
//! in `tests.rs` when fixing it.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

use super::env::variable_form;
use ferry_contract::settings::{Backoff, EPOCH_TICK, MAX_POOL_RESERVATION};

use super::{Allocator, Config, ConfigError, ConnectorConfig};

const CASES: u32 = 2000;

/// A directory holding the config and the things hostile paths point at: a named pipe,
/// a file over every cap (sparse, so it costs nothing), a small regular file, a
/// directory.
fn site() -> &'static Path {
    static SITE: OnceLock<tempfile::TempDir> = OnceLock::new();
    SITE.get_or_init(|| {
        let dir = tempfile::tempdir().expect("a temporary directory");
        ferry_contract::files::mkfifo(&dir.path().join("pipe"));
        let big = std::fs::File::create(dir.path().join("big")).expect("creating a file");
        big.set_len(super::MAX_CONFIG_BYTES + 1).expect("a sparse file");
        std::fs::write(dir.path().join("token"), "t0ken\n").expect("writing a file");
        std::fs::create_dir(dir.path().join("in")).expect("creating a directory");
        dir
    })
    .path()
}

fn config_path() -> PathBuf {
    site().join("ferry.toml")
}

fn quoted(text: String) -> String {
    toml::Value::String(text).to_string()
}

fn one_of(choices: &[&'static str]) -> BoxedStrategy<String> {
    prop::sample::select(choices.to_vec()).prop_map(str::to_string).boxed()
}

/// What a key expects, so that a value can get past serde and reach validation.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Duration,
    Size,
    Count,
    Flag,
    Text,
    Allocator,
    Backoff,
}

/// A duration as written in the file, without quotes: sensible, at the edges of
/// what is accepted, or (one time in `40 / wild`) absurd.
fn duration_text(wild: u32) -> BoxedStrategy<String> {
    let unit = prop::sample::select(vec!["ns", "us", "ms", "s", "m", "h", "d", "w", "y", ""]);
    prop_oneof![
        300 => (1u64..3600).prop_map(|n| format!("{n}s")),
        50 => (100u64..1000).prop_map(|n| format!("{n}ms")),
        50 => one_of(&["1ms", "10ms", "23h", "24h", "1day", "1h"]),
        wild => (0u64..=u64::MAX, unit.clone()).prop_map(|(n, u)| format!("{n}{u}")),
        wild => (0u64..2000, unit).prop_map(|(n, u)| format!("{n}{u}")),
        wild => one_of(&["-1s", "1ns", "9ms", "0s", "25h", "1year", "18446744073709551615s", "1.5s"]),
    ]
    .boxed()
}

/// A size as written in the file, without quotes.
fn size_text(wild: u32) -> BoxedStrategy<String> {
    let unit = prop::sample::select(vec!["", "B", "KiB", "MiB", "GiB", "TiB", "MB", " MiB"]);
    prop_oneof![
        300 => (64u64..512).prop_map(|n| format!("{n}MiB")),
        30 => one_of(&["1MiB", "512MiB", "4GiB", "64GiB", "1"]),
        wild => (0u64..=u64::MAX, unit.clone()).prop_map(|(n, u)| format!("{n}{u}")),
        wild => (0u64..5000, unit).prop_map(|(n, u)| format!("{n}{u}")),
        wild => one_of(&["-5", "-5MiB", "1.5GiB", "MiB", "65GiB", "0"]),
    ]
    .boxed()
}

fn path_text(wild: u32) -> BoxedStrategy<String> {
    prop_oneof![
        100 => Just("in".to_string()),
        wild => one_of(&["/dev/zero", "/dev/null", "pipe", "big", "token", "", ".", "/", "missing", "token/x"]),
    ]
    .boxed()
}

/// A value of the kind a key expects, written as TOML.
fn typed(kind: Kind, wild: u32) -> BoxedStrategy<String> {
    match kind {
        Kind::Duration => duration_text(wild).prop_map(quoted).boxed(),
        Kind::Size => prop_oneof![
            100 => size_text(wild).prop_map(quoted),
            wild => any::<i64>().prop_map(|n| n.to_string()),
        ]
        .boxed(),
        Kind::Count => prop_oneof![
            300 => (1u32..100).prop_map(|n| n.to_string()),
            wild => any::<u64>().prop_map(|n| n.to_string()),
            wild => one_of(&["0", "1", "4294967295", "4294967296", "-1"]),
        ]
        .boxed(),
        Kind::Flag => any::<bool>().prop_map(|b| b.to_string()).boxed(),
        Kind::Text => "[a-z0-9.:]{1,12}".prop_map(quoted).boxed(),
        Kind::Allocator => prop_oneof![
            100 => one_of(&["\"pooling\"", "\"on-demand\""]),
            wild => one_of(&["\"mmap\"", "\"Pooling\""]),
        ]
        .boxed(),
        Kind::Backoff => (duration_text(wild), duration_text(wild))
            .prop_map(|(initial, max)| format!("{{ initial = {}, max = {} }}", quoted(initial), quoted(max)))
            .boxed(),
    }
}

/// Any value at all: wrong types, extremes, odd shapes.
fn hostile() -> BoxedStrategy<String> {
    prop_oneof![
        any::<i64>().prop_map(|n| n.to_string()),
        one_of(&[
            "0",
            "-1",
            "18446744073709551615",
            "1e308",
            "nan",
            "-inf",
            "true",
            "[]",
            "{}",
            "[1, \"a\"]",
            "{ a = 1 }",
            "1979-05-27T07:32:00Z",
            "\"\"",
        ]),
        "\\PC{0,8}".prop_map(quoted),
    ]
    .boxed()
}

/// Each of `keys` present or not, with a value of its kind or (one time in
/// `60 / wild`) any value, plus now and then a key nobody knows.
fn settings(keys: &'static [(&'static str, Kind)], wild: u32) -> BoxedStrategy<String> {
    let lines: Vec<BoxedStrategy<String>> = keys
        .iter()
        .map(|&(key, kind)| {
            let value = prop_oneof![600 => typed(kind, wild), wild => hostile()];
            prop::option::weighted(0.4, value)
                .prop_map(move |v| v.map(|v| format!("{key} = {v}\n")).unwrap_or_default())
                .boxed()
        })
        .collect();
    let odd = prop::option::weighted(0.002 * f64::from(wild), ("[a-z_-]{1,10}", hostile()))
        .prop_map(|odd| odd.map(|(k, v)| format!("{k} = {v}\n")).unwrap_or_default());
    (lines, odd).prop_map(|(lines, odd)| lines.concat() + &odd).boxed()
}

/// Connector and tenant keys: distinct ones, ones that collide in their variable
/// form (`a-b`, `a_b`, `A-B`; `orders`, `Orders`), and invalid ones.
fn key(wild: u32) -> BoxedStrategy<String> {
    prop_oneof![
        60 => one_of(&["s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8"]),
        20 => one_of(&["a-b", "a_b", "A-B", "orders", "Orders"]),
        wild => one_of(&["", "a/b", "../x", "ü", "a b"]),
    ]
    .boxed()
}

const RUNTIME: &[(&str, Kind)] = &[
    ("shutdown_grace_period", Kind::Duration),
    ("progress_interval", Kind::Duration),
    ("allocator", Kind::Allocator),
    ("max_component_bytes", Kind::Size),
    ("compile_timeout", Kind::Duration),
    ("compile_memory", Kind::Size),
    ("compile_cache", Kind::Flag),
];

const SOURCE: &[(&str, Kind)] = &[
    ("enabled", Kind::Flag),
    ("poll_interval", Kind::Duration),
    ("delivery_timeout", Kind::Duration),
    ("max_consecutive_nacks", Kind::Count),
    ("nack_backoff", Kind::Backoff),
    ("restart_backoff", Kind::Backoff),
];

const LIMITS: &[(&str, Kind)] = &[
    ("memory", Kind::Size),
    ("table_elements", Kind::Count),
    ("instances", Kind::Count),
    ("call_timeout", Kind::Duration),
    ("fuel", Kind::Count),
    ("max_messages_per_batch", Kind::Count),
    ("max_batch_bytes", Kind::Size),
    ("max_message_bytes", Kind::Size),
    ("max_state_bytes", Kind::Size),
    ("log_lines_per_second", Kind::Count),
    ("log_burst", Kind::Count),
];

const STREAM_CREATE: &[(&str, Kind)] = &[("partitions", Kind::Count), ("retention", Kind::Duration)];

const IGGY: &[(&str, Kind)] =
    &[("address", Kind::Text), ("connect_timeout", Kind::Duration), ("reconnect_backoff", Kind::Backoff)];

const TENANT: &[(&str, Kind)] = &[("max_connectors", Kind::Count), ("max_memory", Kind::Size)];

const PLUGIN_CONFIG: &[(&str, Kind)] =
    &[("api-token", Kind::Text), ("api_token", Kind::Text), ("API_TOKEN", Kind::Text), ("n", Kind::Count)];

fn source(wild: u32) -> BoxedStrategy<String> {
    let secret = prop_oneof![
        file_text(wild).prop_map(|p| format!("{{ file = {} }}", quoted(p))),
        Just("{ env = \"FERRY_FUZZ_SURELY_UNSET\" }".to_string()),
    ];
    (
        key(wild),
        prop::option::weighted(0.1, key(wild)),
        settings(SOURCE, wild),
        settings(LIMITS, wild),
        prop::option::of(path_text(wild)),
        prop::option::of(secret),
        settings(PLUGIN_CONFIG, wild),
        prop::option::of(settings(STREAM_CREATE, wild)),
    )
        .prop_map(|(key, tenant, settings, limits, dir, secret, plugin_config, create)| {
            let mut text = format!("[[sources]]\nkey = {}\npath = \"c.wasm\"\n{settings}", quoted(key));
            if let Some(tenant) = tenant {
                text += &format!("tenant = {}\n", quoted(tenant));
            }
            text += &format!("[sources.limits]\n{limits}[sources.plugin_config]\n{plugin_config}");
            if let Some(dir) = dir {
                text += &format!("[sources.grants]\ndirs = [{{ host = {}, guest = \"/in\" }}]\n", quoted(dir));
            }
            if let Some(secret) = secret {
                text += &format!("[sources.secrets]\nsecret = {secret}\n");
            }
            text += "[[sources.streams]]\nstream = \"s\"\ntopic = \"t\"\n";
            if let Some(create) = create {
                text += &format!("[sources.streams.create]\n{create}");
            }
            text
        })
        .boxed()
}

fn tenant(wild: u32) -> BoxedStrategy<String> {
    (key(wild), settings(TENANT, wild), prop::option::weighted(0.1, file_text(wild)))
        .prop_map(|(key, settings, token_file)| {
            let iggy = token_file.map(|p| format!("[tenants.iggy]\ntoken_file = {}\n", quoted(p))).unwrap_or_default();
            format!("[[tenants]]\nkey = {}\n{settings}{iggy}", quoted(key))
        })
        .boxed()
}

/// A file anywhere: a regular one when tame.
fn file_text(wild: u32) -> BoxedStrategy<String> {
    path_text(wild).prop_map(|p| if p == "in" { "token".to_string() } else { p }).boxed()
}

/// How `[iggy]` signs in: a password, or a token file anywhere.
fn iggy_sign_in(wild: u32) -> BoxedStrategy<String> {
    prop_oneof![
        Just("username = \"u\"\npassword = \"p\"\n".to_string()),
        file_text(wild).prop_map(|p| format!("token_file = {}\n", quoted(p))),
    ]
    .boxed()
}

/// A whole config file, at a wildness drawn for it.
fn config_text() -> BoxedStrategy<String> {
    (1u32..=6)
        .prop_flat_map(|wildness| {
            let wild = wildness * wildness;
            (
                settings(RUNTIME, wild),
                prop::option::weighted(0.3, path_text(wild)),
                prop::option::weighted(0.3, path_text(wild)),
                prop::option::weighted(
                    0.3,
                    (settings(IGGY, wild), iggy_sign_in(wild), prop::option::weighted(0.2, file_text(wild))),
                ),
                prop::collection::vec(tenant(wild), 0..3),
                prop::collection::vec(source(wild), 0..4),
            )
        })
        .prop_map(|(runtime, state, local_log, iggy, tenants, sources)| {
            let mut text = format!("[runtime]\n{runtime}");
            if let Some(path) = state {
                text += &format!("[state]\npath = {}\n", quoted(path));
            }
            if let Some(path) = local_log {
                text += &format!("[local_log]\npath = {}\n", quoted(path));
            }
            if let Some((settings, sign_in, ca_file)) = iggy {
                text += &format!("[iggy]\n{settings}{sign_in}");
                if let Some(ca_file) = ca_file {
                    text += &format!("tls = {{ ca_file = {} }}\n", quoted(ca_file));
                }
            }
            text + &tenants.concat() + &sources.concat()
        })
        .boxed()
}

/// `FERRY__...` variables: mostly for places that exist (in any spelling of a
/// connector's key), sometimes a path of random segments.
fn overrides() -> BoxedStrategy<Vec<(String, String)>> {
    let place = prop::sample::select(vec![
        "SOURCES/{}/PLUGIN_CONFIG/API_TOKEN",
        "SOURCES/{}/LIMITS/MEMORY",
        "SOURCES/{}/LIMITS/CALL_TIMEOUT",
        "SOURCES/{}/POLL_INTERVAL",
        "SOURCES/{}/NACK_BACKOFF/MAX",
        "SOURCES/{}/KEY",
        "SOURCES/{}",
        "sources/{}/enabled",
        "TENANTS/{}/MAX_MEMORY",
        "TENANTS/{}/IGGY/TOKEN_FILE",
        "RUNTIME/SHUTDOWN_GRACE_PERIOD",
        "RUNTIME/COMPILE_MEMORY",
        "STATE/PATH",
        "state/path",
        "LOCAL_LOG/PATH",
        "IGGY/TOKEN_FILE",
        "RUNTIME//X",
    ]);
    let known = (place, key(2)).prop_map(|(place, key)| place.replace("{}", &key).replace('/', "__"));
    let random = prop::collection::vec(one_of(&["SOURCES", "A_B", "LIMITS", "KEY", "PATH", ""]), 1..5)
        .prop_map(|segments| segments.join("__"));
    let value = prop_oneof![duration_text(3), size_text(3), path_text(3), hostile()];
    let variable =
        (prop_oneof![8 => known, 1 => random], value).prop_map(|(path, value)| (format!("FERRY__{path}"), value));
    prop_oneof![2 => Just(Vec::new()), 1 => prop::collection::vec(variable, 1..3)].boxed()
}

/// A key of [`SANE`]: its name, its sane value, and what kind of absurd value may
/// replace it.
type Knob = (&'static str, &'static str, Option<Kind>);

/// A sane config naming every duration, size and count there is, each with the kind
/// of absurd value it may be given instead (`None`: not a target).
const SANE: &[(&str, &[Knob])] = &[
    (
        "[runtime]",
        &[
            ("shutdown_grace_period", "\"10s\"", Some(Kind::Duration)),
            ("progress_interval", "\"10s\"", Some(Kind::Duration)),
            ("allocator", "\"pooling\"", None),
            ("max_component_bytes", "\"64MiB\"", Some(Kind::Size)),
            ("compile_timeout", "\"60s\"", Some(Kind::Duration)),
            ("compile_memory", "\"2GiB\"", Some(Kind::Size)),
        ],
    ),
    (
        "[iggy]",
        &[
            ("username", "\"u\"", None),
            ("password", "\"p\"", None),
            ("connect_timeout", "\"5s\"", Some(Kind::Duration)),
            ("reconnect_backoff", "{ initial = \"200ms\", max = \"10s\" }", Some(Kind::Backoff)),
        ],
    ),
    (
        "[[tenants]]",
        &[
            ("key", "\"t\"", None),
            ("max_connectors", "2", Some(Kind::Count)),
            ("max_memory", "\"1GiB\"", Some(Kind::Size)),
        ],
    ),
    (
        "[[sources]]",
        &[
            ("key", "\"a\"", None),
            ("tenant", "\"t\"", None),
            ("path", "\"c.wasm\"", None),
            ("poll_interval", "\"100ms\"", Some(Kind::Duration)),
            ("delivery_timeout", "\"5s\"", Some(Kind::Duration)),
            ("max_consecutive_nacks", "5", Some(Kind::Count)),
            ("nack_backoff", "{ initial = \"100ms\", max = \"10s\" }", Some(Kind::Backoff)),
            ("restart_backoff", "{ initial = \"500ms\", max = \"30s\" }", Some(Kind::Backoff)),
        ],
    ),
    (
        "[sources.limits]",
        &[
            ("memory", "\"64MiB\"", Some(Kind::Size)),
            ("table_elements", "100000", Some(Kind::Count)),
            ("instances", "64", Some(Kind::Count)),
            ("call_timeout", "\"5s\"", Some(Kind::Duration)),
            ("fuel", "1000000", Some(Kind::Count)),
            ("max_messages_per_batch", "100", Some(Kind::Count)),
            ("max_batch_bytes", "\"16MiB\"", Some(Kind::Size)),
            ("max_message_bytes", "\"1MiB\"", Some(Kind::Size)),
            ("max_state_bytes", "\"1MiB\"", Some(Kind::Size)),
            ("log_lines_per_second", "100", Some(Kind::Count)),
            ("log_burst", "1000", Some(Kind::Count)),
        ],
    ),
    ("[[sources.streams]]", &[("stream", "\"s\"", None), ("topic", "\"t\"", None)]),
    (
        "[sources.streams.create]",
        &[("partitions", "3", Some(Kind::Count)), ("retention", "\"7d\"", Some(Kind::Duration))],
    ),
    (
        "[[sources]]",
        &[
            ("key", "\"b\"", None),
            ("tenant", "\"t\"", None),
            ("path", "\"c.wasm\"", None),
            ("streams", "[{ stream = \"s\", topic = \"u\" }]", None),
        ],
    ),
    ("[sources.limits]", &[("memory", "\"64MiB\"", Some(Kind::Size))]),
];

/// An absurd value of a kind that still parses as one: what a missing bound lets in.
fn absurd(kind: Kind) -> BoxedStrategy<String> {
    let duration = prop_oneof![
        one_of(&["18446744073709551615s", "9223372036854775807s", "1000years", "8d", "25h", "0s", "1ns", "9ms"]),
        (any::<u64>(), prop::sample::select(vec!["ns", "us", "ms", "s", "m", "h", "d"]))
            .prop_map(|(n, u)| format!("{n}{u}")),
    ];
    match kind {
        Kind::Duration => duration.prop_map(quoted).boxed(),
        Kind::Size => prop_oneof![
            one_of(&[
                "18446744073709551615",
                "\"17179869183GiB\"",
                "\"16777215TiB\"",
                "\"65GiB\"",
                "\"2TiB\"",
                "0",
                "1"
            ]),
            any::<u64>().prop_map(|n| (n >> 1).to_string()),
        ]
        .boxed(),
        Kind::Count => {
            prop_oneof![one_of(&["0", "4294967295"]), any::<u64>().prop_map(|n| (n >> 1).to_string())].boxed()
        }
        Kind::Backoff => (duration.clone(), duration)
            .prop_map(|(initial, max)| format!("{{ initial = {}, max = {} }}", quoted(initial), quoted(max)))
            .boxed(),
        _ => unreachable!("only durations, sizes, counts and backoffs are targets"),
    }
}

/// [`SANE`] with one of its targets set to an absurd value.
fn sane_but_one() -> BoxedStrategy<String> {
    let targets: Vec<(usize, usize, Kind)> = SANE
        .iter()
        .enumerate()
        .flat_map(|(s, (_, keys))| {
            keys.iter().enumerate().filter_map(move |(k, (_, _, kind))| kind.map(|kind| (s, k, kind)))
        })
        .collect();
    prop::sample::select(targets)
        .prop_flat_map(|(s, k, kind)| absurd(kind).prop_map(move |value| (s, k, value)))
        .prop_map(|(section, key, value)| render_sane(Some((section, key, &value))))
        .boxed()
}

/// [`SANE`] as a file, with `(section, key, value)` in place of that key's sane value.
fn render_sane(target: Option<(usize, usize, &str)>) -> String {
    let mut text = String::new();
    for (s, (header, keys)) in SANE.iter().enumerate() {
        text += &format!("{header}\n");
        for (k, (key, sane, _)) in keys.iter().enumerate() {
            let value = match target {
                Some((section, key, value)) if (section, key) == (s, k) => value,
                _ => sane,
            };
            text += &format!("{key} = {value}\n");
        }
    }
    text
}

#[test]
fn the_sane_config_is_accepted_so_that_one_absurd_value_is_all_that_is_wrong() {
    let config = Config::parse(&config_path(), &render_sane(None), Vec::new()).unwrap();
    assert_eq!(config.runtime.allocator, Allocator::Pooling);
    assert_eq!(config.sources.len(), 2);
}

/// The error names the file first, and says something.
fn refused_properly(path: &Path, error: &ConfigError) -> Result<(), TestCaseError> {
    prop_assert_eq!(&error.file, path);
    let shown = error.to_string();
    prop_assert!(shown.starts_with(&format!("{}: ", path.display())), "{}", shown);
    prop_assert!(!error.problem.trim().is_empty());
    Ok(())
}

/// What the host does with an accepted config, none of which may panic or overflow.
fn safe_to_use(config: &Config) -> Result<(), TestCaseError> {
    let now = Instant::now();
    let later = |d: Duration| now.checked_add(d).is_some();
    let runtime = &config.runtime;
    prop_assert!(later(runtime.shutdown_grace_period), "{:?}", runtime.shutdown_grace_period);
    prop_assert!(!runtime.progress_interval.is_zero() && later(runtime.progress_interval));
    prop_assert!(!runtime.compile_timeout.is_zero() && later(runtime.compile_timeout));
    prop_assert!(runtime.max_component_bytes.bytes() > 0 && runtime.compile_memory.bytes() > 0);
    let mut backoffs = Vec::new();
    for source in &config.sources {
        prop_assert!(source.limits.call_timeout >= EPOCH_TICK, "{:?}", source.limits.call_timeout);
        for d in [source.poll_interval, source.delivery_timeout, source.limits.call_timeout] {
            prop_assert!(!d.is_zero() && later(d), "{:?}", d);
        }
        backoffs.extend([source.nack_backoff, source.restart_backoff]);
        // Reads secret files: a device or a pipe must be refused, not read forever.
        let _ = source.plugin_config_json();
    }
    if let Some(iggy) = &config.iggy {
        backoffs.push(iggy.reconnect_backoff);
        prop_assert!(later(iggy.connect_timeout));
    }
    for config in backoffs {
        let mut backoff = Backoff::new(config);
        for _ in 0..100 {
            let delay = backoff.next_delay();
            prop_assert!(delay <= config.max && later(delay));
        }
    }
    // What the engine reserves (`ferry_host::engine_options`, tested to use these two).
    let reservation = u64::from(config.pool_slots()).checked_mul(config.largest_memory().bytes());
    prop_assert!(reservation.is_some());
    if config.runtime.allocator == Allocator::Pooling {
        prop_assert!(reservation.unwrap_or(u64::MAX) <= MAX_POOL_RESERVATION.bytes());
    }
    for tenant in &config.tenants {
        let members = config.sources.iter().filter(|s| s.tenant.as_deref() == Some(&tenant.key));
        let total = members.map(|s| s.limits.memory.bytes()).try_fold(0u64, u64::checked_add);
        prop_assert!(total.is_some(), "the memory of tenant {} overflows", tenant.key);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: CASES, ..ProptestConfig::default() })]

    #[test]
    fn the_loader_refuses_hostile_configs_by_name_or_accepts_them_safe_to_use(
        text in config_text(),
        vars in overrides(),
    ) {
        let path = config_path();
        match Config::parse(&path, &text, vars) {
            Err(error) => refused_properly(&path, &error)?,
            Ok(config) => safe_to_use(&config)?,
        }
    }

    /// Every duration, size and count has a bound that keeps the host's arithmetic
    /// on it safe: one absurd value in an otherwise sane config is refused, naming
    /// the file, or harmless.
    #[test]
    fn one_absurd_value_in_a_sane_config_is_refused_or_harmless(text in sane_but_one()) {
        let path = config_path();
        match Config::parse(&path, &text, Vec::new()) {
            Err(error) => refused_properly(&path, &error)?,
            Ok(config) => safe_to_use(&config)?,
        }
    }

    /// Issue 8: `FERRY__SOURCES__A_B__...` reached the connector `a-b` when `a_b` was
    /// meant. An override must land in the one entry whose key it names, or nowhere.
    #[test]
    fn an_override_reaches_exactly_the_connector_it_names_or_is_refused(
        keys in prop::collection::vec(key(1), 1..4),
        named in key(1),
    ) {
        let entry = |k: &String| {
            format!("[[sources]]\nkey = {}\npath = \"c.wasm\"\nstreams = [{{ stream = \"s\", topic = \"t\" }}]\n", quoted(k.clone()))
        };
        let sources: String = keys.iter().map(entry).collect();
        let variable = format!("FERRY__SOURCES__{}__PLUGIN_CONFIG__SECRET", variable_form(&named));
        let path = config_path();
        match Config::parse(&path, &sources, vec![(variable, "marker".to_string())]) {
            Err(error) => refused_properly(&path, &error)?,
            Ok(config) => {
                let reached: Vec<&str> = config
                    .sources
                    .iter()
                    .filter(|s| s.plugin_config.as_ref().is_some_and(|p| p.contains_key("secret")))
                    .map(|s| s.key.as_str())
                    .collect();
                prop_assert_eq!(reached.len(), 1, "{:?}", reached);
                // Not just an entry the variable matches: the only one it could match.
                let form = variable_form(&named);
                let candidates: Vec<&str> =
                    config.sources.iter().map(|s| s.key.as_str()).filter(|k| variable_form(k) == form).collect();
                prop_assert_eq!(candidates, reached);
            }
        }
    }

    /// Any integer as a size is that size, or a refusal that says what is wrong.
    #[test]
    fn any_integer_as_a_size_is_a_size_or_a_clear_refusal(n in any::<i64>()) {
        let text = format!("[runtime]\ncompile_memory = {n}\n");
        let path = config_path();
        match Config::parse(&path, &text, Vec::new()) {
            Ok(config) => prop_assert_eq!(i64::try_from(config.runtime.compile_memory.bytes()).ok(), Some(n)),
            Err(error) if n < 0 => prop_assert!(error.problem.contains("a size cannot be negative"), "{}", error),
            Err(error) => prop_assert!(error.problem.contains("[runtime] compile_memory"), "{}", error),
        }
    }
}
