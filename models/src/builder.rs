//! A small helper for writing graphs: adds nodes with readable, unique names and remembers the
//! float dtype the graph is built in.

use ir::{Attr, DType, Dim, Graph, Node, Recipe, ValueInfo};
use std::collections::{BTreeMap, BTreeSet, HashSet};

pub struct GraphBuilder {
    pub graph: Graph,
    /// Element type of weights and activations.
    pub float: DType,
    /// The projections (checkpoint scopes) that get a LoRA slot ([`crate::lora`]); empty for a
    /// plain package.
    pub lora: BTreeSet<String>,
    names: HashSet<String>,
}

impl GraphBuilder {
    pub fn new(name: &str, float: DType) -> Self {
        GraphBuilder { graph: Graph { name: name.into(), ..Default::default() }, float, lora: BTreeSet::new(), names: HashSet::new() }
    }

    fn claim(&mut self, name: String) -> String {
        if self.names.insert(name.clone()) {
            return name;
        }
        (1..).map(|i| format!("{name}_{i}")).find(|n| self.names.insert(n.clone())).expect("unbounded")
    }

    pub fn input(&mut self, name: &str, dtype: DType, shape: Vec<Dim>) -> String {
        let name = self.claim(name.into());
        self.graph.inputs.push(ValueInfo::new(name.clone(), dtype, shape));
        name
    }

    /// Declares `value` a graph output with the given type.
    pub fn output(&mut self, value: &str, dtype: DType, shape: Vec<Dim>) {
        self.graph.outputs.push(ValueInfo::new(value, dtype, shape));
    }

    /// Records the type of an intermediate value (written as value_info).
    pub fn annotate(&mut self, value: &str, dtype: DType, shape: Vec<Dim>) {
        self.graph.value_info.push(ValueInfo::new(value, dtype, shape));
    }

    pub fn initializer(&mut self, name: &str, recipe: Recipe) -> String {
        let name = self.claim(name.into());
        self.graph.initializers.push((name.clone(), recipe));
        name
    }

    pub fn const_i64(&mut self, name: &str, values: &[i64]) -> String {
        let shape = if values.len() == 1 { vec![] } else { vec![values.len()] };
        self.initializer(name, Recipe::from_i64(name, shape, values))
    }

    pub fn const_i64_1d(&mut self, name: &str, values: &[i64]) -> String {
        self.initializer(name, Recipe::from_i64(name, vec![values.len()], values))
    }

    /// Adds a default-domain node named `name` with `n_out` outputs named `name/out<i>`.
    pub fn node(&mut self, name: &str, op: &str, inputs: &[&str], attrs: Vec<Attr>, n_out: usize) -> Vec<String> {
        let name = self.claim(name.into());
        let outputs: Vec<String> =
            (0..n_out).map(|i| self.claim(if n_out == 1 { format!("{name}/out") } else { format!("{name}/out{i}") })).collect();
        self.push(name, op, inputs, attrs, outputs.clone());
        outputs
    }

    /// Like [`GraphBuilder::node`] but with explicit output names (graph outputs, or `""` for
    /// an omitted optional output).
    pub fn node_named(&mut self, name: &str, op: &str, inputs: &[&str], attrs: Vec<Attr>, outputs: &[&str]) {
        let name = self.claim(name.into());
        let outputs = outputs.iter().map(|o| if o.is_empty() { String::new() } else { self.claim(o.to_string()) }).collect();
        self.push(name, op, inputs, attrs, outputs);
    }

    fn push(&mut self, name: String, op: &str, inputs: &[&str], attrs: Vec<Attr>, outputs: Vec<String>) {
        self.graph.nodes.push(Node {
            name,
            op: op.into(),
            domain: String::new(),
            opset: ir::OPSET,
            inputs: inputs.iter().map(|s| s.to_string()).collect(),
            outputs,
            attrs,
            metadata: BTreeMap::new(),
        });
    }

    /// A single-output node; returns its output name.
    pub fn op(&mut self, name: &str, op: &str, inputs: &[&str], attrs: Vec<Attr>) -> String {
        self.node(name, op, inputs, attrs, 1).remove(0)
    }

    pub fn finish(self) -> Graph {
        self.graph
    }
}
