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
        (QWEN, "model_type", serde_json::json!("qwen2_vl"), "unsupported model_type `qwen2_vl`"),
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

/// Independent Qwen towers in plain Rust, written from transformers' definitions but computed
/// in raster (processor) order: attention windows and frames are sets of patches found from
/// each patch's coordinates, so nothing here permutes tokens. The graph's window permutation
/// and its reverse must cancel exactly for the two to agree.
mod reference {
    use models::arch::vision::qwen2_5_vl::QwenVision;
    use models::arch::vision::qwen3_vl::Qwen3Vision;
    use models::Activation;
    use ndarray::{s, Array1, Array2, ArrayView2};
    use std::collections::BTreeMap;
    use std::path::Path;

    pub struct Weights {
        map: BTreeMap<String, (Vec<usize>, Vec<f32>)>,
        prefix: String,
    }

    impl Weights {
        /// The f32 tensors of `dir/model.safetensors`; names are looked up under `prefix`.
        pub fn load(dir: &Path, prefix: &str) -> Weights {
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
            Weights { map, prefix: prefix.to_string() }
        }

        fn get(&self, name: &str) -> &(Vec<usize>, Vec<f32>) {
            let full = format!("{}{name}", self.prefix);
            self.map.get(&full).unwrap_or_else(|| panic!("no tensor {full}"))
        }

        /// A `[rows, ...]` tensor as a 2-D array (the trailing dims flattened).
        fn matrix(&self, name: &str) -> Array2<f32> {
            let (shape, data) = self.get(name);
            Array2::from_shape_vec((shape[0], shape[1..].iter().product()), data.clone()).unwrap()
        }

        fn vector(&self, name: &str) -> Array1<f32> {
            Array1::from_vec(self.get(name).1.clone())
        }

        /// `x W^T + b`.
        fn linear(&self, scope: &str, x: ArrayView2<f32>) -> Array2<f32> {
            x.dot(&self.matrix(&format!("{scope}.weight")).t()) + &self.vector(&format!("{scope}.bias"))
        }

        fn layer_norm(&self, scope: &str, x: &Array2<f32>) -> Array2<f32> {
            let (w, b) = (self.vector(&format!("{scope}.weight")), self.vector(&format!("{scope}.bias")));
            let mut y = x.clone();
            for mut row in y.rows_mut() {
                let mean = row.sum() / row.len() as f32;
                let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / row.len() as f32;
                let r = 1.0 / (var + 1e-6).sqrt();
                for (i, v) in row.iter_mut().enumerate() {
                    *v = (*v - mean) * r * w[i] + b[i];
                }
            }
            y
        }

        fn rms_norm(&self, scope: &str, x: &Array2<f32>) -> Array2<f32> {
            let w = self.vector(&format!("{scope}.weight"));
            let mut y = x.clone();
            for mut row in y.rows_mut() {
                let ms = row.iter().map(|v| v * v).sum::<f32>() / row.len() as f32;
                let r = 1.0 / (ms + 1e-6).sqrt();
                row.iter_mut().zip(w.iter()).for_each(|(v, w)| *v = *v * r * w);
            }
            y
        }
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
            Activation::Relu2 => x.max(0.0) * x.max(0.0),
            Activation::Relu => x.max(0.0),
            Activation::Xielu => unreachable!("a vision config's `xielu` is refused (no tower stores its scalars)"),
        }
    }

    /// One patch in the processor's order.
    #[derive(Clone, Copy)]
    struct Patch {
        frame: usize,
        /// (frame, window row, window col) for a window side, when there are windows.
        window: (usize, usize, usize),
        row: usize,
        col: usize,
        /// The patch grid of its image.
        h: usize,
        w: usize,
    }

    fn patches(grids: &[[i64; 3]], merge: usize, side: usize) -> Vec<Patch> {
        let mut out = vec![];
        let mut frame = 0;
        for &[t, h, w] in grids {
            let (h, w) = (h as usize, w as usize);
            for _ in 0..t {
                for r in 0..h / merge {
                    for c in 0..w / merge {
                        for i in 0..merge * merge {
                            let (row, col) = (r * merge + i / merge, c * merge + i % merge);
                            out.push(Patch { frame, window: (frame, r / side, c / side), row, col, h, w });
                        }
                    }
                }
                frame += 1;
            }
        }
        out
    }

    /// Rotary angles per patch: rows on the first quarter of the head, columns on the second,
    /// repeated (`cat(emb, emb)`).
    fn angles(patches: &[Patch], head_dim: usize, theta: f64) -> Vec<Vec<f32>> {
        let quarter = head_dim / 4;
        let inv: Vec<f32> = (0..quarter).map(|j| 1.0 / (theta as f32).powf((2 * j) as f32 / (head_dim / 2) as f32)).collect();
        patches
            .iter()
            .map(|p| {
                let half: Vec<f32> = inv.iter().map(|f| p.row as f32 * f).chain(inv.iter().map(|f| p.col as f32 * f)).collect();
                half.iter().chain(half.iter()).copied().collect()
            })
            .collect()
    }

    /// Multi-head attention with rotate-half rotary on q and k; patch i sees patch j when
    /// `sees(i, j)`.
    fn attention(w: &Weights, scope: &str, h: &Array2<f32>, heads: usize, angles: &[Vec<f32>], sees: &dyn Fn(usize, usize) -> bool) -> Array2<f32> {
        let (n, hidden) = (h.nrows(), h.ncols());
        let hd = hidden / heads;
        let qkv = w.linear(&format!("{scope}.qkv"), h.view());
        let rotate = |x: Array2<f32>| {
            let mut y = x.clone();
            for p in 0..n {
                for head in 0..heads {
                    for d in 0..hd {
                        let rot = if d < hd / 2 { -x[[p, head * hd + d + hd / 2]] } else { x[[p, head * hd + d - hd / 2]] };
                        let a = angles[p][d];
                        y[[p, head * hd + d]] = x[[p, head * hd + d]] * a.cos() + rot * a.sin();
                    }
                }
            }
            y
        };
        let q = rotate(qkv.slice(s![.., 0..hidden]).to_owned());
        let k = rotate(qkv.slice(s![.., hidden..2 * hidden]).to_owned());
        let v = qkv.slice(s![.., 2 * hidden..]).to_owned();
        let mut out = Array2::<f32>::zeros((n, hidden));
        let scale = 1.0 / (hd as f32).sqrt();
        for i in 0..n {
            let seen: Vec<usize> = (0..n).filter(|&j| sees(i, j)).collect();
            for head in 0..heads {
                let cols = head * hd..(head + 1) * hd;
                let qi = q.slice(s![i, cols.clone()]);
                let scores: Vec<f32> = seen.iter().map(|&j| qi.dot(&k.slice(s![j, cols.clone()])) * scale).collect();
                let top = scores.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
                let e: Vec<f32> = scores.iter().map(|s| (s - top).exp()).collect();
                let sum: f32 = e.iter().sum();
                for (&j, e) in seen.iter().zip(&e) {
                    out.slice_mut(s![i, cols.clone()]).scaled_add(e / sum, &v.slice(s![j, cols.clone()]));
                }
            }
        }
        w.linear(&format!("{scope}.proj"), out.view())
    }

    fn merged(x: Array2<f32>, unit: usize) -> Array2<f32> {
        let (n, hidden) = x.dim();
        x.into_shape_with_order((n / unit, unit * hidden)).unwrap()
    }

    /// Qwen2.5-VL `image_features` of `pixels` (processor order) for `grids`.
    pub fn qwen_tower(w: &Weights, v: &QwenVision, pixels: &Array2<f32>, grids: &[[i64; 3]]) -> Array2<f32> {
        let ps = patches(grids, v.merge, v.window_side);
        assert_eq!(ps.len(), pixels.nrows());
        let angles = angles(&ps, v.head_dim, v.rope_theta);
        let mut x = pixels.dot(&w.matrix("patch_embed.proj.weight").t());
        for b in 0..v.depth {
            let p = format!("blocks.{b}");
            let full = v.full_attention.contains(&b);
            let sees = |i: usize, j: usize| if full { ps[i].frame == ps[j].frame } else { ps[i].window == ps[j].window };
            let h = w.rms_norm(&format!("{p}.norm1"), &x);
            x = x + attention(w, &format!("{p}.attn"), &h, v.heads, &angles, &sees);
            let h = w.rms_norm(&format!("{p}.norm2"), &x);
            let gate = w.linear(&format!("{p}.mlp.gate_proj"), h.view()).mapv(|g| act(g, v.act));
            let up = w.linear(&format!("{p}.mlp.up_proj"), h.view());
            x = x + w.linear(&format!("{p}.mlp.down_proj"), (gate * up).view());
        }
        let h = merged(w.rms_norm("merger.ln_q", &x), v.merge * v.merge);
        let h = w.linear("merger.mlp.0", h.view()).mapv(|g| act(g, Activation::Gelu));
        w.linear("merger.mlp.2", h.view())
    }

    /// torch.linspace(0, end, steps)[i] in f32, as ATen computes it (from the start for the
    /// first half, from the end for the second).
    fn linspace(end: f32, steps: usize, i: usize) -> f32 {
        if steps == 1 {
            return 0.0;
        }
        let step = end / (steps - 1) as f32;
        if i < steps / 2 {
            step * i as f32
        } else {
            end - step * (steps - 1 - i) as f32
        }
    }

    /// Qwen3-VL (`image_features`, deepstack features) of `pixels` for `grids`.
    pub fn qwen3_tower(w: &Weights, v: &Qwen3Vision, pixels: &Array2<f32>, grids: &[[i64; 3]]) -> (Array2<f32>, Vec<Array2<f32>>) {
        let ps = patches(grids, v.merge, 1);
        assert_eq!(ps.len(), pixels.nrows());
        let angles = angles(&ps, v.head_dim, v.rope_theta);
        let mut x = w.linear("patch_embed.proj", pixels.view());
        // fast_pos_embed_interpolate: bilinear over the learned side x side grid.
        let table = w.matrix("pos_embed.weight");
        let side = v.position_side;
        for (i, p) in ps.iter().enumerate() {
            let hy = linspace((side - 1) as f32, p.h, p.row);
            let wx = linspace((side - 1) as f32, p.w, p.col);
            let (h0, w0) = (hy as usize, wx as usize);
            let (h1, w1) = ((h0 + 1).min(side - 1), (w0 + 1).min(side - 1));
            let (dh, dw) = (hy - h0 as f32, wx - w0 as f32);
            for (hi, wi, weight) in [(h0, w0, (1.0 - dh) * (1.0 - dw)), (h0, w1, (1.0 - dh) * dw), (h1, w0, dh * (1.0 - dw)), (h1, w1, dh * dw)] {
                let mut row = x.row_mut(i);
                row.scaled_add(weight, &table.row(hi * side + wi));
            }
        }
        let sees = |i: usize, j: usize| ps[i].frame == ps[j].frame;
        let unit = v.merge * v.merge;
        let merger = |scope: &str, x: &Array2<f32>, post_shuffle: bool| {
            let h = if post_shuffle { w.layer_norm(&format!("{scope}.norm"), &merged(x.clone(), unit)) } else { merged(w.layer_norm(&format!("{scope}.norm"), x), unit) };
            let h = w.linear(&format!("{scope}.linear_fc1"), h.view()).mapv(|g| act(g, Activation::Gelu));
            w.linear(&format!("{scope}.linear_fc2"), h.view())
        };
        let mut deepstack = vec![Array2::zeros((0, 0)); v.deepstack.len()];
        for b in 0..v.depth {
            let p = format!("blocks.{b}");
            let h = w.layer_norm(&format!("{p}.norm1"), &x);
            x = x + attention(w, &format!("{p}.attn"), &h, v.heads, &angles, &sees);
            let h = w.layer_norm(&format!("{p}.norm2"), &x);
            let h = w.linear(&format!("{p}.mlp.linear_fc1"), h.view()).mapv(|g| act(g, v.act));
            x = x + w.linear(&format!("{p}.mlp.linear_fc2"), h.view());
            for (k, _) in v.deepstack.iter().enumerate().filter(|(_, &at)| at == b) {
                deepstack[k] = merger(&format!("deepstack_merger_list.{k}"), &x, true);
            }
        }
        (merger("merger", &x, false), deepstack)
    }
}

/// On grids and window sizes the fixture does not have (windows of 4, 2 and 1 tokens, several
/// images, a two-frame grid), the graph equals the raster-order reference above; and that
/// reference equals transformers on the fixture, so it is the same tower.
#[test]
fn qwen2_5_vl_tower_on_other_layouts_equals_a_raster_order_reference() {
    let dir = fixture(QWEN);
    let r = Reference::load(&dir);
    let weights = reference::Weights::load(&dir, "visual.");
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

/// A tiny Qwen3-VL checkpoint with deterministic random weights in the published layout
/// (`model.visual.*` beside `model.language_model.*`): no transformers fixture exists.
fn synthetic_qwen3_vl(dir: &Path) {
    let vision = serde_json::json!({"model_type": "qwen3_vl", "depth": 3, "hidden_size": 32, "num_heads": 2,
        "intermediate_size": 48, "patch_size": 4, "temporal_patch_size": 2, "in_channels": 3, "spatial_merge_size": 2,
        "out_hidden_size": 64, "num_position_embeddings": 36, "deepstack_visual_indexes": [0, 2], "hidden_act": "gelu_pytorch_tanh"});
    let text = serde_json::json!({"model_type": "qwen3_vl_text", "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
        "head_dim": 16, "num_hidden_layers": 2, "intermediate_size": 128, "vocab_size": 512,
        "rope_parameters": {"rope_type": "default", "rope_theta": 5000000.0, "mrope_section": [2, 3, 3], "mrope_interleaved": true}});
    let config = serde_json::json!({"model_type": "qwen3_vl", "architectures": ["Qwen3VLForConditionalGeneration"],
        "image_token_id": 5, "text_config": text, "vision_config": vision});
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
    let (h, i, wide, out) = (32usize, 48usize, 128usize, 64usize);
    let mut shapes: Vec<(String, Vec<usize>, f32, f32)> = vec![
        ("model.visual.patch_embed.proj.weight".into(), vec![h, 3, 2, 4, 4], 0.0, 0.3),
        ("model.visual.patch_embed.proj.bias".into(), vec![h], 0.0, 0.1),
        ("model.visual.pos_embed.weight".into(), vec![36, h], 0.0, 0.5),
        ("model.language_model.layers.0.input_layernorm.weight".into(), vec![64], 1.0, 0.1),
    ];
    let mut linear = |scope: &str, inp: usize, outp: usize| {
        shapes.push((format!("{scope}.weight"), vec![outp, inp], 0.0, 0.3));
        shapes.push((format!("{scope}.bias"), vec![outp], 0.0, 0.1));
    };
    for b in 0..3 {
        let p = format!("model.visual.blocks.{b}");
        linear(&format!("{p}.attn.qkv"), h, 3 * h);
        linear(&format!("{p}.attn.proj"), h, h);
        linear(&format!("{p}.mlp.linear_fc1"), h, i);
        linear(&format!("{p}.mlp.linear_fc2"), i, h);
    }
    for m in ["model.visual.merger", "model.visual.deepstack_merger_list.0", "model.visual.deepstack_merger_list.1"] {
        linear(&format!("{m}.linear_fc1"), wide, wide);
        linear(&format!("{m}.linear_fc2"), wide, out);
    }
    for b in 0..3 {
        for n in ["norm1", "norm2"] {
            shapes.push((format!("model.visual.blocks.{b}.{n}.weight"), vec![h], 1.0, 0.1));
            shapes.push((format!("model.visual.blocks.{b}.{n}.bias"), vec![h], 0.0, 0.1));
        }
    }
    for (m, width) in [("merger", h), ("deepstack_merger_list.0", wide), ("deepstack_merger_list.1", wide)] {
        shapes.push((format!("model.visual.{m}.norm.weight"), vec![width], 1.0, 0.1));
        shapes.push((format!("model.visual.{m}.norm.bias"), vec![width], 0.0, 0.1));
    }
    let data: Vec<(String, Vec<usize>, Vec<u8>)> = shapes
        .iter()
        .enumerate()
        .map(|(k, (name, shape, base, scale))| {
            let values = noise(shape, 100 + k as u64).mapv(|x| base + scale * x);
            (name.clone(), shape.clone(), values.iter().flat_map(|v| v.to_le_bytes()).collect())
        })
        .collect();
    let views: Vec<(String, safetensors::tensor::TensorView)> = data
        .iter()
        .map(|(n, shape, bytes)| (n.clone(), safetensors::tensor::TensorView::new(safetensors::Dtype::F32, shape.clone(), bytes).unwrap()))
        .collect();
    std::fs::write(dir.join("model.safetensors"), safetensors::serialize(views, None).unwrap()).unwrap();
}

/// Qwen3-VL, checked against the Rust reference only (see qwen3_vl.rs): position embeddings
/// interpolated onto grids larger and smaller than the learned one, several images and
/// frames, and the deepstack features of blocks 0 and 2.
#[test]
fn qwen3_vl_tower_equals_the_raster_order_reference_on_a_synthetic_checkpoint() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("tiny-qwen3-vl");
    synthetic_qwen3_vl(&dir);
    let ckpt = Checkpoint::open(&dir).unwrap();
    let v = models::arch::vision::qwen3_vl::Qwen3Vision::read(&ckpt.config.path, ckpt.config.multimodal.as_ref().unwrap(), 64).unwrap();
    let model = vision::build_vision(&ckpt, &BuildOptions::default()).unwrap();
    assert_standard(&model);
    let outputs: Vec<&str> = model.graph.outputs.iter().map(|o| o.name.as_str()).collect();
    // The deepstack blocks ride beside the features (models::arch::vision::deepstack_count).
    assert_eq!(outputs, ["image_features"]);
    let weights = reference::Weights::load(&dir, "model.visual.");
    let (_t, mut s) = session_for(&model);
    let batches: &[&[[i64; 3]]] = &[&[[1, 8, 12]], &[[1, 4, 4], [1, 6, 10]], &[[2, 4, 6], [1, 2, 2]], &[[1, 14, 2]]];
    for (i, &grids) in batches.iter().enumerate() {
        let patches: i64 = grids.iter().map(|[t, h, w]| t * h * w).sum();
        let pixels = noise(&[patches as usize, v.patch_dim()], 50 + i as u64).into_dimensionality::<ndarray::Ix2>().unwrap();
        let (want, want_deep) = reference::qwen3_tower(&weights, &v, &pixels, grids);
        let feeds = [("pixel_values".to_string(), Feed::F32(pixels.into_dyn())), ("image_grid_thw".to_string(), grid(grids))];
        let out = run(&mut s, &feeds);
        let wide = out["image_features"].f32();
        assert_eq!(wide.shape(), [(patches / 4) as usize, 64 * 3]);
        let block = |k: usize| wide.slice(ndarray::s![.., k * 64..(k + 1) * 64]).to_owned().into_dyn();
        let diff = max_abs_diff(&block(0), &want.into_dyn(), None);
        let deep_diff = (0..2).map(|k| max_abs_diff(&block(k + 1), &want_deep[k].clone().into_dyn(), None)).fold(0f32, f32::max);
        eprintln!("qwen3_vl grids {grids:?}: image_features {diff:e}, deepstack {deep_diff:e}");
        assert_within(&format!("qwen3_vl grids {grids:?}"), &[("image_features".into(), diff), ("deepstack_features".into(), deep_diff)], 1e-4);
    }
}
