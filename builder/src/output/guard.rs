//! What `--force` may replace. An existing output is replaced only when it is empty or is
//! recognisably a package an earlier `tailor build` wrote: it holds this tool's
//! `build_report.json` and nothing but the files that report lists. And never when it holds a
//! file the checkpoint reads (the same inode, reached through any chain of symbolic links or
//! hard links, as in the Hugging Face cache's `snapshots/<rev>/x -> ../../blobs/<sha>`).

use crate::package::{legacy_package_files, BUILD_REPORT, TOOL_NAME};
use crate::{Error, Result};
use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// What is at the output path before the build.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Existing {
    Absent,
    Empty,
    /// An earlier package of this tool (replaced only with `--force`).
    Package,
}

/// The files the checkpoint folder reaches, by (device, inode): every entry of the folder,
/// links followed.
pub(crate) struct Protected {
    files: BTreeMap<(u64, u64), PathBuf>,
}

impl Protected {
    pub(crate) fn of_checkpoint(model_dir: &Path) -> Protected {
        let mut files = BTreeMap::new();
        if let Ok(entries) = std::fs::read_dir(model_dir) {
            for entry in entries.flatten() {
                let path = entry.path();
                if let Ok(m) = std::fs::metadata(&path) {
                    files.insert((m.dev(), m.ino()), path);
                }
            }
        }
        Protected { files }
    }

    /// The checkpoint file that `path` (not followed if a link) is, if any.
    fn reached_by(&self, meta: &std::fs::Metadata) -> Option<&PathBuf> {
        self.files.get(&(meta.dev(), meta.ino()))
    }
}

/// Checks the output folder `out` (resolved) given as `given`; `model` is the resolved
/// checkpoint: its folder, or the file of a GGUF checkpoint.
pub(crate) fn check(given: &Path, out: &Path, model: &Path, force: bool, protected: &Protected) -> Result<Existing> {
    let refuse = |reason: String| Err(Error::Output { output: given.to_path_buf(), reason });
    if out.parent().is_none() || out.file_name().is_none() {
        return refuse("is a filesystem root; choose a folder to write the package into".into());
    }
    if out == model && model.is_file() {
        return refuse("is the model file itself; pass a folder for the package (e.g. --output ./package)".into());
    }
    if model.is_file() && model.parent() == Some(out) {
        return refuse("is the folder the model file sits in; pass a new folder for the package (e.g. one beside the file)".into());
    }
    if out == model {
        return refuse("is the model folder itself; choose another folder (--force does not allow this)".into());
    }
    if out.starts_with(model) {
        return refuse(format!("lies inside the model folder {}; choose a folder outside it", model.display()));
    }
    if model.starts_with(out) {
        return refuse(format!(
            "contains the model {} {}; replacing it would delete the source (--force does not allow this)",
            if model.is_file() { "file" } else { "folder" },
            model.display()
        ));
    }
    // An empty folder or an earlier package would be replaced as a whole: never the current
    // folder (another folder there is refused below for what it holds).
    let current = || {
        refuse(
            "is the current folder: a package replaces its output folder as a whole (one atomic rename), which would move this folder away from under your shell; \
             write to a folder inside it (e.g. --output ./package) or run tailor from its parent"
                .into(),
        )
    };
    let meta = match std::fs::symlink_metadata(out) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Existing::Absent),
        Err(e) => return Err(Error::io(out, e)),
        Ok(m) => m,
    };
    if meta.file_type().is_symlink() && std::fs::metadata(out).is_err() {
        return refuse("is a symbolic link to nothing; remove the link or pass another folder".into());
    }
    if !meta.is_dir() {
        return refuse("is a file, not a folder; pass a folder path".into());
    }
    let entries: Vec<std::fs::DirEntry> =
        std::fs::read_dir(out).map_err(|e| Error::io(out, e))?.collect::<std::io::Result<_>>().map_err(|e| Error::io(out, e))?;
    if entries.is_empty() {
        return if is_current_folder(out) { current() } else { Ok(Existing::Empty) };
    }
    if let Err(why) = recognise_package(out, &entries) {
        let hint = if force {
            "--force only replaces an empty folder or a package an earlier `tailor build` wrote"
        } else {
            "pass --force to replace an earlier package (it is replaced only if the build succeeds)"
        };
        return refuse(format!("exists and is not a tailor package ({why}); {hint}: choose a new --output, or empty the folder yourself"));
    }
    if let Some(why) = holds_checkpoint_file(&entries, protected) {
        return refuse(format!("{why}; replacing the folder would delete the checkpoint's data; choose another --output"));
    }
    if is_current_folder(out) {
        return current();
    }
    if !force {
        return refuse("holds an earlier package; pass --force to replace it (it is replaced only if the build succeeds)".into());
    }
    Ok(Existing::Package)
}

/// Whether the resolved output `out` is the process's current folder: the same path, or the
/// same folder (device and inode) reached another way.
fn is_current_folder(out: &Path) -> bool {
    let Ok(cwd) = std::env::current_dir() else { return false };
    if cwd.canonicalize().is_ok_and(|c| c == out) {
        return true;
    }
    match (std::fs::metadata(out), std::fs::metadata(&cwd)) {
        (Ok(a), Ok(b)) => a.is_dir() && (a.dev(), a.ino()) == (b.dev(), b.ino()),
        _ => false,
    }
}

/// Which entry, if any, is one of the checkpoint's files (the same inode).
fn holds_checkpoint_file(entries: &[std::fs::DirEntry], protected: &Protected) -> Option<String> {
    entries.iter().find_map(|entry| {
        let m = std::fs::symlink_metadata(entry.path()).ok()?;
        protected.reached_by(&m).map(|src| {
            format!("holds {}, which is the checkpoint's file {} (the same file through a link)", entry.path().display(), src.display())
        })
    })
}

/// Checks again, at the commit, the folder that was at the output and is about to be
/// removed: it may have changed while the build ran (a file added, another folder moved in).
pub(crate) fn still_replaceable(dir: &Path, protected: &Protected) -> std::result::Result<(), String> {
    let entries: Vec<std::fs::DirEntry> = std::fs::read_dir(dir).map_err(|e| e.to_string())?.flatten().collect();
    if entries.is_empty() {
        return Ok(());
    }
    recognise_package(dir, &entries)?;
    holds_checkpoint_file(&entries, protected).map_or(Ok(()), Err)
}

/// Why the non-empty folder `dir` is not a package of this tool, if it is not.
fn recognise_package(dir: &Path, entries: &[std::fs::DirEntry]) -> std::result::Result<(), String> {
    let report_path = dir.join(BUILD_REPORT);
    if !std::fs::symlink_metadata(&report_path).is_ok_and(|m| m.is_file()) {
        return Err(format!("no {BUILD_REPORT}"));
    }
    let bytes = ir::read_regular(&report_path, ir::DATA_FILE_LIMIT)
        .map_err(|e| format!("{BUILD_REPORT} cannot be read: {e}"))?
        .ok_or_else(|| format!("no {BUILD_REPORT}"))?;
    let report: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|_| format!("{BUILD_REPORT} is not one this tool wrote"))?;
    let listed: Vec<String> = match (report.get("tool").and_then(|t| t.as_str()), report.get("files")) {
        (Some(TOOL_NAME), Some(serde_json::Value::Array(files))) => {
            files.iter().filter_map(|f| f.as_str().map(str::to_string)).collect()
        }
        // Packages written before the report named its tool and files.
        (None, None) if ["ep", "dtype", "pipeline"].iter().all(|k| report.get(k).is_some()) => {
            legacy_package_files().into_iter().map(str::to_string).collect()
        }
        _ => return Err(format!("{BUILD_REPORT} is not one this tool wrote")),
    };
    let mut foreign: Vec<String> = Vec::new();
    for entry in entries {
        let name = entry.file_name().to_string_lossy().into_owned();
        let is_file = entry.file_type().is_ok_and(|t| t.is_file());
        // The adapters folder (a real folder, not a link) holds only files the report lists.
        if name == crate::lora::ADAPTERS_DIR && entry.file_type().is_ok_and(|t| t.is_dir()) {
            let inner = std::fs::read_dir(entry.path()).map_err(|e| format!("{name}: {e}"))?;
            for e in inner.flatten() {
                let inner_name = format!("{name}/{}", e.file_name().to_string_lossy());
                if !e.file_type().is_ok_and(|t| t.is_file()) || !listed.contains(&inner_name) {
                    foreign.push(inner_name);
                }
            }
            continue;
        }
        if !is_file || !listed.contains(&name) {
            foreign.push(name);
        }
    }
    if !foreign.is_empty() {
        foreign.sort();
        let shown: Vec<&str> = foreign.iter().take(5).map(String::as_str).collect();
        return Err(format!(
            "it also holds {}{}, which the package did not write",
            shown.join(", "),
            if foreign.len() > shown.len() { format!(" and {} more", foreign.len() - shown.len()) } else { String::new() }
        ));
    }
    Ok(())
}
