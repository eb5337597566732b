//! Tenants against a live Iggy server (opt-in: see `ferry_tests::iggy_server`): a
//! tenant with `[tenants.iggy]` signs in as a user of its own, so the server's
//! permissions for that user, not ferry's root connection, decide which streams its
//! connectors reach. A refused send is that connector's NACK with nothing committed;
//! its neighbours on the same tenant connection, and connectors of no tenant, keep
//! delivering.

use std::collections::BTreeMap;
use std::path::Path;

use ferry::config::Config;
use ferry::contract::NackReason;
use ferry::engine::status::Event;
use ferry::host::Host;
use ferry::runtime::Compiler;
use ferry::store::state::StateDir;
use ferry_tests::components::RANDOM_SOURCE;
use ferry_tests::harness::Running;
use ferry_tests::iggy_server::{IggyServer, PASSWORD, USERNAME, live_server};
use ferry_tests::records::{next_seq, seq_of};
use iggy::prelude::{
    Identifier, Permissions, StreamClient, StreamPermissions, TopicClient, TopicCreateOptions, UserClient, UserStatus,
};

const TENANT_PASSWORD: &str = "acme-secret";

/// As root: streams `acme-in`, `other` and `hidden`, each with a one-partition topic
/// `feed` (and `other/root-feed`), and user `acme`, who may read `acme-in` and
/// `other` but send only to `acme-in`, and has no permission at all on `hidden`.
/// Reading `other` is allowed on purpose: ferry looks a topic up before its first
/// send, so what is refused there is the send itself.
async fn streams_and_a_tenant_user(server: &IggyServer) {
    let root = server.client().await;
    let mut ids = BTreeMap::new();
    let streams = [("acme-in", &["feed"][..]), ("other", &["feed", "root-feed"][..]), ("hidden", &["feed"][..])];
    for (stream, topics) in streams {
        let details = root.create_stream(stream).await.unwrap_or_else(|e| panic!("creating {stream}: {e}"));
        ids.insert(stream, details.id as usize);
        let options = TopicCreateOptions { partitions_count: Some(1), ..Default::default() };
        for topic in topics {
            root.create_topic(&Identifier::named(stream).unwrap(), topic, &options)
                .await
                .unwrap_or_else(|e| panic!("creating {stream}/{topic}: {e}"));
        }
    }
    let send_and_read = StreamPermissions { read_stream: true, send_messages: true, ..Default::default() };
    let read_only = StreamPermissions { read_stream: true, ..Default::default() };
    let permissions = Permissions {
        global: Default::default(),
        streams: Some(BTreeMap::from([(ids["acme-in"], send_and_read), (ids["other"], read_only)])),
    };
    root.create_user("acme", TENANT_PASSWORD, UserStatus::Active, Some(permissions))
        .await
        .unwrap_or_else(|e| panic!("creating the user acme: {e}"));
}

/// A random source `key` of `tenant` (if any) into `stream/topic`: NACKs never fail
/// it (the test watches them come), and backoffs are short.
fn source(key: &str, tenant: Option<&str>, stream: &str, topic: &str, plugin_config: &str) -> String {
    let tenant = tenant.map(|t| format!("tenant = \"{t}\"")).unwrap_or_default();
    format!(
        r#"
[[sources]]
key = "{key}"
{tenant}
path = "{RANDOM_SOURCE}"
poll_interval = "2ms"
max_consecutive_nacks = 1000
nack_backoff = {{ initial = "20ms", max = "100ms" }}

[[sources.streams]]
stream = "{stream}"
topic = "{topic}"

[sources.plugin_config]
{plugin_config}
"#
    )
}

/// The config: root's `[iggy]` for `server`, tenant `acme` signing in with
/// `tenant_password`, and `sources`.
fn config(server: &IggyServer, tenant_password: &str, sources: &[String]) -> String {
    let head = format!(
        r#"
[runtime]
shutdown_grace_period = "20s"

[state]
path = "state"

[iggy]
address = "{address}"
username = "{USERNAME}"
password = "{PASSWORD}"
reconnect_backoff = {{ initial = "100ms", max = "1s" }}

[[tenants]]
key = "acme"

[tenants.iggy]
username = "acme"
password = "{tenant_password}"
"#,
        address = server.address()
    );
    [head].into_iter().chain(sources.iter().cloned()).collect()
}

/// A host from the config file `text`, written to `dir`, started.
fn start(dir: &Path, text: &str) -> Running {
    let path = dir.join("ferry.toml");
    std::fs::write(&path, text).unwrap();
    let config = Config::load(&path).unwrap_or_else(|e| panic!("{e}"));
    Running::start(Host::from_config(&config, Compiler::InProcess).unwrap_or_else(|e| panic!("{e}")))
}

fn is_nack_of(key: &'static str) -> impl FnMut(&Event) -> bool {
    move |e| matches!(e, Event::Nacked { key: k, .. } if &**k == key)
}

/// Wait until each `(key, generation)` is committed, in whatever order. The board is
/// checked at every event, since a commit may have come while the test waited for
/// something else (the refused connector's NACKs keep events coming meanwhile).
async fn wait_committed(running: &mut Running, wanted: &[(&str, u64)]) {
    let board = running.status.clone();
    let reached = |(key, at_least): &(&str, u64)| {
        board.get(key).and_then(|s| s.committed_generation).is_some_and(|g| g >= *at_least)
    };
    running.wait_for(&format!("commits {wanted:?}"), |_| wanted.iter().all(reached)).await;
}

async fn seqs_in(server: &IggyServer, stream: &str, topic: &str) -> Vec<u64> {
    server.read_all(stream, topic).await.iter().map(|m| seq_of(&m.payload)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_reaches_only_the_streams_its_iggy_user_may_send_to() {
    let Some(server) = live_server("iggy_tenants::a_tenant_reaches_only_the_streams_its_iggy_user_may_send_to") else {
        return;
    };
    ferry_tests::logs::capture();
    streams_and_a_tenant_user(&server).await;
    let dir = tempfile::tempdir().unwrap();
    // The allowed connector is paced, so that its batches go out while its
    // neighbour's sends are being refused on the same tenant connection.
    let sources = [
        source(
            "acme-allowed",
            Some("acme"),
            "acme-in",
            "feed",
            "messages_per_batch = 10\ninterval = \"20ms\"\nmax_count = 200",
        ),
        source("acme-forbidden", Some("acme"), "other", "feed", "messages_per_batch = 10\nmax_count = 200"),
        source("root-other", None, "other", "root-feed", "messages_per_batch = 10\nmax_count = 30"),
    ];
    let mut running = start(dir.path(), &config(&server, TENANT_PASSWORD, &sources));

    let event = running.wait_for("a NACK of the forbidden connector", is_nack_of("acme-forbidden")).await;
    let Event::Nacked { reason, detail, .. } = event else { unreachable!() };
    assert_eq!(reason, NackReason::DeliveryFailed, "{detail}");
    assert!(detail.contains("other/feed"), "the NACK names where the send went: {detail}");
    assert!(detail.contains("Unauthorized"), "and why the server refused it: {detail}");
    for _ in 0..5 {
        running.wait_for("more NACKs of the forbidden connector", is_nack_of("acme-forbidden")).await;
    }
    wait_committed(&mut running, &[("acme-allowed", 20), ("root-other", 3)]).await;
    // Still refused after its neighbour finished: a permission, not a moment.
    running.wait_for("a NACK after the allowed connector finished", is_nack_of("acme-forbidden")).await;
    let forbidden = running.status.get("acme-forbidden").expect("on the board");
    running.stop().await;

    assert_eq!(seqs_in(&server, "acme-in", "feed").await, (0..200).collect::<Vec<_>>(), "every seq once, in order");
    assert_eq!(seqs_in(&server, "other", "feed").await, Vec::<u64>::new(), "nothing reached the forbidden stream");
    assert_eq!(
        seqs_in(&server, "other", "root-feed").await,
        (0..30).collect::<Vec<_>>(),
        "root's connection reaches the stream the tenant may not send to"
    );
    let acme = StateDir::new(dir.path().join("state/tenants/acme"));
    assert_eq!(acme.read("acme-forbidden").unwrap(), None, "nothing committed for the refused connector");
    assert_eq!(next_seq(&acme.read("acme-allowed").unwrap().expect("a cursor").state), 200);
    let top = StateDir::new(dir.path().join("state"));
    assert_eq!(next_seq(&top.read("root-other").unwrap().expect("a cursor").state), 30);
    assert_eq!(forbidden.tenant.as_deref(), Some("acme"));
    assert_eq!((forbidden.batches_acked, forbidden.committed_generation), (0, None), "{forbidden:#?}");
    let signed_in =
        ferry_tests::logs::capture().all().into_iter().any(|l| l.message.contains("connected to Iggy as user `acme`"));
    assert!(signed_in, "the tenant's connection signed in as its own user");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_with_a_wrong_password_fails_alone_and_commits_nothing() {
    let Some(server) = live_server("iggy_tenants::a_tenant_with_a_wrong_password_fails_alone_and_commits_nothing")
    else {
        return;
    };
    ferry_tests::logs::capture();
    streams_and_a_tenant_user(&server).await;
    let dir = tempfile::tempdir().unwrap();
    let sources = [
        source("acme-locked-out", Some("acme"), "acme-in", "feed", "messages_per_batch = 5\nmax_count = 50"),
        source("root-other", None, "other", "root-feed", "messages_per_batch = 10\nmax_count = 30"),
    ];
    let mut running = start(dir.path(), &config(&server, "not-the-tenants-password", &sources));

    let detail = loop {
        let event = running.wait_for("a NACK of the tenant connector", is_nack_of("acme-locked-out")).await;
        let Event::Nacked { detail, .. } = event else { unreachable!() };
        if detail.contains("authentication failed") {
            break detail;
        }
    };
    assert!(detail.contains("user `acme`"), "the failure names the tenant's user, not root: {detail}");
    assert!(!detail.contains("not-the-tenants-password"), "the password is never shown: {detail}");
    wait_committed(&mut running, &[("root-other", 3)]).await;
    running.stop().await;

    assert_eq!(seqs_in(&server, "acme-in", "feed").await, Vec::<u64>::new());
    assert_eq!(seqs_in(&server, "other", "root-feed").await, (0..30).collect::<Vec<_>>());
    let acme = StateDir::new(dir.path().join("state/tenants/acme"));
    assert_eq!(acme.read("acme-locked-out").unwrap(), None, "nothing committed without a delivery");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_the_tenant_may_not_even_look_up_is_refused_naming_the_stream() {
    let Some(server) =
        live_server("iggy_tenants::a_stream_the_tenant_may_not_even_look_up_is_refused_naming_the_stream")
    else {
        return;
    };
    ferry_tests::logs::capture();
    streams_and_a_tenant_user(&server).await;
    let dir = tempfile::tempdir().unwrap();
    // Here the server refuses the lookup ferry makes before the first send, not the
    // send: the operator must still learn which stream it was.
    let sources = [source("acme-hidden", Some("acme"), "hidden", "feed", "messages_per_batch = 5\nmax_count = 20")];
    let mut running = start(dir.path(), &config(&server, TENANT_PASSWORD, &sources));
    let mut details = Vec::new();
    while details.len() < 3 {
        let event = running.wait_for("a NACK of the hidden stream's connector", is_nack_of("acme-hidden")).await;
        let Event::Nacked { reason, detail, .. } = event else { unreachable!() };
        assert_eq!(reason, NackReason::DeliveryFailed, "{detail}");
        // A batch polled before the tenant's connection is up is NACKed for that, and
        // says so; the refusal of the lookup comes once it is.
        if !detail.contains("not connected") {
            details.push(detail);
        }
    }
    running.stop().await;

    assert_eq!(seqs_in(&server, "hidden", "feed").await, Vec::<u64>::new(), "nothing reached the stream");
    let acme = StateDir::new(dir.path().join("state/tenants/acme"));
    assert_eq!(acme.read("acme-hidden").unwrap(), None, "nothing committed");
    for detail in &details {
        assert!(detail.contains("hidden"), "the NACK names the stream it could not reach: {detail:?}");
    }
}
