//! What must go when the process is interrupted: staging folders and lock files beside an
//! output. The `tailor` binary turns SIGINT, SIGTERM and SIGHUP into [`interrupt`] (see
//! [`install_signal_handlers`]); a library caller's build removes its own through `Drop`.
//!
//! One mutex guards the list and the final renames of a build ([`while_not_interrupted`]), so
//! a signal either lands before a commit (the staging folder goes, the output is untouched) or
//! after it (the path then holds the replaced package, which goes too): never in between.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

#[derive(Default)]
struct Registry {
    next: u64,
    entries: Vec<(u64, PathBuf)>,
    interrupted: bool,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry { next: 0, entries: Vec::new(), interrupted: false });

fn registry() -> MutexGuard<'static, Registry> {
    // A panic elsewhere must not stop the cleanup of what is left.
    REGISTRY.lock().unwrap_or_else(|e| e.into_inner())
}

/// A path to remove if the process is interrupted; dropping the guard forgets it.
pub(crate) struct Registered(u64);

impl Drop for Registered {
    fn drop(&mut self) {
        registry().entries.retain(|(id, _)| *id != self.0);
    }
}

/// Registers `path` (a folder or a file) for removal on interruption.
pub(crate) fn register(path: &Path) -> Registered {
    let mut r = registry();
    r.next += 1;
    let id = r.next;
    r.entries.push((id, path.to_path_buf()));
    Registered(id)
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
    r.entries.drain(..).map(|(_, p)| p).filter(|p| remove_path(p)).collect()
}

/// Removes a folder (retrying while writer threads may still add files to it) or a file;
/// whether anything was there.
pub(crate) fn remove_path(path: &Path) -> bool {
    let Ok(meta) = std::fs::symlink_metadata(path) else { return false };
    if !meta.is_dir() {
        return std::fs::remove_file(path).is_ok();
    }
    for _ in 0..20 {
        match std::fs::remove_dir_all(path) {
            Ok(()) => return true,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return true,
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(10)),
        }
    }
    false
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
            use std::io::Write;
            let mut err = std::io::stderr().lock();
            let _ = writeln!(err, "\ninterrupted by {name}");
            for p in &removed {
                let _ = writeln!(err, "  removed the unfinished {}", p.display());
            }
            // `r` stays locked: no build commits after the cleanup.
            std::process::exit(128 + sig);
        }
    })?;
    Ok(())
}
