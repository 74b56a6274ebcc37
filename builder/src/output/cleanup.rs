//! What must go when the process is interrupted: staging folders and lock files beside an
//! output; and what stays, said so: a download's bytes kept for the next run. The `tailor` binary turns SIGINT, SIGTERM and SIGHUP into [`interrupt`] (see
//! [`install_signal_handlers`]); a library caller's build removes its own through `Drop`.
//!
//! One mutex guards the list and the final renames of a build ([`while_not_interrupted`]), so
//! a signal either lands before a commit (the staging folder goes, the output is untouched) or
//! after it (the path then holds the replaced package, which goes too): never in between.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

/// A path to remove, with the inode it must still have: a path that meanwhile names
/// something else (another build's lock file, a package swapped in) is left alone.
struct Entry {
    id: u64,
    path: PathBuf,
    inode: Option<u64>,
}

#[derive(Default)]
struct Registry {
    next: u64,
    entries: Vec<Entry>,
    /// Unfinished downloads a later run continues, by id: this process's file and the name
    /// it is kept under.
    kept: Vec<(u64, PathBuf, PathBuf)>,
    interrupted: bool,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry { next: 0, entries: Vec::new(), kept: Vec::new(), interrupted: false });

fn registry() -> MutexGuard<'static, Registry> {
    // A panic elsewhere must not stop the cleanup of what is left.
    REGISTRY.lock().unwrap_or_else(|e| e.into_inner())
}

/// A path to remove if the process is interrupted; dropping the guard forgets it.
pub(crate) struct Registered(u64);

impl Drop for Registered {
    fn drop(&mut self) {
        registry().entries.retain(|e| e.id != self.0);
    }
}

/// Registers `path` (a folder or a file) for removal on interruption, while it is still the
/// file or folder with `inode` (when given).
pub(crate) fn register(path: &Path, inode: Option<u64>) -> Registered {
    let mut r = registry();
    r.next += 1;
    let id = r.next;
    r.entries.push(Entry { id, path: path.to_path_buf(), inode });
    Registered(id)
}

/// An unfinished download an interruption keeps for the next run, until dropped.
pub(crate) struct KeptOnInterrupt(u64);

impl Drop for KeptOnInterrupt {
    fn drop(&mut self) {
        registry().kept.retain(|(id, ..)| *id != self.0);
    }
}

/// Runs `claim` (which may move kept bytes to `path`) and registers `path`: on an
/// interruption it is renamed to `kept`, where the next run continues it, and said so (an
/// empty file is removed). Both happen under the registry's lock, so an interruption comes
/// before the claim or after the registration, never between; `None` once an interruption
/// has begun (nothing is claimed then).
pub(crate) fn keep_on_interrupt<T>(path: &Path, kept: &Path, claim: impl FnOnce() -> T) -> Option<(KeptOnInterrupt, T)> {
    let mut r = registry();
    if r.interrupted {
        return None;
    }
    let claimed = claim();
    r.next += 1;
    let id = r.next;
    r.kept.push((id, path.to_path_buf(), kept.to_path_buf()));
    Some((KeptOnInterrupt(id), claimed))
}

/// Keeps each registered download's bytes (see [`keep_on_interrupt`]); returns what was kept,
/// with its size.
fn keep(r: &Registry) -> Vec<(PathBuf, u64)> {
    r.kept.iter().filter_map(|(_, path, kept)| give_back(path, kept).map(|n| (kept.clone(), n))).collect()
}

/// Renames a download's file `path` to `kept` unless it is empty or `kept` already holds as
/// many bytes (another run's); otherwise removes it. Returns the bytes kept.
pub(crate) fn give_back(path: &Path, kept: &Path) -> Option<u64> {
    let m = std::fs::symlink_metadata(path).ok().filter(|m| m.is_file())?;
    let theirs = std::fs::symlink_metadata(kept).ok().filter(|k| k.is_file()).map_or(0, |k| k.len());
    if m.len() > theirs && std::fs::rename(path, kept).is_ok() {
        return Some(m.len());
    }
    let _ = std::fs::remove_file(path);
    None
}

/// Keeps a path on the interruption list until dropped (for callers outside the crate, such
/// as the CLI's temporary demo checkpoint).
pub struct RemoveOnInterrupt(#[allow(dead_code)] Registered);

/// Removes `path` if the process is interrupted before the returned guard is dropped.
pub fn remove_on_interrupt(path: &Path) -> RemoveOnInterrupt {
    RemoveOnInterrupt(register(path, inode_of(path)))
}

/// Whether the registry has begun an interruption (then nothing more may be unlinked by the
/// main thread: the signal thread owns the cleanup).
pub(crate) fn interrupted() -> bool {
    registry().interrupted
}

/// The inode `path` names now (links not followed).
pub(crate) fn inode_of(path: &Path) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path).ok().map(|m| m.ino())
}

/// Runs `f` unless an interruption has begun; an interruption that arrives meanwhile waits
/// until `f` returns.
pub(crate) fn while_not_interrupted<T>(f: impl FnOnce() -> T) -> Option<T> {
    let r = registry();
    if r.interrupted {
        return None;
    }
    let out = f();
    drop(r);
    Some(out)
}

/// Marks the process interrupted (later commits refuse) and removes every registered path;
/// returns the paths removed. The caller keeps the registry locked until it exits.
fn drain(r: &mut Registry) -> Vec<PathBuf> {
    r.interrupted = true;
    r.entries
        .drain(..)
        .filter(|e| e.inode.is_none_or(|ino| inode_of(&e.path) == Some(ino)))
        .map(|e| e.path)
        .filter(|p| remove_path(p))
        .collect()
}

/// Removes a folder (retrying while writer threads may still add files to it) or a file;
/// whether anything was there and is gone now.
pub(crate) fn remove_path(path: &Path) -> bool {
    try_remove_path(path).unwrap_or(false)
}

/// [`remove_path`], with the last error when something is left: `Ok(false)` when nothing was
/// there.
pub(crate) fn try_remove_path(path: &Path) -> std::io::Result<bool> {
    let Ok(meta) = std::fs::symlink_metadata(path) else { return Ok(false) };
    if !meta.is_dir() {
        return std::fs::remove_file(path).map(|()| true);
    }
    let mut last = None;
    for _ in 0..20 {
        match std::fs::remove_dir_all(path) {
            Ok(()) => return Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(true),
            Err(e) => {
                last = Some(e);
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("the folder could not be removed")))
}

/// Makes SIGINT, SIGTERM and SIGHUP remove what [`register`] listed (an output is then either
/// untouched or already fully replaced), say so on stderr, and
/// exit with 128 + the signal's number, as a shell reports a process the signal killed.
pub fn install_signal_handlers() -> std::io::Result<()> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])?;
    std::thread::Builder::new().name("tailor-signals".into()).spawn(move || {
        if let Some(sig) = signals.forever().next() {
            let name = match sig {
                SIGINT => "SIGINT",
                SIGTERM => "SIGTERM",
                _ => "SIGHUP",
            };
            let mut r = registry();
            let removed = drain(&mut r);
            // Raw writes to fd 2: the main thread may hold stderr's lock, blocked on a full
            // pipe, and the exit must not wait for it.
            let mut text = format!("\ninterrupted by {name}\n");
            for p in &removed {
                text.push_str(&format!("  removed the unfinished {}\n", p.display()));
            }
            for (p, bytes) in keep(&r) {
                text.push_str(&format!("  kept the unfinished download {} ({bytes} bytes): the next run continues it\n", p.display()));
            }
            // SAFETY: writing a valid buffer to a file descriptor; errors are ignored.
            unsafe { libc::write(2, text.as_ptr().cast(), text.len()) };
            // `r` stays locked: no build commits after the cleanup.
            std::process::exit(128 + sig);
        }
    })?;
    Ok(())
}
