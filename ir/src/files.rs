//! What a path names before it is opened, and the one way small files are read. A
//! checkpoint's or package's files must be regular files: a dangling symbolic link (an
//! interrupted download into the Hugging Face cache), a folder or a FIFO would otherwise be
//! skipped in silence, give a misleading error later, or hang a read; and a file read whole
//! must be of bounded size, so a link to a huge file cannot exhaust memory.

use crate::{Error, Result};
use std::io::Read;
use std::path::Path;

/// The most bytes a settings file (config.json, generation_config.json, a sentence-transformers
/// module list or pooling config, tokenizer_config.json, genai_config.json) is read with: the
/// largest real ones are a few MiB (an index of a thousand shards, a tokenizer config listing
/// every added token).
pub const SETTINGS_LIMIT: u64 = 64 << 20;
/// The most bytes a tokenizer's data file (tokenizer.json, tokenizer.model, vocabularies,
/// merges) or a build report (with `--explain`'s per-node records) is read with.
pub const DATA_FILE_LIMIT: u64 = 1 << 30;
/// The most bytes model.onnx is read with: protobuf caps a message at 2 GiB.
pub const MODEL_PROTO_LIMIT: u64 = 2 << 30;

/// The kind of entry at a path, symbolic links followed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryKind {
    /// Nothing there, not even a link.
    Absent,
    /// A regular file (possibly reached through links).
    Regular,
    /// A symbolic link whose target does not exist (or cannot be reached).
    DanglingLink,
    Directory,
    /// A FIFO, socket or device.
    Special,
}

impl EntryKind {
    /// How the entry is described in an error message.
    pub fn describe(self) -> &'static str {
        match self {
            EntryKind::Absent => "does not exist",
            EntryKind::Regular => "is a regular file",
            EntryKind::DanglingLink => {
                "is a symbolic link to a file that does not exist (an interrupted download?); re-download it or remove the link"
            }
            EntryKind::Directory => "is a folder, not a file",
            EntryKind::Special => "is not a regular file (a FIFO, socket or device); reading it could block forever",
        }
    }
}

/// The kind of entry at `path`.
pub fn entry_kind(path: &Path) -> EntryKind {
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() => EntryKind::Regular,
        Ok(m) if m.is_dir() => EntryKind::Directory,
        Ok(_) => EntryKind::Special,
        Err(_) => match std::fs::symlink_metadata(path) {
            Ok(m) if m.file_type().is_symlink() => EntryKind::DanglingLink,
            // Present but unreadable metadata (e.g. a permission problem on the way).
            Ok(_) => EntryKind::Special,
            Err(_) => EntryKind::Absent,
        },
    }
}

/// `Ok(true)` for a regular file, `Ok(false)` when nothing is there, and an error that says
/// what the entry is otherwise.
pub fn regular_file(path: &Path) -> Result<bool> {
    match entry_kind(path) {
        EntryKind::Regular => Ok(true),
        EntryKind::Absent => Ok(false),
        kind => Err(Error::NotAFile { path: path.to_path_buf(), what: kind.describe() }),
    }
}

/// Reads the regular file at `path` whole, at most `limit` bytes: `Ok(None)` when nothing is
/// there, an error naming the path when it is another kind of entry (a dangling link, a folder,
/// a FIFO or device: never opened in a way that could block) or larger than `limit`.
///
/// The kind is checked before the open and again on the opened file (the open is
/// non-blocking, so a FIFO swapped in meanwhile cannot hang it), and the read stops after
/// `limit` bytes even if the file grows while it is read.
pub fn read_regular(path: &Path, limit: u64) -> Result<Option<Vec<u8>>> {
    use std::os::unix::fs::OpenOptionsExt;
    if !regular_file(path)? {
        return Ok(None);
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| Error::io(path, e))?;
    let meta = file.metadata().map_err(|e| Error::io(path, e))?;
    if !meta.is_file() {
        let kind = if meta.is_dir() { EntryKind::Directory } else { EntryKind::Special };
        return Err(Error::NotAFile { path: path.to_path_buf(), what: kind.describe() });
    }
    let too_large = |size: u64| Error::TooLarge { path: path.to_path_buf(), size, limit };
    if meta.len() > limit {
        return Err(too_large(meta.len()));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(limit + 1).read_to_end(&mut bytes).map_err(|e| Error::io(path, e))?;
    if bytes.len() as u64 > limit {
        return Err(too_large(bytes.len() as u64));
    }
    Ok(Some(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_of_entries() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, b"x").unwrap();
        std::os::unix::fs::symlink(&file, dir.path().join("good-link")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("missing"), dir.path().join("dangling")).unwrap();
        std::fs::create_dir(dir.path().join("d")).unwrap();
        let fifo = std::ffi::CString::new(dir.path().join("fifo").into_os_string().into_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        let kind = |n: &str| entry_kind(&dir.path().join(n));
        assert_eq!(kind("f"), EntryKind::Regular);
        assert_eq!(kind("good-link"), EntryKind::Regular);
        assert_eq!(kind("dangling"), EntryKind::DanglingLink);
        assert_eq!(kind("d"), EntryKind::Directory);
        assert_eq!(kind("fifo"), EntryKind::Special);
        assert_eq!(kind("nothing"), EntryKind::Absent);
        assert!(regular_file(&dir.path().join("f")).unwrap());
        assert!(!regular_file(&dir.path().join("nothing")).unwrap());
        let e = regular_file(&dir.path().join("dangling")).unwrap_err().to_string();
        assert!(e.contains("dangling") || e.contains("does not exist"), "{e}");
        assert!(regular_file(&dir.path().join("fifo")).unwrap_err().to_string().contains("FIFO"));
    }

    /// Every kind of entry, read through `read_regular`: the FIFO is refused without blocking
    /// (the test would hang otherwise), a link to /dev/zero is refused, not read without end,
    /// and a file over the limit is refused naming its size.
    #[test]
    fn reads_regular_files_within_the_limit_only() {
        let dir = tempfile::tempdir().unwrap();
        let p = |n: &str| dir.path().join(n);
        std::fs::write(p("f"), b"hello").unwrap();
        std::os::unix::fs::symlink(p("f"), p("link")).unwrap();
        std::os::unix::fs::symlink(p("missing"), p("dangling")).unwrap();
        std::os::unix::fs::symlink("/dev/zero", p("zero")).unwrap();
        std::fs::create_dir(p("d")).unwrap();
        let fifo = std::ffi::CString::new(p("fifo").into_os_string().into_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        assert_eq!(read_regular(&p("f"), 5).unwrap().as_deref(), Some(&b"hello"[..]));
        assert_eq!(read_regular(&p("link"), 100).unwrap().as_deref(), Some(&b"hello"[..]));
        assert!(read_regular(&p("nothing"), 100).unwrap().is_none());
        let e = |n: &str, limit: u64| read_regular(&p(n), limit).unwrap_err().to_string();
        assert!(e("dangling", 100).contains("does not exist"), "{}", e("dangling", 100));
        assert!(e("zero", 100).contains("not a regular file"), "{}", e("zero", 100));
        assert!(e("fifo", 100).contains("FIFO"), "{}", e("fifo", 100));
        assert!(e("d", 100).contains("folder"), "{}", e("d", 100));
        let big = e("f", 4);
        assert!(big.contains("5 bytes") && big.contains("4 bytes") && big.contains("/f"), "{big}");
    }
}
