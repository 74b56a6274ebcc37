//! [`Method::Hqq`](super::Method::Hqq): half-quadratic quantization, as ONNX Runtime 1.32's
//! `HQQWeightOnlyQuantizer` does it (`onnxruntime/quantization/matmul_nbits_quantizer.py`,
//! `quantize_internal` and `optimize_weights`, read in the wheel `scripts/test.sh` installs).
//!
//! Each block (`block_size` consecutive values of one output column along K, the last one
//! padded with zeros, which take part in its min/max and its mean) keeps the min/max scale of
//! RTN and gets a *float* zero point, refined by a proximal solver of `||w - dq(q(w))||_p^p`
//! (p = 0.7): per iteration the residual is shrunk, and the zero becomes the mean of
//! `q - (w - shrunk) * inv_scale` over the block. The solver runs over the whole tensor at once:
//! it stops at the first iteration whose mean absolute error over the tensor is no better than
//! the best so far (keeping that iteration's update, as ONNX Runtime does), so the number of
//! updates is a property of the tensor, not of a block; the blocks are otherwise independent.
//! [`iterations`] therefore runs every block through all iterations in one read of the weight,
//! summing the errors per iteration, which gives the tensor's number of updates; the coding
//! pass runs each block again up to it ([`Schedule::run_block`]). Nothing is kept per block.
//!
//! The arithmetic is ONNX Runtime's, in f32 and in its order (quantize with the inverse scale,
//! round half to even as `torch.round` does, dequantize by dividing); only sums differ in order
//! (torch's vectorized means against f64 sums here), so a zero may differ in its last bits and
//! a value on a rounding boundary may flip. ir/tests/hqq_vectors.rs measures both against the
//! wheel's own output.

use super::{Bits, MAX_BLOCK};
use crate::{Error, Result};

/// ONNX Runtime's `optimize_weights` defaults: `{"lp_norm": 0.7, "beta": 1e1, "kappa": 1.01,
/// "iters": 20}`.
pub const ITERATIONS: usize = 20;
const LP_NORM: f64 = 0.7;
const BETA: f64 = 10.0;
const KAPPA: f64 = 1.01;
/// `scale.clamp(max=2e4)`: the inverse scale's bound ("to avoid half-precision problems").
const MAX_INVERSE_SCALE: f32 = 2e4;
/// `torch.abs(x) + 1e-8` in the shrink operator.
const SHRINK_EPS: f32 = 1e-8;

/// A block's parameters while it is solved: the inverse scale `max_q / (max - min)` (1 for a
/// constant block) and the float zero point.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HqqBlock {
    pub inverse_scale: f32,
    pub zero: f32,
}

impl HqqBlock {
    /// The starting point: RTN's range, the zero `round(-min * inverse_scale)`. `values` is the
    /// block padded to the block size.
    pub fn initial(bits: Bits, values: &[f32]) -> HqqBlock {
        // In eight lanes, with plain comparisons (the weights are finite, checked before any
        // solve): `f32::min`'s NaN handling kept this loop scalar, and every block is started
        // twice (the update count, then the coding pass).
        let (mut lo, mut hi) = ([f32::INFINITY; 8], [f32::NEG_INFINITY; 8]);
        for c in values.chunks(8) {
            for (j, &v) in c.iter().enumerate() {
                lo[j] = if v < lo[j] { v } else { lo[j] };
                hi[j] = if v > hi[j] { v } else { hi[j] };
            }
        }
        let min = lo.iter().fold(f32::INFINITY, |m, &v| if v < m { v } else { m });
        let max = hi.iter().fold(f32::NEG_INFINITY, |m, &v| if v > m { v } else { m });
        let max_q = bits.max_q() as f32;
        let range = max - min;
        // `max_v / range` is a Python number over a tensor, which torch computes as
        // `range.reciprocal() * max_v`. A constant block's range is replaced by max_q.
        let range = if range == 0.0 { max_q } else { range };
        let inverse_scale = ((1.0 / range) * max_q).min(MAX_INVERSE_SCALE);
        HqqBlock { inverse_scale, zero: ((-min) * inverse_scale).round_ties_even() }
    }

    /// The stored scale, `1 / inverse_scale` (torch's `1.0 / scale`, a reciprocal), in f32 (ONNX
    /// Runtime casts it to the weight's type).
    pub fn scale(&self) -> f32 {
        1.0 / self.inverse_scale
    }

    /// The code of one value: `clamp(round_half_even(v * inverse_scale + zero), 0, max_q)`.
    #[inline(always)]
    pub fn code(&self, max_q: f32, v: f32) -> f32 {
        round_code(v * self.inverse_scale + self.zero, max_q)
    }

    /// One solver iteration on the (padded) block: updates the zero and returns the sum of
    /// |w - dequantized| with the zero it started from (the tensor's stopping test) and the
    /// largest of those residuals (whether the next iteration can be replayed, see [`Step`]).
    ///
    /// The shrunk residual is `sign(d) * max(|d| - c * (|d| + 1e-8)^-0.3, 0)`, which is 0 for
    /// every |d| up to the iteration's [`Shrink::threshold`]: a block whose residuals all stay
    /// under it (nearly every block of weights smaller than 1) needs no power at all, and its
    /// new zero is the mean of `q - w * s`. Sums run in eight independent lanes (their order is
    /// not torch's anyway), so the loops vectorize.
    #[inline(always)]
    pub fn step(&mut self, bits: Bits, values: &[f32], shrink: &Shrink) -> Step {
        let max_q = bits.max_q() as f32;
        let (s, z) = (self.inverse_scale, self.zero);
        let mut codes = [0f32; MAX_BLOCK];
        let codes = &mut codes[..values.len()];
        let mut error = [0f64; LANES];
        let mut largest = [0f32; LANES];
        for (j, (q, &w)) in codes.iter_mut().zip(values).enumerate() {
            *q = round_code(w * s + z, max_q);
            let a = (w - (*q - z) / s).abs();
            error[j % LANES] += a as f64;
            largest[j % LANES] = largest[j % LANES].max(a);
        }
        let mut zero_sum = [0f64; LANES];
        let largest = largest.iter().fold(0f32, |m, &a| m.max(a));
        if largest <= shrink.threshold {
            for (j, (&q, &w)) in codes.iter().zip(values).enumerate() {
                zero_sum[j % LANES] += (q - w * s) as f64;
            }
        } else {
            for (j, (&q, &w)) in codes.iter().zip(values).enumerate() {
                let d = w - (q - z) / s;
                let a = d.abs();
                let shrunk = (a - shrink.inv_beta * pow_shrink(a + SHRINK_EPS)).max(0.0);
                // sign(d) * shrunk, with sign(0) = 0 (shrunk is 0 there anyway).
                let e = if d < 0.0 { -shrunk } else { shrunk };
                zero_sum[j % LANES] += (q - (w - e) * s) as f64;
            }
        }
        self.zero = (zero_sum.iter().sum::<f64>() / values.len() as f64) as f32;
        Step { error: error.iter().sum(), largest }
    }
}

/// What one [`HqqBlock::step`] measured with the zero it started from.
///
/// Why the largest residual is kept: a step whose residuals all lie under the shrink threshold
/// sets the zero to `mean(q - w * s)`, which does not depend on beta. If that leaves the zero
/// unchanged (bit for bit), the next step starts from the same state, computes the same codes,
/// error and residuals and, as long as the largest residual stays under that iteration's
/// (smaller) threshold, the same zero again: the block's step can be replayed from what was
/// kept, without reading its weights ([`solve`]'s frozen rows).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Step {
    pub error: f64,
    pub largest: f32,
}

/// One iteration's shrink operator: `c = 1 / beta` as torch computes with it (a Python number
/// met by an f32 tensor: rounded to f32), and the residual up to which it shrinks to 0.
#[derive(Clone, Copy, Debug)]
pub struct Shrink {
    inv_beta: f32,
    threshold: f32,
}

impl Shrink {
    /// `f(a) = a - c * (a + 1e-8)^-0.3` increases with `a`, so it is <= 0 exactly up to its root
    /// a*; the threshold is a* less a margin (1e-4 relative) far wider than the f32 roundings of
    /// evaluating f, so a residual under it shrinks to 0 by the formula too.
    pub fn new(beta: f64) -> Shrink {
        let inv_beta = (1.0 / beta) as f32;
        let c = inv_beta as f64;
        let f = |a: f64| a - c * (a + SHRINK_EPS as f64).powf(LP_NORM - 1.0);
        let (mut lo, mut hi) = (0.0f64, 1.0f64);
        while f(hi) <= 0.0 {
            hi *= 2.0;
        }
        for _ in 0..100 {
            let mid = 0.5 * (lo + hi);
            if f(mid) <= 0.0 {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        Shrink { inv_beta, threshold: (lo * (1.0 - 1e-4)) as f32 }
    }
}

/// Lanes of [`HqqBlock::step`]'s sums.
const LANES: usize = 8;

/// `clamp(round_half_even(x), 0, max_q)` without a rounding instruction (SSE2 has none): x is
/// first bounded to [-1, max_q + 1], which changes no result, then rounded by adding and
/// removing 1.5 * 2^23 (exact for |x| < 2^22, ties to even in the default rounding mode).
#[inline(always)]
fn round_code(x: f32, max_q: f32) -> f32 {
    const MAGIC: f32 = 12_582_912.0;
    let x = x.max(-1.0).min(max_q + 1.0);
    ((x + MAGIC) - MAGIC).max(0.0).min(max_q)
}

/// `a^(p - 1)` for the shrink operator (p = [`LP_NORM`], a >= 1e-8), through f64 `exp((p - 1) *
/// ln a)` with series accurate to about 1e-10: within one f32 rounding of the exact power, as
/// torch's vectorized `pow` is (libm's `powf` did not vectorize and was 80% of the solver).
#[inline(always)]
fn pow_shrink(a: f32) -> f32 {
    const LN2: f64 = std::f64::consts::LN_2;
    let a = a as f64;
    // a = 2^e * m, m in [sqrt(1/2), sqrt(2)).
    let bits = a.to_bits();
    let mut e = ((bits >> 52) & 0x7ff) as i64 - 1023;
    let mut m = f64::from_bits((bits & 0x000f_ffff_ffff_ffff) | 0x3ff0_0000_0000_0000);
    let big = m > std::f64::consts::SQRT_2;
    m = if big { m * 0.5 } else { m };
    e += big as i64;
    // ln m = 2 atanh(t), t = (m - 1) / (m + 1), |t| < 0.172.
    let t = (m - 1.0) / (m + 1.0);
    let t2 = t * t;
    let ln_m = 2.0 * t * (1.0 + t2 * (1.0 / 3.0 + t2 * (1.0 / 5.0 + t2 * (1.0 / 7.0 + t2 * (1.0 / 9.0 + t2 * (1.0 / 11.0))))));
    let y = (LP_NORM - 1.0) * (e as f64 * LN2 + ln_m);
    // exp y = 2^k * exp r, |r| <= ln2 / 2.
    const MAGIC: f64 = 6_755_399_441_055_744.0; // 1.5 * 2^52: round to an integer
    let k = (y * (1.0 / LN2) + MAGIC) - MAGIC;
    let r = y - k * LN2;
    let exp_r = 1.0 + r * (1.0 + r * (0.5 + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r * (1.0 / 720.0 + r * (1.0 / 5040.0 + r * (1.0 / 40320.0 + r * (1.0 / 362880.0)))))))));
    let two_k = f64::from_bits(((k as i64 + 1023) as u64) << 52);
    (exp_r * two_k) as f32
}

/// Fills `out` with weight rows `n0..n1` (`(n1 - n0) * K` f32 values): how the solver reads
/// the weight, one pass at a time.
pub type ReadRows<'a> = dyn Fn(usize, usize, &mut [f32]) -> Result<()> + Sync + 'a;

/// The outcome of [`solve`]: every block's final parameters (`[N, k_blocks]`, row-major) and how
/// many zero updates the tensor got.
#[derive(Clone, Debug, PartialEq)]
pub struct HqqSolution {
    pub blocks: Vec<HqqBlock>,
    pub updates: usize,
}

/// The solver's schedule: each iteration's shrink operator (beta grows by `KAPPA` per update).
#[derive(Clone, Debug)]
pub struct Schedule {
    shrinks: Vec<Shrink>,
}

impl Default for Schedule {
    fn default() -> Self {
        Self::new()
    }
}

impl Schedule {
    pub fn new() -> Schedule {
        let mut beta = BETA;
        let shrinks = (0..ITERATIONS)
            .map(|_| {
                let s = Shrink::new(beta);
                beta *= KAPPA;
                s
            })
            .collect();
        Schedule { shrinks }
    }

    /// One block (padded to the block size) from its starting point through `updates`
    /// iterations, recording each in `record` when given (see [`Record`]).
    ///
    /// A block whose step leaves its zero unchanged, bit for bit, with every residual under the
    /// shrink threshold is at a fixed point: the next step computes the same codes, error and
    /// zero as long as its largest residual stays under that iteration's (smaller) threshold
    /// (see [`Step`]). Such steps are replayed (`freeze`) instead of computed: the result is bit
    /// for bit that of stepping every time (`tests::frozen_blocks_give_the_result_of_stepping_every_time`).
    /// On random weights a block is unchanged after 1-5 steps with probability 0.45, 0.65,
    /// 0.79, 0.88, 0.93, so most of the 20 iterations are replays.
    pub fn run(&self, bits: Bits, values: &[f32], updates: usize, mut record: Option<Record<'_>>, freeze: bool) -> HqqBlock {
        let mut block = HqqBlock::initial(bits, values);
        // The last step, while the block is at a fixed point.
        let mut fixed: Option<Step> = None;
        for (t, shrink) in self.shrinks[..updates].iter().enumerate() {
            let got = match fixed {
                Some(last) if freeze && last.largest <= shrink.threshold => last,
                _ => {
                    #[cfg(test)]
                    tests::STEPS.with(|c| c.set(c.get() + 1));
                    let before = block.zero.to_bits();
                    let got = step(&mut block, bits, values, shrink);
                    fixed = (got.largest <= shrink.threshold && block.zero.to_bits() == before).then_some(got);
                    got
                }
            };
            if let Some(r) = record.as_mut() {
                r.errors[t] += got.error;
                if let Some(z) = r.zeros.as_deref_mut() {
                    z[t] = block.zero;
                }
            }
        }
        block
    }

    /// [`Self::run`] of block `kb` of `row` (`block_size` values; the last block padded with zeros).
    #[allow(clippy::too_many_arguments)]
    pub fn run_block(&self, bits: Bits, block_size: usize, row: &[f32], kb: usize, updates: usize, record: Option<Record<'_>>, freeze: bool) -> HqqBlock {
        let mut pad = [0f32; MAX_BLOCK];
        self.run(bits, padded(row, kb, block_size, &mut pad), updates, record, freeze)
    }
}

/// Block `kb` of `row`: the slice itself, or the last one padded with zeros into `pad`.
fn padded<'a>(row: &'a [f32], kb: usize, block_size: usize, pad: &'a mut [f32; MAX_BLOCK]) -> &'a [f32] {
    let src = &row[kb * block_size..((kb + 1) * block_size).min(row.len())];
    if src.len() == block_size {
        return src;
    }
    pad[..src.len()].copy_from_slice(src);
    pad[src.len()..block_size].fill(0.0);
    &pad[..block_size]
}

/// The starting point of block `kb` of `row` ([`HqqBlock::initial`] of the padded block): with
/// the zero [`iterations_and_zeros`] kept, the block's final parameters (steps change only the
/// zero).
pub fn start_block(bits: Bits, block_size: usize, row: &[f32], kb: usize) -> HqqBlock {
    let mut pad = [0f32; MAX_BLOCK];
    HqqBlock::initial(bits, padded(row, kb, block_size, &mut pad))
}

/// What [`Schedule::run`] records of a block: iteration `t`'s error (measured with the zero it
/// starts from, see [`HqqBlock::step`]) added to `errors[t]`, and the zero after iteration `t`
/// in `zeros[t]` when given.
pub struct Record<'a> {
    pub errors: &'a mut [f64],
    pub zeros: Option<&'a mut [f32]>,
}

/// How many zero updates ONNX Runtime's solver gives a `[N, K]` weight (row `n` = output column
/// `n`, its K values contiguous) read through `read(n0, n1, out)`, which fills `out` with rows
/// `n0..n1` (`(n1 - n0) * K` values).
///
/// ONNX Runtime stops at the first iteration whose mean |w - dq| over the whole tensor is no
/// better than the best so far, keeping that iteration's update: the only coupling between
/// blocks, which otherwise iterate on their own values. So each block runs all [`ITERATIONS`]
/// here, one after the other while its values are in cache, adding its error per iteration;
/// the sums give the stopping iteration. The weight is read once, `rows_per_pass` rows at a
/// time on the HQQ pool, and nothing is kept per block: the coding pass runs each block again
/// up to that iteration ([`Schedule::run_block`]). Sums run per pass in row and block order,
/// then over the passes in order, so the result does not depend on threads or pass size.
pub fn iterations(bits: Bits, block_size: usize, n: usize, k: usize, rows_per_pass: usize, read: &ReadRows<'_>) -> Result<usize> {
    Ok(iterations_with(&Schedule::new(), bits, block_size, n, k, rows_per_pass, true, false, read)?.0)
}

/// [`iterations`], keeping every block's zero after each iteration (`[N * k_blocks,
/// ITERATIONS]` f32 while it runs: 80 bytes per block) and returning the zero of each block
/// after the tensor's last update (`[N, k_blocks]`): with [`start_block`], every block's final
/// parameters, bit for bit those of solving it again (`tests::kept_zeros_are_the_solved_ones`).
/// For tensors whose trace fits the caller's memory bound: it saves the coding pass solving
/// each block again.
pub fn iterations_and_zeros(bits: Bits, block_size: usize, n: usize, k: usize, rows_per_pass: usize, read: &ReadRows<'_>) -> Result<(usize, Vec<f32>)> {
    let (updates, trace) = iterations_with(&Schedule::new(), bits, block_size, n, k, rows_per_pass, true, true, read)?;
    let mut zeros = trace.unwrap_or_default();
    let blocks = zeros.len() / ITERATIONS;
    // In place: block b's zero moves from b * ITERATIONS + updates - 1 down to b.
    for b in 0..blocks {
        zeros[b] = zeros[b * ITERATIONS + updates - 1];
    }
    zeros.truncate(blocks);
    zeros.shrink_to_fit();
    Ok((updates, zeros))
}

#[allow(clippy::too_many_arguments)]
fn iterations_with(
    schedule: &Schedule,
    bits: Bits,
    block_size: usize,
    n: usize,
    k: usize,
    rows_per_pass: usize,
    freeze: bool,
    keep_zeros: bool,
    read: &ReadRows<'_>,
) -> Result<(usize, Option<Vec<f32>>)> {
    use rayon::prelude::*;
    if block_size == 0 || block_size > MAX_BLOCK || n == 0 || k == 0 {
        return Err(Error::QuantShape(format!("HQQ of a [{n}, {k}] weight in blocks of {block_size}")));
    }
    let k_blocks = k.div_ceil(block_size);
    let rows = rows_per_pass.clamp(1, n);
    let ranges: Vec<(usize, usize)> = (0..n).step_by(rows).map(|s| (s, (s + rows).min(n))).collect();
    let mut trace = if keep_zeros { vec![0f32; n * k_blocks * ITERATIONS] } else { Vec::new() };
    // Each pass's part of the trace (none when not kept).
    let mut parts: Vec<Option<&mut [f32]>> = if keep_zeros { trace.chunks_mut(rows * k_blocks * ITERATIONS).map(Some).collect() } else { ranges.iter().map(|_| None).collect() };
    let sums: Vec<[f64; ITERATIONS]> = install(|| {
        parts
            .par_iter_mut()
            .zip(ranges.par_iter())
            .map(|(part, &(n0, n1))| {
                let mut errors = [0f64; ITERATIONS];
                visit(read, k, n0, n1, &mut |row_index, row| {
                    for kb in 0..k_blocks {
                        let at = ((row_index - n0) * k_blocks + kb) * ITERATIONS;
                        let zeros = part.as_deref_mut().map(|p| &mut p[at..at + ITERATIONS]);
                        schedule.run_block(bits, block_size, row, kb, ITERATIONS, Some(Record { errors: &mut errors, zeros }), freeze);
                    }
                })?;
                Ok(errors)
            })
            .collect::<Result<_>>()
    })?;
    drop(parts);
    let count = (n * k_blocks * block_size) as f64;
    let mut best = 1e4f64;
    let mut updates = ITERATIONS;
    for t in 0..ITERATIONS {
        // torch: the mean over the tensor as an f32, compared as a Python float.
        let error = (sums.iter().map(|s| s[t]).sum::<f64>() / count) as f32 as f64;
        if error < best {
            best = error;
        } else {
            updates = t + 1;
            break;
        }
    }
    Ok((updates, keep_zeros.then_some(trace)))
}

/// Solves a `[N, K]` weight read through `read` (see [`iterations`]): every block's parameters
/// after the tensor's number of updates. Holds them all (8 bytes per block): for tests and
/// tools; the writer codes each block as it recomputes it (ir::qweight).
pub fn solve(bits: Bits, block_size: usize, n: usize, k: usize, rows_per_pass: usize, read: &ReadRows<'_>) -> Result<HqqSolution> {
    solve_with(bits, block_size, n, k, rows_per_pass, true, read)
}

/// [`solve`], replaying fixed-point steps or not (the test's reference steps every time).
fn solve_with(bits: Bits, block_size: usize, n: usize, k: usize, rows_per_pass: usize, freeze: bool, read: &ReadRows<'_>) -> Result<HqqSolution> {
    let schedule = Schedule::new();
    let (updates, _) = iterations_with(&schedule, bits, block_size, n, k, rows_per_pass, freeze, false, read)?;
    let k_blocks = k.div_ceil(block_size);
    let mut blocks = Vec::with_capacity(n * k_blocks);
    visit(read, k, 0, n, &mut |_, row| {
        for kb in 0..k_blocks {
            blocks.push(schedule.run_block(bits, block_size, row, kb, updates, None, freeze));
        }
    })?;
    Ok(HqqSolution { blocks, updates })
}

/// Reads rows `n0..n1` into the thread's reused buffer (a fresh multi-megabyte one per pass
/// was zeroed and faulted in every time) and hands each to `f(row index, values)`.
fn visit(read: &ReadRows<'_>, k: usize, n0: usize, n1: usize, f: &mut dyn FnMut(usize, &[f32])) -> Result<()> {
    PASS.with(|cell| {
        let mut buf = cell.borrow_mut();
        let len = (n1 - n0) * k;
        if buf.len() < len {
            buf.resize(len, 0.0);
        }
        let buf = &mut buf[..len];
        read(n0, n1, buf)?;
        for (i, row) in buf.chunks_exact(k).enumerate() {
            f(n0 + i, row);
        }
        Ok(())
    })
}

thread_local! {
    /// Each solver thread's f32 rows of the pass it works on.
    static PASS: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Runs `f` on the pool HQQ solves on: its own, one thread per core, so that a solve's
/// parallel passes started from a writer thread never run another tensor's solve nested inside
/// them (work stealing in one shared pool did, holding many tensors' pass buffers at once). The
/// calling thread waits; at most one solve per writer thread is in progress.
pub fn install<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    static POOL: std::sync::OnceLock<Option<rayon::ThreadPool>> = std::sync::OnceLock::new();
    let pool = POOL.get_or_init(|| {
        let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
        rayon::ThreadPoolBuilder::new().num_threads(threads).thread_name(|i| format!("hqq-{i}")).build().ok()
    });
    match pool {
        Some(p) => p.install(f),
        None => f(),
    }
}

/// [`HqqBlock::step`], compiled for AVX2 where the CPU has it: the same IEEE operations in the
/// same order (Rust fuses no multiply-add), so the same bits, in wider registers.
#[inline]
fn step(block: &mut HqqBlock, bits: Bits, values: &[f32], shrink: &Shrink) -> Step {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (checked above).
        return unsafe { step_avx2(block, bits, values, shrink) };
    }
    block.step(bits, values, shrink)
}

/// [`HqqBlock::step`] in AVX2 intrinsics, eight lanes in registers (the compiler's version kept
/// the lane sums in memory, one value at a time). Lane `i` of a chunk is value `j` with
/// `j % 8 == i`, as in the portable sums; every lane runs the portable operations in the same
/// order (multiply then add, no fused multiply-add; `_mm256_max_ps(x, c)` / `_mm256_min_ps(x, c)`
/// are `x.max(c)` / `x.min(c)` for the non-NaN `x` a finite weight gives); the eight f64 lane
/// sums are reduced in lane order. A block with a residual above the shrink threshold (rare
/// for weights below 1) and a block whose length is not a multiple of eight take the portable
/// path, which computes the same bits. `tests::avx2_step_equals_the_portable_step` checks it.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn step_avx2(block: &mut HqqBlock, bits: Bits, values: &[f32], shrink: &Shrink) -> Step {
    use std::arch::x86_64::*;
    if values.is_empty() || !values.len().is_multiple_of(LANES) {
        return block.step(bits, values, shrink);
    }
    let max_q = bits.max_q() as f32;
    let (vs, vz) = (_mm256_set1_ps(block.inverse_scale), _mm256_set1_ps(block.zero));
    let (lo, hi, vmax_q, zero) = (_mm256_set1_ps(-1.0), _mm256_set1_ps(max_q + 1.0), _mm256_set1_ps(max_q), _mm256_setzero_ps());
    let magic = _mm256_set1_ps(12_582_912.0);
    let abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fff_ffff));
    // round_code of w * s + z, lane by lane.
    let code = |w: __m256| -> __m256 {
        let x = _mm256_add_ps(_mm256_mul_ps(w, vs), vz);
        let x = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
        let r = _mm256_sub_ps(_mm256_add_ps(x, magic), magic);
        _mm256_min_ps(_mm256_max_ps(r, zero), vmax_q)
    };
    let (mut err_lo, mut err_hi) = (_mm256_setzero_pd(), _mm256_setzero_pd());
    let mut largest = _mm256_setzero_ps();
    for c in values.chunks_exact(LANES) {
        // SAFETY: `c` holds eight f32.
        let w = unsafe { _mm256_loadu_ps(c.as_ptr()) };
        let q = code(w);
        let a = _mm256_and_ps(_mm256_sub_ps(w, _mm256_div_ps(_mm256_sub_ps(q, vz), vs)), abs_mask);
        err_lo = _mm256_add_pd(err_lo, _mm256_cvtps_pd(_mm256_castps256_ps128(a)));
        err_hi = _mm256_add_pd(err_hi, _mm256_cvtps_pd(_mm256_extractf128_ps::<1>(a)));
        largest = _mm256_max_ps(largest, a);
    }
    let over = _mm256_cmp_ps::<_CMP_NLE_UQ>(largest, _mm256_set1_ps(shrink.threshold));
    if _mm256_movemask_ps(over) != 0 {
        return block.step(bits, values, shrink);
    }
    let (mut z_lo, mut z_hi) = (_mm256_setzero_pd(), _mm256_setzero_pd());
    for c in values.chunks_exact(LANES) {
        // SAFETY: `c` holds eight f32.
        let w = unsafe { _mm256_loadu_ps(c.as_ptr()) };
        let d = _mm256_sub_ps(code(w), _mm256_mul_ps(w, vs));
        z_lo = _mm256_add_pd(z_lo, _mm256_cvtps_pd(_mm256_castps256_ps128(d)));
        z_hi = _mm256_add_pd(z_hi, _mm256_cvtps_pd(_mm256_extractf128_ps::<1>(d)));
    }
    let lanes = |l: __m256d, h: __m256d| -> [f64; LANES] {
        let mut out = [0f64; LANES];
        // SAFETY: `out` holds eight f64.
        unsafe {
            _mm256_storeu_pd(out.as_mut_ptr(), l);
            _mm256_storeu_pd(out.as_mut_ptr().add(4), h);
        }
        out
    };
    let zero_sum = lanes(z_lo, z_hi);
    block.zero = (zero_sum.iter().sum::<f64>() / values.len() as f64) as f32;
    let mut top = [0f32; LANES];
    // SAFETY: `top` holds eight f32.
    unsafe { _mm256_storeu_ps(top.as_mut_ptr(), largest) };
    Step { error: lanes(err_lo, err_hi).iter().sum(), largest: top.iter().fold(0f32, |m, &a| m.max(a)) }
}

#[cfg(test)]
mod tests {
    use super::*;

    thread_local! {
        /// Steps computed (not replayed) by [`Schedule::run`] on this thread.
        pub(super) static STEPS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    fn weight(n: usize, k: usize) -> Vec<f32> {
        (0..n * k).map(|i| ((i * 7919 % 1013) as f32 / 1013.0 - 0.45) * (1.0 + (i % 7) as f32) * 0.01).collect()
    }

    /// `w` with every `every`-th value multiplied by `factor`: blocks over the shrink threshold.
    fn with_outliers(mut w: Vec<f32>, every: usize, factor: f32) -> Vec<f32> {
        for i in (0..w.len()).step_by(every) {
            w[i] *= factor;
        }
        w
    }

    fn solved(n: usize, k: usize, bs: usize, rows: usize) -> HqqSolution {
        let w = weight(n, k);
        solve(Bits::Int4, bs, n, k, rows, &|n0, n1, out| {
            out.copy_from_slice(&w[n0 * k..n1 * k]);
            Ok(())
        })
        .unwrap()
    }

    /// The power is within one f32 rounding of libm's over the range the residuals take, and
    /// the rounding is `round_ties_even` then clamp.
    #[test]
    fn the_vectorizable_helpers_agree_with_libm() {
        let mut a = 1e-8f32;
        while a < 1e4 {
            for x in [a, a * 1.37, a * 1.9] {
                let (got, want) = (pow_shrink(x), (x as f64).powf(LP_NORM - 1.0));
                assert!(((got as f64 - want) / want).abs() < 1.2e-7, "{x}: {got} vs {want}");
            }
            a *= 2.0;
        }
        for i in -40..=700 {
            let x = i as f32 * 0.025 - 0.5;
            for v in [x, f32::from_bits(x.to_bits() + 1), x + 0.5] {
                assert_eq!(round_code(v, 15.0), v.round_ties_even().clamp(0.0, 15.0), "{v}");
            }
        }
    }

    /// The AVX2 step gives the portable step's zero and error, bit for bit, on blocks under and
    /// over the shrink threshold, with outliers, constant blocks and padding zeros.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn avx2_step_equals_the_portable_step() {
        if !std::is_x86_feature_detected!("avx2") {
            return;
        }
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        let mut rnd = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5
        };
        for case in 0..600 {
            let bs = [16, 32, 64, 128][case % 4];
            let scale = [0.02f32, 0.5, 3.0, 40.0][(case / 4) % 4];
            let mut v: Vec<f32> = (0..bs).map(|_| rnd() * scale).collect();
            if case % 7 == 0 {
                v[case % bs] *= 50.0;
            }
            if case % 11 == 0 {
                v.iter_mut().for_each(|x| *x = 0.25);
            }
            if case % 5 == 0 {
                v[bs / 2..].fill(0.0);
            }
            for bits in [Bits::Int4, Bits::Int8] {
                let mut beta = BETA;
                let (mut a, mut b) = (HqqBlock::initial(bits, &v), HqqBlock::initial(bits, &v));
                for _ in 0..ITERATIONS {
                    let sh = Shrink::new(beta);
                    let ea = a.step(bits, &v, &sh);
                    // SAFETY: AVX2 checked above.
                    let eb = unsafe { step_avx2(&mut b, bits, &v, &sh) };
                    assert_eq!((a.zero.to_bits(), ea.error.to_bits(), ea.largest.to_bits()), (b.zero.to_bits(), eb.error.to_bits(), eb.largest.to_bits()), "case {case} {bits:?}");
                    beta *= KAPPA;
                }
            }
        }
    }

    /// Under the threshold the shrink formula gives 0; just above its root it does not.
    #[test]
    fn the_shrink_threshold_is_where_the_formula_turns_positive() {
        let mut beta = BETA;
        for _ in 0..ITERATIONS {
            let sh = Shrink::new(beta);
            let f = |a: f32| (a - sh.inv_beta * pow_shrink(a + SHRINK_EPS)).max(0.0);
            let t = sh.threshold;
            for a in [t, t * 0.99, t * 0.5, 1e-9, 0.0] {
                assert_eq!(f(a), 0.0, "beta {beta}: {a}");
            }
            assert!(f(t * 1.001) > 0.0, "beta {beta}: just past the root");
            beta *= KAPPA;
        }
    }

    /// Replaying the steps of blocks at a fixed point gives the result of stepping every block
    /// every time, bit for bit (outliers, K that is not a multiple of the block), and computes
    /// fewer steps.
    #[test]
    fn frozen_blocks_give_the_result_of_stepping_every_time() {
        for (n, k, bs, rows) in [(64, 200, 32, 7), (40, 96, 16, 40), (33, 128, 64, 1)] {
            let w = with_outliers(weight(n, k), 97, 40.0);
            let run = |freeze: bool| {
                solve_with(Bits::Int4, bs, n, k, rows, freeze, &|n0, n1, out| {
                    out.copy_from_slice(&w[n0 * k..n1 * k]);
                    Ok(())
                })
                .unwrap()
            };
            let (frozen, every) = (run(true), run(false));
            assert_eq!(frozen.updates, every.updates, "[{n}, {k}] blocks of {bs}");
            for (i, (a, b)) in frozen.blocks.iter().zip(&every.blocks).enumerate() {
                assert_eq!((a.inverse_scale.to_bits(), a.zero.to_bits()), (b.inverse_scale.to_bits(), b.zero.to_bits()), "block {i} of [{n}, {k}]");
            }
            // The steps computed, on this thread, for every block's 20 iterations.
            let schedule = Schedule::new();
            let steps = |freeze: bool| {
                STEPS.with(|c| c.set(0));
                let mut errors = [0f64; ITERATIONS];
                for row in w.chunks_exact(k) {
                    for kb in 0..k.div_ceil(bs) {
                        schedule.run_block(Bits::Int4, bs, row, kb, ITERATIONS, Some(Record { errors: &mut errors, zeros: None }), freeze);
                    }
                }
                (STEPS.with(|c| c.get()), errors)
            };
            let ((replayed, e1), (stepped, e2)) = (steps(true), steps(false));
            assert_eq!(e1.map(f64::to_bits), e2.map(f64::to_bits), "[{n}, {k}]: the errors per iteration");
            assert!(every.updates > 2 && replayed * 2 < stepped, "[{n}, {k}]: {replayed} steps vs {stepped}, {} updates", every.updates);
        }
    }

    /// The zeros kept by `iterations_and_zeros` are the ones solving each block again gives,
    /// bit for bit, and with `start_block` make its final parameters.
    #[test]
    fn kept_zeros_are_the_solved_ones() {
        for (n, k, bs, rows) in [(64, 200, 32, 7), (13, 72, 32, 13), (33, 128, 64, 1)] {
            let w = with_outliers(weight(n, k), 89, 30.0);
            let read = |n0: usize, n1: usize, out: &mut [f32]| {
                out.copy_from_slice(&w[n0 * k..n1 * k]);
                Ok(())
            };
            let solved = solve(Bits::Int4, bs, n, k, rows, &read).unwrap();
            let (updates, zeros) = iterations_and_zeros(Bits::Int4, bs, n, k, rows, &read).unwrap();
            assert_eq!(updates, solved.updates);
            let kb = k.div_ceil(bs);
            assert_eq!(zeros.len(), n * kb);
            for (i, (z, b)) in zeros.iter().zip(&solved.blocks).enumerate() {
                let start = start_block(Bits::Int4, bs, &w[(i / kb) * k..(i / kb + 1) * k], i % kb);
                assert_eq!((start.inverse_scale.to_bits(), z.to_bits()), (b.inverse_scale.to_bits(), b.zero.to_bits()), "block {i} of [{n}, {k}]");
            }
        }
    }

    /// The result does not depend on how the rows are split into passes.
    #[test]
    fn passes_do_not_change_the_result() {
        let a = solved(13, 72, 32, 13);
        for rows in [1, 4, 5] {
            assert_eq!(solved(13, 72, 32, rows), a, "{rows} rows per pass");
        }
        assert!(a.updates >= 1 && a.updates <= ITERATIONS);
    }

    /// A constant block has inverse scale 1 and codes its value exactly when it fits the grid.
    #[test]
    fn a_constant_block_keeps_inverse_scale_one() {
        let b = HqqBlock::initial(Bits::Int4, &[-3.0; 16]);
        assert_eq!((b.inverse_scale, b.zero), (1.0, 3.0));
        assert_eq!(b.code(15.0, -3.0), 0.0);
    }

    /// The solver lowers the tensor's mean absolute error below RTN-with-float-zero's start.
    #[test]
    fn the_solver_improves_on_its_start() {
        let (n, k, bs) = (16, 128, 32);
        let w = weight(n, k);
        let err = |blocks: &[HqqBlock]| -> f64 {
            let mut e = 0f64;
            for (i, b) in blocks.iter().enumerate() {
                let (row, kb) = (i / (k / bs), i % (k / bs));
                for &v in &w[row * k + kb * bs..row * k + (kb + 1) * bs] {
                    e += (v - (b.code(15.0, v) - b.zero) / b.inverse_scale).abs() as f64;
                }
            }
            e
        };
        let start: Vec<HqqBlock> = (0..n * k / bs).map(|i| HqqBlock::initial(Bits::Int4, &w[i * bs..(i + 1) * bs])).collect();
        let s = solved(n, k, bs, 4);
        assert!(err(&s.blocks) < err(&start), "{} vs {}", err(&s.blocks), err(&start));
    }
}
