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
//! Source bytes are read through the checkpoint's mapping, with no copy before conversion, and
//! each range is released (`MADV_DONTNEED`) as soon as its block is produced, so reading a
//! checkpoint does not leave its pages resident in the process. The output goes through
//! `direct.rs` (direct I/O where the file system takes it).

use crate::direct::{AlignedBuf, Sink, PAGE};
use crate::writeq::{with_write_queue, Queue};
use crate::recipe::cast_into;
use crate::transpose::gather_columns;
use crate::qweight::{QuantGroup, QuantPart};
use crate::{DataSlot, Error, Recipe, Result};
use rayon::prelude::*;
use std::path::Path;

/// Called with (bytes written so far, bytes to write) after each block lands in the file.
pub type Progress = std::sync::Arc<dyn Fn(u64, u64) + Send + Sync>;

/// How the data file is written.
#[derive(Clone)]
pub struct WriteOptions {
    /// Largest block of output produced at once, per thread (rounded to whole pages for
    /// direct writes).
    pub block_bytes: usize,
    /// Threads producing blocks (reading, converting, transposing); 0 means one per core. Two
    /// more threads write the blocks.
    pub threads: usize,
    /// Write with direct I/O where the file system takes it (see `direct.rs`); false always
    /// goes through the page cache. It does not change the bytes written.
    pub direct: bool,
    /// For buffered writes: after this many bytes, flush them to disk and drop them from the
    /// page cache (`fdatasync` + `POSIX_FADV_DONTNEED`); 0 never does. Keeping the dirty set
    /// small makes a multi-GB buffered write several times faster on VMs where fresh page-cache
    /// pages are expensive (measured on this project's VMs: 2.5 GB in 2.5 s instead of 12 s;
    /// 128 MiB was the fastest of 64, 128, 256 and 1024 MiB). It does not change the bytes.
    pub flush_every: u64,
    /// Progress of the data file, for long writes (a CLI draws a bar from it).
    pub progress: Option<Progress>,
}

impl Default for WriteOptions {
    fn default() -> Self {
        WriteOptions { block_bytes: 8 << 20, threads: 0, direct: true, flush_every: 128 << 20, progress: None }
    }
}

impl std::fmt::Debug for WriteOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteOptions")
            .field("block_bytes", &self.block_bytes)
            .field("threads", &self.threads)
            .field("direct", &self.direct)
            .field("flush_every", &self.flush_every)
            .field("progress", &self.progress.is_some())
            .finish()
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
            Recipe::Interleave { inputs, axis } => Recipe::Interleave { inputs: inputs.iter().map(Recipe::normalized).collect(), axis: *axis },
            Recipe::Slice { input, axis, start, end } => {
                Recipe::Slice { input: Box::new(input.normalized()), axis: *axis, start: *start, end: *end }
            }
            Recipe::Reshape { input, shape } => Recipe::Reshape { input: Box::new(input.normalized()), shape: shape.clone() },
            Recipe::View { input, dtype, shape } => Recipe::View { input: Box::new(input.normalized()), dtype: *dtype, shape: shape.clone() },
            Recipe::Transpose { input, perm } => Recipe::Transpose { input: Box::new(input.normalized()), perm: perm.clone() },
            Recipe::Offset { input, by } => Recipe::Offset { input: Box::new(input.normalized()), by: *by },
            leaf => leaf.clone(),
        }
    }

    /// Whether any flat element range can be read without materializing the whole tensor
    /// (true when the recipe has no transpose).
    pub fn is_streamable(&self) -> bool {
        match self {
            // A packed weight's float view is dequantized by whole rows of the range.
            Recipe::Source(_) | Recipe::Data(_) | Recipe::Packed(_) => true,
            // Offsets are small 1-D norm weights: materialized whole.
            // A view's elements are not its input's: materialized whole (a view of a quantized
            // part is written as the part itself, `quantized_part`).
            Recipe::Transpose { .. } | Recipe::Offset { .. } | Recipe::Quantized { .. } | Recipe::View { .. } => false,
            Recipe::Cast { input, .. } | Recipe::Slice { input, .. } | Recipe::Reshape { input, .. } => {
                input.is_streamable()
            }
            Recipe::Concat { inputs, .. } | Recipe::Interleave { inputs, .. } => inputs.iter().all(Recipe::is_streamable),
        }
    }

    /// Fills `out` with the bytes of flat elements `start..end` (row-major); `out` holds
    /// exactly that many elements. Writing into the caller's buffer lets the writer reuse one
    /// buffer per thread: a fresh multi-megabyte allocation per block is mapped and faulted in
    /// page by page (measured: a quarter of an f16 build's time went to those faults and the
    /// zeroing). Source bytes are read through the mapping (a cast converts them in place, with
    /// no copy); the writer calls [`Recipe::release`] once it is done with them. Recipes that
    /// are not streamable are materialized whole first.
    pub fn read_into(&self, start: usize, end: usize, out: &mut [u8]) -> Result<()> {
        let esize = self.dtype().size();
        debug_assert_eq!(out.len(), (end - start) * esize);
        match self {
            Recipe::Source(t) => {
                out.copy_from_slice(source_range(t, start, end)?);
                Ok(())
            }
            Recipe::Data(d) => {
                d.read_into(start, end, out);
                Ok(())
            }
            Recipe::Cast { input, to } => match input.as_ref() {
                Recipe::Source(t) => cast_into(source_range(t, start, end)?, t.dtype, *to, out).map_err(|e| e.in_tensor(&t.name)),
                input => {
                    // Converted in chunks through a small buffer (below the allocator's mmap
                    // threshold, so it is recycled rather than faulted in anew).
                    let from = input.dtype();
                    let chunk = (CAST_CHUNK_BYTES / from.size().max(to.size())).max(1);
                    let mut src = vec![0u8; chunk.min(end - start) * from.size()];
                    let mut pos = start;
                    while pos < end {
                        let n = chunk.min(end - pos);
                        let src = &mut src[..n * from.size()];
                        input.read_into(pos, pos + n, src)?;
                        let o = (pos - start) * esize;
                        cast_into(src, from, *to, &mut out[o..o + n * esize])?;
                        pos += n;
                    }
                    Ok(())
                }
            },
            Recipe::Reshape { input, .. } => input.read_into(start, end, out),
            Recipe::Slice { .. } | Recipe::Concat { .. } | Recipe::Interleave { .. } => self.runs(start, end, &mut |part, from, to, at| {
                part.read_into(from, to, &mut out[at * esize..(at + to - from) * esize])
            }),
            // The rows the range touches, dequantized (f32, as materialize gives them); a float
            // expert stack of a GGUF MoE file reads every expert this way, row run by row run.
            Recipe::Packed(p) => {
                let k = p.k();
                let (n0, n1) = (start / k, end.div_ceil(k));
                let rows = p.dequantize_rows(n0, n1)?;
                for (o, v) in out.chunks_exact_mut(4).zip(&rows[start - n0 * k..end - n0 * k]) {
                    o.copy_from_slice(&v.to_le_bytes());
                }
                p.rows_done(n0, end / k, end - start);
                Ok(())
            }
            Recipe::Transpose { .. } | Recipe::Offset { .. } | Recipe::Quantized { .. } | Recipe::View { .. } => {
                out.copy_from_slice(&self.materialize()?[start * esize..end * esize]);
                Ok(())
            }
        }
    }

    /// Tells the OS this process is done with the source pages behind elements `start..end`
    /// (`MADV_DONTNEED` on the mapping: they leave the resident set and stay in the page cache),
    /// so reading a checkpoint through its mapping keeps the peak RSS at the writer's window.
    pub fn release(&self, start: usize, end: usize) {
        match self {
            Recipe::Source(t) => {
                let esize = t.dtype.size();
                t.file.release(t.offset + start * esize, (end - start) * esize);
            }
            Recipe::Cast { input, .. } | Recipe::Reshape { input, .. } => input.release(start, end),
            Recipe::Slice { .. } | Recipe::Concat { .. } | Recipe::Interleave { .. } => {
                let _ = self.runs(start, end, &mut |part, from, to, _| {
                    part.release(from, to);
                    Ok(())
                });
            }
            // Materialized whole: nothing of the mapping stays referenced.
            Recipe::Data(_) | Recipe::Transpose { .. } | Recipe::Offset { .. } | Recipe::Quantized { .. } | Recipe::View { .. } | Recipe::Packed(_) => {}
        }
    }

    /// For a slice, concat or interleave: the runs of its input(s) that make up elements `start..end`, as
    /// `(input, from, to, at)` with `at` the run's position relative to `start`.
    fn runs(&self, start: usize, end: usize, f: &mut dyn FnMut(&Recipe, usize, usize, usize) -> Result<()>) -> Result<()> {
        let mut pos = start;
        match self {
            Recipe::Slice { input, axis, start: s0, end: s1 } => {
                let shape = input.shape();
                let inner: usize = shape[axis + 1..].iter().product();
                let (out_row, in_row) = ((s1 - s0) * inner, shape[*axis] * inner);
                while pos < end {
                    let (o, r) = (pos / out_row, pos % out_row);
                    let run = (out_row - r).min(end - pos);
                    let from = o * in_row + s0 * inner + r;
                    f(input, from, from + run, pos - start)?;
                    pos += run;
                }
            }
            Recipe::Concat { inputs, axis } => {
                let chunks: Vec<usize> = inputs.iter().map(|r| r.shape()[*axis..].iter().product()).collect();
                let row: usize = chunks.iter().sum();
                while pos < end {
                    let (o, mut r) = (pos / row, pos % row);
                    let mut part = 0;
                    while r >= chunks[part] {
                        r -= chunks[part];
                        part += 1;
                    }
                    let run = (chunks[part] - r).min(end - pos);
                    let from = o * chunks[part] + r;
                    f(&inputs[part], from, from + run, pos - start)?;
                    pos += run;
                }
            }
            Recipe::Interleave { inputs, axis } => {
                // Output element `pos` is element `r` of the `o`-th row (all axes up to `axis`)
                // of input `j`: rows of `inner` elements taken from each input in turn.
                let inner: usize = inputs[0].shape()[axis + 1..].iter().product();
                let n = inputs.len();
                while pos < end {
                    let (o, j, r) = (pos / (n * inner), pos / inner % n, pos % inner);
                    let run = (inner - r).min(end - pos);
                    let from = o * inner + r;
                    f(&inputs[j], from, from + run, pos - start)?;
                    pos += run;
                }
            }
            _ => unreachable!("runs are defined for slices, concats and interleaves"),
        }
        Ok(())
    }
}

/// The mapped bytes of elements `start..end` of a source tensor, or an error naming the tensor
/// when the file holds fewer bytes than its header promised.
fn source_range(t: &crate::SourceTensor, start: usize, end: usize) -> Result<&[u8]> {
    let esize = t.dtype.size();
    if end * esize > t.len {
        return Err(Error::Recipe { tensor: t.name.clone(), reason: format!("{} bytes stored for {}{:?}", t.len, t.dtype, t.shape) });
    }
    Ok(&t.bytes()?[start * esize..end * esize])
}

/// Bytes of the buffer a cast of a computed input converts through, kept under glibc's default
/// mmap threshold (128 KiB).
const CAST_CHUNK_BYTES: usize = 64 << 10;

/// One unit of work: produce some bytes of one tensor and write them.
enum Task {
    /// Flat elements `start..end` of a streamable recipe.
    Range { tensor: usize, start: usize, end: usize },
    /// Output rows `start..end` of a 2-D transpose (source columns), written as one contiguous
    /// block; the source is read in row chunks, once per block.
    Columns { tensor: usize, start: usize, end: usize },
    /// A recipe that can only be materialized whole (small, or exotic transposes).
    Whole { tensor: usize },
    /// Range `start..end` of a quantized weight (qweight.rs): quantized once, and every part
    /// of the group that is in the file gets its bytes of the range.
    Quant { group: usize, start: usize, end: usize },
}

/// A quantized weight being written: its group and, per part, the tensor that holds it
/// (and whether that tensor is the part's `[1, 0]` transpose, see [`quantized_part`]).
struct QuantWrite {
    group: std::sync::Arc<QuantGroup>,
    tensors: Vec<(QuantPart, usize, bool)>,
}

/// Writes every `(recipe, slot)` into `path`, which is created (zero-filled between slots).
pub(crate) fn write_data_file(path: &Path, tensors: &[(&str, Recipe, DataSlot)], opts: WriteOptions) -> Result<()> {
    let total = tensors.iter().map(|(_, _, s)| s.offset + s.len).max().unwrap_or(0);
    let sink = Sink::create(path, total, opts.direct, opts.flush_every)?;
    // Direct writes need blocks of whole pages (but for a tensor's last block).
    let block_bytes = if opts.direct { opts.block_bytes.max(PAGE) / PAGE * PAGE } else { opts.block_bytes };

    let mut tasks = Vec::new();
    let mut direct = Vec::with_capacity(tensors.len());
    let mut quant: Vec<QuantWrite> = Vec::new();
    for (i, (_, recipe, slot)) in tensors.iter().enumerate() {
        if let Some((group, part, transposed)) = quantized_part(recipe) {
            // Parts land at offsets that are not whole pages: buffered writes.
            direct.push(false);
            match quant.iter_mut().find(|q| std::sync::Arc::ptr_eq(&q.group, group)) {
                Some(q) => q.tensors.push((part, i, transposed)),
                None => {
                    let g = quant.len();
                    tasks.extend(group.ranges(opts.block_bytes).into_iter().map(|(start, end)| Task::Quant { group: g, start, end }));
                    quant.push(QuantWrite { group: std::sync::Arc::clone(group), tensors: vec![(part, i, transposed)] });
                }
            }
            let _ = slot;
            continue;
        }
        let (numel, esize) = (recipe.numel(), recipe.dtype().size());
        let block = (block_bytes / esize).max(1);
        let first = tasks.len();
        let block_size; // elements of the output per block but the last
        match recipe {
            Recipe::Transpose { input, perm } if perm == &[1, 0] && input.is_streamable() => {
                // Output rows per block: a larger budget than plain ranges, because every block
                // reads the whole source once (a tied 150k x 900 lm_head takes ~9 passes).
                // Rounded to a row count whose bytes are whole pages where that stays bounded.
                let (rows, cols) = (input.shape()[0].max(1), input.shape()[1]);
                let mut per_block = ((block * TRANSPOSE_BLOCKS) / rows).max(1);
                let whole_pages = PAGE / gcd(rows * esize, PAGE);
                if per_block >= whole_pages {
                    per_block = per_block / whole_pages * whole_pages;
                }
                block_size = per_block * rows;
                tasks.extend((0..cols).step_by(per_block).map(|s| Task::Columns {
                    tensor: i,
                    start: s,
                    end: (s + per_block).min(cols),
                }));
            }
            r if r.is_streamable() => {
                block_size = block;
                tasks.extend((0..numel).step_by(block).map(|s| Task::Range { tensor: i, start: s, end: (s + block).min(numel) }))
            }
            _ => {
                block_size = numel;
                tasks.push(Task::Whole { tensor: i });
            }
        }
        let interior = (tasks.len() - first).saturating_sub(1);
        direct.push(sink.direct_for(slot.offset, std::iter::repeat_n(block_size * esize, interior)));
    }

    // Fills `buf` with one task's block; returns (tensor, offset, length) to write.
    let produce = |buf: &mut AlignedBuf, task: &Task| -> Result<(usize, u64, usize)> {
        match *task {
            Task::Range { tensor, start, end } => {
                let (name, recipe, slot) = &tensors[tensor];
                let (esize, len) = (recipe.dtype().size(), (end - start) * recipe.dtype().size());
                recipe.read_into(start, end, &mut buf.get(len)[..len]).map_err(|e| e.in_tensor(name))?;
                recipe.release(start, end);
                Ok((tensor, slot.offset + (start * esize) as u64, len))
            }
            Task::Whole { tensor } => {
                let (name, recipe, slot) = &tensors[tensor];
                let bytes = recipe.materialize().map_err(|e| e.in_tensor(name))?;
                if bytes.len() as u64 != slot.len {
                    return Err(Error::Recipe {
                        tensor: name.to_string(),
                        reason: format!("produced {} bytes, expected {}", bytes.len(), slot.len),
                    });
                }
                buf.get(bytes.len())[..bytes.len()].copy_from_slice(&bytes);
                Ok((tensor, slot.offset, bytes.len()))
            }
            Task::Columns { tensor, start, end } => {
                let (name, recipe, slot) = &tensors[tensor];
                let Recipe::Transpose { input, .. } = recipe else { unreachable!("column blocks are transposes") };
                let (rows, cols) = (input.shape()[0], input.shape()[1]);
                let esize = recipe.dtype().size();
                let width = end - start;
                // Both buffers are reused (the output from the queue's pool, the band per
                // thread); every byte of them is overwritten before it is written out.
                // Source rows per read: a band small enough to stay in the L2 cache between
                // its cast (inside `read_into`) and its transpose, so the converted rows are
                // not written to and read back from memory. Only the block's columns of each
                // row are read and converted (a tied lm_head is read in several blocks).
                let chunk = (TRANSPOSE_BAND_BYTES / esize / width.max(1)).max(1).min(rows);
                let len = width * rows * esize;
                let out = buf.get(len);
                SRC_BLOCK.with(|cell| -> Result<()> {
                        let mut src = cell.borrow_mut();
                        if src.len() < chunk * width * esize {
                            src.resize(chunk * width * esize, 0);
                        }
                        for r0 in (0..rows).step_by(chunk) {
                            let r1 = (r0 + chunk).min(rows);
                            let band = &mut src[..(r1 - r0) * width * esize];
                            if width == cols {
                                input.read_into(r0 * cols, r1 * cols, band)?;
                            } else {
                                for (r, row) in (r0..r1).zip(band.chunks_exact_mut(width * esize)) {
                                    input.read_into(r * cols + start, r * cols + end, row)?;
                                }
                            }
                            input.release(r0 * cols, r1 * cols);
                            gather_columns(band, r1 - r0, width, 0..width, &mut out[..len], rows, r0, esize);
                        }
                        Ok(())
                    })
                    .map_err(|e| e.in_tensor(name))?;
                Ok((tensor, slot.offset + (start * rows * esize) as u64, len))
            }
            Task::Quant { .. } => unreachable!("quantized ranges are written by `run`"),
        }
    };
    let run = |queue: &Queue, task: &Task| -> Result<()> {
        if let Task::Quant { group, start, end } = *task {
            let QuantWrite { group, tensors: members } = &quant[group];
            group.compute_each(start, end, &|first, parts| {
                for (part, bytes) in parts {
                    for &(_, tensor, transposed) in members.iter().filter(|(p, _, _)| *p == part) {
                        let slot = &tensors[tensor].2;
                        if transposed {
                            write_transposed(queue, group, part, first, &bytes, slot.offset)?;
                            continue;
                        }
                        let mut buf = queue.buffer()?;
                        buf.get(bytes.len())[..bytes.len()].copy_from_slice(&bytes);
                        queue.submit(buf, slot.offset + group.part_offset(part, first) as u64, bytes.len(), false)?;
                    }
                }
                Ok(())
            })?;
            return Ok(());
        }
        let mut buf = queue.buffer()?;
        match produce(&mut buf, task) {
            Ok((tensor, offset, len)) => queue.submit(buf, offset, len, direct[tensor]),
            Err(e) => {
                queue.recycle(buf);
                Err(e)
            }
        }
    };
    let threads = match opts.threads {
        0 => std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        n => n,
    };
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| Error::Graph(format!("cannot start writer threads: {e}")))?;
    // Producers compute on the pool; WRITERS threads write (with direct I/O, two keep a write
    // queued while the disk works on the other).
    // Counted and reported under one lock, so the callback sees totals in increasing order.
    let written = std::sync::Mutex::new(0u64);
    let data_bytes: u64 = tensors.iter().map(|(_, _, s)| s.len).sum();
    let wrote = |n: usize| {
        if let (Some(progress), Ok(mut done)) = (&opts.progress, written.lock()) {
            *done += n as u64;
            progress(*done, data_bytes);
        }
    };
    // Whole-tensor solves (HQQ) run one at a time on a thread of their own, each parallel
    // inside on the solver's pool: started from the writer pool, a writer thread waiting for
    // its solve picked up further tasks (rayon keeps a thread that waits on another pool busy),
    // so dozens of solves were in progress at once, each holding its solution and buffers
    // (measured: 74 at the peak of a 0.5B build, 123 MB of solver state).
    let (serial, parallel): (Vec<&Task>, Vec<&Task>) =
        tasks.iter().partition(|t| matches!(t, Task::Quant { group, .. } if quant[*group].group.solves_whole_tensor()));
    let failed = std::sync::atomic::AtomicBool::new(false);
    let note = |r: Result<()>| {
        if r.is_err() {
            failed.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        r
    };
    with_write_queue(&sink, threads, WRITERS, &wrote, |queue| {
        std::thread::scope(|scope| {
            let solver = scope.spawn(|| {
                serial.iter().try_for_each(|t| if failed.load(std::sync::atomic::Ordering::Relaxed) { Ok(()) } else { note(run(queue, t)) })
            });
            let rest = pool.install(|| parallel.par_iter().try_for_each(|t| note(run(queue, t))));
            let solved = solver.join().unwrap_or_else(|_| Err(Error::Graph("the solver thread panicked".into())));
            rest.and(solved)
        })
    })?;
    // No fsync: like compilers and package managers, the build leaves write-back to the OS;
    // atomicity comes from renaming the finished package folder into place.
    sink.finish(total)
}

/// The quantized part a recipe writes: the part itself, or a reshape of it (an embedding's
/// GatherBlockQuantized view of the table), whose bytes are the same, or (`true`) the `[1, 0]`
/// transpose of a part of whole elements per weight row (the `[k_blocks, N]` block offsets of
/// float zero points, rewrite.rs), written from the same computation as the other parts: a
/// whole-tensor materialization would quantize the weight a second time.
pub(crate) fn quantized_part(recipe: &Recipe) -> Option<(&std::sync::Arc<QuantGroup>, QuantPart, bool)> {
    match recipe {
        Recipe::Quantized { group, part } => Some((group, *part, false)),
        Recipe::Reshape { input, .. } | Recipe::View { input, .. } => quantized_part(input).filter(|q| !q.2),
        Recipe::Transpose { input, perm } if perm == &[1, 0] => match input.as_ref() {
            Recipe::Quantized { group, part } if row_elements(group, *part) => Some((group, *part, true)),
            _ => None,
        },
        _ => None,
    }
}

/// Whether a part is `[N, c]` whole elements, a weight row's `c` of them per row, so that its
/// transpose can be written piece by piece (scales, and float zero points' offsets, of the
/// MatMulNBits form).
fn row_elements(group: &QuantGroup, part: QuantPart) -> bool {
    group.form() == crate::QuantForm::NBits
        && match part {
            QuantPart::Scales => true,
            QuantPart::ZeroPoints => group.float_zeros(),
            QuantPart::Data => false,
        }
}

/// Writes weight rows `first..` of `part` (`bytes`, `[rows, c]`) into its `[c, N]` transpose at
/// `offset`: one run of `rows` elements per column.
fn write_transposed(queue: &Queue, group: &QuantGroup, part: QuantPart, first: usize, bytes: &[u8], offset: u64) -> Result<()> {
    let shape = group.shape(part);
    let (n, c) = (shape[0], shape[1]);
    let esize = group.dtype(part).size();
    let rows = bytes.len() / (c * esize);
    for j in 0..c {
        let mut buf = queue.buffer()?;
        let out = buf.get(rows * esize);
        for r in 0..rows {
            out[r * esize..(r + 1) * esize].copy_from_slice(&bytes[(r * c + j) * esize..][..esize]);
        }
        queue.submit(buf, offset + ((j * n + first) * esize) as u64, rows * esize, false)?;
    }
    Ok(())
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

thread_local! {
    /// Each producer thread's source rows of a transposed block.
    static SRC_BLOCK: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Threads writing blocks to the file.
const WRITERS: usize = 2;

/// How many `block_bytes` a transposed block may take (it reads the whole source per block, so
/// fewer, larger blocks read less).
const TRANSPOSE_BLOCKS: usize = 4;

/// Bytes of converted source rows a transposed block reads at a time.
const TRANSPOSE_BAND_BYTES: usize = 256 << 10;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{layout_external_data, DType};

    fn iota(shape: Vec<usize>) -> Recipe {
        let n: usize = shape.iter().product();
        Recipe::from_f32("iota", shape, &(0..n).map(|v| v as f32).collect::<Vec<_>>())
    }

    /// Streams a set of recipes with a tiny block size and compares with whole materialization.
    fn check(recipes: Vec<Recipe>, block_bytes: usize, threads: usize, direct: bool) -> Vec<u8> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data");
        let slots = layout_external_data(&recipes.iter().map(|r| r.byte_len() as u64).collect::<Vec<_>>());
        let tensors: Vec<(&str, Recipe, DataSlot)> =
            recipes.iter().zip(&slots).map(|(r, s)| ("t", r.normalized(), *s)).collect();
        // A tiny flush interval exercises flushing between blocks.
        let seen = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let progress: Progress = {
            let seen = seen.clone();
            std::sync::Arc::new(move |done, total| {
                assert!(done <= total);
                let before = seen.swap(done, std::sync::atomic::Ordering::Relaxed);
                assert!(before < done, "progress goes forward: {before} then {done}");
            })
        };
        let opts = WriteOptions { block_bytes, threads, direct, flush_every: 100, progress: Some(progress) };
        write_data_file(&path, &tensors, opts).unwrap();
        // Progress reaches every byte of tensor data.
        let data: u64 = slots.iter().map(|s| s.len).sum();
        assert_eq!(seen.load(std::sync::atomic::Ordering::Relaxed), data);
        let bytes = std::fs::read(&path).unwrap();
        for (r, s) in recipes.iter().zip(&slots) {
            assert_eq!(&bytes[s.offset as usize..(s.offset + s.len) as usize], r.materialize().unwrap().as_slice(), "{}", r.describe());
        }
        bytes
    }

    /// A source that turns out short at write time (the file changed after its header was
    /// read) fails the write with the tensor's name, in every mode, without hanging: failing
    /// blocks return their buffers to the pool, so more failures than buffers cannot starve it.
    #[test]
    fn a_source_failing_at_write_time_is_an_error_not_a_hang() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("short.bin");
        std::fs::write(&path, vec![7u8; 100]).unwrap();
        let file = crate::MappedFile::open(&path).unwrap();
        let short = |i: usize| {
            Recipe::source(crate::SourceTensor {
                name: format!("w{i}"),
                file: file.clone(),
                dtype: DType::F32,
                shape: vec![64, 64],
                offset: 0,
                len: 64 * 64 * 4,
            })
        };
        // Plain ranges and transposed column blocks, many more blocks than pool buffers.
        let recipes: Vec<Recipe> = (0..24).map(|i| if i % 2 == 0 { short(i) } else { short(i).transpose(vec![1, 0]) }).collect();
        let slots = layout_external_data(&recipes.iter().map(|r| r.byte_len() as u64).collect::<Vec<_>>());
        let tensors: Vec<(&str, Recipe, DataSlot)> = recipes.iter().zip(&slots).map(|(r, s)| ("t", r.normalized(), *s)).collect();
        for (direct, threads) in [(true, 1), (true, 2), (false, 2)] {
            let opts = WriteOptions { block_bytes: 1024, threads, direct, ..Default::default() };
            let err = write_data_file(&dir.path().join("data"), &tensors, opts).unwrap_err().to_string();
            assert!(err.contains("truncated") && err.contains("short.bin"), "{err}");
        }
    }

    /// A panic in a writer thread (here the progress callback's) becomes the write's error; the
    /// write returns instead of leaving producers blocked on a queue nobody drains.
    #[test]
    fn a_panicking_progress_callback_is_an_error_not_a_hang() {
        let dir = tempfile::tempdir().unwrap();
        let recipes: Vec<Recipe> = (0..8).map(|_| iota(vec![64, 64])).collect();
        let slots = layout_external_data(&recipes.iter().map(|r| r.byte_len() as u64).collect::<Vec<_>>());
        let tensors: Vec<(&str, Recipe, DataSlot)> = recipes.iter().zip(&slots).map(|(r, s)| ("t", r.clone(), *s)).collect();
        let progress: Progress = std::sync::Arc::new(|_, _| panic!("callback failed"));
        let opts = WriteOptions { block_bytes: PAGE, threads: 2, progress: Some(progress), ..Default::default() };
        let err = write_data_file(&dir.path().join("data"), &tensors, opts).unwrap_err().to_string();
        assert!(err.contains("panicked") && err.contains("callback failed"), "{err}");
    }

    /// Recipes over a real safetensors file, read through the mapping: bf16 weights cast and
    /// transposed in column blocks narrower than the source (the tied lm_head path: per-row
    /// reads of the block's columns, release per band), a packed concat, a slice.
    #[test]
    fn mapped_sources_stream_like_materialization() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.safetensors");
        let bf16 = |n: usize, k: usize| -> Vec<u8> {
            (0..n).flat_map(|i| half::bf16::from_f32(((i * k) % 97) as f32 * 0.25 - 3.0).to_le_bytes()).collect()
        };
        let (a, b) = (bf16(300 * 64, 3), bf16(40 * 64, 5));
        let views = vec![
            ("a", safetensors::tensor::TensorView::new(safetensors::Dtype::BF16, vec![300, 64], &a).unwrap()),
            ("b", safetensors::tensor::TensorView::new(safetensors::Dtype::BF16, vec![40, 64], &b).unwrap()),
        ];
        safetensors::serialize_to_file(views, None, &path).unwrap();
        let file = crate::MappedFile::open(&path).unwrap();
        let t: Vec<Recipe> = file.safetensors_tensors().unwrap().into_iter().map(Recipe::source).collect();
        let recipes = vec![
            t[0].clone().transpose(vec![1, 0]).cast(DType::F32),
            t[0].clone().transpose(vec![1, 0]).cast(DType::F16),
            Recipe::concat(vec![t[0].clone().transpose(vec![1, 0]), t[1].clone().transpose(vec![1, 0])], 1).unwrap(),
            t[1].clone().cast(DType::F32).slice(1, 3, 50),
            t[1].clone(),
            // MoE's fused gate/up layout over mapped sources: each half a stack of casts.
            Recipe::interleave(
                vec![
                    Recipe::concat(vec![t[1].clone().cast(DType::F32).reshape(vec![1, 40, 64]); 3], 0).unwrap(),
                    Recipe::concat(vec![t[0].clone().slice(0, 0, 40).cast(DType::F32).reshape(vec![1, 40, 64]); 3], 0).unwrap(),
                ],
                1,
            )
            .unwrap(),
        ];
        // Block sizes that cut the 300-row transposes into blocks of a few output rows.
        let reference = check(recipes.clone(), 1 << 20, 1, false);
        for threads in [1, 2] {
            assert_eq!(check(recipes.clone(), 512, threads, false), reference);
            assert_eq!(check(recipes.clone(), PAGE, threads, true), reference);
        }
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
            Recipe::interleave(vec![iota(vec![3, 5, 7]), iota(vec![3, 5, 7]).cast(DType::F16).cast(DType::F32)], 1).unwrap(),
            Recipe::interleave(vec![iota(vec![4, 6]).cast(DType::F16), iota(vec![4, 6]).cast(DType::F16)], 1).unwrap(),
        ];
        let a = check(recipes.clone(), 24, 1, false);
        let b = check(recipes.clone(), 24, 2, false);
        let c = check(recipes.clone(), 1 << 20, 2, false);
        let d = check(recipes, 24, 2, true);
        assert_eq!(a, b);
        assert_eq!(a, c);
        assert_eq!(a, d);
    }

    /// Quantized weights stream range by range (each range quantized once, every part written
    /// from it) and equal whole materialization, in both layouts, with threads and direct
    /// writes around them; the weight error is counted once per element.
    #[test]
    fn quantized_parts_stream_like_materialization() {
        use crate::quant::{Bits, QuantSettings};
        use crate::{QuantForm, QuantGroup, QuantPart};
        let w = iota(vec![24, 48]).transpose(vec![1, 0]).cast(DType::F16).transpose(vec![1, 0]);
        let s4 = QuantSettings::new(Bits::Int4, 16, false).unwrap();
        let s8 = QuantSettings::new(Bits::Int8, 32, true).unwrap();
        let a = QuantGroup::new("a", w.clone(), s4, DType::F32, QuantForm::NBits).unwrap();
        let b = QuantGroup::new("b", iota(vec![10, 64]), s8, DType::F16, QuantForm::Dq).unwrap();
        // A transposed [K, N] weight (read by rows of its input), its parts reshaped.
        let c = QuantGroup::new("c", iota(vec![32, 6]).transpose(vec![1, 0]), s4, DType::F32, QuantForm::NBits).unwrap();
        let recipes = vec![
            Recipe::quantized(&a, QuantPart::Data),
            Recipe::quantized(&c, QuantPart::Data).reshape(vec![6, 16]),
            Recipe::quantized(&c, QuantPart::Scales).reshape(vec![6, 2, 1]),
            Recipe::quantized(&c, QuantPart::Data),
            iota(vec![37, 11]).transpose(vec![1, 0]),
            Recipe::quantized(&a, QuantPart::Scales),
            Recipe::quantized(&b, QuantPart::Scales),
            Recipe::quantized(&a, QuantPart::ZeroPoints),
            Recipe::quantized(&b, QuantPart::Data),
        ];
        let one = check(recipes.clone(), 48 * 4 * 5, 1, false);
        assert_eq!(a.error().count, 24 * 48);
        assert_eq!(b.error().count, 10 * 64);
        assert_eq!(c.error().count, 6 * 32, "one computation for the part and its reshapes");
        let two = check(recipes, 48 * 4 * 5, 2, true);
        assert_eq!(one, two);
    }

    /// Tensors of several pages, cut into page blocks: direct writes of whole-page blocks, a
    /// transposed weight whose column blocks are whole pages (256 rows of f32) and one whose
    /// blocks are not (300 rows: written buffered, in the same file), against buffered writes.
    #[test]
    fn direct_writes_equal_buffered_writes() {
        let recipes = vec![
            iota(vec![256, 40]).transpose(vec![1, 0]),
            iota(vec![300, 41]).transpose(vec![1, 0]).cast(DType::F16),
            iota(vec![5000]).cast(DType::BF16),
            iota(vec![3, 100]),
            iota(vec![300, 7]).transpose(vec![1, 0]),
        ];
        let buffered = check(recipes.clone(), PAGE, 1, false);
        for threads in [1, 2] {
            assert_eq!(check(recipes.clone(), PAGE, threads, true), buffered);
            assert_eq!(check(recipes.clone(), 3 * PAGE, threads, true), buffered);
        }
    }

    /// An interleave of streamable stacks is read range by range, each range a few runs of its
    /// inputs, never a whole input: any range equals the same bytes of the whole tensor, and
    /// the writer gives it range tasks (bounded memory), not one whole-tensor task.
    #[test]
    fn interleave_streams_in_ranges() {
        let stack = |e0: usize| Recipe::concat((e0..e0 + 3).map(|_| iota(vec![1, 4, 5]).cast(DType::F16)).collect(), 0).unwrap();
        let w = Recipe::interleave(vec![stack(0), stack(3)], 1).unwrap();
        assert!(w.is_streamable() && w.normalized().is_streamable());
        let whole = w.materialize().unwrap();
        let esize = w.dtype().size();
        for (start, end) in [(0, 1), (3, 17), (5, 10), (19, 61), (0, w.numel()), (w.numel() - 1, w.numel())] {
            let mut out = vec![0u8; (end - start) * esize];
            w.read_into(start, end, &mut out).unwrap();
            assert_eq!(out, whole[start * esize..end * esize], "{start}..{end}");
        }
        assert_eq!(check(vec![w.clone()], 16, 2, false), whole);
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
