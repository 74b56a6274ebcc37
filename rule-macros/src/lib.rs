//! `include_rules!("dir")` compiles every `.rule` file in `dir` (relative to the calling
//! crate's manifest) into Rust: one matcher and one emitter per rule, plus a static registry.
//!
//! * Matching is compiled: each rule becomes straight-line code specialised to its operators,
//!   operand slots, attributes and checks; nothing parses or interprets rules at run time.
//! * Editing a `.rule` file rebuilds its users: the expansion `include_bytes!`s every file.
//! * An error in a `.rule` file becomes a `compile_error!` that starts with `file:line:col`.
//! * The generated code is visible: it is kept as the string `generated::SOURCE`, and written
//!   to `$TAILOR_RULES_DUMP/rules_generated.rs` when that variable is set during the build.

mod codegen;

use proc_macro::TokenStream;
use std::path::PathBuf;

#[proc_macro]
pub fn include_rules(input: TokenStream) -> TokenStream {
    let lit: syn::LitStr = match syn::parse(input) {
        Ok(l) => l,
        Err(e) => return e.to_compile_error().into(),
    };
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default());
    let crate_name = manifest.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
    let dir = manifest.join(lit.value());
    let shown = format!("{crate_name}/{}", lit.value());
    let files = match rule_dsl::load_dir(&dir, &shown) {
        Ok(f) => f,
        Err(e) => {
            let msg = format!("invalid .rule files:\n{e}");
            return quote::quote_spanned!(lit.span() => compile_error!(#msg);).into();
        }
    };
    let out = codegen::generate(&files);
    if let Ok(dump) = std::env::var("TAILOR_RULES_DUMP") {
        let _ = std::fs::create_dir_all(&dump);
        let _ = std::fs::write(PathBuf::from(dump).join("rules_generated.rs"), out.to_string());
    }
    out.into()
}
