//! `tailor diff A B`: what differs between two packages (two EPs or dtypes of one checkpoint,
//! or two builds to compare before shipping): op histograms, rules that fired in one and not
//! the other, inputs and outputs, tensors whose bytes differ (SHA-256, streamed), sizes.
//!
//! Two packages *mean the same model* when their graphs are the same (nodes, attributes,
//! inputs, outputs, initializer names, dtypes and shapes: the canonical text without recipe
//! chains) and every initializer has the same bytes. build_report.json does not count (it holds
//! timings and paths), nor does genai_config.json's formatting: its parsed content does.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::Serialize;

use crate::inspect::{inspect, read_genai_config, Inspection};
use crate::Result;

/// What `diff` found.
#[derive(Clone, Debug, Serialize)]
pub struct Difference {
    pub same_model: bool,
    /// `domain:op`: (count in A, count in B), for the ops whose counts differ.
    pub ops: BTreeMap<String, (usize, usize)>,
    /// Rules (per role) that fired in only one of them: `role rule` -> (A, B) firings.
    pub fired: BTreeMap<String, (usize, usize)>,
    /// Inputs or outputs present in one only, or with another dtype or shape.
    pub ports: Vec<String>,
    /// Initializers in one only.
    pub tensors_only_in_a: Vec<String>,
    pub tensors_only_in_b: Vec<String>,
    /// Initializers in both whose bytes differ.
    pub tensors_differing: Vec<String>,
    pub graph_text_equal: bool,
    pub genai_config_equal: bool,
    /// (A, B) bytes of model.onnx + model.onnx.data.
    pub size: (u64, u64),
}

fn histogram(i: &Inspection) -> BTreeMap<String, usize> {
    i.ops.iter().flat_map(|(d, ops)| ops.iter().map(move |(op, n)| (format!("{d}:{op}"), *n))).collect()
}

fn fired(i: &Inspection) -> BTreeMap<String, usize> {
    i.fused.iter().flat_map(|(role, rules)| rules.iter().map(move |(r, n)| (format!("{role} {r}"), *n))).collect()
}

/// The keys whose counts differ, with (A, B) counts (0 where absent).
fn count_differences(a: &BTreeMap<String, usize>, b: &BTreeMap<String, usize>) -> BTreeMap<String, (usize, usize)> {
    let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    keys.into_iter()
        .filter_map(|k| {
            let (x, y) = (a.get(k).copied().unwrap_or(0), b.get(k).copied().unwrap_or(0));
            (x != y).then(|| (k.clone(), (x, y)))
        })
        .collect()
}


/// Compares packages `a` and `b`.
pub fn diff(a: &Path, b: &Path) -> Result<Difference> {
    let (ia, ib) = (inspect(a)?, inspect(b)?);
    let (ma, mb) = (ir::load_model(&a.join("model.onnx"))?, ir::load_model(&b.join("model.onnx"))?);

    let ops = count_differences(&histogram(&ia), &histogram(&ib));
    let fired = count_differences(&fired(&ia), &fired(&ib));

    let mut ports = Vec::new();
    for (kind, pa, pb) in [("input", &ia.inputs, &ib.inputs), ("output", &ia.outputs, &ib.outputs)] {
        for p in pa {
            match pb.iter().find(|q| q.name == p.name) {
                None => ports.push(format!("{kind} `{}` only in A", p.name)),
                Some(q) if q.dtype != p.dtype || q.shape != p.shape => ports.push(format!(
                    "{kind} `{}`: {}[{}] in A, {}[{}] in B",
                    p.name,
                    p.dtype,
                    p.shape.join(", "),
                    q.dtype,
                    q.shape.join(", ")
                )),
                Some(_) => {}
            }
        }
        for q in pb.iter().filter(|q| !pa.iter().any(|p| p.name == q.name)) {
            ports.push(format!("{kind} `{}` only in B", q.name));
        }
    }

    let (da, db) = (ir::initializer_digests(&ma)?, ir::initializer_digests(&mb)?);
    let only = |x: &BTreeMap<String, String>, y: &BTreeMap<String, String>| -> Vec<String> { x.keys().filter(|k| !y.contains_key(*k)).cloned().collect() };
    let tensors_differing: Vec<String> = da.iter().filter(|(k, v)| db.get(*k).is_some_and(|w| w != *v)).map(|(k, _)| k.clone()).collect();
    let text = |m: &ir::Model| ir::canonical_text(m, ir::TextOptions { recipes: false });
    let graph_text_equal = text(&ma) == text(&mb);
    let genai_config_equal = read_genai_config(a)? == read_genai_config(b)?;
    let (tensors_only_in_a, tensors_only_in_b) = (only(&da, &db), only(&db, &da));
    let same_model = graph_text_equal && genai_config_equal && tensors_differing.is_empty() && tensors_only_in_a.is_empty() && tensors_only_in_b.is_empty();
    Ok(Difference {
        same_model,
        ops,
        fired,
        ports,
        tensors_only_in_a,
        tensors_only_in_b,
        tensors_differing,
        graph_text_equal,
        genai_config_equal,
        size: (ia.model_bytes + ia.data_bytes, ib.model_bytes + ib.data_bytes),
    })
}

impl Difference {
    /// The text `tailor diff` prints.
    pub fn text(&self) -> String {
        let mut s = String::new();
        s.push_str(if self.same_model { "same model\n" } else { "different models\n" });
        for (op, (a, b)) in &self.ops {
            s.push_str(&format!("  op {op}: {a} in A, {b} in B\n"));
        }
        for (rule, (a, b)) in &self.fired {
            s.push_str(&format!("  fired {rule}: {a} in A, {b} in B\n"));
        }
        for p in &self.ports {
            s.push_str(&format!("  {p}\n"));
        }
        let list = |title: &str, v: &[String], s: &mut String| {
            if !v.is_empty() {
                let shown: Vec<&str> = v.iter().take(10).map(String::as_str).collect();
                let more = if v.len() > 10 { format!(" (and {} more)", v.len() - 10) } else { String::new() };
                s.push_str(&format!("  {title} ({}): {}{more}\n", v.len(), shown.join(", ")));
            }
        };
        list("tensors only in A", &self.tensors_only_in_a, &mut s);
        list("tensors only in B", &self.tensors_only_in_b, &mut s);
        list("tensors with other bytes", &self.tensors_differing, &mut s);
        if !self.graph_text_equal && self.ops.is_empty() && self.ports.is_empty() {
            s.push_str("  the graphs differ in node order, names or attributes\n");
        }
        if !self.genai_config_equal {
            s.push_str("  genai_config.json differs\n");
        }
        let (a, b) = self.size;
        s.push_str(&format!("  size: {a} B in A, {b} B in B ({:+} B)\n", b as i64 - a as i64));
        s
    }
}
