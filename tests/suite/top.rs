//! `ferry top CONFIG`, run piped (as a script or a test would) against a running
//! ferry: from its HTTP API (with its API key, and over HTTPS) and from its status
//! file, each connector's key, phase, a rate that moves while it delivers, its traps
//! and NACKs; the fallback to the status file when the API cannot be reached or its
//! key read, and back to the API when it answers again; and the errors for a refused
//! key, a config that cannot be loaded, and a ferry that has never run. And run live,
//! on a real terminal (tmux's): the table redrawn in place, `q` to quit, and the
//! terminal left as it was.

use std::io::{BufRead as _, BufReader, Read as _};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use serde_json::Value;

use crate::http_api::{API_KEY, BASE, certificate, faulty, head, start};
use crate::process::{Ferry, Site, ferry_binary};
use ferry::engine::status::{StatusFile, read_status_file, status_file_path};
use ferry_tests::components::HOSTILE_SOURCE;
use ferry_tests::free_port;
use ferry_tests::harness::PATIENCE;
use ferry_tests::http_client::{get_tls, get_until};
use ferry_tests::tmux::Tmux;

/// Three sources: `feed` delivers without end; `trapper` traps on its third poll and
/// waits a day to restart; `rejected` has every batch after its first two NACKed.
fn connectors() -> String {
    format!(
        r#"{}{}
[[sources]]
key = "rejected"
path = "{HOSTILE_SOURCE}"
poll_interval = "5ms"
max_consecutive_nacks = 100000
nack_backoff = {{ initial = "1ms", max = "5ms" }}
streams = [{{ stream = "demo", topic = "rejected" }}]
plugin_config = {{ mode = "too_many_messages", n = 30, good_batches = 2, messages_per_batch = 5 }}
limits = {{ max_messages_per_batch = 20 }}
"#,
        faulty("feed", "max_count = 1000000000", ""),
        faulty(
            "trapper",
            "max_count = 1000, trap_on_poll = 3",
            r#"restart_backoff = { initial = "1day", max = "1day" }"#
        ),
    )
}

/// Run `ferry top ARGS...` to completion, with these environment variables, piped
/// and with no terminal width to cut lines to.
pub(crate) fn top(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(ferry_binary());
    command.arg("top").args(args).env_remove("COLUMNS").env_remove("FERRY_TEST_API_KEY");
    command.envs(env.iter().copied());
    command.output().expect("ferry top runs")
}

/// The snapshots top printed (each from its `ferry pid` header to the blank line),
/// failing the test unless it exited 0.
pub(crate) fn snapshots(output: &Output) -> Vec<String> {
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "ferry top failed: {stderr}\n{stdout}");
    stdout.split("\n\n").map(str::to_string).collect()
}

/// The columns of `key`'s line in `snapshot`, from KEY to DEAD (the last error left
/// out), by their heading.
fn columns<'a>(snapshot: &'a str, key: &str) -> Vec<(&'a str, &'a str)> {
    let mut lines = snapshot.lines();
    let heading = lines.find(|l| l.starts_with("KEY ")).unwrap_or_else(|| panic!("no table in:\n{snapshot}"));
    let line = lines
        .find(|l| l.split_whitespace().next() == Some(key))
        .unwrap_or_else(|| panic!("no line for {key} in:\n{snapshot}"));
    heading.split_whitespace().take(11).zip(line.split_whitespace()).collect()
}

fn column<'a>(snapshot: &'a str, key: &str, name: &str) -> &'a str {
    let columns = columns(snapshot, key);
    columns.iter().find(|(n, _)| *n == name).map(|(_, v)| *v).unwrap_or_else(|| panic!("no {name}: {columns:?}"))
}

pub(crate) fn number(snapshot: &str, key: &str, name: &str) -> f64 {
    let value = column(snapshot, key, name);
    value.parse().unwrap_or_else(|_| panic!("{key}'s {name} is {value:?}, not a number, in:\n{snapshot}"))
}

/// What top shows of a ferry with the three connectors of [`connectors`], once its
/// trap and NACKs have happened: `feed` delivers, and on the second snapshot at a rate.
fn assert_shows_the_connectors(snapshots: &[String], origin: &str) {
    assert_eq!(snapshots.len(), 2, "two snapshots: {snapshots:?}");
    for snapshot in snapshots {
        let header = snapshot.lines().next().unwrap();
        assert!(header.starts_with("ferry pid ") && header.contains(": running; "), "{snapshot}");
        assert!(header.contains(origin), "the header says where the figures come from ({origin}):\n{snapshot}");
        assert!(snapshot.lines().nth(1).unwrap().starts_with("3 connectors, "), "{snapshot}");
        let keys: Vec<&str> = snapshot.lines().skip(3).filter_map(|l| l.split_whitespace().next()).collect();
        assert_eq!(keys, ["feed", "rejected", "trapper"], "sorted by key:\n{snapshot}");
        assert!(["running", "idle"].contains(&column(snapshot, "feed", "PHASE")), "{snapshot}");
        assert_eq!(column(snapshot, "feed", "ROLE"), "source");
        assert!(number(snapshot, "feed", "MESSAGES") > 0.0, "{snapshot}");
        assert_eq!(column(snapshot, "trapper", "PHASE"), "failed", "{snapshot}");
        assert_eq!(number(snapshot, "trapper", "TRAPS"), 1.0, "{snapshot}");
        let trap = snapshot.lines().find(|l| l.starts_with("trapper ")).unwrap();
        assert!(trap.contains("the guest trapped in `poll`"), "the last error is on its line: {trap}");
        assert!(number(snapshot, "rejected", "NACKS") >= 1.0, "{snapshot}");
        assert_eq!(number(snapshot, "feed", "TRAPS"), 0.0, "{snapshot}");
    }
    let (first, second) = (&snapshots[0], &snapshots[1]);
    assert_eq!(column(first, "feed", "MSGS/S"), "-", "no rate from one reading:\n{first}");
    assert_eq!(column(first, "feed", "BATCHES/S"), "-");
    assert!(number(second, "feed", "MSGS/S") > 0.0, "feed delivers, so it has a rate:\n{second}");
    assert!(number(second, "feed", "BATCHES/S") > 0.0, "{second}");
    assert_eq!(number(second, "trapper", "MSGS/S"), 0.0, "a failed connector delivers nothing:\n{second}");
    assert!(number(second, "feed", "MESSAGES") > number(first, "feed", "MESSAGES"), "{first}\n{second}");
}

/// Whether `stats` (of `/stats`) shows the trap and the NACKs.
fn trap_and_nacks_in(stats: &Value) -> bool {
    let connectors = stats["connectors"].as_array().cloned().unwrap_or_default();
    let of = |key: &str, field: &str| {
        connectors.iter().find(|c| c["key"] == key).and_then(|c| c[field].as_u64()).unwrap_or(0)
    };
    of("trapper", "traps") == 1 && of("rejected", "nacks") >= 1 && of("feed", "messages_sent") > 0
}

/// Read the status file at `path` until `done` holds for it. Ferry rewrites it after
/// each change and says nothing when it did, so the test looks, as `ferry top` does.
pub(crate) fn status_until(path: &Path, mut done: impl FnMut(&StatusFile) -> bool) -> StatusFile {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let status = read_status_file(path);
        match &status {
            Ok(status) if done(status) => return status.clone(),
            _ if Instant::now() > deadline => panic!("the status file never showed what was awaited: {status:?}"),
            _ => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

#[test]
fn from_the_api_top_shows_each_connector_its_rate_trap_and_nacks_and_names_a_refused_key() {
    let site = Site::new();
    let port = free_port();
    let address = format!("127.0.0.1:{port}");
    let text = format!("{}{}", head(port, r#"api_key = { env = "FERRY_TEST_API_KEY" }"#), connectors());
    let mut run = start(&site, &text, &[("FERRY_TEST_API_KEY", API_KEY)]);
    let config = site.path("ferry.toml");
    let config = config.to_str().unwrap();
    get_until(&address, "/stats", &[("api-key", API_KEY)], |r| r.status == 200 && trap_and_nacks_in(&r.json()));

    let output = top(&[config, "--iterations", "2", "--interval", "300ms"], &[("FERRY_TEST_API_KEY", API_KEY)]);
    assert_shows_the_connectors(&snapshots(&output), &format!("from the API at http://{address}"));
    assert!(output.stderr.is_empty(), "nothing to warn about: {}", String::from_utf8_lossy(&output.stderr));

    // A key that is not ferry's: an error saying so, no table.
    let refused = top(&[config, "--once"], &[("FERRY_TEST_API_KEY", "not-the-key")]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && refused.stdout.is_empty(), "{stderr}");
    for words in ["ferry.toml", &format!("the API at http://{address} refused the key of [http] api_key (401")] {
        assert!(stderr.contains(words), "the error says {words:?}: {stderr}");
    }
    assert!(!stderr.contains("not-the-key"), "the key is never printed: {stderr}");
    // No key at all: the API cannot be used; top reads the status file and says why,
    // naming the variable.
    let unset = top(&[config, "--once"], &[]);
    let stderr = String::from_utf8_lossy(&unset.stderr);
    assert!(stderr.contains("[http] api_key") && stderr.contains("FERRY_TEST_API_KEY is not set"), "{stderr}");
    let file = status_file_path(&site.path("state"));
    let header = snapshots(&unset)[0].lines().next().unwrap().to_string();
    assert!(header.contains(&format!("from the status file {} (cannot use the API: ", file.display())), "{header}");
    assert!(header.contains("FERRY_TEST_API_KEY is not set"), "{header}");

    run.signal(Signal::SIGTERM);
    assert!(run.wait().success(), "{}", run.log());
}

#[test]
fn from_the_status_file_top_shows_the_same_and_falls_back_to_it_when_the_api_cannot_be_reached() {
    let site = Site::new();
    let config = site.config("ferry.toml", &format!("{BASE}{}", connectors()));
    let mut run = Ferry::start(&config, &[]);
    let file = status_file_path(&site.path("state"));
    status_until(&file, |status| {
        let of = |key: &str| status.connectors.iter().find(|c| c.key == key).cloned().unwrap_or_default();
        of("trapper").traps == 1 && of("rejected").nacks >= 1 && of("feed").messages_delivered > 0
    });

    // The status file is rewritten at most twice a second: a second between the
    // readings sees it rewritten.
    let config = config.to_str().unwrap();
    let output = top(&[config, "--iterations", "2", "--interval", "1s"], &[]);
    let origin = format!("from the status file {}", file.display());
    assert_shows_the_connectors(&snapshots(&output), &origin);

    // The same ferry seen through a config whose API nobody serves: top says so once
    // and reads the status file.
    let port = free_port();
    let unserved = site.config("unserved.toml", &format!("{}{}", head(port, ""), connectors()));
    let output = top(&[unserved.to_str().unwrap(), "--iterations", "2", "--interval", "1s"], &[]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let api = format!("http://127.0.0.1:{port}");
    assert_eq!(stderr.matches(&format!("cannot read the API at {api}")).count(), 1, "said once: {stderr}");
    assert!(stderr.contains(&format!("reading the status file {} instead", file.display())), "{stderr}");
    let origin = format!("{origin} (the API at {api} cannot be reached)");
    assert_shows_the_connectors(&snapshots(&output), &origin);

    run.signal(Signal::SIGTERM);
    assert!(run.wait().success(), "{}", run.log());
    // Stopped: top shows it as the status file's last word.
    let stopped = snapshots(&top(&[config, "--once"], &[]));
    assert!(stopped[0].lines().next().unwrap().contains(": stopped cleanly; from the status file"), "{stopped:?}");
    assert_eq!(column(&stopped[0], "feed", "PHASE"), "stopped", "{stopped:?}");
}

/// One `ferry top` left running (piped) while its ferry stops and starts again: it
/// goes from the API to the status file and back, saying so each time.
#[test]
fn top_falls_back_to_the_status_file_while_the_api_is_gone_and_reads_the_api_again_when_it_answers() {
    let site = Site::new();
    let port = free_port();
    let address = format!("127.0.0.1:{port}");
    let text = format!("{}{}", head(port, ""), faulty("feed", "max_count = 1000000000", ""));
    let mut run = start(&site, &text, &[]);
    get_until(&address, "/stats", &[], |r| r.status == 200);
    let file = status_file_path(&site.path("state"));

    let mut watching = Command::new(ferry_binary())
        .arg("top")
        .arg(site.path("ferry.toml"))
        // At most five minutes, should the test fail and leave it running.
        .args(["--iterations", "1500", "--interval", "200ms"])
        .env_remove("COLUMNS")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ferry top runs");
    let mut headers = BufReader::new(watching.stdout.take().unwrap()).lines().map(|l| l.unwrap());
    let mut next_header = |wanted: &str| {
        let found = headers.by_ref().filter(|l| l.starts_with("ferry pid ")).find(|l| l.contains(wanted));
        found.unwrap_or_else(|| panic!("top ended before a header saying {wanted:?}"))
    };
    let api = format!("from the API at http://{address}");
    next_header(&api);

    // Its ferry stops: the status file, with the reason.
    run.signal(Signal::SIGTERM);
    assert!(run.wait().success(), "{}", run.log());
    let lost = format!("from the status file {} (the API at http://{address} cannot be reached)", file.display());
    let header = next_header(&lost);
    assert!(header.contains(": stopped cleanly;"), "the status file's last word: {header}");

    // Started again: the API, as soon as it answers.
    let run = start(&site, &text, &[]);
    get_until(&address, "/stats", &[], |r| r.status == 200);
    let header = next_header(&api);
    assert!(header.contains(&format!("ferry pid {}:", run.pid())), "the new ferry: {header}");

    watching.kill().unwrap();
    watching.wait().unwrap();
    let mut stderr = String::new();
    watching.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    assert_eq!(stderr.matches("cannot read the API at").count(), 1, "said once: {stderr}");
    assert_eq!(stderr.matches(&format!("the API at http://{address} answers again")).count(), 1, "{stderr}");
    drop(run);
}

#[test]
fn with_tls_top_reads_the_api_over_https() {
    let site = Site::new();
    let (cert, key, der) = certificate();
    std::fs::create_dir(site.path("tls")).unwrap();
    std::fs::write(site.path("tls/cert.pem"), cert).unwrap();
    std::fs::write(site.path("tls/key.pem"), key).unwrap();
    let port = free_port();
    let address = format!("127.0.0.1:{port}");
    let http = r#"tls = { cert_file = "tls/cert.pem", key_file = "tls/key.pem" }"#;
    let config = site.config("ferry.toml", &format!("{}{}", head(port, http), connectors()));
    let mut run = Ferry::start(&config, &[]);
    run.wait_until_logged(&[&format!("HTTP API listening on https://{address}")]);
    let deadline = Instant::now() + PATIENCE;
    while !get_tls(&address, "/stats", &[], &der).is_ok_and(|r| trap_and_nacks_in(&r.json())) {
        assert!(Instant::now() < deadline, "/stats never showed the trap and the NACKs");
        std::thread::sleep(Duration::from_millis(20));
    }

    let output = top(&[config.to_str().unwrap(), "--iterations", "2", "--interval", "300ms"], &[]);
    assert_shows_the_connectors(&snapshots(&output), &format!("from the API at https://{address}"));
    assert!(output.stderr.is_empty(), "it did not fall back: {}", String::from_utf8_lossy(&output.stderr));

    run.signal(Signal::SIGTERM);
    assert!(run.wait().success(), "{}", run.log());
}

#[test]
fn without_a_status_file_or_a_loadable_config_top_says_what_is_missing() {
    let site = Site::new();
    let config =
        site.config("ferry.toml", &format!("{}{}", head(free_port(), ""), faulty("feed", "max_count = 5", "")));
    let config = config.to_str().unwrap();
    // Never run: no API to ask, no status file to read.
    let output = top(&[config, "--once"], &[]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success() && output.stdout.is_empty(), "{stderr}");
    let file = status_file_path(&site.path("state"));
    let words = format!("no status yet: ferry has not run with {config} ({} does not exist)", file.display());
    assert!(stderr.contains(&words), "the error says {words:?}: {stderr}");

    let broken = site.config("broken.toml", "[state]\npath = 5\n");
    let output = top(&[broken.to_str().unwrap(), "--once"], &[]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(stderr.contains("broken.toml") && stderr.contains("path"), "the error names the file and key: {stderr}");

    let output = top(&[config, "--interval", "soon", "--once"], &[]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success() && stderr.contains("--interval"), "{stderr}");
}

/// `ferry top CONFIG` on a terminal: the table on the alternate screen, each
/// connector's key and phase, feed's rate moving from one redraw to the next; `q`
/// quits with 0, and the terminal is as it was before (the main screen, the cursor,
/// the same line settings: `stty -g` reads the same).
#[test]
fn on_a_terminal_top_redraws_the_table_until_q_and_leaves_the_terminal_as_it_found_it() {
    let site = Site::new();
    let port = free_port();
    let address = format!("127.0.0.1:{port}");
    let mut run = start(&site, &format!("{}{}", head(port, ""), connectors()), &[]);
    get_until(&address, "/stats", &[], |r| r.status == 200 && trap_and_nacks_in(&r.json()));

    // The terminal's line settings before and after top, read on the terminal itself;
    // after top, the shell says so and waits for Enter, so that the screen and the
    // cursor can be seen as top left them.
    let script = site.path("top.sh");
    let quoted = |path: &Path| format!("'{}'", path.display());
    std::fs::write(
        &script,
        format!(
            "stty -g > {before}\n{ferry} top {config} --interval 200ms\nstatus=$?\nstty -g > {after}\n\
             echo \"ferry top exited $status\"\nread line\nexit $status\n",
            before = quoted(&site.path("stty.before")),
            ferry = quoted(Path::new(ferry_binary())),
            config = quoted(&site.path("ferry.toml")),
            after = quoted(&site.path("stty.after")),
        ),
    )
    .unwrap();
    let test = "on_a_terminal_top_redraws_the_table_until_q_and_leaves_the_terminal_as_it_found_it";
    let Some(tmux) = Tmux::start(test, &format!("sh {}", quoted(&script)), 160, 40) else { return };

    let shows_the_table = |screen: &str| {
        screen.lines().any(|l| l.starts_with("KEY "))
            && ["feed", "rejected", "trapper"].iter().all(|key| {
                screen
                    .lines()
                    .any(|l| l.split_whitespace().next() == Some(*key) && l.split_whitespace().nth(3).is_some())
            })
    };
    let screen = tmux.screen_until("the table of the three connectors", shows_the_table);
    assert_eq!(tmux.format("#{alternate_on}"), "1", "the table is on the alternate screen:\n{screen}");
    let header = screen.lines().next().unwrap();
    assert!(header.starts_with("ferry pid ") && header.contains(": running; "), "{screen}");
    assert!(header.contains(&format!("from the API at http://{address}")), "{screen}");
    assert!(screen.lines().nth(1).unwrap().starts_with("3 connectors, "), "{screen}");
    assert!(["running", "idle"].contains(&column(&screen, "feed", "PHASE")), "{screen}");
    assert_eq!(column(&screen, "trapper", "PHASE"), "failed", "{screen}");
    assert_eq!(column(&screen, "feed", "ROLE"), "source", "{screen}");
    assert!(!column(&screen, "rejected", "PHASE").is_empty(), "{screen}");
    assert!(screen.contains("q, Esc or Ctrl-C: quit"), "the screen says how to quit:\n{screen}");

    // feed delivers: its rate appears, then moves, redrawn in place.
    let rate = |screen: &str| column(screen, "feed", "MSGS/S").parse::<f64>().ok();
    let screen = tmux.screen_until("a rate for feed", |screen| rate(screen).is_some_and(|r| r > 0.0));
    let first = rate(&screen).unwrap();
    let screen = tmux.screen_until("feed's rate moving", |screen| rate(screen).is_some_and(|r| r != first));
    assert!(rate(&screen).unwrap() > 0.0, "{screen}");
    assert_eq!(screen.lines().filter(|l| l.starts_with("KEY ")).count(), 1, "drawn over, not below:\n{screen}");

    tmux.send_keys("q");
    let screen = tmux.screen_until("top exiting", |screen| screen.contains("ferry top exited "));
    assert!(screen.contains("ferry top exited 0"), "q quits top with 0:\n{screen}");
    assert_eq!(tmux.format("#{alternate_on}"), "0", "back on the main screen:\n{screen}");
    assert_eq!(tmux.format("#{cursor_flag}"), "1", "the cursor shows again");
    assert!(!screen.lines().any(|l| l.starts_with("KEY ")), "the table went with the alternate screen:\n{screen}");
    let stty = |name: &str| std::fs::read_to_string(site.path(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert!(!stty("stty.before").is_empty());
    assert_eq!(stty("stty.after"), stty("stty.before"), "the terminal's line settings are as they were");
    // Enter: the shell reads it in line mode (echoed, as the terminal is itself again),
    // and exits with top's status (already seen on the screen: tmux does not always
    // record a pane's status under a loaded suite).
    tmux.send_keys("Enter");
    let status = tmux.exit_status();
    assert!(status.is_none_or(|status| status == 0), "{status:?}: {}", tmux.screen());
    drop(tmux);

    run.signal(Signal::SIGTERM);
    assert!(run.wait().success(), "{}", run.log());
}
