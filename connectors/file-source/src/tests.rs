//! The source against real files in a temporary directory, a host simulated by
//! committing each batch's cursor: every complete line once, across rotation,
//! truncation and deletion; mistakes named.

use std::io::Write;
use std::path::Path;

use ferry_guest::{Batch, Source};
use serde_json::json;

use super::FileSource;
use crate::cursor::Cursor;

fn open(dir: &Path, extra: serde_json::Value) -> FileSource {
    let mut config = json!({ "path": format!("{}/*.log", dir.display()) });
    config.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    let config = serde_json::from_value(config).unwrap();
    FileSource::open(config, &Cursor::default()).unwrap()
}

fn append(path: &Path, text: &str) {
    std::fs::OpenOptions::new().create(true).append(true).open(path).unwrap().write_all(text.as_bytes()).unwrap();
}

/// Poll until there is nothing, committing each batch's cursor as the host does:
/// the payloads delivered, as text.
fn drain(source: &mut FileSource, cursor: &mut Cursor) -> Vec<String> {
    let mut delivered = Vec::new();
    while let Some(Batch { packed, next, .. }) = source.poll(cursor).unwrap() {
        let messages = packed.messages().unwrap();
        delivered.extend(messages.iter().map(|m| String::from_utf8(m.payload.clone()).unwrap()));
        *cursor = next;
    }
    delivered
}

#[test]
fn every_complete_line_of_every_matching_file_once_and_a_partial_one_waits() {
    let dir = tempfile::tempdir().unwrap();
    append(&dir.path().join("a.log"), "a1\na2\r\na3");
    append(&dir.path().join("b.log"), "b1\n");
    append(&dir.path().join("notes.txt"), "not read\n");
    let mut source = open(dir.path(), json!({ "batch_size": 2 }));
    let mut cursor = Cursor::default();
    assert_eq!(drain(&mut source, &mut cursor), ["a1", "a2", "b1"]);
    assert_eq!(
        cursor.files.iter().map(|f| (f.name.as_str(), f.offset)).collect::<Vec<_>>(),
        [("a.log", 7), ("b.log", 3)]
    );
    append(&dir.path().join("a.log"), "-done\n");
    assert_eq!(drain(&mut source, &mut cursor), ["a3-done"]);
    // A restarted source goes on from the committed cursor.
    append(&dir.path().join("b.log"), "b2\n");
    let mut again = open(dir.path(), json!({}));
    assert_eq!(drain(&mut again, &mut cursor), ["b2"]);
    // Each record says where it came from.
    append(&dir.path().join("b.log"), "b3\n");
    let batch = again.poll(&cursor).unwrap().unwrap();
    let headers = &batch.packed.messages().unwrap()[0].headers;
    assert!(headers.iter().any(|(k, v)| k == "file" && *v == ferry_guest::HeaderValue::from("b.log")), "{headers:?}");
    assert!(headers.iter().any(|(k, v)| k == "offset" && *v == ferry_guest::HeaderValue::from(6u64)), "{headers:?}");
}

#[test]
fn a_rotated_file_is_read_to_its_end_under_its_new_name_and_the_new_one_from_its_start() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("app.log");
    append(&log, "1\n2\n");
    let mut source = open(dir.path(), json!({}));
    let mut cursor = Cursor::default();
    assert_eq!(drain(&mut source, &mut cursor), ["1", "2"]);
    // Written before the rotation, not read yet; then renamed out of the pattern.
    append(&log, "3\n4\n");
    std::fs::rename(&log, dir.path().join("app.log.1")).unwrap();
    append(&log, "5\n");
    assert_eq!(drain(&mut source, &mut cursor), ["5", "3", "4"]);
    assert_eq!(source.poll(&cursor).unwrap(), None);
    assert!(
        source.said.iter().any(|s| s.contains("`app.log` was renamed to `app.log.1` (rotated)")),
        "{:?}",
        source.said
    );
    // Renamed within the pattern: read on under the new name.
    std::fs::rename(&log, dir.path().join("old.log")).unwrap();
    append(&dir.path().join("old.log"), "6\n");
    assert_eq!(drain(&mut source, &mut cursor), ["6"]);
}

#[test]
fn a_truncated_file_is_read_again_from_its_start_and_a_deleted_one_let_go() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("app.log");
    append(&log, "one\ntwo\n");
    let mut source = open(dir.path(), json!({}));
    let mut cursor = Cursor::default();
    assert_eq!(drain(&mut source, &mut cursor), ["one", "two"]);
    std::fs::write(&log, "x\n").unwrap();
    assert_eq!(drain(&mut source, &mut cursor), ["x"]);
    assert!(
        source.said.iter().any(|s| s.contains("was truncated to 2 bytes (below the 8 delivered)")),
        "{:?}",
        source.said
    );
    append(&dir.path().join("other.log"), "o\n");
    std::fs::remove_file(&log).unwrap();
    assert_eq!(drain(&mut source, &mut cursor), ["o"]);
    // Missing in one scan is not deleted (it may be mid-rename): it stays in the cursor.
    assert!(!source.said.iter().any(|s| s.contains("was deleted")), "{:?}", source.said);
    assert_eq!(cursor.files.len(), 2);
    // Missing in three scans (and for `missing_for`) is.
    source.missing_for = std::time::Duration::ZERO;
    assert_eq!(source.poll(&cursor).unwrap(), None);
    assert_eq!(source.poll(&cursor).unwrap(), None);
    assert!(source.said.iter().any(|s| s.contains("`app.log` was deleted")), "{:?}", source.said);
    append(&dir.path().join("other.log"), "p\n");
    assert_eq!(drain(&mut source, &mut cursor), ["p"]);
    assert_eq!(cursor.files.len(), 1, "let go");
}

#[test]
fn a_file_missing_from_one_listing_is_kept_and_found_again_under_its_new_name() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("app.log");
    append(&log, "1\n2\n");
    let mut source = open(dir.path(), json!({}));
    let mut cursor = Cursor::default();
    assert_eq!(drain(&mut source, &mut cursor), ["1", "2"]);
    // As a listing taken mid-rename sees it: the file under neither name (moved
    // out of the directory for the length of one poll), and a new file meanwhile.
    let away = tempfile::tempdir().unwrap();
    std::fs::rename(&log, away.path().join("app.log")).unwrap();
    append(&dir.path().join("new.log"), "n\n");
    assert_eq!(drain(&mut source, &mut cursor), ["n"]);
    assert_eq!(cursor.files.len(), 2, "the missing one is kept: {cursor:?}");
    append(&away.path().join("app.log"), "3\n");
    std::fs::rename(away.path().join("app.log"), dir.path().join("app.log.1")).unwrap();
    assert_eq!(drain(&mut source, &mut cursor), ["3"], "read on from where it was, not again from its start");
}

#[test]
fn json_lines_and_csv_rows_become_json_and_a_bad_line_is_named() {
    let dir = tempfile::tempdir().unwrap();
    append(&dir.path().join("e.log"), "{\"a\": 1}\n\n[2]\n");
    let mut source = open(dir.path(), json!({ "format": "json_lines" }));
    let mut cursor = Cursor::default();
    assert_eq!(drain(&mut source, &mut cursor), ["{\"a\": 1}", "[2]"]);
    append(&dir.path().join("e.log"), "{oops\n");
    let error = source.poll(&cursor).unwrap_err();
    assert!(error.message().contains("`e.log` at byte 14: not JSON"), "{error}");

    let dir = tempfile::tempdir().unwrap();
    append(&dir.path().join("t.log"), "id,name\n1,\"ada, l\"\n");
    let mut source = open(dir.path(), json!({ "format": "csv" }));
    let mut cursor = Cursor::default();
    assert_eq!(drain(&mut source, &mut cursor), [r#"{"id":"1","name":"ada, l"}"#]);
    // A new instance mid-file reads the header again.
    append(&dir.path().join("t.log"), "2,bob\n");
    let mut again = open(dir.path(), json!({ "format": "csv" }));
    assert_eq!(drain(&mut again, &mut cursor), [r#"{"id":"2","name":"bob"}"#]);
    append(&dir.path().join("t.log"), "3\n");
    let error = again.poll(&cursor).unwrap_err();
    assert!(error.message().contains("1 field(s), and the header names 2"), "{error}");
}

#[test]
fn a_line_too_long_start_at_end_and_bad_settings_are_said() {
    let dir = tempfile::tempdir().unwrap();
    append(&dir.path().join("l.log"), "short\nthis one is long\n");
    let mut source = open(dir.path(), json!({ "max_line_bytes": 8 }));
    let error = source.poll(&Cursor::default()).unwrap_err();
    assert!(error.message().contains("`l.log` at byte 6: a line longer than max_line_bytes (8)"), "{error}");

    let mut source = open(dir.path(), json!({ "start_at": "end" }));
    let mut cursor = Cursor::default();
    assert_eq!(drain(&mut source, &mut cursor), Vec::<String>::new());
    append(&dir.path().join("l.log"), "later\n");
    assert_eq!(drain(&mut source, &mut cursor), ["later"]);

    for (config, words) in [
        (json!({ "path": "/logs/*/app.log" }), "only the file name may hold wildcards"),
        (json!({ "path": "/logs/[.log" }), "not a glob pattern"),
        (json!({ "path": "/logs/*.log", "batch_size": 0 }), "batch_size 0 is not within 1 to 10000"),
        (json!({ "path": "/logs/*.log", "format": "xml" }), "unknown variant `xml`"),
    ] {
        let error = serde_json::from_value::<crate::config::Config>(config.clone()).unwrap_err().to_string();
        assert!(error.contains(words), "{config}: {error}");
    }
}
