//! The graph side of the quantize step: each selected node is rewritten to read its weight's
//! [`QuantGroup`] parts, in the table's format.
//!
//! * MatMulNBits format: `MatMul(A, W)` becomes `com.microsoft.MatMulNBits(A, B, scales[,
//!   zero_points])`; `Gather(W, ids)` becomes `com.microsoft.GatherBlockQuantized`. A tied head
//!   and embedding with the same settings use one group: symmetric, the embedding reads the
//!   head's `B` itself as a `[N, k_blocks, blob]` table (quantize_axis 2, scales viewed
//!   `[N, k_blocks, 1]`, a Reshape after it); asymmetric, it reads `B` viewed `[N, K * bits / 8]`
//!   (quantize_axis 1) with the same scales and zero points. The views are reshape recipes of
//!   the head's parts, which the writer stores in the parts' own bytes (ir::save): once.
//! * DequantizeLinear format: `MatMul(A, W)` becomes `MatMul(A, DequantizeLinear(x, x_scale[,
//!   x_zero_point]))`, the blocked form ONNX Runtime fuses back into MatMulNBits.

use std::collections::HashMap;
use std::sync::Arc;

use ep_sets::QuantFormat;
use ir::quant::QuantSettings;
use ir::{Attr, Graph, Node, PackedStack, QuantForm, QuantGroup, QuantPart, Recipe};

use super::select::{Candidate, Reach, Role};
use super::{QuantOutcome, QuantStep, QuantizedTensor};
use crate::{Error, Result};

const MS: &str = "com.microsoft";

/// The `[N, K]` weight a candidate quantizes: its initializer, or the input of the
/// transpose that makes it `[K, N]` (a checkpoint's Linear weight, as the generic graph reads
/// it), so the writer reads checkpoint rows with no transpose at all.
fn weight_nk(graph: &Graph, c: &Candidate) -> Recipe {
    let w = graph.initializer(&c.weight).expect("selected candidates name initializers").clone();
    match c.reach {
        Reach::Transposed | Reach::Table => w,
        Reach::Direct => match w.normalized() {
            Recipe::Transpose { input, perm } if perm == [1, 0] => *input,
            other => other.transpose(vec![1, 0]),
        },
    }
}

/// Groups by weight and settings (`None`: the checkpoint's own, pre-quantized): a tied head
/// and embedding share theirs. A group's parts are named after it (`<name>/quant/<part>`), so
/// a second group of one weight (a tied head and table of different settings: `--quant int4
/// --quant-embeddings int8`) is named after its role too, `<weight>/<role>`: with one name the
/// second group's parts were dropped as already present and both read the first's.
struct Groups {
    by_key: HashMap<(String, Option<QuantSettings>, bool), Arc<QuantGroup>>,
}

impl Groups {
    fn get(&mut self, graph: &Graph, c: &Candidate, settings: Option<QuantSettings>, step: &QuantStep) -> Result<Arc<QuantGroup>> {
        let nk = !matches!(c.reach, Reach::Direct);
        let key = (c.weight.clone(), settings, nk);
        if let Some(g) = self.by_key.get(&key) {
            return Ok(Arc::clone(g));
        }
        let form = match step.format {
            QuantFormat::MatmulNbits => QuantForm::NBits,
            QuantFormat::DequantizeLinear => QuantForm::Dq,
        };
        let weight = weight_nk(graph, c);
        let taken = |name: &str| self.by_key.values().any(|g| g.name == name);
        let mut name = c.weight.clone();
        for i in 1.. {
            if !taken(&name) {
                break;
            }
            name = if i == 1 { format!("{}/{}", c.weight, c.role.name()) } else { format!("{}/{}{i}", c.weight, c.role.name()) };
        }
        let mut g = match settings {
            Some(settings) => QuantGroup::new(name, weight, settings, step.scale_dtype, form)?,
            None => {
                let stack = PackedStack::from_recipe(&c.weight, &weight).ok_or_else(|| {
                    Error::Pipeline(format!("quantize: `{}` was planned as pre-quantized but reads no packed layer", c.weight))
                })??;
                QuantGroup::from_packed(name, weight, stack, step.scale_dtype, form)?
            }
        };
        // A table whose DequantizeLinear takes no unsigned data of this width (trt-rtx: int4,
        // not uint4) reads asymmetric blocks in the offset form.
        if !g.settings().symmetric() && step.zero_points_as_offsets(g.settings().bits()).is_some() {
            Arc::get_mut(&mut g).expect("a new group is not shared yet").offset_zero_points();
        }
        self.by_key.insert(key, Arc::clone(&g));
        Ok(g)
    }
}

/// Adds `name` = `recipe` unless an initializer of that name is there (a shared part).
fn add_initializer(graph: &mut Graph, name: &str, recipe: Recipe) {
    if graph.initializer(name).is_none() {
        graph.initializers.push((name.to_string(), recipe));
    }
}

/// The initializer names of a group's parts: `<weight>/quant/<part>`.
fn part_name(group: &QuantGroup, part: QuantPart) -> String {
    format!("{}/quant/{}", group.name, part.name())
}

/// Adds the group's parts as initializers; returns the names of data, scales and (when
/// asymmetric) zero points.
fn add_parts(graph: &mut Graph, group: &Arc<QuantGroup>) -> Vec<String> {
    let mut names = Vec::new();
    for part in [QuantPart::Data, QuantPart::Scales, QuantPart::ZeroPoints] {
        // Float zero points are written as offsets, read through block_offsets.
        if group.has(part) && !(part == QuantPart::ZeroPoints && group.float_zeros()) {
            let name = part_name(group, part);
            add_initializer(graph, &name, Recipe::quantized(group, part));
            names.push(name);
        }
    }
    names
}

pub fn apply(graph: &mut Graph, step: &QuantStep, plan: Vec<(Candidate, Option<QuantSettings>)>, outcome: &mut QuantOutcome) -> Result<()> {
    let mut groups = Groups { by_key: HashMap::new() };
    let mut gathers: HashMap<(String, Arc<[u32]>), String> = HashMap::new();
    let types = ir::infer_types(graph, rules::op_types());
    let mut added: Vec<Node> = Vec::new();
    for (c, settings) in plan {
        let group = groups.get(graph, &c, settings, step)?;
        let index = graph.nodes.iter().position(|n| n.name == c.node).expect("candidates come from this graph");
        let names = add_parts(graph, &group);
        if let Some(order) = group.packed_source().and_then(|p| p.order()) {
            if c.role == Role::Embedding {
                return Err(Error::Request(format!("embedding `{}`: a pre-quantized table with act-order rows cannot be gathered", c.weight)));
            }
            let a = graph.nodes[index].inputs[0].clone();
            let gathered = act_order_gather(graph, &mut gathers, &mut added, &group.name, &a, order);
            graph.nodes[index].inputs[0] = gathered;
        }
        match (step.format, c.role) {
            (QuantFormat::MatmulNbits, Role::Embedding) => {
                let rank = graph.nodes[index].input(1).and_then(|i| types.get(i)).and_then(|v| v.shape.as_ref()).map(|s| s.len());
                match super::table_gather(step, &group.settings(), group.k(), group.float_zeros()) {
                    Ok(super::TableGather::BlockQuantized) => added.extend(gather_block_quantized(graph, index, &group, &names, rank)?),
                    Ok(super::TableGather::Bytes) => gather_dequantized(graph, &mut added, index, &group, &names, rank)?,
                    Err(why) => return Err(Error::Pipeline(format!("embedding `{}` was planned for quantization, but {why}", c.weight))),
                }
            }
            (QuantFormat::MatmulNbits, _) if group.float_zeros() => {
                matmul_nbits(&mut graph.nodes[index], &group, &names, step.accuracy_level);
                let a_rank = graph.nodes[index].input(0).and_then(|i| types.get(i)).and_then(|v| v.shape.as_ref()).map(|s| s.len());
                block_offsets(graph, &mut added, index, &group, a_rank);
            }
            (QuantFormat::MatmulNbits, _) => matmul_nbits(&mut graph.nodes[index], &group, &names, step.accuracy_level),
            (QuantFormat::DequantizeLinear, Role::Embedding) if group.settings().bits().count() != 8 || group.float_zeros() => {
                gather_rows_decoded(graph, &mut added, index, &group)?;
            }
            (QuantFormat::DequantizeLinear, Role::Embedding) => {
                let rank = graph.nodes[index].input(1).and_then(|i| types.get(i)).and_then(|v| v.shape.as_ref()).map(|s| s.len());
                gather_rows_dequantize_linear(graph, &mut added, index, &group, &names, rank)?;
            }
            (QuantFormat::DequantizeLinear, _) => {
                let dq = dequantize_linear(&group, &names);
                let out = dq.outputs[0].clone();
                if !graph.nodes.iter().chain(&added).any(|n| n.outputs[0] == out) {
                    added.push(dq);
                }
                graph.nodes[index].inputs[1] = out;
                // Float zero points (HQQ, a GGUF type with a min): the codes are symmetric
                // around the mid point; the per-block offsets are added after the MatMul, as
                // for MatMulNBits.
                if group.float_zeros() {
                    let a_rank = graph.nodes[index].input(0).and_then(|i| types.get(i)).and_then(|v| v.shape.as_ref()).map(|s| s.len());
                    block_offsets(graph, &mut added, index, &group, a_rank);
                }
            }
        }
        let op = graph.nodes[index].op.clone();
        match outcome.tensors.iter_mut().find(|t| Arc::ptr_eq(&t.group, &group)) {
            Some(t) => t.ops.push(format!("{} ({op})", c.node)),
            None => outcome.tensors.push(QuantizedTensor { weight: c.weight.clone(), role: c.role, ops: vec![format!("{} ({op})", c.node)], group }),
        }
    }
    graph.nodes.extend(added);
    graph.toposort()?;
    Ok(())
}

/// The activation `a` with its last axis in act-order `order` (the checkpoint row of each
/// written row): one Gather per (activation, order), shared by the layers that read it.
fn act_order_gather(graph: &mut Graph, gathers: &mut HashMap<(String, Arc<[u32]>), String>, added: &mut Vec<Node>, weight: &str, a: &str, order: &Arc<[u32]>) -> String {
    let key = (a.to_string(), Arc::clone(order));
    if let Some(out) = gathers.get(&key) {
        return out.clone();
    }
    let indices = format!("{weight}/quant/act_order");
    let values: Vec<i64> = order.iter().map(|&r| r as i64).collect();
    add_initializer(graph, &indices, Recipe::from_i64(indices.clone(), vec![values.len()], &values));
    let out = format!("{weight}/quant/act_order/out");
    let mut node = Node::new(format!("{weight}/quant/act_order/Gather"), "Gather", &[a, &indices], &[&out]);
    node.attrs.push(Attr::int("axis", -1));
    node.metadata.insert("rule".into(), "quantize".into());
    added.push(node);
    gathers.insert(key, out.clone());
    out
}

fn ms_node(node: &mut Node, op: &str) {
    node.op = op.into();
    node.domain = MS.into();
    node.opset = 1;
    node.attrs.clear();
    node.metadata.insert("rule".into(), "quantize".into());
}

fn matmul_nbits(node: &mut Node, group: &QuantGroup, parts: &[String], accuracy_level: i64) {
    let s = group.settings();
    let a = node.inputs[0].clone();
    ms_node(node, "MatMulNBits");
    node.inputs = std::iter::once(a).chain(parts.iter().cloned()).collect();
    node.attrs.push(Attr::int("K", group.k() as i64));
    node.attrs.push(Attr::int("N", group.n() as i64));
    node.attrs.push(Attr::int("bits", s.bits().count() as i64));
    node.attrs.push(Attr::int("block_size", s.block_size() as i64));
    // As ONNX Runtime's quantizer: the attribute only when it is set.
    if accuracy_level != 0 {
        node.attrs.push(Attr::int("accuracy_level", accuracy_level));
    }
}

/// The MatMulNBits at `index` of a weight with float zero points (GGUF blocks with a min),
/// written without them (the implicit mid zero point): adds the exact remainder, each block's
/// offset `scale * (mid - zero)` times the activation's sum over that block,
/// `MatMul(block_sums(A), offsets^T)`, and sums it with the MatMulNBits output. ONNX Runtime
/// 1.32's CPU MatMulNBits has no fast path for float zero points (about 30x slower per call,
/// docs/benchmarks.md); this keeps the fast one.
///
/// The block sums are `ReduceSum(Reshape(A, [.., k_blocks, block]), -1)` when K is a whole
/// number of blocks and A's rank is known: they read A only. Otherwise `MatMul(A, E)` with `E`
/// the `[K, k_blocks]` block indicator, which a decode step reads whole (K = 4864: 3 MB per
/// layer per token, as much as the int4 weight beside it). One sum per activation and block
/// size, shared by the projections reading it.
fn block_offsets(graph: &mut Graph, added: &mut Vec<Node>, index: usize, group: &Arc<QuantGroup>, a_rank: Option<usize>) {
    let (k, bs) = (group.k(), group.settings().block_size());
    let kb = k.div_ceil(bs);
    let dtype = group.scale_dtype();
    let base = format!("{}/quant", group.name);
    let node = &mut graph.nodes[index];
    let (a, out) = (node.inputs[0].clone(), node.outputs[0].clone());
    let nbits_out = format!("{base}/nbits_out");
    node.outputs[0] = nbits_out.clone();
    let offsets = format!("{base}/offsets");
    // [k_blocks, N]: the DequantizeLinear form writes them so, MatMulNBits' is [N, k_blocks].
    let parts = Recipe::quantized(group, QuantPart::ZeroPoints);
    add_initializer(graph, &offsets, if group.form() == ir::QuantForm::Dq { parts } else { parts.transpose(vec![1, 0]) });
    let sums = format!("{a}/quant/block_sums_b{bs}");
    let tag = |mut n: Node| {
        n.metadata.insert("rule".into(), "quantize".into());
        n
    };
    if !graph.nodes.iter().chain(added.iter()).any(|n| n.outputs.first() == Some(&sums)) {
        match a_rank.filter(|&r| r >= 1 && k.is_multiple_of(bs)) {
            Some(rank) => {
                // [0, .., 0, k_blocks, block]: Reshape's 0 keeps A's leading dimensions.
                let shape = format!("quant/block_shape_r{rank}_k{k}_b{bs}");
                let dims: Vec<i64> = std::iter::repeat_n(0, rank - 1).chain([kb as i64, bs as i64]).collect();
                add_initializer(graph, &shape, Recipe::from_i64(shape.clone(), vec![dims.len()], &dims));
                let axes = "quant/last_axis".to_string();
                add_initializer(graph, &axes, Recipe::from_i64(axes.clone(), vec![1], &[-1]));
                let blocks = format!("{sums}/blocks");
                added.push(tag(Node::new(format!("{sums}/Reshape"), "Reshape", &[&a, &shape], &[&blocks])));
                let mut sum = Node::new(format!("{sums}/ReduceSum"), "ReduceSum", &[&blocks, &axes], &[&sums]);
                sum.attrs.push(Attr::int("keepdims", 0));
                added.push(tag(sum));
            }
            None => {
                let e = format!("quant/block_indicator_k{k}_b{bs}_{dtype}");
                let ones: Vec<f32> = (0..k * kb).map(|i| if (i / kb) / bs == i % kb { 1.0 } else { 0.0 }).collect();
                add_initializer(graph, &e, Recipe::from_f32(e.clone(), vec![k, kb], &ones).cast(dtype));
                added.push(tag(Node::new(format!("{sums}/MatMul"), "MatMul", &[&a, &e], &[&sums])));
            }
        }
    }
    let offset_out = format!("{base}/offset_out");
    added.push(tag(Node::new(format!("{base}/offsets/MatMul"), "MatMul", &[&sums, &offsets], &[&offset_out])));
    added.push(tag(Node::new(format!("{base}/Add"), "Add", &[&nbits_out, &offset_out], &[&out])));
}

/// The Gather at `index` of a table GatherBlockQuantized cannot take, gathered from the head's
/// own MatMulNBits parts and dequantized with standard ops, so a tied head and embedding store
/// one quantized table (`quantize::table_gather` decides):
/// * any table on an EP that claims no GatherBlockQuantized (dml);
/// * rows that are not whole blocks (GatherBlockQuantized needs whole blocks), or packed 4-bit
///   zero points on rows of an odd number of blocks where the table says its kernel fails on
///   them (`embedding_int4_zero_points_odd_blocks = false`),
///
/// where the EP's Gather and Cast take the uint8 bytes (not webgpu, whose such tables stay
/// float).
///
/// Per gathered row: `B` `[N, k_blocks, blob]` gives the bytes, a 256-entry table
/// (`quant/codes_<bits>b_<dtype>`) maps each byte to its codes less the mid point (two per
/// byte at 4 bits, low nibble first), then per block `(q - mid) * scale` (symmetric),
/// `(q - zero_point) * scale` (the packed zero points decoded by the same table, so the
/// difference of the two centred codes) or `(q - mid) * scale + offset` (float zero points,
/// the offsets read from the head's `[k_blocks, N]` initializer: Gather on axis 1, then
/// Transpose): the value MatMulNBits (plus the block offsets) computes for the head. A last
/// partial block and zero-point padding are sliced off.
fn gather_dequantized(graph: &mut Graph, added: &mut Vec<Node>, index: usize, group: &Arc<QuantGroup>, parts: &[String], indices_rank: Option<usize>) -> Result<()> {
    let s = group.settings();
    let (k, bs) = (group.k(), s.block_size());
    let Some(rank) = indices_rank else {
        return Err(Error::Request(format!("embedding `{}`: the rank of its indices is unknown, so its gathered rows cannot be reshaped", group.name)));
    };
    let kb = k.div_ceil(bs);
    let dtype = group.scale_dtype();
    let node = &graph.nodes[index];
    let (ids, out, name) = (node.inputs[1].clone(), node.outputs[0].clone(), node.name.clone());
    let base = format!("{name}/quant");
    let mut nodes: Vec<Node> = Vec::new();
    let mut op = |op: &str, suffix: &str, inputs: &[&str]| -> String {
        let o = format!("{base}/{suffix}");
        let mut n = Node::new(format!("{base}/{suffix}/{op}"), op, inputs, &[&o]);
        n.metadata.insert("rule".into(), "quantize".into());
        nodes.push(n);
        o
    };
    // Each byte's codes less the mid point, in the scales' type.
    let per_byte = s.bits().per_byte();
    let mid = s.bits().mid() as f32;
    let lut_name = format!("quant/codes_{}b_{dtype}", s.bits().count());
    let lut: Vec<f32> = (0..256usize)
        .flat_map(|b| (0..per_byte).map(move |i| ((b >> (i * 8 / per_byte)) & (0xff >> (8 - 8 / per_byte))) as f32 - mid))
        .collect();
    add_initializer(graph, &lut_name, Recipe::from_f32(lut_name.clone(), vec![256, per_byte], &lut).cast(dtype));
    let shape = |graph: &mut Graph, suffix: &str, tail: &[usize]| -> String {
        let n = format!("{base}/{suffix}");
        let dims: Vec<i64> = std::iter::repeat_n(0, rank).chain(tail.iter().map(|&d| d as i64)).collect();
        add_initializer(graph, &n, Recipe::from_i64(n.clone(), vec![dims.len()], &dims));
        n
    };
    // `[0]`, `[end]`, `[axis]`: a Slice of the first `end` entries of `axis`.
    let slice = |graph: &mut Graph, end: usize, axis: i64| -> [String; 3] {
        [("start", 0), ("end", end as i64), ("axis", axis)].map(|(what, v)| {
            let n = format!("{base}/slice_{what}_{v}");
            add_initializer(graph, &n, Recipe::from_i64(n.clone(), vec![1], &[v]));
            n
        })
    };
    let blocks_shape = shape(graph, "blocks_shape", &[kb, bs]);
    let params_shape = shape(graph, "params_shape", &[kb, 1]);
    let row_shape = shape(graph, "row_shape", &[kb * bs]);
    // The float Gather itself becomes the Gather of the rows' bytes.
    let bytes = format!("{base}/bytes");
    let byte_ids = op("Cast", "byte_ids", &[&bytes]);
    let codes = op("Gather", "codes", &[&lut_name, &byte_ids]);
    let codes = op("Reshape", "blocks", &[&codes, &blocks_shape]);
    let centred = if group.float_zeros() || s.symmetric() {
        codes
    } else {
        // Packed zero points `[N, ceil(k_blocks * bits / 8)]`, decoded as the codes are; a
        // 4-bit row of an odd number of blocks has a padding nibble, sliced off.
        let zp_width = kb.div_ceil(per_byte);
        let zp_shape = shape(graph, "zero_points_shape", &[zp_width * per_byte, 1]);
        let zp_bytes = op("Gather", "zero_point_bytes", &[&parts[2], &ids]);
        let zp_ids = op("Cast", "zero_point_ids", &[&zp_bytes]);
        let zps = op("Gather", "zero_point_codes", &[&lut_name, &zp_ids]);
        let mut zps = op("Reshape", "zero_points_by_block", &[&zps, &zp_shape]);
        if zp_width * per_byte != kb {
            let [start, end, axis] = slice(graph, kb, -2);
            zps = op("Slice", "zero_points", &[&zps, &start, &end, &axis]);
        }
        op("Sub", "centred", &[&codes, &zps])
    };
    let scales = op("Gather", "scales", &[&parts[1], &ids]);
    let scales = op("Reshape", "scales_by_block", &[&scales, &params_shape]);
    let scaled = op("Mul", "scaled", &[&centred, &scales]);
    let values = if group.float_zeros() { row_offsets(graph, &mut nodes, &base, group, &ids, rank, &scaled) } else { scaled };
    // The last node writes the Gather's output: the rows, less a partial block's padding.
    let mut last = if kb * bs == k {
        Node::new(format!("{base}/Reshape"), "Reshape", &[&values, &row_shape], &[&out])
    } else {
        let padded = format!("{base}/padded_rows");
        let mut r = Node::new(format!("{padded}/Reshape"), "Reshape", &[&values, &row_shape], &[&padded]);
        r.metadata.insert("rule".into(), "quantize".into());
        nodes.push(r);
        let [start, end, axis] = slice(graph, k, -1);
        Node::new(format!("{base}/Slice"), "Slice", &[&padded, &start, &end, &axis], &[&out])
    };
    last.metadata.insert("rule".into(), "quantize".into());
    nodes.push(last);
    for n in &mut nodes {
        if n.op == "Cast" {
            n.attrs.push(Attr::int("to", ir::DType::I64.to_onnx() as i64));
        }
    }
    let node = &mut graph.nodes[index];
    node.inputs = vec![parts[0].clone(), ids];
    node.outputs = vec![bytes];
    node.attrs.clear();
    node.metadata.insert("rule".into(), "quantize".into());
    added.extend(nodes);
    Ok(())
}

/// Adds each gathered row's block offsets (float zero points: HQQ, a GGUF type with a min) to
/// `values` (`[.., k_blocks, block]`): the offsets are the head's `[k_blocks, N]` initializer
/// (`<group>/quant/offsets`, which the head's offset MatMul reads; a `[N, k_blocks]` copy would
/// store them twice), so the ids pick columns (Gather on axis 1) and a Transpose puts the
/// blocks last. Returns the sum's name.
fn row_offsets(graph: &mut Graph, nodes: &mut Vec<Node>, base: &str, group: &Arc<QuantGroup>, ids: &str, rank: usize, values: &str) -> String {
    let offsets = format!("{}/quant/offsets", group.name);
    add_initializer(graph, &offsets, Recipe::quantized(group, QuantPart::ZeroPoints).transpose(vec![1, 0]));
    let shape = format!("{base}/offsets_shape");
    let dims: Vec<i64> = std::iter::repeat_n(0, rank).chain([group.k().div_ceil(group.settings().block_size()) as i64, 1]).collect();
    add_initializer(graph, &shape, Recipe::from_i64(shape.clone(), vec![dims.len()], &dims));
    let mut op = |op: &str, suffix: &str, inputs: &[&str], attr: Option<Attr>| -> String {
        let o = format!("{base}/{suffix}");
        let mut n = Node::new(format!("{o}/{op}"), op, inputs, &[&o]);
        n.attrs.extend(attr);
        n.metadata.insert("rule".into(), "quantize".into());
        nodes.push(n);
        o
    };
    let by_column = op("Gather", "offsets_t", &[&offsets, ids], Some(Attr::int("axis", 1)));
    let by_row = op("Transpose", "offsets", &[&by_column], Some(Attr::ints("perm", &(1..=rank as i64).chain([0]).collect::<Vec<_>>())));
    let by_block = op("Reshape", "offsets_by_block", &[&by_row, &shape], None);
    op("Add", "values", &[values, &by_block], None)
}

/// Rewrites the Gather at `index`; returns the nodes the symmetric (shared-table) form needs
/// after it: a Reshape, and for float zero points (whose codes are symmetric around the mid
/// point, as the head's MatMulNBits reads them) the rows' block offsets added before it.
fn gather_block_quantized(graph: &mut Graph, index: usize, group: &Arc<QuantGroup>, parts: &[String], indices_rank: Option<usize>) -> Result<Vec<Node>> {
    let s = group.settings();
    let (n, k, bs) = (group.n(), group.k(), s.block_size());
    if !k.is_multiple_of(bs) {
        return Err(Error::Pipeline(format!("embedding `{}`: rows of partial blocks are gathered by gather_dequantized, not GatherBlockQuantized", group.name)));
    }
    let kb = k / bs;
    let node = &graph.nodes[index];
    let (ids, out, name) = (node.inputs[1].clone(), node.outputs[0].clone(), node.name.clone());
    let mut after = Vec::new();
    let symmetric = s.symmetric() || group.float_zeros();
    let (data, scales, quantize_axis, gbq_out);
    if symmetric {
        // The head's B itself, [N, k_blocks, blob]: blocks along the last axis.
        let Some(rank) = indices_rank else {
            return Err(Error::Request(format!("embedding `{}`: the rank of its indices is unknown, so its GatherBlockQuantized output cannot be reshaped", group.name)));
        };
        data = parts[0].clone();
        scales = format!("{}/quant/scales_by_block", group.name);
        add_initializer(graph, &scales, Recipe::quantized(group, QuantPart::Scales).reshape(vec![n, kb, 1]));
        quantize_axis = 2;
        gbq_out = format!("{name}/GatherBlockQuantized/out");
        let shape = format!("{name}/GatherBlockQuantized/shape");
        let dims: Vec<i64> = std::iter::repeat_n(0, rank).chain([k as i64]).collect();
        add_initializer(graph, &shape, Recipe::from_i64(shape.clone(), vec![rank + 1], &dims));
        let values = if group.float_zeros() { row_offsets(graph, &mut after, &format!("{name}/quant"), group, &ids, rank, &gbq_out) } else { gbq_out.clone() };
        let mut r = Node::new(format!("{name}/Reshape"), "Reshape", &[&values, &shape], &[&out]);
        r.metadata.insert("rule".into(), "quantize".into());
        after.push(r);
    } else {
        // B viewed [N, K * bits / 8]; scales and zero points as MatMulNBits has them.
        data = format!("{}/quant/table", group.name);
        let row = k / s.bits().per_byte();
        add_initializer(graph, &data, Recipe::quantized(group, QuantPart::Data).reshape(vec![n, row]));
        scales = parts[1].clone();
        quantize_axis = 1;
        gbq_out = out;
    }
    let node = &mut graph.nodes[index];
    ms_node(node, "GatherBlockQuantized");
    node.inputs = vec![data, ids, scales];
    if !symmetric {
        node.inputs.push(parts[2].clone());
    }
    node.outputs = vec![gbq_out];
    node.attrs.push(Attr::int("bits", s.bits().count() as i64));
    node.attrs.push(Attr::int("block_size", bs as i64));
    node.attrs.push(Attr::int("gather_axis", 0));
    node.attrs.push(Attr::int("quantize_axis", quantize_axis));
    Ok(after)
}

/// The `default` format's embedding (8 bits, integer or no zero points): standard ONNX, only
/// the gathered rows dequantized. The table is the head's `[K, V]` DequantizeLinear data (one
/// copy when tied), so the ids pick columns: `Gather(axis 1)` of the codes, the scales and the
/// zero points, a blocked `DequantizeLinear` along axis 0, and a `Transpose` putting K last.
/// A 4-bit table, or one with float zero points, is [`gather_rows_decoded`].
fn gather_rows_dequantize_linear(graph: &mut Graph, added: &mut Vec<Node>, index: usize, group: &Arc<QuantGroup>, parts: &[String], indices_rank: Option<usize>) -> Result<()> {
    if group.settings().bits().count() != 8 || group.float_zeros() {
        return Err(Error::Pipeline(format!("embedding `{}`: a 4-bit table or float zero points go through gather_rows_decoded", group.name)));
    }
    let Some(rank) = indices_rank else {
        return Err(Error::Request(format!("embedding `{}`: the rank of its indices is unknown, so its gathered rows cannot be transposed", group.name)));
    };
    let node = &graph.nodes[index];
    let (ids, out, name) = (node.inputs[1].clone(), node.outputs[0].clone(), node.name.clone());
    let base = format!("{name}/quant");
    let tag = |mut n: Node| {
        n.metadata.insert("rule".into(), "quantize".into());
        n
    };
    let mut gathered = Vec::new();
    for (i, (part, suffix)) in parts.iter().zip(["codes", "scales", "zero_points"]).enumerate() {
        let o = format!("{base}/{suffix}");
        if i == 0 {
            // The float Gather itself becomes the Gather of the codes.
            let node = &mut graph.nodes[index];
            node.inputs = vec![part.clone(), ids.clone()];
            node.outputs = vec![o.clone()];
            node.attrs = vec![Attr::int("axis", 1)];
            node.metadata.insert("rule".into(), "quantize".into());
        } else {
            let mut g = Node::new(format!("{base}/{suffix}/Gather"), "Gather", &[part, &ids], &[&o]);
            g.attrs.push(Attr::int("axis", 1));
            added.push(tag(g));
        }
        gathered.push(o);
    }
    let inputs: Vec<&str> = gathered.iter().map(String::as_str).collect();
    let dq_out = format!("{base}/dequantized");
    let mut dq = Node::new(format!("{base}/DequantizeLinear"), "DequantizeLinear", &inputs, &[&dq_out]);
    dq.attrs.push(Attr::int("axis", 0));
    dq.attrs.push(Attr::int("block_size", group.settings().block_size() as i64));
    added.push(tag(dq));
    let mut t = Node::new(format!("{base}/Transpose"), "Transpose", &[&dq_out], &[&out]);
    t.attrs.push(Attr::ints("perm", &(1..=rank as i64).chain([0]).collect::<Vec<_>>()));
    added.push(tag(t));
    Ok(())
}

/// The `default` format's embedding of a 4-bit table, or of one with float zero points (HQQ, a
/// GGUF type with a min): standard ONNX, from the head's `[K, V]` DequantizeLinear parts (one copy
/// when tied). ONNX Runtime 1.32's CPU Gather has no 4-bit kernel and DequantizeLinear's zero
/// point is an integer, so the rows are decoded with plain ops instead, element by element in
/// the output's `[.., K]` order: the flat position of element `(k, v)` of a `[K, V]` part is
/// `k * V + v` (`quant/row_base_*` holds `k * V`), of its block's scale, zero point or offset
/// `(k / block) * V + v` (`quant/block_base_*`), so no reshape needs K to be whole blocks.
/// 8-bit codes are a Gather of the part's flat reshape and a Cast; 4-bit codes are a Gather
/// of the byte at `position / 2` in a `uint8` view of the same bytes (ONNX packs 4-bit tensors
/// over the flattened tensor, low nibble first) and a 512-entry table indexed by
/// `256 * (position % 2) + byte` giving the nibble as a number (`quant/nibbles_*`, signed for
/// int4). The value is `code * scale`, `(code - zero_point) * scale` or `code * scale + offset`,
/// each the value DequantizeLinear (plus the block offsets) gives the head.
///
/// Negative ids count from the end, as ONNX Gather reads them (`Where(ids < 0, ids + V, ids)`:
/// a raw negative position would read another row); an id of V or more still fails the last
/// row's Gather. Positions are int32 when `K * V` fits, which halves the index tensors of a
/// long prefill (`[tokens, K]` each).
fn gather_rows_decoded(graph: &mut Graph, added: &mut Vec<Node>, index: usize, group: &Arc<QuantGroup>) -> Result<()> {
    use ir::DType;
    let s = group.dq_settings();
    let (k, n, bs) = (group.k(), group.n(), s.block_size());
    let kb = k.div_ceil(bs);
    let dtype = group.scale_dtype();
    let at_type = if k * n <= i32::MAX as usize { DType::I32 } else { DType::I64 };
    let node = &graph.nodes[index];
    let (ids, out, name) = (node.inputs[1].clone(), node.outputs[0].clone(), node.name.clone());
    let base = format!("{name}/quant");
    // Integer constants of the positions' type.
    let ints = |graph: &mut Graph, name: String, shape: Vec<usize>, values: Vec<i64>, ty: DType| -> String {
        let recipe = match ty {
            DType::I32 => Recipe::data(name.clone(), DType::I32, shape, values.iter().flat_map(|&v| (v as i32).to_le_bytes()).collect()),
            _ => Recipe::from_i64(name.clone(), shape, &values),
        };
        add_initializer(graph, &name, recipe);
        name
    };
    let axes = ints(graph, "quant/last_axis".into(), vec![1], vec![-1], DType::I64);
    let zero = ints(graph, "quant/zero".into(), vec![], vec![0], DType::I64);
    let rows = ints(graph, format!("quant/rows_{n}"), vec![], vec![n as i64], DType::I64);
    let row_base = ints(graph, format!("quant/row_base_k{k}_n{n}_{at_type}"), vec![k], (0..k).map(|i| (i * n) as i64).collect(), at_type);
    let block_base = ints(graph, format!("quant/block_base_k{k}_b{bs}_n{n}_{at_type}"), vec![k], (0..k).map(|i| (i / bs * n) as i64).collect(), at_type);
    let two = ints(graph, format!("quant/two_{at_type}"), vec![], vec![2], at_type);
    let byte_values = ints(graph, format!("quant/byte_values_{at_type}"), vec![], vec![256], at_type);
    // `<base>/<suffix>` = op(inputs); `last` writes the float Gather's own output `out`.
    let node_to = |nodes: &mut Vec<Node>, op: &str, suffix: &str, inputs: &[&str], o: String| -> String {
        let mut n = Node::new(format!("{base}/{suffix}/{op}"), op, inputs, &[&o]);
        n.metadata.insert("rule".into(), "quantize".into());
        nodes.push(n);
        o
    };
    let op = |nodes: &mut Vec<Node>, op: &str, suffix: &str, inputs: &[&str]| node_to(nodes, op, suffix, inputs, format!("{base}/{suffix}"));
    let last = |nodes: &mut Vec<Node>, op: &str, inputs: &[&str]| node_to(nodes, op, "values", inputs, out.clone());
    let cast = |nodes: &mut Vec<Node>, suffix: &str, input: &str, to: DType| -> String {
        let o = op(nodes, "Cast", suffix, &[input]);
        nodes.last_mut().expect("just pushed").attrs.push(Attr::int("to", to.to_onnx() as i64));
        o
    };
    let mut nodes: Vec<Node> = Vec::new();
    let negative = op(&mut nodes, "Less", "negative", &[&ids, &zero]);
    let wrapped = op(&mut nodes, "Add", "wrapped", &[&ids, &rows]);
    let ids = op(&mut nodes, "Where", "ids", &[&negative, &wrapped, &ids]);
    let ids = if at_type == DType::I32 { cast(&mut nodes, "ids_i32", &ids, DType::I32) } else { ids };
    let ids = op(&mut nodes, "Unsqueeze", "ids_last", &[&ids, &axes]);
    let at_value = op(&mut nodes, "Add", "at_value", &[&ids, &row_base]);
    let at_block = op(&mut nodes, "Add", "at_block", &[&ids, &block_base]);
    // The codes of one part at flat positions `at`, as numbers of the scales' type. The
    // Gathers of stored parts are collected, and the data's is written last as the float
    // Gather's own node (it keeps its name).
    let mut gathers: Vec<(String, String, String)> = Vec::new(); // (table, positions, output)
    let mut decode = |graph: &mut Graph, nodes: &mut Vec<Node>, part: QuantPart, at: &str| -> Result<String> {
        let recipe = Recipe::quantized(group, part);
        let what = part.name();
        let table = format!("{}/quant/{what}", group.name);
        if s.bits().count() == 8 {
            let flat = format!("{table}/flat");
            add_initializer(graph, &flat, recipe.clone().reshape(vec![recipe.numel()]));
            let raw = format!("{base}/{what}_raw");
            gathers.push((flat, at.to_string(), raw.clone()));
            return Ok(cast(nodes, what, &raw, dtype));
        }
        let bytes = format!("{table}/bytes");
        let len = recipe.byte_len();
        add_initializer(graph, &bytes, recipe.view(DType::U8, vec![len]).map_err(|e| Error::Pipeline(e.to_string()))?);
        let signed = group.dtype(part) == DType::I4;
        let lut = format!("quant/nibbles_{}_{dtype}", if signed { "int4" } else { "uint4" });
        let values: Vec<f32> = (0..2)
            .flat_map(|p| (0..256).map(move |b: i32| (b >> (4 * p)) & 15))
            .map(|v| if signed && v >= 8 { (v - 16) as f32 } else { v as f32 })
            .collect();
        add_initializer(graph, &lut, Recipe::from_f32(lut.clone(), vec![512], &values).cast(dtype));
        let at_byte = op(nodes, "Div", &format!("{what}_at_byte"), &[at, &two]);
        let nibble = op(nodes, "Mod", &format!("{what}_nibble"), &[at, &two]);
        let raw = format!("{base}/{what}_bytes");
        gathers.push((bytes, at_byte, raw.clone()));
        let byte = cast(nodes, &format!("{what}_byte"), &raw, at_type);
        let row = op(nodes, "Mul", &format!("{what}_lut_row"), &[&nibble, &byte_values]);
        let entry = op(nodes, "Add", &format!("{what}_lut_entry"), &[&row, &byte]);
        Ok(op(nodes, "Gather", what, &[&lut, &entry]))
    };
    let codes = decode(graph, &mut nodes, QuantPart::Data, &at_value)?;
    let scales_flat = format!("{}/quant/scales/flat", group.name);
    add_initializer(graph, &scales_flat, Recipe::quantized(group, QuantPart::Scales).reshape(vec![kb * n]));
    let scales = op(&mut nodes, "Gather", "scales", &[&scales_flat, &at_block]);
    if group.float_zeros() {
        // [k_blocks, V] offsets, the head's own initializer (block_offsets).
        let offsets_flat = format!("{}/quant/offsets/flat", group.name);
        add_initializer(graph, &offsets_flat, Recipe::quantized(group, QuantPart::ZeroPoints).reshape(vec![kb * n]));
        let offsets = op(&mut nodes, "Gather", "offsets", &[&offsets_flat, &at_block]);
        let scaled = op(&mut nodes, "Mul", "scaled", &[&codes, &scales]);
        last(&mut nodes, "Add", &[&scaled, &offsets]);
    } else if group.has(QuantPart::ZeroPoints) {
        let zero_points = decode(graph, &mut nodes, QuantPart::ZeroPoints, &at_block)?;
        let centred = op(&mut nodes, "Sub", "centred", &[&codes, &zero_points]);
        last(&mut nodes, "Mul", &[&centred, &scales]);
    } else {
        last(&mut nodes, "Mul", &[&codes, &scales]);
    }
    // The float Gather itself becomes the Gather of the data's codes (or bytes).
    let mut gathers = gathers.into_iter();
    let (table, at, raw) = gathers.next().expect("the data is decoded first");
    let node = &mut graph.nodes[index];
    node.inputs = vec![table, at];
    node.outputs = vec![raw];
    node.attrs.clear();
    node.metadata.insert("rule".into(), "quantize".into());
    for (table, at, raw) in gathers {
        let mut g = Node::new(format!("{raw}/Gather"), "Gather", &[&table, &at], &[&raw]);
        g.metadata.insert("rule".into(), "quantize".into());
        nodes.push(g);
    }
    added.extend(nodes);
    Ok(())
}

fn dequantize_linear(group: &QuantGroup, parts: &[String]) -> Node {
    let out = format!("{}/quant/dequantized", group.name);
    let inputs: Vec<&str> = parts.iter().map(String::as_str).collect();
    let mut node = Node::new(format!("{}/DequantizeLinear", group.name), "DequantizeLinear", &inputs, &[&out]);
    node.attrs.push(Attr::int("axis", 0));
    node.attrs.push(Attr::int("block_size", group.settings().block_size() as i64));
    node.metadata.insert("rule".into(), "quantize".into());
    node
}
