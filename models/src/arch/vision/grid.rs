//! The patch-grid bookkeeping the Qwen towers share, computed in the graph from
//! `image_grid_thw [num_images, 3]` (t, h, w in patches): which frame every merged token
//! belongs to and where it sits, in the processor's order (image, frame, merged row, merged
//! column), and the same per patch (each merged token's `merge x merge` patches, row-major).
//!
//! Everything is int64 and loop-free: a value's segment among consecutive segments is the
//! count of segment ends at or before it (a `[n, segments]` comparison summed), which is
//! cheap for the few images and frames of a call.

use crate::GraphBuilder;
use ir::{Attr, DType, Recipe};

/// The frames and merged tokens of one call, and the constants the per-patch helpers use.
pub struct Grid {
    scope: String,
    merge: usize,
    /// `[F]`: merged rows / columns of each frame (its image's `h / merge`, `w / merge`).
    pub frame_rows: String,
    pub frame_cols: String,
    /// `[F]`: the raster index of each frame's first merged token.
    pub frame_start: String,
    /// `[G]`: `0 .. G`, the merged tokens in raster order.
    pub tokens: String,
    /// `[G]`: each merged token's frame (unique over the call).
    pub frame_of: String,
    /// `[G]`: each merged token's row / column in its frame's merged grid.
    pub row: String,
    pub col: String,
    zero: String,
    one: String,
    axis0: String,
    axes0: String,
    axes1: String,
    flat: String,
    per_unit: String,
    merge_value: String,
}

impl Grid {
    /// Builds the grid of `grid` (`[num_images, 3]` int64) under node-name scope `scope`.
    pub fn new(b: &mut GraphBuilder, scope: &str, merge: usize, grid: &str) -> Grid {
        let n = |name: &str| format!("{scope}/{name}");
        let c = |b: &mut GraphBuilder, name: &str, value: i64| b.const_i64(&n(name), &[value]);
        let merge_value = c(b, "merge", merge as i64);
        let zero = c(b, "zero", 0);
        let one = c(b, "one", 1);
        let axis0 = c(b, "axis0", 0);
        let axes0 = b.const_i64_1d(&n("axes0"), &[0]);
        let axes1 = b.const_i64_1d(&n("axes1"), &[1]);
        let flat = b.const_i64_1d(&n("flat"), &[-1]);
        let unit = merge * merge;
        let per_unit = b.const_i64_1d(&n("unit_shape"), &[1, unit as i64]);
        let mut g = Grid {
            scope: scope.to_string(),
            merge,
            frame_rows: String::new(),
            frame_cols: String::new(),
            frame_start: String::new(),
            tokens: String::new(),
            frame_of: String::new(),
            row: String::new(),
            col: String::new(),
            zero,
            one,
            axis0,
            axes0,
            axes1,
            flat,
            per_unit,
            merge_value,
        };

        let column = |b: &mut GraphBuilder, i: i64, name: &str| {
            let index = b.const_i64(&n(&format!("{name}_column")), &[i]);
            b.op(&n(name), "Gather", &[grid, &index], vec![Attr::int("axis", 1)])
        };
        let frames_per_image = column(b, 0, "t");
        let h = column(b, 1, "h");
        let w = column(b, 2, "w");
        let merged_h = b.op(&n("merged_h"), "Div", &[&h, &g.merge_value], vec![]);
        let merged_w = b.op(&n("merged_w"), "Div", &[&w, &g.merge_value], vec![]);

        // Frames: each image's `t` frames in order; every frame has its image's merged grid.
        let image_ends = g.cumsum(b, "image_frame_ends", &frames_per_image);
        let frame_count = b.op(&n("frame_count"), "ReduceSum", &[&frames_per_image], vec![Attr::int("keepdims", 0)]);
        let frames = b.op(&n("frames"), "Range", &[&g.zero, &frame_count, &g.one], vec![]);
        let image_of_frame = g.segment(b, "image_of_frame", &frames, &image_ends);
        g.frame_rows = g.gather(b, "frame_rows", &merged_h, &image_of_frame);
        g.frame_cols = g.gather(b, "frame_cols", &merged_w, &image_of_frame);
        let size = b.op(&n("frame_size"), "Mul", &[&g.frame_rows, &g.frame_cols], vec![]);
        let end = g.cumsum(b, "frame_end", &size);
        g.frame_start = b.op(&n("frame_start"), "Sub", &[&end, &size], vec![]);

        // Merged tokens in raster order (image, frame, row, column).
        let token_count = b.op(&n("token_count"), "ReduceSum", &[&size], vec![Attr::int("keepdims", 0)]);
        g.tokens = b.op(&n("tokens"), "Range", &[&g.zero, &token_count, &g.one], vec![]);
        g.frame_of = g.segment(b, "frame_of_token", &g.tokens.clone(), &end);
        let first = g.gather(b, "token/frame_start", &g.frame_start.clone(), &g.frame_of.clone());
        let offset = b.op(&n("token/offset"), "Sub", &[&g.tokens, &first], vec![]);
        let cols = g.of_frame(b, "token/frame_cols", &g.frame_cols.clone());
        g.row = b.op(&n("token/row"), "Div", &[&offset, &cols], vec![]);
        g.col = b.op(&n("token/col"), "Mod", &[&offset, &cols], vec![]);
        g
    }

    pub fn name(&self, name: &str) -> String {
        format!("{}/{name}", self.scope)
    }

    /// An int64 scalar constant under the grid's scope.
    pub fn constant(&self, b: &mut GraphBuilder, name: &str, value: i64) -> String {
        b.const_i64(&self.name(name), &[value])
    }

    pub fn zero(&self) -> &str {
        &self.zero
    }

    pub fn one(&self) -> &str {
        &self.one
    }

    /// `table[at]` along axis 0.
    pub fn gather(&self, b: &mut GraphBuilder, name: &str, table: &str, at: &str) -> String {
        b.op(&self.name(name), "Gather", &[table, at], vec![])
    }

    /// A per-frame value `[F]` looked up for every merged token `[G]`.
    pub fn of_frame(&self, b: &mut GraphBuilder, name: &str, per_frame: &str) -> String {
        let frame_of = self.frame_of.clone();
        self.gather(b, name, per_frame, &frame_of)
    }

    /// The inclusive running sum along axis 0.
    pub fn cumsum(&self, b: &mut GraphBuilder, name: &str, x: &str) -> String {
        b.op(&self.name(name), "CumSum", &[x, &self.axis0], vec![])
    }

    /// The segment of each element of `x` among consecutive segments ending (exclusive) at
    /// `ends`: how many ends are at or before it.
    fn segment(&self, b: &mut GraphBuilder, name: &str, x: &str, ends: &str) -> String {
        let n = |part: &str| self.name(&format!("{name}/{part}"));
        let col = b.op(&n("column"), "Unsqueeze", &[x, &self.axes1], vec![]);
        let row = b.op(&n("row"), "Unsqueeze", &[ends, &self.axes0], vec![]);
        let past = b.op(&n("past"), "GreaterOrEqual", &[&col, &row], vec![]);
        let past = b.op(&n("count"), "Cast", &[&past], vec![Attr::int("to", DType::I64.to_onnx() as i64)]);
        b.op(&self.name(name), "ReduceSum", &[&past, &self.axes1], vec![Attr::int("keepdims", 0)])
    }

    /// A per-merged-token value `[G']` repeated for each of the token's patches `[G' * unit]`.
    pub fn per_patch(&self, b: &mut GraphBuilder, name: &str, x: &str) -> String {
        let n = |part: &str| self.name(&format!("{name}/{part}"));
        let col = b.op(&n("column"), "Unsqueeze", &[x, &self.axes1], vec![]);
        let tile = b.op(&n("expand"), "Expand", &[&col, &self.per_unit], vec![]);
        b.op(&self.name(name), "Reshape", &[&tile, &self.flat], vec![])
    }

    /// Per patch, its index when each merged token `[G']` owns the `unit` consecutive patch
    /// slots from `slot * unit` (its patches in their order).
    pub fn patch_slots(&self, b: &mut GraphBuilder, name: &str, slot: &str) -> String {
        let n = |part: &str| self.name(&format!("{name}/{part}"));
        let unit = self.merge * self.merge;
        let offsets: Vec<i64> = (0..unit as i64).collect();
        let offsets = b.initializer(&n("offset_in_token"), Recipe::from_i64(n("offset_in_token"), vec![1, unit], &offsets));
        let unit_value = b.const_i64(&n("unit"), &[unit as i64]);
        let col = b.op(&n("column"), "Unsqueeze", &[slot, &self.axes1], vec![]);
        let first = b.op(&n("first_patch"), "Mul", &[&col, &unit_value], vec![]);
        let each = b.op(&n("patch"), "Add", &[&first, &offsets], vec![]);
        b.op(&self.name(name), "Reshape", &[&each, &self.flat], vec![])
    }

    /// Per patch, its row (`rows: true`) or column in its frame's patch grid, from its merged
    /// token's merged row / column `[G']`: `merged * merge + (the patch's offset in the token)`.
    pub fn patch_position(&self, b: &mut GraphBuilder, name: &str, merged: &str, rows: bool) -> String {
        let n = |part: &str| self.name(&format!("{name}/{part}"));
        let unit = self.merge * self.merge;
        let offsets: Vec<i64> = (0..unit).map(|i| if rows { i / self.merge } else { i % self.merge } as i64).collect();
        let offsets = b.initializer(&n("offset_in_token"), Recipe::from_i64(n("offset_in_token"), vec![1, unit], &offsets));
        let col = b.op(&n("column"), "Unsqueeze", &[merged, &self.axes1], vec![]);
        let first = b.op(&n("first_patch"), "Mul", &[&col, &self.merge_value], vec![]);
        let each = b.op(&n("patch"), "Add", &[&first, &offsets], vec![]);
        b.op(&self.name(name), "Reshape", &[&each, &self.flat], vec![])
    }
}
