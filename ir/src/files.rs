//! What a path names before it is opened. A checkpoint's files must be regular files: a
//! dangling symbolic link (an interrupted download into the Hugging Face cache), a folder or a
//! FIFO would otherwise be skipped in silence, give a misleading error later, or hang a read.

use crate::{Error, Result};
use std::path::Path;

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
}
