//! The shape of the code, checked from its sources: each crate imports only the crates below
//! it, and inside the compiler crate each module imports only the modules before it in the
//! pipeline (ARCHITECTURE.md: tensor -> ir/ops -> passes -> plan -> exec). A change that
//! makes an op file reach into a backend, or a pass into the executors, fails here.

use std::path::{Path, PathBuf};

/// The workspace root.
fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every `.rs` file under `dir`, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|x| x == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// The code of a source file without comments (line comments and doc comments), so prose
/// that names a module is not taken for an import.
fn code_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .map(|(i, line)| (i + 1, line.split("//").next().unwrap_or("")))
        .filter(|(_, l)| !l.trim().is_empty())
}

/// The identifiers that follow `prefix` in `line` (`crate::` gives the modules a line names).
fn names_after<'a>(line: &'a str, prefix: &str) -> Vec<&'a str> {
    line.match_indices(prefix)
        .filter(|(at, _)| !line[..*at].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == ':' || c == '$'))
        .map(|(at, _)| {
            let rest = &line[at + prefix.len()..];
            let end = rest.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(rest.len());
            &rest[..end]
        })
        .filter(|name| !name.is_empty())
        .collect()
}

/// Imports in `crate_dir/src` from one top-level module into one that `rank` puts later, as
/// `file:line: a imports b` lines. Modules `rank` does not know are reported too, so a new
/// module has to be given its place.
fn upward_imports(crate_dir: &str, rank: &dyn Fn(&str) -> Option<usize>) -> Vec<String> {
    let src = root().join(crate_dir).join("src");
    let mut found = Vec::new();
    for file in rust_files(&src) {
        let relative = file.strip_prefix(&src).unwrap().to_path_buf();
        let module =
            relative.components().next().unwrap().as_os_str().to_string_lossy().trim_end_matches(".rs").to_string();
        if module == "lib" || module == "main" {
            continue;
        }
        let Some(own) = rank(&module) else {
            found.push(format!("{crate_dir}/src/{}: module {module} has no place in the order", relative.display()));
            continue;
        };
        let text = std::fs::read_to_string(&file).unwrap();
        for (number, line) in code_lines(&text) {
            for name in names_after(line, "crate::") {
                match rank(name) {
                    Some(theirs) if theirs > own => {
                        found.push(format!("{crate_dir}/src/{}:{number}: {module} imports {name}", relative.display()))
                    }
                    _ => {}
                }
            }
        }
    }
    found
}

#[test]
fn core_modules_import_only_earlier_ones() {
    // One rank per pipeline stage; `ir` and `ops` are one stage (a graph holds ops, ops are
    // added to graphs by their builder methods).
    let rank = |module: &str| match module {
        "error" | "tensor" => Some(0),
        "ir" | "ops" => Some(1),
        "passes" => Some(2),
        "plan" => Some(3),
        "exec" => Some(4),
        _ => None,
    };
    let found = upward_imports("crates/core", &rank);
    assert!(found.is_empty(), "imports against the pipeline order:\n{}", found.join("\n"));
}

/// The model crate's folders in pipeline order (crates/whisper/src/lib.rs): an import from a
/// folder to a later one fails here, and so does a circle between two folders. Names the crate
/// root re-exports (`crate::Segment`) count as imports of the folder that defines them.
#[test]
fn whisper_folders_import_only_earlier_ones() {
    let folder_rank = |module: &str| match module {
        "error" | "constants" | "files" => Some(0),
        "text" => Some(1),
        "audio" => Some(2),
        "load" => Some(3),
        "graphs" => Some(4),
        "program" => Some(5),
        "vad" => Some(6),
        "decode" => Some(7),
        "live" => Some(8),
        "bench" => Some(9),
        _ => None,
    };
    let reexports = root_reexports("crates/whisper");
    assert!(reexports.iter().any(|(name, module)| name == "Segment" && module == "decode"), "{reexports:?}");
    let rank = |name: &str| {
        folder_rank(name).or_else(|| reexports.iter().find(|(n, _)| n == name).and_then(|(_, m)| folder_rank(m)))
    };
    let found = upward_imports("crates/whisper", &rank);
    assert!(found.is_empty(), "imports against the folders' order:\n{}", found.join("\n"));
}

/// The command's layers (crates/cli/src/lib.rs): the shared pieces, `load`, then the
/// subcommands, of which none imports another: a subcommand's file names no other file under
/// `commands/`, and `commands/`, `bench/` and `serve/` do not import one another.
#[test]
fn the_command_layers_and_its_subcommands_import_no_other_subcommand() {
    let rank = |module: &str| match module {
        "error" => Some(0),
        "args" | "audio" | "backend" | "destination" | "handover" | "hub" | "output" => Some(1),
        "load" => Some(2),
        "bench" | "commands" | "serve" => Some(3),
        _ => None,
    };
    let mut found = upward_imports("crates/cli", &rank);
    let src = root().join("crates/cli/src");
    for file in rust_files(&src) {
        let relative = file.strip_prefix(&src).unwrap().to_path_buf();
        let folder =
            relative.components().next().unwrap().as_os_str().to_string_lossy().trim_end_matches(".rs").to_string();
        if !["bench", "commands", "serve"].contains(&folder.as_str()) {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        for (number, line) in code_lines(&text) {
            for name in names_after(line, "crate::") {
                let other = ["bench", "commands", "serve"].contains(&name) && name != folder;
                let sibling = folder == "commands" && name == "commands";
                if other || sibling {
                    found.push(format!("crates/cli/src/{}:{number}: {folder} imports {name}", relative.display()));
                }
            }
        }
    }
    assert!(found.is_empty(), "imports against the command's layers:\n{}", found.join("\n"));
}

/// The audio front end in pipeline order: the pieces symphonia lacks (Opus's decoder, the
/// watchers of OGG pages and MP4 boxes), what it reads (`formats`, and the byte counter), the
/// decoders, the packet loop; the sample store stands apart (the loop writes to any
/// `SampleSink`).
#[test]
fn audio_modules_import_only_earlier_ones() {
    let rank = |module: &str| match module {
        "opus" | "ogg" | "mp4" | "damage" | "store" => Some(0),
        "formats" => Some(1),
        "counted" => Some(1),
        "codec" => Some(2),
        "decode" => Some(3),
        _ => None,
    };
    let found = upward_imports("crates/audio", &rank);
    assert!(found.is_empty(), "imports against the audio front end's order:\n{}", found.join("\n"));
}

/// `(name, module)` for every name the crate's lib.rs re-exports with `pub use module::...`.
fn reexports_of(lib: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    for (_, line) in code_lines(lib) {
        let Some(path) = line.trim().strip_prefix("pub use ").and_then(|p| p.strip_suffix(';')) else { continue };
        let module = path.split("::").next().unwrap_or("").to_string();
        let names = match path.split_once('{') {
            Some((_, list)) => list.trim_end_matches('}').split(',').map(str::trim).map(str::to_string).collect(),
            None => vec![path.rsplit("::").next().unwrap_or("").to_string()],
        };
        found.extend(names.into_iter().filter(|n| !n.is_empty()).map(|n| (n, module.clone())));
    }
    found
}

fn root_reexports(crate_dir: &str) -> Vec<(String, String)> {
    reexports_of(&std::fs::read_to_string(root().join(crate_dir).join("src/lib.rs")).unwrap())
}

#[test]
fn the_layering_check_finds_an_upward_import() {
    assert_eq!(names_after("use crate::exec::wgpu::{KernelCtx}; x::crate::no", "crate::"), ["exec"]);
    assert_eq!(names_after("let p = crate::plan::plan(g); // crate::exec", "crate::"), ["plan", "exec"]);
    let lines: Vec<_> = code_lines("use crate::ir::Graph; // crate::exec\n/// crate::exec\n").collect();
    assert_eq!(lines, [(1, "use crate::ir::Graph; ")]);
    let reexports = reexports_of("pub use a::b::{C, D};\npub use e::F; // pub use g::H;\n");
    let want = [("C", "a"), ("D", "a"), ("F", "e")].map(|(n, m)| (n.to_string(), m.to_string()));
    assert_eq!(reexports, want);
}

/// The crates each crate may use, from its manifest's `[dependencies]` (dev-dependencies may
/// reach further: tests link the test kit). The compiler at the bottom; the backends and the
/// model beside each other on it, naming neither each other nor the model; the audio front end
/// on the model (its sample store and resampler); the browser package, the command and the
/// test kit on top. Every crate under crates/ has a line here.
#[test]
fn crates_depend_only_on_crates_below() {
    let allowed: [(&str, &[&str]); 9] = [
        ("core", &[]),
        ("cpu", &["susurrus-core"]),
        ("wgpu", &["susurrus-core"]),
        ("cuda", &["susurrus-core"]),
        ("whisper", &["susurrus-core"]),
        ("audio", &["susurrus-whisper"]),
        ("testkit", &["susurrus-core", "susurrus-cpu", "susurrus-wgpu", "susurrus-whisper"]),
        ("web", &["susurrus-core", "susurrus-cpu", "susurrus-wgpu", "susurrus-whisper", "susurrus-audio"]),
        (
            "cli",
            &["susurrus-core", "susurrus-cpu", "susurrus-wgpu", "susurrus-cuda", "susurrus-whisper", "susurrus-audio"],
        ),
    ];
    let mut present: Vec<String> = std::fs::read_dir(root().join("crates"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    present.sort();
    let mut listed: Vec<String> = allowed.iter().map(|(name, _)| name.to_string()).collect();
    listed.sort();
    assert_eq!(present, listed, "every crate under crates/ needs its place in this list");
    for (name, may) in allowed {
        let path = root().join("crates").join(name).join("Cargo.toml");
        let manifest = std::fs::read_to_string(&path).unwrap();
        let mut section = String::new();
        for line in manifest.lines() {
            let line = line.trim();
            if line.starts_with('[') {
                section = line.to_string();
                continue;
            }
            let is_dependency = section.ends_with("dependencies]") && !section.contains("dev-dependencies");
            let dependency = line.split(['.', ' ', '=']).next().unwrap_or("");
            if is_dependency && dependency.starts_with("susurrus-") {
                assert!(may.contains(&dependency), "{}: crates/{name} depends on {dependency}", path.display());
            }
        }
    }
}

/// The compiler, the model and the audio front end name no backend crate even in their tests:
/// their backend tests take backends from the test kit (`susurrus_testkit::backends`,
/// `for_each_backend!`) as `Box<dyn Backend>`, so no test below the backends depends on one
/// backend's type.
#[test]
fn the_compiler_the_model_and_the_audio_name_no_backend_even_in_tests() {
    for name in ["core", "whisper", "audio"] {
        let path = root().join("crates").join(name).join("Cargo.toml");
        let manifest = std::fs::read_to_string(&path).unwrap();
        for backend in ["susurrus-cpu", "susurrus-wgpu", "susurrus-cuda", "wgpu", "cudarc"] {
            let named = manifest.lines().any(|l| l.trim().split(['.', ' ', '=']).next() == Some(backend));
            assert!(!named, "{}: crates/{name} names {backend}", path.display());
        }
    }
}
