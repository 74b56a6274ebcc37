//! A Hugging Face checkpoint folder: `config.json` plus one or more safetensors files
//! (sharded through `model.safetensors.index.json`). Tensors are memory-mapped and handed out as
//! recipes; the checkpoint remembers which were taken, so a test can prove that every tensor
//! is consumed exactly once.

use crate::prequant::{self, QuantSource};
use crate::{DecoderConfig, Error, Result};
use ir::{MappedFile, PackedWeight, Recipe, SourceTensor};
use std::sync::Arc;
use serde_json::Value;
use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

pub struct Checkpoint {
    pub dir: PathBuf,
    pub config: DecoderConfig,
    tensors: BTreeMap<String, SourceTensor>,
    /// What `quantization_config` says, for a pre-quantized checkpoint (prequant.rs).
    pub quant: Option<QuantSource>,
    /// Its packed layers, by the `.weight` name each stands for.
    packed: BTreeMap<String, Arc<PackedWeight>>,
    taken: RefCell<BTreeMap<String, usize>>,
    unused: RefCell<BTreeMap<String, String>>,
    /// Tensors read as numbers when the graph is built (no recipe reads them), with why.
    read_at_build: RefCell<BTreeMap<String, String>>,
    /// A name prefix the family's tables use but this checkpoint may lack (see
    /// [`Checkpoint::set_optional_prefix`]).
    optional_prefix: RefCell<Option<String>>,
    /// For a vision-language checkpoint: (table prefix, stored prefix) pairs that map the text
    /// families' names (`model.layers.0...`, `lm_head.weight`) onto where this checkpoint stores
    /// its text model (`language_model.model.layers.0...`, `model.language_model.layers.0...`).
    text_prefixes: Vec<(String, String)>,
    /// The shard index of a sharded checkpoint, for a missing tensor's message.
    index: Option<ShardIndex>,
    /// Float tensors read through a recipe (a GGUF file's q/k rows un-permuted, an MXFP4
    /// expert stack decoded from its `_blocks` and `_scales`), by name.
    views: BTreeMap<String, Recipe>,
    /// The sentence pooling a GGUF file states (a bert file's `pooling_type`); `None` for a
    /// folder, whose pooling is its sentence-transformers files.
    gguf_pooling: Option<crate::gguf::GgufPooling>,
    /// The GGUF file the checkpoint was read from (its metadata holds the tokenizer).
    pub gguf: Option<Arc<ir::gguf::GgufFile>>,
}

/// Where vision-language checkpoints store their text model, as (table prefix, stored prefix):
/// transformers 5 writes `model.language_model.*` beside `lm_head.*`; Gemma 3 checkpoints
/// written by transformers 4 hold `language_model.model.*` and `language_model.lm_head.*`. A
/// checkpoint whose text model is at the table names already (`model.layers.*`, as the Qwen
/// 2.5-VL fixture) needs none.
const TEXT_LAYOUTS: &[&[(&str, &str)]] = &[
    &[("model.", "model.language_model.")],
    &[("model.", "language_model.model."), ("lm_head.", "language_model.lm_head.")],
];

/// The text layout of a vision-language checkpoint's tensor names (see [`TEXT_LAYOUTS`]).
fn text_prefixes(tensors: &BTreeMap<String, SourceTensor>) -> Vec<(String, String)> {
    if tensors.keys().any(|k| k.starts_with("model.layers.")) {
        return Vec::new();
    }
    let layout = TEXT_LAYOUTS.iter().find(|l| {
        let (_, stored) = l[0];
        tensors.keys().any(|k| k.starts_with(&format!("{stored}layers.")))
    });
    layout
        .into_iter()
        .flat_map(|l| l.iter())
        .filter(|(_, stored)| tensors.keys().any(|k| k.starts_with(stored)))
        .map(|(t, s)| (t.to_string(), s.to_string()))
        .collect()
}

impl Checkpoint {
    /// Drops a GGUF checkpoint's `tokenizer.*` metadata (`tokenizer.ggml.*`, the chat
    /// template) once the tokenizer has been converted: nothing reads it again (the config
    /// took its ids at import), and its parsed arrays (Gemma 3's 262,144 token strings, scores
    /// and types: about 30 MB) would otherwise be held while the weights are written. A no-op
    /// for other checkpoints, or when the file is shared.
    pub fn forget_gguf_tokenizer(&mut self) {
        if let Some(file) = self.gguf.as_mut().and_then(Arc::get_mut) {
            file.forget_metadata("tokenizer.");
        }
    }

    pub fn open(dir: &Path) -> Result<Checkpoint> {
        if let Some(file) = crate::gguf::gguf_file(dir)? {
            return Self::open_gguf(&file);
        }
        if !dir.is_dir() {
            return Err(Error::Checkpoint {
                path: dir.to_path_buf(),
                reason: "not a folder; pass the checkpoint folder that holds config.json and *.safetensors".into(),
            });
        }
        let config = DecoderConfig::load(dir)?;
        let mut tensors = BTreeMap::new();
        let (files, index) = safetensors_files(dir)?;
        for file in files {
            let mapped = MappedFile::open(&file)?;
            for t in mapped.safetensors_tensors()? {
                if let Some(prev) = tensors.insert(t.name.clone(), t) {
                    return Err(Error::Checkpoint {
                        path: file.clone(),
                        reason: format!("tensor `{}` also appears in {}", prev.name, prev.file.path.display()),
                    });
                }
            }
        }
        if let Some(index) = &index {
            index.check(dir, &tensors)?;
        }
        let text_prefixes = if config.multimodal.is_some() { text_prefixes(&tensors) } else { Vec::new() };
        let quant = QuantSource::detect(dir)?;
        let packed = prequant::gather(dir, &tensors, quant.as_ref())?;
        let ckpt = Checkpoint {
            dir: dir.to_path_buf(),
            config,
            tensors,
            quant,
            packed: packed.layers,
            taken: RefCell::new(BTreeMap::new()),
            unused: RefCell::new(BTreeMap::new()),
            read_at_build: RefCell::new(BTreeMap::new()),
            optional_prefix: RefCell::new(None),
            text_prefixes,
            index,
            views: packed.views,
            gguf_pooling: None,
            gguf: None,
        };
        for (name, why) in packed.unused {
            ckpt.mark_unused(&name, &why);
        }
        Ok(ckpt)
    }

    /// A GGUF file (crate::gguf): its metadata as the config, its tensors under the family's names.
    fn open_gguf(file: &Path) -> Result<Checkpoint> {
        let imported = crate::gguf::import(file)?;
        let gguf_pooling = crate::gguf::pooling_of(&imported.file);
        let config = DecoderConfig::parse(file, &Value::Object(imported.config).to_string())?;
        Ok(Checkpoint {
            dir: file.to_path_buf(),
            config,
            tensors: imported.tensors,
            quant: imported.source,
            packed: imported.packed,
            taken: RefCell::new(BTreeMap::new()),
            unused: RefCell::new(BTreeMap::new()),
            read_at_build: RefCell::new(BTreeMap::new()),
            optional_prefix: RefCell::new(None),
            text_prefixes: Vec::new(),
            index: None,
            views: imported.views,
            gguf_pooling,
            gguf: Some(Arc::new(imported.file)),
        })
    }

    /// Whether the checkpoint states a sentence pooling: a sentence-transformers folder
    /// (`modules.json`), or a bert GGUF file with a `pooling_type` (one not built is an error
    /// of the sentence-embedding task it defaults to, which names the fix).
    pub fn has_sentence_pooling(&self) -> Result<bool> {
        Ok(self.gguf_pooling.is_some() || crate::tasks::pooling::is_sentence_transformers(&self.dir)?)
    }

    /// The `sentence_embedding` pooling: a GGUF file's `pooling_type` (no Normalize module:
    /// the file does not state one), else the folder's sentence-transformers files.
    pub fn sentence_pooling(&self) -> Result<crate::tasks::pooling::SentencePooling> {
        match &self.gguf_pooling {
            Some(crate::gguf::GgufPooling::Mode(mode)) => Ok(crate::tasks::pooling::SentencePooling { modes: vec![*mode], normalize: false, config: self.dir.clone() }),
            Some(crate::gguf::GgufPooling::Unbuilt(why)) => Err(Error::Config { path: self.dir.clone(), reason: why.clone() }),
            None if self.gguf.is_some() => Err(Error::Config {
                path: self.dir.clone(),
                reason: "task sentence-embedding needs a pooling, and this GGUF file states none (`bert.pooling_type` absent or NONE, or not a bert file); use --task feature-extraction".into(),
            }),
            None => crate::tasks::pooling::SentencePooling::load(&self.dir, self.config.hidden_size),
        }
    }

    /// Lets table names carry `prefix` even when the checkpoint stores names without it: GPT-2
    /// saved from the bare `GPT2Model` (as openai-community/gpt2 ships) has `h.0.attn...`
    /// where `GPT2LMHeadModel` has `transformer.h.0.attn...`. Applies only when no tensor
    /// starts with `prefix`.
    pub fn set_optional_prefix(&self, prefix: Option<&str>) {
        let strip = prefix.filter(|p| !self.tensors.keys().any(|k| k.starts_with(p)));
        *self.optional_prefix.borrow_mut() = strip.map(str::to_string);
    }

    /// The stored name of table name `name`. A name the checkpoint stores is its own: the
    /// vision tower of a transformers-5 layout (`model.visual.*`, `model.vision_tower.*`) sits
    /// beside `model.language_model.*` and must not be mapped into the text model.
    fn resolve<'a>(&self, name: &'a str) -> Cow<'a, str> {
        if self.tensors.contains_key(name) {
            return Cow::Borrowed(name);
        }
        for (table, stored) in &self.text_prefixes {
            if let Some(rest) = name.strip_prefix(table.as_str()) {
                return Cow::Owned(format!("{stored}{rest}"));
            }
        }
        match self.optional_prefix.borrow().as_deref() {
            Some(p) => Cow::Borrowed(name.strip_prefix(p).unwrap_or(name)),
            None => Cow::Borrowed(name),
        }
    }

    /// Whether the checkpoint holds `name` (for optional weights such as a tied `lm_head`).
    pub fn has(&self, name: &str) -> bool {
        let name = self.resolve(name);
        let name = name.as_ref();
        self.tensors.contains_key(name) || self.packed.contains_key(name) || self.views.contains_key(name)
    }

    /// Whether `name` is a pre-quantized layer (GPTQ / AWQ `qweight`, a GGUF block type): its
    /// [`Self::tensor`] is the dequantized `[out, in]` value whatever layout the family's float
    /// weights have (GPTQ and AWQ pack GPT-2's Conv1D layers transposed, as Linear ones; GGUF's
    /// GPT-2 files register theirs as transposed views instead, which this does not count).
    pub fn is_packed(&self, name: &str) -> bool {
        self.packed.contains_key(self.resolve(name).as_ref())
    }

    /// The tensor `name`, checked against the shape config.json implies, as a recipe.
    pub fn tensor(&self, name: &str, expected: &[usize]) -> Result<Recipe> {
        let name = self.resolve(name);
        let name = name.as_ref();
        if let Some(layer) = self.packed.get(name) {
            // A pre-quantized Linear layer: its dequantized value as a float `[out, in]`.
            let found = vec![layer.n(), layer.k()];
            if found != expected {
                return Err(Error::TensorShape { path: layer.file_path().to_path_buf(), name: format!("{name} (packed in {}.qweight)", layer.name), found, expected: expected.to_vec() });
            }
            let mut taken = self.taken.borrow_mut();
            for part in prequant::parts_of(name).filter(|p| self.tensors.contains_key(p)) {
                *taken.entry(part).or_default() += 1;
            }
            if self.gguf.is_some() {
                *taken.entry(name.to_string()).or_default() += 1;
            }
            return Ok(Recipe::Packed(Arc::clone(layer)));
        }
        if let Some(view) = self.views.get(name) {
            if view.shape() != expected {
                // A view of stored tensors (MXFP4's `_blocks`/`_scales`) names them and their file.
                let parts: Vec<String> = prequant::view_parts(name).filter(|p| self.tensors.contains_key(p)).collect();
                let (path, shown) = match parts.first().and_then(|p| self.tensors.get(p)) {
                    Some(t) => (t.file.path.clone(), format!("{name} (packed in {})", parts.join(" and "))),
                    None => (self.dir.clone(), name.to_string()),
                };
                return Err(Error::TensorShape { path, name: shown, found: view.shape(), expected: expected.to_vec() });
            }
            let mut taken = self.taken.borrow_mut();
            *taken.entry(name.to_string()).or_default() += 1;
            for part in prequant::view_parts(name).filter(|p| self.tensors.contains_key(p)) {
                *taken.entry(part).or_default() += 1;
            }
            return Ok(view.clone());
        }
        let t = self.tensors.get(name).ok_or_else(|| Error::MissingTensor {
            path: self.dir.clone(),
            name: name.to_string(),
            hint: match &self.index {
                Some(index) => format!(
                    "{} tensors present; {} maps no shard to it{}; is the checkpoint complete and of the declared model_type?",
                    self.tensors.len(),
                    file_name(&index.path),
                    index.found_elsewhere(&self.dir, name)
                ),
                None => format!("{} tensors present; is the checkpoint complete and of the declared model_type?", self.tensors.len()),
            },
        })?;
        if t.shape != expected {
            return Err(Error::TensorShape {
                path: t.file.path.clone(),
                name: name.into(),
                found: t.shape.clone(),
                expected: expected.to_vec(),
            });
        }
        if !t.dtype.is_float() {
            return Err(Error::TensorDtype { path: t.file.path.clone(), name: name.into(), found: t.dtype.to_string() });
        }
        *self.taken.borrow_mut().entry(name.to_string()).or_default() += 1;
        Ok(Recipe::source(t.clone()))
    }

    /// Whether `name` (a stored name) belongs to the text model of a vision-language
    /// checkpoint (always true for a text-only one): the decoder accounts for these only, the
    /// other parts read the rest.
    pub fn is_text_tensor(&self, name: &str) -> bool {
        if self.config.multimodal.is_none() {
            return true;
        }
        if self.text_prefixes.is_empty() {
            return name.starts_with("model.") || name.starts_with("lm_head.");
        }
        self.text_prefixes.iter().any(|(_, stored)| name.starts_with(stored.as_str())) || (name.starts_with("lm_head.") && !self.text_prefixes.iter().any(|(t, _)| t == "lm_head."))
    }

    /// The language model of a vision-language checkpoint alone (`--text-only`): the text
    /// config without its vision part, every tensor outside the text model recorded as unused
    /// (the tower and projector), and no multimodal RoPE sections: a text prompt's positions
    /// are the same in every section, where sectioned RoPE is the plain RoPE of the same
    /// frequencies (and Qwen3-VL's deepstack adds image features only). Refused for a
    /// checkpoint that is not vision-language.
    pub fn into_text_only(mut self) -> Result<Checkpoint> {
        let Some(source) = self.config.multimodal.as_ref().map(|m| m.model_type.clone()) else {
            return Err(Error::Config {
                path: self.config.path.clone(),
                reason: format!(
                    "--text-only builds the language model of a vision-language checkpoint (a config.json with `text_config` and `vision_config`); this one (`{}`) is text-only already: drop the flag",
                    self.config.model_type
                ),
            });
        };
        let others: Vec<String> = self.tensors.keys().filter(|n| !self.is_text_tensor(n)).cloned().collect();
        let why = format!("--text-only: part of the `{source}` checkpoint's vision tower or projector, not of its language model");
        for name in others {
            self.unused.borrow_mut().insert(name, why.clone());
        }
        self.config.multimodal = None;
        self.config.mrope = None;
        Ok(self)
    }

    /// All tensor names in the checkpoint (a packed layer's `.weight` among them).
    pub fn tensor_names(&self) -> impl Iterator<Item = &str> {
        self.tensors.keys().chain(self.packed.keys()).chain(self.views.keys()).map(String::as_str)
    }

    /// How many times each tensor was taken by [`Checkpoint::tensor`].
    pub fn taken(&self) -> BTreeMap<String, usize> {
        self.taken.borrow().clone()
    }

    /// Records that the graph deliberately does not read `name`, and why.
    pub fn mark_unused(&self, name: &str, reason: &str) {
        let name = self.resolve(name);
        let name = name.as_ref();
        self.unused.borrow_mut().insert(name.to_string(), reason.to_string());
    }

    /// Tensors deliberately left out of the graph, with the reason for each.
    pub fn unused(&self) -> BTreeMap<String, String> {
        self.unused.borrow().clone()
    }

    /// The one number tensor `name` holds (shape `[1]` or `[]`), read now, when the graph is
    /// built (Apertus's xIELU scalars, which become constants after a softplus no recipe
    /// computes): taken like any tensor, and recorded with `why` as read at build time.
    pub fn scalar_value(&self, name: &str, why: &str) -> Result<f64> {
        let recipe = match self.tensor(name, &[1]) {
            Err(Error::TensorShape { found, .. }) => self.tensor(name, &[]).map_err(|_| Error::Checkpoint {
                path: self.dir.clone(),
                reason: format!("tensor `{name}` has shape {found:?}; it is one number (shape [1] or [])"),
            })?,
            other => other?,
        };
        let bytes = recipe.cast(ir::DType::F32).materialize()?;
        let v = bytes.get(..4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64).unwrap_or(f64::NAN);
        if !v.is_finite() {
            return Err(Error::Checkpoint { path: self.dir.clone(), reason: format!("tensor `{name}` is {v}, not a finite number") });
        }
        let resolved = self.resolve(name).into_owned();
        self.read_at_build.borrow_mut().insert(resolved, why.to_string());
        Ok(v)
    }

    /// Tensors read as numbers when the graph was built ([`Checkpoint::scalar_value`]), with why.
    pub fn read_at_build(&self) -> BTreeMap<String, String> {
        self.read_at_build.borrow().clone()
    }

    /// Tensors neither taken nor marked unused: weights the graph would silently drop.
    pub fn unaccounted(&self) -> Vec<String> {
        let (taken, unused) = (self.taken.borrow(), self.unused.borrow());
        let gguf = self.gguf.is_some().then(|| self.packed.keys().chain(self.views.keys())).into_iter().flatten();
        self.tensors.keys().chain(gguf).filter(|n| !taken.contains_key(*n) && !unused.contains_key(*n)).cloned().collect()
    }
}

/// A checkpoint's `model.safetensors.index.json`: where it is and what its `weight_map` says.
struct ShardIndex {
    path: PathBuf,
    /// Tensor name -> shard file name.
    map: BTreeMap<String, String>,
}

impl ShardIndex {
    /// The tensors the index maps to `shard`, for messages: "`a`" or "`a` and 11 more".
    fn mapped_to(&self, shard: &str) -> String {
        let mut names = self.map.iter().filter(|(_, s)| *s == shard).map(|(t, _)| t);
        let first = names.next().map(String::as_str).unwrap_or_default();
        match names.count() {
            0 => format!("`{first}`"),
            more => format!("`{first}` and {more} more tensor(s)"),
        }
    }

    fn err(&self, reason: String) -> Error {
        Error::Checkpoint { path: self.path.clone(), reason }
    }

    /// The shard files, each checked to be a plain file name of a regular file in `dir`.
    fn shard_files(&self, dir: &Path) -> Result<Vec<PathBuf>> {
        let shards: BTreeSet<&str> = self.map.values().map(String::as_str).collect();
        let mut files = Vec::new();
        for shard in shards {
            let path = dir.join(shard);
            if shard.is_empty() || shard.contains("..") || shard.contains('/') || shard.contains('\\') {
                return Err(self.err(format!(
                    "maps {} to shard `{shard}`, which is not a file name in {}: shards sit beside the index",
                    self.mapped_to(shard),
                    dir.display()
                )));
            }
            if !ir::regular_file(&path)? {
                return Err(self.err(format!("maps {} to shard `{shard}`, which does not exist in {}", self.mapped_to(shard), dir.display())));
            }
            files.push(path);
        }
        Ok(files)
    }

    /// Every entry names the shard that holds its tensor: an entry whose shard lacks it is a
    /// broken index or a broken shard, reported as such rather than as a missing tensor later.
    fn check(&self, dir: &Path, tensors: &BTreeMap<String, SourceTensor>) -> Result<()> {
        for (name, shard) in &self.map {
            let holder = tensors.get(name).map(|t| t.file.path.clone());
            if holder.as_deref() != Some(dir.join(shard).as_path()) {
                let actually = match holder {
                    Some(p) => format!("it is in `{}`", file_name(&p)),
                    None => format!("no shard the index names holds it{}", self.found_elsewhere(dir, name)),
                };
                return Err(self.err(format!("maps tensor `{name}` to shard `{shard}`, which does not hold it ({actually})")));
            }
        }
        Ok(())
    }

    /// For a tensor no named shard holds: the `*.safetensors` files of `dir` the index names for
    /// no tensor that do hold it (their headers read on this error path only), as a clause.
    fn found_elsewhere(&self, dir: &Path, name: &str) -> String {
        let named: BTreeSet<&str> = self.map.values().map(String::as_str).collect();
        let mut holders: Vec<String> = std::fs::read_dir(dir)
            .map(|entries| {
                entries
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.extension().is_some_and(|x| x == "safetensors") && !named.contains(file_name(p).as_str()))
                    .filter(|p| {
                        ir::regular_file(p).unwrap_or(false)
                            && MappedFile::open(p).and_then(|m| m.safetensors_tensors()).is_ok_and(|ts| ts.iter().any(|t| t.name == name))
                    })
                    .map(|p| format!("`{}`", file_name(&p)))
                    .collect()
            })
            .unwrap_or_default();
        holders.sort();
        if holders.is_empty() {
            String::new()
        } else {
            format!("; it is in {}, which the index names for no tensor", holders.join(", "))
        }
    }
}

fn file_name(path: &Path) -> String {
    path.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default()
}

/// The safetensors files of a checkpoint: the shards named by the index when there is one
/// (with the index), else `model.safetensors`, else every `*.safetensors` in the folder, sorted.
fn safetensors_files(dir: &Path) -> Result<(Vec<PathBuf>, Option<ShardIndex>)> {
    let index = dir.join("model.safetensors.index.json");
    if let Some(text) = crate::config::read_settings(&index)? {
        let index = ShardIndex { map: index_weight_map(&index, &text)?, path: index };
        return Ok((index.shard_files(dir)?, Some(index)));
    }
    let single = dir.join("model.safetensors");
    if ir::regular_file(&single)? {
        return Ok((vec![single], None));
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| Error::Checkpoint { path: dir.to_path_buf(), reason: format!("cannot list it: {e}") })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "safetensors"))
        .collect();
    files.sort();
    // A `*.safetensors` entry that is not a regular file is an error, never skipped: leaving
    // out a shard would build a model without its weights.
    for file in &files {
        ir::regular_file(file)?;
    }
    if files.is_empty() {
        return Err(Error::Checkpoint {
            path: dir.to_path_buf(),
            reason: "holds no *.safetensors file (PyTorch .bin checkpoints are not read; convert them to safetensors)".into(),
        });
    }
    Ok((files, None))
}

/// The shard file names that `model.safetensors.index.json` (at `index`, holding `text`)
/// maps tensors to, sorted and without repeats ([`index_weight_map`]'s values); checking that
/// each name is a file in the folder is the caller's job.
pub fn index_shards(index: &Path, text: &str) -> Result<BTreeSet<String>> {
    Ok(index_weight_map(index, text)?.into_values().collect())
}

/// `weight_map` of `model.safetensors.index.json` (at `index`, holding `text`): tensor name ->
/// shard file name. A value that is not a string is an error naming its tensor: skipping it
/// would lose the shard, and the tensor would be reported missing.
pub fn index_weight_map(index: &Path, text: &str) -> Result<BTreeMap<String, String>> {
    let err = |reason: String| Error::Checkpoint { path: index.to_path_buf(), reason };
    let value: Value = serde_json::from_str(text).map_err(|e| err(format!("not valid JSON: {e}")))?;
    let map = value.get("weight_map").and_then(Value::as_object).ok_or_else(|| err("has no `weight_map` object".into()))?;
    map.iter()
        .map(|(name, shard)| match shard.as_str() {
            Some(s) => Ok((name.clone(), s.to_string())),
            None => Err(err(format!("maps tensor `{name}` to {shard}, which is not a shard file name"))),
        })
        .collect()
}
