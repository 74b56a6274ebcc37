//! The role of a sub-model in a package. A package holds one or more sub-models, and the EP
//! pipeline runs per role with the rule lists the table gives that role, so an encoder never
//! meets the GroupQueryAttention or KV-cache rules a decoder's plan lists.

use std::fmt;

/// What a sub-model does. Each role has its own `[role.<name>.D]` sections in a table
/// (docs/ep-tables.md, "Roles").
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    /// A causal LM with a KV cache (task `causal-lm`).
    Decoder,
    /// A bidirectional encoder without a cache (tasks `feature-extraction`,
    /// `sentence-embedding`).
    Encoder,
    /// A vision tower: pixels to image features in the text model's hidden size.
    Vision,
    /// A multimodal embedding: token ids and image features to the decoder's input embeddings.
    Embedding,
}

impl Role {
    /// Every role, in the order reports list them.
    pub const ALL: [Role; 4] = [Role::Decoder, Role::Encoder, Role::Vision, Role::Embedding];

    /// The name tables and reports use.
    pub fn name(self) -> &'static str {
        match self {
            Role::Decoder => "decoder",
            Role::Encoder => "encoder",
            Role::Vision => "vision",
            Role::Embedding => "embedding",
        }
    }

    /// The role named `name`, if there is one.
    pub fn parse(name: &str) -> Option<Role> {
        Role::ALL.into_iter().find(|r| r.name() == name)
    }

    /// How a table spells this role's section for dtype `dtype` (`[role.decoder.f32]`,
    /// `[role.encoder.f32]`), for messages.
    pub fn section(self, dtype: crate::DType) -> String {
        format!("[role.{}.{dtype}]", self.name())
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
