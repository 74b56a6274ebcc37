//! Streaming writes of external data. Each initializer is produced in blocks of at most
//! `block_bytes` and written with positioned writes at its final offset, so:
//!
//! * memory stays bounded by `threads x block_bytes` (times a small constant) whatever the
//!   model's size: no tensor is held whole unless it is smaller than a block;
//! * blocks are independent tasks that rayon runs in parallel, and the file is byte-identical
//!   whatever the thread count, because every block lands at a position fixed in advance;
//! * a transposed weight (`[out, in]` checkpoints, a tied `lm_head`) is written in row bands:
//!   read a band of source rows, transpose it in memory, scatter its columns to the output rows.
//!
//! Source bytes are read with `pread`, not through the mapping, so reading a checkpoint does not
//! leave its pages resident in the process.

use crate::recipe::cast_bytes;
use crate::{DataSlot, Error, Recipe, Result};
use rayon::prelude::*;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// How the data file is written.
#[derive(Clone, Copy, Debug)]
pub struct WriteOptions {
    /// Largest block of output produced at once, per thread.
    pub block_bytes: usize,
    /// Worker threads; 0 means one per core.
    pub threads: usize,
}

impl Default for WriteOptions {
    fn default() -> Self {
        WriteOptions { block_bytes: 16 << 20, threads: 0 }
    }
}

impl Recipe {
    /// An equivalent recipe whose transposes sit on top, where the writer can stream them:
    /// element-wise casts move below transposes, and a concat of transposed matrices along
    /// axis 1 becomes the transpose of a concat along axis 0.
    pub fn normalized(&self) -> Recipe {
        match self {
            Recipe::Cast { input, to } => match input.normalized() {
                Recipe::Transpose { input: inner, perm } => {
                    Recipe::Transpose { input: Box::new(Recipe::Cast { input: inner, to: *to }.normalized()), perm }
                }
                other => Recipe::Cast { input: Box::new(other), to: *to },
            },
            Recipe::Concat { inputs, axis } => {
                let parts: Vec<Recipe> = inputs.iter().map(Recipe::normalized).collect();
                let all_2d_transposed = *axis == 1
                    && parts.iter().all(|p| matches!(p, Recipe::Transpose { perm, .. } if perm == &[1, 0]));
                if all_2d_transposed {
                    let inner: Vec<Recipe> = parts
                        .into_iter()
                        .map(|p| match p {
                            Recipe::Transpose { input, .. } => *input,
                            _ => unreachable!("checked above"),
                        })
                        .collect();
                    Recipe::Transpose { input: Box::new(Recipe::Concat { inputs: inner, axis: 0 }), perm: vec![1, 0] }
                } else {
                    Recipe::Concat { inputs: parts, axis: *axis }
                }
            }
            Recipe::Slice { input, axis, start, end } => {
                Recipe::Slice { input: Box::new(input.normalized()), axis: *axis, start: *start, end: *end }
            }
            Recipe::Reshape { input, shape } => Recipe::Reshape { input: Box::new(input.normalized()), shape: shape.clone() },
            Recipe::Transpose { input, perm } => Recipe::Transpose { input: Box::new(input.normalized()), perm: perm.clone() },
            leaf => leaf.clone(),
        }
    }

    /// Whether any flat element range can be read without materializing the whole tensor
    /// (true when the recipe has no transpose).
    pub fn is_streamable(&self) -> bool {
        match self {
            Recipe::Source(_) | Recipe::Data(_) => true,
            Recipe::Transpose { .. } => false,
            Recipe::Cast { input, .. } | Recipe::Slice { input, .. } | Recipe::Reshape { input, .. } => {
                input.is_streamable()
            }
            Recipe::Concat { inputs, .. } => inputs.iter().all(Recipe::is_streamable),
        }
    }

    /// Bytes of flat elements `start..end` (row-major). Recipes that are not streamable are
    /// materialized whole first.
    pub fn read_elements(&self, start: usize, end: usize) -> Result<Vec<u8>> {
        let esize = self.dtype().size();
        match self {
            Recipe::Source(t) => {
                if (end * esize) > t.len {
                    return Err(Error::Recipe {
                        tensor: t.name.clone(),
                        reason: format!("{} bytes stored for {}{:?}", t.len, t.dtype, t.shape),
                    });
                }
                t.file.read_at((t.offset + start * esize) as u64, (end - start) * esize)
            }
            Recipe::Data(d) => Ok(d.bytes[start * esize..end * esize].to_vec()),
            Recipe::Cast { input, to } => cast_bytes(&input.read_elements(start, end)?, input.dtype(), *to),
            Recipe::Reshape { input, .. } => input.read_elements(start, end),
            Recipe::Slice { input, axis, start: s0, end: s1 } => {
                let shape = input.shape();
                let inner: usize = shape[axis + 1..].iter().product();
                let (out_row, in_row) = ((s1 - s0) * inner, shape[*axis] * inner);
                let mut out = Vec::with_capacity((end - start) * esize);
                let mut pos = start;
                while pos < end {
                    let (o, r) = (pos / out_row, pos % out_row);
                    let run = (out_row - r).min(end - pos);
                    let from = o * in_row + s0 * inner + r;
                    out.extend(input.read_elements(from, from + run)?);
                    pos += run;
                }
                Ok(out)
            }
            Recipe::Concat { inputs, axis } => {
                let chunks: Vec<usize> = inputs.iter().map(|r| r.shape()[*axis..].iter().product()).collect();
                let row: usize = chunks.iter().sum();
                let mut out = Vec::with_capacity((end - start) * esize);
                let mut pos = start;
                while pos < end {
                    let (o, mut r) = (pos / row, pos % row);
                    let mut part = 0;
                    while r >= chunks[part] {
                        r -= chunks[part];
                        part += 1;
                    }
                    let run = (chunks[part] - r).min(end - pos);
                    let from = o * chunks[part] + r;
                    out.extend(inputs[part].read_elements(from, from + run)?);
                    pos += run;
                }
                Ok(out)
            }
            Recipe::Transpose { .. } => Ok(self.materialize()?[start * esize..end * esize].to_vec()),
        }
    }
}

/// One unit of work: produce some bytes of one tensor and write them.
enum Task {
    /// Flat elements `start..end` of a streamable recipe.
    Range { tensor: usize, start: usize, end: usize },
    /// Source rows `start..end` of a 2-D transpose: written as one segment per output row.
    Band { tensor: usize, start: usize, end: usize },
    /// A recipe that can only be materialized whole (small, or exotic transposes).
    Whole { tensor: usize },
}

/// Writes every `(recipe, slot)` into `path`, which is created (zero-filled between slots).
pub(crate) fn write_data_file(path: &Path, tensors: &[(&str, Recipe, DataSlot)], opts: WriteOptions) -> Result<()> {
    let file = std::fs::File::create(path).map_err(|e| Error::io(path, e))?;
    let total = tensors.iter().map(|(_, _, s)| s.offset + s.len).max().unwrap_or(0);
    file.set_len(total).map_err(|e| Error::io(path, e))?;

    let mut tasks = Vec::new();
    for (i, (_, recipe, _)) in tensors.iter().enumerate() {
        let (numel, esize) = (recipe.numel(), recipe.dtype().size());
        let block = (opts.block_bytes / esize).max(1);
        match recipe {
            Recipe::Transpose { input, perm } if perm == &[1, 0] && input.is_streamable() => {
                let cols = input.shape()[1].max(1);
                let rows_per_band = (block / cols).max(1);
                let rows = input.shape()[0];
                tasks.extend((0..rows).step_by(rows_per_band).map(|s| Task::Band {
                    tensor: i,
                    start: s,
                    end: (s + rows_per_band).min(rows),
                }));
            }
            r if r.is_streamable() => {
                tasks.extend((0..numel).step_by(block).map(|s| Task::Range { tensor: i, start: s, end: (s + block).min(numel) }))
            }
            _ => tasks.push(Task::Whole { tensor: i }),
        }
    }

    let write = |offset: u64, bytes: &[u8]| file.write_all_at(bytes, offset).map_err(|e| Error::io(path, e));
    let run = |task: &Task| -> Result<()> {
        match *task {
            Task::Range { tensor, start, end } => {
                let (_, recipe, slot) = &tensors[tensor];
                let bytes = recipe.read_elements(start, end)?;
                write(slot.offset + (start * recipe.dtype().size()) as u64, &bytes)
            }
            Task::Whole { tensor } => {
                let (name, recipe, slot) = &tensors[tensor];
                let bytes = recipe.materialize()?;
                if bytes.len() as u64 != slot.len {
                    return Err(Error::Recipe {
                        tensor: name.to_string(),
                        reason: format!("produced {} bytes, expected {}", bytes.len(), slot.len),
                    });
                }
                write(slot.offset, &bytes)
            }
            Task::Band { tensor, start, end } => {
                let (_, recipe, slot) = &tensors[tensor];
                let Recipe::Transpose { input, .. } = recipe else { unreachable!("bands are transposes") };
                let (rows, cols) = (input.shape()[0], input.shape()[1]);
                let esize = recipe.dtype().size();
                let band = input.read_elements(start * cols, end * cols)?;
                let height = end - start;
                if height == rows {
                    // The whole matrix fits in one band: one contiguous write.
                    return write(slot.offset, &transpose_band(&band, height, cols, esize));
                }
                let t = transpose_band(&band, height, cols, esize);
                for j in 0..cols {
                    let segment = &t[j * height * esize..(j + 1) * height * esize];
                    write(slot.offset + ((j * rows + start) * esize) as u64, segment)?;
                }
                Ok(())
            }
        }
    };
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(opts.threads)
        .build()
        .map_err(|e| Error::Graph(format!("cannot start writer threads: {e}")))?;
    // No fsync: like compilers and package managers, the build leaves write-back to the OS;
    // atomicity comes from renaming the finished package folder into place.
    pool.install(|| tasks.par_iter().try_for_each(run))
}

/// `[h, w]` -> `[w, h]` for `esize`-byte elements, in cache-friendly tiles.
fn transpose_band(src: &[u8], h: usize, w: usize, esize: usize) -> Vec<u8> {
    let mut out = vec![0u8; src.len()];
    // Typed views when the buffers are aligned for them (malloc's are): one load and store per
    // element. The byte path below is the fallback and gives the same result.
    let typed = match esize {
        2 => bytemuck::try_cast_slice::<u8, u16>(src)
            .ok()
            .zip(bytemuck::try_cast_slice_mut::<u8, u16>(&mut out).ok())
            .map(|(s, o)| transpose_typed(s, o, h, w))
            .is_some(),
        4 => bytemuck::try_cast_slice::<u8, u32>(src)
            .ok()
            .zip(bytemuck::try_cast_slice_mut::<u8, u32>(&mut out).ok())
            .map(|(s, o)| transpose_typed(s, o, h, w))
            .is_some(),
        _ => false,
    };
    if typed {
        return out;
    }
    match esize {
        1 => transpose_fixed::<1>(src, h, w),
        2 => transpose_fixed::<2>(src, h, w),
        4 => transpose_fixed::<4>(src, h, w),
        8 => transpose_fixed::<8>(src, h, w),
        _ => unreachable!("element sizes are 1, 2, 4 or 8 bytes"),
    }
}

fn transpose_typed<T: Copy>(src: &[T], out: &mut [T], h: usize, w: usize) {
    const TILE: usize = 32;
    for i0 in (0..h).step_by(TILE) {
        for j0 in (0..w).step_by(TILE) {
            for i in i0..(i0 + TILE).min(h) {
                let row = &src[i * w..(i + 1) * w];
                for j in j0..(j0 + TILE).min(w) {
                    out[j * h + i] = row[j];
                }
            }
        }
    }
}

/// The transpose with the element size known at compile time, so each element moves as one
/// load and store instead of a `memmove` call.
fn transpose_fixed<const N: usize>(src: &[u8], h: usize, w: usize) -> Vec<u8> {
    const TILE: usize = 32;
    let mut out = vec![0u8; src.len()];
    for i0 in (0..h).step_by(TILE) {
        for j0 in (0..w).step_by(TILE) {
            for i in i0..(i0 + TILE).min(h) {
                let row = &src[i * w * N..(i + 1) * w * N];
                for j in j0..(j0 + TILE).min(w) {
                    let e: [u8; N] = row[j * N..j * N + N].try_into().expect("N bytes");
                    out[(j * h + i) * N..(j * h + i) * N + N].copy_from_slice(&e);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{layout_external_data, DType};

    #[test]
    fn typed_and_byte_transposes_agree() {
        let (h, w) = (37, 53);
        for esize in [1usize, 2, 4, 8] {
            let src: Vec<u8> = (0..h * w * esize).map(|i| (i * 7 % 251) as u8).collect();
            let fast = transpose_band(&src, h, w, esize);
            let slow = match esize {
                1 => transpose_fixed::<1>(&src, h, w),
                2 => transpose_fixed::<2>(&src, h, w),
                4 => transpose_fixed::<4>(&src, h, w),
                _ => transpose_fixed::<8>(&src, h, w),
            };
            assert_eq!(fast, slow, "esize {esize}");
            // Element (i, j) lands at (j, i).
            assert_eq!(&fast[(5 * h + 3) * esize..(5 * h + 4) * esize], &src[(3 * w + 5) * esize..(3 * w + 6) * esize]);
        }
    }

    fn iota(shape: Vec<usize>) -> Recipe {
        let n: usize = shape.iter().product();
        Recipe::from_f32("iota", shape, &(0..n).map(|v| v as f32).collect::<Vec<_>>())
    }

    /// Streams a set of recipes with a tiny block size and compares with whole materialization.
    fn check(recipes: Vec<Recipe>, block_bytes: usize, threads: usize) -> Vec<u8> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data");
        let slots = layout_external_data(&recipes.iter().map(|r| r.byte_len() as u64).collect::<Vec<_>>());
        let tensors: Vec<(&str, Recipe, DataSlot)> =
            recipes.iter().zip(&slots).map(|(r, s)| ("t", r.normalized(), *s)).collect();
        write_data_file(&path, &tensors, WriteOptions { block_bytes, threads }).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        for (r, s) in recipes.iter().zip(&slots) {
            assert_eq!(&bytes[s.offset as usize..(s.offset + s.len) as usize], r.materialize().unwrap().as_slice(), "{}", r.describe());
        }
        bytes
    }

    #[test]
    fn streamed_blocks_equal_whole_materialization() {
        let recipes = vec![
            iota(vec![37, 11]).transpose(vec![1, 0]),
            iota(vec![37, 11]).transpose(vec![1, 0]).cast(DType::F16),
            Recipe::concat(vec![iota(vec![5, 3]).transpose(vec![1, 0]), iota(vec![2, 3]).transpose(vec![1, 0])], 1).unwrap(),
            Recipe::concat(vec![iota(vec![4, 6]), iota(vec![4, 2])], 1).unwrap().slice(1, 1, 7),
            iota(vec![3, 4, 5]).transpose(vec![2, 0, 1]),
            iota(vec![100]).cast(DType::BF16).reshape(vec![10, 10]),
        ];
        let a = check(recipes.clone(), 24, 1);
        let b = check(recipes.clone(), 24, 2);
        let c = check(recipes, 1 << 20, 2);
        assert_eq!(a, b);
        assert_eq!(a, c);
    }

    #[test]
    fn normalization_moves_transposes_to_the_top() {
        let r = iota(vec![4, 3]).transpose(vec![1, 0]).cast(DType::F16).normalized();
        assert!(matches!(&r, Recipe::Transpose { input, .. } if input.is_streamable()));
        let c = Recipe::concat(vec![iota(vec![5, 3]).transpose(vec![1, 0]), iota(vec![2, 3]).transpose(vec![1, 0])], 1)
            .unwrap()
            .normalized();
        assert!(matches!(&c, Recipe::Transpose { input, .. } if matches!(input.as_ref(), Recipe::Concat { axis: 0, .. })));
    }
}
