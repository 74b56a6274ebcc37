//! Times `hqq::solve` on random weights of one shape: a profiling aid for the solver (the
//! whole-build figures are `scripts/bench-genai.py --hqq`'s).
//!
//!     cargo run --release -p ir --example hqq_profile -- N K
use ir::quant::{hqq, Bits};
use std::time::Instant;

fn main() {
    let args: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let [n, k] = args[..] else {
        eprintln!("usage: hqq_profile N K (a [N, K] weight, row n = output column n)");
        std::process::exit(2);
    };
    // xorshift: a sum of two uniforms, about the spread of trained weights.
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    let w: Vec<f32> = (0..n * k)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let u = (state >> 40) as f32 / (1u64 << 24) as f32;
            let v = (state & 0xffff) as f32 / 65536.0;
            (u + v - 1.0) * 0.05
        })
        .collect();
    let rows = ((8 << 20) / (k * 4)).max(1);
    let read = |a: usize, b: usize, out: &mut [f32]| {
        out.copy_from_slice(&w[a * k..b * k]);
        Ok(())
    };
    // As the writer does: the tensor's number of updates (one read), then every block solved
    // again up to it (the coding pass's share), in parallel on the HQQ pool.
    let t = Instant::now();
    let updates = hqq::iterations(Bits::Int4, 32, n, k, rows, &read).expect("iterations");
    let first = t.elapsed().as_secs_f64();
    let schedule = hqq::Schedule::new();
    let zeros: f64 = hqq::install(|| {
        use rayon::prelude::*;
        w.par_chunks(k).map(|row| (0..k.div_ceil(32)).map(|kb| schedule.run_block(Bits::Int4, 32, row, kb, updates, None, true).zero as f64).sum::<f64>()).sum()
    });
    let secs = t.elapsed().as_secs_f64();
    println!("[{n}, {k}]: {updates} updates in {secs:.3} s (iterations {first:.3} s, blocks again {:.3} s; zero sum {zeros:.3})", secs - first);
}
