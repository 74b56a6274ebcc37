//! Output-folder safety: refuse outputs that would overwrite or nest with the source, and
//! replace an existing output only once the new package is complete.

use crate::{Error, Result};
use std::path::{Path, PathBuf};

/// Resolves `path` as far as it exists (symlinks included), then appends the rest.
pub(crate) fn resolve(path: &Path) -> PathBuf {
    let abs = if path.is_absolute() { path.to_path_buf() } else { std::env::current_dir().unwrap_or_default().join(path) };
    let mut existing = abs.clone();
    let mut rest = Vec::new();
    while !existing.exists() {
        match (existing.file_name(), existing.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name.to_owned());
                existing = parent.to_path_buf();
            }
            _ => break,
        }
    }
    let mut resolved = existing.canonicalize().unwrap_or(existing);
    for part in rest.iter().rev() {
        resolved.push(part);
    }
    resolved
}

/// Checks `output` against the model folder; `force` allows replacing a non-empty folder.
pub(crate) fn check_output(output: &Path, model_dir: &Path, force: bool) -> Result<()> {
    let out = resolve(output);
    let model = resolve(model_dir);
    let refuse = |reason: String| Err(Error::Output { output: output.to_path_buf(), reason });
    if out == model {
        return refuse("is the model folder itself; choose another folder (--force does not allow this)".into());
    }
    if out.starts_with(&model) {
        return refuse(format!("lies inside the model folder {}; choose a folder outside it", model.display()));
    }
    if model.starts_with(&out) {
        return refuse(format!(
            "contains the model folder {}; replacing it would delete the source (--force does not allow this)",
            model.display()
        ));
    }
    if out.is_file() || (output.exists() && !output.is_dir()) {
        return refuse("is a file, not a folder; pass a folder path".into());
    }
    if out.is_dir() {
        let non_empty = std::fs::read_dir(&out).map_err(|e| Error::io(&out, e))?.next().is_some();
        if non_empty && !force {
            return refuse("exists and is not empty; pass --force to replace it (it is replaced only if the build succeeds)".into());
        }
    }
    Ok(())
}

/// A temporary folder beside `output` (same filesystem, so the final rename is atomic).
pub(crate) fn staging_dir(output: &Path) -> Result<tempfile::TempDir> {
    let out = resolve(output);
    let parent = out.parent().map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("."));
    std::fs::create_dir_all(&parent).map_err(|e| Error::io(&parent, e))?;
    let name = out.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "package".into());
    tempfile::Builder::new().prefix(&format!(".{name}.tailor-")).tempdir_in(&parent).map_err(|e| Error::io(&parent, e))
}

/// Moves the finished staging folder to `output`, replacing what was there.
pub(crate) fn commit(staging: tempfile::TempDir, output: &Path) -> Result<()> {
    let out = resolve(output);
    let staged = staging.keep();
    if out.exists() {
        // Move the old folder aside first, so a failure between the two renames loses nothing.
        let aside = staged.with_extension("old");
        std::fs::rename(&out, &aside).map_err(|e| Error::io(&out, e))?;
        if let Err(e) = std::fs::rename(&staged, &out) {
            let _ = std::fs::rename(&aside, &out);
            let _ = std::fs::remove_dir_all(&staged);
            return Err(Error::io(&out, e));
        }
        std::fs::remove_dir_all(&aside).map_err(|e| Error::io(&aside, e))?;
    } else if let Err(e) = std::fs::rename(&staged, &out) {
        let _ = std::fs::remove_dir_all(&staged);
        return Err(Error::io(&out, e));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_outputs_that_touch_the_source() {
        let root = tempfile::tempdir().unwrap();
        let model = root.path().join("model");
        std::fs::create_dir(&model).unwrap();
        std::fs::write(model.join("config.json"), "{}").unwrap();
        for bad in [model.clone(), model.join("out"), root.path().to_path_buf(), model.join("config.json")] {
            assert!(check_output(&bad, &model, true).is_err(), "{} should be refused", bad.display());
        }
        assert!(check_output(&root.path().join("out"), &model, false).is_ok());
        let full = root.path().join("full");
        std::fs::create_dir(&full).unwrap();
        std::fs::write(full.join("x"), "x").unwrap();
        assert!(check_output(&full, &model, false).is_err());
        assert!(check_output(&full, &model, true).is_ok());
    }
}
