/**
 * How far live text runs behind speech, and how close it is to a reference: what the demo
 * page's live captions, the benchmark page's stream measure and the live e2e test compute, by
 * the rules `susurrus bench --stream` uses (whisper's live::replay and wer.rs).
 */

/** A word as both rules compare them: lowercase letters, digits and apostrophes. */
export function normalizedWord(word) {
  return word.toLowerCase().replace(/[^\p{L}\p{N}']/gu, "");
}

/** The value at `fraction` of the sorted values (0.5: the median, as the native bench takes it). */
export function percentile(values, fraction) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * fraction))];
}

export function median(values) {
  return percentile(values, 0.5);
}

/** Word error rate of `hypothesis` against `reference`: the word-level edit distance over the
 * reference's word count, on normalized words (an empty reference: 0 for an empty hypothesis). */
export function wordErrorRate(reference, hypothesis) {
  const words = (text) => text.split(/\s+/).map(normalizedWord).filter((w) => w.length > 0);
  const [r, h] = [words(reference), words(hypothesis)];
  let row = Array.from({ length: h.length + 1 }, (_, j) => j);
  for (let i = 0; i < r.length; i++) {
    const next = [i + 1];
    for (let j = 0; j < h.length; j++) next.push(Math.min(row[j] + (r[i] === h[j] ? 0 : 1), row[j + 1] + 1, next[j] + 1));
    row = next;
  }
  return r.length === 0 ? (h.length === 0 ? 0 : 1) : row[h.length] / r.length;
}

/**
 * For every committed word, the seconds from its end in the audio to the first event that had
 * it (the same text starting within half a second) and to its commit. The audio's clock starts
 * when its first sample was captured: the first chunk's arrival less its length. Call `push`
 * with every chunk as it is pushed, `partial` and `commit` with the stream's events.
 */
export class Latency {
  origin = null;
  seen = []; // { word, start, at } of words not yet committed
  firstSeen = [];
  committed = [];

  push(samples, rate) {
    this.origin ??= performance.now() - (samples.length / rate) * 1000;
  }

  now() {
    return this.origin === null ? 0 : (performance.now() - this.origin) / 1000;
  }

  #find(word) {
    const norm = normalizedWord(word.word);
    return this.seen.find((s) => s.word === norm && Math.abs(s.start - word.start) < 0.5);
  }

  partial(text) {
    const at = this.now();
    for (const word of text.words) {
      if (!this.#find(word)) this.seen.push({ word: normalizedWord(word.word), start: word.start, at });
    }
  }

  commit(text) {
    const at = this.now();
    for (const word of text.words) {
      const first = this.#find(word);
      this.firstSeen.push((first?.at ?? at) - word.end);
      this.committed.push(at - word.end);
    }
    const end = text.words.at(-1)?.end ?? 0;
    this.seen = this.seen.filter((s) => s.start > end - 0.5);
  }
}
