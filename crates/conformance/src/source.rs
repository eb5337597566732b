//! The checks of a source, in the order they run, each scenario on fresh instances:
//!
//! 1. `open` with no cursor, then up to [`BATCHES`] batches polled and ACKed, each
//!    checked as the host checks a batch before delivering it (rules 1 and 3); what
//!    they held is recorded for the checks after;
//! 2. the batch ids (rule 2), and `close` after the last ACK (rule 5);
//! 3. a NACK of each reason, and what came next ([`super::replay`], rule 3);
//! 4. a restart from the committed cursor, and a crash between delivery and commit
//!    ([`super::restart`], rules 4 and 1).
//!
//! A source with nothing to produce under its config is not failed: the kit warns
//! that it cannot check replay, and stops there.

use super::Subject;
use super::driver::Stop;
use super::history::{History, Produced};
use super::records::Record;
use super::report::Report;
use super::{replay, restart};
use ferry_engine::batch;
use ferry_runtime::SourceWorld;

/// How many batches the first instance is asked for.
pub const BATCHES: usize = 3;

pub(super) async fn check(subject: &Subject<'_, SourceWorld>, report: &mut Report) {
    let Some(history) = first_run(subject, report).await else { return };
    replay::check(subject, &history, report).await;
    restart::check(subject, &history, report).await;
}

/// Scenario 1: open with no cursor, poll and ACK; then the ids, and close.
async fn first_run(subject: &Subject<'_, SourceWorld>, report: &mut Report) -> Option<History> {
    let mut source = match subject.open(None).await {
        Ok(source) => source,
        Err(error) => {
            report.fail("open", "1", format!("{error}; nothing else can be checked"));
            return None;
        }
    };
    report.ok("open", "1", "opened with no committed cursor");

    let mut history = History::default();
    let mut stop = None;
    while history.len() < BATCHES {
        let batch = match source.poll().await {
            Ok(batch) => batch,
            Err(why) => {
                stop = Some(why);
                break;
            }
        };
        let limits = &subject.setup.sandbox.limits;
        if let Err(rule) = batch::check(&batch.messages, batch.staged_state.as_deref(), limits) {
            let number = history.len() + 1;
            report.fail("ack", "3", format!("the host would refuse batch {number} (nack(rejected)): {rule}"));
            return (!history.is_empty()).then_some(history);
        }
        history.batches.push(Produced {
            id: batch.id,
            records: Record::all(&batch.messages),
            staged: batch.staged_state,
        });
        if let Err(error) = source.ack().await {
            stop = Some(Stop::Broke(error));
            break;
        }
    }
    match stop {
        Some(Stop::Broke(error)) => {
            // The instance trapped: it is dropped, as the host drops it.
            report.fail("ack", "3", format!("{error} (after {} ACKed)", batches(history.len())));
            if history.is_empty() {
                return None;
            }
            batch_ids(&history, report);
            return Some(history);
        }
        Some(Stop::Dry(why)) if history.is_empty() => {
            report.warn(
                "ack",
                "3",
                format!("{why}; cannot check replay (give it a plugin_config under which it has records to produce)"),
            );
            close(source, report).await;
            return None;
        }
        Some(Stop::Dry(why)) => report.ok("ack", "3", format!("{}; then it {why}", produced(&history))),
        None => report.ok("ack", "3", produced(&history)),
    }
    batch_ids(&history, report);
    close(source, report).await;
    Some(history)
}

/// `3 batches ACKed (5, 5, 5 records), 3 staged a cursor; 2 records carry an id, 0 headers`.
fn produced(history: &History) -> String {
    let sizes: Vec<String> = history.batches.iter().map(|b| b.records.len().to_string()).collect();
    let staged = history.batches.iter().filter(|b| b.staged.is_some()).count();
    let with_id = history.batches.iter().flat_map(|b| &b.records).filter(|r| r.id.is_some()).count();
    format!(
        "{} ACKed ({} records), {staged} staged a cursor; {with_id} records carry their own id",
        batches(history.len()),
        sizes.join(", ")
    )
}

/// `1 batch`, `3 batches`.
fn batches(count: usize) -> String {
    if count == 1 { "1 batch".into() } else { format!("{count} batches") }
}

/// Rule 2 (and the `batch` record): one batch outstanding at a time, settled by its
/// id. A guest may only not reuse the id of a batch still outstanding, which the
/// host's one-at-a-time never lets happen; an id repeated from one batch to the
/// next is allowed, but makes the batches hard to tell apart in logs.
fn batch_ids(history: &History, report: &mut Report) {
    let ids: Vec<u64> = history.batches.iter().map(|b| b.id).collect();
    let shown = ids.iter().map(u64::to_string).collect::<Vec<_>>().join(", ");
    if let Some(pair) = ids.windows(2).find(|pair| pair[0] == pair[1]) {
        report.warn(
            "batch ids",
            "2",
            format!(
                "ids {shown}: id {} came twice in a row; allowed (the batch before was settled), but logs cannot \
                 tell the two apart",
                pair[0]
            ),
        );
    } else {
        report.ok(
            "batch ids",
            "2",
            format!("ids {shown}: each batch was settled once, by its own id, before the next poll"),
        );
    }
}

/// Rule 5: `close`, after the outstanding batch was settled, returns.
async fn close(source: super::driver::Source, report: &mut Report) {
    match source.close().await {
        Ok(()) => report.ok("close", "5", "closed after its last batch was settled; no call followed"),
        Err(error) => report.fail("close", "5", error.to_string()),
    }
}
