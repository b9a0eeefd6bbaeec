//! The `susurrus` binary: parses the command line, runs it, prints the result.

use std::process::ExitCode;

use clap::Parser;
use susurrus_native::{Cli, run};

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(&cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("susurrus: error: {e}");
            ExitCode::FAILURE
        }
    }
}
