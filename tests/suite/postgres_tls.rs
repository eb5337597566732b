//! TLS to PostgreSQL (`tls = "require"`, `ca_file`), against a server of the test's
//! own started with `ssl = on` and a certificate the test made: trusted through
//! `ca_file`, a connection is inside TLS and round-trips; a certificate of another
//! authority, or of the trusted one for another host, is refused, naming the server
//! and that it was not trusted; and a server that offers no TLS is refused when TLS
//! is required. Each refusal is a `connection` error value for the guest.

use std::collections::BTreeMap;
use std::path::Path;

use ferry::capabilities::postgres::{PgPools, PostgresServer, TlsMode};
use ferry::engine::status::Event;
use ferry_tests::components::PG_PROBE;
use ferry_tests::harness::Harness;
use ferry_tests::postgres_server::{PASSWORD, PgServer};
use serde_json::{Value as Json, json};

/// A self-signed certificate for 127.0.0.1 by the authority `who`, and its key, in PEM.
fn certificate(who: &str) -> (String, String) {
    certificate_for(who, "127.0.0.1")
}

/// A self-signed certificate for `host` by the authority `who`, and its key, in PEM.
fn certificate_for(who: &str, host: &str) -> (String, String) {
    let mut params = rcgen::CertificateParams::new(vec![host.to_string()]).unwrap();
    params.distinguished_name.push(rcgen::DnType::CommonName, who);
    let key = rcgen::KeyPair::generate().unwrap();
    (params.self_signed(&key).unwrap().pem(), key.serialize_pem())
}

/// `server` as `[postgres.db]` with TLS required, trusting the certificates in `ca`
/// (written to `dir/ca.pem`), or the system's roots.
fn with_tls(server: &PgServer, dir: &Path, ca: Option<&str>) -> PostgresServer {
    let mut defined = server.ferry_server(dir, "db", PASSWORD);
    defined.tls = Some(TlsMode::Require);
    defined.ca_file = ca.map(|pem| {
        let file = dir.join("ca.pem");
        std::fs::write(&file, pem).unwrap();
        file
    });
    defined
}

/// The outcome of each of `steps`, run by a `pg-probe` source `key` on `defined`.
async fn outcomes(h: &Harness, key: &str, defined: PostgresServer, steps: Json) -> Vec<Json> {
    let mut source = h.source(key, PG_PROBE, json!({ "connection": "db", "steps": steps }));
    source.sandbox.grants.postgres = vec!["db".into()];
    let servers = BTreeMap::from([("db".to_string(), defined)]);
    source.sandbox.shared.postgres = PgPools::granted(&source.sandbox.grants.postgres, &servers).unwrap();
    let mut running = h.start(vec![source]);
    running.wait_for("every step", |e| matches!(e, Event::Idle { key: k } if **k == *key)).await;
    running.stop().await;
    h.records(key).iter().map(|r| serde_json::from_slice(&r.payload).unwrap()).collect()
}

/// Whether the session is inside TLS, as the server sees it.
const IN_TLS: &str = "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_whose_certificate_chains_to_the_ca_file_is_reached_inside_tls() {
    let (cert, key) = certificate("the server's own");
    let server = PgServer::start_with_tls(&cert, &key);
    let h = Harness::new();
    let steps = json!([
        { "query": { "sql": IN_TLS } },
        { "query": { "sql": "SELECT $1::text || '!'", "params": [{ "text": "round trip" }] } },
    ]);
    let inside = outcomes(&h, "tls", with_tls(&server, h.dir.path(), Some(&cert)), steps).await;
    assert_eq!(inside[0], json!({ "step": 0, "ok": [[{ "boolean": true }]] }), "{}", inside[0]);
    assert_eq!(inside[1], json!({ "step": 1, "ok": [[{ "text": "round trip!" }]] }));
    // Without TLS asked for, the same server is reached in plain TCP.
    let plain = server.ferry_server(h.dir.path(), "db", PASSWORD);
    let outside = outcomes(&h, "plain", plain, json!([{ "query": { "sql": IN_TLS } }])).await;
    assert_eq!(outside[0], json!({ "step": 0, "ok": [[{ "boolean": false }]] }), "{}", outside[0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_of_another_authority_is_refused_as_not_trusted() {
    let (cert, key) = certificate("the server's own");
    let (stranger, _) = certificate("a stranger");
    let server = PgServer::start_with_tls(&cert, &key);
    let h = Harness::new();
    let steps = json!([{ "query": { "sql": IN_TLS } }]);
    let outcomes = outcomes(&h, "untrusted", with_tls(&server, h.dir.path(), Some(&stranger)), steps).await;
    let error = &outcomes[0]["error"];
    assert_eq!(error["kind"], "connection", "{}", outcomes[0]);
    let message = error["message"].as_str().unwrap();
    assert!(message.contains("cannot connect to `db`"), "{message}");
    assert!(message.contains("the server's certificate was not trusted"), "{message}");
    assert!(message.contains(&format!("the ca_file {}", h.dir.path().join("ca.pem").display())), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_for_another_host_is_refused_though_its_authority_is_trusted() {
    let (cert, key) = certificate_for("the server's own", "db.internal");
    let server = PgServer::start_with_tls(&cert, &key);
    let h = Harness::new();
    let steps = json!([{ "query": { "sql": IN_TLS } }]);
    let outcomes = outcomes(&h, "misnamed", with_tls(&server, h.dir.path(), Some(&cert)), steps).await;
    let error = &outcomes[0]["error"];
    assert_eq!(error["kind"], "connection", "{}", outcomes[0]);
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("cannot connect to `db`") && message.contains("not trusted (NotValidForName"),
        "{message}"
    );
    assert!(message.contains("name the host `127.0.0.1`"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_required_of_a_server_without_it_is_refused_naming_the_server() {
    let (cert, _) = certificate("the server's own");
    let server = PgServer::start();
    let h = Harness::new();
    let steps = json!([{ "query": { "sql": IN_TLS } }]);
    let outcomes = outcomes(&h, "no-tls", with_tls(&server, h.dir.path(), Some(&cert)), steps).await;
    let error = &outcomes[0]["error"];
    assert_eq!(error["kind"], "connection", "{}", outcomes[0]);
    let message = error["message"].as_str().unwrap();
    assert!(message.contains("cannot connect to `db`") && message.contains("server does not support TLS"), "{message}");
}
