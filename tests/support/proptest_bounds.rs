//! The bounds every parser property test runs under (issue #13: any input gives Ok or an
//! error, never a panic or a hang, in bounded time): a fixed seed and case count unless
//! `PROPTEST_RNG_SEED` / `PROPTEST_CASES` say otherwise, no regression files, and each case on
//! its own thread with a time limit. Included by `#[path]` into each crate's fuzz tests.

use proptest::test_runner::{Config, RngSeed};
use std::sync::mpsc;
use std::time::Duration;

/// Longest a case may take (a debug build takes microseconds).
pub const LIMIT: Duration = Duration::from_secs(20);

pub fn config(cases: u32) -> Config {
    let mut c = Config::default();
    if std::env::var_os("PROPTEST_CASES").is_none() {
        c.cases = cases;
    }
    if std::env::var_os("PROPTEST_RNG_SEED").is_none() {
        c.rng_seed = RngSeed::Fixed(0x5eed_0013);
    }
    c.failure_persistence = None;
    c
}

/// Runs `f` on a thread of its own (a test thread's 2 MiB stack) and fails the case when it
/// panics or outlives [`LIMIT`], so a hang is a failure, not a stuck test.
pub fn bounded<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    let worker = std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(LIMIT) {
        Ok(v) => v,
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("the case ran longer than {LIMIT:?}"),
        Err(mpsc::RecvTimeoutError::Disconnected) => match worker.join() {
            Err(panic) => std::panic::resume_unwind(panic),
            Ok(()) => unreachable!("the worker sends before it ends"),
        },
    }
}
