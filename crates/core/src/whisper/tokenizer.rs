//! Whisper's tokenizer, decode side: token ids to text.
//!
//! Whisper uses GPT-2's byte-level BPE. Every vocabulary entry is a string of stand-in
//! characters, one per byte ([`byte_to_char`] maps each of the 256 bytes to a printable
//! character), so decoding is: map each token back to its bytes, concatenate, and read the
//! bytes as UTF-8 once at the end. A character may be split across tokens, so no token is
//! converted on its own.
//!
//! Two files carry the vocabulary and both are read here:
//! - `tokenizer.json` (Hugging Face): `model.vocab` (byte-level strings) plus `added_tokens`
//!   (special tokens, stored as plain text). Older Whisper exports list no timestamp tokens.
//! - `vocabulary.txt` (CTranslate2): one byte-level token per line, the id is the line number;
//!   it lists every id the model can predict, timestamps included.
//!
//! Special ids are looked up by their text (`<|endoftext|>`, ...), never assumed: multilingual
//! vocabularies have one more token than English-only ones, so every id after
//! `<|endoftext|>` shifts.

use std::collections::HashMap;
use std::path::Path;

use serde::Deserialize;

use crate::error::{Error, Result};

/// Spacing of Whisper's timestamp tokens when the vocabulary files do not list them:
/// one per 2 encoder positions = 320 samples at 16 kHz.
pub const DEFAULT_TIMESTAMP_STEP: f32 = 0.02;

/// Number of timestamp tokens (`<|0.00|>` … `<|30.00|>`) when the files do not list them.
pub const DEFAULT_TIMESTAMP_COUNT: u32 = 1501;

/// Largest id accepted from a file: far above any Whisper vocabulary (51866), low enough
/// that a corrupt id cannot make the id table allocate gigabytes.
const MAX_ID: u32 = 1 << 20;

/// Whether [`Tokenizer::decode`] writes special tokens (`<|startoftranscript|>`,
/// `<|0.00|>`, ...) into the text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpecialTokens {
    Skip,
    Keep,
}

/// The ids Whisper's decoding needs, read from the vocabulary files.
#[derive(Clone, Debug, PartialEq)]
pub struct SpecialIds {
    /// `<|endoftext|>`: ends a transcript; every id from here on is special.
    pub end_of_text: u32,
    /// `<|startoftranscript|>`: first token of every prompt.
    pub start_of_transcript: u32,
    /// `<|translate|>` task token.
    pub translate: u32,
    /// `<|transcribe|>` task token.
    pub transcribe: u32,
    /// `<|startoflm|>`, where the vocabulary has it.
    pub start_of_lm: Option<u32>,
    /// `<|startofprev|>`: introduces the previous window's text as a prompt.
    pub start_of_prev: u32,
    /// `<|nospeech|>` (large-v3) or `<|nocaptions|>` (earlier models): its probability at the
    /// first step is the no-speech probability.
    pub no_speech: u32,
    /// `<|notimestamps|>`: asks for text without timestamp tokens.
    pub no_timestamps: u32,
    /// `<|0.00|>`: the first timestamp id.
    pub timestamp_begin: u32,
    /// How many timestamp ids follow from `timestamp_begin` on.
    pub timestamp_count: u32,
    /// Seconds between consecutive timestamp ids.
    pub timestamp_step: f32,
}

/// One vocabulary entry.
#[derive(Clone, Debug)]
struct Entry {
    bytes: Box<[u8]>,
    special: bool,
}

/// A decoding tokenizer for Whisper vocabularies.
#[derive(Clone, Debug)]
pub struct Tokenizer {
    /// Indexed by id; `None` for ids the files leave out.
    entries: Vec<Option<Entry>>,
    ids: SpecialIds,
    /// Language codes (`"en"`, `"de"`, ...) and their token ids, in vocabulary order.
    languages: Vec<(String, u32)>,
}

/// GPT-2's byte-to-character table: bytes that are printable Latin-1 characters stand for
/// themselves, the other 68 take the characters from U+0100 on, in byte order.
fn byte_to_char() -> [char; 256] {
    let printable = |b: u32| (0x21..=0x7E).contains(&b) || (0xA1..=0xAC).contains(&b) || (0xAE..=0xFF).contains(&b);
    let mut table = ['\0'; 256];
    let mut next = 0x100;
    for (b, slot) in (0u32..).zip(table.iter_mut()) {
        let code = if printable(b) {
            b
        } else {
            next += 1;
            next - 1
        };
        *slot = char::from_u32(code).unwrap_or('\0');
    }
    table
}

/// The inverse of [`byte_to_char`].
fn char_to_byte() -> HashMap<char, u8> {
    (0u8..=255).zip(byte_to_char()).map(|(b, c)| (c, b)).collect()
}

/// Bytes of a byte-level token string; `None` when a character is not a byte stand-in.
fn token_bytes(token: &str, table: &HashMap<char, u8>) -> Option<Box<[u8]>> {
    token.chars().map(|c| table.get(&c).copied()).collect()
}

/// Seconds written in a timestamp token's text (`<|1.24|>` -> 1.24).
fn parse_timestamp(text: &[u8]) -> Option<f32> {
    let inner = text.strip_prefix(b"<|")?.strip_suffix(b"|>")?;
    if inner.is_empty() || !inner.iter().all(|b| b.is_ascii_digit() || *b == b'.') {
        return None;
    }
    std::str::from_utf8(inner).ok()?.parse().ok()
}

fn model_error(file: &str, msg: impl Into<String>) -> Error {
    Error::Model { file: file.to_string(), msg: msg.into() }
}

/// The parts of a Hugging Face `tokenizer.json` the decoder reads.
#[derive(Deserialize)]
struct TokenizerJson {
    model: BpeJson,
    #[serde(default)]
    added_tokens: Vec<AddedTokenJson>,
    decoder: Option<DecoderJson>,
}

#[derive(Deserialize)]
struct BpeJson {
    #[serde(rename = "type")]
    kind: Option<String>,
    vocab: HashMap<String, u32>,
}

#[derive(Deserialize)]
struct AddedTokenJson {
    id: u32,
    content: String,
    #[serde(default)]
    special: bool,
}

#[derive(Deserialize)]
struct DecoderJson {
    #[serde(rename = "type")]
    kind: String,
}

impl Tokenizer {
    /// Loads the tokenizer of a model folder: `vocabulary.txt` where present (it lists every
    /// id the model predicts, timestamps included), else `tokenizer.json`.
    pub fn from_model_dir(dir: impl AsRef<Path>) -> Result<Tokenizer> {
        let dir = dir.as_ref();
        let vocabulary = dir.join("vocabulary.txt");
        if vocabulary.is_file() {
            return Tokenizer::from_vocabulary_file(vocabulary);
        }
        let json = dir.join("tokenizer.json");
        if json.is_file() {
            return Tokenizer::from_tokenizer_json_file(json);
        }
        Err(model_error(&dir.display().to_string(), "no vocabulary.txt or tokenizer.json in this folder"))
    }

    /// Loads a Hugging Face `tokenizer.json` file.
    pub fn from_tokenizer_json_file(path: impl AsRef<Path>) -> Result<Tokenizer> {
        let path = path.as_ref();
        let name = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|e| model_error(&name, format!("cannot read: {e}")))?;
        Tokenizer::from_tokenizer_json(&bytes, &name)
    }

    /// Loads a CTranslate2 `vocabulary.txt` file.
    pub fn from_vocabulary_file(path: impl AsRef<Path>) -> Result<Tokenizer> {
        let path = path.as_ref();
        let name = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|e| model_error(&name, format!("cannot read: {e}")))?;
        Tokenizer::from_vocabulary(&bytes, &name)
    }

    /// Parses the bytes of a `tokenizer.json`; `file` names it in errors.
    pub fn from_tokenizer_json(bytes: &[u8], file: &str) -> Result<Tokenizer> {
        let json: TokenizerJson =
            serde_json::from_slice(bytes).map_err(|e| model_error(file, format!("not a tokenizer.json: {e}")))?;
        if let Some(kind) = json.model.kind.as_deref().filter(|k| *k != "BPE") {
            return Err(model_error(file, format!("model.type is \"{kind}\", expected \"BPE\"")));
        }
        if let Some(kind) = json.decoder.as_ref().map(|d| d.kind.as_str()).filter(|k| *k != "ByteLevel") {
            return Err(model_error(file, format!("decoder.type is \"{kind}\", expected \"ByteLevel\"")));
        }
        let table = char_to_byte();
        let mut entries: Vec<Option<Entry>> = Vec::new();
        let mut place = |id: u32, entry: Entry, what: &str| -> Result<()> {
            if id > MAX_ID {
                return Err(model_error(file, format!("{what} has id {id}, above the limit {MAX_ID}")));
            }
            let slot = id as usize;
            if entries.len() <= slot {
                entries.resize(slot + 1, None);
            }
            entries[slot] = Some(entry);
            Ok(())
        };
        let mut vocab: Vec<(&String, u32)> = json.model.vocab.iter().map(|(t, &id)| (t, id)).collect();
        vocab.sort_by_key(|&(token, id)| (id, token));
        for pair in vocab.windows(2) {
            if pair[0].1 == pair[1].1 {
                return Err(model_error(
                    file,
                    format!("model.vocab gives id {} to both {:?} and {:?}", pair[0].1, pair[0].0, pair[1].0),
                ));
            }
        }
        for (token, id) in vocab {
            let bytes = token_bytes(token, &table).ok_or_else(|| {
                model_error(file, format!("model.vocab token {token:?} (id {id}) is not a byte-level token"))
            })?;
            place(id, Entry { bytes, special: false }, &format!("model.vocab token {token:?}"))?;
        }
        // Added tokens are stored as plain text (not byte-level) and win over a vocab entry
        // with the same id (`<|endoftext|>` is in both).
        for added in &json.added_tokens {
            let entry = Entry { bytes: added.content.as_bytes().into(), special: added.special };
            place(added.id, entry, &format!("added token {:?}", added.content))?;
        }
        Tokenizer::from_entries(entries, file, "model.vocab and added_tokens")
    }

    /// Parses the bytes of a `vocabulary.txt`; `file` names it in errors.
    pub fn from_vocabulary(bytes: &[u8], file: &str) -> Result<Tokenizer> {
        let text = std::str::from_utf8(bytes)
            .map_err(|e| model_error(file, format!("invalid UTF-8 at byte offset {}", e.valid_up_to())))?;
        let text = text.strip_suffix('\n').unwrap_or(text);
        let table = char_to_byte();
        let mut entries = Vec::new();
        for (index, line) in text.split('\n').enumerate() {
            let line_no = index + 1;
            if index > MAX_ID as usize {
                return Err(model_error(file, format!("more than {} lines", MAX_ID as usize + 1)));
            }
            let token = line.strip_suffix('\r').unwrap_or(line);
            if token.is_empty() {
                return Err(model_error(file, format!("line {line_no} (id {index}) is empty")));
            }
            let bytes = token_bytes(token, &table).ok_or_else(|| {
                model_error(file, format!("line {line_no} (id {index}): {token:?} is not a byte-level token"))
            })?;
            entries.push(Some(Entry { bytes, special: false }));
        }
        // The file has no special flag: Whisper's special tokens are the `<|...|>` entries
        // from `<|endoftext|>` on.
        let eot = entries.iter().position(|e| e.as_ref().is_some_and(|e| &*e.bytes == b"<|endoftext|>"));
        if let Some(eot) = eot {
            for entry in entries.iter_mut().skip(eot).flatten() {
                entry.special = entry.bytes.starts_with(b"<|") && entry.bytes.ends_with(b"|>");
            }
        }
        Tokenizer::from_entries(entries, file, "the file")
    }

    /// Finds the special ids, timestamps and languages in a complete id table.
    fn from_entries(entries: Vec<Option<Entry>>, file: &str, source: &str) -> Result<Tokenizer> {
        let mut by_text: HashMap<&[u8], u32> = HashMap::new();
        for (id, entry) in (0u32..).zip(&entries) {
            let Some(entry) = entry else { continue };
            if !(entry.bytes.starts_with(b"<|") && entry.bytes.ends_with(b"|>")) {
                continue;
            }
            if let Some(first) = by_text.insert(&entry.bytes[..], id) {
                return Err(model_error(
                    file,
                    format!("{} appears twice, at ids {first} and {id}", String::from_utf8_lossy(&entry.bytes)),
                ));
            }
        }
        let find = |text: &str| by_text.get(text.as_bytes()).copied();
        let require = |text: &str| find(text).ok_or_else(|| model_error(file, format!("{source} has no {text}")));

        let end_of_text = require("<|endoftext|>")?;
        let start_of_transcript = require("<|startoftranscript|>")?;
        let translate = require("<|translate|>")?;
        let transcribe = require("<|transcribe|>")?;
        let start_of_prev = require("<|startofprev|>")?;
        let no_speech = find("<|nospeech|>")
            .or_else(|| find("<|nocaptions|>"))
            .ok_or_else(|| model_error(file, format!("{source} has neither <|nospeech|> nor <|nocaptions|>")))?;
        let no_timestamps = require("<|notimestamps|>")?;

        let (timestamp_begin, timestamp_count, timestamp_step) = match find("<|0.00|>") {
            Some(begin) => {
                let (count, step) = Tokenizer::listed_timestamps(&entries, begin, file)?;
                (begin, count, step)
            }
            // Older tokenizer.json files stop at <|notimestamps|>; Whisper puts the
            // timestamps right after it.
            None => (no_timestamps + 1, DEFAULT_TIMESTAMP_COUNT, DEFAULT_TIMESTAMP_STEP),
        };

        // Language tokens sit between <|startoftranscript|> and <|translate|>.
        let mut languages = Vec::new();
        for id in start_of_transcript + 1..translate {
            let code = entries
                .get(id as usize)
                .and_then(Option::as_ref)
                .and_then(|e| e.bytes.strip_prefix(b"<|"))
                .and_then(|b| b.strip_suffix(b"|>"))
                .filter(|code| !code.is_empty() && code.iter().all(u8::is_ascii_lowercase))
                .ok_or_else(|| {
                    model_error(
                        file,
                        format!("id {id}, between <|startoftranscript|> and <|translate|>, is not a language token"),
                    )
                })?;
            languages.push((String::from_utf8_lossy(code).into_owned(), id));
        }

        let ids = SpecialIds {
            end_of_text,
            start_of_transcript,
            translate,
            transcribe,
            start_of_lm: find("<|startoflm|>"),
            start_of_prev,
            no_speech,
            no_timestamps,
            timestamp_begin,
            timestamp_count,
            timestamp_step,
        };
        Ok(Tokenizer { entries, ids, languages })
    }

    /// Counts the consecutive timestamp tokens listed from `begin` on and reads their step;
    /// each must name its own time (`begin + i` is `<|i*step|>`).
    fn listed_timestamps(entries: &[Option<Entry>], begin: u32, file: &str) -> Result<(u32, f32)> {
        let time_of = |id: usize| entries.get(id).and_then(Option::as_ref).and_then(|e| parse_timestamp(&e.bytes));
        let begin = begin as usize;
        let step = match time_of(begin + 1) {
            Some(next) if next > 0.0 => next,
            _ => return Ok((1, DEFAULT_TIMESTAMP_STEP)),
        };
        let mut count = 0usize;
        while let Some(seconds) = time_of(begin + count) {
            let expected = count as f32 * step;
            if (seconds - expected).abs() > step / 4.0 {
                return Err(model_error(
                    file,
                    format!("timestamp token at id {} says {seconds} s, expected {expected:.2} s", begin + count),
                ));
            }
            count += 1;
        }
        Ok((count as u32, step))
    }

    /// The special ids.
    pub fn special_ids(&self) -> &SpecialIds {
        &self.ids
    }

    /// Language codes and their token ids, in vocabulary order.
    pub fn languages(&self) -> &[(String, u32)] {
        &self.languages
    }

    /// The token id of a language code (`"en"` -> `<|en|>`).
    pub fn language_id(&self, code: &str) -> Option<u32> {
        self.languages.iter().find(|(c, _)| c == code).map(|&(_, id)| id)
    }

    /// Number of ids: one past the highest id listed or implied (timestamps).
    pub fn vocab_size(&self) -> usize {
        let timestamps_end = self.ids.timestamp_begin as usize + self.ids.timestamp_count as usize;
        self.entries.len().max(timestamps_end)
    }

    /// Whether `id` is a timestamp token.
    pub fn is_timestamp(&self, id: u32) -> bool {
        id >= self.ids.timestamp_begin && id - self.ids.timestamp_begin < self.ids.timestamp_count
    }

    /// Whether `id` is a special token (control tokens, languages, timestamps).
    pub fn is_special(&self, id: u32) -> bool {
        self.is_timestamp(id) || self.entry(id).is_some_and(|e| e.special)
    }

    /// The time a timestamp token stands for, in seconds; `None` for other ids.
    pub fn timestamp_seconds(&self, id: u32) -> Option<f32> {
        self.is_timestamp(id).then(|| (id - self.ids.timestamp_begin) as f32 * self.ids.timestamp_step)
    }

    fn entry(&self, id: u32) -> Option<&Entry> {
        self.entries.get(id as usize).and_then(Option::as_ref)
    }

    /// The bytes one token stands for (a timestamp the files do not list gets its
    /// `<|s.ss|>` text); `None` for an id outside the vocabulary.
    pub fn token_bytes(&self, id: u32) -> Option<std::borrow::Cow<'_, [u8]>> {
        match (self.entry(id), self.timestamp_seconds(id)) {
            (Some(entry), _) => Some(std::borrow::Cow::Borrowed(&entry.bytes)),
            (None, Some(seconds)) => Some(std::borrow::Cow::Owned(format!("<|{seconds:.2}|>").into_bytes())),
            (None, None) => None,
        }
    }

    /// The UTF-8 bytes of a token sequence, before any text conversion (a caller streaming
    /// text keeps incomplete characters this way).
    pub fn decode_bytes(&self, ids: &[u32], special: SpecialTokens) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        for (position, &id) in ids.iter().enumerate() {
            if special == SpecialTokens::Skip && self.is_special(id) {
                continue;
            }
            let bytes = self.token_bytes(id).ok_or_else(|| {
                Error::BadArgument(format!(
                    "token id {id} at position {position} is outside the vocabulary ({} ids)",
                    self.vocab_size()
                ))
            })?;
            out.extend_from_slice(&bytes);
        }
        Ok(out)
    }

    /// The text of a token sequence. Bytes are joined first and read as UTF-8 once, so a
    /// character split across tokens comes out whole; bytes that still form no character
    /// (e.g. a sequence cut mid-character) become U+FFFD.
    pub fn decode(&self, ids: &[u32], special: SpecialTokens) -> Result<String> {
        let bytes = self.decode_bytes(ids, special)?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::process::Command;
    use std::sync::OnceLock;

    use super::*;

    /// The tiny.en model folder, fetched (once, cached) by the project's fetch script.
    fn model_dir() -> PathBuf {
        static DIR: OnceLock<PathBuf> = OnceLock::new();
        DIR.get_or_init(|| {
            let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
            let out = Command::new(root.join("scripts/fetch-model.sh"))
                .current_dir(&root)
                .output()
                .expect("scripts/fetch-model.sh runs");
            assert!(out.status.success(), "fetch-model.sh failed: {}", String::from_utf8_lossy(&out.stderr));
            let stdout = String::from_utf8(out.stdout).expect("fetch-model.sh prints UTF-8");
            PathBuf::from(stdout.lines().last().expect("fetch-model.sh prints the folder").trim())
        })
        .clone()
    }

    fn vocabulary() -> Tokenizer {
        Tokenizer::from_vocabulary_file(model_dir().join("vocabulary.txt")).unwrap()
    }

    fn tokenizer_json() -> Tokenizer {
        Tokenizer::from_tokenizer_json_file(model_dir().join("tokenizer.json")).unwrap()
    }

    /// A minimal byte-level vocabulary.txt: the 256 single-byte tokens (as GPT-2 orders
    /// them: printable bytes first), then the given lines.
    fn small_vocabulary(extra: &[&str]) -> String {
        let table = byte_to_char();
        let mut bytes: Vec<u8> = (0..=255).collect();
        bytes.sort_by_key(|&b| table[b as usize]);
        let mut lines: Vec<String> = bytes.iter().map(|&b| table[b as usize].to_string()).collect();
        lines.extend(extra.iter().map(|s| s.to_string()));
        lines.join("\n") + "\n"
    }

    const SPECIALS: [&str; 9] = [
        "<|endoftext|>",
        "<|startoftranscript|>",
        "<|en|>",
        "<|de|>",
        "<|translate|>",
        "<|transcribe|>",
        "<|startofprev|>",
        "<|nocaptions|>",
        "<|notimestamps|>",
    ];

    #[test]
    fn byte_table_matches_gpt2() {
        let table = byte_to_char();
        // Printable bytes stand for themselves; the rest count up from U+0100 in byte order.
        assert_eq!(table[b'!' as usize], '!');
        assert_eq!(table[0xE9], 'é');
        assert_eq!(table[0x00], '\u{100}');
        assert_eq!(table[b' ' as usize], 'Ġ'); // U+0120: byte 0x20 is the 33rd non-printable
        assert_eq!(table[b'\n' as usize], 'Ċ'); // U+010A
        assert_eq!(table[0x7F], '\u{121}');
        assert_eq!(table[0xAD], '\u{143}'); // the last of the 68
        let distinct: std::collections::HashSet<char> = table.iter().copied().collect();
        assert_eq!(distinct.len(), 256);
    }

    #[test]
    fn special_ids_of_tiny_en_from_both_files() {
        for tok in [vocabulary(), tokenizer_json()] {
            let ids = tok.special_ids();
            assert_eq!(ids.end_of_text, 50256);
            assert_eq!(ids.start_of_transcript, 50257);
            assert_eq!(ids.translate, 50357);
            assert_eq!(ids.transcribe, 50358);
            assert_eq!(ids.start_of_lm, Some(50359));
            assert_eq!(ids.start_of_prev, 50360);
            assert_eq!(ids.no_speech, 50361);
            assert_eq!(ids.no_timestamps, 50362);
            assert_eq!(ids.timestamp_begin, 50363);
            assert_eq!(ids.timestamp_count, 1501);
            assert!((ids.timestamp_step - 0.02).abs() < 1e-7);
            assert_eq!(tok.vocab_size(), 51864);
            assert_eq!(tok.languages().len(), 99);
            assert_eq!(tok.languages()[0], ("en".to_string(), 50258));
            assert_eq!(tok.language_id("de"), Some(50260));
            assert_eq!(tok.language_id("su"), Some(50356));
            assert_eq!(tok.language_id("xx"), None);
        }
    }

    #[test]
    fn special_token_text() {
        for tok in [vocabulary(), tokenizer_json()] {
            let keep = |ids: &[u32]| tok.decode(ids, SpecialTokens::Keep).unwrap();
            assert_eq!(keep(&[50256]), "<|endoftext|>");
            assert_eq!(keep(&[50257]), "<|startoftranscript|>");
            assert_eq!(keep(&[50362]), "<|notimestamps|>");
            assert_eq!(keep(&[50363]), "<|0.00|>");
            assert_eq!(keep(&[50364]), "<|0.02|>");
            assert_eq!(keep(&[51863]), "<|30.00|>");
        }
    }

    #[test]
    fn timestamps() {
        let tok = vocabulary();
        assert!(!tok.is_timestamp(50362));
        assert!(tok.is_timestamp(50363));
        assert!(tok.is_timestamp(51863));
        assert!(!tok.is_timestamp(51864));
        assert_eq!(tok.timestamp_seconds(50363), Some(0.0));
        assert_eq!(tok.timestamp_seconds(50363 + 50), Some(1.0));
        assert_eq!(tok.timestamp_seconds(51863), Some(30.0));
        assert_eq!(tok.timestamp_seconds(50362), None);
        assert_eq!(tok.timestamp_seconds(18435), None);
    }

    #[test]
    fn decodes_words() {
        // vocabulary.txt: line 18436 (id 18435) is "ĠHello", id 995 "Ġworld", id 13 ".",
        // id 0 "!"; Ġ stands for the space byte.
        for tok in [vocabulary(), tokenizer_json()] {
            assert_eq!(tok.decode(&[18435, 995, 13], SpecialTokens::Skip).unwrap(), " Hello world.");
            assert_eq!(tok.decode(&[0], SpecialTokens::Skip).unwrap(), "!");
        }
    }

    #[test]
    fn skips_or_keeps_special_tokens() {
        let tok = vocabulary();
        let ids = [50257, 50258, 50358, 50363, 18435, 995, 50413, 50256];
        assert_eq!(tok.decode(&ids, SpecialTokens::Skip).unwrap(), " Hello world");
        assert_eq!(
            tok.decode(&ids, SpecialTokens::Keep).unwrap(),
            "<|startoftranscript|><|en|><|transcribe|><|0.00|> Hello world<|1.00|><|endoftext|>"
        );
    }

    #[test]
    fn character_split_across_tokens() {
        // "😀" is F0 9F 98 80. Id 47249 is "ðŁĺ" (F0 9F 98) and id 222 is "Ģ" (0x80);
        // id 19945 is "Ġcaf", id 2634 "Ã©" (C3 A9 = "é").
        let tok = vocabulary();
        assert_eq!(tok.decode(&[19945, 2634, 47249, 222], SpecialTokens::Skip).unwrap(), " café😀");
        assert_eq!(tok.decode_bytes(&[47249], SpecialTokens::Skip).unwrap(), vec![0xF0, 0x9F, 0x98]);
        // A character cut at the end is replaced, once, by U+FFFD; the text before survives.
        assert_eq!(tok.decode(&[19945, 47249], SpecialTokens::Skip).unwrap(), " caf\u{FFFD}");
        // Timestamps between the pieces are skipped before the bytes are joined.
        assert_eq!(tok.decode(&[47249, 50400, 222], SpecialTokens::Skip).unwrap(), "😀");
    }

    #[test]
    fn unknown_id_is_an_error() {
        let tok = vocabulary();
        let err = tok.decode(&[18435, 51864], SpecialTokens::Skip).unwrap_err();
        assert_eq!(
            err.to_string(),
            "bad run argument: token id 51864 at position 1 is outside the vocabulary (51864 ids)"
        );
    }

    #[test]
    fn model_dir_prefers_vocabulary_txt() {
        let tok = Tokenizer::from_model_dir(model_dir()).unwrap();
        assert_eq!(tok.vocab_size(), 51864);
        let err = Tokenizer::from_model_dir("/nonexistent-dir").unwrap_err();
        assert_eq!(err.to_string(), "/nonexistent-dir: no vocabulary.txt or tokenizer.json in this folder");
    }

    #[test]
    fn small_vocabulary_without_timestamps() {
        let text = small_vocabulary(&["Ġhi", "<|endoftext|>", "<|startoftranscript|>", "<|en|>", "<|de|>"]);
        let text = text + &SPECIALS[4..].join("\n");
        let tok = Tokenizer::from_vocabulary(text.as_bytes(), "vocabulary.txt").unwrap();
        let ids = tok.special_ids();
        assert_eq!((ids.end_of_text, ids.start_of_transcript, ids.no_timestamps), (257, 258, 265));
        assert_eq!((ids.timestamp_begin, ids.timestamp_count), (266, 1501));
        assert_eq!(ids.start_of_lm, None);
        assert_eq!(tok.languages(), &[("en".to_string(), 259), ("de".to_string(), 260)]);
        // Timestamps the file does not list still decode to their text.
        assert_eq!(tok.decode(&[266 + 75, 256], SpecialTokens::Keep).unwrap(), "<|1.50|> hi");
        assert_eq!(tok.vocab_size(), 266 + 1501);
    }

    #[test]
    fn corrupt_vocabulary_errors() {
        let err = |text: &[u8]| Tokenizer::from_vocabulary(text, "vocabulary.txt").unwrap_err().to_string();
        let good = small_vocabulary(&SPECIALS);
        assert!(Tokenizer::from_vocabulary(good.as_bytes(), "vocabulary.txt").is_ok());

        let mut bad_utf8 = good.clone().into_bytes();
        bad_utf8.splice(4..4, [0xFF]);
        assert_eq!(err(&bad_utf8), "vocabulary.txt: invalid UTF-8 at byte offset 4");

        let empty_line = good.replacen("\n", "\n\n", 1);
        assert_eq!(err(empty_line.as_bytes()), "vocabulary.txt: line 2 (id 1) is empty");

        let not_byte_level = good.replacen("!\n", "a b\n", 1);
        assert_eq!(err(not_byte_level.as_bytes()), "vocabulary.txt: line 1 (id 0): \"a b\" is not a byte-level token");

        let missing = good.replace("<|transcribe|>\n", "");
        assert_eq!(err(missing.as_bytes()), "vocabulary.txt: the file has no <|transcribe|>");

        let twice = good.clone() + "<|en|>\n";
        assert_eq!(err(twice.as_bytes()), "vocabulary.txt: <|en|> appears twice, at ids 258 and 265");

        let no_language = good.replace("<|de|>", "<|DE|>");
        assert_eq!(
            err(no_language.as_bytes()),
            "vocabulary.txt: id 259, between <|startoftranscript|> and <|translate|>, is not a language token"
        );

        let bad_time = good.clone() + "<|0.00|>\n<|0.02|>\n<|0.04|>\n<|0.08|>\n";
        assert_eq!(err(bad_time.as_bytes()), "vocabulary.txt: timestamp token at id 268 says 0.08 s, expected 0.06 s");

        assert_eq!(err(b""), "vocabulary.txt: line 1 (id 0) is empty");
    }

    #[test]
    fn corrupt_tokenizer_json_errors() {
        let err =
            |text: &str| Tokenizer::from_tokenizer_json(text.as_bytes(), "tokenizer.json").unwrap_err().to_string();
        let added: Vec<String> = (0u32..)
            .zip(SPECIALS)
            .map(|(i, s)| format!(r#"{{"id": {}, "content": "{s}", "special": true}}"#, 3 + i))
            .collect();
        let doc = |vocab: &str, added: &[String]| {
            format!(
                r#"{{"model": {{"type": "BPE", "vocab": {{{vocab}}}}}, "decoder": {{"type": "ByteLevel"}}, "added_tokens": [{}]}}"#,
                added.join(",")
            )
        };
        let ok = doc(r#""a": 0, "Ġb": 1, "c": 2"#, &added);
        let tok = Tokenizer::from_tokenizer_json(ok.as_bytes(), "tokenizer.json").unwrap();
        assert_eq!(tok.decode(&[0, 1, 3, 2], SpecialTokens::Skip).unwrap(), "a bc");
        assert_eq!(tok.special_ids().timestamp_begin, 12);

        assert!(err("{\"model\": ").starts_with("tokenizer.json: not a tokenizer.json: EOF while parsing"));
        assert!(
            err(r#"{"added_tokens": []}"#).starts_with("tokenizer.json: not a tokenizer.json: missing field `model`")
        );
        assert_eq!(
            err(&ok.replace(r#""type": "BPE""#, r#""type": "Unigram""#)),
            "tokenizer.json: model.type is \"Unigram\", expected \"BPE\""
        );
        assert_eq!(
            err(&ok.replace(r#""type": "ByteLevel""#, r#""type": "Metaspace""#)),
            "tokenizer.json: decoder.type is \"Metaspace\", expected \"ByteLevel\""
        );
        assert_eq!(
            err(&doc(r#""a": 0, "b": 0"#, &added)),
            "tokenizer.json: model.vocab gives id 0 to both \"a\" and \"b\""
        );
        assert_eq!(
            err(&doc(r#""a\u0000": 0"#, &added)),
            "tokenizer.json: model.vocab token \"a\\0\" (id 0) is not a byte-level token"
        );
        assert_eq!(
            err(&doc(r#""a": 4000000000"#, &added)),
            "tokenizer.json: model.vocab token \"a\" has id 4000000000, above the limit 1048576"
        );
        assert_eq!(
            err(&doc(r#""a": 0"#, &added[1..])),
            "tokenizer.json: model.vocab and added_tokens has no <|endoftext|>"
        );
    }
}
