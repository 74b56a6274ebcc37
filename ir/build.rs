//! Generates the ONNX protobuf types from the vendored `proto/onnx.proto` with protox, a
//! pure-Rust protobuf compiler, so building needs no `protoc` on the machine.

fn main() {
    let proto = "proto/onnx.proto";
    println!("cargo:rerun-if-changed={proto}");
    let descriptors = protox::compile([proto], ["proto"]).expect("vendored onnx.proto must compile");
    prost_build::Config::new()
        .compile_fds(descriptors)
        .expect("prost code generation for onnx.proto");
}
