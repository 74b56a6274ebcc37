//! `tailor diff A B`: what differs between two packages (two EPs or dtypes of one checkpoint,
//! or two builds to compare before shipping), part by part (parts are matched by file): op
//! histograms, rules that fired in one and not the other, inputs and outputs, tensors whose
//! bytes differ (SHA-256, streamed), sizes. A part present in one package only is a
//! difference.
//!
//! Two packages *mean the same model* when they have the same parts, each part's graphs are the
//! same (nodes, attributes, inputs, outputs, initializer names, dtypes and shapes: the
//! canonical text without recipe chains) and every initializer has the same bytes.
//! build_report.json does not count (it holds timings and paths), nor does genai_config.json's
//! formatting: its parsed content does.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::Serialize;

use crate::inspect::{inspect_models, read_genai_config, PartInspection, Port};
use crate::Result;

/// What `diff` found in one part both packages have.
#[derive(Clone, Debug, Serialize)]
pub struct PartDifference {
    /// The part's file in both packages.
    pub file: String,
    /// Its role in A and in B (they differ only if the packages disagree on what the file is).
    pub role: (String, String),
    pub same_model: bool,
    /// `domain:op`: (count in A, count in B), for the ops whose counts differ.
    pub ops: BTreeMap<String, (usize, usize)>,
    /// Rules that fired a different number of times: `role rule` -> (A, B) firings.
    pub fired: BTreeMap<String, (usize, usize)>,
    /// Inputs or outputs present in one only, or with another dtype or shape.
    pub ports: Vec<String>,
    /// Initializers in one only.
    pub tensors_only_in_a: Vec<String>,
    pub tensors_only_in_b: Vec<String>,
    /// Initializers in both whose bytes differ.
    pub tensors_differing: Vec<String>,
    pub graph_text_equal: bool,
    /// (A, B) bytes of the model file and its external data.
    pub size: (u64, u64),
}

/// What `diff` found.
#[derive(Clone, Debug, Serialize)]
pub struct Difference {
    pub same_model: bool,
    /// The parts both packages have, in A's order.
    pub parts: Vec<PartDifference>,
    /// Parts (`file (role)`) only one package has.
    pub parts_only_in_a: Vec<String>,
    pub parts_only_in_b: Vec<String>,
    pub genai_config_equal: bool,
    /// (A, B) bytes of every part's model and external data files.
    pub size: (u64, u64),
}

fn histogram(p: &PartInspection) -> BTreeMap<String, usize> {
    p.ops.iter().flat_map(|(d, ops)| ops.iter().map(move |(op, n)| (format!("{d}:{op}"), *n))).collect()
}

fn fired(p: &PartInspection) -> BTreeMap<String, usize> {
    p.fused.iter().map(|(r, n)| (format!("{} {r}", p.role), *n)).collect()
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

/// Inputs or outputs that one part has and the other lacks, or has with another dtype or shape.
fn port_differences(pa: &[Port], pb: &[Port], kind: &str) -> Vec<String> {
    let mut out = Vec::new();
    for p in pa {
        match pb.iter().find(|q| q.name == p.name) {
            None => out.push(format!("{kind} `{}` only in A", p.name)),
            Some(q) if q.dtype != p.dtype || q.shape != p.shape => out.push(format!(
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
        out.push(format!("{kind} `{}` only in B", q.name));
    }
    out
}

/// Compares one part of each package.
fn diff_part(ia: &PartInspection, ma: &ir::Model, ib: &PartInspection, mb: &ir::Model) -> Result<PartDifference> {
    let mut ports = port_differences(&ia.inputs, &ib.inputs, "input");
    ports.extend(port_differences(&ia.outputs, &ib.outputs, "output"));
    let (da, db) = (ir::initializer_digests(ma)?, ir::initializer_digests(mb)?);
    let only = |x: &BTreeMap<String, String>, y: &BTreeMap<String, String>| -> Vec<String> { x.keys().filter(|k| !y.contains_key(*k)).cloned().collect() };
    let tensors_differing: Vec<String> = da.iter().filter(|(k, v)| db.get(*k).is_some_and(|w| w != *v)).map(|(k, _)| k.clone()).collect();
    let text = |m: &ir::Model| ir::canonical_text(m, ir::TextOptions { recipes: false });
    let graph_text_equal = text(ma) == text(mb);
    let (tensors_only_in_a, tensors_only_in_b) = (only(&da, &db), only(&db, &da));
    let same_model = graph_text_equal && ia.role == ib.role && tensors_differing.is_empty() && tensors_only_in_a.is_empty() && tensors_only_in_b.is_empty();
    Ok(PartDifference {
        file: ia.file.clone(),
        role: (ia.role.clone(), ib.role.clone()),
        same_model,
        ops: count_differences(&histogram(ia), &histogram(ib)),
        fired: count_differences(&fired(ia), &fired(ib)),
        ports,
        tensors_only_in_a,
        tensors_only_in_b,
        tensors_differing,
        graph_text_equal,
        size: (ia.model_bytes + ia.data_bytes, ib.model_bytes + ib.data_bytes),
    })
}

/// Compares packages `a` and `b`.
pub fn diff(a: &Path, b: &Path) -> Result<Difference> {
    let ((ia, ma), (ib, mb)) = (inspect_models(a)?, inspect_models(b)?);
    let label = |p: &PartInspection| format!("{} ({})", p.file, p.role);
    let mut parts = Vec::new();
    let mut parts_only_in_a = Vec::new();
    for (pa, model_a) in ia.parts.iter().zip(&ma) {
        match ib.parts.iter().position(|pb| pb.file == pa.file) {
            Some(j) => parts.push(diff_part(pa, model_a, &ib.parts[j], &mb[j])?),
            None => parts_only_in_a.push(label(pa)),
        }
    }
    let parts_only_in_b: Vec<String> = ib.parts.iter().filter(|pb| ia.part(&pb.file).is_none()).map(label).collect();
    let genai_config_equal = read_genai_config(a)? == read_genai_config(b)?;
    let same_model = parts_only_in_a.is_empty() && parts_only_in_b.is_empty() && genai_config_equal && parts.iter().all(|p| p.same_model);
    Ok(Difference { same_model, parts, parts_only_in_a, parts_only_in_b, genai_config_equal, size: (ia.bytes(), ib.bytes()) })
}

impl Difference {
    /// The text `tailor diff` prints: a line for the verdict, the parts only one package has,
    /// then each part both have, with what differs in it.
    pub fn text(&self) -> String {
        let mut s = String::new();
        s.push_str(if self.same_model { "same model\n" } else { "different models\n" });
        for p in &self.parts_only_in_a {
            s.push_str(&format!("  part {p} only in A\n"));
        }
        for p in &self.parts_only_in_b {
            s.push_str(&format!("  part {p} only in B\n"));
        }
        for p in &self.parts {
            s.push_str(&p.text());
        }
        if !self.genai_config_equal {
            s.push_str("  genai_config.json differs\n");
        }
        let (a, b) = self.size;
        s.push_str(&format!("  size: {a} B in A, {b} B in B ({:+} B)\n", b as i64 - a as i64));
        s
    }
}

impl PartDifference {
    fn text(&self) -> String {
        let mut s = String::new();
        let role = if self.role.0 == self.role.1 { self.role.0.clone() } else { format!("{} in A, {} in B", self.role.0, self.role.1) };
        s.push_str(&format!("  part {} ({role}): {}\n", self.file, if self.same_model { "same" } else { "differs" }));
        for (op, (a, b)) in &self.ops {
            s.push_str(&format!("    op {op}: {a} in A, {b} in B\n"));
        }
        for (rule, (a, b)) in &self.fired {
            s.push_str(&format!("    fired {rule}: {a} in A, {b} in B\n"));
        }
        for p in &self.ports {
            s.push_str(&format!("    {p}\n"));
        }
        let list = |title: &str, v: &[String], s: &mut String| {
            if !v.is_empty() {
                let shown: Vec<&str> = v.iter().take(10).map(String::as_str).collect();
                let more = if v.len() > 10 { format!(" (and {} more)", v.len() - 10) } else { String::new() };
                s.push_str(&format!("    {title} ({}): {}{more}\n", v.len(), shown.join(", ")));
            }
        };
        list("tensors only in A", &self.tensors_only_in_a, &mut s);
        list("tensors only in B", &self.tensors_only_in_b, &mut s);
        list("tensors with other bytes", &self.tensors_differing, &mut s);
        if !self.graph_text_equal && self.ops.is_empty() && self.ports.is_empty() {
            s.push_str("    the graphs differ in node order, names or attributes\n");
        }
        let (a, b) = self.size;
        if a != b {
            s.push_str(&format!("    size: {a} B in A, {b} B in B ({:+} B)\n", b as i64 - a as i64));
        }
        s
    }
}
