// The AudioWorklet processor of captureMicrophone (microphone.ts): runs on the audio thread,
// gathers its mono input (128 frames a render quantum) into chunks of `chunk` frames and
// posts each to the page, handing its memory over. "flush" posts what was gathered, as the
// last message.

/** The AudioWorkletGlobalScope's names (not in TypeScript's DOM library). */
declare class AudioWorkletProcessor {
  readonly port: MessagePort;
}
declare function registerProcessor(name: string, processor: new (options: { processorOptions: { chunk: number } }) => AudioWorkletProcessor): void;

class MicrophoneProcessor extends AudioWorkletProcessor {
  #chunk: Float32Array;
  #filled = 0;
  #done = false;

  constructor(options: { processorOptions: { chunk: number } }) {
    super();
    this.#chunk = new Float32Array(options.processorOptions.chunk);
    this.port.onmessage = () => {
      this.#post(true);
      this.#done = true;
    };
  }

  #post(last: boolean): void {
    const samples = this.#chunk.slice(0, this.#filled);
    this.port.postMessage({ samples, last }, [samples.buffer]);
    this.#filled = 0;
  }

  process(inputs: Float32Array[][]): boolean {
    const input = inputs[0]?.[0];
    if (this.#done) return false;
    if (input === undefined) return true;
    let at = 0;
    while (at < input.length) {
      const take = Math.min(input.length - at, this.#chunk.length - this.#filled);
      this.#chunk.set(input.subarray(at, at + take), this.#filled);
      this.#filled += take;
      at += take;
      if (this.#filled === this.#chunk.length) this.#post(false);
    }
    return true;
  }
}

registerProcessor("susurrus-microphone", MicrophoneProcessor);

export {};
