//! A `model.safetensors` read as it arrives (the browser's download): chunks of any size are
//! pushed in; the header is checked as soon as it is whole (by [`crate::load::hf::read_header`], as
//! the whole file's parse checks it), and each tensor's data then goes straight into the buffer
//! its tensor keeps (f32 and f16 as they are, bf16 widened to f32 as it comes, I8 as bytes), so
//! a model is never held twice. A damaged or cut file fails with the whole file's parse's error.

use std::collections::TryReserveError;

use safetensors::Dtype;
use safetensors::tensor::TensorInfo;

use crate::error::model_error;
use crate::error::{Error, Result};
use crate::load::file_data::FileData;
use crate::load::hf::{SafeTensor, header_length, past_the_end, read_header, supported, widen_bf16};

/// Bytes of the header-length prefix.
const LEN_BYTES: usize = 8;

/// The header, once whole, and where the data section has got to.
struct Data {
    /// The header's bytes (kept: a file that ends wrong is explained from them).
    header: Vec<u8>,
    /// The tensors in data order, and the next one to fill.
    tensors: Vec<(String, TensorInfo)>,
    next: usize,
    /// The tensor being filled and how many of its file bytes have come.
    filling: Option<(FileData<'static>, usize)>,
    /// With the file's length unknown, an unsupported dtype is reported once the file has
    /// ended (as the whole file's parse does, which checks the data section's size first);
    /// the tensors' bytes are then only counted.
    unsupported: Option<String>,
    /// With the file's length unknown, a header that fails its checks: its error names the
    /// file's length, so it is reported at the end and the bytes until then are only counted.
    broken: bool,
}

/// A `model.safetensors` being read.
pub struct SafetensorsStream {
    file: String,
    /// The file's length, when the transfer said it: the header is then checked against it
    /// before any tensor is allocated.
    length: Option<usize>,
    /// Bytes received and not yet used.
    pending: Vec<u8>,
    /// Where `pending` starts in the file.
    base: usize,
    data: Option<Data>,
    parsed: Vec<SafeTensor<'static>>,
}

impl SafetensorsStream {
    /// A stream of the file `file` (its name in errors), `length` bytes long when known.
    pub fn new(file: &str, length: Option<usize>) -> Self {
        SafetensorsStream {
            file: file.to_string(),
            length,
            pending: Vec::new(),
            base: 0,
            data: None,
            parsed: Vec::new(),
        }
    }

    /// The next bytes of the file.
    pub fn push(&mut self, chunk: &[u8]) -> Result<()> {
        self.pending.extend_from_slice(chunk);
        if self.data.is_none() && !self.header()? {
            return Ok(());
        }
        self.fill()
    }

    /// The tensors, in data order; an error when the file ended early, went on past its
    /// last tensor, or holds a dtype this reader does not take.
    pub fn finish(mut self) -> Result<Vec<SafeTensor<'static>>> {
        let end = self.base + self.pending.len();
        let Some(data) = &self.data else {
            // The whole file's parse of these bytes: too few for the length, or a header
            // running past them.
            let n = header_length(&self.pending, end).map_err(|e| model_error(&self.file, e))?;
            return Err(model_error(&self.file, past_the_end(n, end)));
        };
        let complete = !data.broken && data.next == data.tensors.len() && self.pending.is_empty();
        if !complete {
            // The header read against the length the file turned out to have says what the
            // whole file's parse says.
            let why = read_header(&data.header, Some(end)).err();
            return Err(model_error(
                &self.file,
                why.unwrap_or_else(|| format!("the file ends at byte {end}, inside its data section")),
            ));
        }
        if let Some(unsupported) = &data.unsupported {
            return Err(model_error(&self.file, unsupported.clone()));
        }
        Ok(std::mem::take(&mut self.parsed))
    }

    /// Reads the header once it is whole; `false` while it waits for more bytes.
    fn header(&mut self) -> Result<bool> {
        if self.pending.len() < LEN_BYTES {
            return Ok(false);
        }
        let fail = |e: String| model_error(&self.file, e);
        let n = header_length(&self.pending, self.pending.len()).map_err(fail)?;
        if let Some(length) = self.length.filter(|&length| length < LEN_BYTES + n) {
            return Err(fail(past_the_end(n, length)));
        }
        if self.pending.len() < LEN_BYTES + n {
            return Ok(false);
        }
        let header = self.pending[LEN_BYTES..LEN_BYTES + n].to_vec();
        let (tensors, broken) = match read_header(&header, self.length) {
            Ok(tensors) => (tensors, false),
            Err(e) if self.length.is_some() => return Err(fail(e)),
            Err(_) => (Vec::new(), true),
        };
        let unsupported = supported(&tensors).err();
        if let (Some(e), Some(_)) = (&unsupported, self.length) {
            return Err(fail(e.clone()));
        }
        self.pending.drain(..LEN_BYTES + n);
        self.base = LEN_BYTES + n;
        self.data = Some(Data { header, tensors, next: 0, filling: None, unsupported, broken });
        Ok(true)
    }

    /// Moves pending bytes into the tensors they belong to.
    fn fill(&mut self) -> Result<()> {
        let Some(data) = &mut self.data else { return Ok(()) };
        if data.broken {
            self.base += self.pending.len();
            self.pending.clear();
            return Ok(());
        }
        let data_start = LEN_BYTES + data.header.len();
        while data.next < data.tensors.len() {
            let (name, info) = &data.tensors[data.next];
            let (begin, end) = info.data_offsets;
            let n_bytes = end - begin;
            let (buffer, filled) = match &mut data.filling {
                Some(filling) => filling,
                None => {
                    let buffer = allocate(info.dtype, n_bytes, self.length.is_some(), data.unsupported.is_some())
                        .map_err(|e| cannot_allocate(&self.file, name, n_bytes, e))?;
                    data.filling.insert((buffer, 0))
                }
            };
            let mut take = (n_bytes - *filled).min(self.pending.len());
            if info.dtype == Dtype::BF16 && take % 2 == 1 {
                // Whole values only: the odd byte waits for its pair.
                take -= 1;
            }
            if take == 0 && *filled < n_bytes {
                return Ok(());
            }
            let bytes = &self.pending[..take];
            let stored = match buffer {
                _ if data.unsupported.is_some() => Ok(()),
                FileData::F32(values) if info.dtype == Dtype::BF16 => {
                    values.try_reserve(take / 2).map(|()| values.extend_from_slice(&widen_bf16(bytes)))
                }
                buffer if self.length.is_some() => {
                    buffer.bytes_mut()[*filled..*filled + take].copy_from_slice(bytes);
                    Ok(())
                }
                buffer => buffer.resize(*filled + take, false).map(|()| {
                    buffer.bytes_mut()[*filled..*filled + take].copy_from_slice(bytes);
                }),
            };
            stored.map_err(|e| cannot_allocate(&self.file, name, n_bytes, e))?;
            *filled += take;
            self.pending.drain(..take);
            self.base += take;
            if *filled < n_bytes {
                return Ok(());
            }
            if let Some((mut buffer, _)) = data.filling.take() {
                buffer.shrink();
                let (dtype, dims, offset) = (info.dtype, info.shape.clone(), data_start + begin);
                self.parsed.push(SafeTensor { name: name.clone(), dtype, dims, offset, data: buffer });
            }
            data.next += 1;
        }
        Ok(())
    }
}

/// The buffer for a tensor of `n_bytes` bytes in the file, in the type its tensor keeps (bf16
/// as the f32 values it widens to). `whole`: the file's length is known and the header was
/// checked against it, so the buffer is allocated whole (bf16's reserved); otherwise it starts
/// empty and grows as the bytes arrive, so a false size claims nothing up front. `skipped`: the
/// bytes are only counted.
fn allocate(
    dtype: Dtype,
    n_bytes: usize,
    whole: bool,
    skipped: bool,
) -> std::result::Result<FileData<'static>, TryReserveError> {
    let mut buffer = match dtype {
        _ if skipped => return Ok(FileData::Bytes(Vec::new())),
        Dtype::F32 => FileData::F32(Vec::new()),
        Dtype::F16 => FileData::F16(Vec::new()),
        Dtype::BF16 => {
            let mut values = Vec::new();
            if whole {
                values.try_reserve_exact(n_bytes / 2)?;
            }
            return Ok(FileData::F32(values));
        }
        _ => FileData::Bytes(Vec::new()),
    };
    if whole {
        buffer.resize(n_bytes, true)?;
    }
    Ok(buffer)
}

fn cannot_allocate(file: &str, name: &str, bytes: usize, e: TryReserveError) -> Error {
    model_error(file, format!("tensor {name}: cannot allocate {bytes} bytes: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::convert::{WeightFormat, hf_safetensors};
    use crate::load::hf::writer::{config_json, safetensors, with_header};
    use crate::load::hf::{load_hf, load_hf_parsed, parse_safetensors};
    use crate::load::weights::testing::{random, small_config};
    use susurrus_core::ir::DType;

    fn streamed(bytes: &[u8], chunk: usize, length: Option<usize>) -> Result<Vec<SafeTensor<'static>>> {
        let mut stream = SafetensorsStream::new("model.safetensors", length);
        for piece in bytes.chunks(chunk) {
            stream.push(piece)?;
        }
        stream.finish()
    }

    /// A tensor's name, dtype, shape, offset and bytes (bf16 as the f32 values it widens to).
    type Contents = (String, Dtype, Vec<usize>, usize, Vec<u8>);

    /// The contents of each tensor.
    fn contents(tensors: &[SafeTensor]) -> Vec<Contents> {
        tensors
            .iter()
            .map(|t| {
                let values = match (&t.data, t.dtype) {
                    (FileData::Borrowed(b), Dtype::BF16) => bytemuck::cast_slice(&widen_bf16(b)).to_vec(),
                    (data, _) => data.bytes().to_vec(),
                };
                (t.name.clone(), t.dtype, t.dims.clone(), t.offset, values)
            })
            .collect()
    }

    /// A file of `w`'s tensors as bf16 (each f32 value's upper half).
    fn bf16_file(w: &crate::load::weights::WhisperWeights) -> Vec<u8> {
        let stored: Vec<(String, Vec<usize>, Vec<u8>)> = w
            .tensors()
            .iter()
            .map(|(name, t)| {
                let bytes = t.to_f32().iter().flat_map(|v| half::bf16::from_f32(*v).to_le_bytes()).collect();
                (name.clone(), t.shape().dims().to_vec(), bytes)
            })
            .collect();
        let views = stored.iter().map(|(name, dims, bytes)| {
            (name.as_str(), safetensors::tensor::TensorView::new(Dtype::BF16, dims.clone(), bytes).unwrap())
        });
        safetensors::serialize(views, None).unwrap()
    }

    /// f16, f32, bf16 and int8 files of one small model, with its config.
    fn files() -> Vec<(Vec<u8>, Vec<u8>)> {
        let (f16, f32) = (random(small_config(), DType::F16, 3), random(small_config(), DType::F32, 3));
        let config = config_json(&f16);
        vec![
            (safetensors(&f16), config.clone()),
            (safetensors(&f32), config.clone()),
            (bf16_file(&f32), config.clone()),
            (hf_safetensors(&f16, WeightFormat::Int8).unwrap(), config),
        ]
    }

    #[test]
    fn chunks_of_any_size_give_the_whole_files_tensors_and_weights() {
        for (bytes, config) in files() {
            let whole = parse_safetensors(&bytes, "model.safetensors").unwrap();
            let want = load_hf(&bytes, &config).unwrap();
            for chunk in [1, 2, 3, 7, 64, 4096, bytes.len()] {
                for length in [None, Some(bytes.len())] {
                    let got = streamed(&bytes, chunk, length).unwrap();
                    assert_eq!(contents(&got), contents(&whole), "chunks of {chunk}, length {length:?}");
                    if chunk == 7 {
                        assert_eq!(load_hf_parsed(got, &config, None).unwrap(), want);
                    }
                }
            }
        }
    }

    /// A file cut anywhere, or with bytes after its last tensor, fails with the whole file's
    /// parse's error, whether the transfer announced its length or not.
    #[test]
    fn damaged_files_fail_as_the_whole_files_parse() {
        for (bytes, _) in files() {
            // Every byte of the length and the start of the header, then steps through the rest.
            let mut cuts: Vec<usize> = (0..bytes.len()).step_by((bytes.len() / 500).max(1)).collect();
            cuts.extend(0..100.min(bytes.len()));
            cuts.extend(bytes.len().saturating_sub(64)..bytes.len());
            for cut in cuts {
                let want = parse_safetensors(&bytes[..cut], "model.safetensors").unwrap_err().to_string();
                for (chunk, length) in [(5, None), (4096, Some(cut))] {
                    let got = streamed(&bytes[..cut], chunk, length).unwrap_err().to_string();
                    assert_eq!(got, want, "cut at {cut}, chunks of {chunk}, length {length:?}");
                }
            }
            let mut longer = bytes.clone();
            longer.extend_from_slice(&[1, 2, 3]);
            let want = parse_safetensors(&longer, "model.safetensors").unwrap_err().to_string();
            assert!(want.ends_with(&format!("3 bytes after the last tensor, from byte {}", bytes.len())), "{want}");
            for length in [None, Some(longer.len())] {
                assert_eq!(streamed(&longer, 2, length).unwrap_err().to_string(), want);
            }
        }
    }

    #[test]
    fn bad_headers_and_dtypes_fail_as_the_whole_files_parse() {
        let (bytes, _) = files().remove(0);
        let bad = [
            with_header(&bytes, |h| h["model.encoder.conv1.bias"]["dtype"] = "I16".into()),
            with_header(&bytes, |h| h["model.encoder.conv1.bias"]["shape"] = serde_json::json!([4])),
            with_header(&bytes, |h| h["model.encoder.conv1.bias"] = serde_json::json!({"dtype": "F16"})),
            {
                let mut b = bytes.clone();
                b[9] = 0xff;
                b
            },
            {
                let mut b = bytes.clone();
                b[5] = 1;
                b
            },
        ];
        for file in bad {
            let want = parse_safetensors(&file, "model.safetensors").unwrap_err().to_string();
            for (chunk, length) in [(3, None), (4096, Some(file.len())), (file.len(), None)] {
                assert_eq!(streamed(&file, chunk, length).unwrap_err().to_string(), want, "{want}");
            }
            // Cut as well: the unsupported dtype waits for the end when the length is unknown.
            let cut = &file[..file.len() - 1];
            let want = parse_safetensors(cut, "model.safetensors").unwrap_err().to_string();
            assert_eq!(streamed(cut, 11, None).unwrap_err().to_string(), want);
        }
    }

    /// A header claiming far more data than comes (a 2 GB tensor), in a transfer of unknown
    /// length: the file ends as the whole file's parse says, having allocated about what came.
    #[test]
    fn a_false_size_fails_as_the_whole_files_parse() {
        let (bytes, _) = files().remove(0);
        let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
        let mut header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
        // One tensor, first in the data section, made 2 GB; the others keep their sizes after it.
        let huge = 1usize << 31;
        let map = header.as_object_mut().unwrap();
        let first = map
            .iter()
            .filter(|(k, _)| *k != "__metadata__")
            .min_by_key(|(_, v)| v["data_offsets"][0].as_u64().unwrap())
            .map(|(k, _)| k.clone())
            .unwrap();
        let old = map[&first]["data_offsets"][1].as_u64().unwrap() as usize;
        for (name, v) in map.iter_mut().filter(|(k, _)| *k != "__metadata__") {
            let (b, e) =
                (v["data_offsets"][0].as_u64().unwrap() as usize, v["data_offsets"][1].as_u64().unwrap() as usize);
            if *name == first {
                v["data_offsets"] = serde_json::json!([0, huge]);
                v["shape"] = serde_json::json!([huge / 2]);
            } else {
                v["data_offsets"] = serde_json::json!([b - old + huge, e - old + huge]);
            }
        }
        let text = header.to_string();
        let mut file = (text.len() as u64).to_le_bytes().to_vec();
        file.extend(text.as_bytes());
        file.extend(&bytes[8 + n..]);
        let want = parse_safetensors(&file, "model.safetensors").unwrap_err().to_string();
        assert!(want.contains("lie outside the data section"), "{want}");
        assert_eq!(streamed(&file, 4096, None).unwrap_err().to_string(), want);
    }

    /// f16 and f32 data moves into the tensors: the buffers the stream filled are theirs.
    #[test]
    fn a_streamed_model_loads_moving_its_data() {
        for dtype in [DType::F16, DType::F32] {
            let w = random(small_config(), dtype, 7);
            let (bytes, config) = (safetensors(&w), config_json(&w));
            let parsed = streamed(&bytes, 100, Some(bytes.len())).unwrap();
            let embedding = parsed.iter().find(|t| t.name == crate::load::names::EMBED_TOKENS).unwrap();
            let at = embedding.data.bytes().as_ptr();
            let loaded = load_hf_parsed(parsed, &config, None).unwrap();
            assert_eq!(loaded, load_hf(&bytes, &config).unwrap());
            let tensor = loaded.get(crate::load::names::EMBED_TOKENS).unwrap();
            assert_eq!(tensor.as_bytes().as_ptr(), at, "the embedding was copied, not moved");
        }
    }
}
