//! Rule 3 of a source: after a NACK, whatever its reason, the committed cursor has
//! not moved, and the source must produce the same records again from it.
//!
//! One fresh instance per reason: a committed prefix (one batch ACKed, when the
//! source produced more than one), a batch NACKed, and the next batch compared
//! with it record by record (payload and id, see [`super::records`]).

use super::Subject;
use super::driver::Stop;
use super::history::History;
use super::records::{Record, first_difference};
use super::report::Report;
use ferry_contract::NackReason;
use ferry_runtime::SourceWorld;

const REASONS: [NackReason; 4] =
    [NackReason::DeliveryFailed, NackReason::StateSaveFailed, NackReason::TimedOut, NackReason::Rejected];

pub(super) async fn check(subject: &Subject<'_, SourceWorld>, history: &History, report: &mut Report) {
    let prefix = usize::from(history.len() > 1);
    for reason in REASONS {
        nacked(subject, prefix, reason, report).await;
    }
}

/// NACK one batch with `reason` after `prefix` ACKed ones, and see what comes next.
async fn nacked(subject: &Subject<'_, SourceWorld>, prefix: usize, reason: NackReason, report: &mut Report) {
    let nack = format!("nack({})", reason.as_str());
    let (mut source, first) = match subject.batch_after(prefix).await {
        Ok(ready) => ready,
        Err(Stop::Dry(why)) => {
            return report.warn(&nack, "3", format!("{why} before the NACK; cannot check replay"));
        }
        Err(Stop::Broke(error)) => return report.fail(&nack, "3", format!("{error} (before the NACK)")),
    };
    if let Err(error) = source.nack(reason).await {
        return report.fail(&nack, "3", error.to_string());
    }
    let again = match source.poll().await {
        Ok(batch) => batch,
        Err(Stop::Dry(why)) => {
            return report.fail(&nack, "3", format!("after {nack} it {why}, rather than the same records again"));
        }
        Err(Stop::Broke(error)) => return report.fail(&nack, "3", format!("{error} (after {nack})")),
    };
    let (first, again) = (Record::all(&first.messages), Record::all(&again.messages));
    if let Some(difference) = first_difference(&first, &again) {
        return report.fail(
            &nack,
            "3",
            format!("after {nack} it did not produce the same records again: {difference}"),
        );
    }
    match source.ack_and_close().await {
        Ok(()) => report.ok(
            &nack,
            "3",
            format!("after {nack} the same records came again ({} compared)", first.len().min(again.len())),
        ),
        Err(error) => report.fail(&nack, "3", format!("{error} (after the replayed batch)")),
    }
}
