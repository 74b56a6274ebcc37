//! Rebuild when a `.rule` file is added or removed anywhere under `rules/` (family files at the
//! top, shared fragments in `fragments/`; the macro finds them the same way,
//! `rule_dsl::rule_paths`). Edits to existing files are tracked by the `include_bytes!` in the
//! macro's expansion. Every directory is named, so that a file added to a subdirectory counts
//! whether or not cargo scans directories recursively.
fn main() {
    let mut dirs = vec![std::path::PathBuf::from("rules")];
    while let Some(d) = dirs.pop() {
        println!("cargo:rerun-if-changed={}", d.display());
        if let Ok(entries) = std::fs::read_dir(&d) {
            dirs.extend(entries.filter_map(|e| e.ok()).map(|e| e.path()).filter(|p| p.is_dir()));
        }
    }
}
