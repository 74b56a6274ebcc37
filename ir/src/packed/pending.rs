//! Rows of a GGUF layer that were read but whose file pages are still mapped, kept as runs of
//! consecutive rows and given back (`MADV_DONTNEED`) a run at a time.
//!
//! Why: an interleaved expert stack (gpt-oss's gate and up, row by row) reads each layer one
//! row at a time, and a release per row costs a TLB shootdown and, through the release's
//! fault-around margin (`MappedFile::release`), faults the next rows in again (measured: 57% of
//! a gpt-oss QMoE import, and 9.1 of 9.3 s of its float build, in the kernel). The runs live on
//! the weight, not in one call, so rows read by consecutive calls join (the float read, one row
//! per call: `Recipe::read_into`), and several runs are kept at once, so threads reading
//! different parts of one weight do not break each other's runs. The QMoE path reads a block of
//! rows per call and flushes the stack's runs when the call ends (`stack.rs`, `FlushRows`).
//! Runs shorter than a release wait for the weight's last element (`PackedWeight::done`
//! releases the whole tensor): a weight read only in part keeps at most 16 short runs mapped.

use std::sync::Mutex;

/// Runs kept per weight before the oldest is released (a few per writer thread).
const MAX_RUNS: usize = 16;

#[derive(Debug, Default)]
pub(crate) struct PendingRows {
    /// Runs `start..end` of rows, oldest first; they never overlap.
    runs: Mutex<Vec<(usize, usize)>>,
}

impl PendingRows {
    /// Rows `n0..n1` were read: joined to the runs they touch; `release` is called (under the
    /// lock) on a run once it holds at least `run` rows, and on the oldest run when too many
    /// are kept.
    pub(crate) fn add(&self, n0: usize, n1: usize, run: usize, mut release: impl FnMut(usize, usize)) {
        if n0 >= n1 {
            return;
        }
        let mut runs = self.runs.lock().unwrap_or_else(|e| e.into_inner());
        let (mut a, mut b) = (n0, n1);
        // Every run that overlaps or touches the new rows becomes part of one run.
        runs.retain(|&(s, e)| {
            let joins = s <= b && a <= e;
            if joins {
                (a, b) = (a.min(s), b.max(e));
            }
            !joins
        });
        if b - a >= run {
            release(a, b);
        } else {
            runs.push((a, b));
            if runs.len() > MAX_RUNS {
                let (s, e) = runs.remove(0);
                release(s, e);
            }
        }
    }

    /// Releases and forgets every run.
    pub(crate) fn flush(&self, mut release: impl FnMut(usize, usize)) {
        for (s, e) in self.runs.lock().unwrap_or_else(|e| e.into_inner()).drain(..) {
            release(s, e);
        }
    }

    /// Forgets every run (the whole tensor's pages were given back).
    pub(crate) fn clear(&self) {
        self.runs.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn add(p: &PendingRows, n0: usize, n1: usize, run: usize) -> Vec<(usize, usize)> {
        let mut out = vec![];
        p.add(n0, n1, run, |a, b| out.push((a, b)));
        out
    }

    #[test]
    fn rows_read_one_at_a_time_are_released_in_runs() {
        let p = PendingRows::default();
        let released: Vec<_> = (0..10).flat_map(|n| add(&p, n, n + 1, 4)).collect();
        assert_eq!(released, vec![(0, 4), (4, 8)]);
        let mut rest = vec![];
        p.flush(|a, b| rest.push((a, b)));
        assert_eq!(rest, vec![(8, 10)]);
        assert!(p.runs.lock().unwrap().is_empty());
    }

    #[test]
    fn two_readers_keep_their_own_runs() {
        // Two threads reading rows 0.. and 100.. in turn: each run still grows to its length.
        let p = PendingRows::default();
        let mut released = vec![];
        for i in 0..3 {
            released.extend(add(&p, i, i + 1, 3));
            released.extend(add(&p, 100 + i, 101 + i, 3));
        }
        assert_eq!(released, vec![(0, 3), (100, 103)]);
    }

    #[test]
    fn runs_join_across_gaps_filled_later_and_the_oldest_goes_when_too_many() {
        let p = PendingRows::default();
        assert!(add(&p, 0, 1, 10).is_empty());
        assert!(add(&p, 2, 3, 10).is_empty());
        // Row 1 joins both neighbours into one run 0..3.
        assert!(add(&p, 1, 2, 10).is_empty());
        assert_eq!(add(&p, 3, 10, 10), vec![(0, 10)]);
        // MAX_RUNS apart runs, then one more: the oldest is released.
        for i in 0..MAX_RUNS {
            assert!(add(&p, 100 + 2 * i, 101 + 2 * i, 10).is_empty());
        }
        assert_eq!(add(&p, 1000, 1001, 10), vec![(100, 101)]);
        assert_eq!(p.runs.lock().unwrap().len(), MAX_RUNS);
        p.clear();
        assert!(p.runs.lock().unwrap().is_empty());
    }
}
