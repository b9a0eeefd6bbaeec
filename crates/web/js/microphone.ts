// A microphone (any MediaStream with audio) into a live stream: an AudioWorklet on the audio
// thread gathers the input into chunks of 100 ms and posts them here, and each goes to the
// sink's `push`. The context runs at 16 kHz where the browser resamples the stream into it
// (Chromium, Safari), so chunks need no resampling; where it cannot (Firefox refuses to connect
// a stream to a context of another rate), the context runs at the device's rate and the sink
// resamples (the worker does, with the same resampler as files).

/** Where captured audio goes: a `LiveSink`, or anything that takes chunks the same way. */
export interface AudioSink {
  push(samples: Float32Array, sampleRate: number): void;
}

/** A microphone being captured. */
export interface Microphone {
  /** The rate of the chunks pushed (16000 where the browser resamples). */
  readonly sampleRate: number;
  /**
   * Stops capturing: the audio gathered since the last chunk is pushed, and the audio
   * context is closed (the MediaStream's tracks stay the caller's to stop).
   */
  stop(): Promise<void>;
}

/** Samples a chunk holds: 100 ms, as a 16 kHz stream wants them (a look needs a hop). */
const CHUNK_SECONDS = 0.1;

/**
 * Starts pushing `media`'s audio (mixed to mono) into `sink` in chunks of 100 ms. `media`
 * comes from `navigator.mediaDevices.getUserMedia({ audio: true })` or any other source of a
 * MediaStream with an audio track (Whisper hears best with the browser's `echoCancellation`,
 * `noiseSuppression` and `autoGainControl` off). A chunk the sink refuses stops the capture,
 * reported to `onError`.
 */
export async function captureMicrophone(
  media: MediaStream,
  sink: AudioSink,
  options: { onError?: (error: unknown) => void } = {},
): Promise<Microphone> {
  if (media.getAudioTracks().length === 0) throw new Error("the MediaStream has no audio track");
  let context = new AudioContext({ sampleRate: 16000 });
  let source: MediaStreamAudioSourceNode;
  try {
    source = context.createMediaStreamSource(media);
  } catch {
    await context.close();
    context = new AudioContext();
    source = context.createMediaStreamSource(media);
  }
  try {
    await context.audioWorklet.addModule(new URL("./microphone-worklet.js", import.meta.url));
  } catch (error) {
    await context.close();
    throw error;
  }
  const rate = context.sampleRate;
  const node = new AudioWorkletNode(context, "susurrus-microphone", {
    numberOfInputs: 1,
    numberOfOutputs: 1,
    channelCount: 1,
    channelCountMode: "explicit",
    channelInterpretation: "speakers",
    processorOptions: { chunk: Math.round(rate * CHUNK_SECONDS) },
  });
  let stopped = false;
  let flushed: (() => void) | null = null;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    source.disconnect();
    // The processor answers with what it gathered since its last chunk.
    await new Promise<void>((resolve) => {
      flushed = resolve;
      node.port.postMessage("flush");
    });
    node.disconnect();
    await context.close();
  };
  node.port.onmessage = (event: MessageEvent<{ samples: Float32Array; last: boolean }>) => {
    const { samples, last } = event.data;
    try {
      if (samples.length > 0) sink.push(samples, rate);
    } catch (error) {
      options.onError?.(error);
      void stop();
    }
    if (last) flushed?.();
  };
  source.connect(node);
  // A node with no path to the destination is not run everywhere; it outputs silence.
  node.connect(context.destination);
  if (context.state === "suspended") await context.resume();
  return { sampleRate: rate, stop };
}
