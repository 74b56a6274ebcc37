//! Generates `for_each_decoder!` from the fixture registry (tests/fixtures/fixtures.toml), so
//! the per-fixture tests (`families_parity`, the cpu parity of `ep_builds`) are one `#[test]`
//! per registered decoder, each named after its fixture, without a list in the test files:
//! a new registry entry is a new test. The registry is read with the same parser the tests use.

use std::fmt::Write;

#[path = "registry/mod.rs"]
mod fixture_registry;

fn main() {
    let dir = fixture_registry::repo_dir();
    println!("cargo:rerun-if-changed={}", dir.join(fixture_registry::REGISTRY_FILE).display());
    let registry = fixture_registry::Registry::load(dir).unwrap_or_else(|e| panic!("the fixture registry is invalid: {e}"));
    let mut arms = String::new();
    for f in registry.of_kind(fixture_registry::Kind::Decoder) {
        writeln!(arms, "            {} => {:?},", f.name.replace('-', "_"), f.name).unwrap();
    }
    let code = format!(
        "/// Calls `$m! {{ test_name => \"fixture\", ... }}` with every decoder of the fixture registry.\n\
         #[macro_export]\n\
         macro_rules! for_each_decoder {{\n    ($m:ident) => {{\n        $m! {{\n{arms}        }}\n    }};\n}}\n"
    );
    let mut arms = String::new();
    for f in registry.of_kind(fixture_registry::Kind::Encoder) {
        writeln!(arms, "            {} => {:?},", f.name.replace('-', "_"), f.name).unwrap();
    }
    let code = format!(
        "{code}\n/// Calls `$m! {{ test_name => \"fixture\", ... }}` with every encoder of the fixture registry.\n\
         #[macro_export]\n\
         macro_rules! for_each_encoder {{\n    ($m:ident) => {{\n        $m! {{\n{arms}        }}\n    }};\n}}\n"
    );
    let mut arms = String::new();
    for f in registry.of_kind(fixture_registry::Kind::Prequant) {
        writeln!(arms, "            {} => {:?},", f.name.replace('-', "_"), f.name).unwrap();
    }
    let code = format!(
        "{code}\n/// Calls `$m! {{ test_name => \"fixture\", ... }}` with every pre-quantized fixture of the registry.\n\
         #[macro_export]\n\
         macro_rules! for_each_prequant {{\n    ($m:ident) => {{\n        $m! {{\n{arms}        }}\n    }};\n}}\n"
    );
    let out = std::path::Path::new(&std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("for_each_decoder.rs");
    std::fs::write(&out, code).unwrap_or_else(|e| panic!("cannot write {}: {e}", out.display()));
}
