//! Checks one table on its own (no rule registry needed), so `ruleck` and the tests can run
//! them without building anything. Cross-checks against the rules crate (does `fuse.gqa`
//! exist, which ops does it emit) belong to `ruleck`, which has both.

use std::collections::{BTreeMap, BTreeSet};

use crate::error::Problem;
use crate::table::{EpTable, Stage};

/// Structural flags a task understands. A flag is a contract with builder/task code, so a
/// new one is added here together with the code that reads it; a typo is caught here.
pub const KNOWN_FLAGS: &[&str] = &["concrete_dims"];

/// Fusion / lowering pairs where the lowering undoes the fusion. A (EP, dtype) that lists the
/// fusion must not also list the lowering: "never fuse what the same (EP, dtype) later
/// decomposes". Kept here until rules carry this as metadata `ruleck` can read.
pub const UNDOES: &[(&str, &str)] = &[
    ("fuse.pack_qkv", "lower.unpack_qkv"),
    ("fuse.skip_layer_norm", "lower.decompose_skip_layer_norm"),
    ("fuse.gqa_rotary", "lower.separate_rope"),
    ("fuse.gqa_rotary", "lower.decompose_rotary_embedding"),
];

fn rule_id_ok(id: &str) -> bool {
    let Some((prefix, rest)) = id.split_once('.') else { return false };
    matches!(prefix, "fuse" | "lower" | "cleanup" | "fold")
        && !rest.is_empty()
        && rest.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// Which rule-id prefixes a stage accepts.
fn stage_accepts(stage: Stage, id: &str) -> bool {
    let prefix = id.split('.').next().unwrap_or("");
    match stage {
        Stage::Cleanup => prefix == "cleanup",
        Stage::Prefuse | Stage::Lower => prefix == "lower",
        Stage::Fuse => prefix == "fuse",
        Stage::Fold => prefix == "fold" || prefix == "cleanup",
        Stage::Quantize => false,
    }
}

impl EpTable {
    /// A `[quant.*]` section: its dtype has a plan, its accuracy level is one MatMulNBits
    /// takes, every op its format writes is claimed, and it says why.
    fn validate_quant(&self, q: &crate::QuantPlan, problem: &mut impl FnMut(Option<std::ops::Range<usize>>, String)) {
        use crate::{QuantChoice, QuantFormat};
        let at = || q.span.clone();
        let section = format!("[quant.{}]", q.bits);
        if !self.plans.contains_key(&q.dtype) {
            problem(at(), format!("{section} dtype `{}` has no [role.decoder.{}] section", q.dtype, q.dtype));
        }
        if !(0..=4).contains(&q.accuracy_level) {
            problem(at(), format!("{section} accuracy_level {} is not one of 0..=4 (MatMulNBits' attribute)", q.accuracy_level));
        }
        if q.format == QuantFormat::DequantizeLinear && q.accuracy_level != 0 {
            problem(at(), format!("{section}: accuracy_level is a MatMulNBits attribute; the dequantize_linear format has none (set 0)"));
        }
        if q.embedding_gather_dequantize_linear && q.format != QuantFormat::DequantizeLinear {
            problem(at(), format!("{section}: embedding_gather_dequantize_linear applies to the dequantize_linear format only"));
        }
        if q.why.trim().is_empty() {
            problem(at(), format!("{section} has no `why` for its defaults"));
        }
        let mut needs: Vec<(&str, &str)> = Vec::new();
        match q.format {
            QuantFormat::MatmulNbits => {
                needs.push(("com.microsoft", "MatMulNBits"));
                if q.embeddings != QuantChoice::None {
                    needs.push(("com.microsoft", "GatherBlockQuantized"));
                }
            }
            QuantFormat::DequantizeLinear => needs.push(("", "DequantizeLinear")),
        }
        for (domain, op) in needs {
            if self.kernels(domain, op).is_empty() {
                problem(at(), format!("{section} writes {} nodes, which the table does not claim", crate::Domain::qualify(domain, op)));
            }
        }
    }
}

/// ORT names constraints `T`, `T1`, `T_CACHE`, ... but also after an input (`shape` on Reshape).
fn constraint_name_ok(name: &str) -> bool {
    name.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

impl EpTable {
    /// Every problem with this table, each with its location. Empty means valid.
    pub fn validate(&self) -> Vec<Problem> {
        let mut out = Vec::new();
        let mut problem = |span: Option<std::ops::Range<usize>>, message: String| {
            out.push(Problem { location: self.location(span), message });
        };

        let stem = self.file.rsplit(['/', '\\']).next().unwrap_or(&self.file);
        let stem = stem.strip_suffix(".toml").unwrap_or(stem);
        if stem != self.name {
            problem(self.name_span.clone(), format!("EP name `{}` differs from the file name `{stem}.toml`", self.name));
        }
        if self.provider.trim().is_empty() {
            problem(self.name_span.clone(), "ep.provider is empty".into());
        }
        if self.plans.is_empty() {
            problem(self.name_span.clone(), "the table lists no [role.decoder.*] section".into());
        }

        for p in &self.stage_problems {
            problem(self.stages_span.clone(), p.clone());
        }
        for u in &self.unknown_dtypes {
            problem(u.span.clone(), format!("unknown dtype `{}` in {} (expected {})", u.name, u.place, u.expected));
        }
        for plan in self.all_plans() {
            self.validate_plan(plan, &mut problem);
        }
        if let Some(k) = &self.static_kv_cache {
            if k.why.trim().is_empty() {
                problem(k.span.clone(), "[kv_cache.static] has no `why`".into());
            }
            for d in &k.dtypes {
                if self.dtype(*d).is_none() {
                    problem(k.span.clone(), format!("[kv_cache.static] offers dtype {d}, which has no [role.decoder.{d}] section"));
                }
            }
        }
        if let Some(k) = &self.lora {
            if k.why.trim().is_empty() {
                problem(k.span.clone(), "[lora] has no `why`".into());
            }
            for d in &k.dtypes {
                if self.dtype(*d).is_none() {
                    problem(k.span.clone(), format!("[lora] offers dtype {d}, which has no [role.decoder.{d}] section"));
                }
            }
        }
        for (name, span) in &self.unknown_roles {
            let known: Vec<&str> = crate::Role::ALL.iter().map(|r| r.name()).collect();
            problem(span.clone(), format!("unknown role `[role.{name}]` (known: {})", known.join(", ")));
        }
        for (role, by_dtype) in &self.role_plans {
            for (dtype, plan) in by_dtype {
                if !self.plans.contains_key(dtype) {
                    problem(plan.span.clone(), format!("{} has no [role.decoder.{dtype}] section: a role's dtypes are a subset of the decoder's, which are the EP's", role.section(*dtype)));
                }
            }
        }

        if let Some(d) = self.default_dtype.filter(|d| !self.plans.contains_key(d)) {
            problem(self.default_dtype_span.clone(), format!("ep.default_dtype `{d}` has no [role.decoder.{d}] section"));
        }
        for (bits, span) in &self.unknown_quant {
            problem(span.clone(), format!("unknown quantization `[quant.{bits}]` (expected int4 or int8)"));
        }
        for q in self.quant.values() {
            self.validate_quant(q, &mut problem);
        }

        for ex in &self.exclusions {
            if ex.why.trim().is_empty() {
                problem(ex.span.clone(), format!("exclusion of `{}` has no `why`", ex.rule));
            }
            if !rule_id_ok(&ex.rule) {
                problem(ex.span.clone(), format!("exclusion names `{}`, which is not a rule id", ex.rule));
            }
            if let Some(r) = &ex.role {
                if crate::Role::parse(r).is_none() {
                    let known: Vec<&str> = crate::Role::ALL.iter().map(|r| r.name()).collect();
                    problem(ex.span.clone(), format!("exclusion of `{}` names role `{r}` (known: {})", ex.rule, known.join(", ")));
                }
            }
            if let Some(d) = &ex.dtype {
                if !self.plans.contains_key(d) {
                    problem(ex.span.clone(), format!("exclusion of `{}` names dtype `{d}`, which the table does not list", ex.rule));
                }
            }
        }

        for r in &self.refusals {
            let what = match r.dtype {
                Some(d) => format!("refusal of role `{}` in {d}", r.role),
                None => format!("refusal of role `{}`", r.role),
            };
            if r.why.trim().is_empty() {
                problem(r.span.clone(), format!("{what} has no `why` (the build's error quotes it)"));
            }
            match crate::Role::parse(&r.role) {
                None => {
                    let known: Vec<&str> = crate::Role::ALL.iter().map(|r| r.name()).collect();
                    problem(r.span.clone(), format!("{what} names no role (known: {})", known.join(", ")));
                }
                Some(crate::Role::Decoder) => {
                    problem(r.span.clone(), format!("{what}: the decoder's dtypes are the EP's dtypes; leave the [role.decoder.<dtype>] section out instead"))
                }
                Some(role) => {
                    let planned: Vec<String> = self.role_dtypes(role).into_iter().filter(|d| r.dtype.is_none_or(|x| x == *d)).map(|d| role.section(d)).collect();
                    if !planned.is_empty() {
                        problem(r.span.clone(), format!("{what} contradicts the table's {}: a role is built or refused, not both", planned.join(", ")));
                    }
                }
            }
            if let Some(d) = r.dtype.filter(|d| !self.plans.contains_key(d)) {
                problem(r.span.clone(), format!("{what} names dtype `{d}`, which the table does not list"));
            }
        }

        for ((domain, op), kernels) in &self.ops {
            for k in kernels {
                let what = crate::Domain::qualify(domain, op);
                if k.source.trim().is_empty() {
                    problem(k.span.clone(), format!("claim of {what} has no `source`"));
                }
                if k.since < 1 || k.until.is_some_and(|u| u < k.since) {
                    problem(k.span.clone(), format!("claim of {what} has an empty opset range {}", k.describe()));
                }
                for (name, dtypes) in &k.types {
                    if !constraint_name_ok(name) {
                        problem(k.span.clone(), format!("claim of {what}: `{name}` is not a type-constraint name"));
                    }
                    if dtypes.is_empty() {
                        problem(k.span.clone(), format!("claim of {what}: constraint {name} lists no dtype"));
                    }
                }
            }
        }
        out
    }
}

impl EpTable {
    /// One plan on its own: dtype known, rule ids in stages that take them, nothing listed
    /// twice or both listed and excluded, required rules fused, every why given, flags known.
    fn validate_plan(&self, plan: &crate::DtypePlan, problem: &mut impl FnMut(Option<std::ops::Range<usize>>, String)) {
        let dtype_name = plan.dtype.name();
        // Messages name a decoder plan by its dtype (`dtype f32`), a role's plan with its role.
        let label = match plan.role {
            crate::Role::Decoder => dtype_name.to_string(),
            role => format!("{dtype_name} of role {role}"),
        };
        let dtype = label.as_str();
        let mut seen: BTreeMap<&str, Stage> = BTreeMap::new();
        for (stage, rule) in plan.pipeline() {
            if !rule_id_ok(&rule.id) {
                problem(rule.span.clone(), format!("`{}` is not a rule id (expected fuse.x, lower.x, cleanup.x or fold.x)", rule.id));
            } else if !stage_accepts(stage, &rule.id) {
                problem(rule.span.clone(), format!("`{}` does not belong in the `{}` list of dtype {dtype}", rule.id, stage.name()));
            }
            if let Some(prev) = seen.insert(&rule.id, stage) {
                problem(rule.span.clone(), format!("`{}` is listed twice in dtype {dtype} (in `{}` and `{}`)", rule.id, prev.name(), stage.name()));
            }
            if let Some(ex) = self.excluded_for(plan.role, &rule.id, plan.dtype) {
                problem(rule.span.clone(), format!("`{}` is listed for dtype {dtype} but excluded: {}", rule.id, ex.why));
            }
        }
        let fusing: BTreeSet<&str> = plan
            .stage(Stage::Fuse)
            .iter()
            .chain(plan.stage(Stage::Prefuse))
            .map(|r| r.id.as_str())
            .collect();
        for r in &plan.required {
            if !fusing.contains(r.id.as_str()) {
                problem(r.span.clone(), format!("required `{}` is not in the fuse or prefuse list of dtype {dtype}", r.id));
            }
        }
        for (rule, accepted) in &plan.not_applicable {
            if !plan.is_required(rule) {
                problem(plan.span.clone(), format!("`not_applicable` names `{rule}`, which is not a required fusion of dtype {dtype}"));
            }
            for n in accepted {
                if n.why.trim().is_empty() {
                    problem(n.span.clone(), format!("not-applicable check `{}` of `{rule}` (dtype {dtype}) has no `why`", n.check));
                }
            }
        }
        for (fusion, lowering) in UNDOES {
            if plan.runs(fusion) && plan.runs(lowering) {
                let span = plan.pipeline().find(|(_, r)| r.id == *lowering).and_then(|(_, r)| r.span.clone());
                problem(span, format!("dtype {dtype} fuses with `{fusion}` and then undoes it with `{lowering}`"));
            }
        }
        for f in &plan.forbidden {
            if f.why.trim().is_empty() {
                problem(f.span.clone(), format!("forbidden op `{}` of dtype {dtype} has no `why`", f.op));
            }
        }
        for flag in &plan.flags {
            if !KNOWN_FLAGS.contains(&flag.id.as_str()) {
                problem(flag.span.clone(), format!("unknown structural flag `{}` (known: {})", flag.id, KNOWN_FLAGS.join(", ")));
            }
        }
    }
}
