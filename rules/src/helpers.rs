//! Native helpers: what the rule language cannot say, from a fixed allow-list. A helper takes
//! bound values and returns new values (or initializers); it never walks the graph and never
//! decides whether a rule applies. `ALLOWED` is the list; a test fails if a rule calls anything
//! else, and `rule-dsl` rejects unknown helper names at compile time.

use crate::{Emitter, Error};
use ir::{Attr, DType, Recipe};

/// Every helper a rule may call, with what it does.
/// (The list is `rule_dsl::vocab::HELPERS`, which the rule macro hands over: one registry that
/// the macro, the linter and this crate all read.)
pub const ALLOWED: &[&str] = crate::generated::HELPERS;

/// The helpers themselves. Generated code calls only functions of this module.
pub mod allowed {
    use super::*;

    fn fail(em: &Emitter, helper: &'static str, reason: impl Into<String>) -> Error {
        Error::Helper { rule: em.rule().to_string(), helper, reason: reason.into() }
    }

    /// The query's float type, in which an attention bias is built.
    fn query_float(em: &Emitter, helper: &'static str, q: &str) -> Result<DType, Error> {
        em.dtype(q).filter(|d| matches!(d, DType::F32 | DType::F16 | DType::BF16)).ok_or_else(|| {
            let seen = em.dtype(q).map_or("unknown".to_string(), |d| d.to_string());
            fail(em, helper, format!("the query `{q}` has dtype {seen}; the attention bias is built in the query's float type"))
        })
    }

    /// The 2-D int64 `attention_mask` [batch, seq] cast to int32: com.microsoft
    /// MultiHeadAttention's `key_padding_mask` in its [batch, kv_sequence_length] form (1 keeps
    /// a key, 0 masks it; ONNX Runtime 1.32's CPU kernel takes int32 only). Built once per
    /// graph and shared by every layer.
    pub fn key_mask_int32(em: &mut Emitter, args: &[String]) -> Result<Vec<String>, Error> {
        let [mask] = args else { return Err(fail(em, "key_mask_int32", format!("expects 1 value, got {}", args.len()))) };
        let key = format!("key_mask_int32({mask})");
        if let Some(done) = em.memo(&key) {
            return Ok(done);
        }
        let saved = std::mem::replace(&mut em.base, "key_mask_int32".to_string());
        let cast = em.node("", "Cast", ir::OPSET, vec![mask.clone()], &[true], vec![Attr::int("to", DType::I32.to_onnx() as i64)])?;
        em.base = saved;
        em.remember(key, cast.clone());
        Ok(cast)
    }

    /// GroupQueryAttention's `seqlens_k` and `total_sequence_length` from a 2-D int64
    /// `attention_mask` [batch, total]: `seqlens_k = int32(ReduceSum(mask, axis 1) - 1)` (one
    /// per row: the index of the row's last valid key, right padding assumed) and
    /// `total_sequence_length = int32(shape(mask)[1])` as a scalar. Built once per graph.
    pub fn gqa_seqlens(em: &mut Emitter, args: &[String]) -> Result<Vec<String>, Error> {
        let [mask] = args else { return Err(fail(em, "gqa_seqlens", format!("expects 1 value, got {}", args.len()))) };
        let key = format!("gqa_seqlens({mask})");
        if let Some(done) = em.memo(&key) {
            return Ok(done);
        }
        let saved = std::mem::replace(&mut em.base, "gqa_seqlens".to_string());
        let axis1 = em.initializer("gqa_seqlens/axis1", Recipe::from_i64("gqa_seqlens/axis1", vec![1], &[1]));
        let axis0 = em.initializer("gqa_seqlens/axis0", Recipe::from_i64("gqa_seqlens/axis0", vec![1], &[0]));
        let one = em.initializer("gqa_seqlens/one", Recipe::from_i64("gqa_seqlens/one", vec![], &[1]));
        let i32_code = DType::I32.to_onnx() as i64;
        let sum = em.node("", "ReduceSum", ir::OPSET, vec![mask.clone(), axis1], &[true], vec![Attr::int("keepdims", 0)])?;
        let last = em.node("", "Sub", ir::OPSET, vec![sum[0].clone(), one], &[true], vec![])?;
        let seqlens = em.node("", "Cast", ir::OPSET, vec![last[0].clone()], &[true], vec![Attr::int("to", i32_code)])?;
        let total = em.node("", "Shape", ir::OPSET, vec![mask.clone()], &[true], vec![Attr::int("start", 1), Attr::int("end", 2)])?;
        let scalar = em.node("", "Squeeze", ir::OPSET, vec![total[0].clone(), axis0], &[true], vec![])?;
        let total32 = em.node("", "Cast", ir::OPSET, vec![scalar[0].clone()], &[true], vec![Attr::int("to", i32_code)])?;
        em.base = saved;
        let out = vec![seqlens[0].clone(), total32[0].clone()];
        em.remember(key, out.clone());
        Ok(out)
    }

    /// seqlens_k and total_sequence_length of [`gqa_padding`] alone (every row's padded width
    /// minus one, the width), for a fusion whose attention bias is the generic graph's own
    /// float mask (fuse.gqa_alibi). Built once per graph, shared with gqa_padding.
    pub fn gqa_padded_lengths(em: &mut Emitter, args: &[String]) -> Result<Vec<String>, Error> {
        let [attention_mask] = args else {
            return Err(fail(em, "gqa_padded_lengths", format!("expects 1 value, got {}", args.len())));
        };
        let lengths_key = format!("gqa_padding({attention_mask})");
        Ok(match em.memo(&lengths_key) {
            Some(done) => done,
            None => {
                let saved = std::mem::replace(&mut em.base, "gqa_padding".to_string());
                let axis0 = em.initializer("gqa_padding/axis0", Recipe::from_i64("gqa_padding/axis0", vec![1], &[0]));
                let one = em.initializer("gqa_padding/one", Recipe::data("gqa_padding/one", DType::I32, vec![], 1i32.to_le_bytes().to_vec()));
                let i32_code = DType::I32.to_onnx() as i64;
                let slice = |s: i64, e: i64| vec![Attr::int("start", s), Attr::int("end", e)];
                let batch = em.node("", "Shape", ir::OPSET, vec![attention_mask.clone()], &[true], slice(0, 1))?;
                let total = em.node("", "Shape", ir::OPSET, vec![attention_mask.clone()], &[true], slice(1, 2))?;
                // The total as an int32 scalar, and minus one for every row.
                let scalar = em.node("", "Squeeze", ir::OPSET, vec![total[0].clone(), axis0], &[true], vec![])?;
                let total32 = em.node("", "Cast", ir::OPSET, vec![scalar[0].clone()], &[true], vec![Attr::int("to", i32_code)])?;
                let last = em.node("", "Sub", ir::OPSET, vec![total32[0].clone(), one], &[true], vec![])?;
                let seqlens = em.node("", "Expand", ir::OPSET, vec![last[0].clone(), batch[0].clone()], &[true], vec![])?;
                em.base = saved;
                let out = vec![seqlens[0].clone(), total32[0].clone()];
                em.remember(lengths_key, out.clone());
                out
            }
        })
    }

    /// GroupQueryAttention's inputs for a batch padded on either side, from the 2-D int64
    /// `attention_mask` [batch, total], the generic graph's boolean attention mask `mask`
    /// [batch, 1, seq, total] (causal AND key padding, AND the window where there is one) and
    /// the query (for its float type):
    ///
    /// * `seqlens_k = int32(total - 1)` for every row (expanded to [batch]): every row is the
    ///   full padded width, so the kernel's causal mask, sliding window and rotary positions
    ///   (position_ids omitted: the kernel rotates at `seqlens_k + 1 - seq + i`) all work on
    ///   the slot index in the padded row;
    /// * `total_sequence_length = int32(total)` (scalar);
    /// * `attention_bias = Where(mask, 0, -10000)` [batch, 1, seq, total] in the query's float
    ///   type. ORT 1.32's CPU kernel adds it after `softcap` (measured), as transformers adds
    ///   its mask. -10000 (ONNX Runtime's own default mask_filter_value, DirectML's GQA's too)
    ///   is finite in every float type and far from f16's limit (65504), so a kernel that adds
    ///   in half precision cannot round a masked score to -inf: a query row whose keys are all
    ///   padding (a left-pad query) still gets finite probabilities, never a NaN that a later
    ///   layer's pad keys would carry; and exp(-10000 + s) is exactly 0 next to any real score.
    ///   The causal and window terms the mask also holds are the kernel's own.
    ///
    /// Rotating at padded-row slots instead of the tokens' own positions is exact because a
    /// RoPE score depends on the difference of the two positions only, and left padding
    /// shifts both by the same count (fuse.gqa_rotary declines caches whose frequencies change
    /// with the length). seqlens_k and the total are built once per graph, the bias once per
    /// mask and float type.
    pub fn gqa_padding(em: &mut Emitter, args: &[String]) -> Result<Vec<String>, Error> {
        let [attention_mask, mask, q] = args else {
            return Err(fail(em, "gqa_padding", format!("expects 3 values, got {}", args.len())));
        };
        let float = query_float(em, "gqa_padding", q)?;
        let lengths = gqa_padded_lengths(em, std::slice::from_ref(attention_mask))?;
        let bias_key = format!("gqa_padding({mask}, {float})");
        let bias = match em.memo(&bias_key) {
            Some(done) => done[0].clone(),
            None => {
                let saved = std::mem::replace(&mut em.base, "gqa_padding".to_string());
                let keep = em.initializer("gqa_padding/keep", Recipe::from_f32("gqa_padding/keep", vec![], &[0.0]).cast(float));
                let masked = em.initializer("gqa_padding/masked", Recipe::from_f32("gqa_padding/masked", vec![], &[-10000.0]).cast(float));
                let bias = em.node("", "Where", ir::OPSET, vec![mask.clone(), keep, masked], &[true], vec![])?;
                em.base = saved;
                em.remember(bias_key, vec![bias[0].clone()]);
                bias[0].clone()
            }
        };
        Ok(vec![lengths[0].clone(), lengths[1].clone(), bias])
    }

    /// com.microsoft MultiHeadAttention's `attention_bias` [batch, 1, seq, seq] from the 2-D
    /// int64 `attention_mask`, the int64 shape the generic graph expands its boolean encoder
    /// mask to, and the query (for its float type), for EPs whose MultiHeadAttention has no
    /// `key_padding_mask` (WebGPU: "input `key_padding_mask` not implemented for webgpu",
    /// contrib_ops/webgpu/bert/multihead_attention.cc). The bias is `(mask - 1) * 10000`: 0
    /// where a key is kept, -10000 (the mask_filter_value ONNX Runtime's CPU kernel applies to
    /// a key_padding_mask, so both forms give the same scores; finite, see [`gqa_padding`])
    /// where it is padding. It is computed from [`key_mask_int32`]'s int32 mask, in float
    /// (WebGPU has no int64 or bool arithmetic: only that Cast runs on the host), unsqueezed
    /// and expanded over the queries (the kernel requires the bias's query axis to be the
    /// query length). Built once per mask and float type. The mask holds 0 and 1, as
    /// transformers' tokenizers make it (the generic graph reads any nonzero as "keep"; a mask
    /// value of 2 would give +10000 here).
    pub fn padding_bias(em: &mut Emitter, args: &[String]) -> Result<Vec<String>, Error> {
        let [attention_mask, shape, q] = args else { return Err(fail(em, "padding_bias", format!("expects 3 values, got {}", args.len()))) };
        let float = query_float(em, "padding_bias", q)?;
        let key = format!("padding_bias({attention_mask}, {shape}, {float})");
        if let Some(done) = em.memo(&key) {
            return Ok(done);
        }
        let mask32 = key_mask_int32(em, std::slice::from_ref(attention_mask))?;
        let saved = std::mem::replace(&mut em.base, "padding_bias".to_string());
        let one = em.initializer("padding_bias/one", Recipe::from_f32("padding_bias/one", vec![], &[1.0]).cast(float));
        let scale = em.initializer("padding_bias/filter", Recipe::from_f32("padding_bias/filter", vec![], &[10000.0]).cast(float));
        let axes = em.initializer("padding_bias/axes12", Recipe::from_i64("padding_bias/axes12", vec![2], &[1, 2]));
        let keep = em.node("", "Cast", ir::OPSET, mask32, &[true], vec![Attr::int("to", float.to_onnx() as i64)])?;
        let off = em.node("", "Sub", ir::OPSET, vec![keep[0].clone(), one], &[true], vec![])?;
        let bias = em.node("", "Mul", ir::OPSET, vec![off[0].clone(), scale], &[true], vec![])?;
        let bias4 = em.node("", "Unsqueeze", ir::OPSET, vec![bias[0].clone(), axes], &[true], vec![])?;
        let out = em.node("", "Expand", ir::OPSET, vec![bias4[0].clone(), shape.clone()], &[true], vec![])?;
        em.base = saved;
        em.remember(key, out.clone());
        Ok(out)
    }

    /// [`gqa_padding`] for a static KV cache (docs/generic-graph.md, "Static KV cache"): the
    /// static graph's boolean mask has N key columns (the cache's slots; ONNX Attention wants
    /// them all), but GroupQueryAttention's `attention_bias` must be [batch, 1, seq,
    /// total_sequence_length] (ONNX Runtime 1.32's `group_query_attention_helper.h`: "attention_bias
    /// dimension 3 must be equal to total_sequence_length"), and total_sequence_length is the
    /// attention_mask width (it tells a prompt from a decode step), so the mask is cut to its
    /// first `width` columns: `Slice(mask, [0], Shape(attention_mask)[1:2], [3])`. The slots
    /// past the width are the kernel's causal limit anyway (it reads keys `[0, seqlens_k]`).
    /// seqlens_k and the total are gqa_padding's (the width - 1 for every row, the width);
    /// the cut mask is built once per mask.
    pub fn gqa_static_padding(em: &mut Emitter, args: &[String]) -> Result<Vec<String>, Error> {
        let [attention_mask, mask, q] = args else {
            return Err(fail(em, "gqa_static_padding", format!("expects 3 values, got {}", args.len())));
        };
        let cut = cut_to_width(em, "gqa_static_padding", mask, attention_mask)?;
        gqa_padding(em, &[attention_mask.clone(), cut, q.clone()])
    }

    /// A static mask of N key columns (boolean, or ALiBi's float one) cut to the
    /// attention_mask width (Slice on axis 3), under the node-name scope `scope`, once per mask.
    fn cut_to_width(em: &mut Emitter, scope: &str, mask: &str, attention_mask: &str) -> Result<String, Error> {
        let key = format!("{scope}({mask}, {attention_mask})");
        if let Some(done) = em.memo(&key) {
            return Ok(done[0].clone());
        }
        let saved = std::mem::replace(&mut em.base, scope.to_string());
        let start = em.initializer(&format!("{scope}/start"), Recipe::from_i64(format!("{scope}/start"), vec![1], &[0]));
        let axis = em.initializer(&format!("{scope}/key_axis"), Recipe::from_i64(format!("{scope}/key_axis"), vec![1], &[3]));
        let width = em.node("", "Shape", ir::OPSET, vec![attention_mask.to_string()], &[true], vec![Attr::int("start", 1), Attr::int("end", 2)])?;
        let cut = em.node("", "Slice", ir::OPSET, vec![mask.to_string(), start, width[0].clone(), axis], &[true], vec![])?;
        em.base = saved;
        em.remember(key, vec![cut[0].clone()]);
        Ok(cut[0].clone())
    }

    /// [`gqa_static_padding`] for a float mask (ALiBi's, which is already the attention bias):
    /// seqlens_k and total_sequence_length of [`gqa_padded_lengths`], and the float mask of N
    /// key columns cut to the attention_mask width (Slice on axis 3), once per mask.
    pub fn gqa_static_bias(em: &mut Emitter, args: &[String]) -> Result<Vec<String>, Error> {
        let [attention_mask, bias] = args else {
            return Err(fail(em, "gqa_static_bias", format!("expects 2 values, got {}", args.len())));
        };
        let cut = cut_to_width(em, "gqa_static_bias", bias, attention_mask)?;
        let mut out = gqa_padded_lengths(em, std::slice::from_ref(attention_mask))?;
        out.push(cut);
        Ok(out)
    }

    /// Positions at the slot index in the padded row, int64 [batch, seq], for a
    /// GroupQueryAttention whose query is [batch, seq, hidden] and whose
    /// `total_sequence_length` is `total_len` (int32 scalar): `Range(total - seq, total)`
    /// expanded over the batch. The rotation the kernel applies when position_ids is absent and
    /// seqlens_k is every row's full width (gqa_padding), for lower.separate_rope, which rotates
    /// in a node of its own.
    pub fn gqa_positions(em: &mut Emitter, args: &[String]) -> Result<Vec<String>, Error> {
        let [total_len, q] = args else { return Err(fail(em, "gqa_positions", format!("expects 2 values, got {}", args.len()))) };
        let key = format!("gqa_positions({total_len}, {q})");
        if let Some(done) = em.memo(&key) {
            return Ok(done);
        }
        let saved = std::mem::replace(&mut em.base, "gqa_positions".to_string());
        let axis0 = em.initializer("gqa_positions/axis0", Recipe::from_i64("gqa_positions/axis0", vec![1], &[0]));
        let step = em.initializer("gqa_positions/step", Recipe::from_i64("gqa_positions/step", vec![], &[1]));
        let slice = |s: i64, e: i64| vec![Attr::int("start", s), Attr::int("end", e)];
        let total = em.node("", "Cast", ir::OPSET, vec![total_len.clone()], &[true], vec![Attr::int("to", DType::I64.to_onnx() as i64)])?;
        let seq = em.node("", "Shape", ir::OPSET, vec![q.clone()], &[true], slice(1, 2))?;
        let seq = em.node("", "Squeeze", ir::OPSET, vec![seq[0].clone(), axis0], &[true], vec![])?;
        let start = em.node("", "Sub", ir::OPSET, vec![total[0].clone(), seq[0].clone()], &[true], vec![])?;
        let range = em.node("", "Range", ir::OPSET, vec![start[0].clone(), total[0].clone(), step], &[true], vec![])?;
        let shape = em.node("", "Shape", ir::OPSET, vec![q.clone()], &[true], slice(0, 2))?;
        let positions = em.node("", "Expand", ir::OPSET, vec![range[0].clone(), shape[0].clone()], &[true], vec![])?;
        em.base = saved;
        let out = vec![positions[0].clone()];
        em.remember(key, out.clone());
        Ok(out)
    }

    /// One initializer concatenating three initializers on their last axis (packing Q, K, V
    /// weights into one MatMul). The recipe stays lazy: nothing is read until the model is saved.
    pub fn concat_weights(em: &mut Emitter, args: &[String]) -> Result<Vec<String>, Error> {
        if args.len() != 3 {
            return Err(fail(em, "concat_weights", format!("expects 3 values, got {}", args.len())));
        }
        let mut recipes = Vec::new();
        for a in args {
            match em.recipe(a) {
                Some(r) => recipes.push(r.clone()),
                None => return Err(fail(em, "concat_weights", format!("`{a}` is not an initializer"))),
            }
        }
        let axis = recipes[0].shape().len().saturating_sub(1);
        let packed = Recipe::concat(recipes, axis).map_err(|e| fail(em, "concat_weights", e.to_string()))?;
        let name = em.initializer(&format!("{}/packed_weight", args[0]), packed);
        Ok(vec![name])
    }

    /// One initializer interleaving the rows (second-to-last axis) of two initializers of one
    /// shape: row `2r` is row `r` of the first, row `2r + 1` row `r` of the second. For an
    /// MoE's `[E, inter, hidden]` gate and up stacks it is com.microsoft MoE's fused SwiGLU
    /// weight `[E, 2 x inter, hidden]` (swiglu_fusion 1, gate on even rows, checked in
    /// tests/python/test_moe_facts.py). Lazy and streamed ([`Recipe::interleave`]).
    pub fn interleave_rows(em: &mut Emitter, args: &[String]) -> Result<Vec<String>, Error> {
        let [a, b] = args else { return Err(fail(em, "interleave_rows", format!("expects 2 values, got {}", args.len()))) };
        let mut recipes = Vec::new();
        for v in [a, b] {
            match em.recipe(v) {
                Some(r) => recipes.push(r.clone()),
                None => return Err(fail(em, "interleave_rows", format!("`{v}` is not an initializer"))),
            }
        }
        let Some(axis) = recipes[0].shape().len().checked_sub(2) else {
            return Err(fail(em, "interleave_rows", format!("`{a}` has no rows (rank {})", recipes[0].shape().len())));
        };
        let woven = Recipe::interleave(recipes, axis).map_err(|e| fail(em, "interleave_rows", e.to_string()))?;
        let name = em.initializer(&format!("{a}/interleaved"), woven);
        Ok(vec![name])
    }

    /// The int64 `split` input that cuts a packed projection back into its parts: the last
    /// dimension of each of three initializers (the Q, K, V weights `concat_weights` packed).
    pub fn split_sizes(em: &mut Emitter, args: &[String]) -> Result<Vec<String>, Error> {
        if args.len() != 3 {
            return Err(fail(em, "split_sizes", format!("expects 3 values, got {}", args.len())));
        }
        let mut sizes = Vec::new();
        for a in args {
            match em.recipe(a).map(|r| r.shape()) {
                Some(shape) if !shape.is_empty() => sizes.push(shape[shape.len() - 1] as i64),
                _ => return Err(fail(em, "split_sizes", format!("`{a}` is not an initializer with a shape"))),
            }
        }
        let name = em.initializer(&format!("{}/split_sizes", args[0]), Recipe::from_i64("split_sizes", vec![3], &sizes));
        Ok(vec![name])
    }

    /// Cuts initializer `w` along its last axis into consecutive pieces of `sizes` (a `let`
    /// list, e.g. lower.unpack_qkv's `[heads*head, kv_heads*head, kv_heads*head]`): one
    /// initializer per size whose recipe slices `w`'s (lazy, nothing is read until save). The
    /// sizes must be positive and cover the axis exactly; the rule's checks make sure, and a
    /// mismatch here is an error, never a partial cut.
    pub fn slice_weight(em: &mut Emitter, args: &[String], sizes: &[i64]) -> Result<Vec<String>, Error> {
        let [w] = args else { return Err(fail(em, "slice_weight", format!("expects 1 value and a list, got {} values", args.len()))) };
        let Some(recipe) = em.recipe(w).cloned() else { return Err(fail(em, "slice_weight", format!("`{w}` is not an initializer"))) };
        let shape = recipe.shape();
        let Some(axis) = shape.len().checked_sub(1) else { return Err(fail(em, "slice_weight", format!("`{w}` is a scalar"))) };
        if sizes.is_empty() || sizes.iter().any(|&s| s <= 0) || sizes.iter().sum::<i64>() != shape[axis] as i64 {
            return Err(fail(em, "slice_weight", format!("sizes {sizes:?} do not cut the last axis of `{w}` {shape:?}")));
        }
        let mut start = 0usize;
        let mut out = Vec::new();
        for (k, &s) in sizes.iter().enumerate() {
            let end = start + s as usize;
            out.push(em.initializer(&format!("{w}/slice{k}"), recipe.clone().slice(axis, start, end)));
            start = end;
        }
        Ok(out)
    }

    /// The nodes of one If branch, copied into the enclosing graph with fresh names
    /// ([`Emitter::inline`]); returns the branch's outputs, as many as it has. Whether running
    /// the branch unconditionally is safe is the rule's checks' business, not this helper's.
    pub fn inline_branch(em: &mut Emitter, graphs: &[&ir::Graph]) -> Result<Vec<String>, Error> {
        let [g] = graphs else { return Err(fail(em, "inline_branch", format!("expects 1 subgraph, got {}", graphs.len()))) };
        em.inline(g)
    }
}
