//! The one attention mask of a decoder graph, built once and shared by every layer.
//!
//! `mask[b, 0, i, j] = (j <= past + i) and attention_mask[b, j] == 1`, boolean, shape
//! `[batch, 1, seq, total]`, where `past = total - seq`. It covers prefill (past = 0), decode
//! (seq = 1) and padding on either side. A sliding window adds one more `And`.
//!
//! Over a static cache of `N` slots the key axis is the cache's: `[batch, 1, seq, N]`, with
//! `attention_mask` padded by zeros from `total` to `N` (slots not written yet are never seen;
//! ONNX Runtime 1.32's Attention kernel also wants the mask's last dim equal to the cache length).

use crate::GraphBuilder;
use ir::Attr;

/// The boolean mask and the key-axis values it was built from, which a position bias over the
/// same keys reuses ([`super::alibi::alibi_mask`]).
pub struct CausalMask {
    /// `[batch, 1, seq, keys]` bool.
    pub mask: String,
    /// The key slots `0..keys` (int64 `[keys]`).
    pub key_positions: String,
    /// The queries' slots `past..total` as a column (int64 `[seq, 1]`).
    pub query_column: String,
    /// `attention_mask` over the key axis (int64 `[batch, keys]`; zeros in a static cache's
    /// unwritten slots).
    pub key_padding: String,
}

/// Builds the mask under the node-name scope `s` (`attn_mask` for full attention). `cache_len`:
/// the static cache's fixed length, the key axis's length when given (else `total`).
pub fn causal_padding_mask(
    b: &mut GraphBuilder,
    s: &str,
    input_ids: &str,
    attention_mask: &str,
    window: Option<usize>,
    cache_len: Option<usize>,
) -> CausalMask {
    let seq = b.op(&format!("{s}/seq_len"), "Shape", &[input_ids], vec![Attr::int("start", 1), Attr::int("end", 2)]);
    let total =
        b.op(&format!("{s}/total_len"), "Shape", &[attention_mask], vec![Attr::int("start", 1), Attr::int("end", 2)]);
    let past = b.op(&format!("{s}/past_len"), "Sub", &[&total, &seq], vec![]);
    let zero = b.const_i64(&format!("{s}/zero"), &[0]);
    let one = b.const_i64(&format!("{s}/one"), &[1]);
    let axes0 = b.const_i64_1d(&format!("{s}/axis0"), &[0]);
    let total_s = b.op(&format!("{s}/total_scalar"), "Squeeze", &[&total, &axes0], vec![]);
    let past_s = b.op(&format!("{s}/past_scalar"), "Squeeze", &[&past, &axes0], vec![]);
    let keys = match cache_len {
        Some(n) => b.const_i64(&format!("{s}/cache_len"), &[n as i64]),
        None => total_s.clone(),
    };
    let key_pos = b.op(&format!("{s}/key_positions"), "Range", &[&zero, &keys, &one], vec![]);
    let query_pos = b.op(&format!("{s}/query_positions"), "Range", &[&past_s, &total_s, &one], vec![]);
    let axes1 = b.const_i64_1d(&format!("{s}/axis1"), &[1]);
    let query_col = b.op(&format!("{s}/query_column"), "Unsqueeze", &[&query_pos, &axes1], vec![]);
    let mut allowed = b.op(&format!("{s}/causal"), "LessOrEqual", &[&key_pos, &query_col], vec![]);
    if let Some(w) = window {
        // Keys strictly inside the last `w` positions: j > i_abs - w.
        let width = b.const_i64(&format!("{s}/window"), &[w as i64]);
        let lower = b.op(&format!("{s}/window_start"), "Sub", &[&query_col, &width], vec![]);
        let inside = b.op(&format!("{s}/in_window"), "Greater", &[&key_pos, &lower], vec![]);
        allowed = b.op(&format!("{s}/causal_window"), "And", &[&allowed, &inside], vec![]);
    }
    let padded = match cache_len {
        Some(n) => {
            // attention_mask [batch, total] -> [batch, N]: zeros in the slots not written yet
            // (ConstantOfShape + Concat, which every table claims).
            let n = b.const_i64_1d(&format!("{s}/cache_len_1d"), &[n as i64]);
            let unwritten = b.op(&format!("{s}/unwritten"), "Sub", &[&n, &total], vec![]);
            let batch =
                b.op(&format!("{s}/batch"), "Shape", &[attention_mask], vec![Attr::int("start", 0), Attr::int("end", 1)]);
            let shape = b.op(&format!("{s}/unwritten_shape"), "Concat", &[&batch, &unwritten], vec![Attr::int("axis", 0)]);
            let zero = ir::Recipe::from_i64(format!("{s}/unwritten_value"), vec![1], &[0]);
            let zeros = b.op(&format!("{s}/unwritten_slots"), "ConstantOfShape", &[&shape], vec![Attr::tensor("value", zero)]);
            b.op(&format!("{s}/padded"), "Concat", &[attention_mask, &zeros], vec![Attr::int("axis", 1)])
        }
        None => attention_mask.to_string(),
    };
    let keep = b.op(&format!("{s}/padding"), "Cast", &[&padded], vec![Attr::int("to", ir::DType::Bool.to_onnx() as i64)]);
    let axes12 = b.const_i64_1d(&format!("{s}/axes12"), &[1, 2]);
    let keep4 = b.op(&format!("{s}/padding_4d"), "Unsqueeze", &[&keep, &axes12], vec![]);
    let mask = b.op(s, "And", &[&allowed, &keep4], vec![]);
    CausalMask { mask, key_positions: key_pos, query_column: query_col, key_padding: padded }
}

/// An encoder's mask: `attention_mask` `[batch, seq]` cast to bool, unsqueezed to `[batch, 1,
/// 1, seq]` and expanded to `[batch, 1, seq, seq]`, so each query sees the keys the mask keeps
/// (no causal term; padded queries attend too, as in transformers). The expand is needed:
/// ONNX Runtime 1.32's `Attention` kernel requires the mask's query axis to equal the query
/// length ("inconsistent q_sequence_length (between attn_mask and Q)" for a broadcast 1).
/// Built once under the node-name scope `s` and shared by every layer.
pub fn key_padding_mask(b: &mut GraphBuilder, s: &str, attention_mask: &str) -> String {
    let keep = b.op(&format!("{s}/padding"), "Cast", &[attention_mask], vec![Attr::int("to", ir::DType::Bool.to_onnx() as i64)]);
    let axes12 = b.const_i64_1d(&format!("{s}/axes12"), &[1, 2]);
    let keep4 = b.op(&format!("{s}/padding_4d"), "Unsqueeze", &[&keep, &axes12], vec![]);
    let batch = b.op(&format!("{s}/batch"), "Shape", &[attention_mask], vec![Attr::int("start", 0), Attr::int("end", 1)]);
    let seq = b.op(&format!("{s}/seq_len"), "Shape", &[attention_mask], vec![Attr::int("start", 1), Attr::int("end", 2)]);
    let one = b.const_i64_1d(&format!("{s}/one"), &[1]);
    let shape = b.op(&format!("{s}/shape"), "Concat", &[&batch, &one, &seq, &seq], vec![Attr::int("axis", 0)]);
    b.op(s, "Expand", &[&keep4, &shape], vec![])
}
