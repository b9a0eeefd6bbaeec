//! The browser's audio decoders (WebCodecs `AudioDecoder`), declared here: web-sys has them
//! only behind an unstable flag. A decoder takes a container's packets as
//! `EncodedAudioChunk`s and hands back `AudioData` through a callback; [`Decoder`] keeps what
//! came back in a queue for the decoding loop to drain, and the first error.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

use js_sys::{Float32Array, Object, Reflect, Uint8Array};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;

use crate::error::describe;

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_name = AudioDecoder)]
    type AudioDecoder;
    #[wasm_bindgen(constructor, catch, js_class = "AudioDecoder")]
    fn new(init: &Object) -> Result<AudioDecoder, JsValue>;
    #[wasm_bindgen(method, catch)]
    fn configure(this: &AudioDecoder, config: &Object) -> Result<(), JsValue>;
    #[wasm_bindgen(method, catch)]
    fn decode(this: &AudioDecoder, chunk: &EncodedAudioChunk) -> Result<(), JsValue>;
    #[wasm_bindgen(method)]
    fn flush(this: &AudioDecoder) -> js_sys::Promise;
    #[wasm_bindgen(method, catch)]
    fn close(this: &AudioDecoder) -> Result<(), JsValue>;
    #[wasm_bindgen(method, getter, js_name = decodeQueueSize)]
    fn decode_queue_size(this: &AudioDecoder) -> u32;
    #[wasm_bindgen(static_method_of = AudioDecoder, js_class = "AudioDecoder", js_name = isConfigSupported, catch)]
    fn is_config_supported(config: &Object) -> Result<js_sys::Promise, JsValue>;

    #[wasm_bindgen(js_name = EncodedAudioChunk)]
    type EncodedAudioChunk;
    #[wasm_bindgen(constructor, catch, js_class = "EncodedAudioChunk")]
    fn new(init: &Object) -> Result<EncodedAudioChunk, JsValue>;

    /// Decoded audio: frames of every channel at a rate, in the browser's memory until closed.
    #[wasm_bindgen(js_name = AudioData)]
    pub type AudioData;
    #[wasm_bindgen(method, getter, js_name = numberOfFrames)]
    pub fn number_of_frames(this: &AudioData) -> u32;
    #[wasm_bindgen(method, getter, js_name = numberOfChannels)]
    pub fn number_of_channels(this: &AudioData) -> u32;
    #[wasm_bindgen(method, getter, js_name = sampleRate)]
    pub fn sample_rate(this: &AudioData) -> f32;
    #[wasm_bindgen(method, catch, js_name = copyTo)]
    fn copy_to(this: &AudioData, destination: &Float32Array, options: &Object) -> Result<(), JsValue>;
    #[wasm_bindgen(method)]
    pub fn close(this: &AudioData);
}

/// Whether this context has WebCodecs' audio decoder.
pub fn available() -> bool {
    Reflect::has(&js_sys::global(), &"AudioDecoder".into()).unwrap_or(false)
}

/// What configures a decoder: the codec string WebCodecs names it by, the stream's rate and
/// channels, and the codec's setup bytes where it has them.
pub struct Config {
    pub codec: String,
    pub sample_rate: u32,
    pub channels: u32,
    pub description: Option<Vec<u8>>,
}

impl Config {
    fn to_js(&self) -> Object {
        let config = Object::new();
        let set = |key: &str, value: JsValue| {
            let _ = Reflect::set(&config, &key.into(), &value);
        };
        set("codec", self.codec.as_str().into());
        set("sampleRate", self.sample_rate.into());
        set("numberOfChannels", self.channels.into());
        if let Some(description) = &self.description {
            set("description", Uint8Array::from(&description[..]).into());
        }
        config
    }
}

/// A configured decoder and what it has handed back.
pub struct Decoder {
    decoder: AudioDecoder,
    decoded: Rc<RefCell<VecDeque<AudioData>>>,
    error: Rc<RefCell<Option<String>>>,
    /// The callbacks, kept alive as long as the decoder.
    _output: Closure<dyn FnMut(AudioData)>,
    _failed: Closure<dyn FnMut(JsValue)>,
    chunks: u64,
}

impl Decoder {
    /// A decoder for `config`, or `Ok(None)` where the browser cannot decode it.
    pub async fn open(config: &Config) -> Result<Option<Decoder>, String> {
        let js = config.to_js();
        let supported = AudioDecoder::is_config_supported(&js).map_err(|e| describe(&e))?;
        let supported = JsFuture::from(supported).await.map_err(|e| describe(&e))?;
        if Reflect::get(&supported, &"supported".into()).ok().and_then(|s| s.as_bool()) != Some(true) {
            return Ok(None);
        }
        let decoded = Rc::new(RefCell::new(VecDeque::new()));
        let error = Rc::new(RefCell::new(None));
        let output = {
            let decoded = decoded.clone();
            Closure::<dyn FnMut(AudioData)>::new(move |data| decoded.borrow_mut().push_back(data))
        };
        let failed = {
            let error = error.clone();
            Closure::<dyn FnMut(JsValue)>::new(move |e: JsValue| {
                error.borrow_mut().get_or_insert_with(|| describe(&e));
            })
        };
        let init = Object::new();
        let _ = Reflect::set(&init, &"output".into(), output.as_ref());
        let _ = Reflect::set(&init, &"error".into(), failed.as_ref());
        let decoder = AudioDecoder::new(&init).map_err(|e| describe(&e))?;
        decoder.configure(&js).map_err(|e| describe(&e))?;
        Ok(Some(Decoder { decoder, decoded, error, _output: output, _failed: failed, chunks: 0 }))
    }

    /// Queues one packet. Every packet of an audio stream is a key frame; the timestamps only
    /// need to increase.
    pub fn decode(&mut self, packet: &[u8]) -> Result<(), String> {
        self.failed()?;
        let init = Object::new();
        let _ = Reflect::set(&init, &"type".into(), &"key".into());
        let _ = Reflect::set(&init, &"timestamp".into(), &(self.chunks as f64).into());
        let _ = Reflect::set(&init, &"data".into(), &Uint8Array::from(packet).into());
        self.chunks += 1;
        let chunk = EncodedAudioChunk::new(&init).map_err(|e| describe(&e))?;
        self.decoder.decode(&chunk).map_err(|e| describe(&e))
    }

    /// Packets queued and not yet decoded.
    pub fn queued(&self) -> u32 {
        self.decoder.decode_queue_size()
    }

    /// The next decoded buffer, if one is waiting.
    pub fn next(&self) -> Option<AudioData> {
        self.decoded.borrow_mut().pop_front()
    }

    /// The decoder's error, if it failed (it decodes nothing after one).
    pub fn failed(&self) -> Result<(), String> {
        match &*self.error.borrow() {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    /// Waits until every queued packet is decoded.
    pub async fn flush(&self) -> Result<(), String> {
        JsFuture::from(self.decoder.flush()).await.map_err(|e| describe(&e))?;
        self.failed()
    }
}

impl Drop for Decoder {
    fn drop(&mut self) {
        // Closing a decoder that already failed throws; there is nothing left to release.
        let _ = self.decoder.close();
        while let Some(data) = self.next() {
            data.close();
        }
    }
}

/// The frames of `data`, interleaved, into `out` (replaced); `plane` is scratch space.
pub fn interleaved(data: &AudioData, plane: &mut Vec<f32>, out: &mut Vec<f32>) -> Result<(), String> {
    let (frames, channels) = (data.number_of_frames() as usize, data.number_of_channels() as usize);
    out.clear();
    out.resize(frames * channels, 0.0);
    plane.resize(frames, 0.0);
    let js = Float32Array::new_with_length(frames as u32);
    for channel in 0..channels {
        let options = Object::new();
        let _ = Reflect::set(&options, &"planeIndex".into(), &(channel as u32).into());
        let _ = Reflect::set(&options, &"format".into(), &"f32-planar".into());
        data.copy_to(&js, &options).map_err(|e| format!("cannot read decoded audio: {}", describe(&e)))?;
        js.copy_to(plane);
        for (frame, &sample) in plane.iter().enumerate() {
            out[frame * channels + channel] = sample;
        }
    }
    Ok(())
}
