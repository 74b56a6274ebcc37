//! The shared test fixtures, listed once: `tests/fixtures/fixtures.toml` names every folder of
//! `tests/fixtures` with its kind, `model_type`, traits and what it exercises. The Rust tests
//! (through this crate), the Python tests (tomllib) and the op expectations
//! (`tests/expectations/ops.toml`, by selector) all read it, so adding a fixture is adding its
//! folder and one entry.
//!
//! One module, included by `#[path]` into the tests of every crate that needs fixtures (and
//! `tests/build.rs`): it depends on nothing in the workspace (only serde, toml, thiserror), so
//! there is no dependency cycle and no extra crate; `tailor-tests` exposes it as
//! `fixture_registry`.
#![allow(dead_code)]

mod error;
mod folders;
mod registry;
mod select;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

pub use error::{Error, Result};
pub use registry::{Fixture, Kind, Registry, REGISTRY_FILE};

/// The repository's `tests/fixtures` folder.
pub fn repo_dir() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures"))
}

/// The repository's registry, read once per process. Panics with the problem when it cannot be
/// read: every test that uses fixtures depends on it, and a broken registry must stop them
/// loudly rather than select no fixture.
pub fn repo() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(|| Registry::load(repo_dir()).unwrap_or_else(|e| panic!("the fixture registry is invalid: {e}")))
}

/// The folder of the repository's fixture `name`. Panics when the registry does not list it,
/// so no test can use a fixture that the registry (and so every matrix) leaves out.
pub fn fixture(name: &str) -> PathBuf {
    match repo().get(name) {
        Some(f) => f.dir().to_path_buf(),
        None => panic!("fixture `{name}` is not in {}; add an entry for it", repo_dir().join(REGISTRY_FILE).display()),
    }
}

/// Every decoder fixture's name, in registry order: what the per-fixture test matrices run.
pub fn decoders() -> Vec<&'static str> {
    repo().of_kind(Kind::Decoder).map(|f| f.name.as_str()).collect()
}

/// The encoder fixtures' names, in registry order.
pub fn encoders() -> Vec<&'static str> {
    repo().of_kind(Kind::Encoder).map(|f| f.name.as_str()).collect()
}

/// The vision-language fixtures' names, in registry order.
pub fn vlms() -> Vec<&'static str> {
    repo().of_kind(Kind::Vlm).map(|f| f.name.as_str()).collect()
}

/// The pre-quantized fixtures' names, in registry order.
pub fn prequant() -> Vec<&'static str> {
    repo().of_kind(Kind::Prequant).map(|f| f.name.as_str()).collect()
}
