//! `susurrus bench`.

use crate::error::Result;

#[derive(Debug, clap::Args)]
pub struct BenchArgs {}

pub fn run(_args: &BenchArgs) -> Result<()> {
    Err(crate::Error::Usage("not built yet".into()))
}
