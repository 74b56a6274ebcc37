//! How a rules directory is laid out, so that a rule is found from its id: one rule family per
//! file, the file named after the family's base id (`fuse.rms_norm.rule` holds `fuse.rms_norm`
//! and its variants `fuse.rms_norm.*`); shared fragments in `fragments/<topic>.rule`, which
//! hold no rules; the set's domains in `prelude.rule`. ruleck's `layout` check enforces it.

/// The subdirectory of shared fragment files.
pub const FRAGMENTS_DIR: &str = "fragments";

/// The base id of `id`'s family: the shortest id that `id` extends at a dot and that is a rule
/// (`is_rule`), or `id` itself. Variants of variants belong to the first base:
/// `fuse.rms_norm.div.mul` -> `fuse.rms_norm` when that is a rule.
pub fn family(id: &str, is_rule: impl Fn(&str) -> bool) -> &str {
    id.match_indices('.').map(|(i, _)| &id[..i]).find(|prefix| is_rule(prefix)).unwrap_or(id)
}

/// The file name that holds family `base`.
pub fn family_file(base: &str) -> String {
    format!("{base}.rule")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variants_of_variants_belong_to_the_first_base() {
        let rules = ["fuse.rms_norm", "fuse.rms_norm.div", "fuse.rms_norm.div.mul", "fuse.gqa", "fuse.gqa_rotary.window"];
        let is_rule = |id: &str| rules.contains(&id);
        assert_eq!(family("fuse.rms_norm.div.mul", is_rule), "fuse.rms_norm");
        assert_eq!(family("fuse.rms_norm", is_rule), "fuse.rms_norm");
        // `fuse.gqa_rotary` extends `fuse.gqa` only as a string, not at a dot.
        assert_eq!(family("fuse.gqa_rotary.window", is_rule), "fuse.gqa_rotary.window");
        assert_eq!(family_file("fuse.gqa"), "fuse.gqa.rule");
    }
}
