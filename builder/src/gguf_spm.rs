//! The SentencePiece tokenizer of a GGUF file (`tokenizer.ggml.model = "llama"`: tokens,
//! scores and token types, no merges; Llama 2, Mistral, TinyLlama, Gemma, Phi-3 files) as the
//! `tokenizer.json` and `tokenizer_config.json` transformers' own GGUF loader builds (5.24,
//! `integrations/gguf/gguf_tokenizer_mapping.py`: `sentencepiece_tokenizer`, `gemma_tokenizer`,
//! `phi3_tokenizer`, `add_gguf_special_tokens`, `set_split_regex`; `LlamaTokenizer`,
//! `GemmaTokenizer` and `generate_merges`, read for facts).
//!
//! transformers picks the builder by `general.architecture`, not by the tokenizer model
//! (`GGUF_SENTENCEPIECE_BUILDERS`):
//! - **Gemma** (`gemma`, `gemma2`, `gemma3`): a token made only of whitespace that holds a space
//!   (llama.cpp writes Gemma's multi-space tokens with real spaces) is respelled with one `▁` per
//!   character; merges are rebuilt from the vocabulary ranked by token position (Gemma's scores
//!   do not follow its merge order); spaces become `▁` by a normalizer, no prefix space; the BPE
//!   model's unknown token is `<unk>`.
//! - **Phi-3** (`phi3`: Phi-3, Phi-3.5; Phi-4-mini files are byte-level `gpt2`, not this):
//!   Llama's vocabulary, merges and decoder, but the prefix space comes from a normalizer,
//!   `Prepend("▁")` then `Replace(" ", "▁")`, and there is no pre-tokenizer (`phi3_tokenizer`,
//!   the shape of Phi-3's own tokenizer.json). The normalizer runs on each piece of text between
//!   added tokens, so every such piece gets its `▁`, and text starting with a space gets one more
//!   (`" hi"` is `▁▁hi`, `▁hi` under Llama's `Metaspace`).
//! - **Llama** (every other architecture): merges rebuilt from the vocabulary ranked by score;
//!   a `Metaspace` pre-tokenizer that prefixes `▁` to the start of the text only ("first").
//!
//! All: byte fallback (`<0x00>`..`<0xFF>` spell what the vocabulary lacks), the control tokens
//! (type 3), the named bos/eos/unk/pad tokens and the defaults of the class the builder
//! constructs (`<unk>` `<s>` `</s>`; Gemma's `<unk>` `<bos>` `<eos>` `<pad>` `<mask>`) where the
//! vocabulary has them as special added tokens, user-defined ones (type 4) still spelled as in
//! the vocabulary as plain added tokens (all with transformers' default flags: not normalized,
//! no strip; a GGUF file keeps no `rstrip`, so Phi-3's chat markers lose theirs), BOS added unless `tokenizer.ggml.add_bos_token` is false (llama.cpp's default for
//! SentencePiece), EOS when `add_eos_token` is true. `tokenizer.ggml.add_space_prefix` is not
//! read, as transformers does not read it.

use crate::gguf_tokenizer::{first_places_last_ids, fits_u32, post_processor, split_pre_tokenizer, strings, token_types, BpeModel, Converted, Merges, TokenizerJson, TokenizerModel};
use crate::{Error, Result};
use ir::gguf::{GgufFile, Value};
use serde_json::{json, Map, Value as Json};
use foldhash::HashMap;
use std::borrow::Cow;
use std::path::Path;

/// transformers' SentencePiece builder for a file, chosen by `general.architecture` (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Builder {
    Llama,
    Gemma,
    Phi3,
}

impl Builder {
    fn of(architecture: &str) -> Builder {
        match architecture {
            "gemma" | "gemma2" | "gemma3" => Builder::Gemma,
            "phi3" => Builder::Phi3,
            _ => Builder::Llama,
        }
    }

    /// The special tokens the tokenizer class the builder constructs (`LlamaTokenizer` for Llama
    /// and Phi-3, `GemmaTokenizer`) registers by default, before the file's own added tokens:
    /// transformers' tokenizer skips them when decoding even where the file makes one
    /// user-defined (Phi-3's `</s>`): the `tokenizers` library keeps a token in its special set
    /// once added as special, though re-adding it as plain rewrites the flag `save_pretrained`
    /// writes. Encoding is the same either way (added tokens are matched whole).
    fn class_defaults(self) -> &'static [&'static str] {
        match self {
            Builder::Gemma => &["<unk>", "<bos>", "<eos>", "<pad>", "<mask>"],
            Builder::Llama | Builder::Phi3 => &["<unk>", "<s>", "</s>"],
        }
    }

    /// (normalizer, pre-tokenizer, decoder, BPE unknown token).
    fn pipeline(self) -> (Json, Json, Json, Json) {
        let replace_space = json!({"type": "Replace", "pattern": {"String": "\u{2581}"}, "content": " "});
        let spaces_to_metaspace = json!({"type": "Replace", "pattern": {"String": " "}, "content": "\u{2581}"});
        // LlamaTokenizer's decoder; phi3_tokenizer keeps it.
        let llama_decoder = json!({"type": "Sequence", "decoders": [replace_space.clone(), {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]});
        match self {
            Builder::Gemma => (
                spaces_to_metaspace,
                json!({"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious", "invert": false}),
                json!({"type": "Sequence", "decoders": [replace_space, {"type": "ByteFallback"}, {"type": "Fuse"}]}),
                json!("<unk>"),
            ),
            Builder::Phi3 => (
                json!({"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u{2581}"}, spaces_to_metaspace]}),
                Json::Null,
                llama_decoder,
                Json::Null,
            ),
            Builder::Llama => (
                Json::Null,
                json!({"type": "Metaspace", "replacement": "\u{2581}", "prepend_scheme": "first", "split": false}),
                llama_decoder,
                Json::Null,
            ),
        }
    }
}

/// Python's `str.isspace` (Unicode whitespace plus the four ASCII separators 0x1C..0x1F).
fn py_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// A SentencePiece file's scores as merges are ranked by them: `-0.0` read as `0.0` (Python
/// compares them equal), NaN refused (it has no rank).
fn file_scores(a: &[Value]) -> std::result::Result<Vec<f64>, String> {
    a.iter()
        .enumerate()
        .map(|(i, v)| match v.as_f64() {
            Some(x) if x.is_nan() => Err(format!("`tokenizer.ggml.scores` holds NaN for token {i}, which ranks no merge")),
            Some(x) => Ok(x + 0.0),
            None => Err(format!("`tokenizer.ggml.scores` holds {v:?}, not a number")),
        })
        .collect()
}

/// One split of a token into two vocabulary tokens, as [`generate_merges`] ranks them: 20
/// bytes, for the half million splits of a 262,144-token vocabulary.
struct Split {
    /// The parts' positions in the vocabulary (their last ones).
    left: u32,
    right: u32,
    /// The token's rank among the distinct tokens (its first place).
    token: u32,
    /// The parts' lengths in characters.
    left_chars: u32,
    right_chars: u32,
}

/// transformers' `generate_merges`: every split of a token into two vocabulary tokens, ranked by
/// the token's score (its score, or minus its position for Gemma) from high to low, ties kept in
/// token order (longer left, then longer right first), as the positions of the two parts.
/// `order` lists the position of each distinct token once, at its first place, and `scores`
/// its score; `vocab` maps a token to its last position; `tokens` spells each position.
fn generate_merges(tokens: &[Cow<str>], order: &[u32], scores: &[f64], vocab: &HashMap<&str, u32>) -> Vec<(u32, u32)> {
    let mut splits: Vec<Split> = Vec::new();
    for (rank, &at) in order.iter().enumerate() {
        let token = tokens[at as usize].as_ref();
        let first = splits.len();
        // Each split with its parts' positions, looked up once (not again in the sort).
        for (chars, (i, _)) in token.char_indices().skip(1).enumerate() {
            if let (Some(&left), Some(&right)) = (vocab.get(&token[..i]), vocab.get(&token[i..])) {
                splits.push(Split { left, right, token: rank as u32, left_chars: chars as u32 + 1, right_chars: 0 });
            }
        }
        // transformers lists one token's splits in its parts' id order, but they never tie on
        // the ranking's key (their left lengths differ), so that order does not show.
        let total = token.chars().count() as u32;
        splits[first..].iter_mut().for_each(|s| s.right_chars = total - s.left_chars);
    }
    // Python's `sorted(..., reverse=True)` on (score, left length, right length) keeps equal keys
    // in list order, i.e. by token rank (one token's splits never tie: their lengths differ), so
    // the rank completes the key and an unstable sort gives the same order without a buffer.
    splits.sort_unstable_by(|a, b| {
        scores[b.token as usize]
            .total_cmp(&scores[a.token as usize])
            .then(b.left_chars.cmp(&a.left_chars))
            .then(b.right_chars.cmp(&a.right_chars))
            .then(a.token.cmp(&b.token))
    });
    splits.into_iter().map(|s| (s.left, s.right)).collect()
}

/// (tokenizer.json, tokenizer_config.json) of a SentencePiece GGUF file (see the module doc).
pub(crate) fn convert<'a>(file: &'a GgufFile, path: &Path) -> Result<Converted<'a>> {
    let err = |reason: String| Error::Request(format!("{}: {reason}", path.display()));
    let arch = file.get("general.architecture").and_then(Value::as_str).unwrap_or_default();
    let builder = Builder::of(arch);
    let gemma = builder == Builder::Gemma;
    let stored = strings(file, "tokenizer.ggml.tokens", path)?;
    if file.get("tokenizer.ggml.merges").is_some() {
        return Err(err("`tokenizer.ggml.model` is `llama` (SentencePiece) but the file lists `tokenizer.ggml.merges`; transformers would use them and this import rebuilds merges from the vocabulary: not converted".into()));
    }
    let n = stored.len();
    let types = token_types(file, n, path)?;
    fits_u32(n, path)?;
    let tokens: Vec<Cow<str>> = if gemma {
        stored.iter().map(|&t| if t.contains(' ') && t.chars().all(py_space) { Cow::Owned("\u{2581}".repeat(t.chars().count())) } else { Cow::Borrowed(t) }).collect()
    } else {
        stored.iter().map(|&t| Cow::Borrowed(t)).collect()
    };
    // Each position's score: minus the position for Gemma, else the file's.
    let by_position: Vec<f64> = if gemma {
        (0..n).map(|i| -(i as f64)).collect()
    } else {
        let a = file.get("tokenizer.ggml.scores").and_then(Value::as_array).ok_or_else(|| err("`tokenizer.ggml.scores` is missing: a SentencePiece vocabulary's merges are ranked by its scores".into()))?;
        if a.len() != n {
            return Err(err(format!("`tokenizer.ggml.scores` has {} entries for {n} tokens", a.len())));
        }
        file_scores(a).map_err(err)?
    };
    // Python dict semantics: a repeated token keeps its first place and its last id/score.
    let (order, vocab_ids) = first_places_last_ids(tokens.iter().map(|t| t.as_ref()));
    let scores: Vec<f64> = order.iter().map(|&at| by_position[vocab_ids[tokens[at as usize].as_ref()] as usize]).collect();
    drop(by_position);
    let merges = generate_merges(&tokens, &order, &scores, &vocab_ids);
    drop(scores);

    let id_key = |k: &str| file.get(k).and_then(Value::as_u64).map(|v| v as usize).filter(|&v| v < n);
    let token_of = |k: &str| id_key(k).map(|i| stored[i].to_string());
    let flag = |k: &str, default: bool| file.get(k).and_then(Value::as_bool).unwrap_or(default);
    // llama.cpp adds BOS to a SentencePiece vocabulary that does not say otherwise.
    let (add_bos, add_eos) = (flag("tokenizer.ggml.add_bos_token", true), flag("tokenizer.ggml.add_eos_token", false));
    let named = [("bos_token", "tokenizer.ggml.bos_token_id"), ("eos_token", "tokenizer.ggml.eos_token_id"), ("unk_token", "tokenizer.ggml.unknown_token_id"), ("pad_token", "tokenizer.ggml.padding_token_id")];

    // Added tokens, in id order: control tokens and the named special tokens are special; a
    // user-defined token is added when the vocabulary still spells it so. The class the builder
    // constructs first registers its default special tokens (see `Builder::class_defaults`):
    // special when the vocabulary has them (transformers would append them past the vocabulary
    // otherwise, ids the model has no row for; not written).
    let mut special: Vec<usize> = (0..n).filter(|&i| types[i] == 3).collect();
    special.extend(named.iter().filter_map(|(_, k)| id_key(k)));
    special.extend(builder.class_defaults().iter().filter_map(|t| vocab_ids.get(t).map(|&i| i as usize)));
    let mut added: Vec<(usize, bool)> = special.iter().map(|&i| (i, true)).collect();
    added.extend((0..n).filter(|&i| types[i] == 4 && vocab_ids.contains_key(stored[i]) && !special.contains(&i)).map(|i| (i, false)));
    added.sort();
    added.dedup_by_key(|(i, _)| *i);
    let added: Vec<Json> = added
        .into_iter()
        .map(|(id, sp)| json!({"id": id, "content": stored[id], "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": sp}))
        .collect();

    let bos = add_bos.then(|| (token_of("tokenizer.ggml.bos_token_id"), id_key("tokenizer.ggml.bos_token_id")));
    let eos = add_eos.then(|| (token_of("tokenizer.ggml.eos_token_id"), id_key("tokenizer.ggml.eos_token_id")));
    let post = post_processor(bos, eos, &err)?;
    let (normalizer, mut pre_tokenizer, decoder, unk) = builder.pipeline();
    // transformers applies a known `tokenizer.ggml.pre` split whatever the tokenizer model.
    if let Some(split) = split_pre_tokenizer(file.get("tokenizer.ggml.pre").and_then(Value::as_str)) {
        pre_tokenizer = split;
    }
    let vocab: Vec<(u32, u32)> = order.iter().map(|&at| (at, vocab_ids[tokens[at as usize].as_ref()])).collect();
    let tokenizer = TokenizerJson {
        version: "1.0",
        truncation: None,
        padding: None,
        added_tokens: added,
        normalizer,
        pre_tokenizer,
        post_processor: post,
        decoder,
        model: TokenizerModel::Bpe(BpeModel {
            kind: "BPE",
            unk_token: unk,
            continuing_subword_prefix: None,
            end_of_word_suffix: None,
            fuse_unk: true,
            byte_fallback: true,
            ignore_merges: false,
            tokens,
            vocab,
            merges: Merges::Ids(merges),
        }),
    };
    let mut config = Map::new();
    // The class onnxruntime-extensions reads the SentencePiece conventions of (transformers itself
    // writes TokenizersBackend). Phi-3's own tokenizer_config.json names LlamaTokenizer too.
    config.insert("tokenizer_class".into(), json!(if gemma { "GemmaTokenizer" } else { "LlamaTokenizer" }));
    config.insert("add_bos_token".into(), json!(add_bos));
    config.insert("add_eos_token".into(), json!(add_eos));
    for (name, key) in named {
        config.insert(name.into(), token_of(key).map_or(Json::Null, Json::String));
    }
    if let Some(t) = file.get("tokenizer.chat_template").and_then(Value::as_str) {
        config.insert("chat_template".into(), json!(t));
    }
    Ok(Converted { tokenizer, config: Json::Object(config), warnings: Vec::new() })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The merges of `tokens` with a score per position, as convert ranks them.
    fn merges<'a>(tokens: &[&'a str], scores: &[f64]) -> Vec<(&'a str, &'a str)> {
        let spelled: Vec<Cow<str>> = tokens.iter().map(|t| Cow::Borrowed(*t)).collect();
        let (order, vocab) = first_places_last_ids(tokens.iter().copied());
        let by_rank: Vec<f64> = order.iter().map(|&at| scores[vocab[tokens[at as usize]] as usize]).collect();
        generate_merges(&spelled, &order, &by_rank, &vocab).into_iter().map(|(l, r)| (tokens[l as usize], tokens[r as usize])).collect()
    }

    #[test]
    fn scores_rank_as_python_compares_them() {
        let got = file_scores(&[Value::F32(-0.0), Value::F32(1.5), Value::I32(-2)]).unwrap();
        assert_eq!(got.iter().map(|x| x.to_bits()).collect::<Vec<_>>(), [0.0f64, 1.5, -2.0].map(f64::to_bits), "-0.0 ranks as 0.0");
        let e = file_scores(&[Value::F32(0.0), Value::F32(f32::NAN)]).unwrap_err();
        assert!(e.contains("NaN for token 1"), "{e}");
        assert!(file_scores(&[Value::String("x".into())]).unwrap_err().contains("not a number"));
    }

    #[test]
    fn equal_keys_keep_the_tokens_order_and_a_repeated_token_its_last_score() {
        // "ca" and "ab" tie on (score, lengths): listed in token order, whichever parts' ids.
        assert_eq!(merges(&["a", "b", "c", "ca", "ab"], &[0.0, 0.0, 0.0, -1.0, -1.0]), [("c", "a"), ("a", "b")]);
        // "ab" twice: its first place (before "bc") with its last score (-3, after "bc"'s -2).
        assert_eq!(merges(&["a", "b", "c", "ab", "bc", "ab"], &[0.0, 0.0, 0.0, -1.0, -2.0, -3.0]), [("b", "c"), ("a", "b")]);
    }

    #[test]
    fn merges_are_ranked_by_score_then_length() {
        // "ab" (score -1) before "abc" (-2); "abc" splits as a+bc and ab+c, ordered by the
        // parts' ids; equal scores put the longer left part first.
        let m = merges(&["a", "b", "c", "ab", "bc", "abc"], &[0.0, 0.0, 0.0, -1.0, -3.0, -2.0]);
        let m: Vec<String> = m.iter().map(|(l, r)| format!("{l} {r}")).collect();
        assert_eq!(m, ["a b", "ab c", "a bc", "b c"]);
    }

    #[test]
    fn the_builder_follows_the_architecture() {
        let of = |a: &str| Builder::of(a);
        assert_eq!([of("gemma"), of("gemma2"), of("gemma3"), of("phi3"), of("llama"), of("mistral"), of("")], [Builder::Gemma, Builder::Gemma, Builder::Gemma, Builder::Phi3, Builder::Llama, Builder::Llama, Builder::Llama]);
    }

    /// The committed test files (scripts/make_spm_gguf.py, scripts/make_phi3_spm_gguf.py): the
    /// phi3 file gets phi3_tokenizer's normalizer and no pre-tokenizer, the rest as Llama's.
    #[test]
    fn phi3_files_get_a_prepend_normalizer_instead_of_metaspace() {
        let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/python/data/gguf-spm");
        let convert_file = |name: &str| {
            let path = data.join(name);
            let file = GgufFile::open(&path).unwrap();
            let c = convert(&file, &path).unwrap();
            (serde_json::from_slice::<Json>(&c.tokenizer_json()).unwrap(), c.config)
        };
        let (llama, llama_config) = convert_file("tiny-spm-llama.Q8_0.gguf");
        let (phi3, phi3_config) = convert_file("tiny-spm-phi3.Q8_0.gguf");
        assert_eq!(phi3["normalizer"], json!({"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u{2581}"}, {"type": "Replace", "pattern": {"String": " "}, "content": "\u{2581}"}]}));
        assert!(phi3["pre_tokenizer"].is_null() && llama["normalizer"].is_null());
        assert_eq!(llama["pre_tokenizer"]["type"], "Metaspace");
        assert_eq!(phi3["decoder"], llama["decoder"]);
        assert_eq!((&phi3["model"]["unk_token"], &phi3["model"]["byte_fallback"]), (&Json::Null, &json!(true)));
        // Phi-3's `</s>` is user-defined in the file, special as LlamaTokenizer's default eos;
        // its chat markers are control tokens.
        let added = |content: &str| phi3["added_tokens"].as_array().unwrap().iter().find(|t| t["content"] == content).map(|t| t["special"].as_bool().unwrap());
        assert_eq!((added("</s>"), added("<|end|>"), added("<s>"), added("[PAD1011]")), (Some(true), Some(true), Some(true), None));
        assert_eq!((&phi3_config["tokenizer_class"], &phi3_config["add_bos_token"], &phi3_config["eos_token"]), (&json!("LlamaTokenizer"), &json!(false), &json!("<|endoftext|>")));
        assert_eq!(llama_config["add_bos_token"], json!(true));
    }

    #[test]
    fn python_whitespace_includes_the_ascii_separators() {
        assert!(py_space('\u{1f}') && py_space(' ') && py_space('\u{3000}') && !py_space('\u{2581}'));
    }
}
