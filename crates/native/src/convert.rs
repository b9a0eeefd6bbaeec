//! `susurrus convert`.

use crate::error::Result;

#[derive(Debug, clap::Args)]
pub struct ConvertArgs {}

pub fn run(_args: &ConvertArgs) -> Result<()> {
    Err(crate::Error::Usage("not built yet".into()))
}
