//! Audio in the browser: whatever the caller has (16 kHz samples, an `AudioBuffer`, the
//! bytes of a file, a `Blob`) becomes 16 kHz mono samples. A transcription decodes encoded
//! audio as it reads it ([`to_audio`], with [`crate::stream`]); what that cannot read, and
//! `decodeAudio`, is decoded by the browser's WebAudio (`decodeAudioData` on an `OfflineAudioContext` running at 16 kHz,
//! which also resamples); an `AudioBuffer` at another rate is resampled by rendering it
//! through such a context. Channels are averaged, as the native command does.
//!
//! The samples stay in JavaScript memory ([`JsAudio`]): a transcription copies into the
//! module's memory only the stretch a window needs, so the WebAssembly memory (which never
//! shrinks) is the same for a 2-hour recording as for a minute.

use js_sys::{ArrayBuffer, Float32Array, Uint8Array};
use susurrus_whisper::Audio;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use web_sys::{AudioBuffer, Blob, OfflineAudioContext};

use crate::error::{describe, js_error};
use crate::stream::{self, Bytes, Decoding, JsSamples};

/// The name of the error a worker rejects encoded audio with when it cannot decode it (no
/// WebAudio there): the package's client decodes such audio on the page and sends samples.
pub const UNSUPPORTED_AUDIO: &str = "UnsupportedAudioError";

/// The sample rate Whisper takes.
pub const SAMPLE_RATE: f32 = 16000.0;

/// What [`to_samples`] accepts, for messages.
const ACCEPTED: &str = "audio must be a Float32Array of 16 kHz mono samples, an AudioBuffer, \
                        the bytes of an audio file (ArrayBuffer or Uint8Array) or a Blob";

/// Samples mixed down a block at a time (of the module's memory, per channel).
const MIX_BLOCK: u32 = 1 << 16;

/// 16 kHz mono samples in JavaScript memory, read by a transcription a stretch at a time.
pub struct JsAudio(pub Float32Array);

impl Audio for JsAudio {
    fn len(&self) -> usize {
        self.0.length() as usize
    }

    fn read(&self, start: usize, out: &mut [f32]) -> susurrus_whisper::Result<()> {
        let len = self.len();
        let end = (start + out.len()).min(len);
        let n = end.saturating_sub(start);
        if n > 0 {
            self.0.subarray(start as u32, end as u32).copy_to(&mut out[..n]);
        }
        out[n..].fill(0.0);
        Ok(())
    }
}

/// A transcription's audio: the caller's samples, or a decoded file with what was wrong with it.
pub struct Input {
    pub audio: Box<dyn Audio>,
    pub warnings: Vec<String>,
}

/// The audio of `input` for a transcription: samples as they are; a file (bytes, a `Blob`)
/// decoded as it is read into a [`JsSamples`] store, so that a long recording is never in
/// memory whole; what the streaming decoder cannot read, and `AudioBuffer`s, through WebAudio
/// where this context has it (else an error named [`UNSUPPORTED_AUDIO`]).
pub async fn to_audio(input: &JsValue) -> Result<Input, JsValue> {
    let bytes = if let Some(samples) = input.dyn_ref::<Float32Array>() {
        return Ok(Input { audio: Box::new(JsAudio(samples.clone())), warnings: Vec::new() });
    } else if let Some(blob) = input.dyn_ref::<Blob>() {
        match Bytes::blob(blob) {
            Some(bytes) => bytes,
            // A page cannot read a Blob a block at a time synchronously: read it whole.
            None => Bytes::Array(Uint8Array::new(
                &JsFuture::from(blob.array_buffer())
                    .await
                    .map_err(|e| js_error(format!("cannot read the audio Blob: {}", describe(&e))))?,
            )),
        }
    } else if let Some(buffer) = input.dyn_ref::<ArrayBuffer>() {
        Bytes::Array(Uint8Array::new(buffer))
    } else if let Some(view) = input.dyn_ref::<Uint8Array>() {
        Bytes::Array(view.clone())
    } else {
        let samples = to_samples(input).await?;
        return Ok(Input { audio: Box::new(JsAudio(samples)), warnings: Vec::new() });
    };
    if bytes.is_empty() {
        return Err(js_error("the audio is empty (0 bytes)"));
    }
    let decoding = stream::decode(bytes, JsSamples::new().await)
        .await
        .map_err(|e| js_error(format!("cannot decode the audio: {e}")))?;
    match decoding {
        Decoding::Decoded(decoded) => Ok(Input { audio: Box::new(decoded.samples), warnings: decoded.warnings }),
        Decoding::Unsupported(why) if web_audio() => {
            let samples = to_samples(input).await.map_err(|e| {
                js_error(format!("{} (the streaming decoder does not read it either: {why})", describe(&e)))
            })?;
            Ok(Input { audio: Box::new(JsAudio(samples)), warnings: Vec::new() })
        }
        Decoding::Unsupported(why) => {
            let error = js_sys::Error::new(&format!(
                "cannot decode this audio here: {why}; decode it with WebAudio on a page (decodeAudio) and pass \
                 the samples"
            ));
            error.set_name(UNSUPPORTED_AUDIO);
            Err(error.into())
        }
    }
}

/// Whether this context has WebAudio's offline context (pages do, workers do not).
fn web_audio() -> bool {
    js_sys::Reflect::has(&js_sys::global(), &"OfflineAudioContext".into()).unwrap_or(false)
}

/// 16 kHz mono samples of `input`, in JavaScript memory (a caller's `Float32Array` as it is).
pub async fn to_samples(input: &JsValue) -> Result<Float32Array, JsValue> {
    if let Some(samples) = input.dyn_ref::<Float32Array>() {
        return Ok(samples.clone());
    }
    if let Some(buffer) = input.dyn_ref::<AudioBuffer>() {
        return from_audio_buffer(buffer).await;
    }
    let bytes = if let Some(blob) = input.dyn_ref::<Blob>() {
        let buffer = JsFuture::from(blob.array_buffer())
            .await
            .map_err(|e| js_error(format!("cannot read the audio Blob: {}", describe(&e))))?;
        Uint8Array::new(&buffer)
    } else if let Some(buffer) = input.dyn_ref::<ArrayBuffer>() {
        // decodeAudioData takes (detaches) its buffer; work on a copy so the caller keeps theirs.
        Uint8Array::new(buffer).slice(0, buffer.byte_length())
    } else if let Some(view) = input.dyn_ref::<Uint8Array>() {
        view.slice(0, view.length())
    } else {
        return Err(js_error(ACCEPTED));
    };
    decode(bytes).await
}

/// Decodes the bytes of an audio file (any format the browser reads) to 16 kHz mono.
async fn decode(bytes: Uint8Array) -> Result<Float32Array, JsValue> {
    // Read before decodeAudioData detaches the buffer.
    let size = bytes.length();
    if size == 0 {
        return Err(js_error("the audio is empty (0 bytes)"));
    }
    let context = context(1, 1)?;
    let promise = context
        .decode_audio_data(&bytes.buffer())
        .map_err(|e| js_error(format!("cannot decode the audio: {}", describe(&e))))?;
    let decoded = JsFuture::from(promise).await.map_err(|e| {
        js_error(format!("cannot decode the audio ({size} bytes): {}; is it an audio file?", describe(&e)))
    })?;
    let buffer: AudioBuffer = decoded.dyn_into().map_err(|_| js_error("decodeAudioData returned no AudioBuffer"))?;
    from_audio_buffer(&buffer).await
}

/// An `AudioBuffer` at any rate as 16 kHz mono.
async fn from_audio_buffer(buffer: &AudioBuffer) -> Result<Float32Array, JsValue> {
    if buffer.sample_rate() == SAMPLE_RATE {
        return mix_down(buffer);
    }
    let channels = buffer.number_of_channels();
    let length = (f64::from(buffer.length()) * f64::from(SAMPLE_RATE) / f64::from(buffer.sample_rate())).ceil() as u32;
    if length == 0 {
        return Ok(Float32Array::new_with_length(0));
    }
    let context = context(channels, length)?;
    let render = |e: JsValue| js_error(format!("cannot resample the audio to 16 kHz: {}", describe(&e)));
    let source = context.create_buffer_source().map_err(render)?;
    source.set_buffer(Some(buffer));
    source.connect_with_audio_node(&context.destination()).map_err(render)?;
    source.start().map_err(render)?;
    let rendered = JsFuture::from(context.start_rendering().map_err(render)?).await.map_err(render)?;
    let rendered: AudioBuffer = rendered.dyn_into().map_err(|_| js_error("rendering returned no AudioBuffer"))?;
    mix_down(&rendered)
}

/// An offline WebAudio context at 16 kHz, or an error saying where WebAudio is missing.
fn context(channels: u32, length: u32) -> Result<OfflineAudioContext, JsValue> {
    OfflineAudioContext::new_with_number_of_channels_and_length_and_sample_rate(channels, length, SAMPLE_RATE).map_err(
        |e| {
            js_error(format!(
                "encoded audio is decoded with WebAudio, which is missing here ({}; workers have none): \
                 pass 16 kHz mono samples as a Float32Array, or use the Transcriber client, which decodes \
                 on the page",
                describe(&e)
            ))
        },
    )
}

/// The average of the buffer's channels, in JavaScript memory: one channel as the browser
/// holds it (copied, so the buffer may go), more mixed a block at a time.
fn mix_down(buffer: &AudioBuffer) -> Result<Float32Array, JsValue> {
    let channels = buffer.number_of_channels();
    // `getChannelData` itself, not web-sys's, which copies the channel into the module.
    let read = |c: u32| -> Result<Float32Array, JsValue> {
        let method = js_sys::Reflect::get(buffer, &"getChannelData".into())?.dyn_into::<js_sys::Function>()?;
        method.call1(buffer, &c.into())?.dyn_into::<Float32Array>()
    };
    let read = |c: u32| read(c).map_err(|e| js_error(format!("cannot read channel {c}: {}", describe(&e))));
    let first = read(0)?;
    if channels == 1 {
        return Ok(first.slice(0, first.length()));
    }
    let rest = (1..channels).map(read).collect::<Result<Vec<_>, _>>()?;
    let length = first.length();
    let mono = Float32Array::new_with_length(length);
    let scale = 1.0 / channels as f32;
    let mut block = Vec::new();
    let mut other = Vec::new();
    for start in (0..length).step_by(MIX_BLOCK as usize) {
        let end = (start + MIX_BLOCK).min(length);
        block.resize((end - start) as usize, 0.0);
        first.subarray(start, end).copy_to(&mut block);
        for channel in &rest {
            other.resize(block.len(), 0.0);
            channel.subarray(start, end).copy_to(&mut other);
            block.iter_mut().zip(&other).for_each(|(m, s)| *m += s);
        }
        block.iter_mut().for_each(|m| *m *= scale);
        mono.subarray(start, end).copy_from(&block);
    }
    Ok(mono)
}
