//! Operator domains. ONNX writes the default domain two ways, `""` and `"ai.onnx"`; this is
//! the one place that knows they are the same, so no crate compares domain strings itself.

use serde::Serialize;

/// An operator domain, with the default ONNX domain in one spelling.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Domain {
    /// The default domain (`""` or `"ai.onnx"`).
    Onnx,
    /// `com.microsoft`, ONNX Runtime's contrib operators.
    Microsoft,
    Other(String),
}

impl Domain {
    /// The name of the default domain where one must be shown (`ai.onnx`).
    pub const ONNX: &'static str = "ai.onnx";
    pub const MICROSOFT: &'static str = "com.microsoft";

    /// The domain a node's or table's domain string names.
    pub fn parse(s: &str) -> Domain {
        match s {
            "" | Domain::ONNX => Domain::Onnx,
            Domain::MICROSOFT => Domain::Microsoft,
            other => Domain::Other(other.to_string()),
        }
    }

    /// Whether two domain strings name the same domain.
    pub fn same(a: &str, b: &str) -> bool {
        normalize(a) == normalize(b)
    }

    /// Whether `s` names the default ONNX domain.
    pub fn is_onnx(s: &str) -> bool {
        normalize(s).is_empty()
    }

    /// The spelling nodes and tables store: `""` for the default domain.
    pub fn key(&self) -> &str {
        match self {
            Domain::Onnx => "",
            Domain::Microsoft => Domain::MICROSOFT,
            Domain::Other(s) => s,
        }
    }

    /// The spelling messages show: `ai.onnx` for the default domain.
    pub fn shown(&self) -> &str {
        match self {
            Domain::Onnx => Domain::ONNX,
            other => other.key(),
        }
    }

    /// `op` qualified for messages: `MatMul` for the default domain, `com.microsoft.X` else.
    pub fn qualify(s: &str, op: &str) -> String {
        if Domain::is_onnx(s) { op.to_string() } else { format!("{s}.{op}") }
    }
}

/// The stored spelling of a domain string: `""` for the default domain.
pub fn normalize(domain: &str) -> &str {
    if domain == Domain::ONNX { "" } else { domain }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_spellings_of_the_default_domain_are_one() {
        assert_eq!(Domain::parse(""), Domain::parse("ai.onnx"));
        assert!(Domain::same("", "ai.onnx") && !Domain::same("", "com.microsoft"));
        assert_eq!((Domain::Onnx.key(), Domain::Onnx.shown()), ("", "ai.onnx"));
        assert_eq!(Domain::parse("com.microsoft"), Domain::Microsoft);
        assert_eq!(Domain::qualify("ai.onnx", "Add"), "Add");
        assert_eq!(Domain::qualify("com.microsoft", "GroupQueryAttention"), "com.microsoft.GroupQueryAttention");
    }
}
