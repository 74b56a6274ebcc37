//! The Qwen3-VL vision tower (`Qwen3VLVisionModel`), every index computed in the graph from
//! `image_grid_thw`.
//!
//! Checked against transformers on the `tiny-qwen3_vl` fixture (tests/tests/vl_parts.rs,
//! scripts/make_tiny_qwen3_vl.py) and, on grids the fixture does not have, against an
//! independent Rust tower (tests/tests/vision_parity.rs).
//!
//! Inputs as Qwen2.5-VL: `pixel_values [num_patches, C*T*P*P]` (merge-block order) and
//! `image_grid_thw [num_images, 3]`. One output, `image_features [num_image_tokens,
//! out_hidden_size * (1 + k)]` (merged tokens in raster order): the merger's output, then the
//! k deepstack mergers' outputs (one per `deepstack_visual_indexes` entry, in list order) side
//! by side, which the decoder adds to the image positions' hidden states after its first k
//! layers. They share one tensor because onnxruntime-genai 0.18 moves only `image_features`
//! from the vision part to the embedding part ([`super::deepstack_count`] says how the
//! embedding part and the decoder carry them on).
//!
//! Differences from Qwen2.5-VL: the patch embedding has a bias; learned position embeddings
//! (`pos_embed`, a `sqrt(num_position_embeddings)`-a-side grid) are bilinearly interpolated
//! onto each image's patch grid (`fast_pos_embed_interpolate`: corner indices and weights
//! from `linspace(0, side - 1, h)` and `linspace(0, side - 1, w)`, per patch in the graph);
//! no windows, every block attends over its frame; LayerNorm blocks and merger (eps 1e-6,
//! fixed in transformers); a plain `linear_fc1` -> `hidden_act` -> `linear_fc2` MLP; the
//! deepstack mergers normalize after the patches are put side by side.

use super::grid::Grid;
use super::qwen2_5_vl::{attention, rotary_tables, same_id_mask, Span};
use super::{account_for_prefixes, dim, find_prefix, finish, Keys, IMAGE_FEATURES, IMAGE_GRID_THW, PIXEL_VALUES};
use crate::components::linear::{linear, LinearWeights};
use crate::components::mlp::{activation, plain};
use crate::components::norm::layer_norm;
use crate::{Activation, BuildOptions, Checkpoint, Error, GraphBuilder, Multimodal, Result};
use ir::{Attr, DType, Dim, Recipe};
use std::path::Path;

/// Published Qwen3-VL checkpoints store the tower as `model.visual.*`; `visual.*` is the
/// older layout.
const PREFIXES: &[&str] = &["model.visual.", "visual."];

/// The epsilon of every LayerNorm of the tower (`nn.LayerNorm(..., eps=1e-6)`).
const NORM_EPS: f64 = 1e-6;

/// The `vision_config` of a Qwen3-VL checkpoint.
#[derive(Clone, Debug, PartialEq)]
pub struct Qwen3Vision {
    pub depth: usize,
    pub hidden: usize,
    pub heads: usize,
    pub head_dim: usize,
    pub intermediate: usize,
    pub patch: usize,
    pub temporal_patch: usize,
    pub in_channels: usize,
    pub merge: usize,
    pub out_hidden: usize,
    pub act: Activation,
    /// The side of the learned position grid: `sqrt(num_position_embeddings)`.
    pub position_side: usize,
    /// Blocks after which a deepstack merger reads the hidden states, in output order.
    pub deepstack: Vec<usize>,
    pub rope_theta: f64,
}

impl Qwen3Vision {
    pub fn read(path: &Path, mm: &Multimodal, text_hidden: usize) -> Result<Qwen3Vision> {
        let v = Keys::new(path, "vision_config", &mm.vision);
        v.only("model_type", &["qwen3_vl", "qwen3_vl_vision"], "the Qwen3-VL tower is built for model_type qwen3_vl")?;
        let act = v.activation("hidden_act", Activation::GeluTanh)?;
        let depth = v.count("depth", None)?;
        let hidden = v.count("hidden_size", None)?;
        let heads = v.count("num_heads", None)?;
        let positions = v.count("num_position_embeddings", Some(2304))?;
        let position_side = (positions as f64).sqrt().round() as usize;
        if position_side * position_side != positions || position_side < 2 {
            return Err(v.err(format!(
                "key `vision_config.num_position_embeddings` is {positions}, which is not the square of a side of at least 2 (the learned positions are a square grid)"
            )));
        }
        if hidden % heads != 0 || (hidden / heads) % 4 != 0 {
            return Err(v.err(format!(
                "key `vision_config.hidden_size` {hidden} / `vision_config.num_heads` {heads} must be a whole head size divisible by 4 (the 2-D rotary splits half of each head between rows and columns)"
            )));
        }
        let deepstack = v.indexes("deepstack_visual_indexes", &[8, 16, 24])?;
        if let Some(bad) = deepstack.iter().find(|&&i| i >= depth) {
            return Err(v.err(format!("key `vision_config.deepstack_visual_indexes` names block {bad}, but `vision_config.depth` is {depth}")));
        }
        let out_hidden = v.count("out_hidden_size", None)?;
        if out_hidden != text_hidden {
            return Err(v.err(format!(
                "key `vision_config.out_hidden_size` is {out_hidden} but `text_config.hidden_size` is {text_hidden}: the merger's output replaces token embeddings, so they must be equal"
            )));
        }
        let rope_theta = match v.object("rope_parameters")? {
            Some(rope) => {
                let r = Keys::new(path, "vision_config.rope_parameters", rope);
                r.only("rope_type", &["default", "axial"], "the tower's 2-D rotary is unscaled")?;
                r.number("rope_theta", 10000.0)?
            }
            None => v.number("rope_theta", 10000.0)?,
        };
        Ok(Qwen3Vision {
            depth,
            hidden,
            heads,
            head_dim: hidden / heads,
            intermediate: v.count("intermediate_size", None)?,
            patch: v.count("patch_size", Some(16))?,
            temporal_patch: v.count("temporal_patch_size", Some(2))?,
            in_channels: v.count_of(&["in_channels", "in_chans"], Some(3))?,
            merge: v.count("spatial_merge_size", Some(2))?,
            out_hidden,
            act,
            position_side,
            deepstack,
            rope_theta,
        })
    }

    pub fn patch_dim(&self) -> usize {
        self.in_channels * self.temporal_patch * self.patch * self.patch
    }
}

/// `[N, hidden]` position embeddings: `pos_embed` bilinearly interpolated at each patch's
/// place in its image's patch grid, in f32 and cast to the graph's dtype. `rows`, `cols`,
/// `heights`, `widths` are per patch (int64): its row and column, and its image's grid size.
fn interpolated_positions(
    b: &mut GraphBuilder,
    ckpt: &Checkpoint,
    v: &Qwen3Vision,
    table_name: &str,
    [rows, cols, heights, widths]: [&str; 4],
) -> Result<String> {
    let s = "vision/pos_embed";
    let n = |name: &str| format!("{s}/{name}");
    let side = v.position_side;
    let table = ckpt.tensor(table_name, &[side * side, v.hidden])?.cast(DType::F32);
    let table = b.initializer(table_name, table);
    let f32c = |b: &mut GraphBuilder, name: &str, value: f32| b.initializer(&n(name), Recipe::from_f32(format!("{name} = {value}"), vec![], &[value]));
    let last = f32c(b, "last", (side - 1) as f32);
    let one = f32c(b, "one", 1.0);
    let last_i = b.const_i64(&n("last_index"), &[(side - 1) as i64]);
    let one_i = b.const_i64(&n("one_index"), &[1]);
    let side_i = b.const_i64(&n("side"), &[side as i64]);
    let to = |d: DType| vec![Attr::int("to", d.to_onnx() as i64)];
    // linspace(0, side - 1, size)[i] = i * (side - 1) / (size - 1), with size 1 giving [0].
    let coordinate = |b: &mut GraphBuilder, axis: &str, at: &str, size: &str| {
        let m = |part: &str| n(&format!("{axis}/{part}"));
        let size = b.op(&m("size"), "Cast", &[size], to(DType::F32));
        let steps = b.op(&m("steps"), "Sub", &[&size, &one], vec![]);
        let steps = b.op(&m("steps_at_least_one"), "Max", &[&steps, &one], vec![]);
        let step = b.op(&m("step"), "Div", &[&last, &steps], vec![]);
        let at = b.op(&m("index"), "Cast", &[at], to(DType::F32));
        let x = b.op(&m("coordinate"), "Mul", &[&at, &step], vec![]);
        // Coordinates are never negative, so truncation (Cast) is the floor; no Floor node,
        // which not every table claims.
        let low = b.op(&m("low"), "Cast", &[&x], to(DType::I64));
        let floor = b.op(&m("floor"), "Cast", &[&low], to(DType::F32));
        let frac = b.op(&m("fraction"), "Sub", &[&x, &floor], vec![]);
        let rest = b.op(&m("one_minus_fraction"), "Sub", &[&one, &frac], vec![]);
        let high = b.op(&m("high/next"), "Add", &[&low, &one_i], vec![]);
        let high = b.op(&m("high"), "Min", &[&high, &last_i], vec![]);
        (low, high, rest, frac)
    };
    let (h0, h1, h_rest, h_frac) = coordinate(b, "rows", rows, heights);
    let (w0, w1, w_rest, w_frac) = coordinate(b, "cols", cols, widths);
    let axes1 = b.const_i64_1d(&n("axes1"), &[1]);
    let mut sum: Option<String> = None;
    for (name, hi, wi, hw, ww) in
        [("00", &h0, &w0, &h_rest, &w_rest), ("01", &h0, &w1, &h_rest, &w_frac), ("10", &h1, &w0, &h_frac, &w_rest), ("11", &h1, &w1, &h_frac, &w_frac)]
    {
        let m = |part: &str| n(&format!("corner{name}/{part}"));
        let index = b.op(&m("row_start"), "Mul", &[hi, &side_i], vec![]);
        let index = b.op(&m("index"), "Add", &[&index, wi], vec![]);
        let rows = b.op(&m("Gather"), "Gather", &[&table, &index], vec![]);
        let weight = b.op(&m("weight"), "Mul", &[hw, ww], vec![]);
        let weight = b.op(&m("weight_column"), "Unsqueeze", &[&weight, &axes1], vec![]);
        let term = b.op(&m("weighted"), "Mul", &[&rows, &weight], vec![]);
        sum = Some(match sum {
            None => term,
            Some(acc) => b.op(&m("sum"), "Add", &[&acc, &term], vec![]),
        });
    }
    let sum = sum.expect("four corners");
    Ok(if b.float == DType::F32 { sum } else { b.op(&n("cast"), "Cast", &[&sum], to(b.float)) })
}

/// A Qwen3-VL patch merger on `x` `[1, L, hidden]` -> `[G, out_hidden]`: LayerNorm over each
/// patch (`post_shuffle`: over each merged token's patches side by side), the patches side by
/// side, `linear_fc1` -> GELU (erf) -> `linear_fc2`.
fn merger(b: &mut GraphBuilder, ckpt: &Checkpoint, v: &Qwen3Vision, scope: &str, x: &str, post_shuffle: bool) -> Result<String> {
    let wide = v.merge * v.merge * v.hidden;
    let shape = b.const_i64_1d(&format!("{scope}/merged_shape"), &[-1, wide as i64]);
    let h = if post_shuffle {
        let h = b.op(&format!("{scope}/merge"), "Reshape", &[x, &shape], vec![]);
        layer_norm(b, ckpt, &format!("{scope}.norm"), &h, wide, NORM_EPS)?
    } else {
        let h = layer_norm(b, ckpt, &format!("{scope}.norm"), x, v.hidden, NORM_EPS)?;
        b.op(&format!("{scope}/merge"), "Reshape", &[&h, &shape], vec![])
    };
    let fc1 = LinearWeights::torch(ckpt, b, &format!("{scope}.linear_fc1"), wide, wide, true)?;
    let h = linear(b, &format!("{scope}.linear_fc1"), &h, fc1);
    let h = activation(b, &format!("{scope}.act_fn"), &h, Activation::Gelu);
    let fc2 = LinearWeights::torch(ckpt, b, &format!("{scope}.linear_fc2"), wide, v.out_hidden, true)?;
    Ok(linear(b, &format!("{scope}.linear_fc2"), &h, fc2))
}

/// Builds the tower of a `qwen3_vl` checkpoint (see the module docs for the graph's I/O).
pub fn build(ckpt: &Checkpoint, opts: &BuildOptions) -> Result<ir::Model> {
    let c = &ckpt.config;
    let mm = c.multimodal.as_ref().ok_or_else(|| Error::Config {
        path: c.path.clone(),
        reason: "the Qwen3-VL vision tower needs a vision-language config.json (with `vision_config`)".into(),
    })?;
    let v = Qwen3Vision::read(&c.path, mm, c.hidden_size)?;
    let p = find_prefix(ckpt, PREFIXES, "patch_embed.proj.weight", "Qwen3-VL vision tower")?;
    let name = |rest: &str| format!("{p}{rest}");
    let mut b = GraphBuilder::new("main_graph", opts.dtype);
    let float = b.float;
    let hidden = v.hidden;
    let pixel_values = b.input(PIXEL_VALUES, float, vec![dim(opts, "num_patches"), Dim::Fixed(v.patch_dim() as i64)]);
    let grid = b.input(IMAGE_GRID_THW, DType::I64, vec![dim(opts, "num_images"), Dim::Fixed(3)]);

    // Per patch, in the processor's order: frame, row, column, and its image's grid size.
    let g = Grid::new(&mut b, "vision/grid", v.merge, &grid);
    let frame_ids = g.per_patch(&mut b, "frame_ids", &g.frame_of);
    let rows = g.patch_position(&mut b, "patch_rows", &g.row, true);
    let cols = g.patch_position(&mut b, "patch_cols", &g.col, false);
    let merge = g.constant(&mut b, "merge", v.merge as i64);
    let size = |b: &mut GraphBuilder, what: &str, per_frame: &str| {
        let merged = g.of_frame(b, &format!("token/frame_{what}"), per_frame);
        let patches = b.op(&g.name(&format!("token/image_{what}")), "Mul", &[&merged, &merge], vec![]);
        g.per_patch(b, &format!("patch_image_{what}"), &patches)
    };
    let heights = size(&mut b, "rows", &g.frame_rows);
    let widths = size(&mut b, "cols", &g.frame_cols);

    let scope = name("patch_embed.proj");
    let w = ckpt
        .tensor(&format!("{scope}.weight"), &[hidden, v.in_channels, v.temporal_patch, v.patch, v.patch])?
        .reshape(vec![hidden, v.patch_dim()])
        .transpose(vec![1, 0])
        .cast(float);
    let bias = ckpt.tensor(&format!("{scope}.bias"), &[hidden])?.cast(float);
    let x = linear(&mut b, &scope, &pixel_values, LinearWeights { weight: w, bias: Some(bias) });
    let positions = interpolated_positions(&mut b, ckpt, &v, &name("pos_embed.weight"), [&rows, &cols, &heights, &widths])?;
    let x = b.op(&name("pos_embed/Add"), "Add", &[&x, &positions], vec![]);
    let batch = b.const_i64_1d("vision/sequence/axes0", &[0]);
    let mut x = b.op("vision/sequence", "Unsqueeze", &[&x, &batch], vec![]);
    b.annotate(&x, float, vec![Dim::Fixed(1), dim(opts, "num_patches"), Dim::Fixed(hidden as i64)]);

    let (cos, sin) = rotary_tables(&mut b, v.head_dim, v.rope_theta, &rows, &cols);
    let mask = same_id_mask(&mut b, "vision/frame_mask", &frame_ids, &dim(opts, "num_patches"));
    let mut deepstack = vec![String::new(); v.deepstack.len()];
    for i in 0..v.depth {
        let blk = name(&format!("blocks.{i}"));
        let s = |part: &str| format!("{blk}.{part}");
        let h = layer_norm(&mut b, ckpt, &s("norm1"), &x, hidden, NORM_EPS)?;
        let o = attention(&mut b, ckpt, &s("attn"), &h, hidden, v.heads, (&cos, &sin), Span::Masked(&mask))?;
        x = b.op(&s("attn/residual/Add"), "Add", &[&x, &o], vec![]);
        let h = layer_norm(&mut b, ckpt, &s("norm2"), &x, hidden, NORM_EPS)?;
        let fc1 = LinearWeights::torch(ckpt, &b, &s("mlp.linear_fc1"), hidden, v.intermediate, true)?;
        let fc2 = LinearWeights::torch(ckpt, &b, &s("mlp.linear_fc2"), v.intermediate, hidden, true)?;
        let m = plain(&mut b, &s("mlp"), &s("mlp.linear_fc1"), &s("mlp.linear_fc2"), &h, [fc1, fc2], v.act);
        x = b.op(&s("mlp/residual/Add"), "Add", &[&x, &m], vec![]);
        for (k, _) in v.deepstack.iter().enumerate().filter(|(_, &at)| at == i) {
            deepstack[k] = merger(&mut b, ckpt, &v, &name(&format!("deepstack_merger_list.{k}")), &x, true)?;
        }
    }
    let features = merger(&mut b, ckpt, &v, &name("merger"), &x, false)?;
    let width = v.out_hidden * (1 + deepstack.len());
    if deepstack.is_empty() {
        b.node_named("vision/image_features", "Identity", &[&features], vec![], &[IMAGE_FEATURES]);
    } else {
        let blocks: Vec<&str> = std::iter::once(features.as_str()).chain(deepstack.iter().map(String::as_str)).collect();
        b.node_named("vision/image_features/with_deepstack", "Concat", &blocks, vec![Attr::int("axis", -1)], &[IMAGE_FEATURES]);
    }
    b.output(IMAGE_FEATURES, float, vec![dim(opts, "num_image_tokens"), Dim::Fixed(width as i64)]);
    account_for_prefixes(ckpt, &[p])?;
    finish(b, ckpt)
}
