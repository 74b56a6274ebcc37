//! The checkpoint's files a package carries besides the model (tokenizer, generation and
//! chat settings), and whether onnxruntime-genai will find a tokenizer among them. A missing,
//! unreadable or broken tokenizer does not stop the model from building, but genai cannot use
//! the package without it, so the build says so (an error under `--strict`).
//!
//! Each file is read as config.json is (`ir::read_regular`: a regular file, never opened in a
//! way that blocks, of bounded size) and checked in the form a tokenizer needs it
//! ([`check_tokenizer_file`]): onnxruntime-genai 0.18 fails to load a tokenizer.json that is
//! not JSON, lacks its `model` object or the model's `vocab`, and a tokenizer_config.json
//! that is not a JSON object; a BPE model without `merges` fails, crashes it or encodes to
//! other ids, from run to run (`tests/python/test_tokenizer_facts.py`).

use crate::{Error, Result};
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
    /// No companion files (a GGUF checkpoint's tokenizer is converted, not copied).
    pub(crate) fn none() -> Companions {
        Companions { copyable: Vec::new(), warnings: Vec::new(), broken: Vec::new() }
    }

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
                            "onnxruntime-genai cannot use this package's tokenizer"
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
    let json = |level: Level| -> Result<Shape> { shape_of(bytes, level).map_err(|e| bad(format!("not valid JSON ({e})"))) };
    match name.as_str() {
        "tokenizer.json" => {
            let top = json(Level::Tokenizer)?;
            let Shape::Object(top) = top else { return Err(bad(format!("holds {}, not a tokenizer object", top.kind()))) };
            let model = match field(&top, "model") {
                Some(Shape::Object(m)) => m,
                Some(other) => return Err(bad(format!("its `model` is {}, not the tokenizer model object", other.kind()))),
                None => return Err(bad("has no `model` object (the tokenizer's algorithm and vocabulary)".into())),
            };
            let ty = field(model, "type");
            let bpe = matches!(ty, Some(Shape::Str(t)) if t == "BPE") || (ty.is_none() && field(model, "merges").is_some());
            match field(model, "vocab") {
                Some(Shape::Object(_)) => {}
                Some(Shape::List) if !bpe => {}
                Some(other) => return Err(bad(format!("its `model.vocab` is {}, not the vocabulary object", other.kind()))),
                None => return Err(bad("its `model` has no `vocab`".into())),
            }
            if bpe && !matches!(field(model, "merges"), Some(Shape::List)) {
                return Err(bad("its BPE `model` has no `merges` list".into()));
            }
            match field(&top, "added_tokens") {
                None | Some(Shape::Null) | Some(Shape::List) => Ok(()),
                Some(other) => Err(bad(format!("its `added_tokens` is {}, not a list", other.kind()))),
            }
        }
        "tokenizer_config.json" | "special_tokens_map.json" | "added_tokens.json" | "vocab.json" => match json(Level::Leaf)? {
            Shape::Object(_) => Ok(()),
            other => Err(bad(format!("holds {}, not a JSON object", other.kind()))),
        },
        "tokenizer.model" => sentencepiece_model(bytes).map_err(|why| bad(format!("is not a SentencePiece model: {why}"))),
        "vocab.txt" | "merges.txt" | "chat_template.jinja" => {
            std::str::from_utf8(bytes).map(drop).map_err(|e| bad(format!("is not UTF-8 text ({e})")))
        }
        _ => Ok(()),
    }
}

/// The kind of a JSON value and, for the objects the check looks into, the members it reads;
/// everything else is skipped as it is parsed, so checking a tokenizer.json of hundreds of
/// MiB holds no more than a few strings (a `serde_json::Value` of it would take gigabytes).
#[derive(Debug, PartialEq)]
enum Shape {
    Null,
    Bool,
    Number,
    /// A string (its first 64 bytes: only `model.type` is read).
    Str(String),
    List,
    /// An object, with the members the check reads (none at [`Level::Leaf`]).
    Object(Vec<(String, Shape)>),
}

impl Shape {
    fn kind(&self) -> &'static str {
        match self {
            Shape::Null => "null",
            Shape::Bool => "a boolean",
            Shape::Number => "a number",
            Shape::Str(_) => "a string",
            Shape::List => "a list",
            Shape::Object(_) => "an object",
        }
    }
}

fn field<'a>(members: &'a [(String, Shape)], key: &str) -> Option<&'a Shape> {
    members.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v)
}

/// Which members of an object are kept: a tokenizer.json's `model` and `added_tokens`, the
/// model's `type`, `vocab` and `merges`; none below.
#[derive(Clone, Copy)]
enum Level {
    Tokenizer,
    Model,
    Leaf,
}

impl Level {
    /// The level of member `key`'s value, if it is kept.
    fn member(self, key: &str) -> Option<Level> {
        match (self, key) {
            (Level::Tokenizer, "model") => Some(Level::Model),
            (Level::Tokenizer, "added_tokens") | (Level::Model, "type" | "vocab" | "merges") => Some(Level::Leaf),
            _ => None,
        }
    }
}

/// The [`Shape`] of the JSON document `bytes` (a UTF-8 byte-order mark skipped, as
/// onnxruntime-genai skips it; nothing but whitespace after the value).
fn shape_of(bytes: &[u8], level: Level) -> serde_json::Result<Shape> {
    use serde::de::DeserializeSeed;
    let text = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(bytes);
    let mut de = serde_json::Deserializer::from_slice(text);
    let shape = level.deserialize(&mut de)?;
    de.end()?;
    Ok(shape)
}

impl<'de> serde::de::DeserializeSeed<'de> for Level {
    type Value = Shape;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> std::result::Result<Shape, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Level {
    type Value = Shape;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_unit<E>(self) -> std::result::Result<Shape, E> {
        Ok(Shape::Null)
    }
    fn visit_bool<E>(self, _: bool) -> std::result::Result<Shape, E> {
        Ok(Shape::Bool)
    }
    fn visit_i64<E>(self, _: i64) -> std::result::Result<Shape, E> {
        Ok(Shape::Number)
    }
    fn visit_u64<E>(self, _: u64) -> std::result::Result<Shape, E> {
        Ok(Shape::Number)
    }
    fn visit_f64<E>(self, _: f64) -> std::result::Result<Shape, E> {
        Ok(Shape::Number)
    }
    fn visit_str<E>(self, v: &str) -> std::result::Result<Shape, E> {
        Ok(Shape::Str(v.chars().scan(0, |n, c| { *n += c.len_utf8(); (*n <= 64).then_some(c) }).collect()))
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<Shape, A::Error> {
        while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
        Ok(Shape::List)
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> std::result::Result<Shape, A::Error> {
        if let Level::Leaf = self {
            while map.next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?.is_some() {}
            return Ok(Shape::Object(Vec::new()));
        }
        let mut members = Vec::new();
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            match self.member(&key) {
                Some(level) => members.push((key.into_owned(), map.next_value_seed(level)?)),
                None => {
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
            }
        }
        Ok(Shape::Object(members))
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
