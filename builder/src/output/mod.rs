//! Output-folder safety. A build claims its output before reading any weight, and:
//!
//! * takes an exclusive lock beside it (`lock`): two builds of one output never interleave,
//!   the second fails at once;
//! * removes staging folders killed builds left there (`staging::sweep_stale`);
//! * refuses an output it may not replace (`guard`): `--force` replaces only an empty folder
//!   or an earlier package of this tool, never one holding a file the checkpoint reads;
//! * writes into a locked staging folder beside it, removed on every exit path the process
//!   sees (errors, panics, SIGINT/SIGTERM/SIGHUP through `cleanup`);
//! * commits by fsyncing the files, then swapping the folders with one atomic
//!   `renameat2(RENAME_EXCHANGE)`, so at every instant the output path holds either the old or
//!   the new complete package; the old one is removed after.

mod cleanup;
mod guard;
mod lock;
mod staging;

pub use cleanup::{install_signal_handlers, remove_on_interrupt, RemoveOnInterrupt};
pub(crate) use cleanup::{give_back, keep_on_interrupt, KeptOnInterrupt};

use crate::{Error, Result};
use guard::{Existing, Protected};
use lock::{lock_path, OutputLock};
use staging::{sweep_stale, sync_dir, Staging};
use std::path::{Path, PathBuf};
use std::time::SystemTime;
/// Resolves `path`: symbolic links followed as far as the path exists, the rest taken
/// lexically (`ghost/../model/out` is `model/out` when `ghost` does not exist).
pub(crate) fn resolve(path: &Path) -> PathBuf {
    use std::path::Component;
    let abs = if path.is_absolute() { path.to_path_buf() } else { std::env::current_dir().unwrap_or_default().join(path) };
    let mut resolved = PathBuf::from("/");
    let mut missing = false;
    for part in abs.components() {
        match part {
            Component::RootDir | Component::Prefix(_) | Component::CurDir => {}
            Component::ParentDir => {
                resolved.pop();
            }
            Component::Normal(name) => {
                resolved.push(name);
                if !missing {
                    match resolved.canonicalize() {
                        Ok(real) => resolved = real,
                        Err(_) => missing = true,
                    }
                }
            }
        }
    }
    resolved
}

/// An output folder this build holds: resolved, locked and checked.
pub(crate) struct Claim {
    given: PathBuf,
    resolved: PathBuf,
    parent: PathBuf,
    name: String,
    existing: Existing,
    protected: Protected,
    /// Stale staging folders found beside the output, for the build's notes.
    pub(crate) notes: Vec<String>,
    _lock: OutputLock,
}

impl Claim {
    /// Claims `output` for a build of the checkpoint in `model_dir`; `force` allows replacing
    /// an earlier package.
    pub(crate) fn new(output: &Path, model_dir: &Path, force: bool, started: SystemTime) -> Result<Claim> {
        let resolved = resolve(output);
        let (Some(parent), Some(name)) = (resolved.parent(), resolved.file_name()) else {
            return Err(Error::Output {
                output: output.to_path_buf(),
                reason: "is a filesystem root; choose a folder to write the package into".into(),
            });
        };
        let (parent, name) = (parent.to_path_buf(), name.to_string_lossy().into_owned());
        // A GGUF checkpoint is a file: the output may sit beside it (`--model x.gguf --output
        // x-onnx`, the usual layout), never replace a folder holding it; the files of its folder
        // are protected as a checkpoint folder's are.
        let model = resolve(model_dir);
        let protected = match model.parent() {
            Some(folder) if model.is_file() => Protected::of_checkpoint(folder),
            _ => Protected::of_checkpoint(&model),
        };
        // Checked before anything is created (a refused path leaves no folder behind), and
        // again under the lock, since another build may have written OUT meanwhile.
        guard::check(output, &resolved, &model, force, &protected)?;
        std::fs::create_dir_all(&parent).map_err(|e| Error::io(&parent, e))?;
        let lock = OutputLock::acquire(output, lock_path(&parent, &name))?;
        let notes = sweep_stale(&parent, &name, started);
        let existing = guard::check(output, &resolved, &model, force, &protected)?;
        Ok(Claim { given: output.to_path_buf(), resolved, parent, name, existing, protected, notes, _lock: lock })
    }

    /// A fresh staging folder beside the output.
    pub(crate) fn stage(&self) -> Result<Staging> {
        Staging::create(&self.parent, &self.name)
    }

    /// Puts the finished package in `staging` at the output, replacing what was there; returns
    /// warnings for what of the replaced package could not be removed (the new package is in
    /// place then, so the build does not fail, but the user must know what is left, and where).
    pub(crate) fn commit(self, staging: Staging) -> Result<Vec<String>> {
        staging.seal()?;
        let out = &self.resolved;
        let from = staging.path().to_path_buf();
        let committed = cleanup::while_not_interrupted(|| -> Result<()> {
            match self.existing {
                Existing::Absent => rename_noreplace(&from, out).map_err(|e| match e.kind() {
                    std::io::ErrorKind::AlreadyExists => Error::Output {
                        output: self.given.clone(),
                        reason: "appeared while this build ran (made by someone else); it was left as it is".into(),
                    },
                    _ => Error::io(out, e),
                }),
                // rename(2) replaces an empty folder atomically, and fails if it filled up.
                Existing::Empty => std::fs::rename(&from, out).map_err(|e| match e.raw_os_error() {
                    Some(libc::ENOTEMPTY) | Some(libc::EEXIST) => Error::Output {
                        output: self.given.clone(),
                        reason: "was empty when the build started and has files now; it was left as it is and nothing was written".into(),
                    },
                    _ => Error::io(out, e),
                }),
                Existing::Package => {
                    exchange(&from, out).map_err(|e| Error::io(out, e))?;
                    // What was swapped out is removed next: it must still be a package. If
                    // it changed while the build ran, swap back and keep it.
                    if let Err(why) = guard::still_replaceable(&from, &self.protected) {
                        exchange(out, &from).map_err(|e| Error::io(out, e))?;
                        return Err(Error::Output {
                            output: self.given.clone(),
                            reason: format!(
                                "changed while this build ran ({why}), so it was not replaced; nothing was written. Build again with a new --output, or tidy the folder and retry"
                            ),
                        });
                    }
                    Ok(())
                }
            }
        });
        match committed {
            None => Err(Error::Output { output: self.given.clone(), reason: "was not replaced: the build was interrupted".into() }),
            Some(Err(e)) => Err(e),
            Some(Ok(())) => {
                // The staging path now holds the replaced package (or nothing): remove it.
                let (aside, _registered) = staging.finish();
                // The new package is in place; a failed fsync of the parent only weakens
                // durability across a power loss, so it does not fail the build.
                let _ = sync_dir(&self.parent);
                match cleanup::try_remove_path(&aside) {
                    Ok(_) => Ok(Vec::new()),
                    Err(e) => Ok(vec![format!(
                        "the new package is at {}, but the package it replaced could not be fully removed: what is left of it is in {} ({e}); remove that folder yourself",
                        self.given.display(),
                        aside.display()
                    )]),
                }
            }
        }
    }
}

fn c_path(p: &Path) -> std::io::Result<std::ffi::CString> {
    std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).map_err(std::io::Error::other)
}

/// renameat2(2) with `flags`.
fn renameat2(from: &Path, to: &Path, flags: libc::c_uint) -> std::io::Result<()> {
    let (f, t) = (c_path(from)?, c_path(to)?);
    // SAFETY: two valid NUL-terminated paths, relative to the current directory.
    let rc = unsafe { libc::syscall(libc::SYS_renameat2, libc::AT_FDCWD, f.as_ptr(), libc::AT_FDCWD, t.as_ptr(), flags) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Whether renameat2 said the filesystem (or kernel) lacks the flag.
fn unsupported(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EINVAL) | Some(libc::ENOSYS) | Some(libc::EOPNOTSUPP))
}

/// Renames `from` to `to` unless `to` exists.
fn rename_noreplace(from: &Path, to: &Path) -> std::io::Result<()> {
    match renameat2(from, to, libc::RENAME_NOREPLACE) {
        Err(e) if unsupported(&e) => {
            if std::fs::symlink_metadata(to).is_ok() {
                return Err(std::io::Error::from(std::io::ErrorKind::AlreadyExists));
            }
            std::fs::rename(from, to)
        }
        r => r,
    }
}

/// Swaps the folders `from` and `to` atomically. Where the filesystem cannot exchange (some
/// network and FUSE filesystems), three renames do it: the new folder aside, the old one to
/// `from`'s name (so the staging path ends up holding what is to be removed), the new one in;
/// each failed step undoes the earlier ones. Only there is an instant with nothing at `to`
/// (docs/pipeline.md says so).
fn exchange(from: &Path, to: &Path) -> std::io::Result<()> {
    match renameat2(from, to, libc::RENAME_EXCHANGE) {
        Err(e) if unsupported(&e) => {
            let mut aside = from.as_os_str().to_owned();
            aside.push("-swap"); // still a staging name, so a crash here is reported later
            let aside = PathBuf::from(aside);
            std::fs::rename(from, &aside)?;
            if let Err(e) = std::fs::rename(to, from) {
                let _ = std::fs::rename(&aside, from);
                return Err(e);
            }
            if let Err(e) = std::fs::rename(&aside, to) {
                let _ = std::fs::rename(from, to);
                let _ = std::fs::rename(&aside, from);
                return Err(e);
            }
            Ok(())
        }
        r => r,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(out: &Path, model: &Path, force: bool) -> Result<Claim> {
        Claim::new(out, model, force, SystemTime::now())
    }

    #[test]
    fn refuses_outputs_that_touch_the_source() {
        let root = tempfile::tempdir().unwrap();
        let model = root.path().join("model");
        std::fs::create_dir(&model).unwrap();
        std::fs::write(model.join("config.json"), "{}").unwrap();
        for bad in [model.clone(), model.join("out"), root.path().to_path_buf(), model.join("config.json"), PathBuf::from("/")] {
            assert!(claim(&bad, &model, true).is_err(), "{} should be refused", bad.display());
        }
        assert!(claim(&root.path().join("out"), &model, false).is_ok());
        let full = root.path().join("full");
        std::fs::create_dir(&full).unwrap();
        std::fs::write(full.join("x"), "x").unwrap();
        assert!(claim(&full, &model, false).is_err());
        assert!(claim(&full, &model, true).is_err(), "not a package: --force must not replace it");
        let empty = root.path().join("empty");
        std::fs::create_dir(&empty).unwrap();
        assert_eq!(claim(&empty, &model, false).unwrap().existing, Existing::Empty);
    }

    #[test]
    fn one_claim_per_output_at_a_time() {
        let root = tempfile::tempdir().unwrap();
        let model = root.path().join("model");
        std::fs::create_dir(&model).unwrap();
        let out = root.path().join("out");
        let first = claim(&out, &model, false).unwrap();
        let e = claim(&out, &model, false).err().expect("a second claim fails").to_string();
        assert!(e.contains("another tailor build"), "{e}");
        drop(first);
        assert!(claim(&out, &model, false).is_ok(), "the lock is released with the claim");
        let left: Vec<_> = std::fs::read_dir(root.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left, vec![std::ffi::OsString::from("model")], "the lock file goes with the claim");
    }

    #[test]
    fn exchange_swaps_two_folders() {
        let root = tempfile::tempdir().unwrap();
        let (a, b) = (root.path().join("a"), root.path().join("b"));
        std::fs::create_dir(&a).unwrap();
        std::fs::create_dir(&b).unwrap();
        std::fs::write(a.join("new"), "").unwrap();
        std::fs::write(b.join("old"), "").unwrap();
        exchange(&a, &b).unwrap();
        assert!(b.join("new").exists() && a.join("old").exists());
        assert!(rename_noreplace(&a, &b).is_err(), "never replaces");
    }
}
