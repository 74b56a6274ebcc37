//! One insta snapshot per (decoder fixture, EP, dtype) the tables list, per (decoder
//! fixture, EP, quantization) for every `[quant.*]` section (in its dtype, with the table's
//! defaults), per (encoder fixture, EP, dtype) with a `[role.encoder.*]` plan, and per
//! (vision-language fixture, part, EP, dtype) where the table has plans for the vision and
//! embedding roles (`tiny-qwen2_5_vl.vision@cpu-f32`; the decoder part on `inputs_embeds`
//! too): the optimized graph in
//! the text form of [`snapshots::graph_snapshot`], or the build's error message for a build
//! that fails today, so every cell of the matrix is pinned and any change shows up in review
//! (`cargo insta review`, docs/snapshots.md). A second test checks that the snapshot files are
//! exactly that matrix: no cell missing, no stale file left behind.

use std::collections::BTreeSet;
use std::path::Path;

use ep_sets::EpSets;
use tailor_tests::{decoder_fixtures, encoder_fixtures, fixture};

/// One cell: fixture (a vision-language package's part as `fixture.role`), EP, dtype and, for
/// a quantized build, its bits (`int4`).
type Cell = (String, String, String, Option<String>);

/// The roles of a vision-language package's parts, as cells name them.
const VL_PARTS: [ep_sets::Role; 3] = [ep_sets::Role::Vision, ep_sets::Role::Embedding, ep_sets::Role::Decoder];

/// The snapshot name of one cell (insta adds the `graphs__` prefix and `.snap`).
fn cell((fixture, ep, dtype, quant): &Cell) -> String {
    match quant {
        Some(q) => format!("{fixture}@{ep}-{dtype}-{q}"),
        None => format!("{fixture}@{ep}-{dtype}"),
    }
}

/// The optimized graph's text, or `build failed: <message>`.
fn build((fixture_name, ep, dtype, quant): &Cell) -> String {
    let result = (|| -> Result<ir::Model, String> {
        let dt = ir::DType::parse(dtype).ok_or_else(|| format!("unknown dtype {dtype}"))?;
        let req = quant.as_deref().and_then(ep_sets::QuantBits::parse).map(builder::QuantRequest::new);
        if let Some((name, role)) = fixture_name.split_once('.') {
            // One part of a vision-language package, from the plan `build` resolves.
            let parts = builder::optimized_parts(&fixture(name), None, ep, dt, false, req.as_ref()).map_err(|e| e.to_string())?;
            return parts.into_iter().find(|(p, _, _)| p.role.name() == role).map(|(_, m, _)| m).ok_or_else(|| format!("no {role} part"));
        }
        builder::optimized_model_with(&fixture(fixture_name), ep, dt, false, req.as_ref()).map(|(m, _)| m).map_err(|e| e.to_string())
    })();
    match result {
        Ok(m) => snapshots::graph_snapshot(&m),
        Err(e) => format!("build failed: {e}\n"),
    }
}

fn matrix() -> Vec<Cell> {
    let sets = EpSets::builtin().expect("builtin tables are valid");
    let mut out = Vec::new();
    // Every decoder of the fixture registry, each built for every (EP, dtype) and every
    // (EP, quantization).
    for f in decoder_fixtures() {
        for (ep, dtype) in sets.pairs() {
            out.push((f.to_string(), ep.to_string(), dtype.to_string(), None));
        }
        for table in sets.names().filter_map(|n| sets.get(n)) {
            for q in table.quant_plans() {
                out.push((f.to_string(), table.name.clone(), q.dtype.to_string(), Some(q.bits.name().to_string())));
            }
        }
    }
    // Every encoder, built (as feature-extraction) for every (EP, dtype) with an encoder plan.
    for f in encoder_fixtures() {
        for (ep, dtype) in sets.role_pairs(ep_sets::Role::Encoder) {
            out.push((f.to_string(), ep.to_string(), dtype.to_string(), None));
        }
    }
    // Every vision-language fixture's parts, for every (EP, dtype) with vision and embedding
    // plans (the others are refused by the table, with why: tests/tests/vl_parts.rs); not
    // those whose parts are not built (`text_only`: their language model is a plain decoder).
    let embedding: BTreeSet<(&str, ep_sets::DType)> = sets.role_pairs(ep_sets::Role::Embedding).into_iter().collect();
    let parts_built = tailor_tests::fixtures().select("vlm !text_only").expect("a declared selector");
    for f in parts_built.iter().map(|f| f.name.as_str()) {
        for (ep, dtype) in sets.role_pairs(ep_sets::Role::Vision).into_iter().filter(|p| embedding.contains(p)) {
            for role in VL_PARTS {
                out.push((format!("{f}.{}", role.name()), ep.to_string(), dtype.to_string(), None));
            }
        }
    }
    out
}

#[test]
fn optimized_graphs() {
    // One assertion per cell. The first mismatch fails the test; `cargo insta test --review`
    // (or INSTA_FORCE_PASS=1 / INSTA_UPDATE=always) records every changed cell for review.
    let mut settings = insta::Settings::clone_current();
    settings.set_prepend_module_to_snapshot(true);
    settings.set_omit_expression(true);
    settings.set_snapshot_path("../snapshots");
    settings.bind(|| {
        for c in matrix() {
            let text = build(&c);
            let quant = c.3.as_deref().map(|q| format!(" --quant {q}")).unwrap_or_default();
            insta::with_settings!({ description => format!("{} optimized for {} {}{quant}", c.0, c.1, c.2) }, {
                insta::assert_snapshot!(cell(&c), text);
            });
        }
    });
}

#[test]
fn snapshot_files_are_the_matrix() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("snapshots");
    let expected: BTreeSet<String> = matrix().iter().map(|c| format!("graphs__{}.snap", cell(c))).collect();
    let found: BTreeSet<String> = std::fs::read_dir(&dir)
        .map(|rd| rd.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    let missing: Vec<_> = expected.difference(&found).collect();
    let extra: Vec<_> = found.difference(&expected).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "snapshots/snapshots/ must hold exactly one snapshot per (decoder fixture, EP, dtype[, quantization]), (encoder fixture, EP, dtype) and (vision-language fixture, part, EP, dtype).\n\
         missing (run `INSTA_UPDATE=always cargo test -p snapshots`, then review): {missing:?}\n\
         not in the matrix (delete them): {extra:?}"
    );
}
