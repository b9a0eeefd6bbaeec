//! The `susurrus` binary: parses the command line, runs it, prints the result.

use std::process::ExitCode;

use clap::Parser;
use susurrus_cli::{Cli, run};

fn main() -> ExitCode {
    // SAFETY: the first thing the program does, before any thread exists.
    unsafe { susurrus_cli::backend::prepare_environment() };
    let cli = Cli::parse();
    match run(&cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            if e.is_reported() {
                eprintln!("susurrus: error: {e}");
            }
            ExitCode::from(e.exit_code())
        }
    }
}
