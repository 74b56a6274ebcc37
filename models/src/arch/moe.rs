//! Reads a mixture-of-experts table ([`MoeNames`]) against the config and the checkpoint, and
//! builds the block with [`crate::components::moe`]. Every expert weight is taken from the
//! checkpoint by name, so an expert the config does not count is left unaccounted and fails
//! the build naming it (`account_for_every_tensor`), and a missing one fails as "not found".

use super::family::{ExpertActivation, ExpertNames, MlpNames, MoeNames, Routing, SharedCombine, SharedWidth, SparseLayers, TopKNorm};
use crate::components::linear::{linear, LinearWeights, WeightLayout};
use crate::components::mlp::{gated, GatedScopes};
use crate::components::moe::{moe_block, ExpertAct, ExpertStacks, GroupedRouting as GroupedRoutingBlock, MoeBlock};
use crate::{Activation, Checkpoint, DecoderConfig, Error, GraphBuilder, Result};
use ir::Recipe;

/// A mixture of experts' sizes and routing, read from the config keys the table names.
#[derive(Clone, Debug, PartialEq)]
pub struct MoeSettings {
    pub num_experts: usize,
    pub top_k: usize,
    pub normalize: bool,
    pub intermediate: usize,
    /// The shared expert's intermediate size (Qwen2-MoE), when the table has one.
    pub shared_intermediate: Option<usize>,
    /// Whether the routed and shared outputs are averaged rather than added (Cohere2-MoE).
    pub shared_average: bool,
    /// Sparse layers: `(i + 1) % step == 0` and not in `dense_layers`.
    pub step: usize,
    pub dense_layers: Vec<usize>,
    /// Sparsemixer routing with this jitter (PhiMoE); `None`: softmax top-k.
    pub sparse_mixer: Option<f64>,
    /// DeepSeek's grouped routing.
    pub grouped: Option<GroupedSettings>,
    /// gpt-oss's clamped SwiGLU `(alpha, limit)`; `None`: the family's gated activation.
    pub clamped_swiglu: Option<(f64, f64)>,
}

impl MoeSettings {
    pub fn read(t: &MoeNames, c: &DecoderConfig) -> Result<Self> {
        let k = &t.keys;
        let first = |keys: &[&str]| -> Result<Option<usize>> {
            for key in keys {
                if let Some(v) = c.count(key)? {
                    return Ok(Some(v));
                }
            }
            Ok(None)
        };
        let num_experts = first(k.experts)?.unwrap_or(k.experts_default);
        let top_k = c.count("num_experts_per_tok")?.unwrap_or(k.top_k_default);
        if top_k > num_experts {
            return Err(err(c, format!("`num_experts_per_tok` ({top_k}) is larger than the expert count ({num_experts}, from `{}`)", k.experts.join("` / `"))));
        }
        let normalize = match k.normalize {
            TopKNorm::Always => true,
            TopKNorm::Key(key, default) => c.flag(key, default),
            TopKNorm::Never => false,
        };
        let intermediate = first(k.intermediate)?.or(k.intermediate_default).unwrap_or(c.intermediate_size);
        let shared_intermediate = match &t.shared {
            None => None,
            // 0 is no shared expert (GraniteMoeShared's default width).
            Some(sh) => Some(match sh.width {
                SharedWidth::Key(key, default) => c.count_or_zero(key)?.unwrap_or(default),
                SharedWidth::Experts(key, default) => intermediate * c.count_or_zero(key)?.unwrap_or(default),
            }),
        };
        // Read only where there is a shared expert, as transformers reads it.
        let shared_average = match t.shared.as_ref().filter(|_| shared_intermediate.unwrap_or(0) > 0).map(|sh| sh.combine) {
            None | Some(SharedCombine::Sum) => false,
            Some(SharedCombine::Key { key, average_default }) => match c.raw.get(key) {
                None | Some(serde_json::Value::Null) => average_default,
                Some(v) => match v.as_str() {
                    Some("sum") => false,
                    Some("average") => true,
                    _ => return Err(err(c, format!("key `{key}` is {v}; supported: \"sum\", \"average\""))),
                },
            },
        };
        let leading = |n: usize| (0..n.min(c.num_hidden_layers)).collect::<Vec<_>>();
        let (step, dense_layers) = match k.sparse {
            SparseLayers::All => (1, vec![]),
            SparseLayers::Step { step_key, dense_key } => (c.count(step_key)?.unwrap_or(1), layer_list(c, dense_key)?),
            SparseLayers::FirstDense { key, default } => (1, leading(c.count_or_zero(key)?.unwrap_or(default))),
            SparseLayers::Interval { start, end, interval } => {
                let start_layer = c.count_or_zero(start.0)?.unwrap_or(start.1);
                let last = match c.raw.get(end) {
                    None | Some(serde_json::Value::Null) => c.num_hidden_layers - 1,
                    Some(v) if v.as_i64() == Some(-1) => c.num_hidden_layers - 1,
                    Some(_) => c.count_or_zero(end)?.unwrap_or(0),
                };
                let step = c.count(interval.0)?.unwrap_or(interval.1);
                let dense = (0..c.num_hidden_layers).filter(|&i| !((i + 1) % step == 0 && i >= start_layer && i <= last)).collect();
                (1, dense)
            }
            SparseLayers::Types { key, default_dense: (count_key, default) } => match c.raw.get(key) {
                None | Some(serde_json::Value::Null) => {
                    let first = match count_key {
                        Some(k) => c.count_or_zero(k)?.unwrap_or(default),
                        None => default,
                    };
                    (1, leading(first))
                }
                Some(serde_json::Value::Array(items)) if items.len() == c.num_hidden_layers => {
                    let mut dense = Vec::new();
                    for (i, v) in items.iter().enumerate() {
                        match v.as_str() {
                            Some("dense") => dense.push(i),
                            Some("sparse") => {}
                            _ => return Err(err(c, format!("key `{key}` holds {v} at layer {i}; supported: \"dense\", \"sparse\""))),
                        }
                    }
                    (1, dense)
                }
                Some(v) => return Err(err(c, format!("key `{key}` must list \"dense\" or \"sparse\" for each of the {} layers, found {v}", c.num_hidden_layers))),
            },
        };
        let grouped = match k.routing {
            Routing::Grouped(r) => {
                let grouped_method = match r.method {
                    None => true,
                    Some((key, default, grouped, plain)) => {
                        let v = match c.raw.get(key) {
                            None | Some(serde_json::Value::Null) => default.to_string(),
                            Some(serde_json::Value::String(v)) => v.clone(),
                            Some(v) => return Err(err(c, format!("key `{key}` must be a string, found {v}"))),
                        };
                        if v != grouped && v != plain {
                            return Err(err(c, format!("key `{key}` is `{v}`; supported: `{plain}`, `{grouped}`")));
                        }
                        v == grouped
                    }
                };
                let (g, tg) = match (grouped_method, r.groups, r.method) {
                    (false, _, _) | (_, None, _) => (1, 1),
                    // A method key that asks for groups needs their counts (transformers
                    // fails without them).
                    (true, Some(keys), Some((key, _, value, _))) => {
                        let need = |k: &str| -> Result<usize> { c.count(k)?.ok_or_else(|| err(c, format!("`{key}` is `{value}`, which needs `{k}`; it is missing"))) };
                        (need(keys.count.0)?, need(keys.open.0)?)
                    }
                    (true, Some(keys), None) => (c.count(keys.count.0)?.unwrap_or(keys.count.1), c.count(keys.open.0)?.unwrap_or(keys.open.1)),
                };
                // Only a family with group keys can be given other counts than one.
                let (groups_key, open_key) = r.groups.map_or(("n_group", "topk_group"), |k| (k.count.0, k.open.0));
                if g == 0 || !num_experts.is_multiple_of(g) {
                    return Err(err(c, format!("`{groups_key}` ({g}) must divide the expert count ({num_experts})")));
                }
                if tg == 0 || tg > g {
                    return Err(err(c, format!("`{open_key}` ({tg}) must be between 1 and `{groups_key}` ({g})")));
                }
                // Each group is scored by its best experts (V3: transformers' `topk(2)`).
                if g > 1 && num_experts / g < r.group_best {
                    return Err(err(c, format!("`{groups_key}` ({g}) leaves {} expert(s) per group; a group is scored by its best {}", num_experts / g, r.group_best)));
                }
                if top_k > tg * (num_experts / g) {
                    return Err(err(c, format!("`num_experts_per_tok` ({top_k}) is more than the {tg} open groups hold ({} experts)", tg * (num_experts / g))));
                }
                let scale = match r.scale {
                    None => 1.0,
                    Some(key) => c.number(key.name, key.default)?.unwrap_or(1.0),
                };
                Some(GroupedSettings { sigmoid: r.sigmoid, group_best: r.group_best, groups: g, topk_groups: tg, scale })
            }
            _ => None,
        };
        let sparse_mixer = match k.routing {
            Routing::SoftmaxTopK | Routing::Grouped(_) => None,
            Routing::SparseMixer { jitter, default } => {
                if top_k != 2 {
                    return Err(err(c, format!("`num_experts_per_tok` is {top_k}; sparsemixer routing picks exactly 2 experts")));
                }
                let v = match c.raw.get(jitter) {
                    None | Some(serde_json::Value::Null) => default,
                    Some(v) => v.as_f64().filter(|x| x.is_finite() && *x >= 0.0).ok_or_else(|| err(c, format!("key `{jitter}` must be a number of at least 0, found {v}")))?,
                };
                Some(v)
            }
        };
        let clamped_swiglu = match k.activation {
            ExpertActivation::Gated => None,
            ExpertActivation::ClampedSwiglu { alpha, limit } => {
                // Both are required numbers: transformers clamps with them unconditionally.
                let read = |key: super::Key| -> Result<f64> {
                    c.number(key.name, key.default)?.ok_or_else(|| err(c, format!("key `{}` is null; the clamped SwiGLU needs a positive number", key.name)))
                };
                Some((read(alpha)?, read(limit)?))
            }
        };
        Ok(MoeSettings { num_experts, top_k, normalize, intermediate, shared_intermediate, shared_average, step, dense_layers, sparse_mixer, grouped, clamped_swiglu })
    }

    /// Whether layer `i` has the mixture of experts.
    pub fn sparse(&self, i: usize) -> bool {
        (i + 1).is_multiple_of(self.step) && !self.dense_layers.contains(&i)
    }
}

/// DeepSeek's grouped routing as the config sets it (one group when the method key says the
/// plain top k).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GroupedSettings {
    pub sigmoid: bool,
    pub group_best: usize,
    pub groups: usize,
    pub topk_groups: usize,
    pub scale: f64,
}

/// A list of layer indices (`mlp_only_layers`); absent or `null` is empty.
fn layer_list(c: &DecoderConfig, key: &str) -> Result<Vec<usize>> {
    match c.raw.get(key) {
        None | Some(serde_json::Value::Null) => Ok(vec![]),
        Some(serde_json::Value::Array(items)) => items
            .iter()
            .map(|v| v.as_u64().map(|x| x as usize).ok_or_else(|| err(c, format!("key `{key}` must list layer indices, found {v}"))))
            .collect(),
        Some(v) => Err(err(c, format!("key `{key}` must be a list of layer indices, found {v}"))),
    }
}

fn err(c: &DecoderConfig, reason: String) -> Error {
    Error::Config { path: c.path.clone(), reason }
}

/// The MoE block of `layer` (the layer's scope) on `x`: routed experts, plus the gated shared
/// expert when the table has one.
#[allow(clippy::too_many_arguments)]
pub(super) fn block(
    b: &mut GraphBuilder,
    ckpt: &Checkpoint,
    t: &MoeNames,
    m: &MoeSettings,
    layer: &str,
    x: &str,
    input_ids: &str,
    hidden: usize,
    layout: WeightLayout,
    act: Activation,
    mlp_bias: bool,
) -> Result<String> {
    if layout != WeightLayout::Linear {
        return Err(err(&ckpt.config, "a mixture-of-experts table must store `[out, in]` (Linear) weights".into()));
    }
    let s = |part: &str| format!("{layer}.{part}");
    let router = s(t.router);
    // DeepSeek's routers keep their weight in f32 (transformers' `_keep_in_fp32_modules_strict`).
    let router_dtype = match t.keys.routing {
        Routing::Grouped(r) if r.f32_router => ir::DType::F32,
        _ => b.float,
    };
    let router_weight = ckpt.tensor(&format!("{router}.weight"), &[m.num_experts, hidden])?.transpose(vec![1, 0]).cast(router_dtype);
    let router_bias = match t.router_bias {
        true => Some(ckpt.tensor(&format!("{router}.bias"), &[m.num_experts])?.cast(b.float)),
        false => None,
    };
    // The correction bias joins f32 scores: an f32 initializer whatever the build dtype, as
    // transformers keeps the buffer in f32.
    let grouped = match (t.keys.routing, m.grouped) {
        (Routing::Grouped(r), Some(g)) => Some(GroupedRoutingBlock {
            sigmoid: g.sigmoid,
            f32_router: r.f32_router,
            choose_on_logits: r.choose_on_logits,
            bias: match r.bias {
                None => None,
                // `[experts]` (DeepSeek-V3), or `[1, experts]` (ERNIE 4.5's one group of them).
                // Absent where the family reads a missing correction as zero.
                Some(bias) if r.bias_optional && !ckpt.has(&s(bias)) => None,
                Some(bias) => {
                    let name = s(bias);
                    let recipe = match ckpt.tensor(&name, &[m.num_experts]) {
                        Err(crate::Error::TensorShape { .. }) => ckpt.tensor(&name, &[1, m.num_experts])?.reshape(vec![m.num_experts]),
                        other => other?,
                    };
                    Some((recipe.cast(ir::DType::F32), name))
                }
            },
            group_best: g.group_best,
            groups: g.groups,
            topk_groups: g.topk_groups,
            scale: g.scale as f32,
        }),
        _ => None,
    };
    let (experts, stacks) = match &t.experts {
        ExpertNames::PerExpert { expert, gate, up, down } => {
            let expert_scope = s(expert);
            let stacks = ExpertStacks::Separate {
                gate: stack(ckpt, b, &expert_scope, gate, m.num_experts, [m.intermediate, hidden])?,
                up: stack(ckpt, b, &expert_scope, up, m.num_experts, [m.intermediate, hidden])?,
                down: stack(ckpt, b, &expert_scope, down, m.num_experts, [hidden, m.intermediate])?,
            };
            (expert_scope.trim_end_matches(".{e}").to_string(), stacks)
        }
        ExpertNames::Interleaved { experts, gate_up, down } => {
            let scope = s(experts);
            let (e, inter) = (m.num_experts, m.intermediate);
            let read = |name: &str, shape: &[usize]| ckpt.tensor(&format!("{scope}.{name}"), shape).map(|r| r.cast(b.float));
            // Stored `[in, out]` per expert: transposed to the `[out, in]` stacks the block takes.
            let stacks = ExpertStacks::Interleaved {
                gate_up: read(gate_up, &[e, hidden, 2 * inter])?.transpose(vec![0, 2, 1]),
                gate_up_bias: read(&format!("{gate_up}_bias"), &[e, 2 * inter])?,
                down: read(down, &[e, inter, hidden])?.transpose(vec![0, 2, 1]),
                down_bias: read(&format!("{down}_bias"), &[e, hidden])?,
                inter,
            };
            (scope, stacks)
        }
        ExpertNames::Stacked { experts, gate_up, down } => {
            let (e, inter) = (m.num_experts, m.intermediate);
            let gate_up = ckpt.tensor(&s(gate_up), &[e, 2 * inter, hidden])?.cast(b.float);
            // Already `[out, in]` per expert: the gate and up halves are row slices, the
            // separate stacks every other mixture has (and the MoE rules fuse).
            let stacks = ExpertStacks::Separate {
                gate: gate_up.clone().slice(1, 0, inter),
                up: gate_up.slice(1, inter, 2 * inter),
                down: ckpt.tensor(&s(down), &[e, hidden, inter])?.cast(b.float),
            };
            (s(experts), stacks)
        }
        ExpertNames::Rows { experts, gate, up, down } => {
            let (e, inter) = (m.num_experts, m.intermediate);
            let read = |name: &str| ckpt.tensor(&s(name), &[e * inter, hidden]).map(|r| r.reshape(vec![e, inter, hidden]).cast(b.float));
            let stacks = ExpertStacks::Separate { gate: read(gate)?, up: read(up)?, down: read(down)?.transpose(vec![0, 2, 1]) };
            (s(experts), stacks)
        }
    };
    let scope = router.rsplit_once('.').map_or(router.clone(), |(p, _)| p.to_string());
    let block = MoeBlock {
        scope: &scope,
        router: &router,
        router_weight,
        router_bias,
        experts: &experts,
        stacks,
        hidden,
        token_dims: b.graph.inputs.iter().find(|v| v.name == input_ids).and_then(|v| v.shape.clone()).unwrap_or_default(),
        num_experts: m.num_experts,
        top_k: m.top_k,
        normalize: m.normalize,
        sparse_mixer: m.sparse_mixer.map(|j| j as f32),
        grouped,
        act: match m.clamped_swiglu {
            None => ExpertAct::Gated(act),
            Some((alpha, limit)) => ExpertAct::ClampedSwiglu { alpha: alpha as f32, limit: limit as f32 },
        },
    };
    let routed = moe_block(b, block, x);
    let Some(sh) = &t.shared else { return Ok(routed) };
    let inter = m.shared_intermediate.unwrap_or_default();
    // A width of 0 is no shared expert (GraniteMoeShared's default `shared_intermediate_size`:
    // `shared_mlp` is None there).
    if inter == 0 {
        return Ok(routed);
    }
    let read = |b: &GraphBuilder, part: &str, inp: usize, out: usize, bias: bool| LinearWeights::torch(ckpt, b, &s(part), inp, out, bias);
    // The shared expert is the family's MLP: its biases follow `mlp_bias` (DeepSeek-V2's key;
    // the other families have none).
    let (weights, gate_scope, up_scope, down) = match *sh.mlp {
        MlpNames::Gated { gate, up, down } => ([read(b, gate, hidden, inter, mlp_bias)?, read(b, up, hidden, inter, mlp_bias)?, read(b, down, inter, hidden, mlp_bias)?], s(gate), s(up), down),
        MlpNames::GatedFused { gate_up, down } => {
            let parts = LinearWeights::read_fused(ckpt, b, &s(gate_up), hidden, &[inter, inter], mlp_bias, WeightLayout::Linear)?;
            let [g, u]: [LinearWeights; 2] = parts.try_into().map_err(|_| err(&ckpt.config, "internal: the fused shared gate/up split into the wrong number of parts".into()))?;
            // An adapter on the fused projection is a slot on each part (as the dense fused MLP's).
            let [gs, us] = super::decoder::fused_scopes(b, &s(gate_up), crate::lora::GATE_UP_PARTS);
            ([g, u, read(b, down, inter, hidden, mlp_bias)?], gs, us, down)
        }
        _ => return Err(err(&ckpt.config, format!("the `{}` table's shared expert is neither gated nor gate/up-fused", ckpt.config.model_type))),
    };
    let shared_scope = s(down).rsplit_once('.').map_or(s("shared_expert"), |(p, _)| p.to_string());
    let scopes = GatedScopes { gate: &gate_scope, up: &up_scope, down: &s(down) };
    let shared = gated(b, &shared_scope, scopes, x, weights, act);
    let shared = match sh.gate {
        None => shared,
        Some(gate) => {
            let gate_scope = s(gate);
            let gate = linear(b, &gate_scope, x, read(b, gate, hidden, 1, false)?);
            let gate = b.op(&format!("{gate_scope}/Sigmoid"), "Sigmoid", &[&gate], vec![]);
            b.op(&format!("{shared_scope}/scaled"), "Mul", &[&gate, &shared], vec![])
        }
    };
    let sum = b.op(&format!("{scope}/Add"), "Add", &[&routed, &shared], vec![]);
    if !m.shared_average {
        return Ok(sum);
    }
    // Cohere2-MoE's `average`: `(routed + shared) / 2`, in transformers' order.
    let two = b.initializer("moe.shared_average.divisor", Recipe::from_f32("2", vec![], &[2.0]).cast(b.float));
    Ok(b.op(&format!("{scope}/average"), "Div", &[&sum, &two], vec![]))
}

/// `E` experts' `{expert}.{part}.weight` (`[out, in]` each) stacked into `[E, out, in]` in the
/// build dtype: a concat recipe over the checkpoint's tensors, streamed at write time.
fn stack(ckpt: &Checkpoint, b: &GraphBuilder, expert: &str, part: &str, n: usize, [out, inp]: [usize; 2]) -> Result<Recipe> {
    let parts = (0..n)
        .map(|e| {
            let name = format!("{}.{part}.weight", expert.replace("{e}", &e.to_string()));
            Ok(ckpt.tensor(&name, &[out, inp])?.cast(b.float).reshape(vec![1, out, inp]))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Recipe::concat(parts, 0)?)
}

#[cfg(test)]
mod tests {
    use super::MoeSettings;
    use crate::arch::{MlpNames, MoeNames, DEEPSEEK_V2, DEEPSEEK_V3, ERNIE4_5_MOE, EXAONE_MOE, GPT_OSS, HUNYUAN_MOE, MIXTRAL, PHIMOE, QWEN2_MOE, QWEN3_MOE};
    use crate::DecoderConfig;
    use std::path::Path;

    fn settings(table: &crate::arch::DecoderFamily, model_type: &str, extra: &str) -> crate::Result<MoeSettings> {
        let text = format!(
            r#"{{"model_type":"{model_type}","hidden_size":64,"num_attention_heads":4,"num_hidden_layers":6,"intermediate_size":128,"vocab_size":512{extra}}}"#
        );
        let MlpNames::Experts(moe) = &table.names.mlp else { panic!("{model_type}: not a MoE table") };
        let moe: &MoeNames = moe;
        MoeSettings::read(moe, &DecoderConfig::parse(Path::new("config.json"), &text)?)
    }

    #[test]
    fn sizes_and_routing_come_from_the_keys_with_the_family_defaults() {
        let m = settings(&MIXTRAL, "mixtral", "").unwrap();
        assert_eq!((m.num_experts, m.top_k, m.normalize, m.intermediate), (8, 2, true, 128));
        assert!((0..6).all(|i| m.sparse(i)));
        let m = settings(&MIXTRAL, "mixtral", r#","num_local_experts":16,"num_experts_per_tok":3"#).unwrap();
        assert_eq!((m.num_experts, m.top_k), (16, 3));
        let m = settings(&QWEN3_MOE, "qwen3_moe", "").unwrap();
        assert_eq!((m.num_experts, m.top_k, m.normalize, m.intermediate), (128, 8, false, 768));
        let m = settings(&QWEN3_MOE, "qwen3_moe", r#","num_experts":6,"num_experts_per_tok":2,"norm_topk_prob":true,"moe_intermediate_size":32"#).unwrap();
        assert_eq!((m.num_experts, m.top_k, m.normalize, m.intermediate), (6, 2, true, 32));
        let m = settings(&QWEN2_MOE, "qwen2_moe", "").unwrap();
        assert_eq!(m.shared_intermediate, Some(5632));
        let e = settings(&QWEN2_MOE, "qwen2_moe", r#","shared_expert_intermediate_size":-1"#).unwrap_err().to_string();
        assert!(e.contains("`shared_expert_intermediate_size`"), "{e}");
        let m = settings(&QWEN2_MOE, "qwen2_moe", r#","shared_expert_intermediate_size":96"#).unwrap();
        assert_eq!((m.num_experts, m.top_k, m.normalize, m.intermediate, m.shared_intermediate), (60, 4, false, 1408, Some(96)));
    }

    #[test]
    fn phimoe_routes_by_sparsemixer_with_its_jitter_key() {
        let m = settings(&PHIMOE, "phimoe", "").unwrap();
        assert_eq!((m.num_experts, m.top_k, m.sparse_mixer), (16, 2, Some(0.01)));
        let m = settings(&PHIMOE, "phimoe", r#","num_local_experts":4,"router_jitter_noise":0.1"#).unwrap();
        assert_eq!((m.num_experts, m.sparse_mixer), (4, Some(0.1)));
        assert_eq!(settings(&PHIMOE, "phimoe", r#","router_jitter_noise":0"#).unwrap().sparse_mixer, Some(0.0));
        let e = settings(&PHIMOE, "phimoe", r#","num_experts_per_tok":3"#).unwrap_err().to_string();
        assert!(e.contains("`num_experts_per_tok`") && e.contains("exactly 2"), "{e}");
        let e = settings(&PHIMOE, "phimoe", r#","router_jitter_noise":-1"#).unwrap_err().to_string();
        assert!(e.contains("`router_jitter_noise`"), "{e}");
        assert_eq!(settings(&MIXTRAL, "mixtral", r#","router_jitter_noise":0.1"#).unwrap().sparse_mixer, None);
    }

    #[test]
    fn gpt_oss_reads_its_swiglu_keys_with_transformers_defaults() {
        let m = settings(&GPT_OSS, "gpt_oss", "").unwrap();
        assert_eq!((m.num_experts, m.top_k, m.normalize, m.intermediate, m.clamped_swiglu), (128, 4, true, 128, Some((1.702, 7.0))));
        let m = settings(&GPT_OSS, "gpt_oss", r#","num_local_experts":32,"num_experts_per_tok":2,"swiglu_alpha":1.5,"swiglu_limit":3.0"#).unwrap();
        assert_eq!((m.num_experts, m.top_k, m.clamped_swiglu), (32, 2, Some((1.5, 3.0))));
        let e = settings(&GPT_OSS, "gpt_oss", r#","swiglu_limit":null"#).unwrap_err().to_string();
        assert!(e.contains("`swiglu_limit`"), "{e}");
        let e = settings(&GPT_OSS, "gpt_oss", r#","swiglu_alpha":"fast""#).unwrap_err().to_string();
        assert!(e.contains("`swiglu_alpha`"), "{e}");
        let e = settings(&GPT_OSS, "gpt_oss", r#","swiglu_limit":-1"#).unwrap_err().to_string();
        assert!(e.contains("`swiglu_limit`"), "{e}");
        // Families without the clamped SwiGLU ignore the keys.
        assert_eq!(settings(&MIXTRAL, "mixtral", r#","swiglu_limit":3.0"#).unwrap().clamped_swiglu, None);
    }

    #[test]
    fn deepseek_v3_reads_its_groups_shared_width_and_dense_layers() {
        let m = settings(&DEEPSEEK_V3, "deepseek_v3", "").unwrap();
        assert_eq!((m.num_experts, m.top_k, m.normalize, m.intermediate, m.shared_intermediate), (256, 8, true, 2048, Some(2048)));
        let g = m.grouped.unwrap();
        assert_eq!((g.sigmoid, g.group_best, g.groups, g.topk_groups, g.scale), (true, 2, 8, 4, 2.5));
        assert_eq!((0..6).map(|i| m.sparse(i)).collect::<Vec<_>>(), [false, false, false, true, true, true]);
        let m = settings(
            &DEEPSEEK_V3,
            "deepseek_v3",
            r#","n_routed_experts":64,"num_experts_per_tok":6,"n_group":1,"topk_group":1,"n_shared_experts":2,"moe_intermediate_size":1408,"first_k_dense_replace":0,"norm_topk_prob":false,"routed_scaling_factor":1.0"#,
        )
        .unwrap();
        let g = m.grouped.unwrap();
        assert_eq!((m.num_experts, m.top_k, m.normalize, m.shared_intermediate, g.groups, g.topk_groups, g.scale), (64, 6, false, Some(2816), 1, 1, 1.0));
        assert!((0..6).all(|i| m.sparse(i)));
        for (extra, key) in [
            (r#","n_group":3"#, "`n_group`"),
            (r#","topk_group":9"#, "`topk_group`"),
            (r#","n_routed_experts":8,"n_group":8,"topk_group":2,"num_experts_per_tok":1"#, "its best 2"),
            (r#","n_routed_experts":8,"n_group":4,"topk_group":1,"num_experts_per_tok":3"#, "open groups"),
            (r#","first_k_dense_replace":-1"#, "`first_k_dense_replace`"),
        ] {
            let e = settings(&DEEPSEEK_V3, "deepseek_v3", extra).unwrap_err().to_string();
            assert!(e.contains(key), "{extra}: {e}");
        }
    }

    #[test]
    fn deepseek_v2_groups_only_under_group_limited_greedy() {
        let m = settings(&DEEPSEEK_V2, "deepseek_v2", r#","n_group":8,"topk_group":3"#).unwrap();
        let g = m.grouped.unwrap();
        assert_eq!((m.num_experts, m.top_k, m.normalize, m.shared_intermediate), (64, 6, false, Some(2814)));
        assert!((0..6).all(|i| m.sparse(i)), "first_k_dense_replace 0: every layer sparse");
        assert_eq!((g.sigmoid, g.group_best, g.groups, g.topk_groups, g.scale), (false, 1, 1, 1, 1.0));
        let m = settings(&DEEPSEEK_V2, "deepseek_v2", r#","topk_method":"group_limited_greedy","n_group":8,"topk_group":3,"norm_topk_prob":true,"routed_scaling_factor":16.0"#).unwrap();
        let g = m.grouped.unwrap();
        assert_eq!((m.normalize, g.groups, g.topk_groups, g.scale), (false, 8, 3, 16.0));
        let e = settings(&DEEPSEEK_V2, "deepseek_v2", r#","topk_method":"group_limited_greedy","n_group":8"#).unwrap_err().to_string();
        assert!(e.contains("`topk_group`") && e.contains("missing"), "{e}");
        let e = settings(&DEEPSEEK_V2, "deepseek_v2", r#","topk_method":"noaux_tc""#).unwrap_err().to_string();
        assert!(e.contains("`topk_method`") && e.contains("group_limited_greedy"), "{e}");
    }

    #[test]
    fn ernie_layers_are_sparse_by_interval_between_start_and_end() {
        let m = settings(&ERNIE4_5_MOE, "ernie4_5_moe", "").unwrap();
        assert_eq!((m.num_experts, m.top_k, m.normalize, m.intermediate, m.shared_intermediate), (64, 6, true, 1536, Some(3072)));
        assert_eq!((0..6).map(|i| m.sparse(i)).collect::<Vec<_>>(), [false, true, true, true, true, true]);
        let m = settings(&ERNIE4_5_MOE, "ernie4_5_moe", r#","moe_k":2,"moe_layer_start_index":0,"moe_layer_end_index":4,"moe_layer_interval":2"#).unwrap();
        assert_eq!(m.top_k, 2);
        assert_eq!((0..6).map(|i| m.sparse(i)).collect::<Vec<_>>(), [false, true, false, true, false, false]);
        let g = m.grouped.unwrap();
        assert_eq!((g.sigmoid, g.groups, g.topk_groups, g.scale), (false, 1, 1, 1.0));
    }

    /// HunYuan MoE's per-layer lists of one value read as that value; a list that differs by
    /// layer is refused, naming the key. EXAONE MoE without `mlp_layer_types` counts its dense
    /// layers from `first_k_dense_replace`.
    #[test]
    fn per_layer_lists_of_one_value_and_dense_counts_by_key() {
        let m = settings(&HUNYUAN_MOE, "hunyuan_v1_moe", r#","num_experts":[8,8,8,8,8,8],"moe_topk":[2,2,2,2,2,2]"#).unwrap();
        assert_eq!((m.num_experts, m.top_k, m.normalize, m.intermediate, m.shared_intermediate), (8, 2, true, 128, Some(128)));
        let e = settings(&HUNYUAN_MOE, "hunyuan_v1_moe", r#","num_experts":8,"moe_topk":[2,2,2,4,2,2]"#).unwrap_err().to_string();
        assert!(e.contains("`moe_topk`") && e.contains("[2,2,2,4,2,2]") && e.contains("one value for every layer"), "{e}");
        let m = settings(&EXAONE_MOE, "exaone_moe", r#","first_k_dense_replace":2"#).unwrap();
        assert_eq!((0..6).map(|i| m.sparse(i)).collect::<Vec<_>>(), [false, false, true, true, true, true]);
        let m = settings(&EXAONE_MOE, "exaone_moe", r#","first_k_dense_replace":2,"mlp_layer_types":["sparse","dense","sparse","sparse","sparse","dense"]"#).unwrap();
        assert_eq!((0..6).map(|i| m.sparse(i)).collect::<Vec<_>>(), [true, false, true, true, true, false]);
    }

    #[test]
    fn qwen_layers_are_sparse_by_step_except_the_listed_ones() {
        let m = settings(&QWEN3_MOE, "qwen3_moe", r#","decoder_sparse_step":2,"mlp_only_layers":[3]"#).unwrap();
        let sparse: Vec<bool> = (0..6).map(|i| m.sparse(i)).collect();
        assert_eq!(sparse, [false, true, false, false, false, true]);
        let e = settings(&QWEN3_MOE, "qwen3_moe", r#","mlp_only_layers":"all""#).unwrap_err().to_string();
        assert!(e.contains("`mlp_only_layers`"), "{e}");
        let e = settings(&MIXTRAL, "mixtral", r#","num_local_experts":2,"num_experts_per_tok":3"#).unwrap_err().to_string();
        assert!(e.contains("`num_experts_per_tok`") && e.contains("`num_local_experts`"), "{e}");
    }
}
