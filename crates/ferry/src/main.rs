//! The `ferry` binary: all of it is [`ferry::cli`].

fn main() -> std::process::ExitCode {
    ferry::cli::main()
}
