//! `numeric` through the PostgreSQL connectors, exactly: `postgres-source` delivers a
//! numeric column as a JSON string of its decimal text (30 digits, NaN, a scale of 200
//! places, a typmod's trailing zeros), pages by a numeric key (the cursor binds it back
//! as text), and `postgres-sink` writes those strings back into numeric columns with
//! not a digit changed.

use std::collections::BTreeMap;

use ferry::capabilities::postgres::PgPools;
use ferry::engine::status::Event;
use ferry::runtime::Sandbox;
use ferry_tests::components::{POSTGRES_SINK, POSTGRES_SOURCE};
use ferry_tests::harness::{Harness, Running};
use ferry_tests::postgres_server::{PASSWORD, PgServer};
use serde_json::{Value as Json, json};

/// `sandbox` granted the connection `db` to `server`.
fn grant(h: &Harness, server: &PgServer, sandbox: &mut Sandbox) {
    sandbox.grants.postgres = vec!["db".into()];
    let servers = BTreeMap::from([("db".to_string(), server.ferry_server(h.dir.path(), "db", PASSWORD))]);
    sandbox.shared.postgres = PgPools::granted(&sandbox.grants.postgres, &servers).unwrap();
}

/// Every row of `table` as the server prints it, in `id` order.
async fn printed(server: &PgServer, table: &str) -> String {
    let sql = format!("SELECT string_agg(format('%s|%s|%s', id, amount, price), E'\\n' ORDER BY id) FROM {table}");
    let row = server.client().await.query_one(&sql, &[]).await.unwrap_or_else(|e| panic!("{sql}: {e:?}"));
    row.get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn numeric_columns_arrive_as_exact_decimal_strings_and_the_sink_writes_them_back_exactly() {
    let server = PgServer::start();
    let exact = "123456789012345678901234567890.000000001";
    let tiny = format!("0.{}1", "0".repeat(200));
    let layout = "(id numeric PRIMARY KEY, amount numeric, price numeric(6, 2))";
    server
        .execute(&format!(
            "CREATE TABLE amounts {layout}; CREATE TABLE amounts_copy {layout};
             INSERT INTO amounts VALUES (1.5, '{exact}', -0.5), (2, 'NaN', 7), (10, '{tiny}', NULL), (-3, '-0.5', 0)"
        ))
        .await;
    let h = Harness::new();
    // One row a batch: each next page is asked for after the last id, bound as text.
    let plugin = json!({ "connection": "db", "table": "amounts", "batch_size": 1 });
    let mut source = h.source("amounts", POSTGRES_SOURCE, plugin);
    grant(&h, &server, &mut source.sandbox);
    let mut running = h.start(vec![source]);
    while h.records("amounts").len() < 4 {
        running.wait_idle("amounts").await;
    }
    running.stop().await;

    let records = h.records("amounts");
    let rows: Vec<Json> = records.iter().map(|r| serde_json::from_slice(&r.payload).unwrap()).collect();
    // Strings, not JSON numbers: a reader parsing 30 digits as a float would lose them.
    assert_eq!(
        rows,
        [
            json!({ "id": "-3", "amount": "-0.5", "price": "0.00" }),
            json!({ "id": "1.5", "amount": exact, "price": "-0.50" }),
            json!({ "id": "2", "amount": "NaN", "price": "7.00" }),
            json!({ "id": "10", "amount": tiny, "price": null }),
        ]
    );
    let header = records[1].headers.as_ref().unwrap()["primary_key"].to_string();
    assert!(header.contains("1.5"), "the primary key header: {header}");

    // The delivered messages, through the sink into numeric columns.
    let plugin = json!({
        "connection": "db",
        "table": "amounts_copy",
        "columns": { "id": "id", "amount": "amount", "price": "price" },
        "conflict_columns": ["id"],
    });
    let mut sink = h.sink("amounts-copy", POSTGRES_SINK, plugin, &["amounts"]);
    grant(&h, &server, &mut sink.sandbox);
    let mut running = Running::start(h.host_with(Vec::new(), vec![sink]));
    running
        .wait_for("the sink to write all four", |e| {
            matches!(e, Event::Written { key, topic, end, .. } if &**key == "amounts-copy" && topic == "amounts" && *end == 4)
        })
        .await;
    running.stop().await;
    let original = printed(&server, "amounts").await;
    assert_eq!(
        original,
        format!("-3|-0.5|0.00\n1.5|{exact}|-0.50\n2|NaN|7.00\n10|{tiny}|"),
        "the rows as the server prints them"
    );
    assert_eq!(printed(&server, "amounts_copy").await, original, "the copy differs from the original");
}
