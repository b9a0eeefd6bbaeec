//! A weights file read as it arrives is never in memory twice: the heap's high-water mark while
//! tiny.en's `model.bin`, and the same model as a `model.safetensors`, are streamed into weights
//! stays near one copy of the model, where reading the whole file and then parsing it holds two.
//!
//! One test in this binary: the heap is counted by a global allocator, which other tests
//! running beside it would disturb.

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::Read;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use susurrus_testkit::golden;
use susurrus_whisper::load::convert::{WeightFormat, hf_safetensors};
use susurrus_whisper::load::ct2::{load_ct2, load_ct2_dir, parse_model_bin};
use susurrus_whisper::load::ct2_stream::Ct2Stream;
use susurrus_whisper::load::files::{ParsedWeights, load_files_with_parsed};
use susurrus_whisper::load::hf::load_hf;
use susurrus_whisper::load::hf_stream::SafetensorsStream;

/// The system allocator, counting the bytes held and their high-water mark.
struct Counting;

static HELD: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(bytes: usize) {
    let held = HELD.fetch_add(bytes, Relaxed) + bytes;
    PEAK.fetch_max(held, Relaxed);
}

// SAFETY: every call forwards to the system allocator with the caller's arguments.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        grew(layout.size());
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        grew(layout.size());
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        HELD.fetch_sub(layout.size(), Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size >= layout.size() {
            grew(new_size - layout.size());
        } else {
            HELD.fetch_sub(layout.size() - new_size, Relaxed);
        }
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Runs `f` and returns its value with the most bytes the heap held above its level at the
/// start.
fn high_water<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let start = HELD.load(Relaxed);
    PEAK.store(start, Relaxed);
    let value = f();
    (value, PEAK.load(Relaxed) - start)
}

#[test]
fn a_streamed_weights_file_is_held_once() {
    let dir = golden::model_dir();
    let config = std::fs::read(dir.join("config.json")).unwrap();
    let vocabulary = std::fs::read(dir.join("vocabulary.txt")).unwrap();
    let path = dir.join("model.bin");
    let size = std::fs::metadata(&path).unwrap().len() as usize;
    let files = [("config.json".to_string(), config.clone()), ("vocabulary.txt".to_string(), vocabulary)].into();

    let (streamed, streamed_peak) = high_water(|| {
        let mut stream = Ct2Stream::new("model.bin", Some(size));
        read_in_chunks(&path, |chunk| stream.push(chunk).unwrap());
        let parsed = stream.finish().unwrap();
        let (weights, _tokenizer) = load_files_with_parsed(ParsedWeights::Ct2(parsed), &files).unwrap();
        weights
    });
    let (whole, whole_peak) = high_water(|| {
        let bytes = std::fs::read(&path).unwrap();
        load_ct2(&bytes, &config).unwrap()
    });

    // The same weights either way.
    let (streamed, whole) = (streamed.tensors(), whole.tensors());
    assert_eq!(streamed.keys().collect::<Vec<_>>(), whole.keys().collect::<Vec<_>>());
    for (name, a) in streamed {
        let b = &whole[name];
        assert_eq!(a.ty(), b.ty(), "{name}");
        assert!(a.as_bytes() == b.as_bytes(), "{name} differs");
    }

    // One copy and the tokenizer's tables (a few MB), against two copies.
    let mb = |b: usize| b as f64 / 1e6;
    println!(
        "model.bin {:.1} MB: streamed peak {:.1} MB, whole-file peak {:.1} MB",
        mb(size),
        mb(streamed_peak),
        mb(whole_peak)
    );
    assert!(
        streamed_peak < size + size / 10,
        "streamed: {:.1} MB held for a {:.1} MB file",
        mb(streamed_peak),
        mb(size)
    );
    assert!(
        whole_peak > 2 * size - size / 20,
        "whole file: {:.1} MB held for a {:.1} MB file",
        mb(whole_peak),
        mb(size)
    );

    // A damaged record claiming almost 2 GiB (its shape made to match), in a transfer of unknown
    // length (a compressed one) that ends early: the claim is not allocated up front, so the
    // heap holds about what arrived.
    let bytes = std::fs::read(&path).unwrap();
    let file = parse_model_bin(&bytes, "model.bin").unwrap();
    let first = file.variables.iter().find(|v| v.dims.len() == 2).unwrap();
    // The first dimension (after the record's name and rank) and the byte size (after the
    // dimensions and the dtype code).
    let dim_at = first.offset + 2 + first.name.len() + 1 + 1;
    let size_at = dim_at + 4 * first.dims.len() + 1;
    let row_bytes = first.dims[1] * first.dtype.size();
    let claim = (1usize << 31) / row_bytes * row_bytes;
    let mut damaged = bytes[..size_at + 4 + (1 << 20)].to_vec();
    drop(file);
    drop(bytes);
    damaged[dim_at..dim_at + 4].copy_from_slice(&((claim / row_bytes) as u32).to_le_bytes());
    damaged[size_at..size_at + 4].copy_from_slice(&(claim as u32).to_le_bytes());
    let (err, damaged_peak) = high_water(|| {
        let mut stream = Ct2Stream::new("model.bin", None);
        damaged.chunks(64 << 10).try_for_each(|c| stream.push(c)).and_then(|()| stream.finish()).map(|_| ())
    });
    let err = err.unwrap_err().to_string();
    assert!(err.contains(&format!("needs {claim} bytes but the file ends at byte")), "{err}");
    println!("damaged record claiming almost 2 GiB, cut after 1 MB: peak {:.1} MB", mb(damaged_peak));
    assert!(damaged_peak < 8 << 20, "{:.1} MB held for a record cut after 1 MB", mb(damaged_peak));

    // The same model as a Hugging Face file (f16), streamed and read whole.
    let hf = std::env::temp_dir().join(format!("susurrus-stream-memory-{}.safetensors", std::process::id()));
    std::fs::write(&hf, hf_safetensors(&load_ct2_dir(&dir).unwrap(), WeightFormat::F16).unwrap()).unwrap();
    let hf_size = std::fs::metadata(&hf).unwrap().len() as usize;
    let hf_config = hf_config_json();
    let hf_files =
        [("config.json".to_string(), hf_config.clone()), ("vocabulary.txt".to_string(), vocabulary_of(&dir))].into();
    let (_, hf_streamed_peak) = high_water(|| {
        let mut stream = SafetensorsStream::new("model.safetensors", Some(hf_size));
        read_in_chunks(&hf, |chunk| stream.push(chunk).unwrap());
        load_files_with_parsed(ParsedWeights::Hf(stream.finish().unwrap()), &hf_files).unwrap().0
    });
    let (_, hf_whole_peak) = high_water(|| load_hf(&std::fs::read(&hf).unwrap(), &hf_config).unwrap());
    std::fs::remove_file(&hf).unwrap();
    println!(
        "model.safetensors {:.1} MB: streamed peak {:.1} MB, whole-file peak {:.1} MB",
        mb(hf_size),
        mb(hf_streamed_peak),
        mb(hf_whole_peak)
    );
    assert!(hf_streamed_peak < hf_size + hf_size / 10, "streamed: {:.1} MB held", mb(hf_streamed_peak));
    assert!(hf_whole_peak > 2 * hf_size - hf_size / 20, "whole file: {:.1} MB held", mb(hf_whole_peak));
}

/// Reads the file at `path` in 64 KiB reads, as a browser's response stream hands them over.
fn read_in_chunks(path: &std::path::Path, mut each: impl FnMut(&[u8])) {
    let mut file = std::fs::File::open(path).unwrap();
    let mut chunk = vec![0u8; 64 << 10];
    loop {
        let n = file.read(&mut chunk).unwrap();
        if n == 0 {
            break;
        }
        each(&chunk[..n]);
    }
}

/// The model folder's vocabulary.
fn vocabulary_of(dir: &std::path::Path) -> Vec<u8> {
    std::fs::read(dir.join("vocabulary.txt")).unwrap()
}

/// tiny.en's Hugging Face `config.json` (its attention heads; the rest the tensors give).
fn hf_config_json() -> Vec<u8> {
    br#"{"model_type": "whisper", "encoder_attention_heads": 6, "decoder_attention_heads": 6}"#.to_vec()
}
