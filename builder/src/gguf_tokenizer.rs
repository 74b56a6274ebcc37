//! The tokenizer of a GGUF file, from its `tokenizer.ggml.*` metadata: a Hugging Face
//! `tokenizer.json` and `tokenizer_config.json` that encode as transformers' own GGUF loader
//! does (transformers 5.24, `integrations/gguf/gguf_tokenizer_mapping.py`, read for facts), and
//! that onnxruntime-genai loads.
//!
//! Converted: `tokenizer.ggml.model` `gpt2` (byte-level BPE with the file's merges): the
//! vocabulary as the file spells it (a token with a character outside GPT-2's byte alphabet is
//! respelled from its UTF-8 bytes, but for an added token no merge needs respelled), the control
//! tokens (token type 3) as special added tokens and the user-defined ones (type 4) as plain
//! added tokens, each with the file's id (where transformers gives a control token outside the
//! alphabet a new id past the vocabulary: the comment in [`convert`] says why), the split
//! regex of the file's `tokenizer.ggml.pre` where transformers has one (else GPT-2's byte-level
//! pre-tokenizer, with a build warning when the value is one this conversion does not know),
//! BOS/EOS added as `tokenizer.ggml.add_bos_token` / `add_eos_token` say. Where those keys are
//! absent, llama.cpp's Llama 3 pre-tokenizer group adds BOS (and ignores merges) as llama.cpp
//! and the models' own tokenizers do; transformers' loader there adds none.
//! SentencePiece files (`llama`) are converted by [`crate::gguf_spm`], WordPiece ones (`bert`)
//! by [`crate::gguf_wpm`]. Other tokenizer models (`t5`, `rwkv`, ...) are refused by key.

use crate::{Error, Result};
use ir::gguf::{GgufFile, Value};
use serde::Serialize;
use serde_json::{json, Map, Value as Json};
use std::borrow::Cow;
use foldhash::HashMap;
use std::path::Path;

const LLAMA3_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const QWEN2_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Qwen3.5's: Qwen2's with combining marks kept inside words (`qwen35`).
const QWEN35_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Mistral's tekken (Mistral-Nemo, Ministral): case-aware words, each digit alone.
const TEKKEN_SPLIT: &str = r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// K-EXAONE's split (`exaone-moe`): words joined across single spaces (one piece for a run of
/// space-separated words), each digit alone, punctuation with at most one line break. The
/// model's own tokenizer.json regex, as llama.cpp's `LLAMA_VOCAB_PRE_TYPE_EXAONE_MOE` quotes it
/// (`llama-vocab.cpp`; llama.cpp spells the case-insensitive contractions out for its engine).
const EXAONE_MOE_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]?|\s*[\r\n]|\s+(?!\S)|\s+";

/// Jais 2's split (`jais-2`): Llama 3's words, contractions and digit triples, whitespace runs cut
/// in cascading power-of-two lengths. The model's own tokenizer.json regex, as llama.cpp's
/// `LLAMA_VOCAB_PRE_TYPE_JAIS2` quotes it (`llama-vocab.cpp`; llama.cpp spells the
/// case-insensitive contractions out for its engine).
const JAIS2_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s{512}(?!\S)|\s{256}(?!\S)|\s{128}(?!\S)|\s{64}(?!\S)|\s{32}(?!\S)|\s{16}(?!\S)|\s{8}(?!\S)|\s{4}(?!\S)|\s{1,2}(?!\S)|\s{1}";

/// BLOOM's split (`bloom`): runs of anything but whitespace and the punctuation `.,!?` and its
/// CJK and Indic kin, each with one leading space. llama.cpp's `LLAMA_VOCAB_PRE_TYPE_BLOOM`
/// regex (`llama-vocab.cpp`); BLOOM's own tokenizer.json states the same class with the
/// punctuation in a nested set (`[^(\s|[.,!?…。，、।۔،])]`), which excludes the same
/// characters, `(`, `|` and `)` among them.
const BLOOM_SPLIT: &str = " ?[^(\\s|.,!?…。，、।۔،)]+";

/// o200k's split (gpt-oss, GPT-4o): llama.cpp's `gpt-4o` pre-tokenizer (`llama-vocab.cpp`, the
/// original regex in its comment), as the gpt-oss checkpoints' own tokenizer.json states it.
/// transformers' GGUF loader has no gpt-oss, so this one is llama.cpp's, not its.
const O200K_SPLIT: &str = r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// `tokenizer.ggml.pre` values that split as GPT-2's byte-level pre-tokenizer does (the names
/// llama.cpp's `llama-vocab.cpp` maps to `LLAMA_VOCAB_PRE_TYPE_GPT2` without adding a separator,
/// and those of the types it splits with GPT-2's one regex: `mpt`, `olmo` (OLMo, and the GPT-NeoX
/// tokenizer), `jais`, `trillion`, `granite-docling`, `exaone4`; and `default`), or differ from it only in
/// cutting digits one by one (`smollm`, `starcoder`, `refact`: their vocabularies merge no
/// digits, so the tokens are the same). Any other value not in [`SPLITS`] or [`SPLIT_SEQUENCES`] is a split rule this
/// conversion does not know, and the build says so.
const GPT2_LIKE: &[&str] = &[
    "default",
    "gpt-2",
    "phi-2",
    "jina-es",
    "jina-de",
    "gigachat",
    "jina-v2-es",
    "jina-v2-de",
    "a.x-4.0",
    "mellum",
    "modern-bert",
    "mpt",
    "olmo",
    "jais",
    "trillion",
    "granite-docling",
    "smollm",
    "starcoder",
    "refact",
    "exaone4",
];

/// `tokenizer.ggml.pre` values after which llama.cpp adds BOS when the file has no
/// `tokenizer.ggml.add_bos_token` (its Llama 3 pre-tokenizer group, `llama-vocab.cpp`, and
/// Mistral's `tekken`, which it flags the same), as those models' own tokenizers do; llama.cpp
/// also ignores merges for them (a word the vocabulary holds whole is one token, as in Meta's
/// tokenizer.json).
const LLAMA3_GROUP: &[&str] = &["llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano", "tekken"];

/// `tokenizer.ggml.pre` values llama.cpp splits with the Llama 3 regex (its `CHATGLM4` split,
/// the contractions spelled case by case) and without merges where the vocabulary holds the
/// word whole, but adds no BOS (GLM-4-0414, GLM-4.5 to 4.7, GLM-5). transformers' GGUF loader
/// does not know them.
const GLM_GROUP: &[&str] = &["glm4", "glm5"];

/// Other `tokenizer.ggml.pre` values llama.cpp encodes with whole-word merges ignored
/// (`ignore_merges` in `llama-vocab.cpp`): Youtu-LLM's.
const WHOLE_WORDS: &[&str] = &["youtu"];

/// `tokenizer.ggml.pre` values with the split regex transformers' GGUF loader gives them
/// (5.25's `GGUF_PRE_TOKENIZER_SPLITS`, read for facts; and gpt-oss's, which it does not load);
/// the rest of llama.cpp's Llama 3 group (`falcon-h1`, `pixtral`, `midm-2.0`, `lfm2`) and
/// [`GLM_GROUP`] with the Llama 3 regex llama.cpp gives them; ChatGLM's (`chatglm-bpe`,
/// GLM-4-9B-chat) with it too, llama.cpp's CHATGLM4 split, merges kept and no BOS; K-EXAONE's and
/// Jais 2's with their models' own.
const SPLITS: &[(&str, &str)] = &[
    ("llama3", LLAMA3_SPLIT),
    ("llama-v3", LLAMA3_SPLIT),
    ("llama-bpe", LLAMA3_SPLIT),
    ("falcon3", LLAMA3_SPLIT),
    ("falcon-h1", LLAMA3_SPLIT),
    ("pixtral", LLAMA3_SPLIT),
    ("midm-2.0", LLAMA3_SPLIT),
    ("lfm2", LLAMA3_SPLIT),
    ("jina-v5-nano", LLAMA3_SPLIT),
    ("smaug-bpe", LLAMA3_SPLIT),
    ("dbrx", LLAMA3_SPLIT),
    ("glm4", LLAMA3_SPLIT),
    ("glm5", LLAMA3_SPLIT),
    ("chatglm-bpe", LLAMA3_SPLIT),
    ("tekken", TEKKEN_SPLIT),
    ("qwen2", QWEN2_SPLIT),
    ("deepseek-r1-qwen", QWEN2_SPLIT),
    ("kormo", QWEN2_SPLIT),
    ("f2llmv2", QWEN2_SPLIT),
    ("megrez", QWEN2_SPLIT),
    ("qwen35", QWEN35_SPLIT),
    ("gpt-4o", O200K_SPLIT),
    ("llama4", O200K_SPLIT),
    ("kanana2", O200K_SPLIT),
    ("talkie", O200K_SPLIT),
    ("minimax-m2", O200K_SPLIT),
    ("exaone-moe", EXAONE_MOE_SPLIT),
    ("jais-2", JAIS2_SPLIT),
    ("bloom", BLOOM_SPLIT),
];

/// One pass of a pre-tokenizer sequence before its byte-level mapping.
#[derive(Clone, Copy, Debug)]
enum PreStep {
    /// Split off every match of the regex as its own piece (`Isolated`).
    Split(&'static str),
    /// Every digit its own piece (`Digits` with `individual_digits`).
    Digits,
}

/// DeepSeek-V3's and R1's split (`deepseek-v3`): digits in threes, runs of CJK ideographs and
/// kana, then words, punctuation and whitespace. The regexes of llama.cpp's
/// `LLAMA_VOCAB_PRE_TYPE_DEEPSEEK3_LLM` (`llama-vocab.cpp`), which are the three `Split`s of
/// DeepSeek-V3's tokenizer.json, in its order (CR and LF as characters, as there).
const DEEPSEEK_V3_STEPS: &[PreStep] = &[
    PreStep::Split("\\p{N}{1,3}"),
    PreStep::Split("[\u{4E00}-\u{9FA5}\u{3040}-\u{309F}\u{30A0}-\u{30FF}]+"),
    PreStep::Split("[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"),
];

/// DeepSeek LLM's and V2's split (`deepseek-llm`): line breaks, Latin/Greek/Cyrillic/... words,
/// ASCII and full-width punctuation, trailing whitespace, CJK and Hangul runs, then each digit
/// alone. The five regexes of llama.cpp's `LLAMA_VOCAB_PRE_TYPE_DEEPSEEK_LLM`; the models' own
/// tokenizer.json ends with `Digits` (each digit alone) where llama.cpp splits `\p{N}+` (the
/// vocabulary merges no digits, so the tokens are the same).
const DEEPSEEK_LLM_STEPS: &[PreStep] = &[
    PreStep::Split("[\r\n]"),
    PreStep::Split("\\s?[A-Za-z\u{B5}\u{C0}-\u{D6}\u{D8}-\u{F6}\u{F8}-\u{1BA}\u{1BC}-\u{1BF}\u{1C4}-\u{293}\u{295}-\u{2AF}\u{370}-\u{373}\u{376}\u{377}\u{37B}-\u{37D}\u{37F}\u{386}\u{388}-\u{38A}\u{38C}\u{38E}-\u{3A1}\u{3A3}-\u{3F5}\u{3F7}-\u{481}\u{48A}-\u{52F}\u{531}-\u{556}\u{10A0}-\u{10C5}\u{13A0}-\u{13F5}\u{13F8}-\u{13FD}\u{1C90}-\u{1CBA}\u{1CBD}-\u{1CBF}\u{1D00}-\u{1D2B}\u{1D6B}-\u{1D77}\u{1D79}-\u{1D9A}\u{1E00}-\u{1F15}\u{1F18}-\u{1F1D}\u{1F20}-\u{1F45}\u{1F48}-\u{1F4D}\u{1F50}-\u{1F57}\u{1F59}\u{1F5B}\u{1F5D}\u{1F5F}-\u{1F7D}\u{1F80}-\u{1FB4}\u{1FB6}-\u{1FBC}\u{1FBE}\u{1FC2}-\u{1FC4}\u{1FC6}-\u{1FCC}\u{1FD0}-\u{1FD3}\u{1FD6}-\u{1FDB}\u{1FE0}-\u{1FEC}\u{1FF2}-\u{1FF4}\u{1FF6}-\u{1FFC}\u{2102}\u{2107}\u{210A}-\u{2113}\u{2115}\u{2119}-\u{211D}\u{2124}\u{2126}\u{2128}\u{212A}-\u{212D}\u{212F}-\u{2134}\u{2139}\u{213C}-\u{213F}\u{2145}-\u{2149}\u{214E}\u{2183}\u{2184}\u{2C00}-\u{2C7B}\u{2C7E}-\u{2CE4}\u{2CEB}-\u{2CEE}\u{2CF2}\u{2CF3}\u{A640}-\u{A66D}\u{A680}-\u{A69B}\u{A722}-\u{A76F}\u{A771}-\u{A787}\u{A78B}-\u{A78E}\u{AB70}-\u{ABBF}\u{FB00}-\u{FB06}\u{FB13}-\u{FB17}\u{FF21}-\u{FF3A}\u{FF41}-\u{FF5A}\u{10400}-\u{1044F}\u{104B0}-\u{104D3}\u{104D8}-\u{104FB}\u{10C80}-\u{10CB2}\u{10CC0}-\u{10CF2}\u{118A0}-\u{118DF}\u{1E900}-\u{1E943}]+"),
    PreStep::Split("\\s?[!-/:-~\u{FF01}-\u{FF0F}\u{FF1A}-\u{FF5E}\u{2018}-\u{201F}\u{3000}-\u{3002}]+"),
    PreStep::Split("\\s+$"),
    PreStep::Split("[\u{4E00}-\u{9FA5}\u{800}-\u{4E00}\u{AC00}-\u{D7FF}]+"),
    PreStep::Digits,
];

/// DeepSeek Coder's split (`deepseek-coder`): line breaks, letters with one leading space,
/// punctuation likewise, runs of CJK and Hangul (and the blocks between), each digit alone. The
/// five regexes of llama.cpp's `LLAMA_VOCAB_PRE_TYPE_DEEPSEEK_CODER` (`llama-vocab.cpp`), the
/// last (`\p{N}`) as `Digits` alone, the same pieces.
const DEEPSEEK_CODER_STEPS: &[PreStep] = &[
    PreStep::Split("[\r\n]"),
    PreStep::Split("\\s?\\p{L}+"),
    PreStep::Split("\\s?\\p{P}+"),
    PreStep::Split("[\u{4E00}-\u{9FA5}\u{0800}-\u{4E00}\u{AC00}-\u{D7FF}]+"),
    PreStep::Digits,
];

/// Youtu-LLM's split (`youtu`): runs of Hangul, CJK punctuation, Bopomofo and CJK ideographs
/// and kana first, then o200k's case-aware words with English contractions, each digit alone.
/// The two regexes of llama.cpp's `LLAMA_VOCAB_PRE_TYPE_YOUTU` (`llama-vocab.cpp`), in its order.
const YOUTU_STEPS: &[PreStep] = &[
    PreStep::Split("[\u{AC00}-\u{D7A3}\u{3131}-\u{318E}]+|[\u{FF01}\u{2026}\u{201C}\u{201D}\u{2018}\u{2019}\u{2014}\u{FF1A}\u{FF1B}\u{FF0C}\u{3001}-\u{303F}\u{FE30}-\u{FE4F}]+|[\u{3105}-\u{312F}]+|[\u{4E00}-\u{9FA5}\u{3040}-\u{309F}\u{30A0}-\u{30FF}]+"),
    PreStep::Split("[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"),
];

/// GPT-2's words, numbers, punctuation runs and trailing whitespace, as llama.cpp's passes
/// write it (its custom GPT-2 splitter runs the final `\s+` alternative too, which gives the
/// same pieces here: the text it would match is left as its own piece by `Isolated`): one pass
/// of Falcon's and EXAONE's splits.
const GPT2_WORDS: &str = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";

/// Falcon's split (`falcon`): runs of punctuation and of the ASCII symbols $ + < = > ^ ~ | and
/// the backquote, then
/// GPT-2's words without its case-insensitive contractions, then runs of three digits. The three
/// regexes of llama.cpp's `LLAMA_VOCAB_PRE_TYPE_FALCON` (`llama-vocab.cpp`), in its order;
/// Falcon's own tokenizer.json is `Punctuation`, GPT-2's byte-level split, `Digits` and the
/// three-digit `Split`, which llama.cpp's passes stand for.
const FALCON_STEPS: &[PreStep] = &[
    PreStep::Split("[\\p{P}\\$\\+<=>\\^~\\|`]+"),
    PreStep::Split(GPT2_WORDS),
    PreStep::Split("[0-9][0-9][0-9]"),
];

/// EXAONE 3 / 3.5's split (`exaone`): each digit alone, then GPT-2's words (without its final
/// whitespace alternative). The two regexes of llama.cpp's `LLAMA_VOCAB_PRE_TYPE_EXAONE`
/// (`llama-vocab.cpp`), in its order.
const EXAONE_STEPS: &[PreStep] = &[PreStep::Split("\\p{N}"), PreStep::Split(GPT2_WORDS)];

/// `tokenizer.ggml.pre` values whose models split in several passes ([`PreStep`]s, in order),
/// as their own tokenizer.json files do; transformers' GGUF loader knows none of them.
const SPLIT_SEQUENCES: &[(&str, &[PreStep])] =
    &[("deepseek-v3", DEEPSEEK_V3_STEPS), ("deepseek-llm", DEEPSEEK_LLM_STEPS), ("deepseek-coder", DEEPSEEK_CODER_STEPS), ("youtu", YOUTU_STEPS), ("falcon", FALCON_STEPS), ("exaone", EXAONE_STEPS)];

/// GPT-2's byte-to-character map: printable Latin-1 bytes stand for themselves, the others for
/// 256 + their rank.
fn byte_chars() -> [char; 256] {
    let mut out = ['\0'; 256];
    let mut extra = 0u32;
    for b in 0..256u32 {
        let printable = (33..=126).contains(&b) || (161..=172).contains(&b) || (174..=255).contains(&b);
        out[b as usize] = if printable {
            char::from_u32(b).expect("Latin-1")
        } else {
            extra += 1;
            char::from_u32(255 + extra).expect("a valid code point")
        };
    }
    out
}

/// A vocabulary's positions are held as `u32`.
pub(crate) fn fits_u32(n: usize, path: &Path) -> Result<()> {
    match u32::try_from(n) {
        Ok(_) => Ok(()),
        Err(_) => Err(Error::Request(format!("{}: `tokenizer.ggml.tokens` lists {n} tokens, more than a tokenizer.json is written for (2^32)", path.display()))),
    }
}

/// `tokenizer.ggml.token_type` for `n` tokens (llama.cpp's types: 1 normal, 2 unknown, 3
/// control, 4 user-defined, 5 unused, 6 byte); every token normal when the key is absent.
pub(crate) fn token_types(file: &GgufFile, n: usize, path: &Path) -> Result<Vec<i64>> {
    match file.get("tokenizer.ggml.token_type").and_then(Value::as_array) {
        Some(a) if a.len() == n => Ok(a.iter().map(|v| v.as_i64().unwrap_or(1)).collect()),
        Some(a) => Err(Error::Request(format!("{}: `tokenizer.ggml.token_type` has {} entries for {n} tokens", path.display(), a.len()))),
        None => Ok(vec![1; n]),
    }
}

pub(crate) fn strings<'a>(file: &'a GgufFile, key: &str, path: &Path) -> Result<Vec<&'a str>> {
    let err = |reason: String| Error::Request(format!("{}: {reason}", path.display()));
    let a = file.get(key).and_then(Value::as_array).ok_or_else(|| err(format!("metadata key `{key}` is missing or not an array")))?;
    a.iter().map(|v| v.as_str().ok_or_else(|| err(format!("`{key}` holds {v:?}, not a string")))).collect()
}

/// A GGUF file's tokenizer, converted: `tokenizer.json`, borrowing the file's strings, to be
/// written with [`Converted::write_tokenizer_json`], and `tokenizer_config.json`.
pub struct Converted<'a> {
    pub(crate) tokenizer: TokenizerJson<'a>,
    pub config: Json,
    /// What the conversion could not take from the file as the model's own tokenizer has it
    /// (an unknown `tokenizer.ggml.pre`): build warnings, so `--strict` refuses them.
    pub warnings: Vec<String>,
}

impl Converted<'_> {
    /// Streams `tokenizer.json` to `out` (pretty-printed, as `tokenizers` saves one): it is
    /// never held whole (34 MB for Gemma 3's 262,144 tokens and 515,000 merges).
    pub fn write_tokenizer_json(&self, out: impl std::io::Write) -> std::io::Result<()> {
        use std::io::Write;
        let mut out = std::io::BufWriter::with_capacity(1 << 16, out);
        serde_json::to_writer_pretty(&mut out, &self.tokenizer).map_err(std::io::Error::from)?;
        out.write_all(b"\n")?;
        out.flush()
    }

    /// `tokenizer.json`'s bytes (tests).
    #[cfg(test)]
    pub(crate) fn tokenizer_json(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.write_tokenizer_json(&mut out).expect("a tokenizer.json serializes");
        out
    }
}

/// A `tokenizer.json` whose vocabulary and merges borrow the file's strings and are serialized
/// as they are written, in the order `tokenizers` writes its fields. Held as a serde_json tree,
/// the 262,144-token vocabulary of a Gemma 3 file and its 515,000 rebuilt merges took 400 MB of
/// heap (the weights of its 253 MB file stream through 60 MB).
#[derive(Serialize)]
pub(crate) struct TokenizerJson<'a> {
    pub version: &'static str,
    pub truncation: Option<()>,
    pub padding: Option<()>,
    pub added_tokens: Vec<Json>,
    pub normalizer: Json,
    pub pre_tokenizer: Json,
    pub post_processor: Json,
    pub decoder: Json,
    pub model: TokenizerModel<'a>,
}

/// The `model` of a `tokenizer.json`.
pub(crate) enum TokenizerModel<'a> {
    Bpe(BpeModel<'a>),
    WordPiece(crate::gguf_wpm::WordPieceModel<'a>),
}

impl Serialize for TokenizerModel<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            TokenizerModel::Bpe(m) => m.serialize(s),
            TokenizerModel::WordPiece(m) => m.serialize(s),
        }
    }
}

/// The `model` of a `tokenizer.json`: a BPE.
pub(crate) struct BpeModel<'a> {
    pub kind: &'static str,
    pub unk_token: Json,
    pub continuing_subword_prefix: Option<&'static str>,
    pub end_of_word_suffix: Option<&'static str>,
    pub fuse_unk: bool,
    pub byte_fallback: bool,
    pub ignore_merges: bool,
    /// The vocabulary as spelled, by position (repeats included).
    pub tokens: Vec<Cow<'a, str>>,
    /// Each distinct token by its first position, with its last id (a Python dict built in
    /// order).
    pub vocab: Vec<(u32, u32)>,
    pub merges: Merges<'a>,
}

/// A BPE's merges: the file's own, or rebuilt ones as pairs of token positions.
pub(crate) enum Merges<'a> {
    Text(Vec<(&'a str, &'a str)>),
    Ids(Vec<(u32, u32)>),
}

impl Serialize for BpeModel<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let token = |i: u32| self.tokens[i as usize].as_ref();
        let mut m = s.serialize_struct("BpeModel", 10)?;
        m.serialize_field("type", self.kind)?;
        m.serialize_field("dropout", &None::<()>)?;
        m.serialize_field("unk_token", &self.unk_token)?;
        m.serialize_field("continuing_subword_prefix", &self.continuing_subword_prefix)?;
        m.serialize_field("end_of_word_suffix", &self.end_of_word_suffix)?;
        m.serialize_field("fuse_unk", &self.fuse_unk)?;
        m.serialize_field("byte_fallback", &self.byte_fallback)?;
        m.serialize_field("ignore_merges", &self.ignore_merges)?;
        m.serialize_field("vocab", &AsMap(&self.vocab, &token))?;
        match &self.merges {
            Merges::Text(pairs) => m.serialize_field("merges", pairs)?,
            Merges::Ids(pairs) => m.serialize_field("merges", &AsPairs(pairs, &token))?,
        }
        m.end()
    }
}

/// `(position, id)` pairs serialized as a map from the token at the position to the id.
struct AsMap<'s, F>(&'s [(u32, u32)], &'s F);

impl<'s, 't, F: Fn(u32) -> &'t str> Serialize for AsMap<'s, F> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter().map(|&(at, id)| ((self.1)(at), id)))
    }
}

/// `(position, position)` pairs serialized as pairs of the tokens at them.
struct AsPairs<'s, F>(&'s [(u32, u32)], &'s F);

impl<'s, 't, F: Fn(u32) -> &'t str> Serialize for AsPairs<'s, F> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(|&(l, r)| ((self.1)(l), (self.1)(r))))
    }
}

/// Each distinct string of `tokens` once, by its first position, with its last position
/// (Python dict semantics), and a lookup from string to that last position.
pub(crate) fn first_places_last_ids<'a>(tokens: impl IntoIterator<Item = &'a str>) -> (Vec<u32>, HashMap<&'a str, u32>) {
    let mut ids: HashMap<&str, u32> = HashMap::default();
    let mut order = Vec::new();
    for (i, t) in tokens.into_iter().enumerate() {
        if ids.insert(t, i as u32).is_none() {
            order.push(i as u32);
        }
    }
    (order, ids)
}

/// tokenizer.json and tokenizer_config.json of the GGUF file at `path`.
pub fn convert<'a>(file: &'a GgufFile, path: &Path) -> Result<Converted<'a>> {
    let err = |reason: String| Error::Request(format!("{}: {reason}", path.display()));
    let model = file.get("tokenizer.ggml.model").and_then(Value::as_str).ok_or_else(|| err("has no `tokenizer.ggml.model` string, so it carries no tokenizer".into()))?;
    if model == "llama" {
        return crate::gguf_spm::convert(file, path);
    }
    if model == "bert" {
        return crate::gguf_wpm::convert(file, path);
    }
    if model != "gpt2" {
        return Err(err(format!("`tokenizer.ggml.model` is `{model}`; byte-level BPE (`gpt2`), SentencePiece (`llama`) and WordPiece (`bert`) tokenizers are converted from GGUF metadata")));
    }
    let tokens = strings(file, "tokenizer.ggml.tokens", path)?;
    let merges = strings(file, "tokenizer.ggml.merges", path)?;
    fits_u32(tokens.len(), path)?;
    let types = token_types(file, tokens.len(), path)?;
    let chars = byte_chars();
    let alphabet: std::collections::HashSet<char> = chars.iter().copied().collect();
    let in_alphabet = |t: &str| t.chars().all(|c| alphabet.contains(&c));
    let respell = |t: &str| -> String { t.bytes().map(|b| chars[b as usize]).collect() };
    let mut merge_pairs = Vec::with_capacity(merges.len());
    for m in &merges {
        match m.split_once(' ') {
            Some((l, r)) if !r.contains(' ') => merge_pairs.push((l, r)),
            _ => return Err(err(format!("merge `{m}` of `tokenizer.ggml.merges` is not two tokens separated by one space"))),
        }
    }
    // A token outside the byte alphabet is respelled from its bytes, but for a control or
    // user-defined one (an added token) that no merge builds or uses: it keeps the file's
    // spelling, so that matched in text it is the file's id. transformers respells those too
    // and then adds each as a new token past the vocabulary (DeepSeek-R1-Distill-Qwen's
    // `<｜begin▁of▁sentence｜>` became id 152065 of a 152064-row embedding); llama.cpp and the
    // model's own tokenizer give the file's id. One a merge needs in its respelled form (a
    // run of spaces llama.cpp stores decoded, as user-defined) stays respelled, as transformers
    // has it: BPE reaches it, and the merges would not load without it.
    let mut raw_candidates: HashMap<String, usize> =
        tokens.iter().enumerate().filter(|(i, t)| matches!(types[*i], 3 | 4) && !in_alphabet(t)).map(|(i, t)| (respell(t), i)).collect();
    if !raw_candidates.is_empty() {
        for (l, r) in &merge_pairs {
            raw_candidates.remove(*l);
            raw_candidates.remove(*r);
            if !raw_candidates.is_empty() {
                raw_candidates.remove(&format!("{l}{r}"));
            }
        }
    }
    let keeps_spelling: std::collections::HashSet<usize> = raw_candidates.into_values().collect();
    let spelled: Vec<Cow<str>> = tokens
        .iter()
        .enumerate()
        .map(|(i, t)| if in_alphabet(t) || keeps_spelling.contains(&i) { Cow::Borrowed(*t) } else { Cow::Owned(respell(t)) })
        .collect();
    let vocab: Vec<(u32, u32)> = {
        let (order, ids) = first_places_last_ids(spelled.iter().map(|s| s.as_ref()));
        order.iter().map(|&at| (at, ids[spelled[at as usize].as_ref()])).collect()
    };
    let added_token = |id: usize, content: &str, special: bool| {
        json!({"id": id, "content": content, "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": special})
    };
    let mut added = Vec::new();
    for (i, t) in tokens.iter().enumerate() {
        // Added where the vocabulary holds it as the file spells it (a respelled one is left
        // to BPE, as transformers leaves it).
        let as_spelled = in_alphabet(t) || keeps_spelling.contains(&i);
        match types[i] {
            // CONTROL: special.
            3 if as_spelled => added.push(added_token(i, t, true)),
            // USER_DEFINED: matched whole, not special.
            4 if as_spelled => added.push(added_token(i, t, false)),
            _ => {}
        }
    }
    let id_key = |k: &str| file.get(k).and_then(Value::as_u64).map(|v| v as usize).filter(|&v| v < tokens.len());
    let token_of = |k: &str| id_key(k).map(|i| tokens[i].to_string());
    let pre = file.get("tokenizer.ggml.pre").and_then(Value::as_str);
    let llama3_group = pre.is_some_and(|p| LLAMA3_GROUP.contains(&p));
    let flag = |k: &str, default: bool| file.get(k).and_then(Value::as_bool).unwrap_or(default);
    let (add_bos, add_eos) = (flag("tokenizer.ggml.add_bos_token", llama3_group), flag("tokenizer.ggml.add_eos_token", false));
    let mut warnings = Vec::new();
    let pre_tokenizer = split_pre_tokenizer(pre).unwrap_or_else(|| {
        if let Some(p) = pre.filter(|p| !GPT2_LIKE.contains(p)) {
            warnings.push(format!(
                "{}: `tokenizer.ggml.pre` is `{p}`, a split rule this tool does not know; text is split as GPT-2 splits it (as transformers' GGUF loader does), which can give other tokens than the model's own tokenizer (numbers, case, punctuation, newlines). Known: {}",
                path.display(),
                SPLITS.iter().map(|(n, _)| *n).chain(SPLIT_SEQUENCES.iter().map(|(n, _)| *n)).chain(GPT2_LIKE.iter().copied()).collect::<Vec<_>>().join(", ")
            ));
        }
        json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true})
    });
    let post = post_processor(add_bos.then(|| (token_of("tokenizer.ggml.bos_token_id"), id_key("tokenizer.ggml.bos_token_id"))), add_eos.then(|| (token_of("tokenizer.ggml.eos_token_id"), id_key("tokenizer.ggml.eos_token_id"))), &err)?;
    let tokenizer = TokenizerJson {
        version: "1.0",
        truncation: None,
        padding: None,
        added_tokens: added,
        normalizer: Json::Null,
        pre_tokenizer,
        post_processor: post,
        decoder: json!({"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true}),
        model: TokenizerModel::Bpe(BpeModel {
            kind: "BPE",
            unk_token: Json::Null,
            continuing_subword_prefix: Some(""),
            end_of_word_suffix: Some(""),
            fuse_unk: false,
            byte_fallback: false,
            ignore_merges: llama3_group || pre.is_some_and(|p| GLM_GROUP.contains(&p) || WHOLE_WORDS.contains(&p)),
            tokens: spelled,
            vocab,
            merges: Merges::Text(merge_pairs),
        }),
    };
    let mut config = Map::new();
    config.insert("tokenizer_class".into(), json!("GPT2Tokenizer"));
    config.insert("add_bos_token".into(), json!(add_bos));
    config.insert("add_eos_token".into(), json!(add_eos));
    for (name, key) in [("bos_token", "tokenizer.ggml.bos_token_id"), ("eos_token", "tokenizer.ggml.eos_token_id"), ("unk_token", "tokenizer.ggml.unknown_token_id"), ("pad_token", "tokenizer.ggml.padding_token_id")] {
        config.insert(name.into(), token_of(key).map_or(Json::Null, Json::String));
    }
    if let Some(t) = file.get("tokenizer.chat_template").and_then(Value::as_str) {
        config.insert("chat_template".into(), json!(t));
    }
    Ok(Converted { tokenizer, config: Json::Object(config), warnings })
}
/// The pre-tokenizer for a `tokenizer.ggml.pre` this conversion knows: the split regex
/// transformers sets for it ([`SPLITS`]) or the model's own passes ([`SPLIT_SEQUENCES`]), then
/// byte-level, whatever the tokenizer model; `None` for any other value.
pub(crate) fn split_pre_tokenizer(pre: Option<&str>) -> Option<Json> {
    let steps: Vec<PreStep> = match SPLITS.iter().find(|(p, _)| Some(*p) == pre) {
        Some((_, regex)) => vec![PreStep::Split(regex)],
        None => SPLIT_SEQUENCES.iter().find(|(p, _)| Some(*p) == pre)?.1.to_vec(),
    };
    let mut passes: Vec<Json> = steps
        .iter()
        .map(|s| match s {
            PreStep::Split(regex) => json!({"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": false}),
            PreStep::Digits => json!({"type": "Digits", "individual_digits": true}),
        })
        .collect();
    passes.push(json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}));
    Some(json!({"type": "Sequence", "pretokenizers": passes}))
}

/// The post-processor: the sequence, with BOS before and EOS after when the file asks.
pub(crate) fn post_processor(bos: Option<(Option<String>, Option<usize>)>, eos: Option<(Option<String>, Option<usize>)>, err: &dyn Fn(String) -> Error) -> Result<Json> {
    let mut single = Vec::new();
    let mut pair_a = Vec::new();
    let mut special = Map::new();
    let mut ends = Vec::new();
    for (which, v) in [("BOS", bos), ("EOS", eos)] {
        let Some(v) = v else {
            ends.push(None);
            continue;
        };
        let (Some(token), Some(id)) = v else {
            return Err(err(format!("asks to add {which} (`tokenizer.ggml.add_{}_token`) but names no {which} token id within the vocabulary", which.to_lowercase())));
        };
        special.insert(token.clone(), json!({"id": token, "ids": [id], "tokens": [token]}));
        ends.push(Some(token));
    }
    let spec = |t: &str, type_id: u32| json!({"SpecialToken": {"id": t, "type_id": type_id}});
    if let Some(b) = &ends[0] {
        single.push(spec(b, 0));
        pair_a.push(spec(b, 0));
    }
    single.push(json!({"Sequence": {"id": "A", "type_id": 0}}));
    pair_a.push(json!({"Sequence": {"id": "A", "type_id": 0}}));
    let mut pair_b = Vec::new();
    if let Some(e) = &ends[1] {
        single.push(spec(e, 0));
        pair_a.push(spec(e, 0));
    }
    if let Some(b) = &ends[0] {
        pair_b.push(spec(b, 1));
    }
    pair_b.push(json!({"Sequence": {"id": "B", "type_id": 1}}));
    if let Some(e) = &ends[1] {
        pair_b.push(spec(e, 1));
    }
    pair_a.extend(pair_b);
    Ok(json!({"type": "TemplateProcessing", "single": single, "pair": pair_a, "special_tokens": special}))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A GGUF file of metadata only: `tokenizer.ggml.model` `gpt2`, the tokens with their
    /// types, the merges.
    fn gpt2_file(tokens: &[&str], types: &[i32], merges: &[&str]) -> (tempfile::TempDir, GgufFile, std::path::PathBuf) {
        gpt2_file_with(tokens, types, merges, None, &[], &[])
    }

    /// [`gpt2_file`] with `tokenizer.ggml.pre`, u32 keys (token ids) and bool keys (flags).
    fn gpt2_file_with(tokens: &[&str], types: &[i32], merges: &[&str], pre: Option<&str>, ids: &[(&str, u32)], flags: &[(&str, bool)]) -> (tempfile::TempDir, GgufFile, std::path::PathBuf) {
        let string = |out: &mut Vec<u8>, s: &str| {
            out.extend((s.len() as u64).to_le_bytes());
            out.extend(s.as_bytes());
        };
        let mut b = b"GGUF".to_vec();
        b.extend(3u32.to_le_bytes());
        b.extend(0u64.to_le_bytes());
        b.extend((4 + pre.is_some() as u64 + ids.len() as u64 + flags.len() as u64).to_le_bytes());
        if let Some(pre) = pre {
            string(&mut b, "tokenizer.ggml.pre");
            b.extend(8u32.to_le_bytes());
            string(&mut b, pre);
        }
        for (key, v) in ids {
            string(&mut b, key);
            b.extend(4u32.to_le_bytes());
            b.extend(v.to_le_bytes());
        }
        for (key, v) in flags {
            string(&mut b, key);
            b.extend(7u32.to_le_bytes());
            b.push(*v as u8);
        }
        string(&mut b, "tokenizer.ggml.model");
        b.extend(8u32.to_le_bytes());
        string(&mut b, "gpt2");
        for (key, items) in [("tokenizer.ggml.tokens", tokens), ("tokenizer.ggml.merges", merges)] {
            string(&mut b, key);
            b.extend(9u32.to_le_bytes());
            b.extend(8u32.to_le_bytes());
            b.extend((items.len() as u64).to_le_bytes());
            items.iter().for_each(|t| string(&mut b, t));
        }
        string(&mut b, "tokenizer.ggml.token_type");
        b.extend(9u32.to_le_bytes());
        b.extend(5u32.to_le_bytes());
        b.extend((types.len() as u64).to_le_bytes());
        types.iter().for_each(|t| b.extend(t.to_le_bytes()));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.gguf");
        std::fs::write(&path, b).unwrap();
        let file = GgufFile::open(&path).unwrap();
        (dir, file, path)
    }

    /// DeepSeek's splits are their models' passes, in order.
    #[test]
    fn deepseek_pre_tokenizers_are_their_models_passes() {
        let passes = |pre: &str| -> Vec<String> {
            let p = split_pre_tokenizer(Some(pre)).unwrap();
            p["pretokenizers"].as_array().unwrap().iter().map(|s| s["type"].as_str().unwrap().to_string()).collect()
        };
        assert_eq!(passes("deepseek-v3"), ["Split", "Split", "Split", "ByteLevel"]);
        assert_eq!(passes("deepseek-llm"), ["Split", "Split", "Split", "Split", "Split", "Digits", "ByteLevel"]);
        assert_eq!(passes("youtu"), ["Split", "Split", "ByteLevel"]);
        let v3 = split_pre_tokenizer(Some("deepseek-v3")).unwrap();
        assert_eq!(v3["pretokenizers"][0]["pattern"]["Regex"], json!("\\p{N}{1,3}"));
        assert!(v3["pretokenizers"][2]["pattern"]["Regex"].as_str().unwrap().contains("[^\r\n\\p{L}\\p{P}\\p{S}]?"));
        assert_eq!(passes("deepseek-coder"), ["Split", "Split", "Split", "Split", "Digits", "ByteLevel"]);
        assert!(split_pre_tokenizer(Some("viking")).is_none(), "a split rule not converted is none");
        // ChatGLM's (GLM-4-9B-chat): Llama 3's regex, llama.cpp's CHATGLM4 split.
        let glm = split_pre_tokenizer(Some("chatglm-bpe")).unwrap();
        assert_eq!(glm["pretokenizers"][0]["pattern"]["Regex"], json!(LLAMA3_SPLIT));
    }

    /// Added tokens spelled outside the byte alphabet: kept as the file spells them (matched in
    /// text as their file id) unless a merge needs their respelled form (a run of spaces stored
    /// decoded as user-defined), which stays respelled in the vocabulary, as before.
    #[test]
    fn added_tokens_outside_the_alphabet_keep_their_spelling_unless_a_merge_needs_it() {
        let tokens = ["a", "b", "Ġ", "ĠĠ", "ab", "<｜User｜>", "  ", "<｜bos｜>"];
        let types = [1, 1, 1, 1, 1, 4, 4, 3];
        let (_dir, file, path) = gpt2_file(&tokens, &types, &["a b", "Ġ Ġ"]);
        let json: Json = serde_json::from_slice(&convert(&file, &path).unwrap().tokenizer_json()).unwrap();
        let vocab = json["model"]["vocab"].as_object().unwrap();
        assert_eq!((vocab.get("<｜User｜>"), vocab.get("<｜bos｜>")), (Some(&json!(5)), Some(&json!(7))), "kept as spelled");
        // "  " respelled is "ĠĠ", which the merge "Ġ Ġ" builds: respelled (the last of the
        // two ids, Python dict semantics) and not an added token.
        assert_eq!((vocab.get("ĠĠ"), vocab.get("  ")), (Some(&json!(6)), None));
        let added: Vec<(i64, &str, bool)> = json["added_tokens"].as_array().unwrap().iter().map(|t| (t["id"].as_i64().unwrap(), t["content"].as_str().unwrap(), t["special"].as_bool().unwrap())).collect();
        assert_eq!(added, [(5, "<｜User｜>", false), (7, "<｜bos｜>", true)]);
    }

    /// The Llama 3 group of `tokenizer.ggml.pre` adds BOS when the file has no
    /// `add_bos_token` (llama.cpp's default for it) and ignores merges; the key wins where it
    /// is given; other splits keep BOS off. An unknown split is a warning naming it.
    #[test]
    fn the_llama3_group_adds_bos_by_default_and_unknown_splits_are_warned_about() {
        let tokens = ["a", "b", "ab", "<|begin_of_text|>"];
        let types = [1, 1, 1, 3];
        let bos = [("tokenizer.ggml.bos_token_id", 3u32)];
        let post = |pre: Option<&str>, flags: &[(&str, bool)]| {
            let (_dir, file, path) = gpt2_file_with(&tokens, &types, &["a b"], pre, &bos, flags);
            let c = convert(&file, &path).unwrap();
            let json: Json = serde_json::from_slice(&c.tokenizer_json()).unwrap();
            let single = json["post_processor"]["single"].as_array().map(|a| a.len()).unwrap_or(0);
            (c.config["add_bos_token"].as_bool().unwrap(), single, json["model"]["ignore_merges"].as_bool().unwrap(), c.warnings)
        };
        let (add, single, ignore, warnings) = post(Some("llama-bpe"), &[]);
        assert_eq!((add, single, ignore), (true, 2, true), "BOS then the sequence");
        assert!(warnings.is_empty(), "{warnings:?}");
        assert!(!post(Some("llama-bpe"), &[("tokenizer.ggml.add_bos_token", false)]).0);
        let (add, _, ignore, _) = post(Some("qwen2"), &[]);
        assert!(!add && !ignore);
        assert!(post(Some("qwen2"), &[("tokenizer.ggml.add_bos_token", true)]).0);
        assert!(post(Some("smollm"), &[]).3.is_empty() && post(None, &[]).3.is_empty());
        // llama.cpp splits these with GPT-2's regex too: no warning.
        assert!(post(Some("olmo"), &[]).3.is_empty() && post(Some("mpt"), &[]).3.is_empty());
        let warnings = post(Some("viking"), &[]).3;
        assert!(warnings.len() == 1 && warnings[0].contains("`tokenizer.ggml.pre` is `viking`") && warnings[0].contains("llama-bpe"), "{warnings:?}");
        // ChatGLM's split is known: no warning, no BOS, merges kept (llama.cpp's `chatglm-bpe`).
        let (add, _, ignore, warnings) = post(Some("chatglm-bpe"), &[]);
        assert!(!add && !ignore && warnings.is_empty(), "{warnings:?}");
        // No BOS is only the default: the file's key decides, as llama.cpp reads it.
        for pre in ["chatglm-bpe", "glm4"] {
            assert!(post(Some(pre), &[("tokenizer.ggml.add_bos_token", true)]).0, "{pre}");
        }
        // GLM's split: Llama 3's regex and no merges for whole words, but no BOS by default.
        let (add, _, ignore, warnings) = post(Some("glm4"), &[]);
        assert!(!add && ignore && warnings.is_empty(), "{warnings:?}");
        // Youtu's: its own two passes and no merges for whole words, no BOS by default.
        let (add, _, ignore, warnings) = post(Some("youtu"), &[]);
        assert!(!add && ignore && warnings.is_empty(), "{warnings:?}");
        // tekken and jina-v5-nano: BOS by default and merges ignored, as llama.cpp flags them.
        for pre in ["tekken", "jina-v5-nano"] {
            let (add, _, ignore, warnings) = post(Some(pre), &[]);
            assert!(add && ignore && warnings.is_empty(), "{pre}: {warnings:?}");
        }
    }

    #[test]
    fn the_byte_alphabet_is_gpt2s() {
        let c = byte_chars();
        assert_eq!((c[b'a' as usize], c[b' ' as usize], c[b'\n' as usize], c[0]), ('a', 'Ġ', 'Ċ', 'Ā'));
        assert_eq!(c.iter().collect::<std::collections::HashSet<_>>().len(), 256);
    }
}
