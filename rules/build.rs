//! Rebuild when a `.rule` file is added or removed (edits to existing files are tracked by the
//! `include_bytes!` in the macro's expansion).
fn main() {
    println!("cargo:rerun-if-changed=rules");
}
