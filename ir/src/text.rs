//! A stable text form of a model, for insta snapshots and round-trip comparisons.

use crate::{AttrValue, Graph, Model, Recipe, Result, ValueInfo};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::fmt::Write;

#[derive(Clone, Copy, Debug, Default)]
pub struct TextOptions {
    /// Print each initializer's recipe chain (where its bytes come from). Off when comparing a
    /// built model with its reloaded copy, whose initializers all come from the data file.
    pub recipes: bool,
}

fn value(v: &ValueInfo) -> String {
    match &v.shape {
        Some(dims) => {
            let d: Vec<String> = dims.iter().map(|d| d.to_string()).collect();
            format!("{}: {}[{}]", v.name, v.dtype, d.join(", "))
        }
        None => format!("{}: {}[?]", v.name, v.dtype),
    }
}

fn recipe_text(r: &Recipe, opts: TextOptions) -> String {
    let shape: Vec<String> = r.shape().iter().map(|d| d.to_string()).collect();
    let mut s = format!("{}[{}]", r.dtype(), shape.join(", "));
    if opts.recipes {
        s.push_str(" = ");
        s.push_str(&r.describe());
    }
    s
}

fn graph_text(g: &Graph, indent: &str, opts: TextOptions, out: &mut String) {
    let _ = writeln!(out, "{indent}graph {}", g.name);
    for v in &g.inputs {
        let _ = writeln!(out, "{indent}  input {}", value(v));
    }
    for v in &g.outputs {
        let _ = writeln!(out, "{indent}  output {}", value(v));
    }
    for (name, r) in &g.initializers {
        let _ = writeln!(out, "{indent}  init {name}: {}", recipe_text(r, opts));
    }
    for n in &g.nodes {
        let domain = ep_sets::Domain::parse(&n.domain);
        let domain = domain.shown();
        let _ = write!(
            out,
            "{indent}  node {} = {domain}.{}@{}({})",
            n.outputs.join(", "),
            n.op,
            n.opset,
            n.inputs.join(", ")
        );
        let mut subgraphs = Vec::new();
        let attrs: Vec<String> = n
            .attrs
            .iter()
            .map(|a| {
                let v = match &a.value {
                    AttrValue::Tensor(r) => recipe_text(r, TextOptions { recipes: false }),
                    AttrValue::Graph(g) => {
                        subgraphs.push((a.name.clone(), g));
                        format!("<graph {}>", g.name)
                    }
                    plain => plain.plain_text().expect("scalar or list attribute"),
                };
                format!("{}={v}", a.name)
            })
            .collect();
        if !attrs.is_empty() {
            let _ = write!(out, " {{{}}}", attrs.join(", "));
        }
        if !n.metadata.is_empty() {
            let m: Vec<String> = n.metadata.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let _ = write!(out, " [{}]", m.join(", "));
        }
        let _ = writeln!(out, "  # {}", n.name);
        for (_, g) in subgraphs {
            graph_text(g, &format!("{indent}    "), opts, out);
        }
    }
}

/// The model as text: inputs, outputs, initializers (dtype, shape, optionally recipe), nodes
/// in order with domain, opset, attributes and metadata. No tensor bytes.
pub fn canonical_text(model: &Model, opts: TextOptions) -> String {
    let mut out = String::new();
    for (k, v) in &model.metadata {
        let _ = writeln!(out, "meta {k} = {v}");
    }
    graph_text(&model.graph, "", opts, &mut out);
    out
}

/// SHA-256 of every initializer's bytes, by name (main graph). Streamable recipes (a loaded
/// package's tensors are) are hashed 8 MiB at a time, releasing the pages read, so hashing a
/// large package holds one chunk, not one tensor.
pub fn initializer_digests(model: &Model) -> Result<BTreeMap<String, String>> {
    const CHUNK: usize = 8 << 20;
    let mut out = BTreeMap::new();
    for (name, r) in &model.graph.initializers {
        let mut hasher = Sha256::new();
        let esize = r.dtype().size();
        if r.is_streamable() && !r.dtype().is_packed() {
            let numel = r.numel();
            let step = (CHUNK / esize).max(1);
            let mut buf = vec![0u8; step.min(numel.max(1)) * esize];
            for start in (0..numel).step_by(step) {
                let end = (start + step).min(numel);
                let chunk = &mut buf[..(end - start) * esize];
                r.read_into(start, end, chunk)?;
                r.release(start, end);
                hasher.update(&chunk[..]);
            }
        } else {
            hasher.update(r.materialize()?);
        }
        out.insert(name.clone(), hasher.finalize().iter().map(|b| format!("{b:02x}")).collect());
    }
    Ok(out)
}
