//! The contrib-op inference declarations (`rules::op_types`) against the installed ONNX
//! Runtime's operator schemas: every declared op exists, each formal input a shape function
//! reads is at the position it says with the name it says, each attribute it reads exists, and
//! the type parameters its dtypes come from (`ep-sets/schemas.toml`) are the wheel's.
//! `schemas_toml_is_current`: the committed schemas are what the generator writes. Needs
//! TAILOR_PYTHON (tests/never-skip).

use serde_json::Value;
use std::process::Command;

const HOW_TO_RUN: &str = "This test reads ONNX Runtime's operator schemas and needs TAILOR_PYTHON: a Python with \
    tests/python/requirements.txt installed (onnxruntime==1.32.0). Run the tests with `scripts/test.sh` (it creates \
    .venv and exports TAILOR_PYTHON=$PWD/.venv/bin/python).";

/// The wheel's schema of every declared op at the opset the graphs use, as JSON:
/// `{"domain.op": {"inputs": [[name, type]], "outputs": [[name, type]], "attrs": [...]}}`.
const DUMP: &str = r#"
import json, sys
from onnxruntime.capi import onnxruntime_pybind11_state as C
wanted = set(tuple(x) for x in json.loads(sys.argv[1]))
opsets = {"": 24, "com.microsoft": 1}
best = {}
for s in C.get_all_operator_schema():
    d = "" if s.domain == "ai.onnx" else s.domain
    if (d, s.name) in wanted and s.since_version <= opsets.get(d, 0):
        if (d, s.name) not in best or s.since_version > best[(d, s.name)].since_version:
            best[(d, s.name)] = s
out = {}
for (d, n), s in best.items():
    out[d + "." + n] = {
        "inputs": [[p.name, p.typeStr] for p in s.inputs],
        "outputs": [[p.name, p.typeStr] for p in s.outputs],
        "attrs": sorted(s.attributes),
    }
print(json.dumps(out))
"#;

#[test]
fn declarations_match_onnx_runtimes_schemas() {
    let py = std::env::var_os("TAILOR_PYTHON").unwrap_or_else(|| panic!("TAILOR_PYTHON is not set.\n{HOW_TO_RUN}"));
    let decls = rules::op_types::DECLARATIONS;
    let wanted: Vec<[&str; 2]> = decls.iter().map(|d| [d.domain, d.op]).collect();
    let out = Command::new(&py)
        .arg("-c")
        .arg(DUMP)
        .arg(serde_json::to_string(&wanted).unwrap())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}\n{HOW_TO_RUN}", py.to_string_lossy()));
    assert!(out.status.success(), "schema dump failed:\n{}\n{HOW_TO_RUN}", String::from_utf8_lossy(&out.stderr));
    let wheel: Value = serde_json::from_slice(&out.stdout).expect("the dump prints JSON");
    let ours = ep_sets::OpSchemas::builtin().unwrap();
    for d in decls {
        let key = format!("{}.{}", d.domain, d.op);
        let w = wheel.get(&key).unwrap_or_else(|| panic!("ONNX Runtime has no schema for {key}"));
        let formal = |list: &str| -> Vec<(String, String)> {
            w[list].as_array().unwrap().iter().map(|p| (p[0].as_str().unwrap().to_string(), p[1].as_str().unwrap().to_string())).collect()
        };
        let (inputs, outputs) = (formal("inputs"), formal("outputs"));
        for &(i, name) in d.inputs {
            assert_eq!(inputs.get(i).map(|p| p.0.as_str()), Some(name), "{key}: input {i} is not `{name}` in ONNX Runtime's schema");
        }
        let attrs: Vec<&str> = w["attrs"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
        for a in d.attrs {
            assert!(attrs.contains(a), "{key}: ONNX Runtime's schema has no attribute `{a}` ({attrs:?})");
        }
        let s = ours.get(d.domain, d.op).unwrap_or_else(|| panic!("{key} is not in ep-sets/schemas.toml"));
        let types = |l: &[(String, String)]| l.iter().map(|p| p.1.clone()).collect::<Vec<_>>();
        assert_eq!((s.inputs.clone(), s.outputs.clone()), (types(&inputs), types(&outputs)), "{key}: ep-sets/schemas.toml is stale (ep-sets/tools/gen_schemas.py)");
    }
}

/// `ep-sets/schemas.toml` is what `ep-sets/tools/gen_schemas.py` writes from the tables' claims,
/// the declared ops and the installed wheel: a claim or declaration added without
/// regenerating it would leave its dtypes unbound.
#[test]
fn schemas_toml_is_current() {
    let py = std::env::var_os("TAILOR_PYTHON").unwrap_or_else(|| panic!("TAILOR_PYTHON is not set.\n{HOW_TO_RUN}"));
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = Command::new(&py)
        .arg("ep-sets/tools/gen_schemas.py")
        .current_dir(&root)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}\n{HOW_TO_RUN}", py.to_string_lossy()));
    assert!(out.status.success(), "gen_schemas.py failed:\n{}\n{HOW_TO_RUN}", String::from_utf8_lossy(&out.stderr));
    let committed = std::fs::read_to_string(root.join("ep-sets/schemas.toml")).unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout) == committed,
        "ep-sets/schemas.toml is stale: run `$TAILOR_PYTHON ep-sets/tools/gen_schemas.py > ep-sets/schemas.toml` from the repository root"
    );
}
