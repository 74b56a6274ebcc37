//! The checkpoint's files a package carries besides the model (tokenizer, generation and
//! chat settings), and whether onnxruntime-genai will find a tokenizer among them. A missing,
//! unreadable or broken tokenizer does not stop the model from building, but genai cannot use
//! the package without it, so the build says so (an error under `--strict`).
//!
//! Each file is read as config.json is (`ir::read_regular`: a regular file, never opened in a
//! way that blocks, of bounded size) and checked in the form a tokenizer needs it
//! ([`check_tokenizer_file`]): onnxruntime-genai 0.18 fails to load a tokenizer.json that is
//! not JSON, lacks its `model` object or the model's `vocab`, and a tokenizer_config.json
//! that is not a JSON object (`tests/python/test_tokenizer_facts.py`).

use crate::{Error, Result};
use serde_json::Value;
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

/// What onnxruntime-genai's tokenizer loads from a folder: `tokenizer_config.json` and a
/// Hugging Face `tokenizer.json`. A SentencePiece `tokenizer.model` alone is not enough: genai
/// 0.18 fails with "Invalid file: .../tokenizer.json" (`tests/python/test_tokenizer_facts.py`).
const GENAI_NEEDS: &[&str] = &["tokenizer_config.json", "tokenizer.json"];

/// The most bytes a companion file is read with: settings files as config.json, tokenizer
/// data (vocabularies, merges, SentencePiece models) more.
fn limit(name: &str) -> u64 {
    match name {
        "tokenizer_config.json" | "special_tokens_map.json" | "added_tokens.json" | "generation_config.json" | "chat_template.jinja" => {
            ir::SETTINGS_LIMIT
        }
        _ => ir::DATA_FILE_LIMIT,
    }
}

/// The companion files of one checkpoint.
pub(crate) struct Companions {
    /// Regular files to copy.
    pub(crate) copyable: Vec<&'static str>,
    /// What a user should know: entries that are not readable files, tokenizer files genai
    /// needs and the checkpoint lacks, tokenizer files a tokenizer cannot load.
    pub(crate) warnings: Vec<String>,
    /// Copyable files that failed [`check_tokenizer_file`].
    broken: Vec<&'static str>,
}

impl Companions {
    /// The companions of `model_dir`; with `genai`, a tokenizer onnxruntime-genai cannot load
    /// is a warning (a decoder package), else only unreadable and broken entries are.
    pub(crate) fn of(model_dir: &Path, genai: bool) -> Companions {
        let mut copyable = Vec::new();
        let mut warnings = Vec::new();
        let mut broken = Vec::new();
        for &name in CHECKPOINT_FILES {
            let path = model_dir.join(name);
            match ir::read_regular(&path, limit(name)) {
                Ok(Some(bytes)) => {
                    copyable.push(name);
                    // generation_config.json is read by the build itself (a broken one fails it).
                    if name == "generation_config.json" {
                        continue;
                    }
                    if let Err(e) = check_tokenizer_file(&path, &bytes) {
                        broken.push(name);
                        let consequence = if genai && GENAI_NEEDS.contains(&name) {
                            "onnxruntime-genai will not load this package's tokenizer"
                        } else {
                            "a tokenizer that reads it will fail"
                        };
                        warnings.push(format!("{e}; it was copied as it is, and {consequence} (replace the file with a good copy and build again)"));
                    }
                }
                Ok(None) => {}
                Err(e) => warnings.push(format!("{e}; it was not copied")),
            }
        }
        let missing: Vec<&str> = GENAI_NEEDS.iter().copied().filter(|n| !copyable.contains(n)).collect();
        if genai && !missing.is_empty() {
            let sentencepiece_only = missing.contains(&"tokenizer.json") && copyable.contains(&"tokenizer.model");
            warnings.push(format!(
                "the checkpoint {} lacks {}: onnxruntime-genai will not load this package's tokenizer ({})",
                model_dir.display(),
                missing.join(" and "),
                if sentencepiece_only {
                    "it reads tokenizer.json, not a SentencePiece tokenizer.model; save the tokenizer with transformers \
                     (`AutoTokenizer.from_pretrained(DIR).save_pretrained(DIR)` writes tokenizer.json) and build again"
                } else {
                    "add the tokenizer files to the checkpoint folder and build again"
                }
            ));
        }
        Companions { copyable, warnings, broken }
    }

    /// Whether onnxruntime-genai finds a tokenizer it can load among the copied files.
    pub(crate) fn genai_loadable(&self) -> bool {
        GENAI_NEEDS.iter().all(|n| self.copyable.contains(n) && !self.broken.contains(n))
    }
}

/// Checks a tokenizer or settings file the package carries, by its file name, in the form a
/// tokenizer needs it; the error names the file and says what is wrong:
///
/// * `tokenizer.json`: JSON holding an object whose `model` is an object with a `vocab` (an
///   object, or Unigram's list); a BPE model's `vocab` an object and `merges` a list;
///   `added_tokens`, when there, a list;
/// * `tokenizer_config.json`, `special_tokens_map.json`, `added_tokens.json`, `vocab.json`: a
///   JSON object;
/// * `tokenizer.model`: a SentencePiece model, a protobuf message with at least one
///   vocabulary piece (field 1), each piece a well-formed message;
/// * `vocab.txt`, `merges.txt`, `chat_template.jinja`: UTF-8 text.
///
/// Other names are not checked. A UTF-8 byte-order mark before JSON is accepted, as
/// onnxruntime-genai accepts it.
pub fn check_tokenizer_file(path: &Path, bytes: &[u8]) -> Result<()> {
    let bad = |reason: String| Error::Config { path: path.to_path_buf(), reason };
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let json = || -> Result<Value> {
        let text = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(bytes);
        serde_json::from_slice(text).map_err(|e| bad(format!("not valid JSON ({e})")))
    };
    match name.as_str() {
        "tokenizer.json" => {
            let v = json()?;
            let top = v.as_object().ok_or_else(|| bad(format!("holds {}, not a tokenizer object", kind(&v))))?;
            let model = match top.get("model") {
                Some(Value::Object(m)) => m,
                Some(other) => return Err(bad(format!("its `model` is {}, not the tokenizer model object", kind(other)))),
                None => return Err(bad("has no `model` object (the tokenizer's algorithm and vocabulary)".into())),
            };
            let bpe = model.get("type").and_then(Value::as_str) == Some("BPE") || (model.get("type").is_none() && model.contains_key("merges"));
            match model.get("vocab") {
                Some(Value::Object(_)) => {}
                Some(Value::Array(_)) if !bpe => {}
                Some(other) => return Err(bad(format!("its `model.vocab` is {}, not the vocabulary object", kind(other)))),
                None => return Err(bad("its `model` has no `vocab`".into())),
            }
            if bpe && !model.get("merges").is_some_and(Value::is_array) {
                return Err(bad("its BPE `model` has no `merges` list".into()));
            }
            match top.get("added_tokens") {
                None | Some(Value::Null) | Some(Value::Array(_)) => Ok(()),
                Some(other) => Err(bad(format!("its `added_tokens` is {}, not a list", kind(other)))),
            }
        }
        "tokenizer_config.json" | "special_tokens_map.json" | "added_tokens.json" | "vocab.json" => {
            let v = json()?;
            if v.is_object() { Ok(()) } else { Err(bad(format!("holds {}, not a JSON object", kind(&v)))) }
        }
        "tokenizer.model" => sentencepiece_model(bytes).map_err(|why| bad(format!("is not a SentencePiece model: {why}"))),
        "vocab.txt" | "merges.txt" | "chat_template.jinja" => {
            std::str::from_utf8(bytes).map(drop).map_err(|e| bad(format!("is not UTF-8 text ({e})")))
        }
        _ => Ok(()),
    }
}

/// How a JSON value is described in a message.
fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// Checks that `bytes` is a SentencePiece `ModelProto`: a well-formed protobuf message with at
/// least one `pieces` entry (field 1, length-delimited), each of them a well-formed message.
fn sentencepiece_model(bytes: &[u8]) -> std::result::Result<(), String> {
    if bytes.is_empty() {
        return Err("the file is empty".into());
    }
    let mut pieces = 0usize;
    for (field, payload) in protobuf_fields(bytes)? {
        if let (1, Some(piece)) = (field, payload) {
            protobuf_fields(piece).map_err(|why| format!("vocabulary piece {pieces}: {why}"))?;
            pieces += 1;
        }
    }
    if pieces == 0 {
        return Err("it holds no vocabulary pieces (field 1)".into());
    }
    Ok(())
}

/// A message's fields: (number, payload of a length-delimited field).
type Fields<'a> = Vec<(u64, Option<&'a [u8]>)>;

/// The fields of a protobuf message: (field number, payload for length-delimited fields), or
/// why the bytes are not a well-formed message. Group wire types (3, 4), deprecated and unused
/// by SentencePiece, are refused.
fn protobuf_fields(mut bytes: &[u8]) -> std::result::Result<Fields<'_>, String> {
    fn varint(bytes: &mut &[u8]) -> std::result::Result<u64, String> {
        let mut value = 0u64;
        for i in 0..10 {
            let (&b, rest) = bytes.split_first().ok_or("a number runs past the end of the file")?;
            *bytes = rest;
            value |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err("a number is longer than 10 bytes".into())
    }
    let mut fields = Vec::new();
    while !bytes.is_empty() {
        let at = bytes.as_ptr() as usize;
        let key = varint(&mut bytes)?;
        let (field, wire) = (key >> 3, key & 7);
        if field == 0 {
            return Err("a field has number 0".into());
        }
        let take = |bytes: &mut &[u8], n: u64| -> std::result::Result<(), String> {
            let n = usize::try_from(n).ok().filter(|&n| n <= bytes.len()).ok_or(format!("field {field} runs past the end of the file"))?;
            *bytes = &bytes[n..];
            Ok(())
        };
        let payload = match wire {
            0 => {
                varint(&mut bytes)?;
                None
            }
            1 => {
                take(&mut bytes, 8)?;
                None
            }
            2 => {
                let n = varint(&mut bytes)?;
                let start = bytes;
                take(&mut bytes, n)?;
                Some(&start[..start.len() - bytes.len()])
            }
            5 => {
                take(&mut bytes, 4)?;
                None
            }
            other => return Err(format!("field {field} has wire type {other}, which a SentencePiece model does not use (byte {at:#x})")),
        };
        fields.push((field, payload));
    }
    Ok(fields)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(name: &str, bytes: &[u8]) -> std::result::Result<(), String> {
        check_tokenizer_file(Path::new(name), bytes).map_err(|e| e.to_string())
    }

    #[test]
    fn tokenizer_json_needs_a_model_with_a_vocabulary() {
        let good = r#"{"version":"1.0","added_tokens":[],"model":{"type":"BPE","vocab":{"a":0},"merges":[]}}"#;
        assert!(check("tokenizer.json", good.as_bytes()).is_ok());
        assert!(check("tokenizer.json", [b"\xef\xbb\xbf", good.as_bytes()].concat().as_slice()).is_ok(), "a BOM is accepted");
        let unigram = r#"{"model":{"type":"Unigram","vocab":[["a",0.0]]}}"#;
        assert!(check("tokenizer.json", unigram.as_bytes()).is_ok());
        for (text, expect) in [
            ("{not json", "not valid JSON"),
            ("", "not valid JSON"),
            ("[]", "holds a list, not a tokenizer object"),
            (r#"{"version":"1.0"}"#, "has no `model` object"),
            (r#"{"model":"x"}"#, "`model` is a string"),
            (r#"{"model":{}}"#, "`model` has no `vocab`"),
            (r#"{"model":{"type":"BPE","vocab":[],"merges":[]}}"#, "`model.vocab` is a list"),
            (r#"{"model":{"type":"BPE","vocab":{}}}"#, "no `merges` list"),
            (r#"{"model":{"type":"WordPiece","vocab":{}},"added_tokens":"x"}"#, "`added_tokens` is a string"),
        ] {
            let e = check("tokenizer.json", text.as_bytes()).unwrap_err();
            assert!(e.starts_with("tokenizer.json: ") && e.contains(expect), "{text:?}: {e}");
        }
    }

    #[test]
    fn settings_files_are_json_objects_and_text_files_utf8() {
        assert!(check("tokenizer_config.json", b"{}").is_ok());
        assert!(check("tokenizer_config.json", b"[]").unwrap_err().contains("holds a list, not a JSON object"));
        assert!(check("special_tokens_map.json", b"{").unwrap_err().contains("not valid JSON"));
        assert!(check("merges.txt", b"a b\n").is_ok());
        assert!(check("vocab.txt", b"\xff\xfe").unwrap_err().contains("not UTF-8"));
        assert!(check("README.md", b"\xff").is_ok(), "other files are not checked");
    }

    #[test]
    fn tokenizer_model_is_a_sentencepiece_protobuf() {
        // pieces { piece: "a" score: 0.0 } pieces { piece: "b" }, trainer_spec { model_type: 1 }
        let piece_a = [0x0a, 0x01, b'a', 0x15, 0, 0, 0, 0];
        let piece_b = [0x0a, 0x01, b'b'];
        let mut good = vec![0x0a, piece_a.len() as u8];
        good.extend(piece_a);
        good.extend([0x0a, piece_b.len() as u8]);
        good.extend(piece_b);
        good.extend([0x12, 0x02, 0x18, 0x01]);
        assert!(check("tokenizer.model", &good).is_ok());
        for (bytes, expect) in [
            (&[][..], "empty"),
            (&[0x12, 0x02, 0x18, 0x01][..], "no vocabulary pieces"),
            (&good[..good.len() - 1], "past the end"),
            (&[0x0a, 0x02, 0x0b, 0x00][..], "piece 0: field 1 has wire type 3"),
            (b"{\"not\": \"protobuf\"}", "not a SentencePiece model"),
            (&[0x00, 0x01][..], "number 0"),
            (&[0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01][..], "longer than 10 bytes"),
        ] {
            let e = check("tokenizer.model", bytes).unwrap_err();
            assert!(e.starts_with("tokenizer.model: is not a SentencePiece model") && e.contains(expect), "{bytes:?}: {e}");
        }
    }
}
