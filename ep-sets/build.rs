//! Lists `tables/*.toml` for `src/builtin.rs`: every table in the folder is compiled into the
//! binary (so an installed `tailor` needs no files beside it), and adding an EP is adding a
//! file, with no list to keep in step by hand.

use std::fmt::Write;
use std::path::Path;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    // Without the `builtin` feature (the rule macro's use) nothing is compiled in, and a table
    // edit must not rerun this script or recompile the crate.
    if std::env::var_os("CARGO_FEATURE_BUILTIN").is_none() {
        return;
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tables");
    // The folder itself, so that a table added or removed reruns this script; each file, so
    // that an edited table is compiled in again.
    println!("cargo:rerun-if-changed={}", dir.display());
    let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("cannot read the EP tables folder {}: {e}", dir.display()));
    let mut files: Vec<String> = Vec::new();
    for entry in entries {
        let entry = entry.unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()));
        let name = entry.file_name().into_string().unwrap_or_else(|n| panic!("{}: table file name {n:?} is not UTF-8", dir.display()));
        if name.ends_with(".toml") {
            files.push(name);
        }
    }
    files.sort();
    if files.is_empty() {
        panic!("{} holds no *.toml EP table; the builder needs at least `default.toml`", dir.display());
    }
    let mut code = String::from("/// `(file name, text)` of every table in `ep-sets/tables/`, sorted by file name.\n");
    code.push_str("pub(crate) const TABLES: &[(&str, &str)] = &[\n");
    for name in &files {
        let path = dir.join(name);
        println!("cargo:rerun-if-changed={}", path.display());
        let path = path.to_str().unwrap_or_else(|| panic!("{}: path is not UTF-8", path.display()));
        writeln!(code, "    ({name:?}, include_str!({path:?})),").unwrap();
    }
    code.push_str("];\n");
    let out = Path::new(&std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("builtin_tables.rs");
    std::fs::write(&out, code).unwrap_or_else(|e| panic!("cannot write {}: {e}", out.display()));
}
