//! `--model ORG/NAME` against a hub that lies (tests/hub_server on 127.0.0.1 with one
//! [`Lies`] field set): an ETag that is a path, listing names and an `X-Repo-Commit` that
//! climb out of the cache, a listing `sha` that is no commit, a `--revision` that is a path,
//! a server that never answers, a body that stalls or breaks off, bytes that are not what
//! their ETag says. Each build fails cleanly (exit 1, no panic) in bounded time with an error
//! naming the bad value, and nothing outside the model's cache folder changes or appears
//! (the whole temporary folder is compared before and after, with a canary file where an
//! absolute ETag points); inside it, no blob that is not whole and no ref are left, only the bytes of a download that broke
//! off, as `blobs/<hash>.tailor.incomplete`, for the next run to continue (never linked).

mod common;
mod hub_server;

use common::*;
use hub_server::{Break, Lies};
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const SHA: &str = "89abcdef0123456789abcdef0123456789abcdef";
/// A build that runs longer than this is a hang: it is killed and the test fails.
const LIMIT: Duration = Duration::from_secs(90);

struct Setup {
    dir: tempfile::TempDir,
    cache: PathBuf,
    work: PathBuf,
    files: Vec<(String, Vec<u8>)>,
}

impl Setup {
    fn new() -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let fixture = dir.path().join("fx");
        copy_fixture("tiny-llama", &fixture);
        let files = std::fs::read_dir(&fixture)
            .unwrap()
            .map(|e| e.unwrap())
            .map(|e| (e.file_name().to_string_lossy().into_owned(), std::fs::read(e.path()).unwrap()))
            .collect();
        let (cache, work) = (dir.path().join("cache"), dir.path().join("work"));
        std::fs::create_dir(&cache).unwrap();
        std::fs::create_dir(&work).unwrap();
        Setup { dir, cache, work, files }
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }

    fn repo(&self) -> PathBuf {
        self.cache.join("models--org--tiny")
    }

    fn serve(&self, lies: Lies) -> hub_server::Hub {
        hub_server::serve(self.files.clone(), SHA, lies)
    }

    fn weights(&self) -> Vec<u8> {
        self.files.iter().find(|(n, _)| n == "model.safetensors").unwrap().1.clone()
    }

    /// The requests for LFS bytes (`PATH#bytes=N-` when ranged).
    fn cdn(&self, hub: &hub_server::Hub) -> Vec<String> {
        hub.requests().into_iter().filter(|p| p.starts_with("/cdn/")).collect()
    }

    /// Every path under the temporary folder except the model's cache folder, with what it
    /// is: a file's hash, a link's target, a folder.
    fn outside(&self) -> BTreeMap<PathBuf, String> {
        fn walk(dir: &Path, skip: &Path, out: &mut BTreeMap<PathBuf, String>) {
            for e in std::fs::read_dir(dir).unwrap() {
                let path = e.unwrap().path();
                if path == skip {
                    continue;
                }
                let meta = std::fs::symlink_metadata(&path).unwrap();
                let what = if meta.file_type().is_symlink() {
                    format!("link {}", std::fs::read_link(&path).unwrap().display())
                } else if meta.is_dir() {
                    walk(&path, skip, out);
                    "folder".to_string()
                } else {
                    format!("file {}", hub_server::sha256(&std::fs::read(&path).unwrap()))
                };
                out.insert(path, what);
            }
        }
        let mut out = BTreeMap::new();
        walk(self.root(), &self.repo(), &mut out);
        out
    }

    /// `blobs/<hash>.tailor.incomplete`: the bytes kept of the blob named `hash`.
    fn kept(&self, hash: &str) -> PathBuf {
        self.repo().join("blobs").join(format!("{hash}.tailor.incomplete"))
    }

    /// The model's cache folder holds no partial blob, no blob not named by a hash, no
    /// snapshot but the listed commit's and no ref (refs are written last).
    fn assert_repo_clean(&self) {
        self.assert_repo_clean_keeping(false);
    }

    /// [`Setup::assert_repo_clean`], allowing kept bytes (`blobs/<hash>.tailor.incomplete`) when
    /// `kept`: a download that broke off.
    fn assert_repo_clean_keeping(&self, kept: bool) {
        let repo = self.repo();
        let hash = |name: &str| matches!(name.len(), 40 | 64) && name.bytes().all(|c| c.is_ascii_hexdigit());
        if let Ok(blobs) = std::fs::read_dir(repo.join("blobs")) {
            for b in blobs {
                let name = b.unwrap().file_name().to_string_lossy().into_owned();
                let stem = name.strip_suffix(".tailor.incomplete").filter(|_| kept).unwrap_or(&name);
                assert!(hash(stem), "blobs/{name}");
            }
        }

        if let Ok(snaps) = std::fs::read_dir(repo.join("snapshots")) {
            for s in snaps {
                assert_eq!(s.unwrap().file_name().to_string_lossy(), SHA);
            }
        }
        assert!(!repo.join("refs").exists(), "no ref after a failed download");
    }

    /// `tailor build --model org/tiny --output out ARGS` against `endpoint` (offline without
    /// one), with `env`.
    fn command(&self, endpoint: Option<&str>, env: &[(&str, &str)], args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_tailor"));
        hub_server::clean_env(&mut cmd)
            .args(["build", "--model", "org/tiny", "--output", "out"])
            .args(args)
            .env("HF_HUB_CACHE", &self.cache)
            .current_dir(&self.work)
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        match endpoint {
            Some(e) => cmd.env("HF_ENDPOINT", e),
            None => cmd.env("HF_HUB_OFFLINE", "1").env("HF_ENDPOINT", "http://127.0.0.1:9"),
        };
        cmd.envs(env.iter().copied());
        cmd
    }

    /// That build, run to its end; killed after [`LIMIT`].
    fn build(&self, endpoint: Option<&str>, env: &[(&str, &str)], args: &[&str]) -> Run {
        finish(self.command(endpoint, env, args).spawn().unwrap(), Instant::now())
    }
}

/// Waits for `child` (started at `start`) and reads its stderr; kills it after [`LIMIT`].
fn finish(mut child: std::process::Child, start: Instant) -> Run {
    let mut stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("tailor build still running after {LIMIT:?}, a hang: {}", reader.join().unwrap());
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let run = Run { code: status.code(), err: reader.join().unwrap(), took: start.elapsed() };
    // Shown with --nocapture or when the test fails.
    eprintln!("--- tailor build ({:?}, exit {:?}):\n{}", run.took, run.code, run.err);
    run
}

struct Run {
    code: Option<i32>,
    err: String,
    took: Duration,
}

impl Run {
    /// Exit 1 with an error, not a panic (101) or a signal.
    fn assert_clean_failure(&self) {
        assert_eq!(self.code, Some(1), "a clean failure: {}", self.err);
        assert!(!self.err.contains("panicked") && self.err.contains("error: "), "{}", self.err);
    }
}

/// Runs a build against a server lying with `lies`; asserts a clean failure whose error holds
/// every one of `names`, and that nothing changed outside the model's cache folder.
fn refused(s: &Setup, lies: Lies, names: &[&str]) -> (Run, hub_server::Hub) {
    refused_keeping(s, lies, names, false)
}

/// [`refused`], where the bytes of a download that broke off may be kept when `kept`.
fn refused_keeping(s: &Setup, lies: Lies, names: &[&str], kept: bool) -> (Run, hub_server::Hub) {
    let hub = s.serve(lies);
    let before = s.outside();
    let run = s.build(Some(&hub.url), &[], &[]);
    assert_eq!(s.outside(), before, "nothing outside the cache changes: {}", run.err);
    s.assert_repo_clean_keeping(kept);
    run.assert_clean_failure();
    for n in names {
        assert!(run.err.contains(n), "the error names `{n}`: {}", run.err);
    }
    assert!(!s.work.join("out").exists());
    (run, hub)
}

#[test]
fn an_absolute_etag_overwrites_nothing() {
    let s = Setup::new();
    let canary = s.root().join("canary");
    std::fs::write(&canary, "CANARY").unwrap();
    let etag = format!("\"{}\"", canary.display());
    refused(&s, Lies { etag: Some(etag), ..Lies::default() }, &[&canary.display().to_string(), "is not a file hash", "SHA-256"]);
    assert_eq!(std::fs::read_to_string(&canary).unwrap(), "CANARY");
}

#[test]
fn a_relative_etag_writes_nothing_outside_the_cache() {
    let s = Setup::new();
    refused(&s, Lies { etag: Some("\"../../../escaped\"".into()), ..Lies::default() }, &["`\"../../../escaped\"`", "is not a file hash"]);
    assert!(!s.root().join("escaped").exists());
}

#[test]
fn listed_names_that_climb_out_or_are_absolute_are_refused() {
    for bad in ["../../../../x.json", "ABS", "1_Pooling/../../../../../y.json", "a//config.json"] {
        let s = Setup::new();
        let abs = s.root().join("abs").join("x.json").display().to_string();
        let name = if bad == "ABS" { abs.as_str() } else { bad };
        let (_, hub) = refused(&s, Lies { extra_names: vec![name.to_string()], ..Lies::default() }, &[&format!("`{name}`"), "is not a relative path inside the repository"]);
        assert!(!s.root().join("x.json").exists() && !s.root().join("abs").exists());
        // Refused from the listing alone: no file was asked for.
        assert_eq!(hub.requests(), vec!["/api/models/org/tiny/revision/main".to_string()], "{bad}");
    }
}

#[test]
fn an_x_repo_commit_that_is_a_path_is_refused() {
    let s = Setup::new();
    refused(&s, Lies { commit: Some("../../../dir".into()), ..Lies::default() }, &["`../../../dir`", "X-Repo-Commit", SHA]);
    assert!(!s.root().join("dir").exists());
}

#[test]
fn a_listing_sha_that_is_no_commit_is_refused() {
    let s = Setup::new();
    for sha in ["../../../listed", "0123abcd"] {
        let (_, hub) = refused(&s, Lies { sha: Some(sha.into()), ..Lies::default() }, &[&format!("`{sha}`"), "not a commit hash"]);
        assert!(!s.repo().exists(), "nothing is created from a listing that is refused");
        assert_eq!(hub.requests().len(), 1);
    }
}

#[test]
fn a_revision_that_is_a_path_is_refused_offline_and_online() {
    let s = Setup::new();
    // The offline lookup once read refs/<revision>, printing what it found there.
    std::fs::create_dir_all(s.repo().join("refs")).unwrap();
    std::fs::write(s.root().join("secret.txt"), "TOPSECRET").unwrap();
    let before = s.outside();
    let run = s.build(None, &[], &["--revision", "../../../secret.txt"]);
    run.assert_clean_failure();
    assert!(run.err.contains("--revision `../../../secret.txt` is not a branch, tag or commit hash") && run.err.contains("refs/pr/1"), "{}", run.err);
    assert!(!run.err.contains("TOPSECRET"), "{}", run.err);
    // Online, it is refused before any request (a download once wrote the commit there).
    let hub = s.serve(Lies::default());
    let absolute = s.root().join("absref").display().to_string();
    for rev in ["../../../revdir", &absolute, "main/../../x", "a b"] {
        let run = s.build(Some(&hub.url), &[], &["--revision", rev]);
        run.assert_clean_failure();
        assert!(run.err.contains(&format!("--revision `{rev}` is not a branch, tag or commit hash")), "{}", run.err);
    }
    assert!(hub.requests().is_empty(), "{:?}", hub.requests());
    assert_eq!(s.outside(), before);
    assert!(!s.root().join("revdir").exists() && !s.root().join("absref").exists());
}

#[test]
fn a_ref_file_is_read_bounded_and_never_quoted() {
    let s = Setup::new();
    let refs = s.repo().join("refs");
    std::fs::create_dir_all(&refs).unwrap();
    std::fs::write(refs.join("main"), "TOPSECRET, not a hash").unwrap();
    let run = s.build(None, &[], &[]);
    run.assert_clean_failure();
    assert!(run.err.contains("refs/main") && run.err.contains("holds something that is not a commit hash"), "{}", run.err);
    assert!(!run.err.contains("TOPSECRET"), "{}", run.err);
    // A ref that is a FIFO is refused at once, never waited on.
    std::fs::remove_file(refs.join("main")).unwrap();
    assert!(Command::new("mkfifo").arg(refs.join("main")).status().unwrap().success());
    let run = s.build(None, &[], &[]);
    run.assert_clean_failure();
    assert!(run.err.contains("refs/main") && run.err.contains("is not a regular file"), "{}", run.err);
    assert!(run.took < Duration::from_secs(30), "{:?}", run.took);
}

#[test]
fn a_server_that_never_answers_fails_in_bounded_time() {
    let s = Setup::new();
    let hub = s.serve(Lies { listing_hangs: true, ..Lies::default() });
    let before = s.outside();
    let run = s.build(Some(&hub.url), &[("HF_HUB_ETAG_TIMEOUT", "1")], &[]);
    run.assert_clean_failure();
    assert!(run.err.contains("no answer from") && run.err.contains("within 1 s (set HF_HUB_ETAG_TIMEOUT to wait longer)"), "{}", run.err);
    assert!(run.err.contains("tried 3 times"), "{}", run.err);
    // Three attempts of 1 s, 1 s and 2 s apart: about 6 s.
    assert!(run.took < Duration::from_secs(30), "{:?}", run.took);
    assert_eq!(hub.requests().len(), 3);
    assert_eq!(s.outside(), before);
}

#[test]
fn a_file_that_stalls_fails_in_bounded_time_and_leaves_no_blob() {
    let s = Setup::new();
    let hub = s.serve(Lies { broken: Some(("config.json".into(), Break::Stall)), ..Lies::default() });
    let before = s.outside();
    let run = s.build(Some(&hub.url), &[("HF_HUB_DOWNLOAD_TIMEOUT", "1")], &[]);
    run.assert_clean_failure();
    assert!(run.err.contains("config.json: no data from") && run.err.contains("set HF_HUB_DOWNLOAD_TIMEOUT to wait longer"), "{}", run.err);
    assert!(run.took < Duration::from_secs(30), "{:?}", run.took);
    assert_eq!(s.outside(), before);
    s.assert_repo_clean();
    let config = &s.files.iter().find(|(n, _)| n == "config.json").unwrap().1;
    assert!(!s.repo().join("blobs").join(hub_server::git_sha1(config)).exists());
}

#[test]
fn a_body_that_breaks_off_leaves_no_blob() {
    let s = Setup::new();
    let (run, hub) = refused_keeping(&s, Lies { broken: Some(("model.safetensors".into(), Break::Truncate)), ..Lies::default() }, &["model.safetensors: ", "tried 3 times"], true);
    assert!(run.err.contains("ended after") || run.err.contains("broke off after"), "{}", run.err);
    let weights = &s.files.iter().find(|(n, _)| n == "model.safetensors").unwrap().1;
    assert!(!s.repo().join("blobs").join(hub_server::sha256(weights)).exists());
    assert_eq!(hub.requests().iter().filter(|p| p.starts_with("/cdn/")).count(), 3);
    // Each retry continued where the last stopped (and broke off again, half way).
    let n = weights.len();
    let (first, second) = (n / 2, n / 2 + (n - n / 2) / 2);
    let ranges: Vec<String> = hub.requests().into_iter().filter(|p| p.starts_with("/cdn/")).filter_map(|p| p.split_once('#').map(|(_, r)| r.to_string())).collect();
    assert_eq!(ranges, [format!("bytes={first}-"), format!("bytes={second}-")]);
    // What arrived is kept for the next run, and the error says where.
    let third = second + (n - second) / 2;
    let kept = s.kept(&hub_server::sha256(weights));
    assert_eq!(std::fs::read(&kept).unwrap(), weights[..third]);
    assert!(run.err.contains(&format!("its first {third} bytes are kept in {}", kept.display())), "{}", run.err);
}

/// A resumed download's answer must be the rest of the file: a `Content-Range` for other
/// bytes is refused at once, no blob kept (the first attempt's bytes stay kept, unverified
/// until a later download's hash).
#[test]
fn a_range_answered_with_other_bytes_is_refused() {
    let s = Setup::new();
    let lies = Lies { broken: Some(("model.safetensors".into(), Break::TruncateOnce)), content_range: Some("bytes 0-99/100".into()), ..Lies::default() };
    let (run, _hub) = refused_keeping(&s, lies, &["model.safetensors: ", "answered the range from byte", "`Content-Range: bytes 0-99/100`"], true);
    assert!(!run.err.contains("tried 3 times"), "refused at once: {}", run.err);
    // The first attempt's half is what stays kept.
    let weights = s.weights();
    assert_eq!(std::fs::read(s.kept(&hub_server::sha256(&weights))).unwrap(), weights[..weights.len() / 2]);
}

/// A part of a file (`206`) is not taken for the whole of it when no range was asked.
#[test]
fn a_partial_answer_to_a_whole_request_is_refused() {
    let s = Setup::new();
    let lies = Lies { unsolicited_206: true, ..Lies::default() };
    refused(&s, lies, &["answered 206 (part of the file) to a request for all of it"]);
}

#[test]
fn bytes_that_do_not_match_their_etag_are_not_kept() {
    let s = Setup::new();
    let other = hub_server::git_sha1(b"some other file");
    refused(&s, Lies { etag: Some(format!("\"{other}\"")), ..Lies::default() }, &[&format!("not to the ETag {other}"), "nothing was kept"]);
    assert!(!s.repo().join("blobs").join(&other).exists());
}

#[test]
fn a_timeout_variable_that_is_no_number_is_refused() {
    let s = Setup::new();
    let hub = s.serve(Lies::default());
    for (var, value) in [("HF_HUB_ETAG_TIMEOUT", "soon"), ("HF_HUB_DOWNLOAD_TIMEOUT", "0")] {
        let run = s.build(Some(&hub.url), &[(var, value)], &[]);
        run.assert_clean_failure();
        assert!(run.err.contains(&format!("{var}=`{value}` is not a number of seconds")), "{}", run.err);
    }
    assert!(hub.requests().is_empty());
}

/// Ctrl-C keeps what arrived of a file as `blobs/<hash>.tailor.incomplete` (tailor's own name,
/// never the Python client's `.incomplete`) and says so; the next run continues from there
/// with a range request.
#[test]
fn an_interrupted_download_keeps_its_bytes_and_the_next_run_continues_them() {
    let s = Setup::new();
    let hub = s.serve(Lies { broken: Some(("model.safetensors".into(), Break::Stall)), ..Lies::default() });
    let before = s.outside();
    let weights = s.weights();
    let (hash, half) = (hub_server::sha256(&weights), weights.len() / 2);
    let kept = s.kept(&hash);
    let start = Instant::now();
    let child = s.command(Some(&hub.url), &[("HF_HUB_DOWNLOAD_TIMEOUT", "60")], &[]).spawn().unwrap();
    // Half of the weights arrive (in this run's own `<hash>.<pid>-<n>.incomplete`) and the
    // server stalls: Ctrl-C.
    let arrived = || {
        std::fs::read_dir(s.repo().join("blobs")).map_or(0, |d| {
            d.filter_map(Result::ok).filter(|e| e.file_name().to_string_lossy().starts_with(&format!("{hash}."))).map(|e| e.metadata().unwrap().len()).max().unwrap_or(0)
        })
    };
    while arrived() < half as u64 {
        assert!(start.elapsed() < LIMIT, "no partial blob appeared: {:?}", hub.requests());
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: sending a signal to the child this test started.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let run = finish(child, start);
    assert_eq!(run.code, Some(130), "{}", run.err);
    assert!(run.err.contains("interrupted by SIGINT") && run.err.contains(&format!("kept the unfinished download {} ({half} bytes)", kept.display())), "{}", run.err);
    assert_eq!(std::fs::read(&kept).unwrap(), weights[..half]);
    assert_eq!(s.outside(), before);
    s.assert_repo_clean_keeping(true);
    assert!(!s.repo().join("blobs").join(&hash).exists() && !s.repo().join("snapshots").join(SHA).join("model.safetensors").exists());

    let hub = s.serve(Lies::default());
    let run = s.build(Some(&hub.url), &[], &[]);
    assert_eq!(run.code, Some(0), "{}", run.err);
    assert!(run.err.contains(&format!("model.safetensors: resuming at byte {half} of {} (kept by an earlier run)", weights.len())), "{}", run.err);
    assert_eq!(s.cdn(&hub), [format!("/cdn/{hash}#bytes={half}-")]);
    assert_eq!(std::fs::read(s.repo().join("blobs").join(&hash)).unwrap(), weights);
    assert!(!kept.exists());
}

/// Kept bytes offered to a server that ignores the range: the whole file it sends replaces
/// them.
#[test]
fn kept_bytes_give_way_to_a_whole_answer() {
    let s = Setup::new();
    let weights = s.weights();
    let (hash, half) = (hub_server::sha256(&weights), weights.len() / 2);
    std::fs::create_dir_all(s.repo().join("blobs")).unwrap();
    std::fs::write(s.kept(&hash), &weights[..half]).unwrap();
    let hub = s.serve(Lies { ignore_range: true, ..Lies::default() });
    let run = s.build(Some(&hub.url), &[], &[]);
    assert_eq!(run.code, Some(0), "{}", run.err);
    assert!(!run.err.contains("resuming"), "{}", run.err);
    assert_eq!(s.cdn(&hub), [format!("/cdn/{hash}#bytes={half}-")]);
    assert_eq!(std::fs::read(s.repo().join("blobs").join(&hash)).unwrap(), weights);
    let left: Vec<String> = std::fs::read_dir(s.repo().join("blobs")).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).filter(|n| n.ends_with(".incomplete")).collect();
    assert!(left.is_empty(), "{left:?}");
}

/// Kept bytes that are not the file's (another file, a damaged disk) fail the hash once the
/// rest arrives: the file is fetched again whole, and only the right bytes are kept.
#[test]
fn kept_bytes_that_are_wrong_are_fetched_again() {
    let s = Setup::new();
    let weights = s.weights();
    let (hash, half) = (hub_server::sha256(&weights), weights.len() / 2);
    std::fs::create_dir_all(s.repo().join("blobs")).unwrap();
    std::fs::write(s.kept(&hash), weights[..half].iter().map(|b| b ^ 0x5a).collect::<Vec<u8>>()).unwrap();
    let hub = s.serve(Lies::default());
    let run = s.build(Some(&hub.url), &[], &[]);
    assert_eq!(run.code, Some(0), "{}", run.err);
    assert!(run.err.contains(&format!("the first {half} kept by an earlier run, hash to")) && run.err.contains("starting over"), "{}", run.err);
    assert_eq!(s.cdn(&hub), [format!("/cdn/{hash}#bytes={half}-"), format!("/cdn/{hash}")]);
    assert_eq!(std::fs::read(s.repo().join("blobs").join(&hash)).unwrap(), weights);
    assert!(!s.kept(&hash).exists());
}
