//! A sink's positions in the local log, tampered with as an attacker (or a careless
//! operator) would: records deleted from under a position, the topic file deleted
//! and created anew, swapped with another topic's, the state edited to rewind. Each
//! refuses the sink with an error naming the sink, the position, the file and what
//! it holds, and nothing is read past it, skipped or read again; the way out is the
//! one the error offers. A position of an older ferry, with no identity of its file,
//! is taken and stored with one.

use std::path::Path;

use ferry::engine::cursor::CursorStore;
use ferry::engine::delivery::{Delivery, Target};
use ferry::engine::status::{Event, Phase};
use ferry::store::local_log::LocalLog;
use ferry::store::sqlite::companion_files;
use ferry_tests::harness::{Harness, Running};
use ferry_tests::records::{positions, seq_messages};
use ferry_tests::sink_output::faulty_sink_written;
use nix::sys::signal::Signal;
use serde_json::json;

use super::positions::run_until;
use super::{faulty_sink, reader_config};
use crate::bad_input::run_fails;
use crate::process::{Ferry, Site, ferry};

/// Append `seqs` to `stream/topic` of the log in `dir` as another writer would: a log
/// of its own, closed after (so its file is whole, with no write-ahead log beside it).
pub(super) async fn append_as_another_writer(dir: &Path, stream: &str, topic: &str, seqs: std::ops::Range<u64>) {
    let delivery = Delivery {
        connector: "intruder".into(),
        streams: vec![ferry::config::StreamConfig::new(stream, topic)].into(),
        messages: std::sync::Arc::new(seq_messages(seqs)),
        cursor: None,
    };
    LocalLog::new(dir).deliver(delivery).await.unwrap();
}

/// Move the topic file `from` (and its write-ahead log and shared memory, if any) to `to`.
fn move_topic(from: &Path, to: &Path) {
    std::fs::rename(from, to).unwrap();
    for (from, to) in companion_files(from).iter().zip(companion_files(to)) {
        if from.exists() {
            std::fs::rename(from, to).unwrap();
        }
    }
}

/// Run sink `key` (a faulty sink reading `test/t`) until it is refused: the reason,
/// once its status says the same.
async fn refused(h: &Harness, key: &'static str) -> String {
    let (sink, _) = faulty_sink(h, key, &["t"], json!({}));
    let mut running = Running::start(h.host_with(Vec::new(), vec![sink]));
    let Event::Refused { reason, .. } =
        running.wait_for("the sink to be refused", |e| matches!(e, Event::Refused { key: k, .. } if &**k == key)).await
    else {
        unreachable!()
    };
    let status = running.status.get(key).unwrap();
    running.stop().await;
    assert_eq!((status.phase, status.last_error.as_deref()), (Phase::Refused, Some(reason.as_str())));
    assert!(reason.starts_with(&format!("the committed positions of sink `{key}` (generation ")), "{reason}");
    assert!(reason.contains(&format!("`ferry state reset CONFIG {key} --yes`")), "the way out: {reason}");
    reason
}

/// What sink `key` wrote, in the order it wrote it.
fn written(h: &Harness, key: &str) -> Vec<u64> {
    faulty_sink_written(&h.dir.path().join(format!("{key}-out")))
}

/// The identity of the topic file `test/<topic>`, as the sink's mark keeps it.
fn mark_of(h: &Harness, key: &str) -> Option<String> {
    let committed = h.committed(key).expect("committed");
    committed.receipt.marks.iter().find(|m| m.topic == "t").and_then(|m| m.log_id.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_deleted_from_under_a_sinks_position_refuse_it_and_nothing_past_it_is_read() {
    let h = Harness::new();
    let dir = h.log.dir().to_path_buf();
    append_as_another_writer(&dir, "test", "t", 0..10).await;
    run_until(&h, "reader", &["t"], &[("t", 10)]).await;
    let committed = h.committed("reader").unwrap();
    let id = mark_of(&h, "reader").expect("the mark keeps the file's identity");

    // The tail deleted, and new records appended where it was: offsets 5..=7 again.
    let path = LocalLog::topic_file(&dir, "test", "t");
    let deleted = rusqlite::Connection::open(&path).unwrap().execute(r#"DELETE FROM records WHERE "offset" >= 5"#, []);
    assert_eq!(deleted.unwrap(), 5);
    append_as_another_writer(&dir, "test", "t", 100..103).await;

    let reason = refused(&h, "reader").await;
    let expected = format!(
        "its position in test/t is offset 10, past the end of the log: the topic file {} (identity {id}) ends at \
         offset 8, so the records appended at offsets 8..=9 would be skipped unread",
        path.display()
    );
    assert!(reason.contains(&expected), "{reason}");
    assert_eq!(written(&h, "reader"), (0..10).collect::<Vec<_>>(), "nothing read past the position");
    assert_eq!(h.committed("reader"), Some(committed), "the positions are left as they were");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_file_deleted_and_created_anew_refuses_the_sink_rather_than_skip_its_first_records() {
    let h = Harness::new();
    let dir = h.log.dir().to_path_buf();
    append_as_another_writer(&dir, "test", "t", 0..10).await;
    run_until(&h, "reader", &["t"], &[("t", 10)]).await;
    let id = mark_of(&h, "reader").unwrap();

    // Deleted, and created anew by the next writer: its offsets start at 0 again, and
    // it grows past the position, which would skip 0..=9 of it.
    let path = LocalLog::topic_file(&dir, "test", "t");
    std::fs::remove_file(&path).unwrap();
    append_as_another_writer(&dir, "test", "t", 100..120).await;

    let reason = refused(&h, "reader").await;
    for words in [
        format!("its position in test/t is offset 10, taken in the topic file of identity {id}, but the topic file"),
        format!("{} (identity ", path.display()),
        ") ends at offset 20; no topic file of the local log has the identity".into(),
        "was deleted and created anew, or replaced".into(),
    ] {
        assert!(reason.contains(&words), "the refusal says {words:?}: {reason}");
    }
    assert_eq!(written(&h, "reader"), (0..10).collect::<Vec<_>>(), "nothing of the new file skipped or read");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_file_swapped_with_another_topics_refuses_the_sink_until_it_is_moved_back() {
    let h = Harness::new();
    let dir = h.log.dir().to_path_buf();
    append_as_another_writer(&dir, "test", "t", 0..10).await;
    append_as_another_writer(&dir, "test", "u", 100..130).await;
    run_until(&h, "reader", &["t"], &[("t", 10)]).await;
    let id = mark_of(&h, "reader").unwrap();

    let (t, u, aside) =
        (LocalLog::topic_file(&dir, "test", "t"), LocalLog::topic_file(&dir, "test", "u"), dir.join("aside.sqlite"));
    move_topic(&t, &aside);
    move_topic(&u, &t);
    move_topic(&aside, &u);
    let reason = refused(&h, "reader").await;
    let expected = format!("{id} is the identity of test/u ({}): the position belongs to another topic", u.display());
    assert!(reason.contains(&expected), "{reason}");
    assert!(
        reason.contains(&format!("{} (identity ", t.display())) && reason.contains("ends at offset 30"),
        "{reason}"
    );
    assert_eq!(written(&h, "reader"), (0..10).collect::<Vec<_>>(), "nothing of the other topic read");

    // The way out: the files back where they were; the sink goes on from its position.
    move_topic(&t, &aside);
    move_topic(&u, &t);
    move_topic(&aside, &u);
    append_as_another_writer(&dir, "test", "t", 10..15).await;
    run_until(&h, "reader", &["t"], &[("t", 15)]).await;
    assert_eq!(written(&h, "reader"), (0..15).collect::<Vec<_>>(), "each record of its own topic once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_position_rewound_behind_ferrys_back_is_refused_rather_than_read_again() {
    let h = Harness::new();
    append_as_another_writer(h.log.dir(), "test", "t", 0..10).await;
    run_until(&h, "reader", &["t"], &[("t", 10)]).await;
    // The state edited with a valid checksum (through the store), its receipt kept.
    let committed = h.committed("reader").unwrap();
    h.cursor("reader").commit(br#"{"test/t":3}"#.to_vec(), committed.receipt.clone()).await.unwrap();

    let reason = refused(&h, "reader").await;
    assert!(
        reason.contains(
            "its position in test/t is offset 3, but the receipt committed with it says offsets below 10 were read: \
             the state was changed behind ferry's back"
        ),
        "{reason}"
    );
    assert_eq!(written(&h, "reader"), (0..10).collect::<Vec<_>>(), "nothing written again");
    assert_eq!(positions(&h.committed("reader").unwrap().state)["test/t"], 3, "left as it is, for the operator");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_ferrys_position_without_the_files_identity_is_taken_and_stored_with_it() {
    let h = Harness::new();
    append_as_another_writer(h.log.dir(), "test", "t", 0..4).await;
    run_until(&h, "reader", &["t"], &[("t", 4)]).await;
    let id = mark_of(&h, "reader").unwrap();
    // As an older ferry committed it: the same position, a mark with no identity.
    let mut older = h.committed("reader").unwrap();
    older.receipt.marks.iter_mut().for_each(|mark| mark.log_id = None);
    h.cursor("reader").commit(older.state.clone(), older.receipt).await.unwrap();

    append_as_another_writer(h.log.dir(), "test", "t", 4..10).await;
    run_until(&h, "reader", &["t"], &[("t", 10)]).await;
    assert_eq!(written(&h, "reader"), (0..10).collect::<Vec<_>>(), "read on from the position, once");
    assert_eq!(mark_of(&h, "reader"), Some(id), "stored with the file's identity from then on");
}

#[test]
fn ferry_run_names_a_replaced_topic_file_before_starting_and_state_reset_is_the_way_out() {
    let site = Site::new();
    std::fs::create_dir(site.path("out")).unwrap();
    let text = reader_config("", &["feed"]);
    let config = site.config("ferry.toml", &text);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(append_as_another_writer(&site.log_dir(), "demo", "feed", 0..10));
    let mut run = Ferry::start(&config, &[]);
    run.wait_for_line(&["key=reader", "idle"]);
    run.signal(Signal::SIGTERM);
    assert!(run.wait().success(), "{}", run.log());

    // The topic deleted and created anew, with more records than the position.
    let path = LocalLog::topic_file(&site.log_dir(), "demo", "feed");
    std::fs::remove_file(&path).unwrap();
    runtime.block_on(append_as_another_writer(&site.log_dir(), "demo", "feed", 100..120));
    let log = run_fails(&config);
    for words in [
        "connector `reader`: the committed positions of sink `reader` (generation ".to_string(),
        ") do not fit the local log: its position in demo/feed is offset 10, taken in the topic file of identity"
            .into(),
        format!("{} (identity ", path.display()),
        ") ends at offset 20; no topic file of the local log has the identity".to_string(),
        format!("`ferry state reset {} reader --yes`", config.display()),
    ] {
        assert!(log.contains(&words), "the start-up check says {words:?}:\n{log}");
    }
    let written = || faulty_sink_written(&site.path("out"));
    assert_eq!(written(), (0..10).collect::<Vec<_>>(), "nothing started, nothing read");

    // The way out the error offers: forget the positions; the new file is read whole.
    let reset = ferry(&["state", "reset", config.to_str().unwrap(), "reader", "--yes"]);
    assert!(reset.status.success(), "{}", String::from_utf8_lossy(&reset.stderr));
    let mut run = Ferry::start(&config, &[]);
    run.wait_for_line(&["key=reader", "idle"]);
    run.signal(Signal::SIGTERM);
    assert!(run.wait().success(), "{}", run.log());
    assert_eq!(written(), (0..10).chain(100..120).collect::<Vec<_>>());
}
