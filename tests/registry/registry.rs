//! The registry file's format and its own consistency (names, kinds, declared traits). What
//! it says about the folders beside it is checked in `folders.rs`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::{Error, Result};

/// The registry's file name inside the fixtures folder.
pub const REGISTRY_FILE: &str = "fixtures.toml";

/// What a fixture's checkpoint is, which decides the tests that can run it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// A causal LM: built by `tailor build`, in every per-fixture decoder matrix.
    Decoder,
    /// An encoder only (no task builds it yet).
    Encoder,
    /// A vision-language checkpoint (`text_config` + `vision_config`): a package of parts
    /// (vision tower, embedding, decoder), tested by its own part tests, in no decoder or
    /// encoder matrix.
    Vlm,
    /// A pre-quantized causal LM (GPTQ, AWQ): its packed integers are imported, and its
    /// reference is the output of its dequantized model (the float checkpoint in its
    /// `dequantized/` folder). Only the pre-quantized tests build it (tests/tests/prequant.rs).
    Prequant,
    /// LoRA adapters (PEFT folders, each with the reference outputs of base + adapter) for a
    /// base fixture that `lora.json` names (`base_fixture`): no config.json of its own, so no
    /// decoder or encoder matrix builds it; only the LoRA tests (tests/tests/lora.rs,
    /// tests/python/test_lora.py) do, on that base.
    Lora,
}

impl Kind {
    /// The name the registry and selectors use.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Decoder => "decoder",
            Kind::Encoder => "encoder",
            Kind::Vlm => "vlm",
            Kind::Prequant => "prequant",
            Kind::Lora => "lora",
        }
    }

    pub(crate) const ALL: [Kind; 5] = [Kind::Decoder, Kind::Encoder, Kind::Vlm, Kind::Prequant, Kind::Lora];
}

/// One fixture folder.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fixture {
    /// The folder's name under the fixtures folder (lower-case letters, digits, `-`, `_`), also the
    /// name of its per-fixture tests (with `_` for `-`).
    pub name: String,
    pub kind: Kind,
    /// `model_type` of its config.json.
    pub model_type: String,
    /// Declared traits (the registry's `[traits]`) that tests and op expectations select by.
    #[serde(default)]
    pub traits: Vec<String>,
    /// What the fixture is there to show, for people reading the registry.
    pub exercises: String,
    #[serde(skip)]
    pub(crate) dir: PathBuf,
}

impl Fixture {
    /// The fixture's folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether the fixture has trait `name`.
    pub fn has(&self, name: &str) -> bool {
        self.traits.iter().any(|t| t == name)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    traits: BTreeMap<String, String>,
    fixture: Vec<Fixture>,
}

/// The parsed registry: fixtures in file order, and the declared traits with their meaning.
#[derive(Debug, Clone)]
pub struct Registry {
    pub(crate) dir: PathBuf,
    pub(crate) fixtures: Vec<Fixture>,
    pub(crate) traits: BTreeMap<String, String>,
}

impl Registry {
    /// Reads and checks `dir/fixtures.toml`; fixture folders are resolved against `dir`.
    pub fn load(dir: impl AsRef<Path>) -> Result<Registry> {
        let dir = dir.as_ref().to_path_buf();
        let path = dir.join(REGISTRY_FILE);
        let text = std::fs::read_to_string(&path).map_err(|source| Error::Io { path: path.clone(), source })?;
        Self::parse(dir, &text)
    }

    /// Parses registry text whose fixtures live in `dir`.
    pub fn parse(dir: PathBuf, text: &str) -> Result<Registry> {
        let path = dir.join(REGISTRY_FILE);
        let file: File = toml::from_str(text).map_err(|source| Error::Toml { path: path.clone(), source })?;
        let mut registry = Registry { dir, fixtures: file.fixture, traits: file.traits };
        for f in &mut registry.fixtures {
            f.dir = registry.dir.join(&f.name);
        }
        let problems = registry.problems();
        if problems.is_empty() {
            Ok(registry)
        } else {
            Err(Error::Invalid { path, problems })
        }
    }

    /// What is wrong inside the file: bad or repeated names, undeclared or unused traits,
    /// empty descriptions.
    fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        let mut seen = BTreeSet::new();
        let mut test_names = BTreeSet::new();
        let mut used = BTreeSet::new();
        for f in &self.fixtures {
            // `_` is allowed because published model_types have it (`tiny-qwen2_5_vl`); test
            // names replace `-` by `_`, so two names equal after that would clash.
            let name_ok = f.name.starts_with(|c: char| c.is_ascii_lowercase())
                && f.name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
            if !name_ok {
                problems.push(format!("fixture `{}`: a name is lower-case letters, digits, `-` and `_`, starting with a letter", f.name));
            }
            if !seen.insert(f.name.as_str()) {
                problems.push(format!("fixture `{}` is listed twice", f.name));
            } else if !test_names.insert(f.name.replace('-', "_")) {
                problems.push(format!("fixture `{}` has the test name of another fixture (`-` and `_` are the same in test names)", f.name));
            }
            if f.model_type.trim().is_empty() || f.exercises.trim().is_empty() {
                problems.push(format!("fixture `{}`: `model_type` and `exercises` must not be empty", f.name));
            }
            for t in &f.traits {
                if !self.traits.contains_key(t) {
                    problems.push(format!("fixture `{}`: trait `{t}` is not declared in [traits]", f.name));
                }
                used.insert(t.as_str());
            }
        }
        for (t, meaning) in &self.traits {
            if Kind::ALL.iter().any(|k| k.name() == t) {
                problems.push(format!("trait `{t}` has the name of a kind"));
            }
            if meaning.trim().is_empty() {
                problems.push(format!("trait `{t}` says nothing about what it means"));
            }
            if !used.contains(t.as_str()) {
                problems.push(format!("trait `{t}` is declared but no fixture has it"));
            }
        }
        problems
    }

    /// The folder the registry describes.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Every fixture, in file order.
    pub fn all(&self) -> impl Iterator<Item = &Fixture> {
        self.fixtures.iter()
    }

    /// The fixtures of one kind, in file order.
    pub fn of_kind(&self, kind: Kind) -> impl Iterator<Item = &Fixture> {
        self.fixtures.iter().filter(move |f| f.kind == kind)
    }

    /// The fixture called `name`.
    pub fn get(&self, name: &str) -> Option<&Fixture> {
        self.fixtures.iter().find(|f| f.name == name)
    }

    /// The declared traits and what each means.
    pub fn traits(&self) -> &BTreeMap<String, String> {
        &self.traits
    }
}
