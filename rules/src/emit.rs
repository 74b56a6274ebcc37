//! What an `emit` block may do: add nodes and initializers with fresh names, tagged with the
//! rule's id, and ask for values to be replaced. It cannot look around the graph: it sees the
//! values the match bound and nothing else (plus the types and recipes of those values).

use crate::rt::{Binds, Bound};
use crate::Error;
use ir::{Attr, Graph, Node, Recipe, ValueInfo};
use std::collections::{BTreeMap, HashMap, HashSet};

/// Fresh names for one graph: every name in use, plus those handed out.
#[derive(Default)]
pub struct Names {
    taken: HashSet<String>,
}

impl Names {
    pub fn of(graph: &Graph) -> Names {
        let mut taken: HashSet<String> = graph.inputs.iter().chain(&graph.outputs).map(|v| v.name.clone()).collect();
        taken.extend(graph.initializers.iter().map(|(n, _)| n.clone()));
        for n in &graph.nodes {
            taken.insert(n.name.clone());
            taken.extend(n.outputs.iter().cloned());
        }
        Names { taken }
    }
    /// `base`, or `base_2`, `base_3`, ... whichever is free first.
    pub fn fresh(&mut self, base: &str) -> String {
        let mut name = base.to_string();
        let mut k = 2;
        while self.taken.contains(&name) {
            name = format!("{base}_{k}");
            k += 1;
        }
        self.taken.insert(name.clone());
        name
    }
}

/// Per-graph state shared by all emits of a pass: names and helper results (so a helper such
/// as `gqa_seqlens` builds its nodes once per graph).
#[derive(Default)]
pub struct GraphState {
    pub names: Names,
    pub memo: HashMap<String, Vec<String>>,
}

/// Collects one firing's additions; the engine commits them or drops them as a whole.
pub struct Emitter<'a> {
    pub(crate) graph: &'a Graph,
    pub(crate) rule: &'static str,
    pub(crate) base: String,
    pub(crate) state: &'a mut GraphState,
    pub(crate) nodes: Vec<Node>,
    pub(crate) initializers: Vec<(String, Recipe)>,
    pub(crate) replaces: Vec<(String, String)>,
    pub(crate) memo_new: Vec<(String, Vec<String>)>,
    /// The types the matcher saw (`ir::infer_types`), for helpers that must build constants
    /// in a bound value's dtype.
    pub(crate) types: Option<&'a HashMap<String, ValueInfo>>,
}

impl<'a> Emitter<'a> {
    pub(crate) fn new(graph: &'a Graph, rule: &'static str, base: String, state: &'a mut GraphState) -> Self {
        Emitter { graph, rule, base, state, nodes: vec![], initializers: vec![], replaces: vec![], memo_new: vec![], types: None }
    }

    pub(crate) fn with_types(mut self, types: &'a HashMap<String, ValueInfo>) -> Self {
        self.types = Some(types);
        self
    }

    /// The element type of a bound value, as the matcher's type inference knows it.
    pub fn dtype(&self, value: &str) -> Option<ir::DType> {
        self.types.and_then(|t| t.get(value)).map(|v| v.dtype)
    }

    fn err(&self, reason: String) -> Error {
        Error::Emit { rule: self.rule.to_string(), node: self.base.clone(), reason }
    }

    /// The name of the value bound to capture `cap`.
    pub fn value(&self, b: &Binds, cap: usize) -> Result<String, Error> {
        match b.caps.get(cap) {
            Some(Some(Bound::Value(v))) => Ok(v.clone()),
            _ => Err(self.err(format!("capture #{cap} holds no value"))),
        }
    }

    /// The values of the list capture `cap` (`..?ys`), for a `for` block.
    pub fn values(&self, b: &Binds, cap: usize) -> Result<Vec<String>, Error> {
        match b.caps.get(cap) {
            Some(Some(Bound::Values(v))) => Ok(v.clone()),
            _ => Err(self.err(format!("capture #{cap} holds no list of values"))),
        }
    }

    /// How many times a `for` block runs: the common length of its lists. Lists of different
    /// lengths are an error (the rule's checks make sure they agree), never a partial loop.
    pub fn zipped_len(&self, lists: &[Vec<String>]) -> Result<usize, Error> {
        let lens: Vec<usize> = lists.iter().map(Vec::len).collect();
        match lens.split_first() {
            Some((n, rest)) if rest.iter().all(|m| m == n) => Ok(*n),
            Some(_) => Err(self.err(format!("a `for` zips lists of lengths {lens:?}"))),
            None => Ok(0),
        }
    }

    /// The attribute bound to capture `cap`, under the name `name`.
    pub fn attr(&self, b: &Binds, cap: usize, name: &str) -> Result<Attr, Error> {
        match b.caps.get(cap) {
            Some(Some(Bound::Attr(a))) => Ok(Attr { name: name.to_string(), value: a.clone() }),
            _ => Err(self.err(format!("capture #{cap} holds no attribute"))),
        }
    }

    /// The integer list bound to capture `cap` (a `let` list), for helpers that take one.
    pub fn ints(&self, b: &Binds, cap: usize) -> Result<Vec<i64>, Error> {
        match b.caps.get(cap) {
            Some(Some(Bound::Attr(ir::AttrValue::Ints(v)))) => Ok(v.clone()),
            _ => Err(self.err(format!("capture #{cap} holds no integer list"))),
        }
    }

    /// The subgraph attribute bound to capture `cap` (an If branch), for helpers that inline
    /// it. The borrow is of the binds, not of the emitter, so the emitter stays writable.
    pub fn subgraph<'b>(&self, b: &'b Binds, cap: usize) -> Result<&'b Graph, Error> {
        match b.caps.get(cap) {
            Some(Some(Bound::Attr(ir::AttrValue::Graph(g)))) => Ok(g),
            _ => Err(self.err(format!("capture #{cap} holds no subgraph"))),
        }
    }

    /// Copies a subgraph's nodes and initializers into the graph being rewritten and returns
    /// the names its outputs get there, in order. Everything the subgraph defines gets a fresh
    /// name under this firing's base (two branches that both call their value `cos` must not
    /// collide, nor shadow an outer value); names it captures from the enclosing scopes keep
    /// theirs, since those values are visible where the copy lands. Subgraph inputs (a Loop
    /// body) and nested subgraphs are refused: renaming into them is not done here.
    pub fn inline(&mut self, g: &Graph) -> Result<Vec<String>, Error> {
        if !g.inputs.is_empty() {
            return Err(self.err(format!("subgraph `{}` has inputs; only input-less branches inline", g.name)));
        }
        if let Some(n) = g.nodes.iter().find(|n| n.subgraphs().next().is_some()) {
            return Err(self.err(format!("node `{}` of `{}` has a nested subgraph", n.name, g.name)));
        }
        let stem = format!("{}/{}", self.base, if g.name.is_empty() { "branch" } else { g.name.as_str() });
        let mut renamed: HashMap<String, String> = HashMap::new();
        for (name, recipe) in &g.initializers {
            let new = self.state.names.fresh(&format!("{stem}/{name}"));
            renamed.insert(name.clone(), new.clone());
            self.initializers.push((new, recipe.clone()));
        }
        for n in &g.nodes {
            for o in n.outputs.iter().filter(|o| !o.is_empty()) {
                let new = self.state.names.fresh(&format!("{stem}/{o}"));
                renamed.insert(o.clone(), new);
            }
        }
        // An Identity is not copied: readers of its output read its input (If branches that
        // just return an outer tensor are all Identity, and some EPs, WebGPU, have no kernel).
        for n in &g.nodes {
            if n.op == "Identity" && ep_sets::Domain::is_onnx(&n.domain) {
                if let (Some(i), Some(o)) = (n.inputs.first(), n.outputs.first()) {
                    let src = renamed.get(i).cloned().unwrap_or_else(|| i.clone());
                    renamed.insert(o.clone(), src);
                }
            }
        }
        let map = |v: &String| if v.is_empty() { String::new() } else { renamed.get(v).cloned().unwrap_or_else(|| v.clone()) };
        for n in g.nodes.iter().filter(|n| !(n.op == "Identity" && ep_sets::Domain::is_onnx(&n.domain))) {
            let mut metadata = n.metadata.clone();
            metadata.insert("rule".to_string(), self.rule.to_string());
            let name = self.state.names.fresh(&format!("{stem}/{}", n.name));
            self.nodes.push(Node {
                name,
                op: n.op.clone(),
                domain: n.domain.clone(),
                opset: n.opset,
                inputs: n.inputs.iter().map(map).collect(),
                outputs: n.outputs.iter().map(map).collect(),
                attrs: n.attrs.clone(),
                metadata,
            });
        }
        Ok(g.outputs.iter().map(|o| map(&o.name)).collect())
    }

    /// The error for an emit line that names more outputs than its helper returned.
    pub fn missing_output(&self, k: usize, got: usize) -> Error {
        self.err(format!("the emit line names output {k}, but only {got} value(s) came back"))
    }

    /// The recipe of an initializer the match bound (for helpers that pack weights).
    pub fn recipe(&self, value: &str) -> Option<&Recipe> {
        self.graph.initializer(value)
    }

    /// Adds a node; returns its output names ("" for outputs the rule leaves unnamed).
    pub fn node(&mut self, domain: &str, op: &str, opset: i64, inputs: Vec<String>, named: &[bool], attrs: Vec<Attr>) -> Result<Vec<String>, Error> {
        let name = self.state.names.fresh(&format!("{}/{op}", self.base));
        let mut outputs: Vec<String> = named
            .iter()
            .enumerate()
            .map(|(k, n)| if *n { self.state.names.fresh(&if k == 0 { format!("{name}/out") } else { format!("{name}/out{k}") }) } else { String::new() })
            .collect();
        while outputs.last().is_some_and(|o| o.is_empty()) {
            outputs.pop();
        }
        let mut inputs = inputs;
        while inputs.last().is_some_and(|i| i.is_empty()) {
            inputs.pop();
        }
        let mut metadata = BTreeMap::new();
        metadata.insert("rule".to_string(), self.rule.to_string());
        let mut padded = outputs.clone();
        padded.resize(named.len(), String::new());
        self.nodes.push(Node { name, op: op.into(), domain: domain.into(), opset, inputs, outputs, attrs, metadata });
        Ok(padded)
    }

    /// Adds an initializer with a fresh name based on `base`.
    pub fn initializer(&mut self, base: &str, recipe: Recipe) -> String {
        let name = self.state.names.fresh(base);
        self.initializers.push((name.clone(), recipe));
        name
    }

    /// Every reader of `old` will read `new`.
    pub fn replace(&mut self, old: String, new: String) {
        self.replaces.push((old, new));
    }

    /// A helper's earlier result for the same key in this graph, if any.
    pub fn memo(&self, key: &str) -> Option<Vec<String>> {
        self.state.memo.get(key).cloned().or_else(|| self.memo_new.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone()))
    }

    pub fn remember(&mut self, key: String, values: Vec<String>) {
        self.memo_new.push((key, values));
    }

    pub fn rule(&self) -> &'static str {
        self.rule
    }
}
