//! `susurrus transcribe`.

use crate::error::Result;

#[derive(Debug, clap::Args)]
pub struct TranscribeArgs {}

pub fn run(_args: &TranscribeArgs) -> Result<()> {
    Err(crate::Error::Usage("not built yet".into()))
}
