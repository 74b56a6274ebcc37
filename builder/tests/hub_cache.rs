//! `--model ORG/NAME` through the real binary, against a fake Hugging Face cache with the real
//! layout (blobs, snapshots of relative symlinks, refs): found by id and revision; a missing
//! model, revision or file says where it looked and how to fetch it.

mod common;

use common::*;
use std::path::Path;
use std::process::Command;

/// Lays `fixture` out as `models--org--tiny` in `cache`, at commit `sha` under `refs/main`.
fn fake_cache(cache: &Path, fixture: &Path, sha: &str) {
    let repo = cache.join("models--org--tiny");
    let (blobs, snap) = (repo.join("blobs"), repo.join("snapshots").join(sha));
    std::fs::create_dir_all(&blobs).unwrap();
    std::fs::create_dir_all(&snap).unwrap();
    std::fs::create_dir_all(repo.join("refs")).unwrap();
    std::fs::write(repo.join("refs").join("main"), sha).unwrap();
    for (i, e) in std::fs::read_dir(fixture).unwrap().enumerate() {
        let e = e.unwrap();
        let blob = format!("blob{i:04}");
        std::fs::copy(e.path(), blobs.join(&blob)).unwrap();
        std::os::unix::fs::symlink(format!("../../blobs/{blob}"), snap.join(e.file_name())).unwrap();
    }
}

fn build(cache: &Path, cwd: &Path, args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tailor"))
        .arg("build")
        .args(args)
        .env("HF_HUB_CACHE", cache)
        .current_dir(cwd)
        .output()
        .unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn hub_ids_resolve_in_the_local_cache() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = dir.path().join("fx");
    copy_fixture("tiny-llama", &fixture);
    let cache = dir.path().join("cache");
    let sha = "0123456789abcdef0123456789abcdef01234567";
    fake_cache(&cache, &fixture, sha);
    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();

    let (ok, err) = build(&cache, &work, &["--model", "org/tiny", "--output", "out"]);
    assert!(ok, "{err}");
    assert!(work.join("out/model.onnx").is_file() && work.join("out/tokenizer.json").is_file(), "{err}");
    let (ok, err) = build(&cache, &work, &["--model", "org/tiny", "--revision", sha, "--output", "out2"]);
    assert!(ok, "{err}");

    let (ok, err) = build(&cache, &work, &["--model", "org/other", "--output", "x"]);
    assert!(!ok && err.contains("models--org--other does not exist") && err.contains("huggingface-cli download org/other"), "{err}");
    let (ok, err) = build(&cache, &work, &["--model", "org/tiny", "--revision", "v2", "--output", "x"]);
    assert!(!ok && err.contains("not at revision `v2`") && err.contains("--revision v2"), "{err}");
    // A snapshot whose config.json is missing (an interrupted download).
    std::fs::remove_file(cache.join("models--org--tiny/snapshots").join(sha).join("config.json")).unwrap();
    let (ok, err) = build(&cache, &work, &["--model", "org/tiny", "--output", "x"]);
    assert!(!ok && err.contains("is not complete in the cache") && err.contains("no config.json"), "{err}");
    assert!(!work.join("x").exists());
    // A local folder still wins, and --revision with one is refused.
    let (ok, err) = build(&cache, &work, &["--model", fixture.to_str().unwrap(), "--revision", "main", "--output", "x"]);
    assert!(!ok && err.contains("--revision applies to a hub model id"), "{err}");
}
