//! The folder a package is written into: `.NAME.tailor-XXXXXX` beside the output (the same
//! filesystem, so the final rename is atomic), locked with `flock` by the build that owns it
//! and registered for removal on interruption. A staging folder nobody holds is what a killed
//! build left; the next build of the same output removes it ([`sweep_stale`]).

use super::cleanup::{register, remove_path, Registered};
use crate::{Error, Result};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

pub(crate) struct Staging {
    path: PathBuf,
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
        let registered = register(&path);
        let lock = File::open(&path).map_err(|e| Error::io(&path, e))?;
        lock.try_lock().map_err(|e| Error::io(&path, std::io::Error::other(e.to_string())))?;
        Ok(Staging { path, _lock: lock, registered: Some(registered) })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Flushes every file and the folder itself to disk, so a crash after the rename cannot
    /// leave a package whose files are empty.
    pub(crate) fn sync(&self) -> Result<()> {
        for entry in std::fs::read_dir(&self.path).map_err(|e| Error::io(&self.path, e))? {
            let path = entry.map_err(|e| Error::io(&self.path, e))?.path();
            File::open(&path).and_then(|f| f.sync_all()).map_err(|e| Error::io(&path, e))?;
        }
        sync_dir(&self.path)
    }

    /// The staging path, which from now on holds what must be removed when the build ends
    /// (the replaced package, or nothing).
    pub(crate) fn finish(mut self) -> (PathBuf, Option<Registered>) {
        (std::mem::take(&mut self.path), self.registered.take())
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if !self.path.as_os_str().is_empty() {
            remove_path(&self.path);
        }
    }
}

/// fsync on a folder: makes its entries (a rename into it) durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir).and_then(|f| f.sync_all()).map_err(|e| Error::io(dir, e))
}

/// Removes the staging folders of output `name` in `parent` that no live build holds and
/// that were last changed before `started`; returns a note per folder removed, or kept
/// because it could not be removed. Also removes `.NAME.old`, the aside folder of versions
/// before 0.2 that an interrupted replace could leave, when it is a package of this tool.
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
        let old = entry.metadata().and_then(|m| m.modified()).is_ok_and(|t| t < started);
        if !old {
            continue;
        }
        if file_name == legacy_aside && !path.join(crate::package::BUILD_REPORT).is_file() {
            notes.push(format!("{} is not a package; left it in place", path.display()));
            continue;
        }
        if remove_path(&path) {
            notes.push(format!("removed {}, left by an interrupted build", path.display()));
        } else {
            notes.push(format!("could not remove {}, left by an interrupted build; remove it yourself", path.display()));
        }
    }
    notes
}
