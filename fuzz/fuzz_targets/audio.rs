//! The audio front end: any bytes through `decode_bytes` (symphonia's probe, demuxers and
//! decoders for WAV, FLAC, MP3 and OGG Vorbis, the downmix, the 16 kHz resampler), as the
//! server and standard input hand files to it, without an extension hint.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| susurrus_fuzz::audio(data));
