//! The `ferry` command line: argument parsing and dispatch. Each subcommand is its
//! own file.

mod build;
mod compile;
mod config;
mod inspect;
mod log;
mod new;
mod run;
mod state;
mod status;
mod test;
mod top;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use ferry_config::{Config, LogFormat};
use tracing_subscriber::EnvFilter;

const ABOUT: &str = "A sandboxed WebAssembly connector host for Apache Iggy";

const LONG_ABOUT: &str = "\
A sandboxed WebAssembly connector host for Apache Iggy.

Each connector is a WebAssembly component, run in a sandbox of its own: a panic or a
trap loses that instance, never the host, and the connector restarts from its last
committed cursor. A source's cursor is committed only after its batch was delivered,
so after any crash records may be delivered twice, but never lost.

Logging: set FERRY_LOG to a tracing filter (default `info`, without PostgreSQL's
notices; e.g. `debug`, `ferry::guest=warn`). Config values can be overridden from the environment with
FERRY__<SECTION>__<KEY>=value (see the README).";

#[derive(Parser)]
#[command(name = "ferry", version, about = ABOUT, long_about = LONG_ABOUT)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run every enabled connector of CONFIG until SIGINT or SIGTERM.
    ///
    /// Every component is checked against the contract and every state file for
    /// corruption before anything starts; any problem is an error naming it. On
    /// SIGINT/SIGTERM, polling stops, the batch in flight settles (delivered and
    /// committed, or NACKed) within the grace period, guests are closed, and ferry
    /// exits 0. A second signal exits at once.
    ///
    /// SIGHUP reloads CONFIG: connectors added start, removed ones stop gracefully,
    /// changed ones (config, secrets or component bytes) settle their batch and start
    /// again with the new config from the same committed cursor, the others are not
    /// touched. A config or component that fails its checks is refused whole, with
    /// the reason in the log, and everything runs on as before. With [http], the API
    /// also pauses, resumes and restarts connectors and resets their state.
    ///
    /// CONFIG may also be the config file of Iggy's connectors runtime, with the
    /// connector files of its `config_dir`: it runs as the Ferry config it means
    /// (`ferry config from-iggy CONFIG` prints that). A directory is read as its
    /// `config.toml`.
    Run {
        /// The configuration file (TOML).
        config: PathBuf,
    },
    /// Check a component against the contract and show what it implements and imports.
    ///
    /// Runs the same checks as `ferry run` (decode, contract, compile, link), then
    /// prints the result. Exits 1 if the component can be run neither as a source nor
    /// as a sink.
    ///
    /// With --config and --key, also shows which of its imports connector KEY of
    /// CONFIG is granted, and which it would be denied (deny by default: clocks,
    /// random and logging are always granted; environment, directories and network
    /// only as listed in the connector's [sources.grants] or [sinks.grants]).
    Inspect {
        /// The component (.wasm).
        component: PathBuf,
        /// Also print the component's whole world as WIT.
        #[arg(long)]
        wit: bool,
        /// The configuration file whose grants to check (with --key).
        #[arg(long, requires = "key")]
        config: Option<PathBuf>,
        /// The connector of --config whose grants to check.
        #[arg(long, requires = "config")]
        key: Option<String>,
    },
    /// Drive a component through the contract's hard cases; say which rule it breaks.
    ///
    /// The conformance kit for connector authors.
    ///
    /// For a SOURCE, each scenario on fresh instances, with the committed cursor kept
    /// by ferry in memory (no Iggy, no local log, no state file):
    ///
    ///   open (rule 1): open with no cursor;
    ///   ack (rule 3): poll up to 3 batches and ACK each; every batch must pass the
    ///     host's own checks (limits, unique header keys); what they hold is recorded;
    ///   batch ids (rule 2): each batch settled once, by its id, before the next poll;
    ///   close (rule 5): close after the last ACK does not trap;
    ///   nack(REASON) (rule 3), for delivery-failed, state-save-failed, timed-out and
    ///     rejected: after an ACKed batch, a batch NACKed must come again;
    ///   restart from the cursor (rule 4/1): an instance dropped without close (a trap,
    ///     a host restart), a new one opened with the committed cursor must go on with
    ///     the records produced after it;
    ///   crash before commit (rule 4): a batch polled and never committed, the instance
    ///     dropped, a new one opened with the previous cursor must produce it again.
    ///
    /// Records are compared by payload and id (not headers nor timestamps, which may
    /// change), one by one over those both runs produced; a failure names the first
    /// record that differs. A poll that returns nothing is repeated (20 polls, one
    /// poll_interval apart); a source with nothing to produce gets a warning that
    /// replay cannot be checked, not a failure. A trap or an error names the call.
    ///
    /// For a SINK: open; write a batch of 3 messages (ids, headers, JSON payloads with
    /// a `seq`), whose answer must be well-formed (a reject names messages of the
    /// batch, each once); write the same batch again (rule 3): it must be answered as
    /// the first time. Whether the sink writes a replay idempotently (no duplicate
    /// where it writes) only its destination can tell: the kit cannot check it.
    ///
    /// The component runs with plugin_config = {}, default limits and no grants, or,
    /// with --config and --key, with the plugin_config (and secrets), limits, grants
    /// and poll_interval of connector KEY of CONFIG. Prints one line per check (`ok`,
    /// `FAIL` or `warn`, the check, the rule of wit/source.wit or wit/sink.wit, what
    /// was observed) and a summary. Exits 0 when no check failed, 1 when one did, 2
    /// when the component could not be tested (unreadable, not a connector, not
    /// compiling, a bad config or key).
    #[command(
        verbatim_doc_comment,
        after_help = "Examples:\n  ferry test target/components/my_source.wasm\n  ferry test my_sink.wasm \
                      --config ferry.toml --key archive"
    )]
    Test {
        /// The component (.wasm).
        component: PathBuf,
        /// The configuration file to take the connector's settings from (with --key).
        #[arg(long, requires = "key")]
        config: Option<PathBuf>,
        /// The connector of --config to run the component as.
        #[arg(long, requires = "config")]
        key: Option<String>,
    },
    /// Write a new connector project, outside this repository, ready to build and run.
    ///
    /// Creates DIR/NAME (DIR is --path, by default the current directory) holding a
    /// Rust crate that depends on the ferry-guest SDK of the checkout this ferry was
    /// built from (by path; its README.md says how to depend on it by git), a
    /// src/lib.rs to start from (a source emits JSON records with a gap-free `seq`
    /// kept in its cursor; a sink writes every message it receives to its log and
    /// acknowledges), and a ferry.toml that runs it against the local log. With
    /// --lang python: the same connector as an app.py using the checkout's
    /// guest-sdk/python/ferry_guest.py (named by path in pyproject.toml's [tool.ferry]
    /// table), built with componentize-py. With --lang js: a package.json, source.js
    /// or sink.js (importing the checkout's guest-sdk/js/ferry-guest.js by absolute
    /// path) and a ferry.toml giving the JavaScript engine the memory it needs.
    /// Refuses to write into a directory that exists.
    #[command(
        after_help = "Examples:\n  ferry new source my-source --path ~/src\n  cd ~/src/my-source && ferry build \
                      && ferry run ferry.toml\n  ferry new transform my-transform --lang python --path ~/src"
    )]
    New {
        /// What it is: a source, a sink, or a transform (chained in a connector's `transforms`).
        kind: new::Kind,
        /// The connector's name: the crate's name, the directory's and the key in ferry.toml.
        name: String,
        /// The language: rust, python or js.
        #[arg(long, value_enum, default_value = "rust")]
        lang: new::Lang,
        /// The directory to create the connector's directory in.
        #[arg(long, value_name = "DIR", default_value = ".")]
        path: PathBuf,
        /// Write a Rust source that polls URL for JSON records (`?offset=N`), or a
        /// Rust sink that POSTs each batch to URL as NDJSON, through the SDK's HTTP
        /// helper (`ferry_guest::http`), with URL's host:port granted in its
        /// ferry.toml: the start of a connector for any HTTP API.
        #[arg(long, value_name = "URL")]
        http: Option<String>,
    },
    /// Build the connector project at PATH (a Rust crate, a Python or a JavaScript
    /// project) into a component and check it as `ferry run` would.
    ///
    /// PATH is a directory with a Cargo.toml whose library is a `cdylib`, in any
    /// workspace or none. The component is written to PATH/target/components/<lib>.wasm
    /// (and copied to --out if given); the compiler's files stay in PATH/target (or
    /// $CARGO_TARGET_DIR). Uses rustup's wasm32-wasip2 target when it is installed
    /// (`rustup target add wasm32-wasip2`), else the fallback toolchain that Ferry's
    /// scripts/setup-guest-toolchain installs (Debian's rustc-web building wasm32-wasip1,
    /// turned into a component with the WASI preview-1 adapter); the error says which
    /// is missing when neither is. FERRY_GUEST_TOOLCHAIN=standard or fallback forces
    /// one.
    ///
    /// A Python project is a directory with a pyproject.toml whose [tool.ferry] table
    /// says `kind = "source"` or `"sink"` (and optionally `guest_sdk`, the directory of
    /// ferry_guest.py, and `app`, the module exporting the connector, default app):
    /// built with componentize-py 0.25.1 (on PATH, or where Ferry's
    /// scripts/setup-python-guest installs it) against this checkout's wit/, into
    /// PATH/target/components/<project name, - as _>.wasm.
    ///
    /// A directory with a package.json (and no Cargo.toml) is a JavaScript connector:
    /// its `main` module, a source or a sink as `"ferry": {"kind": ...}` says, is
    /// bundled with rolldown into PATH/target/js/<name>.js and compiled with
    /// componentize-js 0.23.0 into PATH/target/components/<name>.wasm (`-` in the
    /// package's name becomes `_`). Both tools are the ones Ferry's
    /// scripts/setup-js-guest installs (in ~/.local/share/ferry/js-guest/), else
    /// found on PATH.
    ///
    /// Then prints whether the component is a source or a sink that ferry can run
    /// (what `ferry inspect` says), and exits 1 if it is neither.
    #[command(after_help = "Examples:\n  ferry build\n  ferry build ~/src/my-source --out my_source.wasm")]
    Build {
        /// The project's directory.
        #[arg(default_value = ".")]
        path: PathBuf,
        /// Also copy the component to this file.
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// Look at or reset committed cursors.
    State {
        #[command(subcommand)]
        command: StateCommand,
    },
    /// Work with config files: move from Iggy's connectors runtime.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
    /// Read the local log, the embedded delivery target; skip a record a sink cannot read.
    Log {
        #[command(subcommand)]
        command: LogCommand,
    },
    /// Show the connectors of the ferry running CONFIG (or of its last run).
    Status {
        /// The configuration file (TOML).
        config: PathBuf,
        /// Print the status file as JSON.
        #[arg(long)]
        json: bool,
    },
    /// A live table of the connectors of the ferry running CONFIG, refreshed in place.
    ///
    /// For each connector: its role, tenant and phase, messages and batches a second,
    /// messages delivered, NACKs, traps, restarts, messages dead-lettered and the last
    /// error; above them the ferry's pid and state and the totals. Rates are the change
    /// between two readings over the time between them, so the first screen shows `-`.
    ///
    /// The figures come from the HTTP API when CONFIG has an enabled [http] (GET /stats,
    /// with its api_key, over HTTPS trusting its tls.cert_file), else from the status
    /// file the running ferry keeps written (<state.path>/status.json, rewritten at most
    /// twice a second). If the API cannot be reached, top says so and reads the status
    /// file; a refused api_key is an error. The header says which is read.
    ///
    /// On a terminal the table is redrawn every --interval until `q` or Ctrl-C. Piped,
    /// or with --once or --iterations N, it prints that many snapshots (one by
    /// default when piped), separated by a blank line, and exits.
    #[command(after_help = "Examples:\n  ferry top ferry.toml\n  ferry top ferry.toml --interval 500ms\n  ferry top \
                      ferry.toml --iterations 2 --interval 2s > snapshot.txt")]
    Top {
        /// The configuration file (TOML) of the ferry to watch.
        config: PathBuf,
        /// Time between readings (e.g. `500ms`, `2s`).
        #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
        interval: Duration,
        /// Print this many snapshots, each --interval after the last, and exit.
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
        iterations: Option<u64>,
        /// Print one snapshot and exit (as --iterations 1).
        #[arg(long, conflicts_with = "iterations")]
        once: bool,
    },
    /// Compile components into the compile cache ahead of time, so that `ferry run`
    /// loads them rather than compile them.
    ///
    /// `ferry run` keeps what it compiles in the compile cache ([runtime]
    /// compile_cache, by default <state.path>/compiled) and loads it from there on the
    /// next start. This fills the cache beforehand, e.g. when deploying a new
    /// component: a Python or JavaScript guest takes seconds to compile. An entry
    /// serves only the same component bytes compiled for the same engine, so give the
    /// CONFIG `ferry run` will use: its engine meters fuel if any enabled connector
    /// sets limits.fuel, and its compile_timeout and compile_memory bound the
    /// compiler. Prints, for each component, whether it was already cached (a hit) or
    /// compiled now, how long that took, and the entry's path. Exits 1 if any
    /// component could not be compiled or cached.
    ///
    /// Whoever can write the cache directory can run native code in ferry: keep it
    /// writable by ferry's user alone (ferry will not use it otherwise).
    #[command(
        after_help = "Examples:\n  ferry compile connectors/py_source.wasm --config ferry.toml\n  ferry compile \
                            *.wasm --cache /var/cache/ferry --config ferry.toml"
    )]
    Compile {
        /// The components (.wasm) to compile.
        #[arg(required = true, value_name = "COMPONENT")]
        components: Vec<PathBuf>,
        /// The configuration `ferry run` will use: its compile cache, compile bounds
        /// and engine settings. Without it: the default engine (no fuel metering).
        #[arg(long)]
        config: Option<PathBuf>,
        /// Fill this cache directory rather than the config's [runtime] compile_cache.
        #[arg(long, value_name = "DIR")]
        cache: Option<PathBuf>,
    },
    /// (Internal) compile the component on stdin, write the artifact on stdout.
    ///
    /// `ferry run` and `ferry inspect` run this in a child process, so that a
    /// component built to exhaust the compiler is stopped at `--memory` bytes.
    #[command(name = "compile-component", hide = true)]
    CompileComponent {
        /// The cap on the process's data memory, in bytes.
        #[arg(long)]
        memory: u64,
        /// Compile for an engine that meters fuel.
        #[arg(long)]
        fuel: bool,
    },
}

#[derive(Subcommand)]
enum StateCommand {
    /// Print committed cursors (all connectors of CONFIG, or one). Works while ferry runs.
    Show {
        config: PathBuf,
        /// Only this connector.
        key: Option<String>,
        /// One JSON object per connector.
        #[arg(long)]
        json: bool,
    },
    /// Check every state database of CONFIG (and the local log's topic files) whole.
    ///
    /// SQLite's full integrity check, page by page: `ferry run` checks a file when it
    /// takes it, `state show` and `log read` only read what they show. Prints each
    /// file and `ok` or what is wrong; exits 1 if any is damaged. Works while ferry runs.
    Check { config: PathBuf },
    /// Forget a connector's committed cursor: it starts from scratch next time.
    ///
    /// Refused while a ferry process runs the connector. The old cursor is kept, not
    /// deleted: in the `reset` table of the state directory's cursors.db (and a state
    /// file of an older ferry is renamed with a .reset-<time> suffix).
    Reset {
        config: PathBuf,
        key: String,
        /// Really do it.
        #[arg(long)]
        yes: bool,
    },
}

#[derive(Subcommand)]
enum ConfigCommand {
    /// Print the Ferry config an Iggy connectors runtime file means.
    ///
    /// CONFIG is the runtime's own file (`[iggy]`, `[http]`, `[state]`, `[connectors]`
    /// with the local provider's `config_dir`); the connector files of that directory
    /// (their active versions) become `[[sources]]` and `[[sinks]]`, each native
    /// plugin's `path` the component of the same connector. `ferry run CONFIG` runs
    /// the same config without this step; this prints it to move to.
    FromIggy { config: PathBuf },
}

#[derive(Subcommand)]
enum LogCommand {
    /// Print records as JSON lines: offset, id, headers, payload, timestamps.
    ///
    /// The payload is printed as text when it is UTF-8 (`payload`), else as base64
    /// (`payload_base64`). Works while ferry runs.
    Read {
        config: PathBuf,
        /// The stream (default: the only one in CONFIG).
        #[arg(long)]
        stream: Option<String>,
        /// The topic (default: the only one in CONFIG).
        #[arg(long)]
        topic: Option<String>,
        /// First offset to print.
        #[arg(long, default_value_t = 0)]
        from: u64,
        /// Print at most this many records.
        #[arg(long)]
        limit: Option<u64>,
    },
    /// List the topics in the local log and how many records each holds.
    Topics { config: PathBuf },
    /// Move a sink's position past a record it cannot read (its stored headers do not
    /// parse), where the sink stopped for want of dead_letters to take it.
    ///
    /// Only that record: the sink's position in the topic must be OFFSET, and the
    /// record there must be unreadable. The record stays in the log (nothing is
    /// deleted); the position past it is committed as the sink's next generation.
    /// Refused while a ferry process runs the sink.
    Skip {
        config: PathBuf,
        /// The sink's key.
        #[arg(long)]
        key: String,
        #[arg(long)]
        stream: String,
        #[arg(long)]
        topic: String,
        /// The offset of the record to skip.
        #[arg(long)]
        offset: u64,
    },
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Command::CompileComponent { memory, fuel } = cli.command {
        // A child of `run`: no logging set up, nothing but the compile.
        return ferry_runtime::compile::child_main(memory, fuel);
    }
    // `run` is a service and logs its progress; the other commands print their
    // answer on stdout and only log problems.
    // PostgreSQL's notices ("relation already exists, skipping") come from the
    // driver's connection task, outside any connector's span: without a key to say
    // whose they are, they are noise unless asked for.
    let default_level =
        if matches!(cli.command, Command::Run { .. }) { "info,tokio_postgres::connection=warn" } else { "warn" };
    let filter = EnvFilter::try_from_env("FERRY_LOG").unwrap_or_else(|_| EnvFilter::new(default_level));
    // `run` reads its config before it logs anything, so that its first line is
    // already in the format the config asks for; a config it cannot read is said in
    // text.
    let run_config = match &cli.command {
        Command::Run { config } => Some(Config::load(config)),
        _ => None,
    };
    let format = match &run_config {
        Some(Ok(config)) => config.runtime.log_format,
        _ => LogFormat::Text,
    };
    let logs = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    match format {
        LogFormat::Text => logs.with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr())).init(),
        LogFormat::Json => logs.json().with_current_span(true).with_span_list(false).init(),
    }

    let result = match cli.command {
        Command::Run { .. } => match run_config.expect("read above for `run`") {
            Ok(config) => run::run(config),
            Err(error) => Err(error.into()),
        },
        Command::Inspect { component, wit, config, key } => {
            let grants_of = config.as_deref().zip(key.as_deref());
            inspect::inspect(&component, wit, grants_of)
        }
        Command::Test { component, config, key } => {
            return test::test(&component, config.as_deref().zip(key.as_deref()));
        }
        Command::New { kind, name, lang, path, http } => new::new(kind, &name, lang, &path, http.as_deref()),
        Command::Build { path, out } => build::build(&path, out.as_deref()),
        Command::State { command: StateCommand::Show { config, key, json } } => {
            state::show(&config, key.as_deref(), json)
        }
        Command::State { command: StateCommand::Reset { config, key, yes } } => state::reset(&config, &key, yes),
        Command::State { command: StateCommand::Check { config } } => state::check(&config),
        Command::Log { command: LogCommand::Read { config, stream, topic, from, limit } } => {
            log::read(&config, stream.as_deref(), topic.as_deref(), from, limit)
        }
        Command::Log { command: LogCommand::Topics { config } } => log::topics(&config),
        Command::Log { command: LogCommand::Skip { config, key, stream, topic, offset } } => {
            log::skip(&config, &key, (&stream, &topic), offset)
        }
        Command::Config { command: ConfigCommand::FromIggy { config } } => config::from_iggy(&config),
        Command::Status { config, json } => status::status(&config, json),
        Command::Top { config, interval, iterations, once } => {
            top::top(&config, interval, if once { Some(1) } else { iterations })
        }
        Command::Compile { components, config, cache } => {
            compile::compile(&components, config.as_deref(), cache.as_deref())
        }
        Command::CompileComponent { .. } => unreachable!("handled above"),
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

use ferry_engine::status::format_micros;
