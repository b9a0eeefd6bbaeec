//! `susurrus info`.

use crate::error::Result;

#[derive(Debug, clap::Args)]
pub struct InfoArgs {}

pub fn run(_args: &InfoArgs) -> Result<()> {
    Err(crate::Error::Usage("not built yet".into()))
}
