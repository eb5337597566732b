//! Rules 4 and 1 of a source: an instance lost (a trap, a host restart, a crash)
//! is followed by a new one, opened with the last committed cursor, and the records
//! after that cursor are produced again.
//!
//! * restart: an instance ACKs all but the last batch the first run produced, and
//!   is dropped without `close`; the new one, opened with the committed cursor, must
//!   go on with the records the first run produced after that cursor.
//! * crash between delivery and commit: an instance polls a batch (delivered, say)
//!   whose cursor is never committed, and is dropped; the new one, opened with the
//!   cursor committed before that batch, must produce the same records again.

use super::Subject;
use super::driver::Stop;
use super::history::History;
use super::records::{Record, first_difference};
use super::report::Report;
use ferry_runtime::SourceWorld;

pub(super) async fn check(subject: &Subject<'_, SourceWorld>, history: &History, report: &mut Report) {
    restart(subject, history, report).await;
    crash_before_commit(subject, history, report).await;
}

const RESTART: &str = "restart from the cursor";
const CRASH: &str = "crash before commit";

async fn restart(subject: &Subject<'_, SourceWorld>, history: &History, report: &mut Report) {
    let acked = history.len() - 1;
    let expected = history.after(acked);
    let old = match subject.advanced(acked).await {
        Ok(old) => old,
        Err(Stop::Dry(why)) => return report.warn(RESTART, "4/1", format!("{why}; cannot check a restart")),
        Err(Stop::Broke(error)) => return report.fail(RESTART, "4/1", error.to_string()),
    };
    let cursor = old.committed().map(<[u8]>::to_vec);
    // A trap or a host restart: the instance is gone, never closed.
    drop(old);
    let opened = match &cursor {
        Some(_) => format!("opened again with the cursor committed after batch {acked}"),
        None => "opened again with no committed cursor".to_string(),
    };
    let (new, batch) = match subject.first_batch(cursor.clone()).await {
        Ok(reopened) => reopened,
        Err(Stop::Dry(why)) => {
            return report.fail(
                RESTART,
                "4/1",
                format!("{opened}, it {why}; before, it produced {} records after that cursor", expected.len()),
            );
        }
        Err(Stop::Broke(error)) => return report.fail(RESTART, "4/1", format!("{error} ({opened})")),
    };
    let got = Record::all(&batch.messages);
    if let Some(difference) = first_difference(&expected, &got) {
        let broke = match cursor {
            Some(_) => "it ignored its committed cursor on open",
            None => "it did not produce the same records from the start",
        };
        return report.fail(RESTART, "4/1", format!("{broke}: {opened}, {difference}"));
    }
    match new.ack_and_close().await {
        Ok(()) => report.ok(
            RESTART,
            "4/1",
            format!("{opened}, it went on with the same records ({} compared)", expected.len().min(got.len())),
        ),
        Err(error) => report.fail(RESTART, "4/1", format!("{error} ({opened})")),
    }
}

async fn crash_before_commit(subject: &Subject<'_, SourceWorld>, history: &History, report: &mut Report) {
    let prefix = usize::from(history.len() > 1);
    let (old, delivered) = match subject.batch_after(prefix).await {
        Ok(ready) => ready,
        Err(Stop::Dry(why)) => return report.warn(CRASH, "4", format!("{why}; cannot check a crash")),
        Err(Stop::Broke(error)) => return report.fail(CRASH, "4", error.to_string()),
    };
    let cursor = old.committed().map(<[u8]>::to_vec);
    // Delivered, and then the host crashed before committing the staged cursor.
    drop(old);
    let (new, again) = match subject.first_batch(cursor).await {
        Ok(reopened) => reopened,
        Err(Stop::Dry(why)) => {
            return report.fail(
                CRASH,
                "4",
                format!("opened again at the committed cursor after a crash before commit, it {why}"),
            );
        }
        Err(Stop::Broke(error)) => return report.fail(CRASH, "4", format!("{error} (after a crash before commit)")),
    };
    let (delivered, again) = (Record::all(&delivered.messages), Record::all(&again.messages));
    if let Some(difference) = first_difference(&delivered, &again) {
        return report.fail(
            CRASH,
            "4",
            format!(
                "after a crash between delivery and commit, the instance opened at the committed cursor did not \
                 produce the same records again: {difference}"
            ),
        );
    }
    match new.ack_and_close().await {
        Ok(()) => report.ok(
            CRASH,
            "4",
            format!(
                "opened again at the committed cursor, it produced the uncommitted records again ({} compared)",
                delivered.len().min(again.len())
            ),
        ),
        Err(error) => report.fail(CRASH, "4", format!("{error} (after a crash before commit)")),
    }
}
