//! The shipped rules parse and pass every semantic check.

#[test]
fn shipped_rules_are_clean() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../rules/rules");
    let files = rule_dsl::load_dir(&dir, "rules/rules").unwrap_or_else(|e| panic!("{e}"));
    let ids: Vec<&str> = files.iter().flat_map(|(_, f)| f.rules.iter().map(|r| r.id.as_str())).collect();
    assert!(ids.contains(&"fuse.skip_rms_norm") && ids.contains(&"fuse.gqa_rotary") && ids.contains(&"fuse.gqa"), "{ids:?}");
}
