//! The `ferry` command line. Everything it does lives in the `ferry` library; this
//! binary parses arguments, sets up logging and prints.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
