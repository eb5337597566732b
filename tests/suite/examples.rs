//! The configs in `examples/` are documentation people copy: each must load as it
//! stands, and name components the workspace builds; and the PostgreSQL
//! walk-through of the README works as written.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use ferry::config::Config;
use nix::sys::signal::Signal;

use crate::process::{Ferry, PATIENCE, Site};

fn examples() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "toml"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_example_config_loads_and_names_built_components() {
    let files = examples();
    assert!(files.len() >= 3, "quickstart, iggy and sandbox at least: {files:?}");
    for file in files {
        let config = Config::load(&file).unwrap_or_else(|e| panic!("{e}"));
        assert!(config.connectors().next().is_some(), "{}: no connector", file.display());
        for connector in config.connectors() {
            assert!(
                connector.path().exists(),
                "{}: `{}` names {}, which is not built",
                file.display(),
                connector.key(),
                connector.path().display()
            );
        }
    }
}

/// The README's PostgreSQL walk-through, command for command: `scripts/postgres-demo
/// start`, `ferry run examples/postgres.toml`, rows inserted into `orders` with the
/// script's psql, read back from `orders_copy`. Only where things live differs: the
/// server's directory and port (the script's variables) and ferry's state and log
/// (overrides), so that the test touches nothing in the repository and runs beside
/// others.
#[test]
fn the_postgres_walk_through_copies_rows_inserted_into_orders_into_orders_copy() {
    let site = Site::new();
    // The server runs as another user when the tests run as root: let it in.
    std::fs::set_permissions(site.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let server = DemoServer { dir: site.path("pg"), port: ferry_tests::free_port().to_string() };
    server.run(&["start"]);
    let example = examples().into_iter().find(|f| f.ends_with("postgres.toml")).expect("examples/postgres.toml");
    let password = server.dir.join("password");
    let (state, log) = (site.path("state"), site.path("log"));
    let mut ferry = Ferry::start(
        &example,
        &[
            ("FERRY__POSTGRES__DEMO__PORT", &server.port),
            ("FERRY__POSTGRES__DEMO__PASSWORD__FILE", password.to_str().unwrap()),
            ("FERRY__STATE__PATH", state.to_str().unwrap()),
            ("FERRY__LOCAL_LOG__PATH", log.to_str().unwrap()),
        ],
    );
    ferry.wait_for_line(&["key=orders", "idle"]);
    for (customer, cents) in [("ada", 1250), ("grace", 990), ("edsger", 4200)] {
        let insert = format!("INSERT INTO orders (customer, total_cents) VALUES ('{customer}', {cents})");
        server.run(&["psql", "-c", &insert]);
    }
    let copied = "SELECT string_agg(payload->>'customer' || ':' || (payload->>'total_cents'), ' ' ORDER BY payload->>'id') \
                  FROM orders_copy";
    let deadline = Instant::now() + PATIENCE;
    while server.run(&["psql", "-Atc", copied]).trim() != "ada:1250 grace:990 edsger:4200" {
        assert!(Instant::now() < deadline, "the rows never reached orders_copy; ferry's log:\n{}", ferry.log());
        std::thread::sleep(Duration::from_millis(100));
    }
    ferry.signal(Signal::SIGTERM);
    assert!(ferry.wait().success(), "{}", ferry.log());
    assert!(!ferry.log().contains(&std::fs::read_to_string(&password).unwrap()), "the password was logged");
}

/// `scripts/postgres-demo` on a directory and port of the test's own, stopped on drop.
struct DemoServer {
    dir: PathBuf,
    port: String,
}

impl DemoServer {
    /// `scripts/postgres-demo ARGS`, which must succeed; its standard output.
    fn run(&self, args: &[&str]) -> String {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/postgres-demo");
        let output = Command::new(script)
            .args(args)
            .env("FERRY_DEMO_PG_DIR", &self.dir)
            .env("FERRY_DEMO_PG_PORT", &self.port)
            .output()
            .expect("scripts/postgres-demo runs");
        let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        assert!(output.status.success(), "postgres-demo {args:?} failed:\n{stdout}{stderr}");
        stdout.into_owned()
    }
}

impl Drop for DemoServer {
    fn drop(&mut self) {
        if self.dir.join("data/postmaster.pid").exists() {
            self.run(&["stop"]);
        }
    }
}
