//! The Gemma 3 vision tower: a SigLIP vision encoder (`SiglipVisionModel`, no pooling head)
//! and Gemma 3's multimodal projector.
//!
//! Input: `pixel_values [num_images, C, image_size, image_size]`. Output: `image_features
//! [num_images * mm_tokens_per_image, text_hidden]`, the images' tokens one after the other.
//!
//! - Patch embedding: the stride-`patch` Conv2d as a MatMul over each flattened (C, P, P)
//!   patch (Reshape/Transpose of the pixels, row-major patches), plus its bias and the learned
//!   position embedding of every patch (positions `0 .. patches`, no interpolation: the image
//!   is always `image_size` square).
//! - Pre-LN encoder blocks: LayerNorm, attention with biased q/k/v/out projections (scale
//!   `1/sqrt(head_dim)`, no mask), residual; LayerNorm, `fc1` -> `hidden_act` -> `fc2`,
//!   residual. Then `post_layernorm`.
//! - The projector (`Gemma3MultiModalProjector`): the patch grid average-pooled in
//!   `kernel x kernel` blocks (kernel = patches per side / sqrt(mm_tokens_per_image)), the
//!   `(1 + w)` RMSNorm `mm_soft_emb_norm` (epsilon `vision_config.layer_norm_eps`), and a
//!   MatMul by `mm_input_projection_weight`, stored `[vision_hidden, text_hidden]` (used as
//!   stored, not transposed).

use super::{account_for_prefixes, dim, find_prefix, finish, Keys, IMAGE_FEATURES, PIXEL_VALUES};
use crate::components::linear::{linear, LinearWeights};
use crate::components::mlp::plain;
use crate::components::norm::{layer_norm, norm, NormKind};
use crate::{Activation, BuildOptions, Checkpoint, Error, GraphBuilder, Multimodal, Result};
use ir::{Attr, Dim};
use std::path::Path;

/// Where checkpoints store the SigLIP encoder: published Gemma 3 checkpoints (transformers 4)
/// under `vision_tower.vision_model.`, transformers 5 under `model.vision_tower.` (with or
/// without `vision_model.`).
const TOWER_PREFIXES: &[&str] =
    &["vision_tower.vision_model.", "model.vision_tower.vision_model.", "vision_tower.", "model.vision_tower."];
/// Where they store the projector.
const PROJECTOR_PREFIXES: &[&str] = &["multi_modal_projector.", "model.multi_modal_projector."];

/// The image tokens onnxruntime-genai's Gemma 3 processor writes per image (hard-coded there).
pub const GENAI_TOKENS_PER_IMAGE: usize = 256;

/// Gemma 3's `vision_config` and projector settings.
#[derive(Clone, Debug, PartialEq)]
pub struct Gemma3Vision {
    pub hidden: usize,
    pub layers: usize,
    pub heads: usize,
    pub intermediate: usize,
    pub channels: usize,
    pub image_size: usize,
    pub patch: usize,
    pub eps: f64,
    pub act: Activation,
    pub tokens_per_image: usize,
    pub text_hidden: usize,
}

impl Gemma3Vision {
    /// Reads and checks `vision_config` and `mm_tokens_per_image`; transformers' SigLIP
    /// defaults apply to absent keys.
    pub fn read(path: &Path, mm: &Multimodal, text_hidden: usize) -> Result<Gemma3Vision> {
        let top = Keys::new(path, "", &mm.raw);
        let v = Keys::new(path, "vision_config", &mm.vision);
        v.only("model_type", &["siglip_vision_model"], "Gemma 3's tower is built as SigLIP")?;
        let tokens_per_image = top.count("mm_tokens_per_image", Some(256))?;
        if tokens_per_image != GENAI_TOKENS_PER_IMAGE {
            return Err(top.err(format!(
                "key `mm_tokens_per_image` is {tokens_per_image}; onnxruntime-genai's Gemma 3 processor writes {GENAI_TOKENS_PER_IMAGE} image tokens per image (hard-coded), so only {GENAI_TOKENS_PER_IMAGE} is built"
            )));
        }
        if v.flag("vision_use_head", false)? {
            return Err(v.err(
                "key `vision_config.vision_use_head` is true: the SigLIP attention-pooling head is not built (Gemma 3 reads the patch states, not the pooled output); set it to false".into(),
            ));
        }
        let act = v.activation("hidden_act", Activation::GeluTanh)?;
        let hidden = v.count("hidden_size", Some(768))?;
        let heads = v.count("num_attention_heads", Some(12))?;
        let g = Gemma3Vision {
            hidden,
            layers: v.count("num_hidden_layers", Some(12))?,
            heads,
            intermediate: v.count("intermediate_size", Some(3072))?,
            channels: v.count("num_channels", Some(3))?,
            image_size: v.count("image_size", Some(224))?,
            patch: v.count("patch_size", Some(16))?,
            eps: v.number("layer_norm_eps", 1e-6)?,
            act,
            tokens_per_image,
            text_hidden,
        };
        if hidden % heads != 0 {
            return Err(v.err(format!("key `vision_config.hidden_size` {hidden} is not a multiple of `vision_config.num_attention_heads` {heads}")));
        }
        if !g.image_size.is_multiple_of(g.patch) {
            return Err(v.err(format!("key `vision_config.image_size` {} is not a multiple of `vision_config.patch_size` {}", g.image_size, g.patch)));
        }
        let side = g.tokens_per_side();
        if side * side != tokens_per_image || !g.patches_per_side().is_multiple_of(side) {
            return Err(top.err(format!(
                "key `mm_tokens_per_image` {tokens_per_image} does not tile the {0}x{0} patch grid (`image_size` / `patch_size`) into square pooling blocks",
                g.patches_per_side()
            )));
        }
        Ok(g)
    }

    pub fn patches_per_side(&self) -> usize {
        self.image_size / self.patch
    }

    fn tokens_per_side(&self) -> usize {
        (self.tokens_per_image as f64).sqrt().round() as usize
    }

    /// The average pool's kernel (and stride), in patches.
    pub fn pool_kernel(&self) -> usize {
        self.patches_per_side() / self.tokens_per_side()
    }
}

/// Builds the tower of a `gemma3` checkpoint (see the module docs for the graph's I/O).
pub fn build(ckpt: &Checkpoint, opts: &BuildOptions) -> Result<ir::Model> {
    let c = &ckpt.config;
    let mm = c.multimodal.as_ref().ok_or_else(|| Error::Config {
        path: c.path.clone(),
        reason: "the Gemma 3 vision tower needs a vision-language config.json (with `vision_config`)".into(),
    })?;
    let g = Gemma3Vision::read(&c.path, mm, c.hidden_size)?;
    let p = find_prefix(ckpt, TOWER_PREFIXES, "embeddings.patch_embedding.weight", "SigLIP vision tower")?;
    let proj = find_prefix(ckpt, PROJECTOR_PREFIXES, "mm_input_projection_weight", "Gemma 3 multimodal projector")?;
    let mut b = GraphBuilder::new("main_graph", opts.dtype);
    let float = b.float;
    let (hidden, n, patch, ch) = (g.hidden, g.patches_per_side(), g.patch, g.channels);
    let images = dim(opts, "num_images");
    let size = Dim::Fixed(g.image_size as i64);
    let pixel_values = b.input(PIXEL_VALUES, float, vec![images.clone(), Dim::Fixed(ch as i64), size.clone(), size]);

    // Patches: [B, C, n*P, n*P] -> [B, n, n, C, P, P] -> [B, n*n, C*P*P] (row-major patches).
    let s = "vision/patches";
    let split = b.const_i64_1d(&format!("{s}/split_shape"), &[0, ch as i64, n as i64, patch as i64, n as i64, patch as i64]);
    let x = b.op(&format!("{s}/split"), "Reshape", &[&pixel_values, &split], vec![]);
    let x = b.op(&format!("{s}/Transpose"), "Transpose", &[&x], vec![Attr::ints("perm", &[0, 2, 4, 1, 3, 5])]);
    let flat = b.const_i64_1d(&format!("{s}/flat_shape"), &[0, (n * n) as i64, (ch * patch * patch) as i64]);
    let x = b.op(&format!("{s}/flatten"), "Reshape", &[&x, &flat], vec![]);
    let scope = format!("{p}embeddings.patch_embedding");
    let weight = ckpt
        .tensor(&format!("{scope}.weight"), &[hidden, ch, patch, patch])?
        .reshape(vec![hidden, ch * patch * patch])
        .transpose(vec![1, 0])
        .cast(float);
    let bias = ckpt.tensor(&format!("{scope}.bias"), &[hidden])?.cast(float);
    let x = linear(&mut b, &scope, &x, LinearWeights { weight, bias: Some(bias) });
    let pos_name = format!("{p}embeddings.position_embedding.weight");
    let positions = ckpt.tensor(&pos_name, &[n * n, hidden])?.cast(float);
    let positions = b.initializer(&pos_name, positions);
    let mut x = b.op(&format!("{p}embeddings/Add_positions"), "Add", &[&x, &positions], vec![]);

    for i in 0..g.layers {
        let layer = format!("{p}encoder.layers.{i}");
        let s = |part: &str| format!("{layer}.{part}");
        let proj_of = |b: &mut GraphBuilder, part: &str, inp: usize, out: usize, x: &str| -> Result<String> {
            let w = LinearWeights::torch(ckpt, b, &s(part), inp, out, true)?;
            Ok(linear(b, &s(part), x, w))
        };
        let h = layer_norm(&mut b, ckpt, &s("layer_norm1"), &x, hidden, g.eps)?;
        let q = proj_of(&mut b, "self_attn.q_proj", hidden, hidden, &h)?;
        let k = proj_of(&mut b, "self_attn.k_proj", hidden, hidden, &h)?;
        let v = proj_of(&mut b, "self_attn.v_proj", hidden, hidden, &h)?;
        let attrs = vec![Attr::int("is_causal", 0), Attr::int("kv_num_heads", g.heads as i64), Attr::int("q_num_heads", g.heads as i64)];
        let a = b.op(&format!("{}/Attention", s("self_attn")), "Attention", &[&q, &k, &v], attrs);
        let o = proj_of(&mut b, "self_attn.out_proj", hidden, hidden, &a)?;
        x = b.op(&s("self_attn/residual/Add"), "Add", &[&x, &o], vec![]);
        let h = layer_norm(&mut b, ckpt, &s("layer_norm2"), &x, hidden, g.eps)?;
        let fc1 = LinearWeights::torch(ckpt, &b, &s("mlp.fc1"), hidden, g.intermediate, true)?;
        let fc2 = LinearWeights::torch(ckpt, &b, &s("mlp.fc2"), g.intermediate, hidden, true)?;
        let m = plain(&mut b, &s("mlp"), &s("mlp.fc1"), &s("mlp.fc2"), &h, [fc1, fc2], g.act);
        x = b.op(&s("mlp/residual/Add"), "Add", &[&x, &m], vec![]);
    }
    let x = layer_norm(&mut b, ckpt, &format!("{p}post_layernorm"), &x, hidden, g.eps)?;

    // Average pool over kernel x kernel patch blocks: [B, n*n, D] -> [B, t, k, t, k, D], the
    // mean over the two k axes, then one row per token (image-major, raster order).
    let s = format!("{proj}avg_pool");
    let (t, k) = (g.tokens_per_side() as i64, g.pool_kernel() as i64);
    let blocks = b.const_i64_1d(&format!("{s}/blocks_shape"), &[0, t, k, t, k, hidden as i64]);
    let x = b.op(&format!("{s}/blocks"), "Reshape", &[&x, &blocks], vec![]);
    let axes = b.const_i64_1d(&format!("{s}/axes"), &[2, 4]);
    let x = b.op(&format!("{s}/ReduceMean"), "ReduceMean", &[&x, &axes], vec![Attr::int("keepdims", 0)]);
    let rows = b.const_i64_1d(&format!("{s}/rows_shape"), &[-1, hidden as i64]);
    let x = b.op(&format!("{s}/rows"), "Reshape", &[&x, &rows], vec![]);
    let x = norm(&mut b, ckpt, NormKind::RmsUnitOffset, &format!("{proj}mm_soft_emb_norm"), &x, hidden, g.eps)?;
    let w_name = format!("{proj}mm_input_projection_weight");
    let w = ckpt.tensor(&w_name, &[hidden, g.text_hidden])?.cast(float);
    let w = b.initializer(&w_name, w);
    b.node_named(&format!("{proj}projection/MatMul"), "MatMul", &[&x, &w], vec![], &[IMAGE_FEATURES]);
    b.output(IMAGE_FEATURES, float, vec![dim(opts, "num_image_tokens"), Dim::Fixed(g.text_hidden as i64)]);
    account_for_prefixes(ckpt, &[p, proj])?;
    finish(b, ckpt)
}
