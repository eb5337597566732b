//! A record of the local log whose stored headers cannot be read (damaged, or written
//! by something else: here, an sqlite write from the test) never blocks its topic
//! silently and is never dropped silently: with dead letters it goes there with the
//! reason and the sink goes on past it; without, the sink stops at it (its other
//! topics go on), the error naming the offset and the command that skips it, and
//! `ferry log skip` (refused while the sink runs, the record kept in the log) lets it
//! go on after a restart.

use std::path::Path;

use ferry::engine::status::Event;
use ferry::store::local_log::LocalLog;
use ferry_tests::harness::{Harness, Running};
use ferry_tests::records::{seq_of, seqs};
use ferry_tests::sink_output::faulty_sink_written;
use nix::sys::signal::Signal;
use serde_json::json;

use super::tampered::append_as_another_writer;
use super::{faulty_sink, reader_config, written};
use crate::process::{Ferry, Site, ferry};
use crate::top::status_until;

/// Store `headers` as the headers of the record at `offset` of `stream/topic`, behind
/// ferry's back.
fn damage_headers(dir: &Path, stream: &str, topic: &str, offset: u64, headers: &str) {
    let connection = rusqlite::Connection::open(LocalLog::topic_file(dir, stream, topic)).unwrap();
    let changed = connection.execute(r#"UPDATE records SET headers = ?1 WHERE "offset" = ?2"#, (headers, offset));
    assert_eq!(changed.unwrap(), 1, "the record at offset {offset} is there");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_whose_headers_cannot_be_read_is_dead_lettered_with_the_reason_and_the_sink_goes_on() {
    let h = Harness::new();
    append_as_another_writer(h.log.dir(), "test", "t", 0..10).await;
    // Not JSON at all: read back, it must not pass as a record with no headers.
    damage_headers(h.log.dir(), "test", "t", 4, "{not json");
    let (mut sink, out) = faulty_sink(&h, "reader", &["t"], json!({}));
    sink.dead_letters = Some(h.dead_letters("dead"));
    let mut running = Running::start(h.host_with(Vec::new(), vec![sink]));

    let Event::Unreadable { stream, topic, offset, detail, .. } = running
        .wait_for("the record to be named", |e| matches!(e, Event::Unreadable { key, .. } if &**key == "reader"))
        .await
    else {
        unreachable!()
    };
    assert_eq!((stream.as_str(), topic.as_str(), offset), ("test", "t", 4));
    assert!(detail.starts_with("test/t partition 0 offset 4: its headers as the local log stores them"), "{detail}");
    assert!(detail.ends_with("it goes to the dead letters"), "{detail}");
    running.wait_for("everything to settle", written("reader", 10)).await;
    let status = running.status.get("reader").unwrap();
    running.stop().await;

    let others: Vec<u64> = (0..10).filter(|seq| *seq != 4).collect();
    assert_eq!(faulty_sink_written(&out), others, "the others written once, in order");
    let letters = h.records("dead");
    assert_eq!(seqs(&letters), [4], "the unreadable record is a dead letter");
    let headers = letters[0].headers.as_ref().expect("a dead letter has headers");
    let reason = headers["ferry-dead-letter-reason"]["string"].as_str().unwrap();
    assert!(reason.starts_with("its headers as the local log stores them cannot be read"), "{reason}");
    assert!(reason.contains("not json"), "the reason shows what is stored: {reason}");
    assert_eq!(headers["ferry-dead-letter-offset"], json!({ "uint64": 4 }));
    assert_eq!(seq_of(&letters[0].payload), 4, "with its payload");
    assert_eq!((status.dead_lettered, status.messages_delivered), (1, 9), "{status:?}");
    assert_eq!(status.last_error.as_deref(), Some(detail.as_str()), "{status:?}");
}

#[test]
fn without_dead_letters_the_sink_stops_at_the_record_naming_the_command_that_skips_it() {
    let site = Site::new();
    std::fs::create_dir(site.path("out")).unwrap();
    let text = reader_config("batch_length = 3", &["feed", "other"]);
    let config = site.config("ferry.toml", &text);
    let config_text = config.to_str().unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(append_as_another_writer(&site.log_dir(), "demo", "feed", 0..10));
    runtime.block_on(append_as_another_writer(&site.log_dir(), "demo", "other", 100..104));
    // JSON, but not the typed headers ferry writes.
    damage_headers(&site.log_dir(), "demo", "feed", 4, r#"{"k": {"uint8": 300}}"#);

    let mut run = Ferry::start(&config, &[]);
    let command = format!("ferry log skip {config_text} --key reader --stream demo --topic feed --offset 4");
    let line = run.wait_for_line(&["key=reader", "demo/feed partition 0 offset 4"]);
    for words in [r#"header "k" is not a typed value ferry wrote"#, "nothing more of that partition is read", &command]
    {
        assert!(line.contains(words), "the line says {words:?}: {line}");
    }
    run.wait_for_line(&["key=reader", "idle"]);
    let status = status_until(&ferry::engine::status::status_file_path(&site.path("state")), |status| {
        status.connectors.iter().any(|c| c.last_error.as_deref().is_some_and(|e| e.contains(&command)))
    });
    let reader = status.connectors.iter().find(|c| c.key == "reader").unwrap();
    assert!(reader.last_error.as_deref().unwrap().starts_with("demo/feed partition 0 offset 4: "), "{reader:?}");

    // Refused while ferry runs the sink.
    let args = ["log", "skip", config_text, "--key", "reader", "--stream", "demo", "--topic", "feed", "--offset", "4"];
    let refused = ferry(&args);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && stderr.contains("cannot skip for sink `reader`"), "{stderr}");
    run.signal(Signal::SIGTERM);
    assert!(run.wait().success(), "{}", run.log());
    let written = || faulty_sink_written(&site.path("out"));
    let mut before = written();
    before.sort_unstable();
    assert_eq!(before, [0, 1, 2, 3, 100, 101, 102, 103], "up to the record, and the other topic whole");

    // Only the record the sink stopped at.
    let mut wrong = args;
    wrong[10] = "5";
    let out = ferry(&wrong);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("its position in demo/feed is offset 4, not 5"), "{stderr}");

    let skipped = ferry(&args);
    let stdout = String::from_utf8_lossy(&skipped.stdout);
    assert!(skipped.status.success(), "{stdout}{}", String::from_utf8_lossy(&skipped.stderr));
    assert!(stdout.starts_with("reader: skipped demo/feed offset 4 (header \"k\""), "{stdout}");
    assert!(stdout.contains("its position there is now 5"), "{stdout}");
    assert!(stdout.contains(r#""offset":4"#), "the record is shown: {stdout}");
    assert_eq!(LocalLog::read_all(&site.log_dir(), "demo", "feed").unwrap().len(), 10, "and stays in the log");

    let mut run = Ferry::start(&config, &[]);
    run.wait_for_line(&["key=reader", "idle"]);
    run.signal(Signal::SIGTERM);
    assert!(run.wait().success(), "{}", run.log());
    let mut after = written();
    after.sort_unstable();
    assert_eq!(after, [0, 1, 2, 3, 5, 6, 7, 8, 9, 100, 101, 102, 103], "everything after it, once");
}
