//! The stores under attack: a state or log file that cannot be opened, is not a file,
//! is deleted under a running ferry, or lost records its committed cursor counts as
//! delivered. Each must be reported as what it is (an I/O problem is never called
//! corruption), nothing may be acknowledged that is in no file, a start must be
//! refused rather than build on a loss, and the committed cursor must stay as it was.
//!
//! The tests run as root, whom permission bits do not stop; the faults here stop root
//! too: the immutable attribute (`chattr +i`, skipped where it cannot be set), a
//! directory where SQLite expects a file, a named pipe, `/dev/zero`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ferry::config::StreamConfig;
use ferry::contract::NackReason;
use ferry::engine::cursor::Committed;
use ferry::engine::delivery::LogMark;
use ferry::engine::status::Event;
use ferry::store::local_log::LocalLog;
use ferry::store::sqlite::companion_files;
use ferry_tests::components::RANDOM_SOURCE;
use ferry_tests::faults::Immutable;
use ferry_tests::harness::Harness;
use ferry_tests::records::{assert_complete, next_seq, seqs};
use nix::sys::signal::Signal;
use serde_json::json;

use crate::bad_input::run_fails;
use crate::faults::{is_nack, wait_generation};
use crate::process::{Ferry, Site, ferry, random_source_config};

const KEY: &str = "random";

/// The config of connector `random` delivering `count` records to `demo/random`, in
/// batches of 10.
fn random_config(count: u64) -> String {
    random_source_config(KEY, &format!("messages_per_batch = 10\nmax_count = {count}"))
}

/// A site where `ferry run` delivered `count` records and stopped cleanly: the site,
/// its config and the committed cursor.
fn site_after_a_run(count: u64) -> (Site, PathBuf, Committed) {
    let site = Site::new();
    let config = site.config("ferry.toml", &random_config(count));
    run_until_idle(&config);
    let committed = site.states().read(KEY).unwrap().expect("a committed cursor");
    assert_eq!(next_seq(&committed.state), count);
    (site, config, committed)
}

/// `ferry run` until the source has produced everything, then SIGTERM: exit 0.
fn run_until_idle(config: &Path) {
    let mut run = Ferry::start(config, &[]);
    run.wait_for_line(&["key=random", "idle"]);
    run.signal(Signal::SIGTERM);
    assert!(run.wait().success(), "{}", run.log());
}

fn topic_file(site: &Site) -> PathBuf {
    LocalLog::topic_file(&site.log_dir(), "demo", KEY)
}

fn records(log_dir: &Path) -> Vec<ferry::store::local_log::Record> {
    LocalLog::read_all(log_dir, "demo", KEY).unwrap_or_else(|e| panic!("{e}"))
}

/// `ferry state show` of `random`: its exit status and what it printed.
fn state_show(config: &Path) -> (bool, String) {
    let show = ferry(&["state", "show", config.to_str().unwrap(), KEY]);
    (show.status.success(), String::from_utf8_lossy(&show.stdout).into_owned())
}

fn assert_not_called_corrupt(output: &str) {
    assert!(!output.contains("corrupt"), "an I/O problem must not be reported as corruption:\n{output}");
}

fn mkfifo(path: &Path) {
    let made = std::process::Command::new("mkfifo").arg(path).status().expect("mkfifo runs");
    assert!(made.success(), "mkfifo {}", path.display());
}

// ---- What cannot be opened is said as what it is ----

#[test]
fn a_state_directory_ferry_cannot_create_files_in_is_an_io_error_not_corruption() {
    let (site, config, committed) = site_after_a_run(50);
    // After a clean stop only the database is left: SQLite must create its -wal and
    // -shm next to it, which an immutable directory refuses, to root too.
    let Some(immutable) = Immutable::set(&site.path("state"), "a_state_directory_ferry_cannot_create_files_in") else {
        return;
    };
    let log = run_fails(&config);
    assert!(log.contains("connector `random`") && log.contains("cursors.db"), "{log}");
    assert!(log.contains("cannot open the state database"), "{log}");
    assert!(log.contains("Operation not permitted") && log.contains("lsattr"), "the OS's reason: {log}");
    assert_not_called_corrupt(&log);
    let (shown, output) = state_show(&config);
    assert!(!shown && output.contains("Operation not permitted"), "{output}");
    assert_not_called_corrupt(&output);

    drop(immutable);
    assert_eq!(site.states().read(KEY).unwrap(), Some(committed), "the cursor is intact");
    run_until_idle(&config);
}

#[test]
fn a_state_file_ferry_cannot_write_is_refused_as_such_and_still_shown() {
    let (site, config, committed) = site_after_a_run(50);
    let file = site.states().file_of(KEY);
    let Some(immutable) = Immutable::set(&file, "a_state_file_ferry_cannot_write") else { return };
    let log = run_fails(&config);
    assert!(log.contains("cannot write the state database: Operation not permitted"), "{log}");
    assert_not_called_corrupt(&log);
    // Reading needs no writing.
    let (shown, output) = state_show(&config);
    assert!(shown && output.contains(r#"cursor {"next_seq":50}"#), "{output}");

    drop(immutable);
    assert_eq!(site.states().read(KEY).unwrap(), Some(committed));
    run_until_idle(&config);
}

#[test]
fn a_log_directory_ferry_cannot_create_files_in_is_an_io_error_not_corruption() {
    let (site, config, committed) = site_after_a_run(50);
    let stream_dir = site.log_dir().join("demo");
    let Some(immutable) = Immutable::set(&stream_dir, "a_log_directory_ferry_cannot_create_files_in") else {
        return;
    };
    let log = run_fails(&config);
    assert!(log.contains("cannot check the local log against the committed cursor"), "{log}");
    assert!(log.contains("cannot open the local log topic") && log.contains("Operation not permitted"), "{log}");
    assert_not_called_corrupt(&log);

    drop(immutable);
    run_until_idle(&config);
    assert_eq!(site.states().read(KEY).unwrap(), Some(committed));
}

#[test]
fn a_directory_where_sqlite_keeps_its_wal_or_shm_is_named() {
    let (site, config, committed) = site_after_a_run(20);
    for database in [site.states().file_of(KEY), topic_file(&site)] {
        for companion in companion_files(&database) {
            std::fs::create_dir(&companion).unwrap();
            let log = run_fails(&config);
            let expected = format!("{}: it is a directory, where SQLite keeps the", companion.display());
            assert!(log.contains(&expected), "{log}");
            assert_not_called_corrupt(&log);
            std::fs::remove_dir(&companion).unwrap();
        }
    }
    assert_eq!(site.states().read(KEY).unwrap(), Some(committed));
    run_until_idle(&config);
}

#[test]
fn state_and_log_paths_that_are_not_regular_files_are_refused_as_such() {
    let (site, config, committed) = site_after_a_run(20);
    // How to put each kind of thing where the file was, and its name in the error.
    type Make = fn(&Path);
    let kinds: [(Make, &str); 3] = [
        (mkfifo, "a named pipe"),
        (|p| std::os::unix::fs::symlink("/dev/zero", p).unwrap(), "a character device"),
        (|p| std::fs::create_dir(p).unwrap(), "a directory"),
    ];
    for file in [site.states().file_of(KEY), topic_file(&site)] {
        let aside = site.path("aside.sqlite");
        std::fs::rename(&file, &aside).unwrap();
        for (make, kind) in kinds {
            make(&file);
            // Neither a pipe nor a device may hang ferry, or be opened as a database.
            let log = run_fails(&config);
            assert!(log.contains(&format!("{}: it is {kind}, not a regular file", file.display())), "{log}");
            assert_not_called_corrupt(&log);
            let (command, what) = match file == topic_file(&site) {
                true => (vec!["log", "read", config.to_str().unwrap()], "ferry log read"),
                false => (vec!["state", "show", config.to_str().unwrap(), KEY], "ferry state show"),
            };
            let output = ferry(&command);
            let said =
                format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
            assert!(!output.status.success() && said.contains(kind), "{what}: {said}");
            match std::fs::symlink_metadata(&file).unwrap().is_dir() {
                true => std::fs::remove_dir(&file).unwrap(),
                false => std::fs::remove_file(&file).unwrap(),
            }
        }
        std::fs::rename(&aside, &file).unwrap();
    }
    assert_eq!(site.states().read(KEY).unwrap(), Some(committed));
    run_until_idle(&config);
}

// ---- The log must hold what committed cursors say was delivered ----

#[test]
fn a_healthy_restart_passes_the_log_check_and_resumes() {
    let (site, _, committed) = site_after_a_run(100);
    let mark = LogMark::new("demo", KEY, 100);
    assert_eq!(committed.receipt.marks, [mark], "the cursor records where the log ended");
    let config = site.config("ferry.toml", &random_config(200));
    let (_, shown) = state_show(&config);
    assert!(shown.contains("delivered to demo/random (offsets below 100)"), "{shown}");

    run_until_idle(&config);
    assert_eq!(seqs(&records(&site.log_dir())), (0..200).collect::<Vec<_>>(), "every record once, in order");
    let committed = site.states().read(KEY).unwrap().unwrap();
    assert_eq!((committed.generation, committed.receipt.marks[0].end), (20, 200));
}

#[test]
fn records_deleted_behind_ferrys_back_stop_the_start_naming_them() {
    let (site, config, committed) = site_after_a_run(300);
    let topic = topic_file(&site);
    let delete = |condition: &str| {
        let connection = rusqlite::Connection::open(&topic).unwrap();
        connection.execute(&format!(r#"DELETE FROM records WHERE {condition}"#), []).unwrap();
    };
    delete(r#""offset" >= 200"#);
    let log = run_fails(&config);
    assert!(
        log.contains(
            "connector `random`: the local log demo/random ends at offset 200, but its committed cursor (generation \
             30) says offsets up to 299 were delivered: records 200..=299 are missing (100 records)"
        ),
        "{log}"
    );
    assert!(log.contains("nothing was started") && log.contains("ferry state reset"), "{log}");
    assert_eq!(site.states().read(KEY).unwrap(), Some(committed.clone()), "the cursor is unchanged");
    assert_eq!(records(&site.log_dir()).len(), 200, "nothing was appended");

    delete(r#""offset" BETWEEN 50 AND 59"#);
    let log = run_fails(&config);
    assert!(log.contains("records 50..=59, 200..=299 are missing (110 records)"), "{log}");
    assert_eq!(site.states().read(KEY).unwrap(), Some(committed));

    // The way out the error offers: forget the cursor, and the connector starts over.
    let reset = ferry(&["state", "reset", config.to_str().unwrap(), KEY, "--yes"]);
    assert!(reset.status.success(), "{}", String::from_utf8_lossy(&reset.stderr));
    run_until_idle(&config);
    assert_complete(&seqs(&records(&site.log_dir())), 300);
}

#[test]
fn a_deleted_topic_file_stops_the_start_and_is_not_created_anew() {
    let (site, config, committed) = site_after_a_run(300);
    let topic = topic_file(&site);
    std::fs::remove_file(&topic).unwrap();
    let log = run_fails(&config);
    let expected = format!(
        "the local log demo/random does not exist ({}), but its committed cursor (generation 30) says offsets up to \
         299 were delivered: records 0..=299 are missing",
        topic.display()
    );
    assert!(log.contains(&expected), "{log}");
    assert!(!topic.exists(), "the topic is not created anew");
    assert_eq!(site.states().read(KEY).unwrap(), Some(committed));
}

/// Flip a byte of the page in the middle frame of the write-ahead log at `wal`, as a
/// bad disk would: SQLite's recovery drops that frame and every one after it.
fn damage_a_middle_frame(wal: &Path) {
    let mut bytes = std::fs::read(wal).unwrap();
    let page_size = u32::from_be_bytes(bytes[8..12].try_into().unwrap()) as usize;
    let frames = (bytes.len() - 32) / (24 + page_size);
    assert!(frames >= 4, "the log should have frames not yet checkpointed ({frames})");
    let at = 32 + (frames / 2) * (24 + page_size) + 24 + page_size / 2;
    bytes[at] ^= 0xff;
    std::fs::write(wal, bytes).unwrap();
}

#[test]
fn a_damaged_write_ahead_log_after_a_crash_stops_the_start_naming_the_lost_records() {
    let site = Site::new();
    let config = site.config("ferry.toml", &random_config(300));
    let mut run = Ferry::start(&config, &[]);
    run.wait_for_line(&["key=random", "idle"]);
    // Killed, the writer leaves its records in the write-ahead log (too few pages yet
    // for a checkpoint into the database file).
    run.kill_9();
    let committed = site.states().read(KEY).unwrap().unwrap();
    assert_eq!((next_seq(&committed.state), committed.generation), (300, 30));
    damage_a_middle_frame(&companion_files(&topic_file(&site))[0]);

    let log = run_fails(&config);
    let end = records(&site.log_dir()).len() as u64;
    assert!(end < 300, "the damaged frame and those after it are gone ({end} records left)");
    let expected = format!(
        "the local log demo/random ends at offset {end}, but its committed cursor (generation 30) says offsets up \
         to 299 were delivered: records {end}..=299 are missing"
    );
    assert!(log.contains(&expected), "{log}");
    assert_eq!(site.states().read(KEY).unwrap(), Some(committed), "the cursor is unchanged");
}

// ---- A file deleted under a running ferry ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_deleted_while_ferry_runs_fails_deliveries_and_nothing_more_is_acknowledged() {
    let h = Harness::new();
    // A log of its own, to be closed before the file is put back.
    let log = Arc::new(LocalLog::new(h.log.dir()));
    let plugin_config = json!({ "messages_per_batch": 10, "interval": "5ms", "max_count": 600 });
    let mut source = h.source(KEY, RANDOM_SOURCE, plugin_config);
    source.streams = vec![StreamConfig::new("demo", KEY)].into();
    source.target = log.clone();
    let mut running = h.start(vec![source]);
    wait_generation(&mut running, KEY, 3).await;

    // Deleted; a second name keeps the file, to put it back later.
    let topic = LocalLog::topic_file(h.log.dir(), "demo", KEY);
    let kept = h.dir.path().join("kept.sqlite");
    std::fs::hard_link(&topic, &kept).unwrap();
    std::fs::remove_file(&topic).unwrap();

    let event = running.wait_for("a NACK", is_nack(KEY, NackReason::DeliveryFailed)).await;
    let Event::Nacked { detail, .. } = event else { unreachable!() };
    let reason = format!("{}: the local log topic was deleted or replaced while ferry was running", topic.display());
    assert!(detail.starts_with(&reason), "{detail}");
    let committed = h.committed(KEY).expect("committed before the deletion");
    for _ in 0..3 {
        let event = running
            .wait_for(
                "the next verdict",
                |e| matches!(e, Event::Acked { key, .. } | Event::Nacked { key, .. } if &**key == KEY),
            )
            .await;
        assert!(
            matches!(&event, Event::Nacked { reason: NackReason::DeliveryFailed, detail, .. } if detail.starts_with(&reason)),
            "nothing is acknowledged once the file is gone: {event:?}"
        );
    }
    assert_eq!(h.committed(KEY), Some(committed.clone()), "the cursor stopped");
    assert!(!topic.exists(), "the topic is not created anew");
    running.stop().await;
    drop(log);

    // Restarted, ferry refuses: what the cursor counts as delivered is in no file.
    let config = h.dir.path().join("ferry.toml");
    std::fs::write(&config, random_config(600)).unwrap();
    let end = committed.receipt.marks[0].end;
    let log = run_fails(&config);
    let expected = format!(
        "the local log demo/random does not exist ({}), but its committed cursor (generation {}) says offsets up to \
         {} were delivered: records 0..={} are missing",
        topic.display(),
        committed.generation,
        end - 1,
        end - 1
    );
    assert!(log.contains(&expected), "{log}");

    // Put back, the file holds every acknowledged record, and ferry finishes the job.
    std::fs::rename(&kept, &topic).unwrap();
    let present = seqs(&records(h.log.dir()));
    let acknowledged = next_seq(&committed.state);
    assert!((0..acknowledged).all(|s| present.contains(&s)), "every acknowledged record is in the file");
    run_until_idle(&config);
    assert_complete(&seqs(&records(h.log.dir())), 600);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_state_file_deleted_while_ferry_runs_fails_the_commits() {
    let h = Harness::new();
    let plugin_config = json!({ "messages_per_batch": 5, "interval": "5ms", "max_count": 1000 });
    let mut running = h.start(vec![h.source("gone", RANDOM_SOURCE, plugin_config)]);
    wait_generation(&mut running, "gone", 2).await;
    let file = h.states.file_of("gone");
    std::fs::remove_file(&file).unwrap();

    let reason = format!("{}: the state database was deleted or replaced while ferry was running", file.display());
    for _ in 0..3 {
        let event = running
            .wait_for(
                "a NACK after the deletion",
                |e| matches!(e, Event::Nacked { key, detail, .. } if &**key == "gone" && detail.contains(&reason)),
            )
            .await;
        assert!(matches!(event, Event::Nacked { reason: NackReason::StateSaveFailed, .. }), "{event:?}");
    }
    let next = running
        .wait_for(
            "the next verdict",
            |e| matches!(e, Event::Acked { key, .. } | Event::Nacked { key, .. } if &**key == "gone"),
        )
        .await;
    assert!(matches!(next, Event::Nacked { .. }), "no commit succeeds into a deleted file: {next:?}");
    assert!(!file.exists(), "the state file is not created anew");
    running.stop().await;
}

/// Everything under `dir` (not `dir` itself), with its mode.
fn modes_under(dir: &Path) -> Vec<(PathBuf, u32)> {
    use std::os::unix::fs::PermissionsExt;
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().map(Result::unwrap) {
        let metadata = entry.metadata().unwrap();
        found.push((entry.path(), metadata.permissions().mode() & 0o777));
        if metadata.is_dir() {
            found.extend(modes_under(&entry.path()));
        }
    }
    found
}

#[test]
fn what_ferry_writes_is_private_whatever_the_umask_and_a_state_dir_open_to_others_is_warned_of() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;

    let site = Site::new();
    std::fs::create_dir(site.path("archive-out")).unwrap();
    std::fs::create_dir(site.path("state")).unwrap();
    std::fs::set_permissions(site.path("state"), std::fs::Permissions::from_mode(0o777)).unwrap();
    let text = format!(
        "{}{}",
        random_source_config("feed", "messages_per_batch = 10\nmax_count = 100"),
        crate::process::file_sink_table("archive", "", "")
    );
    let config = site.config("ferry.toml", &text);
    // A umask that takes nothing away: whatever is private, ferry made so.
    let mut run = Ferry::start_with(&config, &[("FERRY_LOG", "debug")], |command| unsafe {
        command.pre_exec(|| {
            libc::umask(0);
            Ok(())
        });
    });
    let warned = run.wait_until_logged(&["[state] path", "is writable by its group or by others (mode 777)"]);
    assert!(warned.contains("WARN") && warned.contains("chmod go-w"), "{warned}");
    run.wait_until_logged(&["key=archive", "offset stored", "end=100"]);
    run.signal(Signal::SIGTERM);
    assert!(run.wait().success(), "{}", run.log());

    let written = [modes_under(&site.path("state")), modes_under(&site.log_dir())].concat();
    for file in ["status.json", "compiled", "feed", "archive", "demo"] {
        assert!(
            written.iter().any(|(path, _)| path.to_string_lossy().contains(file)),
            "ferry wrote {file}: {written:?}"
        );
    }
    for (path, mode) in &written {
        let private = if path.is_dir() { 0o700 } else { 0o600 };
        assert_eq!(*mode, private, "{} is mode {mode:o}", path.display());
    }
    assert_eq!(
        std::fs::metadata(site.log_dir()).unwrap().permissions().mode() & 0o777,
        0o700,
        "the log directory ferry created"
    );
}

#[test]
fn state_check_reads_every_page_that_state_show_leaves_alone_and_names_a_damaged_file() {
    let (site, config, _) = site_after_a_run(300);
    let check = || {
        let out = crate::process::ferry(&["state", "check", config.to_str().unwrap()]);
        (out.status.code(), String::from_utf8_lossy(&out.stdout).to_string())
    };
    let (code, output) = check();
    assert_eq!(code, Some(0), "{output}");
    assert!(output.contains("cursors.db: ok") && output.contains("random.sqlite: ok"), "{output}");
    assert!(output.contains("0 damaged"), "{output}");

    // A page of the topic's file overwritten: `state show` reads only the cursors.
    let topic = topic_file(&site);
    let mut bytes = std::fs::read(&topic).unwrap();
    assert!(bytes.len() > 3 * 4096, "several pages: {}", bytes.len());
    bytes[2 * 4096..3 * 4096].fill(0x55);
    std::fs::write(&topic, &bytes).unwrap();
    let (shown, output) = state_show(&config);
    assert!(shown && output.contains(r#"cursor {"next_seq":300}"#), "{output}");
    let (code, output) = check();
    assert_eq!(code, Some(1), "{output}");
    assert!(output.contains("ERROR") && output.contains("random.sqlite"), "{output}");
    assert!(output.contains("cursors.db: ok"), "{output}");
}
