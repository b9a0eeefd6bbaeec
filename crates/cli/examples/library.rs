use std::ops::ControlFlow;
use std::path::Path;

use susurrus_cpu::FastCpuBackend;
use susurrus_whisper::{Event, TranscribeOptions, Whisper};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, model_dir, audio_path] = args.as_slice() else {
        return Err("usage: transcribe MODEL_DIR AUDIO_FILE".into());
    };
    // WAV, FLAC, MP3, M4A, MP4, WebM, OGG and more, decoded to 16 kHz mono f32 samples.
    let audio = susurrus_cli::audio::decode_file(Path::new(audio_path))?;
    // The fast CPU backend, one thread per core (what `susurrus --backend cpu` runs).
    let backend = FastCpuBackend::new(None)?;
    let mut whisper = pollster::block_on(Whisper::load_dir(Box::new(backend), Path::new(model_dir)))?;
    // faster-whisper's defaults: beam search of 5, temperature fallback, timestamps.
    let options = TranscribeOptions::default();
    let transcript = pollster::block_on(whisper.transcribe(&audio.samples, &options, &mut |event: Event| {
        if let Event::Segment(s) = event {
            println!("[{:.2} -> {:.2}] {}", s.start, s.end, s.text);
        }
        ControlFlow::Continue(())
    }))?;
    eprintln!("{:.1} s of audio, language {}", transcript.duration, transcript.language);
    Ok(())
}
