//! Vision towers (`vision.onnx`) against transformers on ONNX Runtime's CPU EP: the generic
//! graph of each VL fixture, fed the fixture's processor outputs, reproduces its reference
//! `image_features` within 1e-3. The Qwen2.5-VL bookkeeping the graph computes from
//! `image_grid_thw` (window permutation, windows, frames, rotary ids) is checked against
//! transformers' algorithm on grids the fixture does not have, and images in one call do not
//! see each other.

use models::arch::vision::{self, qwen2_5_vl};
use models::{BuildOptions, Checkpoint};
use ndarray::{concatenate, ArrayD, Axis, IxDyn};
use std::collections::BTreeMap;
use std::path::Path;
use tailor_tests::checkpoints::rewrite_checkpoint;
use tailor_tests::*;

const ATOL: f32 = 1e-3;
const QWEN: &str = "tiny-qwen2_5_vl";
const GEMMA: &str = "tiny-gemma3-vl";

fn tower(dir: &Path) -> ir::Model {
    let ckpt = Checkpoint::open(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    vision::build_vision(&ckpt, &BuildOptions::default()).unwrap_or_else(|e| panic!("{}: vision build failed: {e}", dir.display()))
}

/// The tower is standard ONNX: default domain only, opset 24, and names no execution provider.
fn assert_standard(model: &ir::Model) {
    for n in &model.graph.nodes {
        assert!(n.domain.is_empty(), "node {} ({}) is in domain `{}`", n.name, n.op, n.domain);
        assert_eq!(n.opset, ir::OPSET, "node {}", n.name);
    }
    assert!(!model.graph.nodes.iter().any(|n| n.op == "GroupQueryAttention" || n.op == "MultiHeadAttention"));
    assert_eq!(model.metadata.get("onnx_tailor.part").map(String::as_str), Some("vision"));
}

fn features(s: &mut ort::session::Session, feeds: Vec<(&str, Feed)>) -> ArrayD<f32> {
    let feeds: Vec<(String, Feed)> = feeds.into_iter().map(|(n, f)| (n.to_string(), f)).collect();
    run(s, &feeds).remove("image_features").expect("an image_features output").f32().clone()
}

fn grid(rows: &[[i64; 3]]) -> Feed {
    Feed::I64(ArrayD::from_shape_vec(IxDyn(&[rows.len(), 3]), rows.iter().flatten().copied().collect()).unwrap())
}

/// Deterministic values in [-1, 1) (no rand crate in the tests).
fn noise(shape: &[usize], seed: u64) -> ArrayD<f32> {
    let mut state = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    ArrayD::from_shape_fn(IxDyn(shape), |_| {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    })
}

#[test]
fn qwen2_5_vl_image_features_match_transformers() {
    let dir = fixture(QWEN);
    let r = Reference::load(&dir);
    let model = tower(&dir);
    assert_standard(&model);
    let inputs: Vec<&str> = model.graph.inputs.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(inputs, ["pixel_values", "image_grid_thw"]);
    let (_tmp, mut s) = session_for(&model);
    let got = features(&mut s, vec![("pixel_values", r.get("pixel_values").clone()), ("image_grid_thw", r.get("image_grid_thw").clone())]);
    let diff = max_abs_diff(&got, r.get("image_features").f32(), None);
    eprintln!("{QWEN} image_features max |diff| = {diff:e}");
    assert_within(&format!("{QWEN} f32 image_features"), &[("image_features".into(), diff)], ATOL);
}

/// Two images in one call: the fixture's and a noise image of another grid. The fixture's
/// rows still match the reference (no attention across images, in full or windowed blocks),
/// and the noise image's rows equal a call with it alone.
#[test]
fn qwen2_5_vl_images_in_one_call_do_not_see_each_other() {
    let dir = fixture(QWEN);
    let r = Reference::load(&dir);
    let (_tmp, mut s) = session_for(&tower(&dir));
    let pixels = r.get("pixel_values").f32().clone();
    let other = noise(&[10 * 12, pixels.shape()[1]], 7);
    let both = concatenate(Axis(0), &[pixels.view(), other.view()]).unwrap();
    let got = features(&mut s, vec![("pixel_values", Feed::F32(both)), ("image_grid_thw", grid(&[[1, 6, 8], [1, 10, 12]]))]);
    assert_eq!(got.shape(), [12 + 30, 64]);
    let first = got.slice_axis(Axis(0), (0..12).into()).to_owned();
    let second = got.slice_axis(Axis(0), (12..42).into()).to_owned();
    let diff = max_abs_diff(&first, r.get("image_features").f32(), None);
    assert_within(&format!("{QWEN} the fixture's image beside another"), &[("image_features".into(), diff)], ATOL);
    let alone = features(&mut s, vec![("pixel_values", Feed::F32(other)), ("image_grid_thw", grid(&[[1, 10, 12]]))]);
    let diff = max_abs_diff(&second, &alone, None);
    assert_within(&format!("{QWEN} the second image vs alone"), &[("image_features".into(), diff)], 1e-5);
}

/// transformers' `get_window_index` and `rot_pos_emb`, written out for one batch of grids:
/// the window permutation of the merged tokens, `cu_window_seqlens` (after
/// `unique_consecutive`), `cu_seqlens`, and each patch's (row, col) in window order.
struct HfLayout {
    window_index: Vec<i64>,
    cu_window_seqlens: Vec<i64>,
    cu_seqlens: Vec<i64>,
    rows: Vec<i64>,
    cols: Vec<i64>,
}

fn hf_layout(grids: &[[i64; 3]], merge: i64, side: i64) -> HfLayout {
    let unit = merge * merge;
    let (mut window_index, mut cu_window_seqlens, mut cu_seqlens) = (vec![], vec![0i64], vec![0i64]);
    let mut raster_pos = vec![]; // per merged token, raster order: its patches' (row, col)
    let mut base = 0;
    for &[t, h, w] in grids {
        let (gh, gw) = (h / merge, w / merge);
        let (nh, nw) = ((gh + side - gh % side) / side, (gw + side - gw % side) / side);
        for f in 0..t {
            for wr in 0..nh {
                for wc in 0..nw {
                    let mut count = 0;
                    for r in wr * side..(wr + 1) * side {
                        for c in wc * side..(wc + 1) * side {
                            if r < gh && c < gw {
                                window_index.push(base + f * gh * gw + r * gw + c);
                                count += 1;
                            }
                        }
                    }
                    cu_window_seqlens.push(cu_window_seqlens.last().unwrap() + count * unit);
                }
            }
            cu_seqlens.push(cu_seqlens.last().unwrap() + h * w);
            for r in 0..gh {
                for c in 0..gw {
                    let patches: Vec<(i64, i64)> = (0..unit).map(|i| (r * merge + i / merge, c * merge + i % merge)).collect();
                    raster_pos.push(patches);
                }
            }
        }
        base += t * gh * gw;
    }
    cu_window_seqlens.dedup();
    let (rows, cols) = window_index.iter().flat_map(|&g| raster_pos[g as usize].clone()).unzip();
    HfLayout { window_index, cu_window_seqlens, cu_seqlens, rows, cols }
}

/// Cumulative run lengths of consecutive equal ids, from 0 (what `cu_*seqlens` are).
fn cumulative_runs(ids: &[i64]) -> Vec<i64> {
    let mut cu = vec![0i64];
    for (i, id) in ids.iter().enumerate() {
        if i > 0 && ids[i - 1] != *id {
            cu.push(i as i64);
        }
    }
    cu.push(ids.len() as i64);
    cu
}

#[test]
fn qwen2_5_vl_layout_in_the_graph_is_transformers_layout_on_other_grids() {
    let ckpt = Checkpoint::open(&fixture(QWEN)).unwrap();
    let base = qwen2_5_vl::QwenVision::read(&ckpt.config.path, ckpt.config.multimodal.as_ref().unwrap(), 64).unwrap();
    let batches: &[&[[i64; 3]]] = &[&[[1, 10, 14]], &[[1, 6, 8]], &[[1, 10, 14], [1, 6, 8], [2, 4, 6]], &[[1, 16, 8], [1, 2, 2]]];
    for side in [base.window_side, 3, 4] {
        let v = qwen2_5_vl::QwenVision { window_side: side, ..base.clone() };
        let (_tmp, mut s) = session_for(&qwen2_5_vl::layout_model(&v).unwrap());
        for &grids in batches {
            let out = run(&mut s, &[("image_grid_thw".into(), grid(grids))]);
            let get = |name: &str| out[name].i64().iter().copied().collect::<Vec<i64>>();
            let hf = hf_layout(grids, v.merge as i64, side as i64);
            let case = format!("grids {grids:?}, window side {side}");
            assert_eq!(get("window_index"), hf.window_index, "{case}: window_index");
            let reverse = get("reverse_index");
            for (k, &g) in hf.window_index.iter().enumerate() {
                assert_eq!(reverse[g as usize], k as i64, "{case}: reverse_index is argsort(window_index)");
            }
            assert_eq!(cumulative_runs(&get("window_ids")), hf.cu_window_seqlens, "{case}: windows (cu_window_seqlens)");
            assert_eq!(cumulative_runs(&get("frame_ids")), hf.cu_seqlens, "{case}: frames (cu_seqlens)");
            assert_eq!(get("rows"), hf.rows, "{case}: rotary row ids");
            assert_eq!(get("cols"), hf.cols, "{case}: rotary column ids");
            let ids = get("window_ids");
            let distinct: std::collections::BTreeSet<_> = ids.iter().collect();
            assert_eq!(distinct.len(), hf.cu_window_seqlens.len() - 1, "{case}: a window's patches are contiguous");
        }
    }
    // The fixture's own layout is not the identity and its windows are unequal.
    let hf = hf_layout(&[[1, 6, 8]], 2, base.window_side as i64);
    assert_ne!(hf.window_index, (0..12).collect::<Vec<_>>());
    assert_eq!(hf.cu_window_seqlens, [0, 16, 32, 40, 48]);
}

#[test]
fn gemma3_image_features_match_transformers() {
    let dir = fixture(GEMMA);
    let r = Reference::load(&dir);
    let model = tower(&dir);
    assert_standard(&model);
    let inputs: Vec<&str> = model.graph.inputs.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(inputs, ["pixel_values"]);
    let (_tmp, mut s) = session_for(&model);
    let got = features(&mut s, vec![("pixel_values", r.get("pixel_values").clone())]);
    let diff = max_abs_diff(&got, r.get("image_features").f32(), None);
    eprintln!("{GEMMA} image_features max |diff| = {diff:e}");
    assert_within(&format!("{GEMMA} f32 image_features"), &[("image_features".into(), diff)], ATOL);

    // A batch of two: the fixture's image first, its rows unchanged, then a noise image.
    let pixels = r.get("pixel_values").f32().clone();
    let both = concatenate(Axis(0), &[pixels.view(), noise(pixels.shape(), 3).view()]).unwrap();
    let got = features(&mut s, vec![("pixel_values", Feed::F32(both))]);
    assert_eq!(got.shape(), [512, 64]);
    let diff = max_abs_diff(&got.slice_axis(Axis(0), (0..256).into()).to_owned(), r.get("image_features").f32(), None);
    assert_within(&format!("{GEMMA} first of two images"), &[("image_features".into(), diff)], ATOL);
}

/// Renames tensors by prefix (first match wins).
fn renamed(src: &Path, dst: &Path, map: &[(&str, &str)]) {
    rewrite_checkpoint(src, dst, |tensors| {
        tensors
            .into_iter()
            .map(|(n, d, s, b)| {
                let n = map.iter().find_map(|(from, to)| n.strip_prefix(from).map(|rest| format!("{to}{rest}"))).unwrap_or(n);
                (n, d, s, b)
            })
            .collect()
    });
}

/// transformers 5 names (`model.visual.*` beside `model.language_model.*`; Gemma's published
/// `vision_tower.vision_model.*`) build the same tower.
#[test]
fn other_tensor_layouts_build_the_same_towers() {
    let tmp = tempfile::tempdir().unwrap();
    let cases: [(&str, &[(&str, &str)]); 3] = [
        (QWEN, &[("visual.", "model.visual."), ("model.", "model.language_model.")]),
        (GEMMA, &[("vision_tower.", "model.vision_tower.vision_model."), ("multi_modal_projector.", "model.multi_modal_projector."), ("language_model.model.", "model.language_model.")]),
        (GEMMA, &[("vision_tower.", "vision_tower.vision_model.")]),
    ];
    for (i, (name, map)) in cases.into_iter().enumerate() {
        let dst = tmp.path().join(format!("{name}-{i}"));
        renamed(&fixture(name), &dst, map);
        let r = Reference::load(&fixture(name));
        let (_t, mut s) = session_for(&tower(&dst));
        let feeds: Vec<(&str, Feed)> =
            ["pixel_values", "image_grid_thw"].into_iter().filter(|n| r.has(n)).map(|n| (n, r.get(n).clone())).collect();
        let diff = max_abs_diff(&features(&mut s, feeds), r.get("image_features").f32(), None);
        assert_within(&format!("{name} renamed {map:?}"), &[("image_features".into(), diff)], ATOL);
    }
}

/// A tower tensor the graph would not read (another merger, a pooling head) is refused, named.
#[test]
fn a_tower_tensor_the_graph_does_not_read_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let extra: BTreeMap<&str, &str> = [(QWEN, "visual.merger.mlp.4.weight"), (GEMMA, "vision_tower.head.probe")].into();
    for (name, tensor) in extra {
        let dst = tmp.path().join(name);
        rewrite_checkpoint(&fixture(name), &dst, |mut t| {
            t.push((tensor.to_string(), safetensors::Dtype::F32, vec![2], vec![0; 8]));
            t
        });
        let ckpt = Checkpoint::open(&dst).unwrap();
        let e = vision::build_vision(&ckpt, &BuildOptions::default()).unwrap_err().to_string();
        assert!(e.contains(tensor) && e.contains("would be ignored"), "{name}: {e}");
    }
}

/// A vision option the build does not handle is refused by key from the checkpoint folder,
/// before any graph exists.
#[test]
fn vision_options_not_handled_are_refused_by_key() {
    let tmp = tempfile::tempdir().unwrap();
    let edits: [(&str, &str, serde_json::Value, &str); 2] = [
        (GEMMA, "mm_tokens_per_image", serde_json::json!(64), "key `mm_tokens_per_image` is 64"),
        (QWEN, "model_type", serde_json::json!("qwen3_vl"), "qwen3_vl"),
    ];
    for (name, key, value, expected) in edits {
        let dst = tmp.path().join(format!("{name}-{key}"));
        rewrite_checkpoint(&fixture(name), &dst, |t| t);
        let path = dst.join("config.json");
        let mut config: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        config[key] = value;
        std::fs::write(&path, config.to_string()).unwrap();
        let ckpt = Checkpoint::open(&dst).unwrap();
        let e = vision::build_vision(&ckpt, &BuildOptions::default()).unwrap_err().to_string();
        assert!(e.contains(expected), "{name} {key}: {e}");
    }
}

/// An independent Qwen2.5-VL tower in plain Rust, written from transformers' definition but
/// computed in raster (processor) order: attention windows and frames are sets of patches
/// found from each patch's coordinates, so nothing here permutes tokens. The graph's window
/// permutation and its reverse must cancel exactly for the two to agree.
mod reference {
    use models::arch::vision::qwen2_5_vl::QwenVision;
    use models::Activation;
    use ndarray::{s, Array1, Array2, ArrayView2, Axis};
    use std::collections::BTreeMap;
    use std::path::Path;

    pub struct Weights(BTreeMap<String, (Vec<usize>, Vec<f32>)>);

    impl Weights {
        pub fn load(dir: &Path) -> Weights {
            let bytes = std::fs::read(dir.join("model.safetensors")).unwrap();
            let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
            let map = st
                .tensors()
                .into_iter()
                .map(|(n, v)| {
                    assert_eq!(v.dtype(), safetensors::Dtype::F32, "{n}");
                    let data = v.data().chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
                    (n, (v.shape().to_vec(), data))
                })
                .collect();
            Weights(map)
        }

        /// A `[out, in]` weight as a 2-D array (any trailing dims flattened into `in`).
        fn matrix(&self, name: &str) -> Array2<f32> {
            let (shape, data) = &self.0[name];
            Array2::from_shape_vec((shape[0], shape[1..].iter().product()), data.clone()).unwrap()
        }

        fn vector(&self, name: &str) -> Array1<f32> {
            Array1::from_vec(self.0[name].1.clone())
        }

        /// `x W^T + b`.
        fn linear(&self, scope: &str, x: ArrayView2<f32>) -> Array2<f32> {
            x.dot(&self.matrix(&format!("{scope}.weight")).t()) + &self.vector(&format!("{scope}.bias"))
        }
    }

    fn rms_norm(x: &Array2<f32>, w: &Array1<f32>) -> Array2<f32> {
        let mut y = x.clone();
        for mut row in y.rows_mut() {
            let ms = row.iter().map(|v| v * v).sum::<f32>() / row.len() as f32;
            let r = 1.0 / (ms + 1e-6).sqrt();
            row.iter_mut().zip(w.iter()).for_each(|(v, w)| *v = *v * r * w);
        }
        y
    }

    /// erf by Abramowitz-Stegun 7.1.26 (|error| < 1.5e-7).
    fn erf(x: f32) -> f32 {
        let (sign, x) = if x < 0.0 { (-1.0, -x as f64) } else { (1.0, x as f64) };
        let t = 1.0 / (1.0 + 0.3275911 * x);
        let poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
        sign * (1.0 - poly * (-x * x).exp()) as f32
    }

    fn act(x: f32, a: Activation) -> f32 {
        match a {
            Activation::Silu => x / (1.0 + (-x).exp()),
            Activation::Gelu => 0.5 * x * (1.0 + erf(x / std::f32::consts::SQRT_2)),
            Activation::GeluTanh => 0.5 * x * (1.0 + (0.797_884_6 * (x + 0.044715 * x * x * x)).tanh()),
        }
    }

    /// `image_features` of `pixels` (processor order) for `grids`, tower weights under `visual.`.
    pub fn qwen_tower(w: &Weights, v: &QwenVision, pixels: &Array2<f32>, grids: &[[i64; 3]]) -> Array2<f32> {
        let (m, side, unit, hd) = (v.merge, v.window_side, v.merge * v.merge, v.head_dim);
        // Per patch, in processor order: frame, window (frame, window row, window col), row, col.
        let mut patches = vec![];
        let mut frame = 0;
        for &[t, h, wd] in grids {
            let (gh, gw) = (h as usize / m, wd as usize / m);
            for _ in 0..t {
                for r in 0..gh {
                    for c in 0..gw {
                        for i in 0..unit {
                            patches.push((frame, (frame, r / side, c / side), r * m + i / m, c * m + i % m));
                        }
                    }
                }
                frame += 1;
            }
        }
        let n = patches.len();
        assert_eq!(n, pixels.nrows());
        let mut x = pixels.dot(&w.matrix("visual.patch_embed.proj.weight").t());
        let quarter = hd / 4;
        let inv: Vec<f32> = (0..quarter).map(|j| 1.0 / (v.rope_theta as f32).powf((2 * j) as f32 / (hd / 2) as f32)).collect();
        let angles: Vec<Vec<f32>> = patches
            .iter()
            .map(|&(_, _, r, c)| {
                let half: Vec<f32> = inv.iter().map(|f| r as f32 * f).chain(inv.iter().map(|f| c as f32 * f)).collect();
                half.iter().chain(half.iter()).copied().collect()
            })
            .collect();
        let rotate = |q: &mut Array2<f32>| {
            for (p, mut row) in q.rows_mut().into_iter().enumerate() {
                for head in 0..v.heads {
                    let seg: Vec<f32> = row.slice(s![head * hd..(head + 1) * hd]).to_vec();
                    for d in 0..hd {
                        let rot = if d < hd / 2 { -seg[d + hd / 2] } else { seg[d - hd / 2] };
                        let a = angles[p][d];
                        row[head * hd + d] = seg[d] * a.cos() + rot * a.sin();
                    }
                }
            }
        };
        for b in 0..v.depth {
            let p = format!("visual.blocks.{b}");
            let full = v.full_attention.contains(&b);
            let h = rms_norm(&x, &w.vector(&format!("{p}.norm1.weight")));
            let qkv = w.linear(&format!("{p}.attn.qkv"), h.view());
            let (mut q, mut k) = (qkv.slice(s![.., 0..v.hidden]).to_owned(), qkv.slice(s![.., v.hidden..2 * v.hidden]).to_owned());
            let val = qkv.slice(s![.., 2 * v.hidden..]).to_owned();
            rotate(&mut q);
            rotate(&mut k);
            let mut out = Array2::<f32>::zeros((n, v.hidden));
            let scale = 1.0 / (hd as f32).sqrt();
            for i in 0..n {
                let seen: Vec<usize> =
                    (0..n).filter(|&j| if full { patches[j].0 == patches[i].0 } else { patches[j].1 == patches[i].1 }).collect();
                for head in 0..v.heads {
                    let cols = head * hd..(head + 1) * hd;
                    let qi = q.slice(s![i, cols.clone()]);
                    let scores: Vec<f32> = seen.iter().map(|&j| qi.dot(&k.slice(s![j, cols.clone()])) * scale).collect();
                    let top = scores.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
                    let e: Vec<f32> = scores.iter().map(|s| (s - top).exp()).collect();
                    let sum: f32 = e.iter().sum();
                    for (&j, e) in seen.iter().zip(&e) {
                        let mut o = out.slice_mut(s![i, cols.clone()]);
                        o.scaled_add(e / sum, &val.slice(s![j, cols.clone()]));
                    }
                }
            }
            x = x + w.linear(&format!("{p}.attn.proj"), out.view());
            let h = rms_norm(&x, &w.vector(&format!("{p}.norm2.weight")));
            let gate = w.linear(&format!("{p}.mlp.gate_proj"), h.view()).mapv(|g| act(g, v.act));
            let up = w.linear(&format!("{p}.mlp.up_proj"), h.view());
            x = x + w.linear(&format!("{p}.mlp.down_proj"), (gate * up).view());
        }
        let h = rms_norm(&x, &w.vector("visual.merger.ln_q.weight"));
        let h = h.into_shape_with_order((n / unit, unit * v.hidden)).unwrap();
        let h = w.linear("visual.merger.mlp.0", h.view()).mapv(|g| act(g, Activation::Gelu));
        let y = w.linear("visual.merger.mlp.2", h.view());
        assert_eq!(y.len_of(Axis(0)), n / unit);
        y
    }
}

/// On grids and window sizes the fixture does not have (windows of 4, 2 and 1 tokens, several
/// images, a two-frame grid), the graph equals the raster-order reference above; and that
/// reference equals transformers on the fixture, so it is the same tower.
#[test]
fn qwen2_5_vl_tower_on_other_layouts_equals_a_raster_order_reference() {
    let dir = fixture(QWEN);
    let r = Reference::load(&dir);
    let weights = reference::Weights::load(&dir);
    let ckpt = Checkpoint::open(&dir).unwrap();
    let v = qwen2_5_vl::QwenVision::read(&ckpt.config.path, ckpt.config.multimodal.as_ref().unwrap(), 64).unwrap();
    let fixture_pixels = r.get("pixel_values").f32().clone().into_dimensionality::<ndarray::Ix2>().unwrap();
    let own = reference::qwen_tower(&weights, &v, &fixture_pixels, &[[1, 6, 8]]);
    let diff = max_abs_diff(&own.into_dyn(), r.get("image_features").f32(), None);
    assert_within("the Rust reference vs transformers on the fixture", &[("image_features".into(), diff)], ATOL);

    let (_tmp, mut s) = session_for(&tower(&dir));
    let batches: &[&[[i64; 3]]] = &[&[[1, 10, 14]], &[[1, 10, 14], [1, 6, 8]], &[[2, 4, 6], [1, 2, 2]]];
    for (i, &grids) in batches.iter().enumerate() {
        let patches: i64 = grids.iter().map(|[t, h, w]| t * h * w).sum();
        let pixels = noise(&[patches as usize, v.patch_dim()], 11 + i as u64).into_dimensionality::<ndarray::Ix2>().unwrap();
        let want = reference::qwen_tower(&weights, &v, &pixels, grids);
        let got = features(&mut s, vec![("pixel_values", Feed::F32(pixels.into_dyn())), ("image_grid_thw", grid(grids))]);
        let diff = max_abs_diff(&got, &want.into_dyn(), None);
        eprintln!("grids {grids:?}: graph vs raster-order reference max |diff| = {diff:e}");
        assert_within(&format!("grids {grids:?}"), &[("image_features".into(), diff)], 1e-4);
    }
}

/// f16 towers (f32 at the interface, tests/src/f16.rs) run on ONNX Runtime's CPU EP and stay
/// within 5e-2 of the f32 reference (the fixtures' f16 floor).
#[test]
fn f16_towers_run_on_cpu_near_the_reference() {
    for name in [QWEN, GEMMA] {
        let dir = fixture(name);
        let r = Reference::load(&dir);
        let ckpt = Checkpoint::open(&dir).unwrap();
        let model = vision::build_vision(&ckpt, &BuildOptions { dtype: ir::DType::F16, ..Default::default() }).unwrap();
        assert_eq!(model.graph.outputs[0].dtype, ir::DType::F16);
        let (_t, mut s) = session_for(&tailor_tests::f16::f32_interface(&model));
        let feeds = ["pixel_values", "image_grid_thw"].into_iter().filter(|n| r.has(n)).map(|n| (n, r.get(n).clone())).collect();
        let diff = max_abs_diff(&features(&mut s, feeds), r.get("image_features").f32(), None);
        eprintln!("{name} f16 image_features max |diff| = {diff:e}");
        assert_within(&format!("{name} f16 image_features"), &[("image_features".into(), diff)], 5e-2);
    }
}
