//! The package's streaming decoder in a dedicated worker (where the package's transcriptions
//! run: `FileReaderSync`, the origin's private file system and WebCodecs are there), in
//! headless Chromium: the fixtures of tests/audio/make_audio.sh decode to what the native
//! command's decoder gives (checked against the same independent references, with the same
//! tolerances as crates/cli/tests/audio.rs), damaged files keep the audio before the damage
//! with a warning, a long recording's samples go to a file and not into memory, and a
//! transcription of a file equals one of its samples. Run with `wasm-pack test --headless --chrome`.
#![cfg(target_arch = "wasm32")]

mod support;

use js_sys::{Array, Float32Array, Uint8Array};
use support::*;
use susurrus_testkit::signal::{correlation, energy, f32_samples, max_abs_diff, wav_s16_samples};
use susurrus_web::stream::{Bytes, Decoded, Decoding, JsSamples, decode};
use susurrus_whisper::Audio;
use susurrus_whisper::audio::{IN_MEMORY, SampleSink};
use wasm_bindgen::prelude::*;
use wasm_bindgen_test::{wasm_bindgen_test, wasm_bindgen_test_configure};
use web_sys::Blob;

wasm_bindgen_test_configure!(run_in_dedicated_worker);

macro_rules! fixture {
    ($name:literal) => {
        include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/audio/", $name)).as_slice()
    };
}

/// The fixture's audio decoded into memory (from its bytes in JavaScript memory).
async fn decoded(name: &str, bytes: &[u8]) -> Decoded<Vec<f32>> {
    match decode(Bytes::Array(Uint8Array::from(bytes)), Vec::new()).await {
        Ok(Decoding::Decoded(d)) => d,
        Ok(Decoding::Unsupported(why)) => panic!("{name}: unsupported: {why}"),
        Err(e) => panic!("{name}: {e}"),
    }
}

fn blob(parts: &[&JsValue]) -> Blob {
    Blob::new_with_u8_array_sequence(&parts.iter().collect::<Array>()).unwrap()
}

#[wasm_bindgen_test]
async fn lossless_files_decode_to_their_exact_samples() {
    let pcm = wav_s16_samples(fixture!("speech_16k_s16.wav"));
    assert_eq!(pcm.len(), 44_103);
    // WAV and FLAC are decoded in the module, by the decoders the command uses.
    for (name, bytes, format) in [
        ("speech_16k_s16.wav", fixture!("speech_16k_s16.wav"), "wav"),
        ("speech_16k.flac", fixture!("speech_16k.flac"), "flac"),
        ("speech_16k.aiff", fixture!("speech_16k.aiff"), "aiff"),
        ("speech_alac.caf", fixture!("speech_alac.caf"), "caf/alac"),
        ("speech_alac.m4a", fixture!("speech_alac.m4a"), "mp4/alac"),
        ("speech_flac.mkv", fixture!("speech_flac.mkv"), "matroska/flac"),
    ] {
        let d = decoded(name, bytes).await;
        assert_eq!(d.format, format, "{name}");
        assert!(d.warnings.is_empty(), "{name}: {:?}", d.warnings);
        assert!(d.samples == pcm, "{name}: the samples differ (max {:e})", max_abs_diff(&d.samples, &pcm));
    }
}

#[wasm_bindgen_test]
async fn other_rates_and_channels_resample_to_the_ideal_16khz_signal() {
    let mono = f32_samples(fixture!("ref_tone_mono_16k.f32"));
    let stereo = f32_samples(fixture!("ref_tone_stereo_16k.f32"));
    for (name, bytes, ideal) in [
        ("tone_8k_s16.wav", fixture!("tone_8k_s16.wav"), &mono),
        ("tone_48k_s16.wav", fixture!("tone_48k_s16.wav"), &mono),
        ("tone_44k1_stereo_s16.wav", fixture!("tone_44k1_stereo_s16.wav"), &stereo),
    ] {
        let d = decoded(name, bytes).await;
        assert_eq!(d.samples.len(), 8000, "{name}");
        let err = max_abs_diff(&d.samples, ideal);
        assert!(err < 1e-4, "{name}: max error {err:e}");
    }
}

/// The browser's decoders, with the encoder delay and padding symphonia's readers mark cut as
/// natively: the native command's lengths (MP3's from its LAME header, Vorbis's from its last
/// granule position) at zero lag. Opus at 24 kbit/s keeps less of the waveform: measured 0.969
/// at a lag of one 16 kHz sample (62 µs), as the native command's decoder (libopus's output)
/// gives it too.
#[wasm_bindgen_test]
async fn lossy_speech_matches_the_original_in_shape_timing_and_level() {
    let original = wav_s16_samples(fixture!("speech_16k_s16.wav"));
    for (name, bytes, format, len, lags, least) in [
        ("speech_44k1_stereo.mp3", fixture!("speech_44k1_stereo.mp3"), "mp3", 44_104, 0..=0, 0.99),
        ("speech_22k05.mp3", fixture!("speech_22k05.mp3"), "mp3", 44_104, 0..=0, 0.99),
        ("speech_48k_stereo.ogg", fixture!("speech_48k_stereo.ogg"), "ogg/vorbis", 44_118, 0..=0, 0.99),
        ("speech_opus.ogg", fixture!("speech_opus.ogg"), "ogg/opus", 44_103, -1..=1, 0.95),
        // MP4 and Matroska as natively: AAC with the edit list applied (the index before or
        // after the media data; a video's first audio track), Opus with WebM's end padding.
        ("speech_44k1_stereo.m4a", fixture!("speech_44k1_stereo.m4a"), "mp4/aac", 44_096, 0..=0, 0.99),
        ("speech_moov_last.m4a", fixture!("speech_moov_last.m4a"), "mp4/aac", 44_096, 0..=0, 0.99),
        ("video_two_audio_tracks.mp4", fixture!("video_two_audio_tracks.mp4"), "mp4/aac", 44_096, 0..=0, 0.99),
        ("speech_opus.webm", fixture!("speech_opus.webm"), "matroska/opus", 44_376, -1..=1, 0.95),
        ("video_opus.webm", fixture!("video_opus.webm"), "matroska/opus", 44_376, -1..=1, 0.95),
    ] {
        let d = decoded(name, bytes).await;
        assert_eq!((d.format.as_str(), d.samples.len()), (format, len), "{name}");
        assert!(d.warnings.is_empty(), "{name}: {:?}", d.warnings);
        let best = (-20..=20)
            .max_by(|&a, &b| correlation(&d.samples, &original, a).total_cmp(&correlation(&d.samples, &original, b)));
        let best = best.unwrap();
        let at_best = correlation(&d.samples, &original, best);
        assert!(lags.contains(&best), "{name}: best aligned at lag {best}");
        assert!(at_best >= least, "{name}: correlation {at_best}");
        let db = 10.0 * (energy(&d.samples) / energy(&original)).log10();
        assert!(db.abs() < 1.0, "{name}: level differs by {db} dB");
    }
}

/// Raw AAC (ADTS) states no delay: as natively (and as FFmpeg decodes it), the encoder's 1,024
/// frames at 22.05 kHz stay at the start, 743 samples at 16 kHz, and 61 packets give 45,326.
#[wasm_bindgen_test]
async fn raw_aac_keeps_the_encoders_delay_as_natively() {
    let original = wav_s16_samples(fixture!("speech_16k_s16.wav"));
    let d = decoded("speech_22k05.aac", fixture!("speech_22k05.aac")).await;
    assert_eq!((d.format.as_str(), d.samples.len()), ("aac", 45_326));
    let at_delay = correlation(&d.samples, &original, 743);
    assert!(at_delay >= 0.99, "correlation {at_delay} after the delay");
}

#[wasm_bindgen_test]
async fn damaged_files_keep_the_audio_before_the_damage_with_a_warning() {
    let cut = "it looks truncated; the audio before the cut is transcribed";
    let d = decoded("truncated_speech.wav", fixture!("truncated_speech.wav")).await;
    assert_eq!(d.warnings, [format!("the file ends inside a packet at byte 20001, after 0.624 s of audio: {cut}")]);
    assert_eq!(d.samples, wav_s16_samples(fixture!("speech_16k_s16.wav"))[..d.samples.len()]);
    // The header of the cut frame, left behind the last whole one, tells (as natively).
    let d = decoded("truncated_speech.mp3", fixture!("truncated_speech.mp3")).await;
    assert_eq!(d.warnings, [format!("the file ends inside a packet at byte 20324, after 1.621 s of audio: {cut}")]);
    let flac = fixture!("speech_16k.flac");
    let d = decoded("cut.flac", &flac[..flac.len() * 6 / 10]).await;
    assert_eq!(d.warnings, [format!("the file ends inside a packet at byte 32991, after 1.224 s of audio: {cut}")]);
    let whole = wav_s16_samples(fixture!("speech_16k_s16.wav"));
    assert!(d.samples == whole[..d.samples.len()], "the audio before the cut is exact");
    // Cut MP4 (its index first) and WebM: the audio up to the cut, as the whole file gives it but
    // for the last packet's overlap with the missing one (64 ms).
    for (name, bytes, of, whole) in [
        (
            "truncated_44k1_stereo.m4a",
            fixture!("truncated_44k1_stereo.m4a"),
            "speech_44k1_stereo.m4a",
            fixture!("speech_44k1_stereo.m4a"),
        ),
        ("truncated_opus.webm", fixture!("truncated_opus.webm"), "speech_opus.webm", fixture!("speech_opus.webm")),
    ] {
        let d = decoded(name, bytes).await;
        let seconds = d.samples.len() as f64 / 16_000.0;
        assert!(seconds > 0.3, "{name}: {seconds} s");
        assert_eq!(
            d.warnings,
            [format!("the file ends inside a packet at byte {}, after {seconds:.3} s of audio: {cut}", bytes.len())],
            "{name}"
        );
        let full = decoded(of, whole).await.samples;
        let exact = d.samples.len() - 1024;
        assert!(d.samples[..exact] == full[..exact], "{name}: the audio before the cut");
    }

    for (name, bytes, message) in [
        (
            "truncated_header.wav",
            fixture!("truncated_header.wav"),
            "truncated file: it ends before its first audio packet",
        ),
        ("nan_f32.wav", fixture!("nan_f32.wav"), "the audio contains NaN or infinite samples (the first at 0.312 s)"),
    ] {
        match decode(Bytes::Array(Uint8Array::from(bytes)), Vec::new()).await {
            Err(e) => assert_eq!(e, message, "{name}"),
            Ok(_) => panic!("{name} decoded"),
        }
    }
    // Not a container the streaming decoder reads: the caller tries WebAudio.
    for bytes in [fixture!("garbage.wav"), fixture!("random.bin")] {
        match decode(Bytes::Array(Uint8Array::from(bytes)), Vec::new()).await {
            Ok(Decoding::Unsupported(why)) => assert_eq!(why, "an unknown container"),
            _ => panic!("decoded garbage"),
        }
    }
}

/// A `File` a user picked is read a block at a time (`FileReaderSync`), never whole, and gives
/// what its bytes give.
#[wasm_bindgen_test]
async fn a_blob_decodes_like_its_bytes() {
    let bytes = fixture!("speech_44k1_stereo.mp3");
    let from_bytes = decoded("speech_44k1_stereo.mp3", bytes).await;
    let file = blob(&[&Uint8Array::from(bytes).into()]);
    let from_blob = match decode(Bytes::blob(&file).expect("workers read Blobs synchronously"), Vec::new()).await {
        Ok(Decoding::Decoded(d)) => d,
        _ => panic!("the Blob did not decode"),
    };
    assert_eq!(from_blob.samples, from_bytes.samples);
}

/// Past two minutes the samples go to a file in the origin's private file system: read back
/// exactly across the point where they moved and past the end as zeros; the file is gone once
/// the samples are.
#[wasm_bindgen_test]
async fn long_audio_goes_to_a_private_file_and_reads_back_exactly() {
    let total = IN_MEMORY + 123_457;
    let want: Vec<f32> = test_audio().to_vec().into_iter().cycle().take(total).collect();
    let mut samples = JsSamples::new().await;
    for piece in want.chunks(100_003) {
        samples.push(piece).unwrap();
    }
    samples.truncate(total - 5);
    let samples = samples.finish().unwrap();
    assert_eq!(samples.place(), "file");
    assert_eq!(Audio::len(&samples), total - 5);
    for (start, len) in [(0, 10), (IN_MEMORY - 3, 7), (total - 20, 30), (total + 4, 3)] {
        let got = samples.read_range(start, start + len).unwrap();
        let expected: Vec<f32> = (start..start + len).map(|i| if i < total - 5 { want[i] } else { 0.0 }).collect();
        assert_eq!(got, expected, "{start}+{len}");
    }
    assert_eq!(private_files().await, 1);
    drop(samples);
    gloo_timers::future::TimeoutFuture::new(0).await;
    assert_eq!(private_files().await, 0, "the file was removed");
}

/// Files in the package's folder of the origin's private file system.
async fn private_files() -> usize {
    let storage: web_sys::StorageManager =
        js_sys::Reflect::get(&js_sys::Reflect::get(&js_sys::global(), &"navigator".into()).unwrap(), &"storage".into())
            .unwrap()
            .unchecked_into();
    let root: web_sys::FileSystemDirectoryHandle =
        wasm_bindgen_futures::JsFuture::from(storage.get_directory()).await.unwrap().unchecked_into();
    let folder: web_sys::FileSystemDirectoryHandle =
        wasm_bindgen_futures::JsFuture::from(root.get_directory_handle("susurrus-audio"))
            .await
            .unwrap()
            .unchecked_into();
    let names = folder.keys();
    let mut count = 0;
    loop {
        let step = wasm_bindgen_futures::JsFuture::from(names.next().unwrap()).await.unwrap();
        if get(&step, "done").as_bool() == Some(true) {
            return count;
        }
        count += 1;
    }
}

/// The WebAssembly memory's size in MB (it only grows: its size after a transcription is the
/// most the transcription needed).
fn wasm_memory_mb() -> f64 {
    let memory: js_sys::WebAssembly::Memory = wasm_bindgen::memory().unchecked_into();
    f64::from(memory.buffer().unchecked_into::<js_sys::ArrayBuffer>().byte_length()) / 1e6
}

/// A WAV header for `seconds` of 16 kHz mono 16-bit audio.
fn wav_header(seconds: u32) -> Vec<u8> {
    let data = seconds * 16_000 * 2;
    let mut out = Vec::new();
    out.extend(b"RIFF");
    out.extend((36 + data).to_le_bytes());
    out.extend(b"WAVEfmt ");
    out.extend(16u32.to_le_bytes());
    out.extend(1u16.to_le_bytes());
    out.extend(1u16.to_le_bytes());
    out.extend(16_000u32.to_le_bytes());
    out.extend(32_000u32.to_le_bytes());
    out.extend(2u16.to_le_bytes());
    out.extend(16u16.to_le_bytes());
    out.extend(b"data");
    out.extend(data.to_le_bytes());
    out
}

/// A transcription of a file equals one of its decoded samples; a long recording (an hour,
/// made as a `Blob` in JavaScript memory) is decoded into the private file, and the module's
/// memory after it is what it was after two minutes.
#[wasm_bindgen_test]
async fn a_file_is_transcribed_like_its_samples_and_an_hour_leaves_memory_flat() {
    let model = load_small("cpu").await.unwrap();
    let options = || {
        object(&[
            ("beamSize", 1.into()),
            ("temperatures", Array::of1(&0.0.into()).into()),
            ("noSpeechThreshold", JsValue::NULL),
            ("logProbThreshold", JsValue::NULL),
            ("compressionRatioThreshold", JsValue::NULL),
        ])
    };
    let segments = |result: &JsValue| -> String { js_sys::JSON::stringify(&get(result, "segments")).unwrap().into() };
    let bytes = fixture!("speech_22k05.mp3");
    let samples = decoded("speech_22k05.mp3", bytes).await.samples;
    let from_samples =
        settle(model.transcribe(Float32Array::from(&samples[..]).into(), Some(options()))).await.unwrap();
    let file = blob(&[&Uint8Array::from(bytes).into()]);
    let from_file = settle(model.transcribe(file.into(), Some(options()))).await.unwrap();
    assert_eq!(segments(&from_file), segments(&from_samples));
    assert_eq!(Array::from(&get(&from_file, "warnings")).length(), 0);
    // A damaged file is the transcription's error, and the model stays usable.
    let damaged = blob(&[&Uint8Array::from(fixture!("truncated_header.wav")).into()]);
    let err = settle(model.transcribe(damaged.into(), Some(options()))).await.expect_err("fails");
    assert_eq!(error_message(&err), "cannot decode the audio: truncated file: it ends before its first audio packet");
    // What the worker cannot decode is an error the package's client knows to decode on the
    // page instead (workers have no WebAudio).
    let unknown = Uint8Array::from(fixture!("garbage.wav"));
    let err = settle(model.transcribe(unknown.into(), Some(options()))).await.expect_err("fails");
    assert_eq!(err.unchecked_ref::<js_sys::Error>().name(), "UnsupportedAudioError");
    assert_eq!(
        error_message(&err),
        "cannot decode this audio here: an unknown container; decode it with WebAudio on a page (decodeAudio) and \
         pass the samples"
    );
    let cut = blob(&[&Uint8Array::from(fixture!("truncated_speech.mp3")).into()]);
    let result = settle(model.transcribe(cut.into(), Some(options()))).await.unwrap();
    assert_eq!(
        Array::from(&get(&result, "warnings")).iter().map(|w| w.as_string().unwrap()).collect::<Vec<_>>(),
        ["the file ends inside a packet at byte 20324, after 1.621 s of audio: it looks truncated; the audio before \
             the cut is transcribed"]
    );

    // A second of a sawtooth, repeated: the parts of a Blob, in JavaScript memory.
    let second: Vec<u8> =
        (0..16_000).flat_map(|i| ((((i % 400) as f32 / 200.0 - 1.0) * 3000.0) as i16).to_le_bytes()).collect();
    let second: JsValue = Uint8Array::from(&second[..]).into();
    let recording = |seconds: u32| {
        let header: JsValue = Uint8Array::from(&wav_header(seconds)[..]).into();
        let mut parts = vec![&header];
        parts.extend(std::iter::repeat_n(&second, seconds as usize));
        blob(&parts)
    };
    // The first window only: the whole recording is still decoded and read for the log-mel's
    // maximum.
    let first_window = || {
        let o = options();
        js_sys::Reflect::set(&o, &"clipTimestamps".into(), &Array::of2(&0.into(), &30.into())).unwrap();
        o
    };
    settle(model.transcribe(recording(120).into(), Some(first_window()))).await.unwrap();
    let after_short = wasm_memory_mb();
    let result = settle(model.transcribe(recording(3600).into(), Some(first_window()))).await.unwrap();
    assert_eq!(get(&get(&result, "timings"), "audioDurationS").as_f64(), Some(3600.0));
    let after_long = wasm_memory_mb();
    web_sys::console::log_1(
        &format!("module memory after 2 min {after_short:.1} MB, after 60 min {after_long:.1} MB").into(),
    );
    assert!(after_long - after_short < 8.0, "the module's memory grew from {after_short:.1} MB to {after_long:.1} MB");
    assert_eq!(private_files().await, 0, "the recording's file was removed");
}
