//! The Qwen2.5-VL vision tower (`Qwen2_5_VisionTransformerPretrainedModel`), with every index
//! it needs computed in the graph from `image_grid_thw`.
//!
//! Inputs: `pixel_values [num_patches, C*T*P*P]` (patches in the processor's merge-block order:
//! per image and frame, merged rows, merged columns, then the `merge x merge` patches of each
//! merged token) and `image_grid_thw [num_images, 3]` int64 (t, h, w in patches). Output:
//! `image_features [num_image_tokens, out_hidden_size]`, one row per merged token in raster
//! order (the window permutation undone).
//!
//! What transformers computes in Python and this graph computes from the grid:
//! - the window order of the merged tokens (`get_window_index`): each frame's merged grid is
//!   cut into `window_size / spatial_merge_size / patch_size` square windows (the last row and
//!   column of windows may be partial), windows taken in raster order, tokens in raster order
//!   inside each. The graph gives every merged token a sort key (the frame's start in a padded
//!   layout + the window's and the token's raster position, so windows of a frame and frames
//!   never interleave) and sorts by scattering token ids into the padded slots and dropping the
//!   empty ones (a counting sort: no TopK, no loop);
//! - `cu_window_seqlens` / `cu_seqlens`: a windowed block lets a patch see the patches of its
//!   window, a `fullatt_block_indexes` block those of its frame (what transformers'
//!   `cu_seqlens` splits by; one frame per image for images). A windowed block runs on padded
//!   windows ([`PaddedWindows`]): each window that holds a patch is a row of `window_side^2 *
//!   merge^2` slots of a `[W, len, hidden]` batch, a partial window's free slots masked, so its
//!   attention costs `W * len^2` (a 1036 x 1036 image at 7B's sizes: 5476 patches in 100
//!   windows of 64 slots, 0.4 M score entries per head instead of 30 M); a full-attention
//!   block attends under a boolean `[1, 1, L, L]` mask from frame ids. Windows of any sizes and several images in one call
//!   are handled by one standard `Attention` per block;
//! - the 2-D rotary ids (`rot_pos_emb`): each patch's row and column in its frame, in window
//!   order, rotating the first half of each head's rotary frequencies by the row and the second
//!   half by the column;
//! - the reverse permutation after the merger (`argsort(window_index)`), by a scatter.

use super::grid::Grid;
use super::{account_for_prefixes, dim, find_prefix, finish, Keys, IMAGE_FEATURES, IMAGE_GRID_THW, PIXEL_VALUES};
use crate::components::linear::{linear, LinearWeights, WeightLayout};
use crate::components::mlp::{activation, gated, GatedScopes};
use crate::components::norm::rms_norm;
use crate::components::rope::inverse_frequencies;
use crate::{Activation, BuildOptions, Checkpoint, Error, GraphBuilder, Multimodal, Result, RopeConfig, RopeKind};
use ir::{Attr, DType, Dim, Recipe};
use std::path::Path;

/// Where checkpoints store the tower: transformers 4 (and the published Qwen checkpoints)
/// write `visual.*`, transformers 5's own layout `model.visual.*`.
const PREFIXES: &[&str] = &["visual.", "model.visual."];

/// The epsilon of every RMSNorm of the tower (`Qwen2RMSNorm(..., eps=1e-6)` in transformers;
/// not a config key).
const NORM_EPS: f64 = 1e-6;

/// The `vision_config` of a Qwen2.5-VL checkpoint, every size read from its keys.
#[derive(Clone, Debug, PartialEq)]
pub struct QwenVision {
    pub depth: usize,
    pub hidden: usize,
    pub heads: usize,
    pub head_dim: usize,
    pub intermediate: usize,
    pub patch: usize,
    pub temporal_patch: usize,
    pub in_channels: usize,
    /// `spatial_merge_size`: a merged token is `merge x merge` patches.
    pub merge: usize,
    /// A window's side in merged tokens: `window_size / spatial_merge_size / patch_size`.
    pub window_side: usize,
    /// Blocks that attend over each whole frame instead of within windows.
    pub full_attention: Vec<usize>,
    pub out_hidden: usize,
    pub act: Activation,
    pub rope_theta: f64,
}

impl QwenVision {
    /// Reads and checks `vision_config`; `text_hidden` is the text model's hidden size, which
    /// the merger's output must have (the features replace token embeddings).
    pub fn read(path: &Path, mm: &Multimodal, text_hidden: usize) -> Result<QwenVision> {
        let v = Keys::new(path, "vision_config", &mm.vision);
        v.only("model_type", &["qwen2_5_vl", "qwen2_5_vl_vision"], "the Qwen2.5-VL tower is built for model_type qwen2_5_vl")?;
        let act = v.activation("hidden_act", Activation::Silu)?;
        let depth = v.count("depth", None)?;
        let hidden = v.count("hidden_size", None)?;
        let heads = v.count("num_heads", None)?;
        let intermediate = v.count("intermediate_size", None)?;
        let out_hidden = v.count("out_hidden_size", None)?;
        let patch = v.count_of(&["patch_size", "spatial_patch_size"], Some(14))?;
        let temporal_patch = v.count("temporal_patch_size", Some(2))?;
        let merge = v.count("spatial_merge_size", Some(2))?;
        let window_size = v.count("window_size", Some(112))?;
        let in_channels = v.count_of(&["in_channels", "in_chans"], Some(3))?;
        let full_attention = v.indexes("fullatt_block_indexes", &[7, 15, 23, 31])?;
        if hidden % heads != 0 || (hidden / heads) % 4 != 0 {
            return Err(v.err(format!(
                "key `vision_config.hidden_size` {hidden} / `vision_config.num_heads` {heads} must be a whole head size divisible by 4 (the 2-D rotary splits half of each head between rows and columns)"
            )));
        }
        let window_side = window_size / merge / patch;
        if window_side == 0 {
            return Err(v.err(format!(
                "key `vision_config.window_size` {window_size} is smaller than one merged token (`spatial_merge_size` {merge} x `patch_size` {patch} pixels)"
            )));
        }
        if let Some(bad) = full_attention.iter().find(|&&i| i >= depth) {
            return Err(v.err(format!("key `vision_config.fullatt_block_indexes` names block {bad}, but `vision_config.depth` is {depth}")));
        }
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
        Ok(QwenVision {
            depth,
            hidden,
            heads,
            head_dim: hidden / heads,
            intermediate,
            patch,
            temporal_patch,
            in_channels,
            merge,
            window_side,
            full_attention,
            out_hidden,
            act,
            rope_theta,
        })
    }

    /// Values of one pixel patch: `C * T * P * P`.
    pub fn patch_dim(&self) -> usize {
        self.in_channels * self.temporal_patch * self.patch * self.patch
    }

    /// Patches per merged token.
    fn unit(&self) -> usize {
        self.merge * self.merge
    }
}

/// The index bookkeeping of a batch of images, all `[.]` int64 values of the graph.
pub struct WindowLayout {
    /// `[G]`: the raster index of the merged token at each window-order position.
    pub window_index: String,
    /// `[G]`: the window-order position of each raster merged token (`argsort(window_index)`).
    pub reverse_index: String,
    /// `[L]`: per patch, in window order, the id of its window (unique over the batch).
    pub window_ids: String,
    /// `[L]`: per patch, in window order, the id of its frame (unique over the batch).
    pub frame_ids: String,
    /// `[L]`: per patch, in window order, its row in its frame's patch grid.
    pub rows: String,
    /// `[L]`: per patch, in window order, its column in its frame's patch grid.
    pub cols: String,
    /// `[G]`: per merged token in window order, its slot in the padded layout (frames, then
    /// windows of `window_side^2` slots, transformers' empty padding windows included).
    pub token_key: String,
    /// `[1]`: the padded layout's slot count.
    pub slot_count: String,
    /// The grid the layout was computed from (its per-patch helpers).
    pub grid: Grid,
}

/// The windowed blocks' attention runs per window: each window's patches gathered into a row
/// of `len` slots of a `[W, len]` batch (W: the windows that hold a patch, in window order;
/// a partial window's free slots masked), so attention costs `W * len^2`, not `L^2`.
pub struct PaddedWindows {
    /// `[L]`: per patch (window order), its slot in the `W * len` padded windows.
    pub slots: String,
    /// `[W * len]`: per slot, the patch it holds (patch 0 for a free slot, which is masked).
    pub gather: String,
    /// `[W, 1, len, len]` boolean: the slots that hold a patch, for every query of the row.
    pub mask: String,
    /// Slots per window: `window_side^2` merged tokens of `merge^2` patches.
    pub len: usize,
    /// The patch count's dimension (fixed where the build asks for static shapes).
    pub patches: Dim,
}

/// The [`PaddedWindows`] of `layout`.
pub fn padded_windows(b: &mut GraphBuilder, v: &QwenVision, layout: &WindowLayout, patch_dim: Dim) -> PaddedWindows {
    let g = &layout.grid;
    let n = |name: &str| g.name(&format!("padded/{name}"));
    let area = v.window_side * v.window_side;
    let len = area * v.unit();
    let area_value = g.constant(b, "padded/area", area as i64);
    let len_value = g.constant(b, "padded/len", len as i64);
    let fill = |b: &mut GraphBuilder, name: &str, shape: &str, value: i64| {
        let value = Recipe::from_i64(n(&format!("{name}_value")), vec![1], &[value]);
        b.op(&n(name), "ConstantOfShape", &[shape], vec![Attr::tensor("value", value)])
    };
    let axis0 = g.constant(b, "padded/axis0", 0);
    // The windows that hold a token, numbered in window order (the empty padding windows
    // transformers' layout has get no row).
    let window = b.op(&n("token/window"), "Div", &[&layout.token_key, &area_value], vec![]);
    let windows = b.op(&n("window_count"), "Div", &[&layout.slot_count, &area_value], vec![]);
    let none = fill(b, "windows/none", &windows, 0);
    let token_shape = b.op(&n("token/shape"), "Shape", &[&window], vec![]);
    let token_ones = fill(b, "token/ones", &token_shape, 1);
    // Every token of a window writes its 1 there: `max`, since indices may repeat.
    let held = b.op(&n("windows/held"), "ScatterElements", &[&none, &window, &token_ones], vec![Attr::int("axis", 0), Attr::string("reduction", "max")]);
    let before = b.op(&n("windows/before"), "CumSum", &[&held, &axis0], vec![Attr::int("exclusive", 1)]);
    let row = g.gather(b, "padded/token/row", &before, &window);
    let in_window = b.op(&n("token/in_window"), "Mod", &[&layout.token_key, &area_value], vec![]);
    let token_slot = b.op(&n("token/slot/row"), "Mul", &[&row, &area_value], vec![]);
    let token_slot = b.op(&n("token/slot"), "Add", &[&token_slot, &in_window], vec![]);
    let slots = g.patch_slots(b, "padded/slots", &token_slot);
    // Per slot, its patch: patch ids scattered into their slots.
    let rows = b.op(&n("row_count"), "ReduceSum", &[&held], vec![Attr::int("keepdims", 1)]);
    let total = b.op(&n("slot_count"), "Mul", &[&rows, &len_value], vec![]);
    let patch_shape = b.op(&n("patch/shape"), "Shape", &[&slots], vec![]);
    let patch_ones = fill(b, "patch/ones", &patch_shape, 1);
    let patches = b.op(&n("patch/ids"), "CumSum", &[&patch_ones, &axis0], vec![Attr::int("exclusive", 1)]);
    let empty = fill(b, "slots/empty", &total, 0);
    let gather = b.op(&n("gather"), "ScatterElements", &[&empty, &slots, &patches], vec![Attr::int("axis", 0)]);
    let filled = b.op(&n("slots/filled"), "ScatterElements", &[&empty, &slots, &patch_ones], vec![Attr::int("axis", 0)]);
    let filled = b.op(&n("slots/held"), "Cast", &[&filled], vec![Attr::int("to", DType::Bool.to_onnx() as i64)]);
    let key_shape = b.const_i64_1d(&n("keys/shape"), &[-1, len as i64]);
    let keys = b.op(&n("keys"), "Reshape", &[&filled, &key_shape], vec![]);
    let windows_dim = Dim::sym("num_windows");
    b.annotate(&keys, DType::Bool, vec![windows_dim.clone(), Dim::Fixed(len as i64)]);
    // [W, 1, len, len]: ONNX Runtime's Attention wants the query axis spelled out, not
    // broadcast.
    let axes = b.const_i64_1d(&n("mask/axes"), &[1, 2]);
    let per_key = b.op(&n("mask/keys"), "Unsqueeze", &[&keys, &axes], vec![]);
    b.annotate(&per_key, DType::Bool, vec![windows_dim.clone(), Dim::Fixed(1), Dim::Fixed(1), Dim::Fixed(len as i64)]);
    let square = b.const_i64_1d(&n("mask/shape"), &[1, 1, len as i64, len as i64]);
    let mask = b.op("vision/window_mask", "Expand", &[&per_key, &square], vec![]);
    b.annotate(&mask, DType::Bool, vec![windows_dim, Dim::Fixed(1), Dim::Fixed(len as i64), Dim::Fixed(len as i64)]);
    PaddedWindows { slots, gather, mask, len, patches: patch_dim }
}

/// Builds the layout of `grid` (`[num_images, 3]` int64) under scope `vision/layout`.
pub fn window_layout(b: &mut GraphBuilder, v: &QwenVision, grid: &str) -> WindowLayout {
    let g = Grid::new(b, "vision/layout", v.merge, grid);
    let n = |name: &str| g.name(name);
    let side = g.constant(b, "window_side", v.window_side as i64);
    let area = g.constant(b, "window_area", (v.window_side * v.window_side) as i64);
    let one = g.one().to_string();

    // transformers pads each side up to a whole number of windows, always adding at least one
    // window row and column (`pad = side - n % side`); those windows are empty and only make
    // the padded layout larger.
    let win_rows = b.op(&n("window_rows/div"), "Div", &[&g.frame_rows, &side], vec![]);
    let win_rows = b.op(&n("window_rows"), "Add", &[&win_rows, &one], vec![]);
    let win_cols = b.op(&n("window_cols/div"), "Div", &[&g.frame_cols, &side], vec![]);
    let win_cols = b.op(&n("window_cols"), "Add", &[&win_cols, &one], vec![]);
    let windows_f = b.op(&n("frame_windows"), "Mul", &[&win_rows, &win_cols], vec![]);
    let padded_f = b.op(&n("frame_padded_size"), "Mul", &[&windows_f, &area], vec![]);
    let padded_end = g.cumsum(b, "frame_padded_end", &padded_f);
    let padded_start = b.op(&n("frame_padded_start"), "Sub", &[&padded_end, &padded_f], vec![]);

    let (row, col) = (&g.row, &g.col);
    let win_cols_t = g.of_frame(b, "token/window_cols", &win_cols);
    let win_row = b.op(&n("token/window_row"), "Div", &[row, &side], vec![]);
    let win_col = b.op(&n("token/window_col"), "Div", &[col, &side], vec![]);
    let in_row = b.op(&n("token/row_in_window"), "Mod", &[row, &side], vec![]);
    let in_col = b.op(&n("token/col_in_window"), "Mod", &[col, &side], vec![]);
    let window = b.op(&n("token/window/mul"), "Mul", &[&win_row, &win_cols_t], vec![]);
    let window = b.op(&n("token/window"), "Add", &[&window, &win_col], vec![]);
    // key = padded_start[frame] + (window * side + row_in_window) * side + col_in_window: the
    // token's slot in the padded layout, whose order is the window order.
    let key = b.op(&n("token/key/window"), "Mul", &[&window, &side], vec![]);
    let key = b.op(&n("token/key/row"), "Add", &[&key, &in_row], vec![]);
    let key = b.op(&n("token/key/row_scaled"), "Mul", &[&key, &side], vec![]);
    let key = b.op(&n("token/key/col"), "Add", &[&key, &in_col], vec![]);
    let padded_first = g.of_frame(b, "token/frame_padded_start", &padded_start);
    let key = b.op(&n("token/key"), "Add", &[&key, &padded_first], vec![]);

    // The counting sort: token ids scattered into their slots, empty slots (-1) dropped.
    let slots_n = b.op(&n("slot_count"), "ReduceSum", &[&padded_f], vec![Attr::int("keepdims", 1)]);
    let empty = Recipe::from_i64(n("empty_slot"), vec![1], &[-1]);
    let slots = b.op(&n("slots/empty"), "ConstantOfShape", &[&slots_n], vec![Attr::tensor("value", empty)]);
    let slots = b.op(&n("slots"), "ScatterElements", &[&slots, &key, &g.tokens], vec![Attr::int("axis", 0)]);
    let filled = b.op(&n("slots/filled"), "GreaterOrEqual", &[&slots, g.zero()], vec![]);
    let window_index = b.op(&n("window_index"), "Compress", &[&slots, &filled], vec![Attr::int("axis", 0)]);
    let reverse_index =
        b.op(&n("reverse_index"), "ScatterElements", &[&g.tokens, &window_index, &g.tokens], vec![Attr::int("axis", 0)]);

    // Per merged token in window order, then per patch.
    let key_w = g.gather(b, "ordered/key", &key, &window_index);
    let window_w = b.op(&n("ordered/window"), "Div", &[&key_w, &area], vec![]);
    let frame_w = g.gather(b, "ordered/frame", &g.frame_of, &window_index);
    let row_w = g.gather(b, "ordered/row", row, &window_index);
    let col_w = g.gather(b, "ordered/col", col, &window_index);
    let window_ids = g.per_patch(b, "window_ids", &window_w);
    let frame_ids = g.per_patch(b, "frame_ids", &frame_w);
    let rows = g.patch_position(b, "patch_rows", &row_w, true);
    let cols = g.patch_position(b, "patch_cols", &col_w, false);
    WindowLayout { window_index, reverse_index, window_ids, frame_ids, rows, cols, token_key: key_w, slot_count: slots_n, grid: g }
}

/// A graph of the layout alone (input `image_grid_thw`; outputs `window_index`,
/// `reverse_index`, `window_ids`, `frame_ids`, `rows`, `cols`), for checking the in-graph
/// bookkeeping against transformers' on grids no fixture has.
pub fn layout_model(v: &QwenVision) -> Result<ir::Model> {
    let mut b = GraphBuilder::new("qwen2_5_vl_layout", DType::F32);
    let grid = b.input(IMAGE_GRID_THW, DType::I64, vec![Dim::sym("num_images"), Dim::Fixed(3)]);
    let l = window_layout(&mut b, v, &grid);
    let outputs = [
        ("window_index", &l.window_index, "num_image_tokens"),
        ("reverse_index", &l.reverse_index, "num_image_tokens"),
        ("window_ids", &l.window_ids, "num_patches"),
        ("frame_ids", &l.frame_ids, "num_patches"),
        ("rows", &l.rows, "num_patches"),
        ("cols", &l.cols, "num_patches"),
    ];
    for (name, value, len) in outputs {
        b.node_named(&format!("outputs/{name}"), "Identity", &[value], vec![], &[name]);
        b.output(name, DType::I64, vec![Dim::sym(len)]);
    }
    let mut graph = b.finish();
    graph.toposort()?;
    Ok(ir::Model { graph, producer: "onnx-tailor".into(), ..Default::default() })
}

/// `[1, 1, L, L]` boolean: patch i may see patch j when their `ids` (`[L]`, L = `len`) are
/// equal. Built as the `[1, L, L]` row mask unsqueezed at axis 1, both annotated with their
/// type: rules read them (a fusion rule turns the row mask into MultiHeadAttention's 3-D
/// key_padding_mask).
pub(super) fn same_id_mask(b: &mut GraphBuilder, s: &str, ids: &str, len: &Dim) -> String {
    let axes0 = b.const_i64_1d(&format!("{s}/axes0"), &[0]);
    let axes1 = b.const_i64_1d(&format!("{s}/axes1"), &[1]);
    let col = b.op(&format!("{s}/query"), "Unsqueeze", &[ids, &axes1], vec![]);
    let row = b.op(&format!("{s}/key"), "Unsqueeze", &[ids, &axes0], vec![]);
    let same = b.op(&format!("{s}/Equal"), "Equal", &[&col, &row], vec![]);
    let rows = b.op(&format!("{s}/rows"), "Unsqueeze", &[&same, &axes0], vec![]);
    b.annotate(&rows, DType::Bool, vec![Dim::Fixed(1), len.clone(), len.clone()]);
    let mask = b.op(s, "Unsqueeze", &[&rows, &axes1], vec![]);
    b.annotate(&mask, DType::Bool, vec![Dim::Fixed(1), Dim::Fixed(1), len.clone(), len.clone()]);
    mask
}

/// cos/sin `[1, L, head_dim / 2]` of the 2-D rotary: per patch, the row angles of the first
/// `head_dim / 4` frequencies then the column angles of the same frequencies (transformers'
/// `rotary_pos_emb_full[pos_ids].flatten(1)`), computed in f32 and cast to the graph's dtype.
pub(super) fn rotary_tables(b: &mut GraphBuilder, head_dim: usize, theta: f64, rows: &str, cols: &str) -> (String, String) {
    let s = "vision/rotary";
    let rope = RopeConfig { theta, kind: RopeKind::Default, partial_rotary_factor: 1.0, mscale: None };
    let inv = inverse_frequencies(&rope, head_dim / 2);
    let label = format!("{s}/inv_freq theta={theta} dim={}", head_dim / 2);
    let inv = b.initializer(&format!("{s}/inv_freq"), Recipe::from_f32(label, vec![1, inv.len()], &inv));
    let axes0 = b.const_i64_1d(&format!("{s}/axes0"), &[0]);
    let axes1 = b.const_i64_1d(&format!("{s}/axes1"), &[1]);
    let to_f32 = vec![Attr::int("to", DType::F32.to_onnx() as i64)];
    let angles = |b: &mut GraphBuilder, name: &str, ids: &str| {
        let ids = b.op(&format!("{s}/{name}/float"), "Cast", &[ids], to_f32.clone());
        let ids = b.op(&format!("{s}/{name}/column"), "Unsqueeze", &[&ids, &axes1], vec![]);
        b.op(&format!("{s}/{name}/angles"), "Mul", &[&ids, &inv], vec![])
    };
    let by_row = angles(b, "rows", rows);
    let by_col = angles(b, "cols", cols);
    let angles = b.op(&format!("{s}/angles"), "Concat", &[&by_row, &by_col], vec![Attr::int("axis", 1)]);
    let mut table = |op: &str| {
        let t = b.op(&format!("{s}/{op}"), op, &[&angles], vec![]);
        let t = b.op(&format!("{s}/{op}/batch"), "Unsqueeze", &[&t, &axes0], vec![]);
        if b.float == DType::F32 {
            t
        } else {
            b.op(&format!("{s}/{op}/cast"), "Cast", &[&t], vec![Attr::int("to", b.float.to_onnx() as i64)])
        }
    };
    let cos = table("Cos");
    let sin = table("Sin");
    (cos, sin)
}

/// Where a Qwen vision block's attention looks: every patch of the call under a `[1, 1, L, L]`
/// mask, or each window's patches as one row of [`PaddedWindows`].
pub(super) enum Span<'a> {
    Masked(&'a str),
    Windows(&'a PaddedWindows),
}

/// A Qwen vision block's attention (`{scope}.qkv` fused with bias, 2-D rotary on q and k,
/// `Attention` over `span`, `{scope}.proj` with bias) on `h` `[1, L, hidden]`.
#[allow(clippy::too_many_arguments)]
pub(super) fn attention(
    b: &mut GraphBuilder,
    ckpt: &Checkpoint,
    scope: &str,
    h: &str,
    hidden: usize,
    heads: usize,
    (cos, sin): (&str, &str),
    span: Span,
) -> Result<String> {
    let qkv = LinearWeights::read_fused(ckpt, b, &format!("{scope}.qkv"), hidden, &[hidden; 3], true, WeightLayout::Linear)?;
    let Ok::<[LinearWeights; 3], _>([q, k, v]) = qkv.try_into() else { unreachable!("read_fused returns one weight per part") };
    let q = linear(b, &format!("{scope}.q"), h, q);
    let k = linear(b, &format!("{scope}.k"), h, k);
    let v = linear(b, &format!("{scope}.v"), h, v);
    let rotary = |b: &mut GraphBuilder, which: &str, t: &str| {
        let attrs = vec![Attr::int("interleaved", 0), Attr::int("num_heads", heads as i64)];
        b.op(&format!("{scope}/{which}/RotaryEmbedding"), "RotaryEmbedding", &[t, cos, sin], attrs)
    };
    let q = rotary(b, "q", &q);
    let k = rotary(b, "k", &k);
    let attrs = vec![Attr::int("is_causal", 0), Attr::int("kv_num_heads", heads as i64), Attr::int("q_num_heads", heads as i64)];
    let a = match span {
        Span::Masked(mask) => b.op(&format!("{scope}/Attention"), "Attention", &[&q, &k, &v, mask], attrs),
        Span::Windows(w) => {
            // [1, L, hidden] -> [W, len, hidden]: each window's patches a row of its own.
            let shape = b.const_i64_1d(&format!("{scope}/windows/shape"), &[-1, w.len as i64, hidden as i64]);
            let mut to_windows = |which: &str, t: &str| {
                let t = b.op(&format!("{scope}/{which}/windows/Gather"), "Gather", &[t, &w.gather], vec![Attr::int("axis", 1)]);
                let t = b.op(&format!("{scope}/{which}/windows"), "Reshape", &[&t, &shape], vec![]);
                b.annotate(&t, b.float, vec![Dim::sym("num_windows"), Dim::Fixed(w.len as i64), Dim::Fixed(hidden as i64)]);
                t
            };
            let (q, k, v) = (to_windows("q", &q), to_windows("k", &k), to_windows("v", &v));
            let a = b.op(&format!("{scope}/Attention"), "Attention", &[&q, &k, &v, &w.mask], attrs);
            // And back: [W, len, hidden] -> [1, W * len, hidden] -> each patch's slot.
            let flat = b.const_i64_1d(&format!("{scope}/patches/shape"), &[1, -1, hidden as i64]);
            let a = b.op(&format!("{scope}/patches/slots"), "Reshape", &[&a, &flat], vec![]);
            let a = b.op(&format!("{scope}/patches"), "Gather", &[&a, &w.slots], vec![Attr::int("axis", 1)]);
            b.annotate(&a, b.float, vec![Dim::Fixed(1), w.patches.clone(), Dim::Fixed(hidden as i64)]);
            a
        }
    };
    let proj = LinearWeights::torch(ckpt, b, &format!("{scope}.proj"), hidden, hidden, true)?;
    Ok(linear(b, &format!("{scope}.proj"), &a, proj))
}

/// Builds the tower of a `qwen2_5_vl` checkpoint (see the module docs for the graph's I/O).
pub fn build(ckpt: &Checkpoint, opts: &BuildOptions) -> Result<ir::Model> {
    let c = &ckpt.config;
    let mm = c.multimodal.as_ref().ok_or_else(|| Error::Config {
        path: c.path.clone(),
        reason: "the Qwen2.5-VL vision tower needs a vision-language config.json (with `vision_config`)".into(),
    })?;
    let v = QwenVision::read(&c.path, mm, c.hidden_size)?;
    let p = find_prefix(ckpt, PREFIXES, "patch_embed.proj.weight", "Qwen2.5-VL vision tower")?;
    let name = |rest: &str| format!("{p}{rest}");
    let mut b = GraphBuilder::new("main_graph", opts.dtype);
    let float = b.float;
    let (hidden, unit) = (v.hidden, v.unit());
    let pixel_values = b.input(PIXEL_VALUES, float, vec![dim(opts, "num_patches"), Dim::Fixed(v.patch_dim() as i64)]);
    let grid = b.input(IMAGE_GRID_THW, DType::I64, vec![dim(opts, "num_images"), Dim::Fixed(3)]);
    let layout = window_layout(&mut b, &v, &grid);

    // Patch embedding: a Conv3d whose stride is its kernel is a MatMul over each flattened
    // (C, T, P, P) patch.
    let scope = name("patch_embed.proj");
    let w = ckpt
        .tensor(&format!("{scope}.weight"), &[hidden, v.in_channels, v.temporal_patch, v.patch, v.patch])?
        .reshape(vec![hidden, v.patch_dim()])
        .transpose(vec![1, 0])
        .cast(float);
    let x = linear(&mut b, &scope, &pixel_values, LinearWeights { weight: w, bias: None });
    // Into window order, whole merged tokens at a time.
    let s = "vision/window_order";
    let tokens_shape = b.const_i64_1d(&format!("{s}/tokens_shape"), &[-1, unit as i64, hidden as i64]);
    let x = b.op(&format!("{s}/tokens"), "Reshape", &[&x, &tokens_shape], vec![]);
    let x = b.op(&format!("{s}/Gather"), "Gather", &[&x, &layout.window_index], vec![Attr::int("axis", 0)]);
    let seq_shape = b.const_i64_1d(&format!("{s}/sequence_shape"), &[1, -1, hidden as i64]);
    let mut x = b.op(&format!("{s}/sequence"), "Reshape", &[&x, &seq_shape], vec![]);
    // One row of every patch of the call: its type, which Reshape's -1 hides, lets rules see
    // the blocks' q/k/v shapes.
    b.annotate(&x, float, vec![Dim::Fixed(1), dim(opts, "num_patches"), Dim::Fixed(hidden as i64)]);

    let (cos, sin) = rotary_tables(&mut b, v.head_dim, v.rope_theta, &layout.rows, &layout.cols);
    let windowed = (0..v.depth).any(|i| !v.full_attention.contains(&i));
    let windows = windowed.then(|| padded_windows(&mut b, &v, &layout, dim(opts, "num_patches")));
    let frame_mask = (!v.full_attention.is_empty()).then(|| same_id_mask(&mut b, "vision/frame_mask", &layout.frame_ids, &dim(opts, "num_patches")));
    for i in 0..v.depth {
        let blk = name(&format!("blocks.{i}"));
        let s = |part: &str| format!("{blk}.{part}");
        let h = rms_norm(&mut b, ckpt, &s("norm1"), &x, hidden, NORM_EPS)?;
        let span = match (v.full_attention.contains(&i), &frame_mask, &windows) {
            (true, Some(mask), _) => Span::Masked(mask),
            (false, _, Some(w)) => Span::Windows(w),
            _ => unreachable!("the span a block uses is built"),
        };
        let o = attention(&mut b, ckpt, &s("attn"), &h, hidden, v.heads, (&cos, &sin), span)?;
        x = b.op(&s("attn/residual/Add"), "Add", &[&x, &o], vec![]);
        let h = rms_norm(&mut b, ckpt, &s("norm2"), &x, hidden, NORM_EPS)?;
        let weights = [
            LinearWeights::torch(ckpt, &b, &s("mlp.gate_proj"), hidden, v.intermediate, true)?,
            LinearWeights::torch(ckpt, &b, &s("mlp.up_proj"), hidden, v.intermediate, true)?,
            LinearWeights::torch(ckpt, &b, &s("mlp.down_proj"), v.intermediate, hidden, true)?,
        ];
        let scopes = GatedScopes { gate: &s("mlp.gate_proj"), up: &s("mlp.up_proj"), down: &s("mlp.down_proj") };
        let m = gated(&mut b, &s("mlp"), scopes, &h, weights, v.act);
        x = b.op(&s("mlp/residual/Add"), "Add", &[&x, &m], vec![]);
    }

    // The merger: RMSNorm, each merged token's patches side by side, a GELU MLP.
    let m = name("merger");
    let h = rms_norm(&mut b, ckpt, &format!("{m}.ln_q"), &x, hidden, NORM_EPS)?;
    let merged_shape = b.const_i64_1d(&format!("{m}/merged_shape"), &[-1, (unit * hidden) as i64]);
    let h = b.op(&format!("{m}/merge"), "Reshape", &[&h, &merged_shape], vec![]);
    let wide = unit * hidden;
    let up = LinearWeights::torch(ckpt, &b, &format!("{m}.mlp.0"), wide, wide, true)?;
    let h = linear(&mut b, &format!("{m}.mlp.0"), &h, up);
    // `nn.GELU()`: the exact erf form, whatever `hidden_act` says.
    let h = activation(&mut b, &format!("{m}.mlp.1"), &h, Activation::Gelu);
    let down = LinearWeights::torch(ckpt, &b, &format!("{m}.mlp.2"), wide, v.out_hidden, true)?;
    let h = linear(&mut b, &format!("{m}.mlp.2"), &h, down);
    // Back to raster order.
    b.node_named("vision/raster_order/Gather", "Gather", &[&h, &layout.reverse_index], vec![Attr::int("axis", 0)], &[IMAGE_FEATURES]);
    b.output(IMAGE_FEATURES, float, vec![dim(opts, "num_image_tokens"), Dim::Fixed(v.out_hidden as i64)]);
    account_for_prefixes(ckpt, &[p])?;
    finish(b, ckpt)
}
