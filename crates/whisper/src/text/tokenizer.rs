//! Whisper's tokenizer: token ids to text, and text to token ids.
//!
//! Whisper uses GPT-2's byte-level BPE. Every vocabulary entry is a string of stand-in
//! characters, one per byte ([`byte_to_char`] maps each of the 256 bytes to a printable
//! character), so decoding is: map each token back to its bytes, concatenate, and read the
//! bytes as UTF-8 once at the end. A character may be split across tokens, so no token is
//! converted on its own.
//!
//! Encoding is Hugging Face `tokenizers` itself, on the model's `tokenizer.json`, called as
//! faster-whisper calls it (`encode(text, add_special_tokens=False)`), so prompts get the ids
//! the reference gives them. Only `tokenizer.json` has merges, so a tokenizer read from
//! `vocabulary.txt` alone cannot encode.
//!
//! Decoding stays here, on a table of each id's bytes, because `tokenizers` cannot serve it:
//! `vocabulary.txt` (CTranslate2) is no file it reads, older `tokenizer.json` files list no
//! timestamp tokens although the model predicts them, streaming callers need the bytes before
//! they are text ([`Tokenizer::decode_bytes`]), and an id outside the vocabulary must be an
//! error rather than silently dropped. Two files carry the vocabulary:
//! - `tokenizer.json` (Hugging Face): `model.vocab` (byte-level strings) plus `added_tokens`
//!   (special tokens, stored as plain text), both as `tokenizers` numbers them.
//! - `vocabulary.txt` (CTranslate2): one byte-level token per line, the id is the line number;
//!   it lists every id the model can predict, timestamps included.
//!
//! Special ids are looked up by their text (`<|endoftext|>`, ...), never assumed: multilingual
//! vocabularies have one more token than English-only ones, so every id after
//! `<|endoftext|>` shifts.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

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

/// A Whisper tokenizer: decoding from the files' id table, encoding with `tokenizers`.
#[derive(Clone, Debug)]
pub struct Tokenizer {
    /// Indexed by id; `None` for ids the files leave out.
    entries: Vec<Option<Entry>>,
    ids: SpecialIds,
    /// Language codes (`"en"`, `"de"`, ...) and their token ids, in vocabulary order.
    languages: Vec<(String, u32)>,
    /// What [`Tokenizer::encode`] uses, or the error it reports when the files cannot encode.
    encoder: std::result::Result<Encoder, Error>,
}

/// The `tokenizers` tokenizer of a `tokenizer.json` and the file's name for errors. Shared,
/// so that cloning a [`Tokenizer`] does not copy the merge table.
#[derive(Clone, Debug)]
struct Encoder {
    built: Arc<Built>,
    file: String,
}

type Built = Deferred<tokenizers::Tokenizer>;

/// A value built when it is made, or later: natively on a thread started when it is made, in
/// a browser (no threads) on first use. Beside a `vocabulary.txt`, which decodes, a
/// `tokenizer.json` is needed only to encode prompts, and `tokenizers` takes longer to parse
/// its 50k merges than the rest of a model folder takes to read.
struct Deferred<T> {
    value: OnceLock<std::result::Result<T, Error>>,
    pending: Mutex<Option<Pending<T>>>,
}

#[cfg(not(target_arch = "wasm32"))]
type Pending<T> = std::thread::JoinHandle<std::result::Result<T, Error>>;
#[cfg(target_arch = "wasm32")]
type Pending<T> = Box<dyn FnOnce() -> std::result::Result<T, Error> + Send>;

impl<T: Send + 'static> Deferred<T> {
    fn ready(value: T) -> Self {
        Deferred { value: OnceLock::from(Ok(value)), pending: Mutex::new(None) }
    }

    fn start(build: impl FnOnce() -> std::result::Result<T, Error> + Send + 'static) -> Self {
        #[cfg(not(target_arch = "wasm32"))]
        let pending: Pending<T> = std::thread::spawn(build);
        #[cfg(target_arch = "wasm32")]
        let pending: Pending<T> = Box::new(build);
        Deferred { value: OnceLock::new(), pending: Mutex::new(Some(pending)) }
    }

    /// The value, waiting for it (or building it) the first time.
    fn get(&self, file: &str) -> Result<&T> {
        let value = self.value.get_or_init(|| {
            let pending = self.pending.lock().ok().and_then(|mut p| p.take());
            match pending {
                #[cfg(not(target_arch = "wasm32"))]
                Some(thread) => thread.join().unwrap_or_else(|_| Err(model_error(file, "reading the file panicked"))),
                #[cfg(target_arch = "wasm32")]
                Some(build) => build(),
                None => Err(model_error(file, "reading the file failed before")),
            }
        });
        value.as_ref().map_err(Clone::clone)
    }
}

impl<T> std::fmt::Debug for Deferred<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.value.get().is_some() { "Deferred(built)" } else { "Deferred(pending)" })
    }
}

/// GPT-2's byte-to-character table: bytes that are printable Latin-1 characters stand for
/// themselves, the other 68 take the characters from U+0100 on, in byte order.
pub fn byte_to_char() -> [char; 256] {
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

/// The parts of a `tokenizer.json` read before `tokenizers` loads it, its kinds checked.
fn parse_json(bytes: &[u8], file: &str) -> Result<TokenizerJson> {
    let json: TokenizerJson =
        serde_json::from_slice(bytes).map_err(|e| model_error(file, format!("not a tokenizer.json: {e}")))?;
    if let Some(kind) = json.model.kind.as_deref().filter(|k| *k != "BPE") {
        return Err(model_error(file, format!("model.type is \"{kind}\", expected \"BPE\"")));
    }
    if let Some(kind) = json.decoder.as_ref().and_then(|d| d.kind.as_deref()).filter(|k| *k != "ByteLevel") {
        return Err(model_error(file, format!("decoder.type is \"{kind}\", expected \"ByteLevel\"")));
    }
    Ok(json)
}

/// `tokenizers`' tokenizer of a `tokenizer.json` (the file must load with it, as faster-whisper
/// requires).
fn load_json(bytes: &[u8], file: &str) -> Result<tokenizers::Tokenizer> {
    tokenizers::Tokenizer::from_bytes(bytes).map_err(|e| model_error(file, format!("tokenizers cannot load it: {e}")))
}

/// `tokenizers` numbers the added tokens missing from model.vocab itself, one after another,
/// whatever ids the file lists; where the two disagree the file is corrupt and either
/// numbering would decode (or encode a special token in a prompt) wrongly.
fn check_added_ids(tokenizer: &tokenizers::Tokenizer, json: &TokenizerJson, file: &str) -> Result<()> {
    let renumbered = json.added_tokens.iter().find_map(|added| {
        let id = tokenizer.token_to_id(&added.content)?;
        (id != added.id).then_some((added, id))
    });
    match renumbered {
        None => Ok(()),
        Some((added, id)) => Err(model_error(
            file,
            format!(
                "added token {:?} has id {} in the file but {id} in tokenizers (added tokens missing from \
                 model.vocab must follow it without gaps)",
                added.content, added.id
            ),
        )),
    }
}

/// What is read of a `tokenizer.json` before `tokenizers` loads it: the kinds, so that a
/// file of another kind is named as such rather than failing deep in the crate's parser, and
/// the ids the file gives its added tokens, which `tokenizers` does not read (it numbers
/// them itself).
#[derive(Deserialize)]
struct TokenizerJson {
    model: ModelJson,
    decoder: Option<KindJson>,
    #[serde(default)]
    added_tokens: Vec<AddedTokenJson>,
}

#[derive(Deserialize)]
struct ModelJson {
    #[serde(rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    vocab: HashMap<String, u32>,
}

#[derive(Deserialize)]
struct KindJson {
    #[serde(rename = "type")]
    kind: Option<String>,
}

#[derive(Deserialize)]
struct AddedTokenJson {
    id: u32,
    content: String,
}

impl Tokenizer {
    /// Loads the tokenizer of a model folder: `vocabulary.txt` where present (it lists every
    /// id the model predicts, timestamps included) with the merges of `tokenizer.json` beside
    /// it for encoding, else `tokenizer.json` alone.
    pub fn from_model_dir(dir: impl AsRef<Path>) -> Result<Tokenizer> {
        let dir = dir.as_ref();
        let read = |name: &str| -> Result<Option<(Vec<u8>, String)>> {
            let path = dir.join(name);
            if !path.is_file() {
                return Ok(None);
            }
            let shown = path.display().to_string();
            let bytes = crate::files::read_small(&path, &shown)?;
            Ok(Some((bytes, shown)))
        };
        let (vocabulary, json) = (read("vocabulary.txt")?, read("tokenizer.json")?);
        Tokenizer::from_files(
            vocabulary.as_ref().map(|(b, n)| (b.as_slice(), n.as_str())),
            json.as_ref().map(|(b, n)| (b.as_slice(), n.as_str())),
            &dir.display().to_string(),
        )
    }

    /// The tokenizer of a model's files, each given as (bytes, name for errors): `vocabulary.txt`
    /// where present, with the BPE merges of `tokenizer.json` when that is given too, else
    /// `tokenizer.json` alone. `place` names where the files were looked for when both are
    /// missing.
    pub fn from_files(
        vocabulary: Option<(&[u8], &str)>,
        tokenizer_json: Option<(&[u8], &str)>,
        place: &str,
    ) -> Result<Tokenizer> {
        match (vocabulary, tokenizer_json) {
            (Some((vocabulary, name)), json) => {
                let mut tokenizer = Tokenizer::from_vocabulary(vocabulary, name)?;
                if let Some((json, name)) = json {
                    // Only tokenizer.json has the merges that encoding text needs; its form is
                    // checked now, `tokenizers` loads it beside the rest ([`Deferred`]).
                    let mut parsed = parse_json(json, name)?;
                    let vocab = std::mem::take(&mut parsed.model.vocab);
                    let (bytes, file) = (json.to_vec(), name.to_string());
                    let built = Deferred::start(move || {
                        let tokenizer = load_json(&bytes, &file)?;
                        check_added_ids(&tokenizer, &parsed, &file)?;
                        Ok(tokenizer)
                    });
                    tokenizer.encoder = Encoder::new(built, &vocab, name);
                }
                Ok(tokenizer)
            }
            (None, Some((json, name))) => Tokenizer::from_tokenizer_json(json, name),
            (None, None) => Err(model_error(place, "no vocabulary.txt or tokenizer.json in this folder")),
        }
    }

    /// Loads a Hugging Face `tokenizer.json` file.
    pub fn from_tokenizer_json_file(path: impl AsRef<Path>) -> Result<Tokenizer> {
        let path = path.as_ref();
        let name = path.display().to_string();
        let bytes = crate::files::read_small(path, &name)?;
        Tokenizer::from_tokenizer_json(&bytes, &name)
    }

    /// Loads a CTranslate2 `vocabulary.txt` file.
    pub fn from_vocabulary_file(path: impl AsRef<Path>) -> Result<Tokenizer> {
        let path = path.as_ref();
        let name = path.display().to_string();
        let bytes = crate::files::read_small(path, &name)?;
        Tokenizer::from_vocabulary(&bytes, &name)
    }

    /// Parses the bytes of a `tokenizer.json`; `file` names it in errors. The file must load
    /// with `tokenizers` (as faster-whisper requires), a byte-level BPE whose added tokens
    /// have the ids `tokenizers` gives them.
    pub fn from_tokenizer_json(bytes: &[u8], file: &str) -> Result<Tokenizer> {
        let json = parse_json(bytes, file)?;
        let tokenizer = load_json(bytes, file)?;

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
        let model_vocab = tokenizer.get_vocab(false);
        let mut vocab: Vec<(&String, u32)> = model_vocab.iter().map(|(t, &id)| (t, id)).collect();
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
        for (id, added) in tokenizer.get_added_tokens_decoder() {
            let entry = Entry { bytes: added.content.as_bytes().into(), special: added.special };
            place(id, entry, &format!("added token {:?}", added.content))?;
        }
        // Checked after the special tokens, whose absence says more.
        let renumbered = check_added_ids(&tokenizer, &json, file);
        let encoder = Encoder::new(Deferred::ready(tokenizer), &model_vocab, file);
        let whisper = Tokenizer::from_entries(entries, file, "model.vocab and added_tokens", encoder)?;
        renumbered?;
        Ok(whisper)
    }

    /// Parses the bytes of a `vocabulary.txt`; `file` names it in errors.
    pub fn from_vocabulary(bytes: &[u8], file: &str) -> Result<Tokenizer> {
        let text = std::str::from_utf8(bytes)
            .map_err(|e| model_error(file, format!("invalid UTF-8 at byte offset {}", e.valid_up_to())))?;
        if text.is_empty() {
            return Err(model_error(file, "the file is empty"));
        }
        let text = text.strip_suffix('\n').unwrap_or(text);
        let table = char_to_byte();
        let mut entries = Vec::new();
        for (index, line) in text.split('\n').enumerate() {
            let line_no = index + 1;
            if index > MAX_ID as usize {
                return Err(model_error(file, format!("more than {} lines", MAX_ID as usize + 1)));
            }
            // An empty line is a token that decodes to nothing: the multilingual vocabularies
            // have one at id 50256, before <|endoftext|>. A line added or lost shifts every
            // later id, which the model's embedding size catches (`Whisper::new`).
            let token = line.strip_suffix('\r').unwrap_or(line);
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
        let encoder = Err(model_error(
            file,
            "cannot encode text: this file has no BPE merges; encoding needs the model's tokenizer.json",
        ));
        Tokenizer::from_entries(entries, file, "the file", encoder)
    }

    /// Finds the special ids, timestamps and languages in a complete id table.
    fn from_entries(
        entries: Vec<Option<Entry>>,
        file: &str,
        source: &str,
        encoder: std::result::Result<Encoder, Error>,
    ) -> Result<Tokenizer> {
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
        Ok(Tokenizer { entries, ids, languages, encoder })
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
                Error::bad_argument(format!(
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

    /// The token ids of `text`, as `tokenizers` gives them for `encode(text,
    /// add_special_tokens=False)`: no prompt tokens are added, but an added token written in
    /// the text (`<|endoftext|>`, `<|en|>`) is matched as that token. Errors when the
    /// tokenizer was read from a `vocabulary.txt` (it has no merges) or the `tokenizer.json`
    /// lacks a byte's token.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        let encoder = self.encoder.as_ref().map_err(Clone::clone)?;
        let encoding = encoder
            .built
            .get(&encoder.file)?
            .encode(text, false)
            .map_err(|e| model_error(&encoder.file, format!("cannot encode {text:?}: {e}")))?;
        Ok(encoding.get_ids().to_vec())
    }
}

impl Encoder {
    /// The encoder of a loaded `tokenizer.json`, or the error [`Tokenizer::encode`] reports:
    /// every byte needs a token, because `tokenizers` drops a byte that has none (there is no
    /// unknown token in Whisper's BPE) and the prompt would lose text without a word.
    fn new(built: Built, vocab: &HashMap<String, u32>, file: &str) -> std::result::Result<Encoder, Error> {
        for (byte, c) in (0u8..=255).zip(byte_to_char()) {
            if !vocab.contains_key(c.encode_utf8(&mut [0; 4]) as &str) {
                return Err(model_error(
                    file,
                    format!("cannot encode text: model.vocab has no token for byte 0x{byte:02X} ({c:?})"),
                ));
            }
        }
        Ok(Encoder { built: Arc::new(built), file: file.to_string() })
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
            let out = Command::new(root.join("scripts/models/fetch_model.sh"))
                .current_dir(&root)
                .output()
                .expect("scripts/models/fetch_model.sh runs");
            assert!(out.status.success(), "fetch_model.sh failed: {}", String::from_utf8_lossy(&out.stderr));
            let stdout = String::from_utf8(out.stdout).expect("fetch_model.sh prints UTF-8");
            PathBuf::from(stdout.lines().last().expect("fetch_model.sh prints the folder").trim())
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

        assert_eq!(err(b""), "vocabulary.txt: the file is empty");
    }

    #[test]
    fn an_empty_line_is_a_token_that_decodes_to_nothing() {
        let vocabulary = small_vocabulary(&SPECIALS).replacen("\n", "\n\n", 1);
        let tok = Tokenizer::from_vocabulary(vocabulary.as_bytes(), "vocabulary.txt").unwrap();
        assert_eq!(tok.token_bytes(1).as_deref(), Some(&b""[..]));
        assert_eq!(tok.decode(&[0, 1, 0], SpecialTokens::Skip).unwrap(), "!!");
        assert_eq!(tok.special_ids().end_of_text, 257);
    }

    #[test]
    fn corrupt_tokenizer_json_errors() {
        let err =
            |text: &str| Tokenizer::from_tokenizer_json(text.as_bytes(), "tokenizer.json").unwrap_err().to_string();
        let added: Vec<String> = (0u32..)
            .zip(SPECIALS)
            .map(|(i, s)| {
                let flags = r#""single_word": false, "lstrip": false, "rstrip": false, "normalized": false"#;
                format!(r#"{{"id": {}, "content": "{s}", {flags}, "special": true}}"#, 3 + i)
            })
            .collect();
        // As Whisper's files write the decoder.
        const BYTE_LEVEL: &str = r#""add_prefix_space": true, "trim_offsets": true, "use_regex": true"#;
        let doc = |vocab: &str, added: &[String]| {
            format!(
                r#"{{"model": {{"type": "BPE", "vocab": {{{vocab}}}, "merges": []}}, "decoder": {{"type": "ByteLevel", {BYTE_LEVEL}}}, "added_tokens": [{}]}}"#,
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

    #[derive(Deserialize)]
    struct Reference {
        cases: Vec<Case>,
        prefix_space_cases: Vec<Case>,
    }

    #[derive(Deserialize)]
    struct Case {
        text: String,
        ids: Vec<u32>,
    }

    /// Ids from Hugging Face `tokenizers` (tests/golden/tokenizer_reference.py).
    fn reference() -> Reference {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/tokenizer_reference.json");
        serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
    }

    fn assert_encodes_like_reference(tok: &Tokenizer, cases: &[Case]) {
        assert!(cases.len() >= 30, "the fixture lists {} strings", cases.len());
        for case in cases {
            assert_eq!(tok.encode(&case.text).unwrap(), case.ids, "encoding {:?}", case.text);
        }
    }

    #[test]
    fn encodes_like_hugging_face() {
        let tok = tokenizer_json();
        let cases = reference().cases;
        assert_encodes_like_reference(&tok, &cases);
        for case in &cases {
            let ids = tok.encode(&case.text).unwrap();
            assert_eq!(tok.decode(&ids, SpecialTokens::Keep).unwrap(), case.text, "round trip of {:?}", case.text);
        }
        // Spot checks that do not depend on the fixture.
        assert_eq!(tok.encode(" Hello world.").unwrap(), [18435, 995, 13]);
        assert_eq!(tok.encode("a<|endoftext|>b").unwrap(), [64, 50256, 65]);
    }

    #[test]
    fn beside_vocabulary_txt_the_merges_load_meanwhile_and_their_faults_come_at_encoding() {
        // tiny.en's folder: vocabulary.txt decodes, tokenizer.json's merges (loaded on a
        // thread) encode as the reference does.
        let tok = Tokenizer::from_model_dir(model_dir()).unwrap();
        assert_encodes_like_reference(&tok, &reference().cases);
        let files = |vocabulary: &str, json: &str| {
            Tokenizer::from_files(
                Some((vocabulary.as_bytes(), "vocabulary.txt")),
                Some((json.as_bytes(), "tokenizer.json")),
                "the folder",
            )
        };
        // A tokenizer.json of the right form that `tokenizers` refuses: the vocabulary loads
        // and decodes; encoding names the file's fault, every time.
        let vocabulary = small_vocabulary(&["ab"]) + &SPECIALS.join("\n");
        let tok = files(&vocabulary, &small_bpe(&["ab"], serde_json::json!(["a b c"])).to_string()).unwrap();
        assert_eq!(tok.decode(&[256, 64], SpecialTokens::Keep).unwrap(), "aba");
        for _ in 0..2 {
            assert_eq!(
                tok.encode("ab").unwrap_err().to_string(),
                "tokenizer.json: tokenizers cannot load it: Merges text file invalid at line 1 at line 1 column 3362"
            );
        }
        // Added tokens numbered otherwise than `tokenizers` numbers them.
        let vocabulary = small_vocabulary(&[]) + &SPECIALS.join("\n");
        let mut doc = small_bpe(&[], serde_json::json!([]));
        doc["added_tokens"][1]["id"] = 1001.into();
        assert_eq!(
            files(&vocabulary, &doc.to_string()).unwrap().encode("a").unwrap_err().to_string(),
            "tokenizer.json: added token \"<|startoftranscript|>\" has id 1001 in the file but 257 in tokenizers \
             (added tokens missing from model.vocab must follow it without gaps)"
        );
        // Its form is checked when the files are read.
        let err = files(&vocabulary, r#"{"added_tokens": []}"#).unwrap_err().to_string();
        assert!(err.starts_with("tokenizer.json: not a tokenizer.json: missing field `model`"), "{err}");
        let unigram =
            small_bpe(&[], serde_json::json!([])).to_string().replace(r#""type":"BPE""#, r#""type":"Unigram""#);
        assert_eq!(
            files(&vocabulary, &unigram).unwrap_err().to_string(),
            "tokenizer.json: model.type is \"Unigram\", expected \"BPE\""
        );
    }

    #[test]
    fn encodes_with_add_prefix_space_like_hugging_face() {
        let path = model_dir().join("tokenizer.json");
        let mut json: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
        assert_eq!(json["pre_tokenizer"]["add_prefix_space"], false);
        json["pre_tokenizer"]["add_prefix_space"] = true.into();
        let tok = Tokenizer::from_tokenizer_json(json.to_string().as_bytes(), "tokenizer.json").unwrap();
        assert_encodes_like_reference(&tok, &reference().prefix_space_cases);
        assert_eq!(tok.encode("Hello").unwrap(), [18435]);
    }

    #[test]
    fn vocabulary_txt_cannot_encode() {
        let path = model_dir().join("vocabulary.txt");
        let tok = Tokenizer::from_vocabulary_file(&path).unwrap();
        assert_eq!(
            tok.encode("hello").unwrap_err().to_string(),
            format!(
                "{}: cannot encode text: this file has no BPE merges; encoding needs the model's tokenizer.json",
                path.display()
            )
        );
    }

    /// A byte-level tokenizer.json: byte b has id b, `extra` tokens follow from 256, the
    /// special tokens after them (where `tokenizers` numbers them).
    fn small_bpe(extra: &[&str], merges: serde_json::Value) -> serde_json::Value {
        let mut vocab = serde_json::Map::new();
        for (id, c) in (0u32..).zip(byte_to_char()) {
            vocab.insert(c.to_string(), id.into());
        }
        for (id, token) in (256u32..).zip(extra) {
            vocab.insert(token.to_string(), id.into());
        }
        let added: Vec<serde_json::Value> = (256 + extra.len() as u32..)
            .zip(SPECIALS)
            .map(|(id, s)| {
                serde_json::json!({"id": id, "content": s, "single_word": false, "lstrip": false, "rstrip": false,
                                   "normalized": false, "special": true})
            })
            .collect();
        serde_json::json!({
            "model": {"type": "BPE", "vocab": vocab, "merges": merges},
            "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
            "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
            "added_tokens": added,
        })
    }

    fn load(doc: &serde_json::Value) -> Result<Tokenizer> {
        Tokenizer::from_tokenizer_json(doc.to_string().as_bytes(), "tokenizer.json")
    }

    #[test]
    fn merges_in_rank_order() {
        let encode = |extra: &[&str], merges: serde_json::Value, text: &str| {
            load(&small_bpe(extra, merges)).unwrap().encode(text).unwrap()
        };
        let (a, b, c) = (97, 98, 99);
        // The lower-ranked pair merges first.
        assert_eq!(encode(&["ab", "bc"], serde_json::json!(["b c", "a b"]), "abc"), [a, 257]);
        assert_eq!(encode(&["ab", "bc"], serde_json::json!(["a b", "b c"]), "abc"), [256, c]);
        assert_eq!(encode(&["ab", "bc"], serde_json::json!([["a", "b"], ["b", "c"]]), "abc"), [256, c]);
        // Equal pairs merge from the left, without overlap.
        assert_eq!(encode(&["aa"], serde_json::json!(["a a"]), "aaa"), [256, a]);
        // A pair formed by a merge competes at once: with these (untrained) ranks "ab a"
        // beats the second "a b" (tokenizers 0.23 gives [257, 98] too).
        assert_eq!(encode(&["ab", "aba"], serde_json::json!(["ab a", "a b"]), "abab"), [257, b]);
        // Bytes stand for themselves; added tokens are cut out first.
        assert_eq!(encode(&[], serde_json::json!([]), " a\u{E9}"), [0x20, a, 0xC3, 0xA9]);
        assert_eq!(encode(&[], serde_json::json!([]), "x<|en|>y<|en"), [120, 258, 121, 60, 124, 101, 110]);
        assert_eq!(encode(&[], serde_json::json!([]), ""), Vec::<u32>::new());
    }

    #[test]
    fn merge_errors_and_options() {
        let load_err = |doc: &serde_json::Value| load(doc).unwrap_err().to_string();
        let encode = |doc: &serde_json::Value, text: &str| load(doc).unwrap().encode(text);
        // A file `tokenizers` cannot load is an error, as it is for faster-whisper.
        assert_eq!(
            load_err(&small_bpe(&["ab"], serde_json::json!(["a b c"]))),
            "tokenizer.json: tokenizers cannot load it: Merges text file invalid at line 1 at line 1 column 3362"
        );
        assert_eq!(
            load_err(&small_bpe(&[], serde_json::json!(["a b"]))),
            "tokenizer.json: tokenizers cannot load it: Token `ab` out of vocabulary at line 1 column 3351"
        );
        let mut doc = small_bpe(&[], serde_json::json!([]));
        doc["model"].as_object_mut().unwrap().remove("merges");
        assert_eq!(
            load_err(&doc),
            "tokenizer.json: tokenizers cannot load it: Missing vocab/merges at line 1 column 3334"
        );

        // What `tokenizers` implements applies: a normalizer, an added token's stripping.
        let mut doc = small_bpe(&[], serde_json::json!([]));
        doc["normalizer"] = serde_json::json!({"type": "NFC"});
        assert_eq!(encode(&doc, "e\u{301}").unwrap(), [0xC3, 0xA9]);
        let mut doc = small_bpe(&[], serde_json::json!([]));
        doc["added_tokens"][0]["lstrip"] = true.into();
        assert_eq!(encode(&doc, "a <|endoftext|>").unwrap(), [97, 256]);

        // `tokenizers` would drop a byte without a token; encoding refuses instead.
        let mut doc = small_bpe(&[], serde_json::json!([]));
        let vocab = doc["model"]["vocab"].as_object_mut().unwrap();
        let space = vocab.remove("\u{120}").unwrap();
        vocab.insert("\u{120}a".into(), space);
        assert_eq!(
            encode(&doc, "a").unwrap_err().to_string(),
            "tokenizer.json: cannot encode text: model.vocab has no token for byte 0x20 ('\u{120}')"
        );
        // Added tokens must have the ids `tokenizers` gives them.
        let mut doc = small_bpe(&[], serde_json::json!([]));
        doc["added_tokens"][1]["id"] = 1001.into();
        assert_eq!(
            load_err(&doc),
            "tokenizer.json: added token \"<|startoftranscript|>\" has id 1001 in the file but 257 in tokenizers \
             (added tokens missing from model.vocab must follow it without gaps)"
        );
    }
}
