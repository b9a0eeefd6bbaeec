//! Going on in a new process when the GPU is lost to this one.
//!
//! A CUDA context that meets a sticky error (a fault in a kernel, an Xid reset, an ECC error)
//! cannot be used again, nor can the process open another: the driver fails every later call
//! with the same error. So `transcribe`, when the device is lost to it
//! ([`susurrus_core::Error::DeviceLostToProcess`]), writes where it stands to a private
//! temporary folder — the file in work (its 16 kHz samples), the segments reported, the seek
//! loop's last checkpoint, the batch's failures so far — starts the same command again with
//! `--resume-from` that folder, waits for it and exits with its status. The new process opens
//! the GPU afresh, loads the model and goes on from the checkpoint: the transcript is the one
//! an undisturbed run gives, and the files after it are transcribed as before. Standard output
//! and error are shared, so the user sees one run (and a warning saying what happened).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::process::Command;

use serde::{Deserialize, Serialize};
use susurrus_whisper::{Audio, Resume, Segment};

use crate::audio::Samples;
use crate::error::{Error, Result};

/// The flag that hands a run over (hidden from `--help`).
pub const FLAG: &str = "--resume-from";

/// The state file in a hand-over folder.
const STATE: &str = "state.json";
/// The samples of the file in work in a hand-over folder: little-endian f32, 16 kHz.
const SAMPLES: &str = "samples.f32";

/// Where a batch stands when its process lost the GPU.
#[derive(Debug, Serialize, Deserialize)]
pub struct State {
    /// The file in work: an index into the command's files.
    pub file: usize,
    /// Its samples' count (the folder's `samples.f32`).
    pub samples: usize,
    /// Its segments reported so far (printed, when they go to standard output as decoded).
    pub segments: Vec<Segment>,
    /// Where its transcription stands, and the devices lost in it so far.
    pub resume: Resume,
    /// Files of the batch that failed before it.
    pub failed: usize,
    /// Whether a file's output went to standard output yet (the separating line).
    pub printed: bool,
}

/// A hand-over read back: the state and the file in work's samples.
pub struct Taken {
    pub state: State,
    pub samples: Samples,
}

/// Writes `state` and `samples` to a new private folder, runs this command again with
/// [`FLAG`] naming it, and returns its exit status once it ends (the folder is removed then).
pub fn continue_in_new_process(state: &State, samples: &Samples) -> Result<u8> {
    let dir = tempfile::Builder::new()
        .prefix("susurrus-handover-")
        .tempdir()
        .map_err(|e| Error::io(&std::env::temp_dir(), e))?;
    write_samples(&dir.path().join(SAMPLES), samples)?;
    let state_path = dir.path().join(STATE);
    let json = serde_json::to_vec(state).map_err(|e| Error::Usage(format!("cannot write the hand-over state: {e}")))?;
    std::fs::write(&state_path, json).map_err(|e| Error::io(&state_path, e))?;

    let program = std::env::current_exe().map_err(|e| Error::io(Path::new("the susurrus program"), e))?;
    let status = Command::new(&program)
        .args(arguments(std::env::args_os().skip(1).collect(), dir.path()))
        .status()
        .map_err(|e| Error::io(&program, e))?;
    // Ended by a signal: the shell's 128 + signal number.
    #[cfg(unix)]
    let signalled = std::os::unix::process::ExitStatusExt::signal(&status).map(|s| 128 + s);
    #[cfg(not(unix))]
    let signalled = None;
    Ok(status.code().or(signalled).map_or(1, |code| code.clamp(0, 255) as u8))
}

/// The command's arguments with [`FLAG`] naming `dir` last (in place of the one a handed-over
/// run was started with).
fn arguments(mut args: Vec<std::ffi::OsString>, dir: &Path) -> Vec<std::ffi::OsString> {
    if args.len() >= 2 && args[args.len() - 2] == FLAG {
        args.truncate(args.len() - 2);
    }
    args.extend([FLAG.into(), dir.as_os_str().to_owned()]);
    args
}

/// Reads a hand-over folder written by [`continue_in_new_process`].
pub fn take(dir: &Path) -> Result<Taken> {
    let state_path = dir.join(STATE);
    let json = std::fs::read(&state_path).map_err(|e| Error::io(&state_path, e))?;
    let state: State = serde_json::from_slice(&json)
        .map_err(|e| Error::Usage(format!("{}: not a hand-over state: {e}", state_path.display())))?;
    let samples_path = dir.join(SAMPLES);
    let file = File::open(&samples_path).map_err(|e| Error::io(&samples_path, e))?;
    let bytes = file.metadata().map_err(|e| Error::io(&samples_path, e))?.len();
    if bytes != state.samples as u64 * 4 {
        return Err(Error::Usage(format!(
            "{}: {bytes} bytes where the hand-over state says {} samples",
            samples_path.display(),
            state.samples
        )));
    }
    Ok(Taken { samples: Samples::from_file(file, state.samples), state })
}

/// The samples, a block at a time.
fn write_samples(path: &Path, samples: &Samples) -> Result<()> {
    let file = File::create(path).map_err(|e| Error::io(path, e))?;
    let mut writer = BufWriter::with_capacity(1 << 20, file);
    const BLOCK: usize = 1 << 18;
    for start in (0..samples.len()).step_by(BLOCK) {
        let block = samples.read_range(start, (start + BLOCK).min(samples.len()))?;
        let bytes: Vec<u8> = block.iter().flat_map(|s| s.to_le_bytes()).collect();
        writer.write_all(&bytes).map_err(|e| Error::io(path, e))?;
    }
    writer.flush().map_err(|e| Error::io(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flag_is_added_once_and_replaced_in_a_second_hand_over() {
        let args = |a: &[&str]| a.iter().map(std::ffi::OsString::from).collect::<Vec<_>>();
        let first = arguments(args(&["transcribe", "a.wav", "b.wav"]), Path::new("/tmp/h1"));
        assert_eq!(first, args(&["transcribe", "a.wav", "b.wav", FLAG, "/tmp/h1"]));
        assert_eq!(arguments(first, Path::new("/tmp/h2")), args(&["transcribe", "a.wav", "b.wav", FLAG, "/tmp/h2"]));
    }

    #[test]
    fn samples_and_state_travel_whole() {
        let dir = tempfile::tempdir().unwrap();
        let values: Vec<f32> = (0..300_000).map(|i| (i as f32 * 0.001).sin()).collect();
        let mut samples = Samples::new();
        crate::audio::SampleSink::push(&mut samples, &values).unwrap();
        let samples = crate::audio::SampleSink::finish(samples).unwrap();
        write_samples(&dir.path().join(SAMPLES), &samples).unwrap();
        let state = State {
            file: 2,
            samples: values.len(),
            segments: Vec::new(),
            resume: Resume { checkpoint: None, devices_lost: 1 },
            failed: 1,
            printed: true,
        };
        std::fs::write(dir.path().join(STATE), serde_json::to_vec(&state).unwrap()).unwrap();
        let taken = take(dir.path()).unwrap();
        assert_eq!((taken.state.file, taken.state.failed, taken.state.printed), (2, 1, true));
        assert_eq!(taken.samples.read_range(0, values.len()).unwrap(), values);

        std::fs::write(dir.path().join(SAMPLES), [0u8; 8]).unwrap();
        let error = take(dir.path()).err().unwrap().to_string();
        assert!(error.ends_with("samples.f32: 8 bytes where the hand-over state says 300000 samples"), "{error}");
    }
}
