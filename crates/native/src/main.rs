//! The `susurrus` binary: parses the command line, runs it, prints the result.

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;
use susurrus_native::{Cli, run};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let printed = run(&cli).map_err(|e| e.to_string()).and_then(|text| {
        std::io::stdout().lock().write_all(text.as_bytes()).map_err(|e| format!("writing output: {e}"))
    });
    match printed {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("susurrus: error: {msg}");
            ExitCode::FAILURE
        }
    }
}
