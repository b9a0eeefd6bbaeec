//! A `model.bin` read as it arrives (the browser's download): chunks of any size are pushed in
//! and each variable's data goes straight into the buffer its tensor keeps (f16 as `f16`, f32
//! as `f32`), so a model is never held twice, as it would be when the whole file is read into
//! memory and then copied into tensors. The records are parsed by the same functions as
//! [`crate::load::ct2::parse_model_bin`], so both give the same variables and the same errors.

use std::collections::TryReserveError;

use crate::error::Result;
use crate::error::model_error;
use crate::load::ct2::{
    Ct2DType, Ct2File, Ct2Variable, Reader, VarHead, read_alias, read_alias_count, read_head, read_var_head, trailing,
    truncated,
};
use crate::load::file_data::FileData;

/// What the next bytes are.
enum Next {
    Head,
    /// Variable `i`'s record up to its data.
    Variable(u32),
    /// Variable `i`'s data, from byte `start`: `filled` of its bytes are in `data`.
    Data {
        i: u32,
        head: VarHead,
        start: usize,
        data: FileData<'static>,
        filled: usize,
    },
    AliasCount,
    Alias(u32),
    /// Past the last alias: nothing more may come.
    End,
}

/// A `model.bin` being read.
pub struct Ct2Stream {
    file: String,
    /// The file's length, when the transfer said it: a variable that would reach past it is
    /// the truncation error before its data is allocated.
    length: Option<usize>,
    /// Bytes received and not yet parsed: at most one chunk and the start of a record.
    pending: Vec<u8>,
    /// Where `pending` starts in the file.
    base: usize,
    next: Next,
    spec: (String, u32),
    variables: u32,
    aliases: u32,
    parsed: Vec<Ct2Variable<'static>>,
    alias_list: Vec<(String, String, usize)>,
}

impl Ct2Stream {
    /// A stream of the file `file` (its name in errors), `length` bytes long when known.
    pub fn new(file: &str, length: Option<usize>) -> Self {
        Ct2Stream {
            file: file.to_string(),
            length,
            pending: Vec::new(),
            base: 0,
            next: Next::Head,
            spec: (String::new(), 0),
            variables: 0,
            aliases: 0,
            parsed: Vec::new(),
            alias_list: Vec::new(),
        }
    }

    /// The next bytes of the file.
    pub fn push(&mut self, chunk: &[u8]) -> Result<()> {
        self.pending.extend_from_slice(chunk);
        while self.step(false)? {}
        Ok(())
    }

    /// The whole file, parsed; an error when it ended early or went on after its last alias.
    pub fn finish(mut self) -> Result<Ct2File<'static>> {
        while self.step(true)? {}
        let end = self.base + self.pending.len();
        match self.next {
            Next::End if self.pending.is_empty() => Ok(Ct2File {
                spec_name: self.spec.0,
                spec_revision: self.spec.1,
                variables: self.parsed,
                aliases: self.alias_list,
            }),
            Next::End => Err(trailing(&self.file, self.pending.len(), self.base)),
            Next::Data { head, start, .. } => Err(truncated(&self.file, &head.data_what(), start, head.n_bytes, end)),
            _ => Err(model_error(&self.file, format!("the reader stopped inside a record at byte {}", self.base))),
        }
    }

    /// Moves on by one record or one piece of data; `false` when it waits for more bytes (or,
    /// `at_end`, when nothing more will come: a record cut short is then its error).
    fn step(&mut self, at_end: bool) -> Result<bool> {
        match self.next {
            Next::Data { .. } => self.fill(),
            Next::End => Ok(false),
            _ => self.record(at_end),
        }
    }

    /// Parses the record `next` names from `pending`, as the whole file's parse does.
    fn record(&mut self, at_end: bool) -> Result<bool> {
        let mut r = Reader::new(&self.pending, self.base, &self.file);
        let parsed = match self.next {
            Next::Head => read_head(&mut r).map(|(name, revision, count)| {
                self.spec = (name, revision);
                self.variables = count;
                if count == 0 { Next::AliasCount } else { Next::Variable(0) }
            }),
            Next::Variable(i) => read_var_head(&mut r, i).and_then(|head| {
                let start = r.at();
                let data = allocate(&head, start, self.length, &self.file)?;
                Ok(Next::Data { i, head, start, data, filled: 0 })
            }),
            Next::AliasCount => read_alias_count(&mut r).map(|count| {
                self.aliases = count;
                if count == 0 { Next::End } else { Next::Alias(0) }
            }),
            Next::Alias(i) => read_alias(&mut r, i).map(|alias| {
                self.alias_list.push(alias);
                if i + 1 == self.aliases { Next::End } else { Next::Alias(i + 1) }
            }),
            Next::Data { .. } | Next::End => return Ok(false),
        };
        match parsed {
            Ok(next) => {
                let used = r.pos;
                self.pending.drain(..used);
                self.base += used;
                self.next = next;
                Ok(true)
            }
            Err(_) if r.short && !at_end => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Copies what `pending` holds of the current variable's data; `true` when it is whole
    /// (the variable is then parsed and the next record begins).
    fn fill(&mut self) -> Result<bool> {
        let Next::Data { head, data, filled, .. } = &mut self.next else { return Ok(false) };
        let n = (head.n_bytes - *filled).min(self.pending.len());
        if self.length.is_none() {
            data.resize(*filled + n, false).map_err(|e| cannot_allocate(&self.file, head, *filled + n, e))?;
        }
        data.bytes_mut()[*filled..*filled + n].copy_from_slice(&self.pending[..n]);
        *filled += n;
        self.pending.drain(..n);
        self.base += n;
        if *filled < head.n_bytes {
            return Ok(false);
        }
        if let Next::Data { i, head, mut data, .. } = std::mem::replace(&mut self.next, Next::End) {
            data.shrink();
            let VarHead { name, dims, dtype, offset, .. } = head;
            self.parsed.push(Ct2Variable { name, dims, dtype, offset, data });
            self.next = if i + 1 == self.variables { Next::AliasCount } else { Next::Variable(i + 1) };
        }
        Ok(true)
    }
}

/// The buffer for a variable's data (from byte `start`), in the type its tensor keeps.
///
/// When the file's length is known, data reaching past it is the truncation error before
/// anything is allocated, and the buffer is allocated whole. When it is not (a compressed
/// transfer), a damaged size could claim gigabytes: the buffer then starts empty and grows
/// as the bytes arrive ([`FileData::resize`]), so a false claim costs nothing before the file ends. An
/// allocation that fails is an error either way (a damaged size must not abort).
fn allocate(head: &VarHead, start: usize, length: Option<usize>, file: &str) -> Result<FileData<'static>> {
    let n = head.n_bytes;
    let mut data = match head.dtype {
        Ct2DType::F16 => FileData::F16(Vec::new()),
        Ct2DType::F32 => FileData::F32(Vec::new()),
        _ => FileData::Bytes(Vec::new()),
    };
    if let Some(length) = length {
        if start.saturating_add(n) > length {
            return Err(truncated(file, &head.data_what(), start, n, length));
        }
        data.resize(n, true).map_err(|e| cannot_allocate(file, head, n, e))?;
    }
    Ok(data)
}

fn cannot_allocate(file: &str, head: &VarHead, bytes: usize, e: TryReserveError) -> crate::error::Error {
    model_error(file, format!("{}: cannot allocate {bytes} bytes: {e}", head.data_what()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::ct2::writer::{config_json, model_bin};
    use crate::load::ct2::{load_ct2, load_ct2_parsed, parse_model_bin};
    use crate::load::weights::testing::{random, small_config, tiny_en_dir};
    use susurrus_core::ir::DType;

    fn streamed(bytes: &[u8], chunk: usize, length: Option<usize>) -> Result<Ct2File<'static>> {
        let mut stream = Ct2Stream::new("model.bin", length);
        for piece in bytes.chunks(chunk) {
            stream.push(piece)?;
        }
        stream.finish()
    }

    /// Everything a parse gives: spec, revision, (name, dims, dtype, offset, data) per
    /// variable, aliases.
    type Contents = (String, u32, Vec<(String, Vec<usize>, Ct2DType, usize, Vec<u8>)>, Vec<(String, String, usize)>);

    fn contents(file: &Ct2File) -> Contents {
        let vars: Vec<_> = file
            .variables
            .iter()
            .map(|v| (v.name.clone(), v.dims.clone(), v.dtype, v.offset, v.data.bytes().to_vec()))
            .collect();
        (file.spec_name.clone(), file.spec_revision, vars, file.aliases.clone())
    }

    fn small_models() -> Vec<Vec<u8>> {
        [DType::F16, DType::F32].into_iter().map(|dtype| model_bin(&random(small_config(), dtype, 7))).collect()
    }

    #[test]
    fn chunks_of_any_size_give_the_whole_files_variables() {
        for bytes in small_models() {
            let whole = contents(&parse_model_bin(&bytes, "model.bin").unwrap());
            for chunk in [1, 2, 3, 7, 64, 4096, bytes.len()] {
                for length in [None, Some(bytes.len())] {
                    assert_eq!(contents(&streamed(&bytes, chunk, length).unwrap()), whole, "chunks of {chunk}");
                }
            }
        }
        let tiny = std::fs::read(tiny_en_dir().join("model.bin")).unwrap();
        let whole = contents(&parse_model_bin(&tiny, "model.bin").unwrap());
        for chunk in [4093, 65536] {
            assert_eq!(
                contents(&streamed(&tiny, chunk, Some(tiny.len())).unwrap()),
                whole,
                "tiny.en in chunks of {chunk}"
            );
        }
    }

    /// A file cut anywhere, or with bytes after its last alias, fails with the whole file's
    /// parse's error, whether the transfer announced its length or not.
    #[test]
    fn damaged_files_fail_as_the_whole_files_parse() {
        for bytes in small_models() {
            let mut cuts: Vec<usize> = (0..bytes.len()).step_by((bytes.len() / 3000).max(1)).collect();
            cuts.extend(0..64.min(bytes.len()));
            cuts.extend(bytes.len().saturating_sub(64)..bytes.len());
            for cut in cuts {
                let want = parse_model_bin(&bytes[..cut], "model.bin").unwrap_err().to_string();
                for (chunk, length) in [(5, None), (4096, Some(cut))] {
                    let got = streamed(&bytes[..cut], chunk, length).unwrap_err().to_string();
                    assert_eq!(got, want, "cut at {cut}, chunks of {chunk}, length {length:?}");
                }
            }
            let mut longer = bytes.clone();
            longer.extend_from_slice(&[1, 2, 3]);
            let want = parse_model_bin(&longer, "model.bin").unwrap_err().to_string();
            assert_eq!(streamed(&longer, 2, None).unwrap_err().to_string(), want);
            let mut bad_dtype = bytes.clone();
            // The first variable's dtype code: after the head and its name, rank and dims.
            let head = parse_model_bin(&bytes, "model.bin").unwrap();
            let first = &head.variables[0];
            let code_at = first.offset + 2 + first.name.len() + 1 + 1 + 4 * first.dims.len();
            bad_dtype[code_at] = 9;
            let want = parse_model_bin(&bad_dtype, "model.bin").unwrap_err().to_string();
            assert!(want.contains("unknown dtype code 9"), "{want}");
            assert_eq!(streamed(&bad_dtype, 3, None).unwrap_err().to_string(), want);
        }
    }

    /// A damaged record claiming far more data than comes (2 GiB here, consistent with its
    /// shape): with the length unknown nothing of the claim is allocated up front, and the
    /// file ends as the whole file's parse says.
    #[test]
    fn a_false_size_costs_nothing_when_the_length_is_unknown() {
        let bytes = small_models().remove(0);
        let head = parse_model_bin(&bytes, "model.bin").unwrap();
        let first = head.variables.iter().find(|v| v.dims.len() == 2).unwrap();
        let mut damaged = bytes.clone();
        // The first dimension of the first matrix (after the head, its name and its rank), and
        // its byte size (after the dimensions and the dtype code).
        let dim_at = first.offset + 2 + first.name.len() + 1 + 1;
        let size_at = dim_at + 4 * first.dims.len() + 1;
        let rows = (1usize << 31) / (first.dims[1] * first.dtype.size());
        damaged[dim_at..dim_at + 4].copy_from_slice(&(rows as u32).to_le_bytes());
        damaged[size_at..size_at + 4].copy_from_slice(&(1u32 << 31).to_le_bytes());
        let want = parse_model_bin(&damaged, "model.bin").unwrap_err().to_string();
        assert!(want.contains("needs 2147483648 bytes but the file ends at byte"), "{want}");
        for chunk in [7, 4096] {
            assert_eq!(streamed(&damaged, chunk, None).unwrap_err().to_string(), want, "chunks of {chunk}");
        }
    }

    /// A streamed model loads to the weights of the whole file, its f16 and f32 data moved into
    /// the tensors (the buffers the stream filled are the tensors' own).
    #[test]
    fn a_streamed_model_loads_as_the_whole_file() {
        for dtype in [DType::F16, DType::F32] {
            let w = random(small_config(), dtype, 7);
            let (bytes, config) = (model_bin(&w), config_json(&w));
            let parsed = streamed(&bytes, 100, Some(bytes.len())).unwrap();
            let embedding = parsed.variables.iter().find(|v| v.name == "decoder/embeddings/weight").unwrap();
            let at = embedding.data.bytes().as_ptr();
            let loaded = load_ct2_parsed(parsed, "model.bin", &config).unwrap();
            assert_eq!(loaded, load_ct2(&bytes, &config).unwrap());
            let tensor = loaded.get(crate::load::names::EMBED_TOKENS).unwrap();
            assert_eq!(tensor.as_bytes().as_ptr(), at, "the embedding was copied, not moved");
        }
    }
}
