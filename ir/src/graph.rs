//! The in-memory graph: values are named by strings, as in ONNX, so rewrites are plain edits
//! of node input/output lists. Node order is kept topological by [`Graph::toposort`].

use crate::{DType, Error, Recipe, Result};
use std::collections::{BTreeMap, HashMap, HashSet};

/// A whole model: the main graph plus model-level metadata.
#[derive(Clone, Debug, Default)]
pub struct Model {
    pub graph: Graph,
    /// `metadata_props` written into the ModelProto (sorted, so output is deterministic).
    pub metadata: BTreeMap<String, String>,
    pub producer: String,
}

/// One dimension of a value's shape.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Dim {
    Fixed(i64),
    Sym(String),
}

impl Dim {
    pub fn sym(name: &str) -> Dim {
        Dim::Sym(name.to_string())
    }
}

impl std::fmt::Display for Dim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Dim::Fixed(v) => write!(f, "{v}"),
            Dim::Sym(s) => f.write_str(s),
        }
    }
}

/// Type and (optionally) shape of a named value.
#[derive(Clone, Debug, PartialEq)]
pub struct ValueInfo {
    pub name: String,
    pub dtype: DType,
    /// `None` means the rank is unknown.
    pub shape: Option<Vec<Dim>>,
}

impl ValueInfo {
    pub fn new(name: impl Into<String>, dtype: DType, shape: Vec<Dim>) -> Self {
        ValueInfo { name: name.into(), dtype, shape: Some(shape) }
    }
}

/// An attribute value. Subgraphs (for `If`, `Loop`) are owned by the node.
#[derive(Clone, Debug, PartialEq)]
pub enum AttrValue {
    Int(i64),
    Float(f32),
    String(String),
    Ints(Vec<i64>),
    Floats(Vec<f32>),
    Strings(Vec<String>),
    /// A small constant tensor, e.g. `Constant`'s `value` or `ConstantOfShape`'s fill.
    Tensor(Recipe),
    Graph(Box<Graph>),
}

impl AttrValue {
    /// The text of a scalar or list attribute as snapshots print it (`None` for tensors and
    /// graphs, which each printer renders its own way).
    pub fn plain_text(&self) -> Option<String> {
        Some(match self {
            AttrValue::Int(v) => v.to_string(),
            AttrValue::Float(v) => format!("{v:?}"),
            AttrValue::String(v) => format!("{v:?}"),
            AttrValue::Ints(v) => format!("{v:?}"),
            AttrValue::Floats(v) => format!("{v:?}"),
            AttrValue::Strings(v) => format!("{v:?}"),
            AttrValue::Tensor(_) | AttrValue::Graph(_) => return None,
        })
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Attr {
    pub name: String,
    pub value: AttrValue,
}

impl Attr {
    pub fn int(name: &str, v: i64) -> Attr {
        Attr { name: name.into(), value: AttrValue::Int(v) }
    }
    pub fn float(name: &str, v: f32) -> Attr {
        Attr { name: name.into(), value: AttrValue::Float(v) }
    }
    pub fn ints(name: &str, v: &[i64]) -> Attr {
        Attr { name: name.into(), value: AttrValue::Ints(v.to_vec()) }
    }
    pub fn string(name: &str, v: &str) -> Attr {
        Attr { name: name.into(), value: AttrValue::String(v.into()) }
    }
    pub fn tensor(name: &str, v: Recipe) -> Attr {
        Attr { name: name.into(), value: AttrValue::Tensor(v) }
    }
    pub fn graph(name: &str, g: Graph) -> Attr {
        Attr { name: name.into(), value: AttrValue::Graph(Box::new(g)) }
    }
}

/// One operator application. `domain` is `""` for the default ONNX domain; `opset` is the
/// version of that domain the node was written against. An empty input name is an omitted
/// optional input.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    pub name: String,
    pub op: String,
    pub domain: String,
    pub opset: i64,
    pub inputs: Vec<String>,
    pub outputs: Vec<String>,
    pub attrs: Vec<Attr>,
    /// Written as the node's `metadata_props`; rules tag the nodes they create with `rule`.
    pub metadata: BTreeMap<String, String>,
}

impl Node {
    /// A default-domain node at the generic graphs' opset, with no attributes or metadata.
    pub fn new(name: impl Into<String>, op: impl Into<String>, inputs: &[&str], outputs: &[&str]) -> Node {
        Node {
            name: name.into(),
            op: op.into(),
            domain: String::new(),
            opset: crate::OPSET,
            inputs: inputs.iter().map(|s| s.to_string()).collect(),
            outputs: outputs.iter().map(|s| s.to_string()).collect(),
            attrs: Vec::new(),
            metadata: BTreeMap::new(),
        }
    }

    pub fn attr(&self, name: &str) -> Option<&AttrValue> {
        self.attrs.iter().find(|a| a.name == name).map(|a| &a.value)
    }
    pub fn attr_int(&self, name: &str) -> Option<i64> {
        match self.attr(name) {
            Some(AttrValue::Int(v)) => Some(*v),
            _ => None,
        }
    }
    pub fn set_attr(&mut self, attr: Attr) {
        match self.attrs.iter_mut().find(|a| a.name == attr.name) {
            Some(slot) => *slot = attr,
            None => self.attrs.push(attr),
        }
    }
    /// The input at `slot`, or `None` when it is absent or omitted (empty name).
    pub fn input(&self, slot: usize) -> Option<&str> {
        self.inputs.get(slot).map(String::as_str).filter(|s| !s.is_empty())
    }
    pub fn subgraphs(&self) -> impl Iterator<Item = &Graph> {
        self.attrs.iter().filter_map(|a| match &a.value {
            AttrValue::Graph(g) => Some(g.as_ref()),
            _ => None,
        })
    }
}

/// A graph: inputs, outputs, nodes in topological order, and lazily-materialized initializers.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Graph {
    pub name: String,
    pub inputs: Vec<ValueInfo>,
    pub outputs: Vec<ValueInfo>,
    pub nodes: Vec<Node>,
    /// Initializers in the order they will be written.
    pub initializers: Vec<(String, Recipe)>,
    /// Known types and shapes of intermediate values.
    pub value_info: Vec<ValueInfo>,
}

impl Graph {
    pub fn initializer(&self, name: &str) -> Option<&Recipe> {
        self.initializers.iter().find(|(n, _)| n == name).map(|(_, r)| r)
    }

    /// The initializer `name` when it is a constant: not also a graph input. An initializer
    /// that shares its name with a graph input is only that input's default (a LoRA slot's
    /// empty A/B): a runtime may feed another value, so no rewrite may treat it as known.
    pub fn constant(&self, name: &str) -> Option<&Recipe> {
        self.initializer(name).filter(|_| !self.inputs.iter().any(|i| i.name == name))
    }

    /// Names used by this graph and its subgraphs that are not produced inside them: the
    /// outer-scope values a subgraph captures.
    pub fn captured_names(&self) -> HashSet<String> {
        let mut produced: HashSet<&str> = self.inputs.iter().map(|v| v.name.as_str()).collect();
        produced.extend(self.initializers.iter().map(|(n, _)| n.as_str()));
        for node in &self.nodes {
            produced.extend(node.outputs.iter().map(String::as_str));
        }
        let mut captured = HashSet::new();
        for node in &self.nodes {
            for i in node.inputs.iter().filter(|i| !i.is_empty()) {
                if !produced.contains(i.as_str()) {
                    captured.insert(i.clone());
                }
            }
            for sub in node.subgraphs() {
                for c in sub.captured_names() {
                    if !produced.contains(c.as_str()) {
                        captured.insert(c);
                    }
                }
            }
        }
        for o in &self.outputs {
            if !produced.contains(o.name.as_str()) {
                captured.insert(o.name.clone());
            }
        }
        captured
    }

    /// Every name a node reads, including what its subgraphs capture from this scope.
    fn node_reads(node: &Node) -> Vec<String> {
        let mut reads: Vec<String> = node.inputs.iter().filter(|i| !i.is_empty()).cloned().collect();
        for sub in node.subgraphs() {
            reads.extend(sub.captured_names());
        }
        reads
    }

    /// Reorders nodes topologically, keeping the existing order wherever it is already valid
    /// (so output is deterministic). Fails on a cycle or on a value nobody produces.
    pub fn toposort(&mut self) -> Result<()> {
        let mut producer: HashMap<&str, usize> = HashMap::new();
        for (i, n) in self.nodes.iter().enumerate() {
            for o in n.outputs.iter().filter(|o| !o.is_empty()) {
                if producer.insert(o.as_str(), i).is_some() {
                    return Err(Error::Graph(format!("value `{o}` is produced by more than one node")));
                }
            }
        }
        let reads: Vec<Vec<String>> = self.nodes.iter().map(Self::node_reads).collect();
        let n = self.nodes.len();
        let mut indegree = vec![0usize; n];
        let mut users: Vec<Vec<usize>> = vec![Vec::new(); n];
        for (i, r) in reads.iter().enumerate() {
            let mut deps: Vec<usize> = r.iter().filter_map(|v| producer.get(v.as_str()).copied()).collect();
            deps.sort_unstable();
            deps.dedup();
            for d in deps {
                if d == i {
                    return Err(Error::Graph(format!("node `{}` reads its own output", self.nodes[i].name)));
                }
                indegree[i] += 1;
                users[d].push(i);
            }
        }
        // Kahn's algorithm with a min-heap on the original index: stable and deterministic.
        let mut ready: std::collections::BinaryHeap<std::cmp::Reverse<usize>> =
            (0..n).filter(|&i| indegree[i] == 0).map(std::cmp::Reverse).collect();
        let mut order = Vec::with_capacity(n);
        while let Some(std::cmp::Reverse(i)) = ready.pop() {
            order.push(i);
            for &u in &users[i] {
                indegree[u] -= 1;
                if indegree[u] == 0 {
                    ready.push(std::cmp::Reverse(u));
                }
            }
        }
        if order.len() != n {
            let stuck: Vec<&str> =
                (0..n).filter(|i| indegree[*i] > 0).map(|i| self.nodes[i].name.as_str()).take(5).collect();
            return Err(Error::Graph(format!("graph has a cycle through nodes {stuck:?}")));
        }
        let mut old: Vec<Option<Node>> = std::mem::take(&mut self.nodes).into_iter().map(Some).collect();
        self.nodes = order.into_iter().map(|i| old[i].take().expect("each index once")).collect();
        Ok(())
    }

    /// Removes nodes whose outputs reach no graph output, then initializers nothing reads.
    /// Returns how many nodes were removed.
    pub fn remove_dead_nodes(&mut self) -> usize {
        let mut live: HashSet<String> = self.outputs.iter().map(|o| o.name.clone()).collect();
        let mut keep = vec![false; self.nodes.len()];
        for (i, node) in self.nodes.iter().enumerate().rev() {
            if node.outputs.iter().any(|o| live.contains(o)) {
                keep[i] = true;
                live.extend(Self::node_reads(node));
            }
        }
        let before = self.nodes.len();
        let mut it = keep.iter();
        self.nodes.retain(|_| *it.next().expect("one flag per node"));
        self.initializers.retain(|(name, _)| live.contains(name));
        let produced: HashSet<&String> = self.nodes.iter().flat_map(|n| n.outputs.iter()).collect();
        self.value_info.retain(|v| produced.contains(&v.name));
        before - self.nodes.len()
    }

    /// Every name read anywhere in this graph (node inputs, subgraph captures, outputs).
    pub fn used_names(&self) -> HashSet<String> {
        let mut used: HashSet<String> = self.outputs.iter().map(|o| o.name.clone()).collect();
        for node in &self.nodes {
            used.extend(Self::node_reads(node));
        }
        used
    }

    /// The index of the node that produces `value`.
    pub fn producer(&self, value: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n.outputs.iter().any(|o| o == value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, op: &str, inputs: &[&str], outputs: &[&str]) -> Node {
        Node::new(name, op, inputs, outputs)
    }

    fn graph(nodes: Vec<Node>, outputs: &[&str]) -> Graph {
        Graph {
            inputs: vec![ValueInfo::new("x", DType::F32, vec![Dim::Fixed(2)])],
            outputs: outputs.iter().map(|o| ValueInfo::new(*o, DType::F32, vec![Dim::Fixed(2)])).collect(),
            nodes,
            ..Default::default()
        }
    }

    #[test]
    fn toposort_orders_producers_first_and_keeps_valid_order() {
        let mut g = graph(
            vec![
                node("c", "Add", &["a", "b"], &["c"]),
                node("a", "Neg", &["x"], &["a"]),
                node("b", "Neg", &["x"], &["b"]),
            ],
            &["c"],
        );
        g.toposort().unwrap();
        let order: Vec<&str> = g.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(order, ["a", "b", "c"]);
        g.toposort().unwrap();
        assert_eq!(g.nodes.iter().map(|n| n.name.as_str()).collect::<Vec<_>>(), ["a", "b", "c"], "stable");
    }

    #[test]
    fn toposort_reports_cycles_and_double_producers() {
        let mut cyc = graph(vec![node("p", "Neg", &["q"], &["p"]), node("q", "Neg", &["p"], &["q"])], &["p"]);
        assert!(cyc.toposort().unwrap_err().to_string().contains("cycle"));
        let mut dup = graph(vec![node("p", "Neg", &["x"], &["v"]), node("q", "Neg", &["x"], &["v"])], &["v"]);
        assert!(dup.toposort().unwrap_err().to_string().contains("more than one node"));
    }

    #[test]
    fn subgraph_captures_order_their_producers_first() {
        let branch = Graph {
            outputs: vec![ValueInfo::new("y", DType::F32, vec![])],
            nodes: vec![node("inner", "Identity", &["outer"], &["y"])],
            ..Default::default()
        };
        let mut iff = node("if", "If", &["cond"], &["r"]);
        iff.attrs.push(Attr::graph("then_branch", branch.clone()));
        iff.attrs.push(Attr::graph("else_branch", branch));
        let mut g = graph(vec![iff, node("make_outer", "Neg", &["x"], &["outer"]), node("cond", "Neg", &["x"], &["cond"])], &["r"]);
        g.toposort().unwrap();
        let pos = |n: &str| g.nodes.iter().position(|x| x.name == n).unwrap();
        assert!(pos("make_outer") < pos("if"), "the captured value is produced before the If");
        assert_eq!(g.remove_dead_nodes(), 0, "a value read only inside a branch is live");
    }

    #[test]
    fn dead_nodes_and_their_initializers_are_removed() {
        let mut g = graph(
            vec![node("live", "Add", &["x", "w"], &["y"]), node("dead", "Mul", &["x", "unused_w"], &["z"])],
            &["y"],
        );
        g.initializers.push(("w".into(), crate::Recipe::from_f32("w", vec![2], &[1.0, 2.0])));
        g.initializers.push(("unused_w".into(), crate::Recipe::from_f32("u", vec![2], &[1.0, 2.0])));
        assert_eq!(g.remove_dead_nodes(), 1);
        assert_eq!(g.nodes.len(), 1);
        assert!(g.initializer("w").is_some());
        assert!(g.initializer("unused_w").is_none());
    }
}
