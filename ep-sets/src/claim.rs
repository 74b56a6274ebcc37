//! Does an EP run a node? Matching follows ONNX Runtime's kernel lookup: the node's opset must
//! fall in a kernel's range, and for every type constraint the kernel lists, the node's bound
//! element type must be one the kernel registers. Constraints the kernel does not list are not
//! checked (ORT does not check them either).

use std::collections::BTreeMap;

use crate::dtype::DType;
use crate::table::{normalize_domain, EpTable, Kernel};

/// The answer to "does this EP claim this node?".
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim<'a> {
    /// Claimed by `kernel`.
    Yes { kernel: &'a Kernel },
    /// Not claimed; `reason` names what the table does claim for the op, if anything.
    No { reason: String },
}

impl Claim<'_> {
    pub fn is_yes(&self) -> bool {
        matches!(self, Claim::Yes { .. })
    }
}

fn qualified(domain: &str, op: &str) -> String {
    crate::Domain::qualify(domain, op)
}

/// Why `kernel` does not take a node at `opset` with `types`, or `None` if it does.
fn mismatch(kernel: &Kernel, opset: i64, types: &BTreeMap<String, DType>) -> Option<String> {
    if !kernel.covers(opset) {
        return Some(format!("opset {opset} is outside the range"));
    }
    for (name, dtype) in types {
        if let Some(allowed) = kernel.types.get(name) {
            if !allowed.contains(&dtype.elem()) {
                return Some(format!("{name}={dtype} is not registered"));
            }
        }
    }
    None
}

impl EpTable {
    /// Does this EP run `domain`/`op` at model opset `opset` with the given type-constraint
    /// bindings (constraint name -> dtype, e.g. `{"T": F16, "M": I32}`)?
    ///
    /// `opset` is the model's opset import for the op's domain: ORT resolves the schema
    /// version from it, and kernel ranges end where a new schema version starts, so "range
    /// contains the import" is the same test as "range contains the resolved version".
    pub fn claims(&self, domain: &str, op: &str, opset: i64, types: &BTreeMap<String, DType>) -> Claim<'_> {
        let domain = normalize_domain(domain);
        let kernels = self.kernels(domain, op);
        let name = qualified(domain, op);
        if kernels.is_empty() {
            return Claim::No { reason: format!("{} ({}) claims no kernel for {name}", self.name, self.file) };
        }
        let mut why = Vec::new();
        // A real kernel wins over a `host` entry that also matches, whatever their order.
        let (real, host): (Vec<&Kernel>, Vec<&Kernel>) = kernels.iter().partition(|k| !k.host);
        for k in real.into_iter().chain(host) {
            match mismatch(k, opset, types) {
                None => return Claim::Yes { kernel: k },
                Some(w) => why.push(format!("{} ({w})", k.describe())),
            }
        }
        let bound: Vec<String> = types.iter().map(|(k, v)| format!("{k}={v}")).collect();
        Claim::No {
            reason: format!(
                "{} claims {name} only as: {}; the node has opset {opset}{}{}",
                self.name,
                why.join("; "),
                if bound.is_empty() { "" } else { ", " },
                bound.join(", ")
            ),
        }
    }
}
