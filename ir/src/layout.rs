//! Where each external tensor goes in `model.onnx.data`. Kept apart from the writer so the
//! arithmetic (page alignment, 64-bit offsets past 4 GiB) is tested without writing gigabytes.

/// Every external tensor starts at a multiple of this many bytes: a page, so runtimes can map a
/// tensor's pages directly, and the writer can write tensors with direct I/O without two
/// tensors ever sharing a page (see `direct.rs`). The padding costs at most a page per tensor.
pub const DATA_ALIGNMENT: u64 = 4096;

/// Tensors smaller than this stay inline in `model.onnx` (shape constants, scalars).
pub const INLINE_LIMIT: usize = 1024;

/// One tensor's place in the data file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataSlot {
    pub offset: u64,
    pub len: u64,
}

/// Places tensors of the given byte sizes one after another, each aligned.
pub fn layout_external_data(sizes: &[u64]) -> Vec<DataSlot> {
    let mut offset = 0u64;
    sizes
        .iter()
        .map(|&len| {
            offset = offset.div_ceil(DATA_ALIGNMENT) * DATA_ALIGNMENT;
            let slot = DataSlot { offset, len };
            offset += len;
            slot
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_are_aligned_and_64_bit() {
        const GIB: u64 = 1 << 30;
        let slots = layout_external_data(&[3 * GIB + 1, 3 * GIB, 10, 7]);
        assert_eq!(slots[0].offset, 0);
        assert_eq!(slots[1].offset, 3 * GIB + DATA_ALIGNMENT);
        assert_eq!(slots[2].offset, 6 * GIB + DATA_ALIGNMENT);
        assert!(slots[2].offset > u32::MAX as u64);
        assert_eq!(slots[3].offset, 6 * GIB + 2 * DATA_ALIGNMENT);
        assert!(slots.iter().all(|s| s.offset % DATA_ALIGNMENT == 0));
    }
}
