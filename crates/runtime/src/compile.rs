//! Compiling a component an operator was handed, bounded in time and memory.
//!
//! A component is code from a tenant, and compiling it is work the host does on the
//! tenant's behalf before any sandbox limit applies. A compile bomb is small: one
//! function with 20,000 locals (425 KB) makes Cranelift allocate 7.7 GB and abort the
//! whole process after a minute; 100,000 tiny functions take 20 s and 1.2 GB. An
//! in-process compile can be neither interrupted nor capped, so `ferry run` compiles
//! each component in a child process ([`Compiler::Isolated`]): the child runs this
//! same binary (`ferry compile-component`, a hidden command), its data memory is
//! capped by `RLIMIT_DATA` (`[runtime] compile_memory`), it is killed past
//! `[runtime] compile_timeout`, and what it hands back is the compiled artifact,
//! which the parent loads. A bomb fails that one component with an error saying
//! which bound it hit.
//!
//! The child is trusted code (ours) working on untrusted input, exactly as the
//! compiler is in-process: isolating it bounds what the input can cost, not what a
//! compiler bug could do.
//!
//! [`Compiler::InProcess`] remains for components the caller trusts (tests,
//! benchmarks, tools built from this workspace).

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use ferry_contract::settings::ByteSize;

/// How components get compiled.
#[derive(Debug, Clone, Default)]
pub enum Compiler {
    /// In this process, unbounded: only for components the caller trusts.
    #[default]
    InProcess,
    /// In a child process running `exe compile-component`, bounded.
    Isolated(Isolation),
}

/// The child process of an isolated compile, and its bounds.
#[derive(Debug, Clone)]
pub struct Isolation {
    /// The `ferry` binary (the child runs its hidden `compile-component` command).
    pub exe: PathBuf,
    pub timeout: Duration,
    /// Bytes of data memory the child may map (`RLIMIT_DATA`).
    pub memory: u64,
}

/// The name of the hidden command the child runs.
pub const CHILD_COMMAND: &str = "compile-component";

/// Why an isolated compile produced nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompileFailure {
    #[error(
        "compiling took longer than [runtime] compile_timeout ({timeout:?}) and was stopped; a component that \
         takes this long is likely built to exhaust the compiler (or raise compile_timeout if it is legitimate)"
    )]
    TimedOut { timeout: Duration },
    #[error(
        "compiling needed more memory than [runtime] compile_memory ({}) and was stopped; a component that \
         needs this much is likely built to exhaust the compiler (or raise compile_memory)",
        ByteSize(*memory)
    )]
    OutOfMemory { memory: u64 },
    /// The compiler refused the component.
    #[error("{0}")]
    Invalid(String),
    /// The child could not be run, or died for another reason.
    #[error("the compiler process failed: {0}")]
    Crashed(String),
}

impl Isolation {
    /// Compile `wasm` in a child process; the artifact [`wasmtime::Component::deserialize`]
    /// takes, made by an engine with the same `fuel` setting.
    pub async fn compile(&self, wasm: &[u8], fuel: bool) -> Result<Vec<u8>, CompileFailure> {
        let crashed = |what: &str, e: std::io::Error| CompileFailure::Crashed(format!("{what}: {e}"));
        let mut command = tokio::process::Command::new(&self.exe);
        command
            .arg(CHILD_COMMAND)
            .arg("--memory")
            .arg(self.memory.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if fuel {
            command.arg("--fuel");
        }
        let mut child = command.spawn().map_err(|e| crashed(&format!("cannot run {}", self.exe.display()), e))?;
        tracing::info!(pid = child.id(), "compiling in a child process");
        let (mut stdin, mut stdout, mut stderr) = (
            child.stdin.take().expect("piped"),
            child.stdout.take().expect("piped"),
            child.stderr.take().expect("piped"),
        );
        let talk = async {
            // Feed and drain at once: a child blocked on a full pipe would never finish.
            let feed = async {
                // A child that died early closes its stdin: its exit status says why.
                let _ = stdin.write_all(wasm).await;
                drop(stdin);
            };
            let (mut artifact, mut errors) = (Vec::new(), Vec::new());
            let (_, out, err) = tokio::join!(feed, stdout.read_to_end(&mut artifact), stderr.read_to_end(&mut errors));
            out.map_err(|e| crashed("reading the compiled artifact", e))?;
            err.map_err(|e| crashed("reading the compiler's errors", e))?;
            let status = child.wait().await.map_err(|e| crashed("waiting for the compiler", e))?;
            Ok::<_, CompileFailure>((status, artifact, String::from_utf8_lossy(&errors).into_owned()))
        };
        let (status, artifact, errors) = match tokio::time::timeout(self.timeout, talk).await {
            Ok(result) => result?,
            // Dropping `talk` drops the child, which kills it (`kill_on_drop`).
            Err(_) => return Err(CompileFailure::TimedOut { timeout: self.timeout }),
        };
        judge(status, artifact, errors.trim(), self.memory)
    }
}

/// What the child's exit says.
fn judge(status: ExitStatus, artifact: Vec<u8>, errors: &str, memory: u64) -> Result<Vec<u8>, CompileFailure> {
    use std::os::unix::process::ExitStatusExt;
    if status.success() {
        return Ok(artifact);
    }
    // Rust reports a failed allocation and aborts; a compiler that ran into the
    // limit through another path panics or is killed with the same words.
    if errors.contains("memory allocation of")
        || errors.contains("capacity overflow")
        || errors.contains("out of memory")
    {
        return Err(CompileFailure::OutOfMemory { memory });
    }
    match (status.code(), status.signal()) {
        (Some(EXIT_INVALID), _) => Err(CompileFailure::Invalid(errors.to_string())),
        (_, Some(signal)) => Err(CompileFailure::Crashed(format!("killed by signal {signal}: {errors}"))),
        (code, None) => Err(CompileFailure::Crashed(format!("exit code {code:?}: {errors}"))),
    }
}

/// The child's exit code when the compiler refused the component (anything else is a
/// crash).
const EXIT_INVALID: i32 = 3;

/// The child: cap this process's memory, read a component on stdin, write the
/// artifact on stdout. Runs as `ferry compile-component --memory BYTES [--fuel]`.
pub fn child_main(memory: u64, fuel: bool) -> std::process::ExitCode {
    use std::process::ExitCode;
    if let Err(e) = limit_memory(memory) {
        eprintln!("cannot limit the compiler's memory: {e}");
        return ExitCode::FAILURE;
    }
    let mut wasm = Vec::new();
    if let Err(e) = std::io::stdin().lock().read_to_end(&mut wasm) {
        eprintln!("cannot read the component: {e}");
        return ExitCode::FAILURE;
    }
    let artifact = match super::engine::compiling_engine(fuel).and_then(|engine| engine.precompile_component(&wasm)) {
        Ok(artifact) => artifact,
        Err(e) => {
            eprintln!("{e:#}");
            return ExitCode::from(EXIT_INVALID as u8);
        }
    };
    match std::io::stdout().lock().write_all(&artifact) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cannot write the compiled artifact: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Cap the data memory of this process (heap and private mappings: what a compiler
/// allocates), and write no core file when it aborts at the cap.
fn limit_memory(bytes: u64) -> std::io::Result<()> {
    let set = |resource, limit: u64| {
        let limit = libc::rlimit { rlim_cur: limit as libc::rlim_t, rlim_max: limit as libc::rlim_t };
        // SAFETY: setrlimit reads the struct it is given and nothing else.
        if unsafe { libc::setrlimit(resource, &limit) } == 0 { Ok(()) } else { Err(std::io::Error::last_os_error()) }
    };
    set(libc::RLIMIT_CORE, 0)?;
    set(libc::RLIMIT_DATA, bytes)
}
