//! The `ferry` command line, for the suite to run as a process.

fn main() -> std::process::ExitCode {
    ferry::cli::main()
}
