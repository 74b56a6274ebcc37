//! The tables compiled into the binary, so `tailor` needs no files at run time.
//! Adding an EP: add `tables/<name>.toml` and one line here.

pub(crate) const TABLES: &[(&str, &str)] = &[
    ("default.toml", include_str!("../tables/default.toml")),
    ("cpu.toml", include_str!("../tables/cpu.toml")),
    ("cuda.toml", include_str!("../tables/cuda.toml")),
    ("dml.toml", include_str!("../tables/dml.toml")),
    ("webgpu.toml", include_str!("../tables/webgpu.toml")),
    ("trt-rtx.toml", include_str!("../tables/trt-rtx.toml")),
];
