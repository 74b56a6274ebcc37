//! `include_rules!("dir")` compiles every `.rule` file in `dir` (relative to the calling
//! crate's manifest) into Rust: one matcher and one emitter per rule, plus a static registry.
//!
//! * Matching is compiled: each rule becomes straight-line code specialised to its operators,
//!   operand slots, attributes and checks; nothing parses or interprets rules at run time.
//! * Editing a `.rule` file rebuilds its users: the expansion `include_bytes!`s every file
//!   (and the `rules` crate's build script watches the directory for new files).
//! * An error in a `.rule` file becomes a `compile_error!` whose text starts with
//!   `file:line:col`, so it shows up in the compiler's output like any Rust error.
//! * The generated code is visible: it is kept as the string `generated::SOURCE`, and written
//!   to `$TAILOR_RULES_DUMP/rules_generated.rs` when that variable is set during the build.

mod codegen;

use proc_macro::TokenStream;
use std::path::{Path, PathBuf};

#[proc_macro]
pub fn include_rules(input: TokenStream) -> TokenStream {
    let lit: syn::LitStr = match syn::parse(input) {
        Ok(l) => l,
        Err(e) => return e.to_compile_error().into(),
    };
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default());
    let crate_name = manifest.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
    let shown = format!("{crate_name}/{}", lit.value());
    let out = expand(&manifest.join(lit.value()), &shown);
    if let Ok(dump) = std::env::var("TAILOR_RULES_DUMP") {
        let _ = std::fs::create_dir_all(&dump);
        let _ = std::fs::write(PathBuf::from(dump).join("rules_generated.rs"), out.to_string());
    }
    out.into()
}

/// The expansion for the rules in `dir` (shown in messages as `shown`): generated code, or a
/// `compile_error!` listing every problem with its `file:line:col`.
fn expand(dir: &Path, shown: &str) -> proc_macro2::TokenStream {
    match rule_dsl::load_dir(dir, shown) {
        Ok(files) => codegen::generate(&files),
        Err(e) => {
            let msg = format!("invalid .rule files:\n{e}");
            quote::quote!(compile_error!(#msg);)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_in_a_rule_file_reaches_the_compiler_with_its_position() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("bad.rule"),
            "use domain ai.onnx as onnx opset 24\nrule fuse.bad {\n  stage fuse\n  match {\n    ?y = onnx.Relu(?x)\n    root ?y\n  }\n  check c: rank(?z) == 1 else \"no\"\n}\n",
        )
        .unwrap();
        let out = expand(dir.path(), "rules/rules").to_string();
        assert!(out.starts_with("compile_error !"), "{out}");
        assert!(out.contains("rules/rules/bad.rule:8:17: error: capture `?z` is not bound by the match block"), "{out}");
    }

    #[test]
    fn good_rules_expand_to_tracked_matchers() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../rules/rules");
        let out = expand(&dir, "rules/rules").to_string();
        assert!(out.contains("include_bytes !"), "edits to .rule files must rebuild the crate");
        assert!(out.contains("pub fn matcher") && out.contains("\"RotaryEmbedding\""));
    }
}
