//! Derived checkpoints for tests: a fixture rewritten with every float tensor in another
//! dtype (to test f16 and bf16 sources), everything else copied as is.

use half::{bf16, f16};
use std::path::Path;

fn convert(data: &[u8], from: safetensors::Dtype, to: ir::DType) -> Vec<u8> {
    let values: Vec<f32> = match from {
        safetensors::Dtype::F32 => data.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect(),
        safetensors::Dtype::F16 => data.chunks_exact(2).map(|c| f16::from_le_bytes([c[0], c[1]]).to_f32()).collect(),
        safetensors::Dtype::BF16 => data.chunks_exact(2).map(|c| bf16::from_le_bytes([c[0], c[1]]).to_f32()).collect(),
        other => panic!("fixture tensor of dtype {other:?}"),
    };
    match to {
        ir::DType::F32 => values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        ir::DType::F16 => values.iter().flat_map(|v| f16::from_f32(*v).to_le_bytes()).collect(),
        ir::DType::BF16 => values.iter().flat_map(|v| bf16::from_f32(*v).to_le_bytes()).collect(),
        other => panic!("cannot convert to {other}"),
    }
}

/// One stored tensor: name, dtype, shape, little-endian bytes.
pub type StoredTensor = (String, safetensors::Dtype, Vec<usize>, Vec<u8>);

/// Copies the checkpoint at `src` into `dst`, passing the tensors of each safetensors file
/// through `edit` (every other file is copied as is; sub-folders, such as a pre-quantized
/// fixture's `dequantized/`, are not).
pub fn rewrite_checkpoint(src: &Path, dst: &Path, mut edit: impl FnMut(Vec<StoredTensor>) -> Vec<StoredTensor>) {
    std::fs::create_dir_all(dst).unwrap();
    for entry in std::fs::read_dir(src).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap();
        if path.is_dir() {
            continue;
        }
        let is_weights = path.extension().is_some_and(|e| e == "safetensors") && name != "reference.safetensors";
        if !is_weights {
            std::fs::copy(&path, dst.join(name)).unwrap();
            continue;
        }
        let bytes = std::fs::read(&path).unwrap();
        let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
        let tensors: Vec<StoredTensor> =
            st.tensors().into_iter().map(|(n, v)| (n, v.dtype(), v.shape().to_vec(), v.data().to_vec())).collect();
        let edited = edit(tensors);
        let views: Vec<(String, safetensors::tensor::TensorView)> = edited
            .iter()
            .map(|(n, dtype, shape, data)| (n.clone(), safetensors::tensor::TensorView::new(*dtype, shape.clone(), data).unwrap()))
            .collect();
        std::fs::write(dst.join(name), safetensors::serialize(views, None).unwrap()).unwrap();
    }
}

/// Copies the checkpoint at `src` into `dst` with every float tensor of every safetensors file
/// stored as `to`.
pub fn convert_checkpoint(src: &Path, dst: &Path, to: ir::DType) {
    let st_dtype = match to {
        ir::DType::F32 => safetensors::Dtype::F32,
        ir::DType::F16 => safetensors::Dtype::F16,
        ir::DType::BF16 => safetensors::Dtype::BF16,
        other => panic!("cannot convert to {other}"),
    };
    rewrite_checkpoint(src, dst, |tensors| {
        tensors.into_iter().map(|(n, d, shape, data)| (n, st_dtype, shape, convert(&data, d, to))).collect()
    });
}
