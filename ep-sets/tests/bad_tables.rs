//! Bad tables give errors that name the file and the line.

use ep_sets::{DType, EpSets, Error};

const GOOD_HEAD: &str = r#"[ep]
name = "toy"
provider = "ToyExecutionProvider"

[role.decoder.f16]
fuse = ["fuse.gqa"]
required = ["fuse.gqa"]
"#;

fn load(text: &str) -> Result<EpSets, Error> {
    EpSets::from_sources([("toy.toml".to_string(), text.to_string())])
}

fn problems(text: &str) -> Vec<String> {
    match load(text) {
        Err(Error::Invalid { problems }) => problems.iter().map(|p| p.to_string()).collect(),
        Err(e) => panic!("expected validation problems, got {e}"),
        Ok(_) => panic!("expected validation problems, got a valid table"),
    }
}

#[test]
fn good_toy_table_is_valid() {
    let s = load(GOOD_HEAD).unwrap();
    assert_eq!(s.pairs(), [("toy", DType::F16)]);
}

#[test]
fn exclusion_without_why_names_file_and_line() {
    let text = format!("{GOOD_HEAD}\n[[exclude]]\nrule = \"fuse.pack_qkv\"\n");
    let p = problems(&text);
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(p[0].starts_with("toy.toml:9:") && p[0].contains("no `why`"), "{p:?}");
}

#[test]
fn unknown_dtype_names_file_and_line() {
    let text = format!("{GOOD_HEAD}\n[role.decoder.f8]\nfuse = []\n");
    let p = problems(&text);
    assert!(p.iter().any(|m| m.starts_with("toy.toml:") && m.contains("unknown dtype `f8`")), "{p:?}");
    let line: usize = p[0].split(':').nth(1).unwrap().parse().unwrap();
    assert!((9..=11).contains(&line), "{p:?}");
}

#[test]
fn rule_in_fuse_and_lower_points_at_the_second() {
    let text = GOOD_HEAD.replace("required", "lower = [\"fuse.gqa\"]\nrequired");
    let p = problems(&text);
    assert!(p.iter().any(|m| m.starts_with("toy.toml:7:") && m.contains("listed twice")), "{p:?}");
}

#[test]
fn required_rule_must_be_fused() {
    let text = GOOD_HEAD.replace("required = [\"fuse.gqa\"]", "required = [\"fuse.gqa\", \"fuse.skip_rms_norm\"]");
    let p = problems(&text);
    assert!(p.iter().any(|m| m.starts_with("toy.toml:7:") && m.contains("required `fuse.skip_rms_norm`")), "{p:?}");
}

#[test]
fn fuse_then_undo_is_rejected() {
    let text = GOOD_HEAD
        .replace("fuse = [\"fuse.gqa\"]", "fuse = [\"fuse.gqa\", \"fuse.pack_qkv\"]\nlower = [\"lower.unpack_qkv\"]")
        .replace("required = [\"fuse.gqa\"]", "required = [\"fuse.gqa\", \"fuse.pack_qkv\"]");
    let p = problems(&text);
    assert!(p.iter().any(|m| m.contains("undoes it with `lower.unpack_qkv`")), "{p:?}");
}

#[test]
fn claim_without_source_and_bad_dtype() {
    let text = format!("{GOOD_HEAD}\n[[ops.\"\".MatMul]]\nsince = 13\nT = [\"float\"]\n");
    let p = problems(&text);
    assert!(p.iter().any(|m| m.contains("no `source`")), "{p:?}");
    assert!(p.iter().any(|m| m.contains("unknown dtype `float`")), "{p:?}");
}

#[test]
fn unknown_flag_and_stage_mismatch() {
    let text = GOOD_HEAD.replace("required", "flags = [\"concrete_dimz\"]\nprefuse = [\"fuse.rms_norm\"]\nrequired");
    let p = problems(&text);
    assert!(p.iter().any(|m| m.contains("unknown structural flag `concrete_dimz`")), "{p:?}");
    assert!(p.iter().any(|m| m.contains("does not belong in the `prefuse` list")), "{p:?}");
}

#[test]
fn syntax_error_names_file_and_line() {
    let err = load("[ep]\nname = \"toy\"\nprovider = \n").unwrap_err();
    let msg = err.to_string();
    assert!(msg.starts_with("toy.toml:3:"), "{msg}");
}

#[test]
fn unknown_key_is_a_parse_error() {
    let err = load(&GOOD_HEAD.replace("required", "requried")).unwrap_err();
    assert!(matches!(err, Error::Parse { .. }), "{err}");
    assert!(err.to_string().starts_with("toy.toml:"), "{err}");
}

#[test]
fn file_name_must_match_ep_name() {
    let err = EpSets::from_sources([("other.toml".to_string(), GOOD_HEAD.to_string())]).unwrap_err();
    assert!(err.to_string().contains("differs from the file name"), "{err}");
}

#[test]
fn quant_sections_are_checked_against_the_table() {
    // dtype without a plan, accuracy level out of range, unclaimed ops, no why.
    let text = format!(
        "{GOOD_HEAD}\n[quant.int4]\nformat = \"matmul_nbits\"\ndtype = \"f32\"\naccuracy_level = 7\nlm_head = \"int4\"\nembeddings = \"int4\"\n"
    );
    let p = problems(&text);
    let has = |s: &str| p.iter().any(|m| m.starts_with("toy.toml:") && m.contains(s));
    assert!(has("dtype `f32` has no [role.decoder.f32] section"), "{p:?}");
    assert!(has("accuracy_level 7"), "{p:?}");
    assert!(has("com.microsoft.MatMulNBits nodes, which the table does not claim"), "{p:?}");
    assert!(has("com.microsoft.GatherBlockQuantized nodes"), "{p:?}");
    assert!(has("no `why`"), "{p:?}");
    // A bit width nobody knows, and a default dtype without a section.
    let text = GOOD_HEAD.replace("provider = \"ToyExecutionProvider\"", "provider = \"ToyExecutionProvider\"\ndefault_dtype = \"bf16\"")
        + "\n[quant.int3]\nformat = \"matmul_nbits\"\ndtype = \"f16\"\nlm_head = \"none\"\nembeddings = \"none\"\nwhy = \"x\"\n";
    let p = problems(&text);
    assert!(p.iter().any(|m| m.contains("unknown quantization `[quant.int3]`")), "{p:?}");
    assert!(p.iter().any(|m| m.contains("ep.default_dtype `bf16`")), "{p:?}");
}

#[test]
fn default_dtypes_come_from_the_table() {
    use ep_sets::QuantBits;
    let sets = EpSets::builtin().unwrap();
    let cpu = sets.get("cpu").unwrap();
    assert_eq!(cpu.default_dtype(None), DType::F32);
    assert_eq!(cpu.default_dtype(Some(QuantBits::Int4)), DType::F32);
    let cuda = sets.get("cuda").unwrap();
    assert_eq!(cuda.default_dtype(None), DType::F16, "cuda has no f32 section");
    assert_eq!(cuda.default_dtype(Some(QuantBits::Int8)), DType::F16, "cuda's [quant.int8] dtype");
    assert!(sets.get("trt-rtx").unwrap().quant(QuantBits::Int8).is_none());
    assert_eq!(sets.get("webgpu").unwrap().default_dtype(Some(QuantBits::Int8)), DType::F16, "webgpu's [quant.int8] dtype");
    let s = load(GOOD_HEAD).unwrap();
    assert_eq!(s.get("toy").unwrap().default_dtype(None), DType::F16, "the only dtype");
}

/// The decoder's plans were once `[dtype.D]` sections: such a table is refused with the new
/// name, at the section's line, so an old table is fixed rather than silently empty.
#[test]
fn old_dtype_sections_are_refused_with_their_new_name() {
    let text = "[ep]\nname = \"toy\"\nprovider = \"ToyExecutionProvider\"\n\n[dtype.f16]\nfuse = []\n";
    let e = load(text).unwrap_err().to_string();
    assert!(e.starts_with("toy.toml:5:") || e.starts_with("toy.toml:6:"), "{e}");
    assert!(e.contains("`[dtype.f16]` is the old spelling") && e.contains("`[role.decoder.f16]`"), "{e}");
}

/// `[[refuse]]`: a refusal's why is what the build's error quotes; one without a why, of an
/// unknown role or of the decoder, of a dtype the table does not list, or contradicting a plan
/// the table has, is a problem naming the line.
#[test]
fn refusals_need_a_why_and_a_role_the_table_does_not_build() {
    let text = format!("{GOOD_HEAD}\n[[refuse]]\nrole = \"vision\"\nwhy = \"no kernel for Compress\"\n");
    let sets = load(&text).unwrap();
    let e = sets.role_plan("toy", ep_sets::Role::Vision, DType::F16).unwrap_err().to_string();
    assert!(e.contains("does not build the vision role in f16: no kernel for Compress") && e.contains("[[refuse]]"), "{e}");
    // Without a refusal the lookup names the missing section.
    let e = load(GOOD_HEAD).unwrap().role_plan("toy", ep_sets::Role::Vision, DType::F16).unwrap_err().to_string();
    assert!(e.contains("has no [role.vision.f16] section"), "{e}");

    let p = problems(&format!("{GOOD_HEAD}\n[[refuse]]\nrole = \"vision\"\n"));
    assert!(p.len() == 1 && p[0].starts_with("toy.toml:9:") && p[0].contains("refusal of role `vision` has no `why`"), "{p:?}");
    let p = problems(&format!("{GOOD_HEAD}\n[[refuse]]\nrole = \"speech\"\nwhy = \"x\"\n"));
    assert!(p.iter().any(|m| m.contains("refusal of role `speech` names no role")), "{p:?}");
    let p = problems(&format!("{GOOD_HEAD}\n[[refuse]]\nrole = \"decoder\"\nwhy = \"x\"\n"));
    assert!(p.iter().any(|m| m.contains("the decoder's dtypes are the EP's dtypes")), "{p:?}");
    let p = problems(&format!("{GOOD_HEAD}\n[[refuse]]\nrole = \"vision\"\ndtype = \"f32\"\nwhy = \"x\"\n"));
    assert!(p.iter().any(|m| m.contains("names dtype `f32`, which the table does not list")), "{p:?}");
    let p = problems(&format!("{GOOD_HEAD}\n[role.vision.f16]\n\n[[refuse]]\nrole = \"vision\"\nwhy = \"x\"\n"));
    assert!(p.iter().any(|m| m.contains("contradicts the table's [role.vision.f16]")), "{p:?}");
}
