//! Ferry's end-to-end suite: real components built from this workspace, the real
//! local log and state files, and `ferry` itself run as a process where the test is
//! about the process (signals, `kill -9`, exit codes).
//!
//! `FERRY_TEST_LOG=<filter>` (e.g. `info`) prints the host's log while the tests run.

mod authors;
mod bad_config;
mod bad_input;
mod clickhouse_sink;
mod compile_bombs;
mod compile_cache;
mod conformance;
mod control;
mod crash;
mod examples;
mod faults;
mod file_source;
mod flow;
mod http_api;
mod http_sink;
mod http_source;
mod iggy_drop_in;
mod iggy_live;
mod iggy_sinks;
mod iggy_tenants;
mod influxdb_sink;
mod influxdb_source;
mod isolation;
mod js_guests;
mod kafka_sink;
mod kafka_source;
mod mqtt_sink;
mod mqtt_source;
mod mysql_sink;
mod mysql_source;
mod nats_sink;
mod nats_source;
mod pooling;
mod postgres_capability;
mod postgres_end_to_end;
mod postgres_numeric;
mod postgres_server;
mod postgres_sink;
mod postgres_sink_columns;
mod postgres_source;
mod postgres_tls;
mod process;
mod python_guests;
mod readme;
mod redis_sink;
mod redis_source;
mod sandbox;
mod secrets;
mod shutdown;
mod sink_crash;
mod sinks;
mod stores;
mod tenants;
mod top;
mod transforms;
