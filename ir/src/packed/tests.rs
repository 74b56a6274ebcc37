use super::pack;
use super::*;
use crate::quant::Bits;
use crate::{MappedFile, QuantForm, QuantGroup, QuantPart, Recipe};

/// One layer's integers as the tests chose them, and the layer read back from a file.
struct Layer {
    w: Arc<PackedWeight>,
    /// `[K, N]`, checkpoint row order.
    codes: Vec<u8>,
    /// `[G, N]`.
    zeros: Vec<u8>,
    /// `[G, N]`, f16 values.
    scales: Vec<f32>,
    /// Group of each checkpoint row.
    g_idx: Vec<u32>,
    _dir: tempfile::TempDir,
}

/// A small deterministic generator (the tests need no crate for it).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> u32 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 33) as u32
    }
}

#[derive(Clone, Copy)]
struct Spec {
    format: PackedFormat,
    bits: Bits,
    k: usize,
    n: usize,
    group: Option<usize>,
    symmetric: bool,
    act_order: bool,
}

fn spec(format: PackedFormat, bits: Bits, k: usize, n: usize, group: Option<usize>, symmetric: bool, act_order: bool) -> Spec {
    Spec { format, bits, k, n, group, symmetric, act_order }
}

fn u32_bytes(v: &[u32]) -> Vec<u8> {
    v.iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// Writes a layer in `s`'s format with random codes, zero points (mid when symmetric; never 0
/// in v1, which cannot store it), f16 scales and (act-order) a shuffled g_idx.
fn layer(s: Spec, seed: u64) -> Layer {
    let mut rng = Lcg(seed);
    let (k, n) = (s.k, s.n);
    let gs = s.group.unwrap_or(k);
    let groups = k.div_ceil(gs);
    let maxq = s.bits.max_q() as u32;
    let codes: Vec<u8> = (0..k * n).map(|_| (rng.next() % (maxq + 1)) as u8).collect();
    let zeros: Vec<u8> = (0..groups * n)
        .map(|_| if s.symmetric { s.bits.mid() } else { (1 + rng.next() % maxq) as u8 })
        .collect();
    let scales: Vec<f32> = (0..groups * n).map(|_| half::f16::from_f32((rng.next() % 1000) as f32 / 3000.0 + 0.01).to_f32()).collect();
    let mut g_idx: Vec<u32> = (0..k as u32).map(|r| r / gs as u32).collect();
    if s.act_order {
        // Group i/gs for the i-th row of a random permutation, as GPTQ's act-order writes it.
        let mut perm: Vec<u32> = (0..k as u32).collect();
        for i in (1..k).rev() {
            perm.swap(i, rng.next() as usize % (i + 1));
        }
        for (i, &r) in perm.iter().enumerate() {
            g_idx[r as usize] = (i / gs) as u32;
        }
    }
    let bits = s.bits.count();
    let (qweight, qweight_shape, qzeros) = match s.format {
        PackedFormat::AwqGemm => (pack::awq(&codes, k, n), vec![k, n / 8], pack::awq(&zeros, groups, n)),
        f => (pack::gptq_qweight(&codes, k, n, bits), vec![k * bits / 32, n], pack::gptq_qzeros(&zeros, groups, n, bits, f == PackedFormat::GptqV1)),
    };
    let per = 32 / bits;
    let (qw, qz) = (u32_bytes(&qweight), u32_bytes(&qzeros));
    let sc: Vec<u8> = scales.iter().flat_map(|v| half::f16::from_f32(*v).to_le_bytes()).collect();
    let gi: Vec<u8> = g_idx.iter().flat_map(|v| (*v as i32).to_le_bytes()).collect();
    use safetensors::tensor::TensorView;
    use safetensors::Dtype;
    let mut views = vec![
        ("l.qweight", TensorView::new(Dtype::I32, qweight_shape, &qw).unwrap()),
        ("l.qzeros", TensorView::new(Dtype::I32, vec![groups, n / per], &qz).unwrap()),
        ("l.scales", TensorView::new(Dtype::F16, vec![groups, n], &sc).unwrap()),
    ];
    if s.format != PackedFormat::AwqGemm {
        views.push(("l.g_idx", TensorView::new(Dtype::I32, vec![k], &gi).unwrap()));
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("model.safetensors");
    safetensors::serialize_to_file(views, None, &path).unwrap();
    let file = MappedFile::open(&path).unwrap();
    let t = file.safetensors_tensors().unwrap();
    let get = |name: &str| t.iter().find(|x| x.name == name).cloned();
    let tensors = PackedTensors { qweight: get("l.qweight").unwrap(), qzeros: get("l.qzeros").unwrap(), scales: get("l.scales").unwrap(), g_idx: get("l.g_idx") };
    let settings = PackedSettings { format: s.format, bits: s.bits, group_size: s.group, symmetric: s.symmetric };
    let w = PackedWeight::new("l", settings, tensors).unwrap();
    Layer { w, codes, zeros, scales, g_idx, _dir: dir }
}

/// Value `i` of a MatMulNBits-packed row of `bits`.
fn unpack(bytes: &[u8], bits: Bits, i: usize) -> u8 {
    match bits {
        Bits::Int8 => bytes[i],
        Bits::Int4 => (bytes[i / 2] >> (4 * (i % 2))) & 0xf,
    }
}

fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

/// The MatMulNBits parts hold the checkpoint's codes, scales and zero points, in the row
/// order the weight gives (act-order: sorted by group).
fn check_nbits(l: &Layer, s: Spec) {
    let (k, n) = (s.k, s.n);
    let gs = s.group.unwrap_or(k);
    let recipe = Recipe::Packed(Arc::clone(&l.w));
    let stack = PackedStack::from_recipe("l", &recipe).unwrap().unwrap();
    let g = QuantGroup::from_packed("l", recipe, stack, DType::F32, QuantForm::NBits).unwrap();
    let settings = g.settings();
    assert_eq!(settings.symmetric(), s.symmetric);
    let bs = settings.block_size();
    assert!(gs.is_multiple_of(bs) || bs > k, "block {bs} inside groups of {gs}");
    let b = Recipe::quantized(&g, QuantPart::Data).materialize().unwrap();
    let scales = f32s(&Recipe::quantized(&g, QuantPart::Scales).materialize().unwrap());
    let zp = g.has(QuantPart::ZeroPoints).then(|| Recipe::quantized(&g, QuantPart::ZeroPoints).materialize().unwrap());
    let layout = settings.layout(k).unwrap();
    let order: Vec<usize> = match l.w.order() {
        Some(o) => o.iter().map(|&r| r as usize).collect(),
        None => (0..k).collect(),
    };
    assert_eq!(s.act_order, l.w.order().is_some());
    for col in 0..n {
        let bcol = &b[col * layout.b_per_column()..(col + 1) * layout.b_per_column()];
        for (i, &row) in order.iter().enumerate() {
            let (blk, pos) = (i / bs, i % bs);
            let q = unpack(&bcol[blk * layout.blob_size()..], s.bits, pos);
            assert_eq!(q, l.codes[row * n + col], "code of column {col}, row {i} (checkpoint row {row})");
            let grp = l.g_idx[row] as usize;
            assert_eq!(scales[col * layout.k_blocks() + blk], l.scales[grp * n + col]);
            if let Some(zp) = &zp {
                let z = unpack(&zp[col * layout.zero_points_per_column()..], s.bits, blk);
                assert_eq!(z, l.zeros[grp * n + col], "zero point of column {col}, block {blk}");
            }
        }
    }
    // Streamed in ranges of a few rows, the parts are the same bytes.
    for (a, e) in g.ranges(3 * k * 4) {
        for (part, bytes) in g.compute(a, e).unwrap() {
            let at = g.part_offset(part, a);
            let whole = Recipe::quantized(&g, part).materialize().unwrap();
            assert_eq!(&whole[at..at + bytes.len()], &bytes[..], "{part:?} of rows {a}..{e}");
        }
    }
    assert_eq!(g.error().max_abs, 0.0, "f16 scales are exact in f32");
}

/// The float view is `scale * (q - zero)` of each row's group, in checkpoint order.
fn check_dequantized(l: &Layer, s: Spec) {
    let (k, n) = (s.k, s.n);
    let w = f32s(&Recipe::Packed(Arc::clone(&l.w)).materialize().unwrap());
    for col in 0..n {
        for row in 0..k {
            let g = l.g_idx[row] as usize;
            let want = l.scales[g * n + col] * (l.codes[row * n + col] as f32 - l.zeros[g * n + col] as f32);
            assert_eq!(w[col * k + row], want, "[{col}, {row}]");
        }
    }
}

#[test]
fn every_format_keeps_the_checkpoint_integers() {
    use PackedFormat::*;
    let cases = [
        spec(GptqV1, Bits::Int4, 64, 24, Some(32), true, false),
        spec(GptqV1, Bits::Int4, 128, 16, Some(32), false, false),
        spec(GptqV2, Bits::Int4, 96, 8, Some(32), false, false),
        spec(GptqV1, Bits::Int8, 64, 12, Some(16), false, false),
        spec(GptqV2, Bits::Int8, 64, 8, None, true, false),
        spec(GptqV1, Bits::Int4, 128, 16, Some(32), true, true),
        spec(GptqV2, Bits::Int4, 128, 16, Some(64), false, true),
        spec(AwqGemm, Bits::Int4, 64, 24, Some(32), false, false),
        // Group 48: blocks of 16 inside it; K not a multiple of the group (a short last group).
        spec(GptqV1, Bits::Int4, 120, 8, Some(48), false, false),
    ];
    for (i, s) in cases.into_iter().enumerate() {
        let l = layer(s, 11 + i as u64);
        check_dequantized(&l, s);
        check_nbits(&l, s);
    }
}

/// DequantizeLinear's data is `[K, N]` packed along N: symmetric blocks signed (q - mid),
/// asymmetric ones unsigned with their zero points; act-order rows in the sorted order.
#[test]
fn the_dequantize_linear_form_holds_the_same_integers() {
    use PackedFormat::*;
    for (i, s) in [
        spec(GptqV1, Bits::Int4, 64, 16, Some(32), true, false),
        spec(GptqV2, Bits::Int4, 128, 8, Some(32), false, true),
        spec(AwqGemm, Bits::Int4, 64, 16, Some(32), false, false),
        spec(GptqV1, Bits::Int8, 64, 8, Some(32), false, false),
    ]
    .into_iter()
    .enumerate()
    {
        let l = layer(s, 100 + i as u64);
        let recipe = Recipe::Packed(Arc::clone(&l.w));
        let stack = PackedStack::from_recipe("l", &recipe).unwrap().unwrap();
        let g = QuantGroup::from_packed("l", recipe, stack, DType::F32, QuantForm::Dq).unwrap();
        let data = Recipe::quantized(&g, QuantPart::Data).materialize().unwrap();
        let order: Vec<usize> = l.w.order().map(|o| o.iter().map(|&r| r as usize).collect()).unwrap_or_else(|| (0..s.k).collect());
        let flip = if s.symmetric { s.bits.mid() } else { 0 };
        for (i, &row) in order.iter().enumerate() {
            for col in 0..s.n {
                assert_eq!(unpack(&data, s.bits, i * s.n + col) ^ flip, l.codes[row * s.n + col], "{s:?}: [{i}, {col}]", s = s.format);
            }
        }
        let scales = f32s(&Recipe::quantized(&g, QuantPart::Scales).materialize().unwrap());
        let bs = g.settings().block_size();
        assert_eq!(scales[s.n + 3], l.scales[(l.g_idx[order[bs]] as usize) * s.n + 3]);
    }
}

#[test]
fn stacks_follow_row_slices_and_concatenations() {
    let s = spec(PackedFormat::GptqV1, Bits::Int4, 64, 16, Some(32), false, false);
    let (a, b) = (layer(s, 1), layer(s, 2));
    let (ra, rb) = (Recipe::Packed(Arc::clone(&a.w)), Recipe::Packed(Arc::clone(&b.w)));
    // Rows 8..16 of b, then all of a: a fused projection's part packed beside another layer.
    let r = Recipe::concat(vec![rb.clone().slice(0, 8, 16).cast(DType::F16), ra.clone().cast(DType::F16)], 0).unwrap();
    let stack = PackedStack::from_recipe("qkv", &r).unwrap().unwrap();
    assert_eq!((stack.n(), stack.k()), (24, 64));
    let g = QuantGroup::from_packed("qkv", r, stack, DType::F16, QuantForm::NBits).unwrap();
    let data = Recipe::quantized(&g, QuantPart::Data).materialize().unwrap();
    let col = |c: usize| &data[c * 32..(c + 1) * 32];
    assert_eq!(unpack(col(0), Bits::Int4, 5), b.codes[5 * 16 + 8]);
    assert_eq!(unpack(col(8), Bits::Int4, 7), a.codes[7 * 16]);
    let scales: Vec<f32> = Recipe::quantized(&g, QuantPart::Scales).materialize().unwrap().chunks_exact(2).map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32()).collect();
    assert_eq!(scales[9 * 2 + 1], a.scales[16 + 1]);
    // Float rows among them, or a transpose inside, cannot keep the integers: an error, not a
    // silent requantization.
    let float = Recipe::from_f32("f", vec![4, 64], &[0.5; 256]);
    let e = PackedStack::from_recipe("mixed", &Recipe::concat(vec![ra.clone(), float.clone()], 0).unwrap()).unwrap().unwrap_err().to_string();
    assert!(e.contains("mixed") && e.contains("cannot keep their integers"), "{e}");
    assert!(PackedStack::from_recipe("f", &float).is_none(), "a float weight is not a stack");
    assert!(PackedStack::from_recipe("t", &ra.clone().transpose(vec![1, 0])).unwrap().is_err());
    // Layers of different row orders cannot share one weight.
    let ao = layer(spec(PackedFormat::GptqV1, Bits::Int4, 64, 16, Some(32), false, true), 3);
    let e = PackedStack::from_recipe("qk", &Recipe::concat(vec![ra, Recipe::Packed(Arc::clone(&ao.w))], 0).unwrap()).unwrap().unwrap_err().to_string();
    assert!(e.contains("act-order"), "{e}");
}

/// Expert stacks: per-expert layers stacked into `[E, N, K]`, gate and up interleaved row by
/// row (com.microsoft MoE's fc1), viewed `[E * 2N, K]`: every written row is its layer's own.
#[test]
fn stacks_follow_expert_stacks_and_interleaved_rows() {
    let s = spec(PackedFormat::GptqV1, Bits::Int4, 64, 16, Some(32), true, false);
    let experts = 3;
    let gate: Vec<Layer> = (0..experts).map(|e| layer(s, 10 + e as u64)).collect();
    let up: Vec<Layer> = (0..experts).map(|e| layer(s, 20 + e as u64)).collect();
    let stack_of = |ls: &[Layer]| Recipe::concat(ls.iter().map(|l| Recipe::Packed(Arc::clone(&l.w)).reshape(vec![1, 16, 64])).collect(), 0).unwrap();
    let fc1 = Recipe::interleave(vec![stack_of(&gate), stack_of(&up)], 1).unwrap();
    assert_eq!(fc1.shape(), vec![experts, 32, 64]);
    let rows = fc1.clone().reshape(vec![experts * 32, 64]);
    let stack = PackedStack::from_recipe("fc1", &rows).unwrap().unwrap();
    assert_eq!((stack.n(), stack.k(), stack.settings().block_size()), (experts * 32, 64, 32));
    let g = QuantGroup::from_packed("fc1", rows.clone(), stack, DType::F32, QuantForm::NBits).unwrap();
    let data = Recipe::quantized(&g, QuantPart::Data).materialize().unwrap();
    for e in 0..experts {
        for r in 0..16 {
            for (j, l) in [&gate[e], &up[e]].into_iter().enumerate() {
                let out = e * 32 + 2 * r + j;
                let col = &data[out * 32..(out + 1) * 32];
                for i in [0, 31, 63] {
                    assert_eq!(unpack(col, Bits::Int4, i), l.codes[i * 16 + r], "expert {e}, row {r} of {}", ["gate", "up"][j]);
                }
            }
        }
    }
    // The float view is the same rows dequantized.
    let float = f32s(&rows.materialize().unwrap());
    let one = f32s(&Recipe::Packed(Arc::clone(&up[1].w)).materialize().unwrap());
    assert_eq!(&float[(32 + 2 * 5 + 1) * 64..(32 + 2 * 5 + 2) * 64], &one[5 * 64..6 * 64]);
    // A slice of experts keeps its rows too; a transpose of the stack does not.
    let two = PackedStack::from_recipe("two", &fc1.clone().slice(0, 1, 3).reshape(vec![64, 64])).unwrap().unwrap();
    assert_eq!(two.n(), 64);
    assert!(PackedStack::from_recipe("t", &fc1.transpose(vec![0, 2, 1])).unwrap().is_err());
    // A smaller block dividing the groups is exact; one that does not divide is refused.
    let half = PackedStack::from_recipe("fc1", &rows).unwrap().unwrap().with_block(16).unwrap();
    assert_eq!(half.settings().block_size(), 16);
    let g16 = QuantGroup::from_packed("fc1", rows.clone(), half, DType::F32, QuantForm::NBits).unwrap();
    let scales = f32s(&Recipe::quantized(&g16, QuantPart::Scales).materialize().unwrap());
    assert_eq!(scales.len(), experts * 32 * 4);
    assert_eq!(scales[1], scales[0], "two blocks of 16 in one group of 32 share its scale");
    assert!(PackedStack::from_recipe("fc1", &rows).unwrap().unwrap().with_block(64).is_err());
    // Recipes that do not add up (unchecked when built) are refused, not a panic.
    let one = || Recipe::Packed(Arc::clone(&gate[0].w));
    for bad in [one().reshape(vec![5, 64]), one().reshape(vec![1, 16, 64]).slice(1, 10, 20), one().reshape(vec![1, 16, 64]).slice(1, 9, 3)] {
        assert!(PackedStack::from_recipe("bad", &bad).unwrap().is_err(), "{}", bad.describe());
    }
}

#[test]
fn float_views_of_packed_layers_stream_by_ranges_as_they_materialize() {
    // An interleaved stack of two experts' float views, read in ranges that cut rows.
    let s = spec(PackedFormat::GptqV1, Bits::Int4, 64, 16, Some(32), true, false);
    let (a, b) = (layer(s, 41), layer(s, 42));
    let stack = Recipe::interleave(vec![Recipe::Packed(Arc::clone(&a.w)), Recipe::Packed(Arc::clone(&b.w))], 0).unwrap();
    assert!(stack.is_streamable());
    let whole = stack.materialize().unwrap();
    let n = stack.numel();
    for step in [1, 7, 64, 100, n] {
        let mut got = vec![0u8; n * 4];
        let mut at = 0;
        while at < n {
            let end = (at + step).min(n);
            stack.read_into(at, end, &mut got[at * 4..end * 4]).unwrap();
            at = end;
        }
        assert_eq!(got, whole, "ranges of {step}");
    }
}

#[test]
fn bad_checkpoints_are_refused_with_the_tensor_named() {
    // Rebuild a layer's tensors with one thing changed.
    let s = spec(PackedFormat::GptqV1, Bits::Int4, 64, 16, Some(32), true, false);
    let l = layer(s, 5);
    let t = l.w.tensors().clone();
    let settings = l.w.settings();
    // sym: true, but the zeros of an asymmetric layer.
    let asym = layer(PackedFormat::GptqV1.spec_asym(), 6);
    let e = PackedWeight::new("l", settings, PackedTensors { qzeros: asym.w.tensors().qzeros.clone(), ..t.clone() }).unwrap_err().to_string();
    assert!(e.contains("sym: true") && e.contains("l.qzeros"), "{e}");
    // A wrong group size for the scales' shape.
    let e = PackedWeight::new("l", PackedSettings { group_size: Some(16), ..settings }, t.clone()).unwrap_err().to_string();
    assert!(e.contains("group size 16") && e.contains("l.qzeros"), "{e}");
    // AWQ is 4-bit only.
    let e = PackedWeight::new("l", PackedSettings { format: PackedFormat::AwqGemm, bits: Bits::Int8, ..settings }, t).unwrap_err().to_string();
    assert!(e.contains("4-bit"), "{e}");
}

impl PackedFormat {
    fn spec_asym(self) -> Spec {
        spec(self, Bits::Int4, 64, 16, Some(32), false, false)
    }
}

/// GPTQ v1 stores zero - 1: a zero point of 0 is stored as all ones and reads back as 16,
/// which no 4-bit code holds.
#[test]
fn a_v1_zero_point_underflow_is_refused() {
    let s = spec(PackedFormat::GptqV1, Bits::Int4, 64, 16, Some(32), false, false);
    let l = layer(s, 9);
    let mut zeros = l.zeros.clone();
    zeros[3] = 0;
    let qz = u32_bytes(&pack::gptq_qzeros(&zeros, 2, 16, 4, true));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("z.safetensors");
    let views = vec![("l.qzeros", safetensors::tensor::TensorView::new(safetensors::Dtype::I32, vec![2, 2], &qz).unwrap())];
    safetensors::serialize_to_file(views, None, &path).unwrap();
    let file = MappedFile::open(&path).unwrap();
    let qzeros = file.safetensors_tensors().unwrap().remove(0);
    let e = PackedWeight::new("l", l.w.settings(), PackedTensors { qzeros: qzeros.clone(), ..l.w.tensors().clone() }).unwrap_err().to_string();
    assert!(e.contains("group 0, column 3") && e.contains("gptq_v2"), "{e}");
    // The same bytes read as v2 are a zero point of 15: fine.
    let v2 = PackedSettings { format: PackedFormat::GptqV2, ..l.w.settings() };
    assert!(PackedWeight::new("l", v2, PackedTensors { qzeros, ..l.w.tensors().clone() }).is_ok());
}

/// Act-order whose groups are not all `group_size` rows after sorting cannot be blocked.
#[test]
fn an_irregular_g_idx_is_refused() {
    let l = layer(spec(PackedFormat::GptqV1, Bits::Int4, 64, 16, Some(32), false, false), 4);
    let mut g: Vec<i32> = (0..64).map(|r| r / 32).collect();
    g.swap(0, 40);
    g[1] = 1; // group 0 has 30 rows, group 1 34
    let bytes: Vec<u8> = g.iter().flat_map(|v| v.to_le_bytes()).collect();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g.safetensors");
    safetensors::serialize_to_file(vec![("l.g_idx", safetensors::tensor::TensorView::new(safetensors::Dtype::I32, vec![64], &bytes).unwrap())], None, &path).unwrap();
    let g_idx = MappedFile::open(&path).unwrap().safetensors_tensors().unwrap().remove(0);
    let e = PackedWeight::new("l", l.w.settings(), PackedTensors { g_idx: Some(g_idx), ..l.w.tensors().clone() }).unwrap_err().to_string();
    assert!(e.contains("not all 32 rows"), "{e}");
}

/// A GGUF tensor of `rows` rows of `k` values of type `ty`, random blocks with finite f16
/// scales, in a file; returns the weight read with `order` and the raw row bytes.
fn ggml_layer(ty: crate::gguf::GgmlType, rows: usize, k: usize, order: Option<Arc<[u32]>>, seed: u64) -> (Arc<PackedWeight>, tempfile::TempDir) {
    let (per, size) = ty.block().unwrap();
    let mut rng = Lcg(seed);
    let mut bytes = Vec::new();
    for _ in 0..rows * k / per {
        let mut b: Vec<u8> = (0..size).map(|_| rng.next() as u8).collect();
        // The f16 fields: d (and dmin / m) small and finite; Q6_K keeps d at the end.
        let halves: &[usize] = match ty {
            crate::gguf::GgmlType::Q6_K => &[208],
            crate::gguf::GgmlType::Q4_1 | crate::gguf::GgmlType::Q4_K | crate::gguf::GgmlType::Q5_1 | crate::gguf::GgmlType::Q5_K => &[0, 2],
            crate::gguf::GgmlType::Q3_K => &[108],
            crate::gguf::GgmlType::Q2_K => &[80, 82],
            _ => &[0],
        };
        for &h in halves {
            let v = half::f16::from_f32((rng.next() % 1000) as f32 / 20000.0 - 0.02);
            b[h..h + 2].copy_from_slice(&v.to_le_bytes());
        }
        bytes.extend(b);
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.bin");
    std::fs::write(&path, &bytes).unwrap();
    let file = MappedFile::open(&path).unwrap();
    let st = SourceTensor { name: "blk.0.attn_q.weight".into(), file, dtype: DType::U8, shape: vec![bytes.len()], offset: 0, len: bytes.len() };
    (PackedWeight::ggml("blk.0.attn_q.weight", st, ty, rows, k, order).unwrap(), dir)
}

/// GGUF blocks written as MatMulNBits: dequantizing the written parts the way the graph does
/// (`scale * (q - mid)`, plus the per-block offset for the types with a min) gives the
/// weight's own dequantization, rows in the order given; the forms without a min have no zero
/// points, those with one (Q4_1, Q5_1, Q4_K, Q5_K, Q2_K) offsets `[N, k_blocks]`; the
/// DequantizeLinear form holds the same codes against the mid point, and the offsets
/// `[k_blocks, N]`.
#[test]
fn ggml_blocks_are_written_with_their_integers() {
    use crate::gguf::GgmlType as T;
    for ty in [T::Q4_0, T::Q4_1, T::Q5_0, T::Q5_1, T::Q8_0, T::Q2_K, T::Q3_K, T::Q4_K, T::Q5_K, T::Q6_K, T::IQ4_NL, T::IQ4_XS] {
        let (rows, k) = (8, 512);
        let order: Arc<[u32]> = (0..rows as u32).rev().collect();
        let (w, _dir) = ggml_layer(ty, rows, k, Some(Arc::clone(&order)), 7 + ty.0 as u64);
        let (plain, _dir2) = ggml_layer(ty, rows, k, None, 7 + ty.0 as u64);
        let want = f32s(&Recipe::Packed(Arc::clone(&w)).materialize().unwrap());
        let file_order = f32s(&Recipe::Packed(Arc::clone(&plain)).materialize().unwrap());
        for r in 0..rows {
            assert_eq!(want[r * k..(r + 1) * k], file_order[order[r] as usize * k..(order[r] as usize + 1) * k], "{ty}: row {r} is file row {}", order[r]);
        }
        let recipe = Recipe::Packed(Arc::clone(&w));
        let stack = PackedStack::from_recipe("w", &recipe).unwrap().unwrap();
        let float_zeros = stack.float_zeros();
        assert_eq!(float_zeros, matches!(ty, T::Q4_1 | T::Q5_1 | T::Q4_K | T::Q5_K | T::Q2_K), "{ty}");
        let g = QuantGroup::from_packed("w", recipe.clone(), stack, DType::F32, QuantForm::NBits).unwrap();
        let s = g.settings();
        let bits = s.bits();
        let bs = s.block_size();
        let b = Recipe::quantized(&g, QuantPart::Data).materialize().unwrap();
        let scales = f32s(&Recipe::quantized(&g, QuantPart::Scales).materialize().unwrap());
        assert_eq!(g.has(QuantPart::ZeroPoints), float_zeros, "{ty}");
        let zeros = float_zeros.then(|| f32s(&Recipe::quantized(&g, QuantPart::ZeroPoints).materialize().unwrap()));
        if float_zeros {
            assert_eq!((g.dtype(QuantPart::ZeroPoints), g.shape(QuantPart::ZeroPoints)), (DType::F32, vec![rows, k / bs]));
        }
        let layout = s.layout(k).unwrap();
        let kb = layout.k_blocks();
        for r in 0..rows {
            let col = &b[r * layout.b_per_column()..(r + 1) * layout.b_per_column()];
            for i in 0..k {
                let (blk, pos) = (i / bs, i % bs);
                let q = unpack(&col[blk * layout.blob_size()..], bits, pos) as f32;
                // The offset form: scale * (q - mid) + offset.
                let offset = zeros.as_ref().map_or(0.0, |z| z[r * kb + blk]);
                let got = scales[r * kb + blk] * (q - bits.mid() as f32) + offset;
                let exact = want[r * k + i];
                // Exact for the types without a min; to f32 rounding of the zero otherwise.
                let tol = if float_zeros { 2e-6 * (1.0 + exact.abs()) } else { 0.0 };
                assert!((got - exact).abs() <= tol, "{ty}: [{r}, {i}] {got} vs {exact}");
            }
        }
        // DequantizeLinear: `[K, N]` codes against the mid point (symmetric: signed, `q ^ mid`)
        // and `[k_blocks, N]` scales; the types with a min add `[k_blocks, N]` offsets (the
        // offset form after the MatMul).
        let dq = QuantGroup::from_packed("w", recipe, PackedStack::from_recipe("w", &Recipe::Packed(w)).unwrap().unwrap(), DType::F32, QuantForm::Dq).unwrap();
        assert!(dq.dq_settings().symmetric(), "{ty}");
        let data = Recipe::quantized(&dq, QuantPart::Data).materialize().unwrap();
        let dq_scales = f32s(&Recipe::quantized(&dq, QuantPart::Scales).materialize().unwrap());
        let offsets = float_zeros.then(|| f32s(&Recipe::quantized(&dq, QuantPart::ZeroPoints).materialize().unwrap()));
        if float_zeros {
            assert_eq!((dq.dtype(QuantPart::ZeroPoints), dq.shape(QuantPart::ZeroPoints)), (DType::F32, vec![k / bs, rows]));
        }
        for i in 0..k {
            for r in 0..rows {
                let q = (unpack(&data, bits, i * rows + r) ^ bits.mid()) as f32 - bits.mid() as f32;
                let blk = i / bs;
                let got = dq_scales[blk * rows + r] * q + offsets.as_ref().map_or(0.0, |o| o[blk * rows + r]);
                let exact = want[r * k + i];
                let tol = if float_zeros { 2e-6 * (1.0 + exact.abs()) } else { 0.0 };
                assert!((got - exact).abs() <= tol, "{ty} DequantizeLinear: [{i}, {r}] {got} vs {exact}");
            }
        }
    }
}

/// The stored form the packing rules compare (`stored_form`): bits, block and zero points of
/// each ggml type's MatMulNBits form and of GPTQ/AWQ settings; `float` for a recipe reading no
/// pre-quantized layer; one form through transposes and concatenations of layers that share
/// it; `mixed: ...` when a concatenation mixes forms or float rows.
#[test]
fn stored_forms_name_bits_block_and_zero_points() {
    use crate::gguf::GgmlType as T;
    let form = |ty| {
        let (w, _dir) = ggml_layer(ty, 4, 256, None, 3);
        let r = Recipe::Packed(w).transpose(vec![1, 0]);
        (r.stored_form(), r.stored_as())
    };
    assert_eq!(form(T::Q4_K), ("4-bit, block 32, float zero points".to_string(), "Q4_K (4-bit, block 32, float zero points)".to_string()));
    assert_eq!(form(T::Q4_1).0, "4-bit, block 32, float zero points");
    assert_eq!(form(T::Q4_0).0, "4-bit, block 32, mid zero point");
    assert_eq!(form(T::Q6_K).0, "8-bit, block 16, mid zero point");
    assert_eq!(form(T::Q8_0).0, "8-bit, block 32, mid zero point");
    assert_eq!(form(T::Q5_0).0, "8-bit, block 32, mid zero point", "Q5_0 and Q8_0 write the same form");
    let gptq = layer(spec(PackedFormat::GptqV1, Bits::Int4, 64, 16, Some(32), false, false), 1);
    assert_eq!(Recipe::Packed(Arc::clone(&gptq.w)).stored_form(), "4-bit, block 32, integer zero points");
    assert_eq!(Recipe::Packed(Arc::clone(&gptq.w)).stored_as(), "gptq (4-bit, block 32, integer zero points)");
    let sym = layer(spec(PackedFormat::GptqV2, Bits::Int8, 64, 16, Some(32), true, true), 2);
    let fingerprint = format!("{:08x}", super::order_fingerprint(sym.w.order().unwrap()));
    assert_eq!(Recipe::Packed(Arc::clone(&sym.w)).stored_form(), format!("8-bit, block 32, mid zero point, act-order {fingerprint}"));
    // Act-order layers share a form only with the same row order: others do not stack (they
    // would fail to be written as one MatMulNBits), so fuse.pack_qkv leaves them apart.
    let same_order = layer(spec(PackedFormat::GptqV2, Bits::Int8, 64, 16, Some(32), true, true), 2);
    let other_order = layer(spec(PackedFormat::GptqV2, Bits::Int8, 64, 16, Some(32), true, true), 3);
    assert_eq!(same_order.w.order(), sym.w.order(), "one seed, one shuffle");
    assert_ne!(other_order.w.order(), sym.w.order());
    let form = |l: &Layer| Recipe::Packed(Arc::clone(&l.w)).stored_form();
    assert_eq!(form(&same_order), form(&sym));
    assert_ne!(form(&other_order), form(&sym));
    let float = Recipe::from_f32("w", vec![256, 4], &[0.0; 1024]);
    assert_eq!((float.stored_form(), float.stored_as()), ("float".to_string(), "float".to_string()));
    // Stacked like fuse.pack_qkv's weights: [K, N] transposes concatenated on N.
    let (q, _d1) = ggml_layer(T::Q4_K, 4, 256, None, 4);
    let (k, _d2) = ggml_layer(T::Q4_K, 4, 256, None, 5);
    let (v, _d3) = ggml_layer(T::Q6_K, 4, 256, None, 6);
    let kn = |w: &Arc<PackedWeight>| Recipe::Packed(Arc::clone(w)).transpose(vec![1, 0]);
    let same = Recipe::concat(vec![kn(&q), kn(&k)], 1).unwrap();
    assert_eq!((same.stored_form(), same.stored_as()), ("4-bit, block 32, float zero points".to_string(), "Q4_K (4-bit, block 32, float zero points)".to_string()));
    let mixed = Recipe::concat(vec![kn(&q), kn(&v)], 1).unwrap();
    assert_eq!(mixed.stored_form(), "mixed: 4-bit, block 32, float zero points + 8-bit, block 16, mid zero point");
    assert_eq!(mixed.stored_as(), "Q4_K (4-bit, block 32, float zero points) + Q6_K (8-bit, block 16, mid zero point)");
    let with_float = Recipe::concat(vec![kn(&q), float], 1).unwrap();
    assert_eq!(with_float.stored_form(), "mixed: 4-bit, block 32, float zero points + float");
    // Computed on (an offset) is not a stored form.
    assert_eq!(Recipe::Packed(q).offset(1.0).stored_form(), "float");
}

/// A block whose f16 scale or min is not finite (a corrupt file) is an error naming the file
/// tensor, its row and values, not a package of NaN weights.
#[test]
fn a_non_finite_ggml_scale_or_min_is_an_error() {
    use crate::gguf::GgmlType as T;
    for (ty, at, what) in [(T::Q8_0, 0, "scale"), (T::Q4_K, 2, "min"), (T::Q6_K, 208, "scale")] {
        let (per, size) = ty.block().unwrap();
        let (rows, k) = (2, 256);
        let mut bytes = vec![0u8; rows * k / per * size];
        // Row 1's first block: NaN (0x7e00) or infinity (0x7c00) in the f16 field at `at`.
        let first_of_row_1 = (k / per) * size;
        let bad = if what == "min" { 0x7c00u16 } else { 0x7e00u16 };
        bytes[first_of_row_1 + at..first_of_row_1 + at + 2].copy_from_slice(&bad.to_le_bytes());
        if ty == T::Q4_K {
            // A non-zero min scale for sub-block 0, so the infinite dmin reaches its min.
            bytes[first_of_row_1 + 4 + 4] = 1;
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.bin");
        std::fs::write(&path, &bytes).unwrap();
        let file = MappedFile::open(&path).unwrap();
        let st = SourceTensor { name: "blk.3.ffn_down.weight".into(), file, dtype: DType::U8, shape: vec![bytes.len()], offset: 0, len: bytes.len() };
        let w = PackedWeight::ggml("model.layers.3.mlp.down_proj", st, ty, rows, k, None).unwrap();
        let e = w.dequantize().unwrap_err().to_string();
        assert!(e.contains("`blk.3.ffn_down.weight` ") && e.contains("row 1, values 0..") && e.contains(&format!("{what} is not finite")), "{ty}: {e}");
    }
}

/// The DequantizeLinear form of GGUF blocks, streamed in bands of one block of K each (as the
/// writer does for a large weight; a K-type band then holds part of a 256-value superblock),
/// is the same bytes as written whole, with f32 and f16 scales: the codes, the
/// scales and the `[k_blocks, N]` offsets each start at their band's offset.
#[test]
fn ggml_offsets_of_the_dequantize_linear_form_stream_by_bands() {
    use crate::gguf::GgmlType as T;
    for ty in [T::Q4_K, T::Q5_1, T::Q2_K, T::Q8_0, T::Q3_K, T::Q5_K, T::Q6_K, T::IQ4_XS] {
        for dtype in [DType::F32, DType::F16] {
            let (rows, k) = (6, 512);
            let (w, _dir) = ggml_layer(ty, rows, k, None, 31 + ty.0 as u64);
            let recipe = Recipe::Packed(Arc::clone(&w));
            let stack = PackedStack::from_recipe("w", &recipe).unwrap().unwrap();
            let g = QuantGroup::from_packed("w", recipe, stack, dtype, QuantForm::Dq).unwrap();
            let bs = g.settings().block_size();
            let ranges = g.ranges(rows * 4 * bs);
            assert_eq!(ranges.len(), k / bs, "{ty} {dtype}: one block of K per band");
            let parts: Vec<QuantPart> = [QuantPart::Data, QuantPart::Scales, QuantPart::ZeroPoints].into_iter().filter(|&p| g.has(p)).collect();
            let mut got: Vec<Vec<u8>> = parts.iter().map(|&p| vec![0u8; g.byte_len(p)]).collect();
            for (a, e) in ranges {
                for (part, bytes) in g.compute(a, e).unwrap() {
                    let at = g.part_offset(part, a);
                    let i = parts.iter().position(|&p| p == part).unwrap();
                    got[i][at..at + bytes.len()].copy_from_slice(&bytes);
                }
            }
            for (i, &part) in parts.iter().enumerate() {
                let whole = Recipe::quantized(&g, part).materialize().unwrap();
                assert_eq!(got[i], whole, "{ty} {dtype}: {part:?}");
            }
        }
    }
}

/// transformers' MXFP4 pair of an expert stack (`[E, rows, K/32, 16]` nibbles, `[E, rows,
/// K/32]` exponents, in one file as safetensors lays them out) is the weight `[E * rows, K]`
/// whose values are `fp4[q] * 2^(e - 127)` with value `2j` in byte `j`'s low nibble; it is
/// written as MatMulNBits with the very bytes of ggml's MXFP4 blocks holding the same values
/// (values `j`, `j + 16` in byte `j`, exponent first), which the ggml tests check against
/// gguf-py; a NaN exponent (255) is refused naming the tensor, and shapes that do not pair up
/// are refused before anything is read.
#[test]
fn transformers_mxfp4_stacks_are_ggml_mxfp4_regrouped() {
    use crate::gguf::GgmlType as T;
    const FP4: [f32; 16] = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0];
    let (experts, rows, k) = (2usize, 3usize, 128usize);
    let (n, g) = (experts * rows, k / 32);
    let mut rng = Lcg(41);
    let q: Vec<u8> = (0..n * k).map(|_| (rng.next() % 16) as u8).collect();
    let exps: Vec<u8> = (0..n * g).map(|_| 112 + (rng.next() % 30) as u8).collect();
    let pairs: Vec<u8> = q.chunks(2).map(|p| p[0] | (p[1] << 4)).collect();
    let mut ggml = Vec::new();
    for (b, e) in q.chunks(32).zip(&exps) {
        ggml.push(*e);
        ggml.extend((0..16).map(|j| b[j] | (b[j + 16] << 4)));
    }
    let dir = tempfile::tempdir().unwrap();
    let (hf_path, ggml_path) = (dir.path().join("model.bin"), dir.path().join("ggml.bin"));
    std::fs::write(&hf_path, [&pairs[..], &exps[..]].concat()).unwrap();
    std::fs::write(&ggml_path, &ggml).unwrap();
    let (hf_file, ggml_file) = (MappedFile::open(&hf_path).unwrap(), MappedFile::open(&ggml_path).unwrap());
    let tensor = |name: &str, shape: Vec<usize>, offset: usize| SourceTensor { name: name.into(), file: Arc::clone(&hf_file), dtype: DType::U8, len: shape.iter().product(), shape, offset };
    let blocks = tensor("mlp.experts.down_proj_blocks", vec![experts, rows, g, 16], 0);
    let scales = tensor("mlp.experts.down_proj_scales", vec![experts, rows, g], pairs.len());
    let w = PackedWeight::mxfp4("mlp.experts.down_proj", blocks.clone(), scales.clone()).unwrap();
    assert_eq!((w.n(), w.k(), w.bits(), w.group_size(), w.format(), w.source_type()), (n, k, Bits::Int8, 32, PackedFormat::Mxfp4, "mxfp4".to_string()));
    assert_eq!(w.describe(), "mxfp4(model.bin:mlp.experts.down_proj_blocks)");
    let values = f32s(&Recipe::Packed(Arc::clone(&w)).materialize().unwrap());
    for (i, v) in values.iter().enumerate() {
        assert_eq!(*v, FP4[q[i] as usize] * 2f32.powi(exps[i / 32] as i32 - 127), "value {i}");
    }
    let st = SourceTensor { name: "blk.0.ffn_down_exps.weight".into(), file: ggml_file, dtype: DType::U8, shape: vec![ggml.len()], offset: 0, len: ggml.len() };
    let reference = PackedWeight::ggml("blk.0.ffn_down_exps.weight", st, T::MXFP4, n, k, None).unwrap();
    let written = |w: &Arc<PackedWeight>| {
        let recipe = Recipe::Packed(Arc::clone(w));
        let g = QuantGroup::from_packed("w", recipe.clone(), PackedStack::from_recipe("w", &recipe).unwrap().unwrap(), DType::F32, QuantForm::NBits).unwrap();
        [QuantPart::Data, QuantPart::Scales].map(|p| Recipe::quantized(&g, p).materialize().unwrap())
    };
    assert_eq!(written(&w), written(&reference));
    // A band of K (as a DequantizeLinear band reads it) decodes its blocks' codes and scales
    // where the whole row has them.
    let (mut whole, mut band) = (w.ggml_buffers(), w.ggml_buffers());
    for row in [0, 4] {
        assert!(w.ggml_row(row, 0, k, &mut whole.0, &mut whole.1, &mut whole.2).unwrap());
        assert!(w.ggml_row(row, 40, 90, &mut band.0, &mut band.1, &mut band.2).unwrap());
        assert_eq!((&band.0[32..96], &band.1[1..3]), (&whole.0[32..96], &whole.1[1..3]), "row {row}");
    }
    // Exponent 255 (NaN in the OCP MX format) in expert 1, row 0, block 2.
    let mut bad = [&pairs[..], &exps[..]].concat();
    bad[pairs.len() + rows * g + 2] = 255;
    std::fs::write(dir.path().join("bad.bin"), &bad).unwrap();
    let bad_file = MappedFile::open(&dir.path().join("bad.bin")).unwrap();
    let w = PackedWeight::mxfp4("mlp.experts.down_proj", SourceTensor { file: Arc::clone(&bad_file), ..blocks.clone() }, SourceTensor { file: bad_file, ..scales.clone() }).unwrap();
    let e = w.dequantize().unwrap_err().to_string();
    assert!(e.contains("`mlp.experts.down_proj_scales` in ") && e.contains("expert 1, row 0, block 2 (values 64..96) has exponent 255"), "{e}");
    // Shapes that do not pair: scales of other leading dims, blocks without 16 bytes per block.
    let e = PackedWeight::mxfp4("x", blocks.clone(), tensor("x_scales", vec![experts, rows + 1, g], 0)).unwrap_err().to_string();
    assert!(e.contains("the same leading shape"), "{e}");
    let e = PackedWeight::mxfp4("x", tensor("x_blocks", vec![experts, rows, g * 16], 0), tensor("x_scales", vec![experts, rows], 0)).unwrap_err().to_string();
    assert!(e.contains("u8 blocks [..., K/32, 16]"), "{e}");
}
