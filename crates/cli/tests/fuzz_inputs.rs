//! The fuzz targets in the test suite: every committed seed and crash input (`fuzz/corpus/`),
//! then a short seeded mutation run from those seeds (bit flips, byte and word overwrites with
//! boundary values, cuts, deleted, repeated and spliced stretches, as libFuzzer mutates), through
//! the same bodies `cargo fuzz` runs (`fuzz/src/targets.rs`). A panic is a failure; the input
//! that caused it is written out with the command that replays it. The coverage-guided run with
//! sanitizers is `scripts/fuzz.sh` (a nightly compiler and a build of its own, too long for
//! every run of the suite).

#[path = "../../../fuzz/src/targets.rs"]
mod targets;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Mutants per target.
const MUTANTS: usize = 20_000;

fn corpus(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus").join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .collect();
    files.sort();
    files.into_iter().map(|path| (path.clone(), std::fs::read(&path).unwrap())).collect()
}

/// Runs `body` on `input`; a panic writes the input out and returns what to report.
fn run(target: &str, body: fn(&[u8]), input: &[u8], what: &str) -> Option<String> {
    let outcome = catch_unwind(AssertUnwindSafe(|| body(input)));
    outcome.err().map(|panic| {
        let message = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fuzz-inputs");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("{target}-{}", what.replace(['/', ' '], "_")));
        std::fs::write(&path, input).unwrap();
        format!(
            "{target}: {what} panicked: {message}\n  input: {}\n  keep it as a regression input once fixed: \
             cp {} fuzz/corpus/{target}/regression_NAME",
            path.display(),
            path.display()
        )
    })
}

#[test]
fn every_committed_input_is_read_without_a_panic() {
    let mut failures = Vec::new();
    for (target, body, _) in targets::TARGETS {
        let inputs = corpus(target);
        assert!(!inputs.is_empty(), "fuzz/corpus/{target} has no seeds");
        for (path, input) in inputs {
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            failures.extend(run(target, body, &input, &name));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Values where size and offset checks break.
const BOUNDARY_WORDS: [u32; 10] = [0, 1, 0x7f, 0x80, 0xff, 0xffff, 0x7fff_ffff, 0x8000_0000, 0xffff_fffe, 0xffff_ffff];

/// One to four libFuzzer-style mutations of `input`, `others` giving spliced stretches.
fn mutate(rng: &mut StdRng, input: &[u8], others: &[Vec<u8>], max_len: usize) -> Vec<u8> {
    let mut data = input.to_vec();
    for _ in 0..rng.random_range(1..=4) {
        if data.is_empty() {
            data.push(rng.random());
            continue;
        }
        let at = rng.random_range(0..data.len());
        match rng.random_range(0..8) {
            0 => data[at] ^= 1 << rng.random_range(0..8),
            1 => data[at] = rng.random(),
            2 => data[at] = BOUNDARY_WORDS[rng.random_range(0..BOUNDARY_WORDS.len())] as u8,
            3 => {
                let word = BOUNDARY_WORDS[rng.random_range(0..BOUNDARY_WORDS.len())];
                let bytes = if rng.random() { word.to_le_bytes() } else { word.to_be_bytes() };
                for (k, b) in bytes.iter().enumerate() {
                    if let Some(slot) = data.get_mut(at + k) {
                        *slot = *b;
                    }
                }
            }
            4 => data.truncate(at),
            5 => {
                let end = rng.random_range(at..=data.len().min(at + 64));
                data.drain(at..end);
            }
            6 => {
                let end = rng.random_range(at..=data.len().min(at + 64));
                let stretch = data[at..end].to_vec();
                let to = rng.random_range(0..=data.len());
                data.splice(to..to, stretch);
            }
            _ => {
                let other = &others[rng.random_range(0..others.len())];
                if !other.is_empty() {
                    let from = rng.random_range(0..other.len());
                    let end = rng.random_range(from..=other.len().min(from + 256));
                    let to = at.min(data.len());
                    let end_to = (to + end - from).min(data.len());
                    data.splice(to..end_to, other[from..end].iter().copied());
                }
            }
        }
        data.truncate(max_len);
    }
    data
}

#[test]
fn mutated_inputs_are_read_without_a_panic() {
    let mut failures = Vec::new();
    for (target, body, max_len) in targets::TARGETS {
        let seeds: Vec<Vec<u8>> = corpus(target).into_iter().map(|(_, bytes)| bytes).collect();
        let seed = target.bytes().fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)));
        let mut rng = StdRng::seed_from_u64(seed);
        for n in 0..MUTANTS {
            let input = mutate(&mut rng, &seeds[n % seeds.len()], &seeds, max_len);
            if let Some(failure) = run(target, body, &input, &format!("mutant-{n}")) {
                failures.push(failure);
                break;
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The harness itself: a reader that panics is reported with its message, and its input is
/// written out where the report says.
#[test]
fn a_panic_is_reported_with_its_input() {
    fn picky(data: &[u8]) {
        assert!(!data.contains(&0x42), "found the byte");
    }
    assert_eq!(run("picky", picky, b"fine", "seed"), None);
    let report = run("picky", picky, b"xx\x42yy", "mutant 7").expect("the panic is reported");
    assert!(report.starts_with("picky: mutant 7 panicked: found the byte\n  input: "), "{report}");
    let path = report.lines().nth(1).unwrap().trim().strip_prefix("input: ").unwrap();
    assert!(path.ends_with("picky-mutant_7"), "{report}");
    assert_eq!(std::fs::read(path).unwrap(), b"xx\x42yy");
}
