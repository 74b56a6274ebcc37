//! The tables compiled into the binary, so `tailor` needs no files at run time. `build.rs`
//! lists every `tables/*.toml` here: adding an EP is adding its table, nothing else.

include!(concat!(env!("OUT_DIR"), "/builtin_tables.rs"));
