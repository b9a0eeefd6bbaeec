//! `susurrus demo`: one Whisper-tiny-shaped encoder layer built, optimised and planned, with
//! every stage printed (the graph as built, after the passes, the arena plan).

use clap::Args;
use susurrus_core::{passes, plan};
use susurrus_whisper::graphs::demo::{EncoderLayerShape, encoder_layer};

use crate::error::Result;
use crate::output::print;

/// The most positions a Whisper encoder layer sees: one 30 s window of audio.
const MAX_POSITIONS: i64 = 1500;

/// Arguments of `susurrus demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Sequence positions of the layer, 1 to 1500 (a Whisper encoder sees at most 1500, one
    /// 30 s window); fewer give a smaller plan. Default: 1500.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=MAX_POSITIONS))]
    pub positions: Option<u16>,
}

/// Runs `susurrus demo`.
pub fn run(args: &DemoArgs) -> Result<()> {
    print(&demo(args)?)
}

/// Builds, optimises and plans one encoder layer, and renders every stage.
pub fn demo(args: &DemoArgs) -> susurrus_core::Result<String> {
    let mut shape = EncoderLayerShape::WHISPER_TINY;
    if let Some(positions) = args.positions {
        shape.positions = usize::from(positions);
    }
    let mut graph = encoder_layer(&shape)?;
    let built = graph.to_string();
    let fired = passes::optimize(&mut graph)?;
    let optimised = graph.to_string();
    let plan = plan::plan(graph)?;
    let fired = if fired.is_empty() { "none".to_string() } else { fired.join(", ") };
    Ok(format!(
        "== encoder layer as built ==\n{built}\n\n\
         == optimised (passes that changed it: {fired}) ==\n{optimised}\n\n\
         == memory plan ==\n{}\n\n{}\n",
        plan.report,
        plan.placement_table()
    ))
}
