//! A progress line per busy connector every so often, so a log shows flow without a
//! line per batch.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::StatusBoard;
use crate::shutdown::Shutdown;

/// Every `interval`, log how much each connector delivered since the last line.
pub async fn log_progress(board: Arc<StatusBoard>, interval: Duration, mut shutdown: Shutdown) {
    let mut last: HashMap<String, (u64, u64)> = HashMap::new();
    let mut since = Instant::now();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            _ = shutdown.requested() => return,
        }
        let elapsed = since.elapsed().as_secs_f64();
        since = Instant::now();
        for status in board.snapshot() {
            let (messages, batches) = (status.messages_delivered, status.batches_acked);
            let (before_messages, before_batches) =
                last.insert(status.key.clone(), (messages, batches)).unwrap_or((0, 0));
            if messages > before_messages || batches > before_batches {
                let span = super::connector_span(&status.key, status.tenant.as_deref());
                let _entered = span.enter();
                // A source delivers; a sink writes, and its position is its cursor.
                let verb = if status.role == "sink" { "wrote" } else { "delivered" };
                tracing::info!(
                    "{verb} {} messages in {} batches in the last {:.0}s ({:.0} msg/s), {} in total; cursor generation {}",
                    messages - before_messages,
                    batches - before_batches,
                    elapsed,
                    (messages - before_messages) as f64 / elapsed.max(0.001),
                    messages,
                    status.committed_generation.map(|g| g.to_string()).unwrap_or_else(|| "none".into())
                );
            }
        }
    }
}
