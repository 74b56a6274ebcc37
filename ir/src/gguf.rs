//! GGUF files (llama.cpp's checkpoint format), read with a bounded, validating parser: the
//! header, the metadata key/values, the tensor infos and the data section's alignment.
//!
//! Layout (little-endian; versions 2 and 3; version 1's 32-bit lengths are refused):
//!
//! ```text
//! "GGUF"  u32 version  u64 tensor_count  u64 kv_count
//! kv_count x  { string key, u32 value_type, value }
//! tensor_count x { string name, u32 n_dims, u64 ne[n_dims], u32 ggml_type, u64 offset }
//! padding to `general.alignment` (default 32), then the data section; each tensor's bytes are
//! at data_start + offset (a multiple of the alignment)
//! string = u64 length + UTF-8 bytes; array = u32 element type + u64 count + elements
//! ```
//!
//! Every length and count is checked against the bytes left before anything is allocated, so a
//! corrupt or hostile file gives an error naming what is wrong, never a panic or a huge
//! allocation (a proptest feeds arbitrary bytes). `ne[0]` is the fastest-varying dimension: a
//! weight `ne = [K, N]` is N rows of K values, blocks along K.

use crate::{Error, MappedFile, Result};
use std::path::Path;
use std::sync::Arc;

/// The file's magic, "GGUF".
pub const MAGIC: &[u8; 4] = b"GGUF";
/// Nested metadata arrays deeper than this are refused (real files use depth 1).
const MAX_DEPTH: usize = 4;
/// GGML_MAX_DIMS.
const MAX_DIMS: usize = 4;

/// A metadata value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    F32(f32),
    Bool(bool),
    String(String),
    Array(Vec<Value>),
    U64(u64),
    I64(i64),
    F64(f64),
}

impl Value {
    /// An integer of any width that fits `u64` (negative ones do not).
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::U8(v) => Some(v as u64),
            Value::U16(v) => Some(v as u64),
            Value::U32(v) => Some(v as u64),
            Value::U64(v) => Some(v),
            Value::I8(v) => u64::try_from(v).ok(),
            Value::I16(v) => u64::try_from(v).ok(),
            Value::I32(v) => u64::try_from(v).ok(),
            Value::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            Value::I8(v) => Some(v as i64),
            Value::I16(v) => Some(v as i64),
            Value::I32(v) => Some(v as i64),
            Value::I64(v) => Some(v),
            _ => self.as_u64().and_then(|v| i64::try_from(v).ok()),
        }
    }
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::F32(v) => Some(v as f64),
            Value::F64(v) => Some(v),
            _ => self.as_i64().map(|v| v as f64),
        }
    }
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }
    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }
}

/// A ggml tensor type: its id, name, and (for the types whose layout is read) the values and
/// bytes per block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GgmlType(pub u32);

impl GgmlType {
    pub const F32: GgmlType = GgmlType(0);
    pub const F16: GgmlType = GgmlType(1);
    pub const Q4_0: GgmlType = GgmlType(2);
    pub const Q4_1: GgmlType = GgmlType(3);
    pub const Q5_0: GgmlType = GgmlType(6);
    pub const Q5_1: GgmlType = GgmlType(7);
    pub const Q8_0: GgmlType = GgmlType(8);
    pub const Q2_K: GgmlType = GgmlType(10);
    pub const Q3_K: GgmlType = GgmlType(11);
    pub const Q4_K: GgmlType = GgmlType(12);
    pub const Q5_K: GgmlType = GgmlType(13);
    pub const Q6_K: GgmlType = GgmlType(14);
    pub const IQ4_NL: GgmlType = GgmlType(20);
    pub const IQ4_XS: GgmlType = GgmlType(23);
    pub const BF16: GgmlType = GgmlType(30);
    pub const MXFP4: GgmlType = GgmlType(39);

    /// (name, values per block, bytes per block) of the types whose byte size is known here.
    const LAYOUTS: &'static [(u32, &'static str, usize, usize)] = &[
        (0, "F32", 1, 4),
        (1, "F16", 1, 2),
        (2, "Q4_0", 32, 18),
        (3, "Q4_1", 32, 20),
        (6, "Q5_0", 32, 22),
        (7, "Q5_1", 32, 24),
        (8, "Q8_0", 32, 34),
        (9, "Q8_1", 32, 36),
        (10, "Q2_K", 256, 84),
        (11, "Q3_K", 256, 110),
        (12, "Q4_K", 256, 144),
        (13, "Q5_K", 256, 176),
        (14, "Q6_K", 256, 210),
        (15, "Q8_K", 256, 292),
        // The i-quants and ternary types (ggml's `block_*` structs), read so that a file holding
        // them opens and its import names what it cannot take; only IQ4_NL and IQ4_XS decode.
        (16, "IQ2_XXS", 256, 66),
        (17, "IQ2_XS", 256, 74),
        (18, "IQ3_XXS", 256, 98),
        (19, "IQ1_S", 256, 50),
        (20, "IQ4_NL", 32, 18),
        (21, "IQ3_S", 256, 110),
        (22, "IQ2_S", 256, 82),
        (23, "IQ4_XS", 256, 136),
        (24, "I8", 1, 1),
        (25, "I16", 1, 2),
        (26, "I32", 1, 4),
        (27, "I64", 1, 8),
        (28, "F64", 1, 8),
        (29, "IQ1_M", 256, 56),
        (30, "BF16", 1, 2),
        (34, "TQ1_0", 256, 54),
        (35, "TQ2_0", 256, 66),
        (39, "MXFP4", 32, 17),
    ];
    /// Names of ids whose layout is not read (for messages): the repacked Q4_0 / IQ4_NL types
    /// ggml removed (files holding them must be quantized again).
    const OTHERS: &'static [(u32, &'static str)] = &[
        (31, "Q4_0_4_4 (removed from ggml)"),
        (32, "Q4_0_4_8 (removed from ggml)"),
        (33, "Q4_0_8_8 (removed from ggml)"),
        (36, "IQ4_NL_4_4 (removed from ggml)"),
        (37, "IQ4_NL_4_8 (removed from ggml)"),
        (38, "IQ4_NL_8_8 (removed from ggml)"),
    ];

    pub fn name(self) -> String {
        Self::LAYOUTS
            .iter()
            .map(|(i, n, _, _)| (*i, *n))
            .chain(Self::OTHERS.iter().copied())
            .find(|(i, _)| *i == self.0)
            .map_or_else(|| format!("type {}", self.0), |(_, n)| n.to_string())
    }

    /// (values per block, bytes per block), when the layout is known.
    pub fn block(self) -> Option<(usize, usize)> {
        Self::LAYOUTS.iter().find(|(i, ..)| *i == self.0).map(|(_, _, v, b)| (*v, *b))
    }
}

impl std::fmt::Display for GgmlType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name())
    }
}

/// One tensor listed in the file.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorInfo {
    pub name: String,
    /// `ne`: `dims[0]` varies fastest (a row's length).
    pub dims: Vec<usize>,
    pub ggml_type: GgmlType,
    /// Absolute byte offset of the data in the file.
    pub offset: usize,
    /// Bytes of data.
    pub len: usize,
    /// The file of a split set that holds it ([`GgufFile::shards`]; 0 for a single file).
    pub shard: usize,
}

impl TensorInfo {
    pub fn numel(&self) -> usize {
        self.dims.iter().product()
    }
}

/// A parsed GGUF file (the mapping stays open: tensor data is read from it lazily), or the
/// files of a split set read as one (see [`GgufFile::open`]).
#[derive(Debug)]
pub struct GgufFile {
    /// The file that was opened (the first of a split set: it holds the metadata).
    pub file: Arc<MappedFile>,
    /// Every file of a split set in order, `file` first; just `file` otherwise.
    pub shards: Vec<Arc<MappedFile>>,
    pub version: u32,
    pub alignment: usize,
    /// In file order (the first file's).
    pub metadata: Vec<(String, Value)>,
    /// Every file's tensors, in file order; [`TensorInfo::shard`] says which file holds each.
    pub tensors: Vec<TensorInfo>,
}

/// llama.cpp's split files (`gguf-split`, and gguf-py's writer with a size or tensor limit):
/// shard `i` of `n` is `{prefix}-{i:05}-of-{n:05}.gguf`, `i` from 1; each holds `split.no`
/// (from 0), `split.count` and `split.tensors.count` (the whole set's), the first also the
/// model's metadata, every one its own tensors with offsets into itself.
struct Split {
    no: u64,
    count: u64,
    tensors: Option<u64>,
}

impl Split {
    fn of(metadata: &[(String, Value)]) -> std::result::Result<Option<Split>, String> {
        let get = |k: &str| metadata.iter().find(|(key, _)| key == k).map(|(_, v)| v);
        let int = |k: &str| -> std::result::Result<Option<u64>, String> {
            match get(k) {
                None => Ok(None),
                Some(v) => v.as_u64().map(Some).ok_or_else(|| format!("`{k}` is {v:?}, not a non-negative integer")),
            }
        };
        match (int("split.no")?, int("split.count")?) {
            (_, None | Some(0 | 1)) => Ok(None),
            (None, Some(count)) => Err(format!("`split.count` is {count} but `split.no` is missing")),
            (Some(no), Some(count)) if no >= count => Err(format!("`split.no` {no} is not below `split.count` {count}")),
            (Some(no), Some(count)) => Ok(Some(Split { no, count, tensors: int("split.tensors.count")? })),
        }
    }
}

/// llama.cpp's split-file naming (`gguf-split`): `(prefix, i, n)` of a file stem
/// `{prefix}-{i:05}-of-{n:05}`, file `i` (from 1, at most `n`) of `n`; `None` for any other stem.
pub fn split_stem(stem: &str) -> Option<(&str, usize, usize)> {
    let (rest, count) = stem.rsplit_once("-of-")?;
    let (prefix, no) = rest.rsplit_once('-')?;
    // Numbers as llama.cpp writes them (`%05d`): digits only, zero-padded to five.
    let number = |s: &str| s.bytes().all(|b| b.is_ascii_digit()).then(|| s.parse::<usize>().ok()).flatten().filter(|v| format!("{v:05}") == s);
    let (i, n) = (number(no)?, number(count)?);
    (1..=n).contains(&i).then_some((prefix, i, n))
}

/// The stem of file `i` (from 1) of the `n` files of split set `prefix`: [`split_stem`]'s inverse.
///
/// ```
/// assert_eq!(ir::gguf::split_stem(&ir::gguf::split_file_stem("m-Q8_0", 2, 3)), Some(("m-Q8_0", 2, 3)));
/// assert_eq!(ir::gguf::split_stem("m-2-of-3"), None, "zero-padded to five digits");
/// assert_eq!(ir::gguf::split_stem("m-00004-of-00003"), None, "file 4 of 3");
/// ```
pub fn split_file_stem(prefix: &str, i: usize, n: usize) -> String {
    format!("{prefix}-{i:05}-of-{n:05}")
}

/// The file name of shard `no` (from 0) of `count`, beside `first` named
/// `{prefix}-00001-of-{count:05}.gguf` (the extension in any case, kept as `first` spells it);
/// `None` when `first` is not named so.
fn shard_path(first: &Path, no: u64, count: u64) -> Option<std::path::PathBuf> {
    let name = first.file_name()?.to_str()?;
    let (stem, ext) = name.rsplit_once('.')?;
    if !ext.eq_ignore_ascii_case("gguf") {
        return None;
    }
    let count = usize::try_from(count).ok()?;
    let (prefix, 1, n) = split_stem(stem)? else { return None };
    if n != count {
        return None;
    }
    Some(first.with_file_name(format!("{}.{ext}", split_file_stem(prefix, usize::try_from(no).ok()? + 1, count))))
}

impl GgufFile {
    /// Maps and parses `path`. A file of a split set (`split.count` > 1) must be the first,
    /// named `...-00001-of-NNNNN.gguf`; the others are read from beside it and checked to be
    /// the set's (their `split.no` and `split.count`, the total tensor count, no name twice).
    pub fn open(path: &Path) -> Result<GgufFile> {
        let mut set = Self::open_one(path)?;
        let bad = |path: &Path, reason: String| Error::GgufSplit { path: path.to_path_buf(), reason };
        let Some(split) = Split::of(&set.metadata).map_err(|reason| Error::Gguf { path: path.to_path_buf(), reason })? else {
            return Ok(set);
        };
        let (no, count) = (split.no, split.count);
        if no != 0 {
            let first = path.file_name().and_then(|n| n.to_str()).and_then(|n| n.rsplit_once(&format!("-{:05}-of-", no + 1))).map(|(p, _)| format!("`{p}-00001-of-{count:05}.gguf`"));
            return Err(bad(
                path,
                format!("is file {} of a GGUF split into {count}; pass the first, {}, which holds the metadata", no + 1, first.unwrap_or_else(|| "the one with `split.no` 0".into())),
            ));
        }
        for i in 1..count {
            let Some(other) = shard_path(path, i, count) else {
                return Err(bad(
                    path,
                    format!("is the first of {count} split files (its `split.count`), but its name does not end in `-00001-of-{count:05}.gguf`, so the others cannot be found; keep llama.cpp's names"),
                ));
            };
            if !other.is_file() {
                return Err(bad(path, format!("is the first of {count} split files; file {} of {count}, `{}`, is not beside it", i + 1, other.display())));
            }
            let next = Self::open_one(&other)?;
            match Split::of(&next.metadata).map_err(|reason| Error::Gguf { path: other.clone(), reason })? {
                Some(s) if s.no == i && s.count == count => {}
                Some(s) => return Err(bad(&other, format!("says it is file {} of {}, but its name makes it file {} of {count}", s.no + 1, s.count, i + 1))),
                None => return Err(bad(&other, format!("is not a split file (no `split.count` above 1), so it is not file {} of the {count} split files of `{}`", i + 1, path.display()))),
            }
            for mut t in next.tensors {
                if set.tensors.iter().any(|u| u.name == t.name) {
                    return Err(bad(&other, format!("holds tensor `{}`, which an earlier file of the split set holds too", t.name)));
                }
                t.shard = set.shards.len();
                set.tensors.push(t);
            }
            set.shards.push(next.file);
        }
        if let Some(total) = split.tensors.filter(|&n| n != set.tensors.len() as u64) {
            return Err(bad(path, format!("`split.tensors.count` is {total}, but its {count} files hold {} tensors", set.tensors.len())));
        }
        Ok(set)
    }

    /// One file, as if it were alone.
    fn open_one(path: &Path) -> Result<GgufFile> {
        let file = MappedFile::open(path)?;
        let (version, alignment, metadata, tensors) = parse(file.bytes()).map_err(|reason| Error::Gguf { path: path.to_path_buf(), reason })?;
        Ok(GgufFile { shards: vec![Arc::clone(&file)], file, version, alignment, metadata, tensors })
    }

    /// Drops the metadata whose key starts with `prefix`, once nothing reads it again (a
    /// tokenizer's parsed arrays are tens of MB for a 150,000-262,144 token vocabulary).
    pub fn forget_metadata(&mut self, prefix: &str) {
        self.metadata.retain(|(k, _)| !k.starts_with(prefix));
        self.metadata.shrink_to_fit();
    }

    /// The metadata value of `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.metadata.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// The file holding a tensor's bytes.
    pub fn file_of(&self, t: &TensorInfo) -> &Arc<MappedFile> {
        &self.shards[t.shard]
    }

    /// The bytes of a tensor (checked to lie inside its file at parse time).
    pub fn data(&self, t: &TensorInfo) -> &[u8] {
        &self.file_of(t).bytes()[t.offset..t.offset + t.len]
    }
}

/// A cursor over the file's bytes whose every read is bounds-checked.
struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

type Parsed = (u32, usize, Vec<(String, Value)>, Vec<TensorInfo>);

impl<'a> Reader<'a> {
    fn left(&self) -> usize {
        self.bytes.len() - self.pos
    }
    fn take(&mut self, n: usize, what: &str) -> std::result::Result<&'a [u8], String> {
        if n > self.left() {
            return Err(format!("{what} at byte {} needs {n} bytes, the file has {} left: it is truncated or corrupt", self.pos, self.left()));
        }
        let s = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    fn u32(&mut self, what: &str) -> std::result::Result<u32, String> {
        Ok(u32::from_le_bytes(self.take(4, what)?.try_into().expect("4 bytes")))
    }
    fn u64(&mut self, what: &str) -> std::result::Result<u64, String> {
        Ok(u64::from_le_bytes(self.take(8, what)?.try_into().expect("8 bytes")))
    }
    /// A count of items of at least `min_size` bytes each, which must fit the bytes left.
    fn count(&mut self, what: &str, min_size: usize) -> std::result::Result<usize, String> {
        let n = self.u64(what)?;
        let fits = usize::try_from(n).ok().filter(|&n| n.checked_mul(min_size).is_some_and(|b| b <= self.left()));
        fits.ok_or_else(|| format!("{what} is {n}, more than the {} bytes left can hold", self.left()))
    }
    fn string(&mut self, what: &str) -> std::result::Result<String, String> {
        let n = self.count(&format!("the length of {what}"), 1)?;
        let b = self.take(n, what)?;
        String::from_utf8(b.to_vec()).map_err(|_| format!("{what} at byte {} is not UTF-8", self.pos - n))
    }
    fn value(&mut self, ty: u32, what: &str, depth: usize) -> std::result::Result<Value, String> {
        Ok(match ty {
            0 => Value::U8(self.take(1, what)?[0]),
            1 => Value::I8(self.take(1, what)?[0] as i8),
            2 => Value::U16(u16::from_le_bytes(self.take(2, what)?.try_into().expect("2"))),
            3 => Value::I16(i16::from_le_bytes(self.take(2, what)?.try_into().expect("2"))),
            4 => Value::U32(self.u32(what)?),
            5 => Value::I32(self.u32(what)? as i32),
            6 => Value::F32(f32::from_bits(self.u32(what)?)),
            7 => match self.take(1, what)?[0] {
                0 => Value::Bool(false),
                1 => Value::Bool(true),
                b => return Err(format!("{what} is a bool stored as {b}, not 0 or 1")),
            },
            8 => Value::String(self.string(what)?),
            9 => {
                if depth >= MAX_DEPTH {
                    return Err(format!("{what} nests arrays deeper than {MAX_DEPTH}"));
                }
                let elem = self.u32(what)?;
                let n = self.count(&format!("the length of {what}"), min_size(elem).ok_or_else(|| format!("{what} is an array of unknown value type {elem}"))?)?;
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push(self.value(elem, what, depth + 1)?);
                }
                Value::Array(items)
            }
            10 => Value::U64(self.u64(what)?),
            11 => Value::I64(self.u64(what)? as i64),
            12 => Value::F64(f64::from_bits(self.u64(what)?)),
            other => return Err(format!("{what} has unknown value type {other}")),
        })
    }
}

/// The fewest bytes a value of type `ty` takes (`None`: unknown type).
fn min_size(ty: u32) -> Option<usize> {
    Some(match ty {
        0 | 1 | 7 => 1,
        2 | 3 => 2,
        4..=6 => 4,
        8 | 10..=12 => 8,
        9 => 12,
        _ => return None,
    })
}

/// Parses the whole file's bytes: (version, alignment, metadata, tensors).
pub fn parse(bytes: &[u8]) -> std::result::Result<Parsed, String> {
    let mut r = Reader { bytes, pos: 0 };
    if r.take(4, "the magic")? != MAGIC {
        return Err("does not start with \"GGUF\": not a GGUF file".into());
    }
    let version = r.u32("the version")?;
    if !(2..=3).contains(&version) {
        return Err(format!("is GGUF version {version}; versions 2 and 3 are read (re-convert a version 1 file with a current llama.cpp)"));
    }
    // A tensor info takes at least 8 + 4 + 4 + 8 bytes, a key/value 8 + 4 + 1.
    let tensor_count = r.count("the tensor count", 24)?;
    let kv_count = r.count("the metadata count", 13)?;
    let mut metadata = Vec::with_capacity(kv_count);
    for i in 0..kv_count {
        let key = r.string(&format!("metadata key {i}"))?;
        let ty = r.u32(&format!("the type of `{key}`"))?;
        let value = r.value(ty, &format!("`{key}`"), 0)?;
        if metadata.iter().any(|(k, _)| *k == key) {
            return Err(format!("metadata key `{key}` appears twice"));
        }
        metadata.push((key, value));
    }
    let alignment = match metadata.iter().find(|(k, _)| k == "general.alignment") {
        None => 32,
        Some((_, v)) => match v {
            Value::U32(a) if a.is_power_of_two() => *a as usize,
            other => return Err(format!("`general.alignment` is {other:?}; it must be a u32 power of two")),
        },
    };
    let mut infos = Vec::with_capacity(tensor_count);
    for i in 0..tensor_count {
        let name = r.string(&format!("tensor name {i}"))?;
        let n_dims = r.u32(&format!("the rank of `{name}`"))? as usize;
        if n_dims == 0 || n_dims > MAX_DIMS {
            return Err(format!("tensor `{name}` has {n_dims} dimensions; GGUF tensors have 1 to {MAX_DIMS}"));
        }
        let mut dims = Vec::with_capacity(n_dims);
        for _ in 0..n_dims {
            let d = r.u64(&format!("a dimension of `{name}`"))?;
            dims.push(usize::try_from(d).map_err(|_| format!("tensor `{name}` has dimension {d}"))?);
        }
        let ggml_type = GgmlType(r.u32(&format!("the type of `{name}`"))?);
        let offset = r.u64(&format!("the offset of `{name}`"))?;
        infos.push((name, dims, ggml_type, offset));
    }
    let data_start = r.pos.div_ceil(alignment).checked_mul(alignment).ok_or("the data section starts past any file")?;
    let mut tensors: Vec<TensorInfo> = Vec::with_capacity(tensor_count);
    for (name, dims, ggml_type, offset) in infos {
        let Some((per_block, block_bytes)) = ggml_type.block() else {
            return Err(format!("tensor `{name}` is of ggml type {ggml_type}, whose layout is not read here"));
        };
        let numel = dims.iter().try_fold(1usize, |a, &d| a.checked_mul(d)).ok_or_else(|| format!("tensor `{name}` has {dims:?} elements, past any file"))?;
        if dims[0] % per_block != 0 {
            return Err(format!("tensor `{name}` ({ggml_type}) has rows of {} values, not a multiple of its {per_block}-value blocks", dims[0]));
        }
        let len = (numel / per_block).checked_mul(block_bytes).ok_or_else(|| format!("tensor `{name}` is larger than any file"))?;
        if !offset.is_multiple_of(alignment as u64) {
            return Err(format!("tensor `{name}` starts at data offset {offset}, not a multiple of the alignment {alignment}"));
        }
        let start = usize::try_from(offset).ok().and_then(|o| o.checked_add(data_start));
        let end = start.and_then(|s| s.checked_add(len));
        let (Some(start), Some(end)) = (start, end) else {
            return Err(format!("tensor `{name}` lies past any file (data offset {offset})"));
        };
        if end > bytes.len() {
            return Err(format!("tensor `{name}` needs bytes {start}..{end}, the file has {}: it is truncated", bytes.len()));
        }
        if tensors.iter().any(|t| t.name == name) {
            return Err(format!("tensor `{name}` is listed twice"));
        }
        tensors.push(TensorInfo { name, dims, ggml_type, offset: start, len, shard: 0 });
    }
    // Overlapping data would let one tensor's bytes be read as another's.
    let mut spans: Vec<(usize, usize, &str)> = tensors.iter().map(|t| (t.offset, t.offset + t.len, t.name.as_str())).collect();
    spans.sort_unstable();
    for w in spans.windows(2) {
        if w[1].0 < w[0].1 {
            return Err(format!("tensors `{}` and `{}` overlap in the data section", w[0].2, w[1].2));
        }
    }
    Ok((version, alignment, metadata, tensors))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A small valid file: one string, one array, one F32 tensor [4, 2] and one Q8_0 [32, 1].
    pub(crate) fn sample() -> Vec<u8> {
        let mut b = Vec::new();
        let s = |b: &mut Vec<u8>, v: &str| {
            b.extend((v.len() as u64).to_le_bytes());
            b.extend(v.as_bytes());
        };
        b.extend(MAGIC);
        b.extend(3u32.to_le_bytes());
        b.extend(2u64.to_le_bytes());
        b.extend(2u64.to_le_bytes());
        s(&mut b, "general.architecture");
        b.extend(8u32.to_le_bytes());
        s(&mut b, "llama");
        s(&mut b, "tokenizer.ggml.scores");
        b.extend(9u32.to_le_bytes());
        b.extend(6u32.to_le_bytes());
        b.extend(2u64.to_le_bytes());
        b.extend(0.5f32.to_le_bytes());
        b.extend((-1.0f32).to_le_bytes());
        s(&mut b, "a.weight");
        b.extend(2u32.to_le_bytes());
        b.extend(4u64.to_le_bytes());
        b.extend(2u64.to_le_bytes());
        b.extend(0u32.to_le_bytes());
        b.extend(0u64.to_le_bytes());
        s(&mut b, "q.weight");
        b.extend(1u32.to_le_bytes());
        b.extend(32u64.to_le_bytes());
        b.extend(8u32.to_le_bytes());
        b.extend(64u64.to_le_bytes());
        while b.len() % 32 != 0 {
            b.push(0);
        }
        b.extend((0..8).flat_map(|i| (i as f32).to_le_bytes()));
        b.extend(vec![0u8; 32]);
        b.extend(vec![7u8; 34]);
        b
    }

    #[test]
    fn a_valid_file_is_read() {
        let bytes = sample();
        let (version, alignment, meta, tensors) = parse(&bytes).unwrap();
        assert_eq!((version, alignment), (3, 32));
        assert_eq!(meta[0], ("general.architecture".to_string(), Value::String("llama".into())));
        assert_eq!(meta[1].1, Value::Array(vec![Value::F32(0.5), Value::F32(-1.0)]));
        assert_eq!(tensors[0].dims, vec![4, 2]);
        assert_eq!((tensors[0].len, tensors[1].ggml_type, tensors[1].len), (32, GgmlType::Q8_0, 34));
        assert_eq!(&bytes[tensors[1].offset..tensors[1].offset + 2], &[7, 7]);
    }

    #[test]
    fn corrupt_files_are_refused_with_the_reason() {
        let good = sample();
        let err = |bytes: &[u8]| parse(bytes).unwrap_err();
        assert!(err(b"GGUX").contains("not a GGUF file"));
        let mut v1 = good.clone();
        v1[4] = 1;
        assert!(err(&v1).contains("version 1"));
        assert!(err(&good[..good.len() - 1]).contains("`q.weight`") && err(&good[..good.len() - 1]).contains("truncated"));
        let mut huge = good.clone();
        huge[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(err(&huge).contains("the tensor count"));
        // An unknown tensor type (IQ2_XXS), named.
        let mut iq = good.clone();
        let at = iq.windows(8).position(|w| w == b"q.weight").unwrap() + 8 + 4 + 8;
        iq[at..at + 4].copy_from_slice(&16u32.to_le_bytes());
        assert!(err(&iq).contains("IQ2_XXS"), "{}", err(&iq));
        // A type ggml removed, named as such.
        iq[at..at + 4].copy_from_slice(&31u32.to_le_bytes());
        assert!(err(&iq).contains("Q4_0_4_4 (removed from ggml)") && err(&iq).contains("not read here"), "{}", err(&iq));
        // A misaligned offset.
        let mut mis = good.clone();
        mis[at + 4..at + 12].copy_from_slice(&65u64.to_le_bytes());
        assert!(err(&mis).contains("alignment"));
        // Overlapping tensors.
        let mut over = good;
        over[at + 4..at + 12].copy_from_slice(&0u64.to_le_bytes());
        assert!(err(&over).contains("overlap"));
    }

    proptest! {
        /// Arbitrary bytes, and a valid file with arbitrary bytes overwritten or cut: never a
        /// panic, and every tensor a successful parse lists lies inside the input.
        #[test]
        fn no_input_panics(bytes in proptest::collection::vec(any::<u8>(), 0..512), at in 0usize..400, patch in proptest::collection::vec(any::<u8>(), 1..12), cut in 0usize..400) {
            let _ = parse(&bytes);
            let mut file = sample();
            let at = at.min(file.len() - 1);
            for (i, b) in patch.iter().enumerate() {
                if at + i < file.len() {
                    file[at + i] = *b;
                }
            }
            file.truncate(file.len() - cut.min(file.len()));
            if let Ok((_, _, _, tensors)) = parse(&file) {
                for t in tensors {
                    prop_assert!(t.offset + t.len <= file.len());
                }
            }
        }
    }
}
