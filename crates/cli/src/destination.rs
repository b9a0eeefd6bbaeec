//! Where transcripts go, checked before any work: standard output must be open; an output
//! folder must be writable; no transcript may replace one of the inputs, nor an existing file
//! unless `--overwrite` says so. A transcript file is written whole to a temporary file beside
//! its destination and renamed over it, so a failed write (a full disk, a killed run) leaves
//! no half-written or empty transcript behind.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Fails when standard output was closed (`>&-`): writes to it would vanish. The Rust runtime
/// reopens a standard descriptor that is closed at start-up on `/dev/null`, read-write, so
/// that is what it looks like now; a shell's `> /dev/null` opens it write-only, and stays
/// allowed.
pub fn check_stdout(advice: &str) -> Result<()> {
    #[cfg(unix)]
    {
        use std::os::fd::{AsFd, AsRawFd};
        let stdout = std::io::stdout();
        let fd = stdout.as_fd();
        // SAFETY: F_GETFL only reads the flags of a descriptor the process holds.
        let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
        let dev_null = std::fs::metadata("/dev/null").ok();
        let target = fd.try_clone_to_owned().map(std::fs::File::from).and_then(|f| f.metadata()).ok();
        let read_write = flags >= 0 && flags & libc::O_ACCMODE == libc::O_RDWR;
        if read_write && target.zip(dev_null).is_some_and(|(target, dev_null)| is_dev_null(&target, &dev_null)) {
            return Err(Error::Usage(format!("standard output is closed: {advice}")));
        }
    }
    Ok(())
}

/// Whether a descriptor whose metadata is `target` is open on `/dev/null` (whose metadata is
/// `dev_null`): the same file, by device and inode (`st_dev`, `st_ino`), and so of the same
/// type (a character device on a usual machine). Comparing `st_rdev` alone is not enough: where
/// `/dev/null` is a regular empty file (some containers), its `st_rdev` is 0 like a socket's or
/// a pipe's.
#[cfg(unix)]
fn is_dev_null(target: &std::fs::Metadata, dev_null: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    target.file_type() == dev_null.file_type() && target.dev() == dev_null.dev() && target.ino() == dev_null.ino()
}

/// Creates `dir` when missing and proves that files can be created in it, by creating and
/// removing a temporary file: a read-only folder fails here, before the model loads.
pub fn check_dir(dir: &Path) -> Result<()> {
    if std::fs::metadata(dir).is_ok_and(|meta| !meta.is_dir()) {
        // `-o /dev/null` or `-o notes.txt`: create_dir_all's "File exists" would not say why.
        return Err(Error::Usage(format!(
            "{}: --output-dir names the folder transcripts are written in, and this is not a folder (without \
             --output-dir they go to standard output)",
            dir.display()
        )));
    }
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let probe = tempfile::Builder::new().prefix(".susurrus-check-").tempfile_in(dir).map_err(|e| {
        Error::io(dir, std::io::Error::new(e.kind(), format!("cannot write transcripts in this folder: {e}")))
    })?;
    probe.close().map_err(|e| Error::io(dir, e))
}

/// Checks each `(input, output)` pair: no output is one of the inputs (`speech.txt` given as
/// audio with `-o .`), names a folder, or, without `overwrite`, exists already. All existing
/// outputs are named in one message, so one run shows everything in the way.
pub fn check_outputs(pairs: &[(&Path, PathBuf)], inputs: &[PathBuf], overwrite: bool) -> Result<()> {
    let inputs: Vec<PathBuf> = inputs.iter().filter_map(|i| std::fs::canonicalize(i).ok()).collect();
    let mut existing = Vec::new();
    for (input, output) in pairs {
        let Ok(meta) = std::fs::metadata(output) else { continue };
        if meta.is_dir() {
            return Err(Error::Usage(format!(
                "{}: the transcript of {} would go here, but it is a folder",
                output.display(),
                input.display()
            )));
        }
        let canonical = std::fs::canonicalize(output).map_err(|e| Error::io(output, e))?;
        if let Some(replaced) = inputs.iter().find(|i| **i == canonical) {
            return Err(Error::Usage(format!(
                "{}: the transcript of {} would replace this input file ({}); choose another --output-dir",
                output.display(),
                input.display(),
                replaced.display()
            )));
        }
        existing.push(output.display().to_string());
    }
    match existing.as_slice() {
        _ if overwrite => Ok(()),
        [] => Ok(()),
        [one] => Err(Error::Usage(format!("{one} exists: pass --overwrite to replace it"))),
        many => Err(Error::Usage(format!(
            "{} transcripts exist already ({}): pass --overwrite to replace them",
            many.len(),
            many.join(", ")
        ))),
    }
}

/// Writes `text` to `path` through a temporary file in the same folder, renamed over `path`
/// once complete and flushed to disk. Without `overwrite`, a file that appeared at `path`
/// since the checks is left alone and reported.
pub fn write_whole(path: &Path, text: &str, overwrite: bool) -> Result<()> {
    let dir = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let prefix = format!(".{name}.");
    let mut builder = tempfile::Builder::new();
    builder.prefix(&prefix).suffix(".part");
    // Created like any other file (mode 0666 less the umask), not private as temporary files
    // are by default: the transcript keeps the mode a plain write would give it.
    #[cfg(unix)]
    builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666));
    let mut file = builder.tempfile_in(dir).map_err(|e| Error::io(path, e))?;
    file.write_all(text.as_bytes()).and_then(|()| file.as_file().sync_all()).map_err(|e| Error::io(path, e))?;
    let persisted = if overwrite { file.persist(path) } else { file.persist_noclobber(path) };
    persisted.map(drop).map_err(|e| match e.error.kind() {
        std::io::ErrorKind::AlreadyExists => {
            Error::Usage(format!("{} exists: pass --overwrite to replace it", path.display()))
        }
        _ => Error::io(path, e.error),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("susurrus-destination-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn files_in(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> =
            std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        names
    }

    #[cfg(unix)]
    #[test]
    fn only_dev_null_itself_is_taken_for_dev_null() {
        use std::os::unix::fs::{FileTypeExt, MetadataExt};
        use std::os::unix::net::UnixStream;
        let of_fd =
            |fd: std::os::fd::BorrowedFd<'_>| std::fs::File::from(fd.try_clone_to_owned().unwrap()).metadata().unwrap();
        let (socket, _peer) = UnixStream::pair().unwrap();
        let socket = of_fd(std::os::fd::AsFd::as_fd(&socket));
        let (reader, writer) = std::io::pipe().unwrap();
        let pipe = of_fd(std::os::fd::AsFd::as_fd(&writer));
        drop(reader);

        // /dev/null as it usually is: a character device, recognised through a descriptor on it.
        let dev_null = std::fs::metadata("/dev/null").unwrap();
        if dev_null.file_type().is_char_device() {
            let opened = std::fs::OpenOptions::new().read(true).write(true).open("/dev/null").unwrap();
            assert!(is_dev_null(&opened.metadata().unwrap(), &dev_null));
        }
        assert!(!is_dev_null(&socket, &dev_null), "a socket is not /dev/null");
        assert!(!is_dev_null(&pipe, &dev_null), "a pipe is not /dev/null");

        // /dev/null as a regular empty file (some containers): its st_rdev is 0 like a socket's,
        // which is what the check compared before; a socket and a pipe are still not it, another
        // empty file is not it, and a descriptor on the file itself is.
        let dir = scratch("dev-null");
        let stand_in = dir.join("null");
        std::fs::write(&stand_in, b"").unwrap();
        let fake_null = std::fs::metadata(&stand_in).unwrap();
        assert_eq!((fake_null.rdev(), socket.rdev()), (0, 0), "the case this test is about");
        assert!(!is_dev_null(&socket, &fake_null), "a socket is not a regular /dev/null");
        assert!(!is_dev_null(&pipe, &fake_null), "a pipe is not a regular /dev/null");
        std::fs::write(dir.join("other"), b"").unwrap();
        assert!(!is_dev_null(&std::fs::metadata(dir.join("other")).unwrap(), &fake_null));
        let opened = std::fs::OpenOptions::new().read(true).write(true).open(&stand_in).unwrap();
        assert!(is_dev_null(&opened.metadata().unwrap(), &fake_null));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_transcript_is_written_whole_and_replaces_only_with_overwrite() {
        let dir = scratch("write");
        let path = dir.join("a.txt");
        write_whole(&path, "first\n", false).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "first\n");
        let err = write_whole(&path, "second\n", false).unwrap_err();
        assert_eq!(err.to_string(), format!("{} exists: pass --overwrite to replace it", path.display()));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "first\n");
        write_whole(&path, "second\n", true).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "second\n");
        assert_eq!(files_in(&dir), ["a.txt"], "no temporary file is left");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_unusable_folder_fails_the_check_and_a_failed_write_leaves_nothing() {
        let dir = scratch("unusable");
        let file = dir.join("plain-file");
        std::fs::write(&file, "x").unwrap();
        // A folder that cannot be created (its parent is a file) is found before any work.
        let err = check_dir(&file.join("out")).unwrap_err().to_string();
        assert!(err.starts_with(&format!("{}: ", file.join("out").display())), "{err}");
        // A file or a device given as the folder is named as what it is not.
        for not_a_folder in [file.as_path(), Path::new("/dev/null")] {
            assert_eq!(
                check_dir(not_a_folder).unwrap_err().to_string(),
                format!(
                    "{}: --output-dir names the folder transcripts are written in, and this is not a folder (without \
                     --output-dir they go to standard output)",
                    not_a_folder.display()
                )
            );
        }
        // A destination whose folder vanished: the write fails and nothing is left.
        let gone = dir.join("gone");
        check_dir(&gone).unwrap();
        assert!(files_in(&gone).is_empty(), "the check leaves no file behind");
        std::fs::remove_dir_all(&gone).unwrap();
        let err = write_whole(&gone.join("a.txt"), "text", false).unwrap_err().to_string();
        assert!(err.starts_with(&format!("{}: ", gone.join("a.txt").display())), "{err}");
        assert_eq!(files_in(&dir), ["plain-file"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn outputs_may_not_replace_inputs_folders_or_existing_files() {
        let dir = scratch("check");
        let speech = dir.join("speech.txt");
        std::fs::write(&speech, b"RIFF audio").unwrap();
        let inputs = vec![speech.clone(), dir.join("b.wav")];
        std::fs::write(&inputs[1], b"RIFF").unwrap();
        // `-o DIR/.` names the input's own path in another spelling.
        let out = dir.join(".").join("speech.txt");
        let err = check_outputs(&[(&speech, out.clone())], &inputs, true).unwrap_err().to_string();
        let want = format!(
            "{}: the transcript of {} would replace this input file ({}); choose another --output-dir",
            out.display(),
            speech.display(),
            std::fs::canonicalize(&speech).unwrap().display()
        );
        assert_eq!(err, want);

        std::fs::create_dir_all(dir.join("b.txt")).unwrap();
        let err = check_outputs(&[(&inputs[1], dir.join("b.txt"))], &inputs, true).unwrap_err().to_string();
        assert_eq!(
            err,
            format!(
                "{}: the transcript of {} would go here, but it is a folder",
                dir.join("b.txt").display(),
                inputs[1].display()
            )
        );

        let out = scratch("check-out");
        let (a, b) = (out.join("a.txt"), out.join("b.txt"));
        let pairs = [(inputs[0].as_path(), a.clone()), (inputs[1].as_path(), b.clone())];
        check_outputs(&pairs, &inputs, false).unwrap();
        std::fs::write(&a, "old").unwrap();
        let err = check_outputs(&pairs, &inputs, false).unwrap_err().to_string();
        assert_eq!(err, format!("{} exists: pass --overwrite to replace it", a.display()));
        std::fs::write(&b, "old").unwrap();
        let err = check_outputs(&pairs, &inputs, false).unwrap_err().to_string();
        assert_eq!(
            err,
            format!("2 transcripts exist already ({}, {}): pass --overwrite to replace them", a.display(), b.display())
        );
        check_outputs(&pairs, &inputs, true).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        std::fs::remove_dir_all(&out).unwrap();
    }
}
