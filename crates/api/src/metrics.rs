//! `/metrics`: Prometheus (OpenMetrics) text, made with `prometheus-client`.
//!
//! Nothing is counted twice: a collector reads the status board at each scrape (the
//! counters the loops already keep, the sandbox meters, the stage histograms the
//! [`ferry_engine::status::Reporter`] times), and the process's CPU and memory from
//! `/proc`. Iggy's names where the concept is the same, with its labels
//! `connector_key` and `connector_type`, plus `tenant` (empty for none):
//!
//! * `iggy_connector_messages_produced_total` / `_sent_total` (a source: produced by
//!   its guest / delivered), `iggy_connector_messages_consumed_total` /
//!   `_processed_total` (a sink: read from its input / written by its guest);
//! * `iggy_connector_messages_filtered_total`: records a connector's transforms
//!   dropped (settled, not delivered or written);
//! * `iggy_connector_errors_total`: NACKs (retries), guest errors and traps;
//! * `iggy_connector_stage_duration_seconds{stage}`: `poll`, `prepare` (its
//!   transforms), `deliver` (to the local log) or `iggy_send`, `state_save`, `ack`,
//!   `total` (a source), `poll`, `prepare`, `write`, `dead_letters`, `state_save`,
//!   `total` (a sink);
//!
//! and Ferry's own, `ferry_connector_*`: NACKs by `reason`, traps, guest errors,
//! restarts, the committed generation, guest log lines dropped, dead-lettered
//! messages, bytes delivered, fuel consumed, and the phase (1 for the current one).

use std::fmt;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::{Registry, Unit};

use super::error::ApiError;
use super::{Api, process};
use ferry_contract::Role;
use ferry_engine::status::{ConnectorStatus, Meters, Phase, Stage, StatusBoard};

const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

pub(super) async fn metrics(State(api): State<Arc<Api>>) -> Response {
    let mut body = String::new();
    match prometheus_client::encoding::text::encode(&mut body, &api.registry) {
        Ok(()) => (StatusCode::OK, [(header::CONTENT_TYPE, CONTENT_TYPE)], body).into_response(),
        Err(_) => ApiError::internal("the metrics could not be encoded").into_response(),
    }
}

/// The registry `/metrics` encodes: one collector over the board.
pub(super) fn registry(board: Arc<StatusBoard>) -> Registry {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(BoardCollector { board }));
    registry
}

/// Reads the board at each scrape.
struct BoardCollector {
    board: Arc<StatusBoard>,
}

impl fmt::Debug for BoardCollector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("BoardCollector")
    }
}

/// One connector at the moment of the scrape.
struct Row {
    status: ConnectorStatus,
    meters: Option<Arc<Meters>>,
    labels: Vec<(&'static str, String)>,
}

impl Row {
    fn is(&self, role: Role) -> bool {
        self.status.role == role.noun()
    }

    /// Its labels and one more.
    fn with(&self, name: &'static str, value: &str) -> Vec<(&'static str, String)> {
        let mut labels = self.labels.clone();
        labels.push((name, value.to_string()));
        labels
    }
}

type Labels = Vec<(&'static str, String)>;

/// One metric's samples: each connector's labels and value.
type Samples<T> = Vec<(Labels, T)>;

impl Collector for BoardCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let rows: Vec<Row> = self
            .board
            .snapshot()
            .into_iter()
            .map(|status| {
                let labels = vec![
                    ("connector_key", status.key.clone()),
                    ("connector_type", status.role.clone()),
                    ("tenant", status.tenant.clone().unwrap_or_default()),
                ];
                Row { meters: self.board.meters(&status.key), status, labels }
            })
            .collect();
        let each = |role: Option<Role>, value: fn(&ConnectorStatus) -> u64| -> Samples<u64> {
            let rows = rows.iter().filter(|r| role.is_none_or(|role| r.is(role)));
            rows.map(|r| (r.labels.clone(), value(&r.status))).collect()
        };
        let counters: [(&str, &str, Samples<u64>); 14] = [
            (
                "iggy_connector_messages_produced",
                "Messages a source's guest produced, in batches delivered or not.",
                each(Some(Role::Source), |s| s.messages_polled),
            ),
            (
                "iggy_connector_messages_sent",
                "Messages a source delivered (its cursor committed after them).",
                each(Some(Role::Source), |s| s.messages_delivered),
            ),
            (
                "iggy_connector_messages_consumed",
                "Messages a sink read from its input.",
                each(Some(Role::Sink), |s| s.messages_polled),
            ),
            (
                "iggy_connector_messages_processed",
                "Messages a sink's guest wrote (its offset stored past them; dead letters are counted apart).",
                each(Some(Role::Sink), |s| s.messages_delivered),
            ),
            (
                "iggy_connector_messages_filtered",
                "Records a connector's transforms dropped: settled, never delivered or written.",
                each(None, |s| s.messages_filtered),
            ),
            (
                "iggy_connector_errors",
                "NACKs (a sink: retries), guest errors and traps.",
                each(None, super::stats::errors),
            ),
            ("ferry_connector_batches", "Batches acknowledged (a sink: settled).", each(None, |s| s.batches_acked)),
            (
                "ferry_connector_bytes_delivered",
                "Payload bytes delivered (a sink: written).",
                each(None, |s| s.bytes_delivered),
            ),
            ("ferry_connector_traps", "Traps: instances dropped by the sandbox.", each(None, |s| s.traps)),
            ("ferry_connector_guest_errors", "Errors the guest returned.", each(None, |s| s.guest_errors)),
            (
                "ferry_connector_restarts",
                "Instances started after the first.",
                each(None, |s| s.instances.saturating_sub(1)),
            ),
            (
                "ferry_connector_guest_log_lines_dropped",
                "Guest log lines dropped by the connector's log rate.",
                each(None, |s| s.log_lines_dropped),
            ),
            (
                "ferry_connector_dead_lettered",
                "Messages a sink could never write, delivered to its dead letters.",
                each(Some(Role::Sink), |s| s.dead_lettered),
            ),
            (
                "ferry_connector_fuel_consumed",
                "Fuel burnt by the guest's calls (when the engine meters fuel).",
                each(None, |s| s.fuel_consumed),
            ),
        ];
        for (name, help, values) in counters {
            counter(&mut encoder, name, help, values)?;
        }

        let nacks =
            rows.iter().flat_map(|r| r.status.nacks_by_reason.iter().map(|(reason, n)| (r.with("reason", reason), *n)));
        counter(&mut encoder, "ferry_connector_nacks", "NACKs (a sink: retries) by reason.", nacks.collect())?;

        let generations: Samples<i64> = rows
            .iter()
            .filter_map(|r| Some((r.labels.clone(), i64::try_from(r.status.committed_generation?).ok()?)))
            .collect();
        gauge(
            &mut encoder,
            "ferry_connector_committed_generation",
            "The generation of the committed state.",
            generations,
        )?;

        let memory: Samples<i64> = rows
            .iter()
            .map(|r| (r.labels.clone(), i64::try_from(r.status.memory_in_use).unwrap_or(i64::MAX)))
            .collect();
        gauge(
            &mut encoder,
            "ferry_connector_memory_bytes",
            "Bytes of linear memory the connector's current instance holds (0 when none runs).",
            memory,
        )?;

        let phases = rows.iter().flat_map(|r| {
            Phase::ALL.iter().map(|phase| (r.with("phase", phase.as_str()), i64::from(r.status.phase == *phase)))
        });
        gauge(&mut encoder, "ferry_connector_phase", "1 for the phase the connector is in.", phases.collect())?;

        // Iggy's runtime's gauges, for its dashboards: the connectors of each role this
        // ferry runs, and those running (or idle: Iggy's runtime has no such phase).
        for role in [Role::Source, Role::Sink] {
            let noun = role.noun();
            let of_role: Vec<&Row> = rows.iter().filter(|r| r.is(role)).collect();
            let running = of_role.iter().filter(|r| r.status.phase.is_healthy()).count();
            let help = format!("The {noun}s this ferry runs.");
            single_gauge(&mut encoder, &format!("iggy_connectors_{noun}s_total"), &help, of_role.len() as i64)?;
            let help = format!("The {noun}s running or idle.");
            single_gauge(&mut encoder, &format!("iggy_connectors_{noun}s_running"), &help, running as i64)?;
        }

        let mut histogram = encoder.encode_descriptor(
            "iggy_connector_stage_duration",
            "How long each stage of a connector's loop took.",
            Some(&Unit::Seconds),
            MetricType::Histogram,
        )?;
        for row in &rows {
            let Some(meters) = &row.meters else { continue };
            for stage in stages_of(row, meters) {
                let snapshot = meters.stages.snapshot(stage);
                let labels = row.with("stage", stage.as_str());
                histogram.encode_family(&labels)?.encode_histogram::<NoLabelSet>(
                    snapshot.sum_seconds,
                    snapshot.count,
                    &snapshot.buckets,
                    None,
                )?;
            }
        }

        let usage = process::usage();
        let cpu = encoder.encode_descriptor(
            "process_cpu",
            "User and system CPU time of the ferry process.",
            Some(&Unit::Seconds),
            MetricType::Counter,
        )?;
        ConstCounter::new(usage.cpu_seconds).encode(cpu)?;
        let rss = encoder.encode_descriptor(
            "process_resident_memory",
            "Resident memory of the ferry process.",
            Some(&Unit::Bytes),
            MetricType::Gauge,
        )?;
        ConstGauge::new(i64::try_from(usage.rss_bytes).unwrap_or(i64::MAX)).encode(rss)
    }
}

/// The stages a connector of this role goes through. A source delivers either to
/// the local log (`deliver`) or to Iggy (Iggy's `iggy_send`): the one it has timed,
/// `deliver` before its first delivery.
fn stages_of(row: &Row, meters: &Meters) -> Vec<Stage> {
    if row.is(Role::Source) {
        let to_iggy = meters.stages.snapshot(Stage::IggySend).count > 0;
        let delivery = if to_iggy { Stage::IggySend } else { Stage::Deliver };
        vec![Stage::Poll, Stage::Transform, delivery, Stage::StateSave, Stage::Ack, Stage::Total]
    } else {
        vec![Stage::Poll, Stage::Transform, Stage::Write, Stage::DeadLetters, Stage::StateSave, Stage::Total]
    }
}

fn counter(encoder: &mut DescriptorEncoder, name: &str, help: &str, values: Samples<u64>) -> Result<(), fmt::Error> {
    let mut metric = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (labels, value) in values {
        ConstCounter::new(value).encode(metric.encode_family(&labels)?)?;
    }
    Ok(())
}

fn gauge(encoder: &mut DescriptorEncoder, name: &str, help: &str, values: Samples<i64>) -> Result<(), fmt::Error> {
    let mut metric = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, value) in values {
        ConstGauge::new(value).encode(metric.encode_family(&labels)?)?;
    }
    Ok(())
}

/// A gauge of the whole host, without labels.
fn single_gauge(encoder: &mut DescriptorEncoder, name: &str, help: &str, value: i64) -> Result<(), fmt::Error> {
    let metric = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    ConstGauge::new(value).encode(metric)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_contract::NackReason;

    #[test]
    fn the_board_is_exported_under_iggy_and_ferry_names() {
        let board = StatusBoard::new();
        let source = board.reporter("orders", Role::Source, None, Some("acme"));
        source.starting(1, ferry_engine::status::StartingFrom::Nothing);
        source.acked(1, 5, 50, Some(7));
        source.nacked(2, NackReason::DeliveryFailed, "the server is down");
        futures::executor::block_on(source.timed(Stage::Deliver, async {}));
        let sink = board.reporter("archive", Role::Sink, None, None);
        sink.retried("busy");
        sink.trapped("unreachable");

        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry(board)).unwrap();
        let orders = r#"connector_key="orders",connector_type="source",tenant="acme""#;
        let archive = r#"connector_key="archive",connector_type="sink",tenant="""#;
        for line in [
            // The source is running; the sink trapped (and is waiting to restart).
            "iggy_connectors_sources_total 1".to_string(),
            "iggy_connectors_sources_running 1".to_string(),
            "iggy_connectors_sinks_total 1".to_string(),
            "iggy_connectors_sinks_running 0".to_string(),
            format!("iggy_connector_messages_sent_total{{{orders}}} 5"),
            format!("iggy_connector_errors_total{{{orders}}} 1"),
            format!("ferry_connector_nacks_total{{{orders},reason=\"delivery-failed\"}} 1"),
            format!("ferry_connector_committed_generation{{{orders}}} 7"),
            format!("ferry_connector_phase{{{orders},phase=\"running\"}} 1"),
            format!("ferry_connector_phase{{{orders},phase=\"idle\"}} 0"),
            format!("iggy_connector_stage_duration_seconds_count{{{orders},stage=\"deliver\"}} 1"),
            format!("iggy_connector_stage_duration_seconds_bucket{{le=\"+Inf\",{orders},stage=\"deliver\"}} 1"),
            format!("iggy_connector_stage_duration_seconds_count{{{orders},stage=\"ack\"}} 0"),
            format!("ferry_connector_nacks_total{{{archive},reason=\"retry\"}} 1"),
            format!("ferry_connector_traps_total{{{archive}}} 1"),
            format!("iggy_connector_errors_total{{{archive}}} 2"),
            format!("iggy_connector_stage_duration_seconds_count{{{archive},stage=\"write\"}} 0"),
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line:?} in:\n{text}");
        }
        assert!(
            !text.contains(&format!("iggy_connector_messages_consumed_total{{{orders}}}")),
            "a source consumes nothing"
        );
        assert!(!text.contains(&format!("{orders},stage=\"write\"")), "a source has no write stage");
        assert!(text.contains("# TYPE process_resident_memory_bytes gauge"), "{text}");
    }
}
