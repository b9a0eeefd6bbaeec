//! Audio decoding against the fixtures of tests/audio/make_audio.sh: every format decodes, the
//! 16 kHz mono result matches references computed independently in Python, and every bad input
//! gets its exact error message.
//!
//! Tolerances: lossless 16 kHz PCM within half a quantisation step of the ideal signal (plus
//! f32 rounding); resampled tones within 1e-4 of the ideal band-limited signal sampled at 16 kHz
//! (measured: at most 3e-5, 91 dB SNR or better); lossy speech (MP3, Vorbis, AAC) correlated
//! ≥ 0.99 with the 16-bit original at zero lag, its energy within 1 dB; Opus (24 and 32 kb/s)
//! ≥ 0.95 within one sample of zero lag.

use std::path::{Path, PathBuf};

use susurrus_cli::Error;
use susurrus_cli::audio::{Decoded, Limited, SAMPLE_RATE, decode_bytes, decode_bytes_into, decode_file, decode_reader};
use susurrus_testkit::signal::{self, correlation, energy, f32_samples, max_abs_diff};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/audio").join(name)
}

fn decode(name: &str) -> Decoded {
    decode_file(&fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// A raw little-endian f32 reference written by the generator.
fn reference(name: &str) -> Vec<f32> {
    f32_samples(&std::fs::read(fixture(name)).unwrap())
}

/// The 16-bit samples of a canonical 44-byte-header mono WAV, read without the decoder.
fn wav_s16_samples(name: &str) -> Vec<f32> {
    signal::wav_s16_samples(&std::fs::read(fixture(name)).unwrap())
}

fn audio_error(result: Result<Decoded, Error>) -> String {
    match result {
        Err(e @ Error::Audio { .. }) => e.to_string(),
        Err(other) => panic!("expected an audio error, got {other:?}"),
        Ok(d) => panic!("expected an error, decoded {} samples of {}", d.samples.len(), d.format),
    }
}

fn file_error(name: &str) -> String {
    audio_error(decode_file(&fixture(name)))
}

#[test]
fn wav_bit_depths_at_16khz_are_exact_to_their_precision() {
    let ideal = reference("ref_tone_mono_16k.f32");
    assert_eq!(ideal.len(), 8000);
    // Half a quantisation step, plus the f32 rounding of the reference and of the result.
    for (name, bits) in
        [("tone_16k_u8.wav", 8), ("tone_16k_s16.wav", 16), ("tone_16k_s24.wav", 24), ("tone_16k_s32.wav", 32)]
    {
        let d = decode(name);
        assert_eq!((d.source_rate, d.channels, d.format.as_str()), (16_000, 1, "wav"), "{name}");
        let tolerance = 0.5f64.powi(bits) + 0.5f64.powi(24);
        let err = max_abs_diff(&d.samples, &ideal);
        assert!(err <= tolerance, "{name}: max error {err:e} > {tolerance:e}");
    }
    let float = decode("tone_16k_f32.wav");
    assert_eq!(float.samples, ideal, "32-bit float samples come through bit for bit");
}

#[test]
fn flac_and_wav_of_the_same_speech_decode_to_its_exact_16_bit_samples() {
    let pcm = wav_s16_samples("speech_16k_s16.wav");
    assert_eq!(pcm.len(), 44_103);
    let wav = decode("speech_16k_s16.wav");
    assert_eq!(wav.samples, pcm);
    let flac = decode("speech_16k.flac");
    assert_eq!((flac.source_rate, flac.channels, flac.format.as_str()), (16_000, 1, "flac"));
    assert_eq!(flac.samples, pcm);
}

#[test]
fn other_rates_resample_to_the_ideal_16khz_signal() {
    let ideal = reference("ref_tone_mono_16k.f32");
    for (name, rate) in [("tone_8k_s16.wav", 8_000), ("tone_22k05_s24.wav", 22_050), ("tone_48k_s16.wav", 48_000)] {
        let d = decode(name);
        assert_eq!((d.source_rate, d.channels), (rate, 1), "{name}");
        // 0.5 s at any rate is 8000 samples at 16 kHz.
        assert_eq!(d.samples.len(), 8000, "{name}");
        let err = max_abs_diff(&d.samples, &ideal);
        assert!(err < 1e-4, "{name}: max error {err:e}");
    }
}

#[test]
fn stereo_at_44khz_is_averaged_and_resampled() {
    let d = decode("tone_44k1_stereo_s16.wav");
    assert_eq!((d.source_rate, d.channels, d.samples.len()), (44_100, 2, 8000));
    let err = max_abs_diff(&d.samples, &reference("ref_tone_stereo_16k.f32"));
    assert!(err < 1e-4, "max error {err:e}");
}

#[test]
fn six_channels_are_averaged_exactly() {
    let d = decode("tone_16k_6ch_s16.wav");
    assert_eq!((d.source_rate, d.channels, d.samples.len()), (16_000, 6, 4000));
    // The mean of six 16-bit roundings is within one half step of the mean of the ideal channels.
    let err = max_abs_diff(&d.samples, &reference("ref_tone_6ch_16k.f32"));
    assert!(err <= 0.5f64.powi(16) + 0.5f64.powi(24), "max error {err:e}");
}

#[test]
fn lossy_speech_matches_the_original_in_shape_timing_and_level() {
    let original = wav_s16_samples("speech_16k_s16.wav");
    // (file, rate, channels, format, 16 kHz samples): MP3 is gapless (the LAME header gives the
    // exact length; 121559 frames at 44.1 kHz and 60780 at 22.05 kHz make 44104 at 16 kHz);
    // the Vorbis encoder's last granule position leaves 43 frames of padding at 48 kHz.
    //
    // AAC in MP4: the edit list cuts the encoder's 1,024 frames of delay and keeps the 2,756 ms
    // the file presents (its movie time scale counts milliseconds: 121,540 frames at 44.1 kHz,
    // 132,288 at 48 kHz, 44,096 at 16 kHz either way); with the index before or after the
    // media data. The video's first audio track is the speech; a second track (a tone) and the
    // video are skipped.
    for (name, rate, channels, format, len) in [
        ("speech_44k1_stereo.mp3", 44_100, 2, "mp3", 44_104),
        ("speech_22k05.mp3", 22_050, 1, "mp3", 44_104),
        ("speech_48k_stereo.ogg", 48_000, 2, "ogg/vorbis", 44_118),
        ("speech_44k1_stereo.m4a", 44_100, 2, "mp4/aac", 44_096),
        ("speech_moov_last.m4a", 44_100, 2, "mp4/aac", 44_096),
        ("video_two_audio_tracks.mp4", 48_000, 2, "mp4/aac", 44_096),
    ] {
        let d = decode(name);
        assert_eq!(
            (d.source_rate, d.channels, d.format.as_str(), d.samples.len()),
            (rate, channels, format, len),
            "{name}"
        );
        let at_zero = correlation(&d.samples, &original, 0);
        assert!(at_zero >= 0.99, "{name}: correlation {at_zero}");
        for lag in (-20..=20).filter(|&lag| lag != 0) {
            let other = correlation(&d.samples, &original, lag);
            assert!(other < at_zero, "{name}: lag {lag} correlates better ({other} >= {at_zero})");
        }
        let db = 10.0 * (energy(&d.samples) / energy(&original)).log10();
        assert!(db.abs() < 1.0, "{name}: level differs by {db} dB");
    }
}

#[test]
fn a_file_cut_inside_its_samples_decodes_up_to_the_cut() {
    let full = wav_s16_samples("speech_16k_s16.wav");
    let cut = decode("truncated_speech.wav");
    // 20001 bytes: a 44-byte header and 9978 whole samples, then half a sample.
    assert_eq!(cut.samples, full[..9978]);

    let full = decode("speech_44k1_stereo.mp3").samples;
    let cut = decode("truncated_speech.mp3").samples;
    // Cut at 60 % of the bytes, inside a frame: the whole frames before it come out as in the
    // full file, apart from the resampler's last chunk, which sees silence after the cut.
    let share = cut.len() as f64 / full.len() as f64;
    assert!((0.55..0.6).contains(&share), "{} of {} samples", cut.len(), full.len());
    let settled = cut.len() - 512;
    let err = max_abs_diff(&cut[..settled], &full[..settled]);
    assert!(err < 1e-6, "max difference before the cut {err:e}");

    // OGG checks whole pages: cut inside the second audio page (bytes 18412..32537), the first
    // one's 47104 frames at 48 kHz (its granule position) remain.
    let ogg = std::fs::read(fixture("speech_48k_stereo.ogg")).unwrap();
    let cut = decode_bytes(ogg[..25_000].to_vec(), "cut.ogg", None).unwrap();
    assert_eq!(cut.samples.len(), 15_702);
    let full = decode("speech_48k_stereo.ogg").samples;
    let err = max_abs_diff(&cut.samples[..15_000], &full[..15_000]);
    assert!(err < 1e-6, "max difference before the cut {err:e}");
}

#[test]
fn a_valid_header_without_samples_is_empty_audio() {
    let d = decode("zero_samples.wav");
    assert_eq!(
        d,
        Decoded { samples: vec![], source_rate: 16_000, channels: 1, format: "wav".into(), warnings: vec![] }
    );
}

#[test]
fn standard_input_and_memory_decode_like_the_file() {
    let path = fixture("tone_44k1_stereo_s16.wav");
    let from_file = decode_file(&path).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(decode_reader(&bytes[..], "-").unwrap(), from_file);
    assert_eq!(decode_bytes(bytes, "tone", Some("wav")).unwrap(), from_file);
    // The extension is a hint, not a decision: MP3 bytes named .wav are still MP3.
    let mp3 = std::fs::read(fixture("speech_22k05.mp3")).unwrap();
    assert_eq!(decode_bytes(mp3, "x.wav", Some("wav")).unwrap().format, "mp3");
}

#[test]
fn unsupported_and_damaged_inputs_get_exact_messages() {
    let path = |name: &str| fixture(name).display().to_string();
    for name in ["garbage.wav", "random.bin"] {
        assert_eq!(
            file_error(name),
            format!(
                "{}: not a supported audio format (WAV, AIFF, FLAC, MP3, AAC, OGG, M4A/MP4/MOV, WebM/MKV, CAF)",
                path(name)
            )
        );
    }
    assert_eq!(
        file_error("speech_ac3.mka"),
        format!(
            "{}: matroska file with AC-3 audio, which is not supported (WAV, AIFF, FLAC, MP3, AAC, OGG, \
             M4A/MP4/MOV, WebM/MKV, CAF)",
            path("speech_ac3.mka")
        )
    );
    // An MP4 with its index after the media data: a stream cannot reach it, and a file cut
    // before it has none.
    let m4a = std::fs::read(fixture("speech_moov_last.m4a")).unwrap();
    assert_eq!(
        audio_error(decode_reader(Trickle { bytes: &m4a, at: 0 }, "-")),
        "-: an MP4 whose index (moov box) follows its media data cannot be read from a stream: pass the file \
         itself, or rewrite it with the index first (ffmpeg -i IN -c copy -movflags +faststart OUT)"
    );
    // FFmpeg writes CAF's packet table (ALAC's packet sizes) after the audio.
    let caf = std::fs::read(fixture("speech_alac.caf")).unwrap();
    assert_eq!(
        audio_error(decode_reader(Trickle { bytes: &caf, at: 0 }, "-")),
        "-: a CAF file whose packet table follows its audio cannot be read from a stream: pass the file itself"
    );
    assert_eq!(
        audio_error(decode_bytes(m4a[..20_000].to_vec(), "cut.m4a", None)),
        "cut.m4a: truncated MP4: the file ends at byte 20000 without its index (moov box), which holds where the \
         audio is; nothing can be decoded without it"
    );
    assert_eq!(
        file_error("truncated_header.wav"),
        format!("{}: truncated file: it ends before its first audio packet", path("truncated_header.wav"))
    );
    // A flipped byte in the first audio page (bytes 3368..18412) fails its checksum while the
    // stream is opened.
    let mut ogg = std::fs::read(fixture("speech_48k_stereo.ogg")).unwrap();
    ogg[10_000] ^= 0xA5;
    assert_eq!(
        audio_error(decode_bytes(ogg, "bad.ogg", None)),
        "bad.ogg: damaged file: malformed stream: ogg: crc mismatch"
    );
    // Cut right after the header: the header announces 44103 samples at 16 kHz, none follow.
    let wav = std::fs::read(fixture("speech_16k_s16.wav")).unwrap();
    assert_eq!(
        audio_error(decode_bytes(wav[..44].to_vec(), "header.wav", None)),
        "header.wav: no audio decoded, though the header announces 2.756 s (truncated or damaged file)"
    );
    // Every FLAC frame's checksum broken (the frame before each fixed-blocksize sync code, and
    // the last): the reader drops them all.
    let mut flac = std::fs::read(fixture("speech_16k.flac")).unwrap();
    let syncs: Vec<usize> = (1..flac.len() - 1).filter(|&i| flac[i..i + 2] == [0xFF, 0xF8]).collect();
    for i in syncs.into_iter().skip(1) {
        flac[i - 1] ^= 0x01;
    }
    *flac.last_mut().unwrap() ^= 0x01;
    assert_eq!(
        audio_error(decode_bytes(flac, "crc.flac", None)),
        "crc.flac: no audio decoded, though the header announces 2.756 s (truncated or damaged file)"
    );
    // Every MP3 frame after the first (the LAME info frame) with 0xFF over the start of its side
    // information: each packet fails to decode, and the file is refused with the first reason.
    let mut mp3 = std::fs::read(fixture("speech_22k05.mp3")).unwrap();
    let syncs: Vec<usize> = (20..mp3.len() - 1).filter(|&i| mp3[i] == 0xFF && mp3[i + 1] & 0xF0 == 0xF0).collect();
    for i in syncs.into_iter().skip(1) {
        let (start, end) = ((i + 4).min(mp3.len()), (i + 12).min(mp3.len()));
        mp3[start..end].fill(0xFF);
    }
    assert_eq!(
        audio_error(decode_bytes(mp3, "side.mp3", None)),
        "side.mp3: no decodable audio in 98 mp3 packets (first error: mpa: granule big_values > 288)"
    );
    assert_eq!(file_error("empty.wav"), format!("{}: empty file", path("empty.wav")));
    assert_eq!(audio_error(decode_reader(std::io::empty(), "-")), "-: empty file");
    assert_eq!(audio_error(decode_bytes(Vec::new(), "clip", None)), "clip: empty file");
}

#[test]
fn nan_and_infinity_are_rejected_at_their_time() {
    assert_eq!(
        file_error("nan_f32.wav"),
        format!(
            "{}: the audio contains NaN or infinite samples (the first at 0.312 s)",
            fixture("nan_f32.wav").display()
        )
    );
    // -inf in the right channel only, at frame 4000 of 8 kHz audio.
    assert_eq!(
        file_error("inf_stereo_f32.wav"),
        format!(
            "{}: the audio contains NaN or infinite samples (the first at 0.500 s)",
            fixture("inf_stereo_f32.wav").display()
        )
    );
}

#[test]
fn missing_files_and_directories_are_io_errors_naming_the_path() {
    let missing = fixture("no_such_file.wav");
    let err = decode_file(&missing).unwrap_err();
    assert!(matches!(err, Error::Io { .. }), "{err:?}");
    assert_eq!(err.to_string(), format!("{}: No such file or directory (os error 2)", missing.display()));

    let dir = fixture("");
    let err = decode_file(&dir).unwrap_err();
    assert!(matches!(err, Error::Io { .. }), "{err:?}");
    assert_eq!(err.to_string(), format!("{}: is a directory", dir.display()));
}

/// `size` as the four 7-bit bytes of an ID3v2 size.
fn syncsafe(size: usize) -> [u8; 4] {
    [(size >> 21) as u8 & 0x7F, (size >> 14) as u8 & 0x7F, (size >> 7) as u8 & 0x7F, size as u8 & 0x7F]
}

/// MP3 files often start with an ID3v2 tag holding cover art; one larger than the 1 MB that a
/// format probe scans for a frame header must be skipped as a tag, not searched.
#[test]
fn an_mp3_behind_a_large_id3v2_tag_decodes_like_the_bare_file() {
    let mp3 = std::fs::read(fixture("speech_22k05.mp3")).unwrap();
    // The generator's file starts with an empty 20-byte ID3v2.4 tag.
    assert_eq!(&mp3[..3], b"ID3");
    let audio = &mp3[20..];
    // 1.2 MB without a 0xFF byte, so nothing in it looks like an MP3 frame header.
    let mut payload = b"susurrus-test\0".to_vec();
    payload.extend((0..1_200_000u32).map(|i| (i * 31 % 251) as u8));
    let mut tagged = b"ID3\x04\x00\x00".to_vec();
    tagged.extend(syncsafe(10 + payload.len()));
    tagged.extend(b"PRIV");
    tagged.extend(syncsafe(payload.len()));
    tagged.extend([0, 0]);
    tagged.extend(payload);
    tagged.extend(audio);
    let plain = decode("speech_22k05.mp3");
    assert_eq!(decode_bytes(tagged, "tagged.mp3", Some("mp3")).unwrap(), plain);
}

/// A 16-bit PCM WAV with the given header fields around `samples`.
fn wav_s16(rate: u32, channels: u16, samples: &[i16]) -> Vec<u8> {
    let data: Vec<u8> = samples.iter().flat_map(|s| s.to_le_bytes()).collect();
    let block = 2 * channels;
    let mut wav = b"RIFF".to_vec();
    wav.extend((36 + data.len() as u32).to_le_bytes());
    wav.extend(b"WAVEfmt ");
    wav.extend(16u32.to_le_bytes());
    wav.extend(1u16.to_le_bytes());
    wav.extend(channels.to_le_bytes());
    wav.extend(rate.to_le_bytes());
    wav.extend((rate * u32::from(block)).to_le_bytes());
    wav.extend(block.to_le_bytes());
    wav.extend(16u16.to_le_bytes());
    wav.extend(b"data");
    wav.extend((data.len() as u32).to_le_bytes());
    wav.extend(data);
    wav
}

#[test]
fn sample_rates_outside_the_resamplers_range_are_refused() {
    let samples = [0i16; 64];
    assert_eq!(
        audio_error(decode_bytes(wav_s16(500, 1, &samples), "slow.wav", None)),
        "slow.wav: unsupported sample rate 500 Hz (supported: 1000 to 768000 Hz)"
    );
    assert_eq!(
        audio_error(decode_bytes(wav_s16(1_000_000, 1, &samples), "fast.wav", None)),
        "fast.wav: unsupported sample rate 1000000 Hz (supported: 1000 to 768000 Hz)"
    );
    let edge = decode_bytes(wav_s16(1_000, 1, &samples), "edge.wav", None).unwrap();
    assert_eq!((edge.source_rate, edge.samples.len()), (1_000, 1024));
}

#[test]
fn one_second_at_common_rates_is_16000_samples() {
    for rate in [8_000, 11_025, 12_000, 22_050, 24_000, 32_000, 44_100, 48_000, 88_200, 96_000] {
        let samples = vec![1000i16; rate as usize];
        let d = decode_bytes(wav_s16(rate, 1, &samples), "second.wav", None).unwrap();
        assert_eq!(d.samples.len(), SAMPLE_RATE as usize, "{rate} Hz");
        assert!((d.duration() - 1.0).abs() < 1e-12, "{rate} Hz");
    }
}

/// Every prefix and many one-byte corruptions of every decodable fixture give audio or an audio
/// error: never a panic, never another kind of error.
#[test]
fn cut_or_corrupted_files_never_panic() {
    let names = [
        "speech_16k_s16.wav",
        "speech_16k.flac",
        "speech_44k1_stereo.mp3",
        "speech_22k05.mp3",
        "speech_48k_stereo.ogg",
        "speech_opus.ogg",
        "tone_16k_s24.wav",
        "tone_16k_6ch_s16.wav",
    ];
    for name in names {
        let bytes = std::fs::read(fixture(name)).unwrap();
        let cuts = (1..64).chain((64..bytes.len()).step_by(1499));
        for cut in cuts {
            if let Err(e) = decode_bytes(bytes[..cut].to_vec(), name, None) {
                assert!(matches!(e, Error::Audio { .. }), "{name} cut at {cut}: {e:?}");
            }
        }
        for at in (0..bytes.len()).step_by(211) {
            let mut damaged = bytes.clone();
            damaged[at] ^= 0xA5;
            if let Err(e) = decode_bytes(damaged, name, None) {
                assert!(matches!(e, Error::Audio { .. }), "{name} damaged at {at}: {e:?}");
            }
        }
    }
}

/// The fixtures that decode: every one but the unsupported and defective inputs.
const DECODABLE: [&str; 25] = [
    "speech_16k_s16.wav",
    "speech_16k.aiff",
    "speech_22k05.aac",
    "speech_44k1_stereo.m4a",
    "speech_alac.m4a",
    "speech_opus.ogg",
    "speech_opus.webm",
    "speech_flac.mkv",
    "video_two_audio_tracks.mp4",
    "video_opus.webm",
    "speech_16k.flac",
    "speech_22k05.mp3",
    "speech_44k1_stereo.mp3",
    "speech_48k_stereo.ogg",
    "tone_16k_6ch_s16.wav",
    "tone_16k_f32.wav",
    "tone_16k_s16.wav",
    "tone_16k_s24.wav",
    "tone_16k_s32.wav",
    "tone_16k_u8.wav",
    "tone_22k05_s24.wav",
    "tone_44k1_stereo_s16.wav",
    "tone_48k_s16.wav",
    "tone_8k_s16.wav",
    "zero_samples.wav",
];

#[test]
fn a_stream_decodes_every_format_like_the_file_with_no_warning() {
    for name in DECODABLE {
        let from_file = decode(name);
        assert_eq!(from_file.warnings, Vec::<String>::new(), "{name}: an intact file decodes without a warning");
        let bytes = std::fs::read(fixture(name)).unwrap();
        // Read as a pipe gives it: in pieces, without seeking.
        let streamed = decode_reader(Trickle { bytes: &bytes, at: 0 }, "-").unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(streamed, from_file, "{name}");
    }
}

/// A reader that yields at most 1000 bytes a read, as a pipe may.
struct Trickle<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl std::io::Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = buf.len().min(1000).min(self.bytes.len() - self.at);
        buf[..n].copy_from_slice(&self.bytes[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

#[test]
fn a_stream_of_no_audio_is_refused_after_reading_a_bounded_prefix() {
    /// Zeros without end, counting what was read.
    struct Zeros(u64);
    impl std::io::Read for Zeros {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            buf.fill(0);
            self.0 += buf.len() as u64;
            Ok(buf.len())
        }
    }
    let mut zeros = Zeros(0);
    assert_eq!(
        audio_error(decode_reader(&mut zeros, "-")),
        "-: not a supported audio format (WAV, AIFF, FLAC, MP3, AAC, OGG, M4A/MP4/MOV, WebM/MKV, CAF)"
    );
    // The format probe gives up within a few megabytes, and nothing was held but its buffer.
    assert!(zeros.0 < 4 << 20, "read {} bytes", zeros.0);
}

#[test]
fn truncated_and_damaged_files_decode_with_a_warning_saying_where() {
    let warnings = |name: &str| decode(name).warnings;
    let cut = "it looks truncated; the audio before the cut is transcribed";
    assert_eq!(
        warnings("truncated_speech.wav"),
        [format!("the file ends inside a packet at byte 20001, after 0.624 s of audio: {cut}")]
    );
    // The MP3 reader stops quietly at the cut; the header of the cut frame left behind the last
    // whole one tells (as the LAME header's frame count would).
    assert_eq!(
        warnings("truncated_speech.mp3"),
        [format!("the file ends inside a packet at byte 20324, after 1.621 s of audio: {cut}")]
    );
    assert_eq!(std::fs::metadata(fixture("truncated_speech.mp3")).unwrap().len(), 20324);
    let ogg = std::fs::read(fixture("speech_48k_stereo.ogg")).unwrap();
    let d = decode_bytes(ogg[..25_000].to_vec(), "cut.ogg", None).unwrap();
    assert_eq!(d.warnings, [format!("the file ends inside a packet at byte 25000, after 0.981 s of audio: {cut}")]);
    let flac = std::fs::read(fixture("speech_16k.flac")).unwrap();
    let d = decode_bytes(flac[..flac.len() * 6 / 10].to_vec(), "cut.flac", None).unwrap();
    assert_eq!(d.warnings, [format!("the file ends inside a packet at byte 32991, after 1.224 s of audio: {cut}")]);
    assert_eq!(d.samples, decode("speech_16k.flac").samples[..d.samples.len()], "the audio before the cut is exact");

    // Three MP3 frames in the middle with their side information overwritten: they are
    // skipped, the rest decodes.
    let mut mp3 = std::fs::read(fixture("speech_22k05.mp3")).unwrap();
    let frames = mpeg2_layer3_frames(&mp3);
    assert_eq!(frames.len(), 109, "the LAME info frame and 108 audio frames");
    for &i in &frames[41..44] {
        mp3[i + 4..i + 12].fill(0xFF);
    }
    let d = decode_bytes(mp3, "side.mp3", None).unwrap();
    // Audio frame 40 (after the info frame) is the first damaged one: 40 frames of 576
    // samples at 22050 Hz have been decoded before it, less the 1105 samples of delay
    // trimmed at the start (the 576 of the encoder that its LAME header states, and the
    // decoder's 529): 21935 / 22050 = 0.995 s.
    assert_eq!(d.warnings, ["skipped 3 undecodable mp3 packets (the first at 0.995 s: mpa: granule big_values > 288)"]);
}

/// The byte offsets of the frames of an MPEG-2 layer III file behind a 10-byte ID3v2 header,
/// read from each frame's header.
fn mpeg2_layer3_frames(mp3: &[u8]) -> Vec<usize> {
    const KBPS: [usize; 15] = [0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160];
    const RATES: [usize; 3] = [22050, 24000, 16000];
    let tag = mp3[6..10].iter().fold(0, |size, &b| size << 7 | usize::from(b));
    let mut frames = Vec::new();
    let mut at = 10 + tag;
    while at + 4 <= mp3.len() && mp3[at] == 0xFF && mp3[at + 1] & 0xE0 == 0xE0 {
        let header = &mp3[at..at + 4];
        let (kbps, rate, padding) = (
            KBPS[usize::from(header[2] >> 4)],
            RATES[usize::from(header[2] >> 2 & 3)],
            usize::from(header[2] >> 1 & 1),
        );
        frames.push(at);
        at += 72_000 * kbps / rate + padding;
    }
    frames
}

/// The test kit's FLAC of silence (the API's decompression bomb) is a FLAC symphonia reads:
/// exactly its samples, all zero, with no warning; and decoded into a [`Limited`] store, ten
/// hours stop at the limit with its message.
#[test]
fn a_silent_flac_decodes_to_its_length_and_a_limited_store_stops_it() {
    let samples = 3 * 65535 + 100;
    let d = decode_bytes(signal::silent_flac(16_000, samples), "silence.flac", None).unwrap();
    assert_eq!((d.format.as_str(), d.samples.len()), ("flac", samples as usize));
    assert!(d.samples.iter().all(|&s| s == 0.0) && d.warnings.is_empty(), "{:?}", d.warnings);
    let (store, over) = Limited::new(Vec::new(), 60 * SAMPLE_RATE as usize);
    let ten_hours = signal::silent_flac(16_000, 10 * 3600 * 16_000);
    let error = decode_bytes_into(ten_hours, "silence.flac", None, store).unwrap_err();
    assert_eq!(error.to_string(), "silence.flac: the audio is longer than the limit of 60 s");
    assert!(over.hit());
}

/// A WAV written to a pipe states no length (0xFFFFFFFF in the RIFF and data sizes, as FFmpeg
/// writes to standard output): its end is the end of the audio, not a cut.
#[test]
fn a_wav_written_to_a_pipe_decodes_whole_without_a_warning() {
    let mut bytes = std::fs::read(fixture("speech_16k_s16.wav")).unwrap();
    assert_eq!(&bytes[36..40], b"data", "a canonical 44-byte header");
    bytes[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
    bytes[40..44].copy_from_slice(&u32::MAX.to_le_bytes());
    let piped = decode_reader(Trickle { bytes: &bytes, at: 0 }, "-").unwrap();
    assert_eq!(piped.warnings, Vec::<String>::new());
    assert_eq!(piped.samples, wav_s16_samples("speech_16k_s16.wav"));
}

/// An MP3 without a LAME or Xing header states no length, and its reader ends the stream
/// quietly where a frame is cut: the cut frame's header left behind the last whole frame says
/// it was cut.
#[test]
fn an_mp3_without_a_frame_count_cut_inside_a_frame_is_warned_about() {
    let mp3 = std::fs::read(fixture("speech_22k05.mp3")).unwrap();
    let frames = mpeg2_layer3_frames(&mp3);
    // Without the LAME info frame: the ID3v2 tag, then the 108 audio frames.
    let bare = [&mp3[..frames[0]], &mp3[frames[1]..]].concat();
    let audio = |i: usize| frames[i + 1] - (frames[1] - frames[0]);
    let whole = decode_bytes(bare.clone(), "bare.mp3", None).unwrap();
    assert_eq!(whole.warnings, Vec::<String>::new(), "the bare file decodes without a warning");
    // Cut 50 bytes into audio frame 60: frames 0 to 59 decode, 576 samples each at 22050 Hz.
    let cut = audio(60) + 50;
    let d = decode_bytes(bare[..cut].to_vec(), "cut.mp3", None).unwrap();
    assert_eq!(
        d.warnings,
        [format!(
            "the file ends inside a packet at byte {cut}, after {:.3} s of audio: it looks truncated; the audio before the \
             cut is transcribed",
            60.0 * 576.0 / 22050.0
        )]
    );
    // Cut exactly between two frames, nothing tells: no warning.
    let d = decode_bytes(bare[..audio(60)].to_vec(), "short.mp3", None).unwrap();
    assert_eq!(d.warnings, Vec::<String>::new());
}

/// A page of an OGG file that fails its checksum is dropped by the reader, with the second of
/// audio it held; the warning says where, from the granule position (the sample count) of the
/// last intact page before it.
#[test]
fn a_damaged_ogg_page_is_warned_about_with_the_time_before_it() {
    let ogg = std::fs::read(fixture("speech_48k_stereo.ogg")).unwrap();
    // The pages, walked by their headers: (offset, granule position).
    let mut pages = Vec::new();
    let mut at = 0;
    while at < ogg.len() {
        assert_eq!(&ogg[at..at + 4], b"OggS");
        let segments = usize::from(ogg[at + 26]);
        let body: usize = ogg[at + 27..at + 27 + segments].iter().map(|&s| usize::from(s)).sum();
        pages.push((at, u64::from_le_bytes(ogg[at + 6..at + 14].try_into().unwrap())));
        at += 27 + segments + body;
    }
    assert_eq!(pages.len(), 5, "two header pages and three of audio, about a second each");
    // A page in the middle, and the last page.
    for damaged in [3, 4] {
        let mut ogg = ogg.clone();
        let (offset, _) = pages[damaged];
        for byte in &mut ogg[offset + 100..offset + 200] {
            *byte ^= 0x5A;
        }
        let d = decode_bytes(ogg, "damaged.ogg", None).unwrap();
        assert_eq!(
            d.warnings,
            [format!(
                "damaged OGG pages were skipped in one place (the first after {:.3} s): the file looks damaged; the audio \
                 they held is missing",
                pages[damaged - 1].1 as f64 / 48_000.0
            )],
            "page {damaged}"
        );
    }
}

/// A FLAC frame that fails its checksum is skipped by the reader; the frame numbers tell how
/// much audio it held, and silence stands in for it so that every later sample keeps its time.
#[test]
fn a_damaged_flac_frame_is_replaced_by_silence_and_warned_about() {
    let intact = decode("speech_16k.flac").samples;
    let mut flac = std::fs::read(fixture("speech_16k.flac")).unwrap();
    let middle = flac.len() / 2;
    for byte in &mut flac[middle..middle + 100] {
        *byte ^= 0x5A;
    }
    let d = decode_bytes(flac, "damaged.flac", None).unwrap();
    assert_eq!(d.samples.len(), intact.len(), "the audio keeps its length");
    // The samples that differ from the intact file's are one stretch of silence.
    let first = d.samples.iter().zip(&intact).position(|(a, b)| a != b).unwrap();
    let last = d.samples.iter().zip(&intact).rposition(|(a, b)| a != b).unwrap();
    let start = d.samples[..first].iter().rposition(|&s| s != 0.0).map_or(0, |i| i + 1);
    let end = first + d.samples[first..].iter().position(|&s| s != 0.0).unwrap();
    assert!(end > last, "every changed sample is in the silent stretch {start}..{end}");
    assert!(end - start >= 1000, "a frame of FLAC holds thousands of samples: {}", end - start);
    assert_eq!(
        d.warnings,
        [format!(
            "skipped a damaged part of the file ({:.3} s of audio, the first at {:.3} s): the file looks damaged; silence \
             stands in for the missing audio so that later times stay true",
            (end - start) as f64 / 16_000.0,
            start as f64 / 16_000.0
        )]
    );
}

#[test]
fn lossless_containers_give_the_exact_16_bit_samples() {
    let original = wav_s16_samples("speech_16k_s16.wav");
    for (name, format) in [
        ("speech_16k.aiff", "aiff"),
        ("speech_alac.m4a", "mp4/alac"),
        ("speech_alac.caf", "caf/alac"),
        ("speech_flac.mkv", "matroska/flac"),
    ] {
        let d = decode(name);
        assert_eq!((d.source_rate, d.channels, d.format.as_str()), (16_000, 1, format), "{name}");
        assert_eq!(d.samples, original, "{name}: the 16-bit samples, exactly");
        assert_eq!(d.warnings, Vec::<String>::new(), "{name}");
    }
}

#[test]
fn opus_in_ogg_and_webm_starts_after_its_pre_skip() {
    let original = wav_s16_samples("speech_16k_s16.wav");
    // The encoder's 312 frames of delay (the header's pre-skip) are cut in every container. OGG's
    // last granule position also cuts the end's padding: 132,309 frames at 48 kHz, FFmpeg's count
    // for this file. symphonia's Matroska reader does not pass on WebM's DiscardPadding, so its
    // end keeps the last packet's 819 frames of padding (273 samples at 16 kHz).
    for (name, channels, len) in
        [("speech_opus.ogg", 1, 44_103), ("speech_opus.webm", 1, 44_376), ("video_opus.webm", 2, 44_376)]
    {
        let d = decode(name);
        let container = if name.ends_with(".ogg") { "ogg/opus" } else { "matroska/opus" };
        assert_eq!(
            (d.source_rate, d.channels, d.format.as_str(), d.samples.len()),
            (48_000, channels, container, len),
            "{name}"
        );
        // libopus's output (which the decoder equals) lags the input by a fraction of a 16 kHz
        // sample after the pre-skip: the best lag is -1, 0 or 1.
        let best = (-1..=1).map(|lag| correlation(&d.samples, &original, lag)).fold(f64::MIN, f64::max);
        assert!(best >= 0.95, "{name}: correlation {best}");
        for lag in [-20, -10, -5, -3, 3, 5, 10, 20] {
            assert!(correlation(&d.samples, &original, lag) < best, "{name}: lag {lag}");
        }
        let db = 10.0 * (energy(&d.samples) / energy(&original)).log10();
        assert!(db.abs() < 1.0, "{name}: level differs by {db} dB");
    }
}

#[test]
fn raw_aac_keeps_the_encoders_delay_as_ffmpeg_does() {
    // ADTS states no delay: the 1,024 frames at 22.05 kHz (743 samples at 16 kHz) stay at the
    // start, and the 61 packets of 1,024 frames give 45,326 samples, as FFmpeg decodes the file.
    let original = wav_s16_samples("speech_16k_s16.wav");
    let d = decode("speech_22k05.aac");
    assert_eq!((d.source_rate, d.channels, d.format.as_str(), d.samples.len()), (22_050, 1, "aac", 45_326));
    let at_delay = correlation(&d.samples, &original, 743);
    assert!(at_delay >= 0.99, "correlation {at_delay} after the delay");
    assert!(correlation(&d.samples, &original, 0) < 0.5, "the delay is there");
}

#[test]
fn cut_mp4_and_matroska_files_decode_up_to_the_cut() {
    // truncated_*: the fixtures cut at 60 % of their bytes; the others are cut here at 30, 60
    // and 90 %. Each gives the full file's audio up to the cut, with the cut's byte and time.
    let mut cuts: Vec<(String, Vec<u8>, &str)> = Vec::new();
    for (cut, of) in
        [("truncated_44k1_stereo.m4a", "speech_44k1_stereo.m4a"), ("truncated_opus.webm", "speech_opus.webm")]
    {
        cuts.push((cut.to_string(), std::fs::read(fixture(cut)).unwrap(), of));
    }
    for of in ["video_two_audio_tracks.mp4", "speech_alac.m4a", "video_opus.webm", "speech_flac.mkv"] {
        let bytes = std::fs::read(fixture(of)).unwrap();
        for tenths in [3, 6, 9] {
            let n = bytes.len() * tenths / 10;
            cuts.push((format!("{of} cut at {n}"), bytes[..n].to_vec(), of));
        }
    }
    for (name, bytes, of) in cuts {
        let full = decode(of);
        let len = bytes.len();
        let d = decode_bytes(bytes, of, None).unwrap_or_else(|e| panic!("{name}: {e}"));
        let seconds = d.samples.len() as f64 / 16_000.0;
        assert!(seconds > 0.3, "{name}: {seconds} s");
        assert_eq!(
            d.warnings,
            [format!(
                "the file ends inside a packet at byte {len}, after {seconds:.3} s of audio: it looks truncated; \
                 the audio before the cut is transcribed"
            )],
            "{name}"
        );
        // Lossless audio is exact to the cut; lossy audio to 64 ms before it (the last packet's
        // overlap with the one that is missing, and the resampler's edge).
        let exact = if of.contains("alac") || of.contains("flac") { d.samples.len() } else { d.samples.len() - 1024 };
        assert_eq!(d.samples[..exact], full.samples[..exact], "{name}");
    }
}

/// 64 bytes in the middle of each file overwritten: AAC and FLAC packets that no longer decode
/// are skipped and named (an AAC-LC packet damaged into claiming AAC Main's predictor is
/// damage, not an unsupported file); a WebM whose blocks the reader loses after the damage
/// stops early, which the segment's stated duration tells. Each keeps the audio before the
/// damaged packet exactly as the whole file gives it (but its neighbour, 64 ms).
#[test]
fn damaged_mp4_and_matroska_files_keep_their_audio_with_a_warning() {
    for (of, warning, before) in [
        (
            "speech_44k1_stereo.m4a",
            "skipped 1 undecodable mp4/aac packet (the first at 1.138 s: aac: invalid data)",
            1.138,
        ),
        (
            "video_two_audio_tracks.mp4",
            "skipped 1 undecodable mp4/aac packet (the first at 1.131 s: aac: predictor data)",
            1.131,
        ),
        (
            "speech_flac.mkv",
            "skipped 1 undecodable matroska/flac packet (the first at 1.080 s: packet unreadable)",
            1.080,
        ),
        (
            "speech_opus.webm",
            "the file states 2.764 s, but its audio stops at 1.234 s: the file looks damaged there; the audio before \
             that point is transcribed",
            // Opus has no checksum: the packets the bytes fall in decode to noise from 1.144 s,
            // before the reader loses its way.
            1.144,
        ),
    ] {
        let mut bytes = std::fs::read(fixture(of)).unwrap();
        let middle = bytes.len() / 2;
        for (i, b) in bytes[middle..middle + 64].iter_mut().enumerate() {
            *b = 0xa5 ^ (middle + i) as u8;
        }
        let d = decode_bytes(bytes, of, None).unwrap_or_else(|e| panic!("{of}: {e}"));
        assert_eq!(d.warnings, [warning], "{of}");
        let whole = decode(of).samples;
        let exact = (before * 16_000.0) as usize - 1024;
        let first = d.samples.iter().zip(&whole).position(|(a, b)| a != b);
        assert!(
            first.is_none_or(|i| i >= exact),
            "{of}: the audio before the damage differs from sample {first:?} of {}",
            d.samples.len()
        );
    }
}
