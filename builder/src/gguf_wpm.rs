//! A GGUF file's WordPiece tokenizer (`tokenizer.ggml.model` `bert`): llama.cpp's converter
//! (`BertModel.set_vocab`, read for facts) stores BERT's vocabulary in its own spelling, a
//! word-initial piece with a leading U+2581 (`▁`) and a continuation without BERT's `##`,
//! control tokens (`[CLS]`, `[SEP]`, ...) as they are; the ids are the checkpoint's. This
//! spells it back as BERT's `vocab.txt` has it and writes the `tokenizer.json` of BERT's
//! tokenizer: BertNormalizer (lowercased, accents stripped), BertPreTokenizer, WordPiece with
//! `##` continuations, `[CLS] A [SEP]` (`[CLS] A [SEP] B [SEP]` for pairs, B with type 1).
//!
//! What the file does not say: whether the vocabulary is cased. llama.cpp's WordPiece
//! tokenizer lowercases every text, and so does this one (the uncased BERT vocabularies the
//! embedding models llama.cpp runs use, all-MiniLM and the BGE/E5 families among them); a
//! cased checkpoint's file is tokenized as llama.cpp tokenizes it. CLS is the file's
//! `tokenizer.ggml.bos_token_id` (gguf-py's SpecialVocab writes BERT's `cls_token` there), else
//! the `cls_token_id` older converters wrote, else the token `[CLS]`; SEP its
//! `seperator_token_id`, else `eos_token_id`, else `[SEP]`. User-defined tokens (type 4) are
//! added tokens matched whole, as transformers adds them.

use crate::gguf_tokenizer::{fits_u32, strings, token_types, Converted, TokenizerJson, TokenizerModel};
use crate::{Error, Result};
use ir::gguf::{GgufFile, Value};
use serde::Serialize;
use serde_json::{json, Map, Value as Json};
use std::borrow::Cow;
use std::path::Path;

/// llama.cpp's word-initial marker.
const PHANTOM: char = '\u{2581}';

/// A `tokenizer.json` WordPiece model.
pub(crate) struct WordPieceModel<'a> {
    pub unk_token: String,
    /// The vocabulary in BERT's spelling, by id.
    pub tokens: Vec<Cow<'a, str>>,
}

impl Serialize for WordPieceModel<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut m = s.serialize_struct("WordPieceModel", 5)?;
        m.serialize_field("type", "WordPiece")?;
        m.serialize_field("unk_token", &self.unk_token)?;
        m.serialize_field("continuing_subword_prefix", "##")?;
        m.serialize_field("max_input_chars_per_word", &100)?;
        m.serialize_field("vocab", &Vocab(&self.tokens))?;
        m.end()
    }
}

/// Tokens by id, serialized as a map from token to id.
struct Vocab<'s, 'a>(&'s [Cow<'a, str>]);

impl Serialize for Vocab<'_, '_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter().enumerate().map(|(i, t)| (t.as_ref(), i)))
    }
}

/// BERT's spelling of a token llama.cpp stored: control tokens (type 3) and unknown ones
/// (type 2) as they are, a `▁` word start without it, anything else a `##` continuation.
fn bert_spelling(token: &str, ty: i64) -> Cow<'_, str> {
    if matches!(ty, 2 | 3) {
        return Cow::Borrowed(token);
    }
    match token.strip_prefix(PHANTOM) {
        Some(word) => Cow::Borrowed(word),
        None => Cow::Owned(format!("##{token}")),
    }
}

/// tokenizer.json and tokenizer_config.json of a `bert` tokenizer in the GGUF file at `path`.
pub fn convert<'a>(file: &'a GgufFile, path: &Path) -> Result<Converted<'a>> {
    let err = |reason: String| Error::Request(format!("{}: {reason}", path.display()));
    let tokens = strings(file, "tokenizer.ggml.tokens", path)?;
    fits_u32(tokens.len(), path)?;
    let types = token_types(file, tokens.len(), path)?;
    let spelled: Vec<Cow<str>> = tokens.iter().zip(&types).map(|(t, &ty)| bert_spelling(t, ty)).collect();
    let mut seen = std::collections::HashMap::with_capacity(spelled.len());
    for (i, t) in spelled.iter().enumerate() {
        if let Some(first) = seen.insert(t.as_ref(), i) {
            return Err(err(format!("tokens {first} and {i} are both `{t}` in BERT's spelling (`tokenizer.ggml.tokens` holds `{}` and `{}`); a WordPiece vocabulary holds each piece once", tokens[first], tokens[i])));
        }
    }
    let id_of = |k: &str| file.get(k).and_then(Value::as_u64).map(|v| v as usize);
    let named = |k: &str, what: &str| -> Result<(usize, String)> {
        let id = id_of(k).ok_or_else(|| err(format!("metadata key `{k}` is missing: BERT's tokenizer puts {what} around every text")))?;
        let t = spelled.get(id).ok_or_else(|| err(format!("`{k}` is {id}, past the {} tokens", spelled.len())))?;
        Ok((id, t.to_string()))
    };
    // The first key the file has (older converters wrote `cls_token_id` where gguf-py now
    // writes BOS), else the token spelled as BERT's.
    let special = |keys: &[&str], spelling: &str| -> Result<(usize, String)> {
        if let Some(k) = keys.iter().find(|k| id_of(k).is_some()) {
            return named(k, spelling);
        }
        match seen.get(spelling) {
            Some(&id) => Ok((id, spelling.to_string())),
            None => Err(err(format!("has none of {} and no `{spelling}` token: BERT's tokenizer puts {spelling} around every text", keys.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ")))),
        }
    };
    let (cls_id, cls) = special(&["tokenizer.ggml.bos_token_id", "tokenizer.ggml.cls_token_id"], "[CLS]")?;
    let (sep_id, sep) = special(&["tokenizer.ggml.seperator_token_id", "tokenizer.ggml.eos_token_id"], "[SEP]")?;
    let unk = match id_of("tokenizer.ggml.unknown_token_id") {
        Some(_) => named("tokenizer.ggml.unknown_token_id", "[UNK]")?.1,
        None if seen.contains_key("[UNK]") => "[UNK]".to_string(),
        None => return Err(err("has no `tokenizer.ggml.unknown_token_id` and no `[UNK]` token: WordPiece needs one for words it cannot split".into())),
    };
    let added: Vec<Json> = spelled
        .iter()
        .zip(&types)
        .enumerate()
        .filter(|(_, (_, &ty))| matches!(ty, 2..=4))
        .map(|(i, (t, &ty))| json!({"id": i, "content": t, "single_word": false, "lstrip": false, "rstrip": false, "normalized": ty == 4, "special": ty != 4}))
        .collect();
    let special = |t: &str, id: usize| json!({"id": t, "ids": [id], "tokens": [t]});
    let mut specials = Map::new();
    specials.insert(cls.clone(), special(&cls, cls_id));
    specials.insert(sep.clone(), special(&sep, sep_id));
    let piece = |t: &str, type_id: u32| json!({"SpecialToken": {"id": t, "type_id": type_id}});
    let seq = |which: &str, type_id: u32| json!({"Sequence": {"id": which, "type_id": type_id}});
    let post_processor = json!({
        "type": "TemplateProcessing",
        "single": [piece(&cls, 0), seq("A", 0), piece(&sep, 0)],
        "pair": [piece(&cls, 0), seq("A", 0), piece(&sep, 0), seq("B", 1), piece(&sep, 1)],
        "special_tokens": specials,
    });
    let tokenizer = TokenizerJson {
        version: "1.0",
        truncation: None,
        padding: None,
        added_tokens: added,
        normalizer: json!({"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true, "strip_accents": null, "lowercase": true}),
        pre_tokenizer: json!({"type": "BertPreTokenizer"}),
        post_processor,
        decoder: json!({"type": "WordPiece", "prefix": "##", "cleanup": true}),
        model: TokenizerModel::WordPiece(WordPieceModel { unk_token: unk.clone(), tokens: spelled.clone() }),
    };
    let token_of = |k: &str| id_of(k).and_then(|i| spelled.get(i)).map(|t| Json::String(t.to_string()));
    let mut config = Map::new();
    config.insert("tokenizer_class".into(), json!("BertTokenizer"));
    config.insert("do_lower_case".into(), json!(true));
    config.insert("cls_token".into(), json!(cls));
    config.insert("sep_token".into(), json!(sep));
    config.insert("unk_token".into(), json!(unk));
    config.insert("pad_token".into(), token_of("tokenizer.ggml.padding_token_id").unwrap_or(Json::Null));
    config.insert("mask_token".into(), token_of("tokenizer.ggml.mask_token_id").unwrap_or(Json::Null));
    Ok(Converted { tokenizer, config: Json::Object(config), warnings: Vec::new() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn llama_cpps_spelling_is_read_back_as_berts() {
        assert_eq!(bert_spelling("[CLS]", 3), "[CLS]");
        assert_eq!(bert_spelling("\u{2581}hello", 1), "hello");
        assert_eq!(bert_spelling("ing", 1), "##ing");
        assert_eq!(bert_spelling("\u{2581}[unused0]", 1), "[unused0]");
        assert_eq!(bert_spelling("[UNK]", 2), "[UNK]");
    }
}
