//! The checkpoint's files a package carries besides the model (tokenizer, generation and
//! chat settings), and whether onnxruntime-genai will find a tokenizer among them. A missing
//! or unreadable tokenizer does not stop the model from building, but genai cannot use the
//! package without it, so the build says so (an error under `--strict`).

use std::path::Path;

/// Files copied from the checkpoint into the package when present.
pub(crate) const CHECKPOINT_FILES: &[&str] = &[
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "tokenizer.model",
    // WordPiece vocabulary of BERT-family tokenizers (tokenizer.json holds it too).
    "vocab.txt",
    "vocab.json",
    "merges.txt",
    "added_tokens.json",
    "chat_template.jinja",
    "generation_config.json",
];

/// What onnxruntime-genai's tokenizer loads: `tokenizer_config.json` with either a Hugging
/// Face `tokenizer.json` or a SentencePiece `tokenizer.model`.
const GENAI_NEEDS_ALL: &[&str] = &["tokenizer_config.json"];
const GENAI_NEEDS_ONE_OF: &[&str] = &["tokenizer.json", "tokenizer.model"];

/// The companion files of one checkpoint.
pub(crate) struct Companions {
    /// Regular files to copy.
    pub(crate) copyable: Vec<&'static str>,
    /// What a user should know: entries that are not readable files, tokenizer files genai
    /// needs and the checkpoint lacks.
    pub(crate) warnings: Vec<String>,
}

impl Companions {
    /// The companions of `model_dir`; with `genai`, a tokenizer onnxruntime-genai cannot load
    /// is a warning (a decoder package), else only unreadable entries are.
    pub(crate) fn of(model_dir: &Path, genai: bool) -> Companions {
        let mut copyable = Vec::new();
        let mut warnings = Vec::new();
        for &name in CHECKPOINT_FILES {
            let path = model_dir.join(name);
            match ir::entry_kind(&path) {
                ir::EntryKind::Regular => match std::fs::File::open(&path) {
                    Ok(_) => copyable.push(name),
                    Err(e) => warnings.push(format!("{} cannot be read ({e}); it was not copied", path.display())),
                },
                ir::EntryKind::Absent => {}
                kind => warnings.push(format!("{} {}; it was not copied", path.display(), kind.describe())),
            }
        }
        let missing_all: Vec<&str> = GENAI_NEEDS_ALL.iter().copied().filter(|n| !copyable.contains(n)).collect();
        let has_one = GENAI_NEEDS_ONE_OF.iter().any(|n| copyable.contains(n));
        if genai && (!missing_all.is_empty() || !has_one) {
            let mut missing = missing_all.join(", ");
            if !has_one {
                if !missing.is_empty() {
                    missing.push_str(", and ");
                }
                missing.push_str(&GENAI_NEEDS_ONE_OF.join(" or "));
            }
            warnings.push(format!(
                "the checkpoint {} lacks {missing}: onnxruntime-genai will not load this package's tokenizer \
                 (add the tokenizer files to the checkpoint folder and build again)",
                model_dir.display()
            ));
        }
        Companions { copyable, warnings }
    }

    /// Whether onnxruntime-genai finds a tokenizer among the copied files.
    pub(crate) fn genai_loadable(&self) -> bool {
        GENAI_NEEDS_ALL.iter().all(|n| self.copyable.contains(n)) && GENAI_NEEDS_ONE_OF.iter().any(|n| self.copyable.contains(n))
    }
}
