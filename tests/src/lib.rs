//! Shared helpers for the end-to-end tests: fixtures, the ONNX Runtime environment (loaded from
//! `ORT_DYLIB_PATH`, never skipped), feeding and reading tensors, and checking a decoder
//! package against the transformers reference outputs of a fixture.

pub mod checkpoints;
pub mod f16;

use ndarray::{ArrayD, IxDyn};
use ort::session::Session;
use ort::value::Tensor;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// How to get ONNX Runtime, printed whenever it is missing.
pub const HOW_TO_GET_ORT: &str = "ONNX Runtime 1.32 is needed for this test and was not found.\n\
    Run the tests with `scripts/test.sh` (it creates .venv with onnxruntime==1.32.0 and sets ORT_DYLIB_PATH),\n\
    or: pip install onnxruntime==1.32.0 and export ORT_DYLIB_PATH=<site-packages>/onnxruntime/capi/libonnxruntime.so.1.32.0";

/// Every shared decoder fixture (tests/fixtures/README.md says what each one exercises).
pub const DECODER_FIXTURES: [&str; 12] = [
    "tiny-llama",
    "tiny-qwen2",
    "tiny-qwen3",
    "tiny-phi3",
    "tiny-mistral",
    "tiny-llama3-rope",
    "tiny-qwen2-yarn",
    "tiny-phi3-longrope",
    "tiny-qwen2-tied-mqa",
    "tiny-mistral-sw",
    "tiny-llama-sharded",
    "tiny-gpt2",
];

/// The repository's copy of a shared fixture.
pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures").join(name)
}

/// Loads ONNX Runtime once per test process. Panics (never skips) with instructions when the
/// library is missing.
pub fn ort_environment() -> &'static ort::environment::Environment {
    static ENV: OnceLock<ort::environment::Environment> = OnceLock::new();
    ENV.get_or_init(|| {
        let path = std::env::var("ORT_DYLIB_PATH").unwrap_or_else(|_| panic!("ORT_DYLIB_PATH is not set.\n{HOW_TO_GET_ORT}"));
        if !Path::new(&path).is_file() {
            panic!("ORT_DYLIB_PATH={path} is not a file.\n{HOW_TO_GET_ORT}");
        }
        ort::init_from(&path)
            .unwrap_or_else(|e| panic!("cannot load {path}: {e}\n{HOW_TO_GET_ORT}"))
            .build()
            .unwrap_or_else(|e| panic!("cannot create the ONNX Runtime environment: {e}"))
    })
}

/// A CPU session on `model.onnx` (one intra-op thread: the machines have two cores and tests
/// run in parallel).
pub fn session(model: &Path) -> Session {
    let env = ort_environment();
    Session::builder(env)
        .and_then(|b| b.with_intra_threads(1).map_err(Into::into))
        .and_then(|mut b| b.commit_from_file(model))
        .unwrap_or_else(|e| panic!("ONNX Runtime cannot load {}: {e}", model.display()))
}

/// A tensor fed to or read from a session.
#[derive(Clone, Debug)]
pub enum Feed {
    F32(ArrayD<f32>),
    I64(ArrayD<i64>),
    I32(ArrayD<i32>),
    Bool(ArrayD<bool>),
}

impl Feed {
    pub fn f32(&self) -> &ArrayD<f32> {
        match self {
            Feed::F32(a) => a,
            other => panic!("expected an f32 tensor, got {other:?}"),
        }
    }
    pub fn i64(&self) -> &ArrayD<i64> {
        match self {
            Feed::I64(a) => a,
            other => panic!("expected an i64 tensor, got {other:?}"),
        }
    }
}

/// Runs a session; returns every output by name. f32, i64, i32 and bool outputs are read.
pub fn run(session: &mut Session, feeds: &[(String, Feed)]) -> BTreeMap<String, Feed> {
    let inputs: Vec<(String, ort::session::SessionInputValue<'static>)> = feeds
        .iter()
        .map(|(name, f)| {
            let value: ort::session::SessionInputValue = match f {
                Feed::F32(a) => Tensor::from_array(a.clone()).map(|t| t.into()),
                Feed::I64(a) => Tensor::from_array(a.clone()).map(|t| t.into()),
                Feed::I32(a) => Tensor::from_array(a.clone()).map(|t| t.into()),
                Feed::Bool(a) => Tensor::from_array(a.clone()).map(|t| t.into()),
            }
            .unwrap_or_else(|e| panic!("cannot make input `{name}`: {e}"));
            (name.clone(), value)
        })
        .collect();
    let names: Vec<String> = session.outputs().iter().map(|o| o.name().to_string()).collect();
    let outputs = session.run(inputs).unwrap_or_else(|e| panic!("ONNX Runtime run failed: {e}"));
    let mut out = BTreeMap::new();
    for name in names {
        let v = &outputs[name.as_str()];
        let feed = if let Ok(a) = v.try_extract_array::<f32>() {
            Feed::F32(a.to_owned())
        } else if let Ok(a) = v.try_extract_array::<i64>() {
            Feed::I64(a.to_owned())
        } else if let Ok(a) = v.try_extract_array::<i32>() {
            Feed::I32(a.to_owned())
        } else if let Ok(a) = v.try_extract_array::<bool>() {
            Feed::Bool(a.to_owned())
        } else {
            panic!("output `{name}` has a type the tests do not read");
        };
        out.insert(name, feed);
    }
    out
}

/// Saves an in-memory model into a fresh temporary folder and opens a session on it.
pub fn session_for(model: &ir::Model) -> (tempfile::TempDir, Session) {
    let dir = tempfile::tempdir().expect("temp dir");
    ir::save_model(model, dir.path(), "model.onnx").expect("save model");
    let s = session(&dir.path().join("model.onnx"));
    (dir, s)
}

/// The tensors of a fixture's `reference.safetensors`.
pub struct Reference(BTreeMap<String, Feed>);

impl Reference {
    pub fn load(fixture_dir: &Path) -> Reference {
        let path = fixture_dir.join("reference.safetensors");
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let st = safetensors::SafeTensors::deserialize(&bytes).expect("reference.safetensors parses");
        let mut map = BTreeMap::new();
        for (name, view) in st.tensors() {
            let shape = IxDyn(view.shape());
            let data = view.data();
            let feed = match view.dtype() {
                safetensors::Dtype::F32 => Feed::F32(
                    ArrayD::from_shape_vec(shape, data.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect())
                        .unwrap(),
                ),
                safetensors::Dtype::I64 => Feed::I64(
                    ArrayD::from_shape_vec(shape, data.chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().unwrap())).collect())
                        .unwrap(),
                ),
                other => panic!("reference tensor `{name}` has unexpected dtype {other:?}"),
            };
            map.insert(name, feed);
        }
        Reference(map)
    }

    pub fn get(&self, name: &str) -> &Feed {
        self.0.get(name).unwrap_or_else(|| panic!("reference has no tensor `{name}`"))
    }

    pub fn has(&self, name: &str) -> bool {
        self.0.contains_key(name)
    }
}

/// Largest absolute difference, over positions where `keep` (per [batch, seq]) is true.
pub fn max_abs_diff(a: &ArrayD<f32>, b: &ArrayD<f32>, keep: Option<&ArrayD<i64>>) -> f32 {
    assert_eq!(a.shape(), b.shape(), "shapes differ");
    let mut worst = 0f32;
    for (idx, (x, y)) in a.indexed_iter().zip(b.iter()).map(|((i, x), y)| (i, (x, y))) {
        if let Some(mask) = keep {
            if mask[[idx[0], idx[1]]] == 0 {
                continue;
            }
        }
        let d = (x - y).abs();
        if d.is_nan() {
            return f32::INFINITY;
        }
        worst = worst.max(d);
    }
    worst
}

/// The last `n` positions (axis 2) of a `[batch, heads, positions, head_dim]` cache. A
/// sliding-window layer's reference cache (transformers' sliding-window cache) keeps only the
/// last `window - 1` positions, while the generic graph keeps every position and masks the
/// rest: the positions both keep must agree.
pub fn trailing_positions(cache: &ArrayD<f32>, n: usize) -> ArrayD<f32> {
    let len = cache.shape()[2];
    assert!(n <= len, "reference cache has {n} positions, the model's only {len}");
    cache.slice_axis(ndarray::Axis(2), ndarray::Slice::from(len - n..)).to_owned()
}

/// Shape facts a decoder test needs, read from the model's graph inputs.
#[derive(Clone, Debug)]
pub struct DecoderShape {
    pub layers: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub has_position_ids: bool,
}

impl DecoderShape {
    pub fn of(model: &ir::Model) -> DecoderShape {
        let g = &model.graph;
        let past0 = g.inputs.iter().find(|v| v.name == "past_key_values.0.key").expect("decoder has past inputs");
        let dims = past0.shape.as_ref().expect("past shape");
        let fixed = |d: &ir::Dim| match d {
            ir::Dim::Fixed(v) => *v as usize,
            other => panic!("expected a fixed dim, got {other}"),
        };
        DecoderShape {
            layers: g.inputs.iter().filter(|v| v.name.starts_with("past_key_values.") && v.name.ends_with(".key")).count(),
            kv_heads: fixed(&dims[1]),
            head_dim: fixed(&dims[3]),
            has_position_ids: g.inputs.iter().any(|v| v.name == "position_ids"),
        }
    }
}

/// One decoder run: inputs plus the past (empty when `None`).
pub fn decoder_feeds(
    shape: &DecoderShape,
    input_ids: &ArrayD<i64>,
    attention_mask: &ArrayD<i64>,
    position_ids: &ArrayD<i64>,
    past: Option<&BTreeMap<String, Feed>>,
) -> Vec<(String, Feed)> {
    let batch = input_ids.shape()[0];
    let mut feeds = vec![
        ("input_ids".to_string(), Feed::I64(input_ids.clone())),
        ("attention_mask".to_string(), Feed::I64(attention_mask.clone())),
    ];
    if shape.has_position_ids {
        feeds.push(("position_ids".to_string(), Feed::I64(position_ids.clone())));
    }
    for i in 0..shape.layers {
        for kv in ["key", "value"] {
            let value = match past {
                Some(p) => p[&format!("present.{i}.{kv}")].clone(),
                None => Feed::F32(ArrayD::zeros(IxDyn(&[batch, shape.kv_heads, 0, shape.head_dim]))),
            };
            feeds.push((format!("past_key_values.{i}.{kv}"), value));
        }
    }
    feeds
}

fn arange(n: usize, start: i64) -> ArrayD<i64> {
    ArrayD::from_shape_vec(IxDyn(&[1, n]), (start..start + n as i64).collect()).unwrap()
}

/// Which reference cases to compare.
#[derive(Clone, Copy, Debug)]
pub struct Cases {
    pub left_padding: bool,
    pub right_padding: bool,
}

impl Cases {
    pub const ALL: Cases = Cases { left_padding: true, right_padding: true };
}

/// Runs every reference case of a decoder fixture and returns `(case, max abs diff)` pairs:
/// prefill logits, every present tensor, the decode step, the short prompt and padded batches.
pub fn compare_decoder(session: &mut Session, shape: &DecoderShape, reference: &Reference, cases: Cases) -> Vec<(String, f32)> {
    let mut diffs = Vec::new();
    let ids = reference.get("input_ids").i64();
    let mask = reference.get("attention_mask").i64();
    let pos = reference.get("position_ids").i64();
    let prefill = run(session, &decoder_feeds(shape, ids, mask, pos, None));
    diffs.push(("logits".into(), max_abs_diff(prefill["logits"].f32(), reference.get("logits").f32(), None)));
    for i in 0..shape.layers {
        for kv in ["key", "value"] {
            let name = format!("present.{i}.{kv}");
            let expected = reference.get(&name).f32();
            let got = trailing_positions(prefill[&name].f32(), expected.shape()[2]);
            diffs.push((name.clone(), max_abs_diff(&got, expected, None)));
        }
    }
    let seq = ids.shape()[1];
    let decode_ids = reference.get("decode_input_ids").i64();
    let decode_mask = ArrayD::from_elem(IxDyn(&[1, seq + 1]), 1i64);
    let decode = run(session, &decoder_feeds(shape, decode_ids, &decode_mask, &arange(1, seq as i64), Some(&prefill)));
    diffs.push(("decode_logits".into(), max_abs_diff(decode["logits"].f32(), reference.get("decode_logits").f32(), None)));

    let short = reference.get("short_input_ids").i64();
    let n = short.shape()[1];
    let out = run(session, &decoder_feeds(shape, short, &ArrayD::from_elem(IxDyn(&[1, n]), 1), &arange(n, 0), None));
    diffs.push(("short_logits".into(), max_abs_diff(out["logits"].f32(), reference.get("short_logits").f32(), None)));

    for (prefix, on) in [("batch", cases.left_padding), ("rbatch", cases.right_padding)] {
        if !on {
            continue;
        }
        let m = reference.get(&format!("{prefix}_attention_mask")).i64();
        let out = run(
            session,
            &decoder_feeds(
                shape,
                reference.get(&format!("{prefix}_input_ids")).i64(),
                m,
                reference.get(&format!("{prefix}_position_ids")).i64(),
                None,
            ),
        );
        let d = max_abs_diff(out["logits"].f32(), reference.get(&format!("{prefix}_logits")).f32(), Some(m));
        diffs.push((format!("{prefix}_logits"), d));
    }
    diffs
}

/// Asserts every difference is within `atol`, listing all of them on failure.
pub fn assert_within(what: &str, diffs: &[(String, f32)], atol: f32) {
    // A NaN difference counts as outside.
    let bad: Vec<_> = diffs.iter().filter(|(_, d)| d.is_nan() || *d > atol).collect();
    assert!(bad.is_empty(), "{what}: outside atol {atol}: {bad:?}\nall: {diffs:?}");
}
