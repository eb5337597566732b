//! The PostgreSQL harness itself (`ferry_tests::postgres_server`): a real server that
//! keeps what it committed through `kill -9` and takes writes after its restart, that
//! refuses a wrong password, and that runs beside another.

use ferry_tests::postgres_server::{PgServer, USER};
use tokio_postgres::NoTls;

#[tokio::test]
async fn committed_rows_survive_kill_9_and_the_server_takes_writes_after() {
    let mut server = PgServer::start();
    server.execute("CREATE TABLE t (id bigint PRIMARY KEY); INSERT INTO t SELECT generate_series(1, 100)").await;
    // A transaction open at the crash, holding a backend (and its shared memory).
    let open = server.client().await;
    open.batch_execute("BEGIN; INSERT INTO t SELECT generate_series(101, 200)").await.expect("an open transaction");

    server.kill_9();
    assert!(!server.is_running());
    assert!(open.simple_query("SELECT 1").await.is_err(), "a session outlived kill -9 of its server");
    assert!(server.config().connect(NoTls).await.is_err(), "a killed server accepted a connection");

    server.restart();
    assert!(
        server.log().contains("database system was not properly shut down; automatic recovery in progress"),
        "the restart did no crash recovery, so the kill was no crash; the log:\n{}",
        server.log()
    );
    let ids = server.query_i64s("SELECT id FROM t ORDER BY id").await;
    assert_eq!(ids, (1..=100).collect::<Vec<i64>>(), "committed rows lost, or uncommitted ones kept");
    server.execute("INSERT INTO t VALUES (101)").await;
    assert_eq!(server.query_i64s("SELECT count(*) FROM t").await, [101]);

    // A clean stop and start keep it all too.
    server.stop();
    assert!(!server.is_running());
    assert!(server.config().connect(NoTls).await.is_err(), "a stopped server accepted a connection");
    server.restart();
    assert_eq!(server.query_i64s("SELECT max(id) FROM t").await, [101]);
}

#[tokio::test]
async fn a_wrong_password_is_refused() {
    let server = PgServer::start();
    let mut config = server.config();
    config.password("not-the-password");
    let error = config.connect(NoTls).await.err().expect("a wrong password was accepted");
    let refusal = error.as_db_error().unwrap_or_else(|| panic!("not a refusal by the server: {error:?}"));
    assert_eq!(refusal.message(), format!("password authentication failed for user \"{USER}\""));
    assert!(server.log().contains(&format!("password authentication failed for user \"{USER}\"")));

    // No password at all is refused too (tokio-postgres notices before sending one).
    let mut config = server.config();
    config.password(Vec::<u8>::new());
    assert!(config.connect(NoTls).await.is_err(), "an empty password was accepted");

    // And the right one is taken.
    assert_eq!(server.query_i64s("SELECT 7::bigint").await, [7]);
}

#[tokio::test]
async fn two_servers_run_side_by_side() {
    let mut first = PgServer::start();
    let second = PgServer::start();
    assert_ne!(first.port(), second.port());
    assert_ne!(first.data_dir(), second.data_dir());

    first.execute("CREATE TABLE only_first (n bigint); INSERT INTO only_first VALUES (1)").await;
    let tables = "SELECT count(*) FROM pg_tables WHERE tablename = 'only_first'";
    assert_eq!(first.query_i64s(tables).await, [1]);
    assert_eq!(second.query_i64s(tables).await, [0], "the servers share a cluster");

    // Killing one leaves the other serving.
    first.kill_9();
    assert_eq!(second.query_i64s("SELECT 1::bigint").await, [1]);
}
