//! The `.onnx_adapter` file ONNX Runtime loads (`onnxruntime/lora/adapter_format/adapter_schema.fbs`):
//! a FlatBuffer with file identifier `TORT`,
//!
//! ```text
//! table Adapter   { format_version:int; adapter_version:int; model_version:int; parameters:[Parameter]; }
//! table Parameter { name:string; dims:[int64]; data_type:TensorDataType; raw_data:[uint8] (force_align: 8); }
//! ```
//!
//! written here by hand, front to back: every offset FlatBuffers stores as unsigned points
//! forward, so each table is written before what it refers to and its offsets are patched in
//! once the target's position is known. Every field is written (a 0 `data_type` would mean
//! UNDEFINED), scalars are aligned to their size, and the `dims` and `raw_data` payloads start
//! 8-aligned (the schema's `force_align`), so ONNX Runtime's zero-copy tensors over a mapped
//! file are aligned. ONNX Runtime's verifier, identifier and version checks read it
//! (tests/python/test_lora.py reads every file back with `onnxruntime.AdapterFormat`).

/// The file identifier at bytes 4..8.
pub const IDENTIFIER: &[u8; 4] = b"TORT";
/// `kAdapterFormatVersion` (onnxruntime/lora/adapter_format_version.h): the only version
/// ONNX Runtime 1.32 loads.
pub const FORMAT_VERSION: i32 = 1;

/// One tensor of an adapter: a graph input's name and its value.
#[derive(Clone, Debug, PartialEq)]
pub struct Parameter {
    pub name: String,
    pub dims: Vec<i64>,
    /// The ONNX `TensorProto` element type (1 float, 10 float16, 16 bfloat16).
    pub data_type: i32,
    /// Little-endian, row-major bytes.
    pub raw: Vec<u8>,
}

/// Bytes of a table with four 4-byte fields after its vtable offset.
const TABLE_SIZE: u16 = 4 + 4 * 4;
/// A vtable of four fields: its own size, the table's size, four field offsets.
const VTABLE: [u16; 6] = [12, TABLE_SIZE, 4, 8, 12, 16];

/// A front-to-back FlatBuffer writer.
struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    /// Zero bytes until `(len + extra) % align == 0`: the next `extra` bytes (a vector's
    /// length) end where an `align`-aligned payload starts.
    fn pad(&mut self, align: usize, extra: usize) {
        while !(self.buf.len() + extra).is_multiple_of(align) {
            self.buf.push(0);
        }
    }
    fn at(&self) -> usize {
        self.buf.len()
    }
    fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    fn i32(&mut self, v: i32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    /// A vtable of four fields (2-aligned); returns its position.
    fn vtable(&mut self) -> usize {
        self.pad(4, 0);
        let at = self.at();
        for v in VTABLE {
            self.buf.extend_from_slice(&v.to_le_bytes());
        }
        at
    }
    /// Starts a table whose vtable is at `vtable`; returns the table's position.
    fn table(&mut self, vtable: usize) -> usize {
        self.pad(4, 0);
        let at = self.at();
        // soffset: the vtable is at `table - soffset`.
        self.i32((at - vtable) as i32);
        at
    }
    /// Points the uoffset field at `field` to `target` (which must lie after it).
    fn patch(&mut self, field: usize, target: usize) {
        let off = (target - field) as u32;
        self.buf[field..field + 4].copy_from_slice(&off.to_le_bytes());
    }
    /// A vector's length then its payload, the payload starting `align`-aligned; returns the
    /// vector's position (its length field).
    fn vector(&mut self, align: usize, len: usize, payload: &[u8]) -> usize {
        self.pad(align, 4);
        let at = self.at();
        self.u32(len as u32);
        self.buf.extend_from_slice(payload);
        at
    }
}

/// Encodes an adapter file holding `params` (in their order).
pub fn encode(params: &[Parameter], adapter_version: i32, model_version: i32) -> Vec<u8> {
    let mut w = Writer { buf: Vec::new() };
    w.u32(0); // the root table's offset, patched below
    w.buf.extend_from_slice(IDENTIFIER);
    let vt = w.vtable();
    let root = w.table(vt);
    w.patch(0, root);
    w.i32(FORMAT_VERSION);
    w.i32(adapter_version);
    w.i32(model_version);
    let params_field = w.at();
    w.u32(0);
    // The vector of Parameter tables: one uoffset per element, patched as each is written.
    w.pad(4, 0);
    let vector = w.at();
    w.u32(params.len() as u32);
    let slots: Vec<usize> = params
        .iter()
        .map(|_| {
            let s = w.at();
            w.u32(0);
            s
        })
        .collect();
    w.patch(params_field, vector);
    for (p, slot) in params.iter().zip(slots) {
        let vt = w.vtable();
        let table = w.table(vt);
        w.patch(slot, table);
        let (name_f, dims_f) = (table + 4, table + 8);
        w.u32(0);
        w.u32(0);
        w.i32(p.data_type);
        let raw_f = w.at();
        w.u32(0);
        // A string: length, bytes, a NUL that the length does not count.
        let mut name = p.name.as_bytes().to_vec();
        name.push(0);
        let s = w.vector(4, p.name.len(), &name);
        w.patch(name_f, s);
        let dims: Vec<u8> = p.dims.iter().flat_map(|d| d.to_le_bytes()).collect();
        let d = w.vector(8, p.dims.len(), &dims);
        w.patch(dims_f, d);
        let r = w.vector(8, p.raw.len(), &p.raw);
        w.patch(raw_f, r);
    }
    w.pad(8, 0);
    w.buf
}

/// What [`decode`] reads back: the versions and each parameter.
#[derive(Clone, Debug, PartialEq)]
pub struct Decoded {
    pub format_version: i32,
    pub adapter_version: i32,
    pub model_version: i32,
    pub params: Vec<Parameter>,
}

/// Reads an adapter file (any FlatBuffer layout of the schema, not only ours), bounds-checked:
/// `tailor inspect` lists a package's adapters with it. `None` when it is not one.
pub fn decode(buf: &[u8]) -> Option<Decoded> {
    let r = Reader { buf };
    if buf.get(4..8)? != IDENTIFIER {
        return None;
    }
    let root = r.u32(0)? as usize;
    let fields = r.table(root)?;
    let int = |i: usize| -> Option<i32> { fields.get(i).copied().flatten().map_or(Some(0), |at| r.i32(at)) };
    let mut params = Vec::new();
    if let Some(Some(pf)) = fields.get(3) {
        let vec = r.deref(*pf)?;
        let n = r.u32(vec)? as usize;
        for i in 0..n {
            let slot = vec + 4 + 4 * i;
            let t = r.deref(slot)?;
            let f = r.table(t)?;
            let field = |k: usize| f.get(k).copied().flatten();
            let name = match field(0) {
                Some(at) => {
                    let s = r.deref(at)?;
                    let len = r.u32(s)? as usize;
                    String::from_utf8(r.bytes(s + 4, len)?.to_vec()).ok()?
                }
                None => String::new(),
            };
            let dims = match field(1) {
                Some(at) => {
                    let v = r.deref(at)?;
                    let len = r.u32(v)? as usize;
                    (0..len).map(|k| r.bytes(v + 4 + 8 * k, 8).map(|b| i64::from_le_bytes(b.try_into().unwrap()))).collect::<Option<Vec<_>>>()?
                }
                None => Vec::new(),
            };
            let data_type = field(2).map_or(Some(0), |at| r.i32(at))?;
            let raw = match field(3) {
                Some(at) => {
                    let v = r.deref(at)?;
                    let len = r.u32(v)? as usize;
                    r.bytes(v + 4, len)?.to_vec()
                }
                None => Vec::new(),
            };
            params.push(Parameter { name, dims, data_type, raw });
        }
    }
    Some(Decoded { format_version: int(0)?, adapter_version: int(1)?, model_version: int(2)?, params })
}

/// Bounds-checked little-endian reads.
struct Reader<'b> {
    buf: &'b [u8],
}

impl Reader<'_> {
    fn bytes(&self, at: usize, n: usize) -> Option<&[u8]> {
        self.buf.get(at..at.checked_add(n)?)
    }
    fn u32(&self, at: usize) -> Option<u32> {
        Some(u32::from_le_bytes(self.bytes(at, 4)?.try_into().ok()?))
    }
    fn i32(&self, at: usize) -> Option<i32> {
        Some(i32::from_le_bytes(self.bytes(at, 4)?.try_into().ok()?))
    }
    fn u16(&self, at: usize) -> Option<u16> {
        Some(u16::from_le_bytes(self.bytes(at, 2)?.try_into().ok()?))
    }
    /// Follows the uoffset at `at`.
    fn deref(&self, at: usize) -> Option<usize> {
        at.checked_add(self.u32(at)? as usize)
    }
    /// The absolute position of each field of the table at `table` (`None`: absent).
    fn table(&self, table: usize) -> Option<Vec<Option<usize>>> {
        let vt = (table as i64).checked_sub(self.i32(table)? as i64)?;
        let vt = usize::try_from(vt).ok()?;
        let size = self.u16(vt)? as usize;
        if size < 4 {
            return None;
        }
        (0..(size - 4) / 2).map(|i| self.u16(vt + 4 + 2 * i).map(|o| (o != 0).then(|| table + o as usize))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn param(name: &str, dims: Vec<i64>, raw: Vec<u8>) -> Parameter {
        Parameter { name: name.into(), dims, data_type: 1, raw }
    }

    #[test]
    fn header_identifier_and_alignment() {
        let params = vec![param("a.lora_A.weight", vec![3, 2], (0..24).collect()), param("bb", vec![2, 1], (0..8).collect())];
        let buf = encode(&params, 7, 9);
        assert_eq!(&buf[4..8], b"TORT");
        let d = decode(&buf).unwrap();
        assert_eq!((d.format_version, d.adapter_version, d.model_version), (1, 7, 9));
        assert_eq!(d.params, params);
        // Every payload of dims and raw_data starts 8-aligned.
        for p in &params {
            let at = buf.windows(p.raw.len()).position(|w| w == p.raw.as_slice()).unwrap();
            assert_eq!(at % 8, 0, "{}", p.name);
        }
    }

    #[test]
    fn a_wrong_identifier_or_truncated_file_is_not_an_adapter() {
        let buf = encode(&[param("x", vec![1], vec![0; 4])], 1, 1);
        let mut bad = buf.clone();
        bad[4] = b'X';
        assert!(decode(&bad).is_none());
        for cut in [3, 8, 20, buf.len() / 2] {
            assert!(decode(&buf[..cut]).is_none(), "cut at {cut}");
        }
    }
}
