//! The folder a package is written into: `.NAME.tailor-XXXXXX` beside the output (the same
//! filesystem, so the final rename is atomic), locked with `flock` by the build that owns it,
//! marked with a [`MARKER`] file until the commit, and registered for removal on
//! interruption. A marked staging folder nobody holds is what a killed build left; the next
//! build of the same output removes it ([`sweep_stale`]).

use super::cleanup::{inode_of, register, remove_path, Registered};
use crate::{Error, Result};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// The file that says "a staging folder of this tool", removed just before the commit.
pub(crate) const MARKER: &str = ".tailor-staging";

/// How old an unmarked folder with a staging name must be before the sweep removes it: such a
/// folder is an earlier version's (which did not lock or mark), and may belong to a build of
/// that version still running.
const UNMARKED_AGE: Duration = Duration::from_secs(3600);

pub(crate) struct Staging {
    path: PathBuf,
    /// The folder's inode: `Drop` removes the path only while it is still this folder.
    inode: Option<u64>,
    /// Held open and locked while the build runs, so other builds know it is alive.
    _lock: File,
    registered: Option<Registered>,
}

/// The name prefix of the output `name`'s staging folders.
fn prefix(name: &str) -> String {
    format!(".{name}.tailor-")
}

impl Staging {
    pub(crate) fn create(parent: &Path, name: &str) -> Result<Staging> {
        let path = tempfile::Builder::new().prefix(&prefix(name)).tempdir_in(parent).map_err(|e| Error::io(parent, e))?.keep();
        let locked = File::open(&path).and_then(|f| {
            f.try_lock().map_err(|e| std::io::Error::other(e.to_string()))?;
            File::create(path.join(MARKER))?;
            Ok(f)
        });
        let lock = match locked {
            Ok(f) => f,
            Err(e) => {
                remove_path(&path);
                return Err(Error::io(&path, e));
            }
        };
        let inode = inode_of(&path);
        let registered = register(&path, inode);
        Ok(Staging { path, inode, _lock: lock, registered: Some(registered) })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Removes the marker, then flushes every file and the folder itself to disk, so a crash
    /// after the rename cannot leave a package whose files are empty. The folder stays locked.
    pub(crate) fn seal(&self) -> Result<()> {
        let marker = self.path.join(MARKER);
        std::fs::remove_file(&marker).map_err(|e| Error::io(&marker, e))?;
        for entry in std::fs::read_dir(&self.path).map_err(|e| Error::io(&self.path, e))? {
            let path = entry.map_err(|e| Error::io(&self.path, e))?.path();
            File::open(&path).and_then(|f| f.sync_all()).map_err(|e| Error::io(&path, e))?;
        }
        sync_dir(&self.path)
    }

    /// After a swap: the staging path now holds the replaced package (or nothing), which the
    /// caller removes; the registration (by path, any inode) keeps it removed on a signal.
    pub(crate) fn finish(mut self) -> (PathBuf, Registered) {
        let path = std::mem::take(&mut self.path);
        self.registered.take();
        let registered = register(&path, None);
        (path, registered)
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if !self.path.as_os_str().is_empty() && inode_of(&self.path) == self.inode {
            remove_path(&self.path);
        }
    }
}

/// fsync on a folder: makes its entries (a rename into it) durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir).and_then(|f| f.sync_all()).map_err(|e| Error::io(dir, e))
}

/// Whether every entry of `dir` is a regular file of a package (or the marker), last changed
/// before `before`.
fn only_package_files(dir: &Path, before: SystemTime) -> bool {
    let allowed = crate::package::legacy_package_files();
    let Ok(entries) = std::fs::read_dir(dir) else { return false };
    entries.flatten().all(|e| {
        let name = e.file_name().to_string_lossy().into_owned();
        let meta = e.metadata();
        (name == MARKER || allowed.contains(&name.as_str()))
            && meta.as_ref().is_ok_and(|m| m.is_file())
            && meta.and_then(|m| m.modified()).is_ok_and(|t| t < before)
    })
}

/// Removes what killed builds of output `name` left in `parent`: staging folders that carry
/// the marker, that no live build holds and that were last changed before `started`; and
/// unmarked ones (earlier versions') and an earlier version's `.NAME.old` only when they hold
/// nothing but package files untouched for an hour. Anything else with such a name is
/// reported, never removed. Returns one note per folder.
pub(crate) fn sweep_stale(parent: &Path, name: &str, started: SystemTime) -> Vec<String> {
    let mut notes = Vec::new();
    let Ok(entries) = std::fs::read_dir(parent) else { return notes };
    let prefix = prefix(name);
    let legacy_aside = format!(".{name}.old");
    for entry in entries.flatten() {
        let file_name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        let ours = file_name.starts_with(&prefix) || file_name == legacy_aside;
        if !ours || !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let Ok(dir) = File::open(&path) else { continue };
        if dir.try_lock().is_err() {
            continue; // a live build holds it
        }
        let marked = path.join(MARKER).is_file();
        let removable = if marked {
            only_package_files(&path, started)
        } else {
            started.checked_sub(UNMARKED_AGE).is_some_and(|old| only_package_files(&path, old))
        };
        if !removable {
            notes.push(format!(
                "{} looks like an unfinished package folder but was left in place (it is recent, or holds other files); remove it yourself if no build is using it",
                path.display()
            ));
        } else if remove_path(&path) {
            notes.push(format!("removed {}, left by an interrupted build", path.display()));
        } else {
            notes.push(format!("could not remove {}, left by an interrupted build; remove it yourself", path.display()));
        }
    }
    notes
}
