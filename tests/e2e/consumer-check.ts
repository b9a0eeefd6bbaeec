// Type-checked by tests/e2e/npm-package.mjs with `tsc --noEmit --strict` in a fresh folder where
// the packed `susurrus` package is installed: it uses the whole client API with the types the
// contract names, and the @ts-expect-error lines prove the types are precise (with `any` they
// would be unused directives, which tsc reports as errors). Never run, only compiled.

import {
  LiveSink,
  Transcriber,
  captureMicrophone,
  clearModelCache,
  decodeAudio,
  formatTranscript,
  version,
  type AudioInput,
  type BackendChoice,
  type LiveSummary,
  type LiveText,
  type LoadOptions,
  type Microphone,
  type LoadProgress,
  type ModelInfo,
  type ModelSource,
  type Segment,
  type StreamOptions,
  type TranscribeOptions,
  type TranscribeResult,
  type VadOptions,
} from "susurrus";

export async function useEverything(files: FileList, chosen: File[], blob: Blob): Promise<string> {
  const lines: string[] = [];
  const backend: BackendChoice = "auto";
  const loadOptions: LoadOptions = {
    backend,
    cache: true,
    onProgress: (p: LoadProgress) => {
      const total: number | null = p.total;
      const fromCache: boolean = p.fromCache;
      lines.push(`${p.file} ${p.loaded} of ${total ?? "?"} ${fromCache}`);
    },
    vad: "/vad/silero_vad_v6.onnx",
  };
  const transcriber: Transcriber = await Transcriber.load("/model/", loadOptions);
  const sources: ModelSource[] = [files, chosen, "model/"];
  const fromFiles = await Transcriber.load(sources[0], { backend: "cpu", cache: false });
  fromFiles.dispose();

  const info: ModelInfo = transcriber.info;
  const ran: "webgpu" | "cpu" = info.backend;
  lines.push(`${ran} ${info.adapter} ${info.fromCache} ${info.loadMs.toFixed(0)} ${info.bytes}`);
  const languages: string[] = info.languages;
  const multilingual: boolean = info.multilingual;
  const vadLoaded: boolean = info.vad;
  lines.push(`${multilingual} ${languages.join(" ")} ${vadLoaded}`);

  const pcm: Float32Array = await decodeAudio(blob);
  const inputs: AudioInput[] = [pcm, blob, new ArrayBuffer(8), new Uint8Array(8)];
  const controller = new AbortController();
  const options: TranscribeOptions = {
    language: "en",
    task: "transcribe",
    timestamps: true,
    temperatures: [0, 0.2, 0.4],
    bestOf: 5,
    seed: 7,
    initialPrompt: "A farmer gives directions.",
    conditionOnPreviousText: true,
    onSegment: (s: Segment) => {
      const tokens: number[] = s.tokens;
      lines.push(`${s.start} ${s.end} ${s.text} ${tokens.length} ${s.avgLogprob} ${s.noSpeechProb} ${s.temperature} ${s.compressionRatio}`);
    },
    onProgress: ({ done, total }) => lines.push(`${done.toFixed(1)} of ${total.toFixed(1)} s`),
    signal: controller.signal,
  };
  const result: TranscribeResult = await transcriber.transcribe(inputs[0], options);
  const rtf: number | null = result.timings.rtf;
  const { decodeMs, transcribeMs, audioDurationS } = result.timings;
  const first: Segment | undefined = result.segments[0];
  const backendRan: "webgpu" | "cpu" = result.backend;
  const languageProbability: number = result.languageProbability;
  lines.push(`${result.language} ${languageProbability.toFixed(3)} ${result.adapter} ${backendRan} ${decodeMs + transcribeMs + audioDurationS} ${rtf ?? "n/a"} ${first?.text ?? ""}`);
  for (const format of ["txt", "srt", "vtt", "json"] as const) lines.push(formatTranscript(result, format));
  const vadOptions: VadOptions = {
    threshold: 0.5,
    negThreshold: null,
    minSpeechDurationMs: 0,
    maxSpeechDurationS: null,
    minSilenceDurationMs: 2000,
    speechPadMs: 400,
  };
  const speech = await transcriber.transcribe(pcm, { vad: true, vadOptions });
  lines.push(speech.text);
  const streamOptions: StreamOptions = {
    language: "en",
    hop: 1,
    vad: true,
    minSilence: 0.5,
    beamSize: 1,
    onPartial: (p: LiveText) => lines.push(`partial ${p.text} ${p.start} ${p.end}`),
    onCommitted: (c: LiveText) => lines.push(`committed ${c.words.map((w) => `${w.word}@${w.start}`).join(" ")}`),
    onError: (e: Error) => lines.push(e.name),
    signal: controller.signal,
  };
  const sink: LiveSink = await transcriber.stream(streamOptions);
  sink.push(pcm);
  sink.push(pcm, 16000);
  const media = await navigator.mediaDevices.getUserMedia({ audio: true });
  const microphone: Microphone = await captureMicrophone(media, sink, { onError: (e) => lines.push(String(e)) });
  const rate: number = microphone.sampleRate;
  await microphone.stop();
  const summary: LiveSummary = await sink.finish();
  lines.push(`${rate} ${summary.audioSeconds} ${summary.busyMs} ${summary.realTimeFactor}`);
  const cleared: boolean = await clearModelCache();
  const packageVersion: string = version();
  lines.push(`${cleared} ${packageVersion}`);

  // @ts-expect-error: "metal" is no backend choice
  await Transcriber.load("/model/", { backend: "metal" });
  // @ts-expect-error: load's vad is the network's URL, not a flag
  await Transcriber.load("/model/", { vad: true });
  // @ts-expect-error: "docx" is no transcript format
  formatTranscript(result, "docx");
  // @ts-expect-error: a segment's text is a string
  const notANumber: number = result.segments[0].text;
  // @ts-expect-error: a transcription needs audio
  await transcriber.transcribe();
  // @ts-expect-error: a stream takes Float32Array chunks
  sink.push([0, 0.1]);
  // @ts-expect-error: onSegment is transcribe's; a stream has onPartial and onCommitted
  await transcriber.stream({ onSegment: () => {} });
  // @ts-expect-error: the model's info is read-only
  transcriber.info = info;

  transcriber.dispose();
  return [...lines, String(notANumber)].join("\n");
}
