//! One build at a time per output: an exclusive `flock` on `.NAME.tailor.lock` beside the
//! output, held from the first check of the output to the final rename. A second build of
//! the same output fails at once, naming the lock; the kernel drops the lock when its holder
//! dies, however it dies, so a crashed build never blocks the next one.

use super::cleanup::{inode_of, interrupted, register, Registered};
use crate::{Error, Result};
use std::fs::{File, OpenOptions, TryLockError};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The held lock; dropping it removes the lock file, then releases the lock.
pub(crate) struct OutputLock {
    path: PathBuf,
    file: File,
    inode: u64,
    registered: Option<Registered>,
}

/// The lock file of the output whose resolved parent is `parent` and name `name`.
pub(crate) fn lock_path(parent: &Path, name: &str) -> PathBuf {
    parent.join(format!(".{name}.tailor.lock"))
}

impl OutputLock {
    /// Takes the lock of `output` (already resolved) or fails naming the build that holds it.
    pub(crate) fn acquire(output: &Path, path: PathBuf) -> Result<OutputLock> {
        // The holder removes the file before releasing it, so a file we opened may already be
        // unlinked when its lock comes free: then try again on the new file.
        for _ in 0..16 {
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)
                .map_err(|e| Error::io(&path, e))?;
            match file.try_lock() {
                Ok(()) => {}
                Err(TryLockError::WouldBlock) => {
                    return Err(Error::Output {
                        output: output.to_path_buf(),
                        reason: format!(
                            "is being written by another tailor build (it holds {}); wait for it to finish or choose another --output",
                            path.display()
                        ),
                    })
                }
                Err(TryLockError::Error(e)) => return Err(Error::io(&path, e)),
            }
            let held = file.metadata().map_err(|e| Error::io(&path, e))?;
            let same = std::fs::metadata(&path).is_ok_and(|now| now.ino() == held.ino() && now.dev() == held.dev());
            if same {
                let registered = register(&path, Some(held.ino()));
                return Ok(OutputLock { path, file, inode: held.ino(), registered: Some(registered) });
            }
        }
        Err(Error::Output {
            output: output.to_path_buf(),
            reason: format!("could not take its lock {}: other builds keep replacing it", path.display()),
        })
    }
}

impl Drop for OutputLock {
    fn drop(&mut self) {
        // Deregister first, so an interruption cannot unlink the path after we have; then
        // unlink while still holding the lock (a build that opened this file meanwhile sees
        // the path gone or replaced and retries, see `acquire`), and only our own file.
        self.registered.take();
        if !interrupted() && inode_of(&self.path) == Some(self.inode) {
            let _ = std::fs::remove_file(&self.path);
        }
        let _ = self.file.unlock();
    }
}
