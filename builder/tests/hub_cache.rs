//! `--model ORG/NAME` through the real binary, against a fake Hugging Face cache with the real
//! layout (blobs, snapshots of relative symlinks, refs): found by id and revision; offline, a
//! missing model, revision or file says where it looked and how to fetch it; online, it is
//! downloaded from a local server on 127.0.0.1 that answers the hub's URLs for one fixture
//! (tests/hub_server; tests/hub_hostile.rs has the same server lying).

mod common;
mod hub_server;

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

/// `tailor build ARGS` with the cache at `cache`; `endpoint` `None` runs it offline.
fn build_with(cache: &Path, cwd: &Path, endpoint: Option<&str>, args: &[&str]) -> (bool, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tailor"));
    hub_server::clean_env(&mut cmd).arg("build").args(args).env("HF_HUB_CACHE", cache).current_dir(cwd);
    match endpoint {
        Some(e) => cmd.env("HF_ENDPOINT", e).env_remove("HF_HUB_OFFLINE"),
        None => cmd.env("HF_HUB_OFFLINE", "1").env("HF_ENDPOINT", "http://127.0.0.1:9"),
    };
    let out = cmd.output().unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
}

fn build(cache: &Path, cwd: &Path, args: &[&str]) -> (bool, String) {
    build_with(cache, cwd, None, args)
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
    assert!(!ok && err.contains("models--org--other does not exist") && err.contains("HF_HUB_OFFLINE=1 forbids downloading"), "{err}");
    assert!(err.contains("huggingface-cli download org/other"), "{err}");
    let (ok, err) = build(&cache, &work, &["--model", "org/tiny", "--revision", "v2", "--output", "x"]);
    assert!(!ok && err.contains("not at this revision") && err.contains("refs/v2") && err.contains("--revision v2"), "{err}");
    // A snapshot whose config.json is missing (an interrupted download).
    std::fs::remove_file(cache.join("models--org--tiny/snapshots").join(sha).join("config.json")).unwrap();
    let (ok, err) = build(&cache, &work, &["--model", "org/tiny", "--output", "x"]);
    assert!(!ok && err.contains("is not complete") && err.contains("no config.json"), "{err}");
    assert!(!work.join("x").exists());
    // A local folder still wins, and --revision with one is refused.
    let (ok, err) = build(&cache, &work, &["--model", fixture.to_str().unwrap(), "--revision", "main", "--output", "x"]);
    assert!(!ok && err.contains("--revision applies to a hub model id"), "{err}");
}

#[test]
fn hub_ids_not_in_the_cache_are_downloaded_into_it() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = dir.path().join("fx");
    copy_fixture("tiny-llama", &fixture);
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&fixture)
        .unwrap()
        .map(|e| e.unwrap())
        .map(|e| (e.file_name().to_string_lossy().into_owned(), std::fs::read(e.path()).unwrap()))
        .collect();
    // A file a build never reads is listed but not fetched; a nested one is linked two
    // folders deep.
    files.push(("pytorch_model.bin".into(), vec![0u8; 64]));
    files.push(("1_Pooling/config.json".into(), br#"{"pooling_mode_mean_tokens": true}"#.to_vec()));
    assert!(files.iter().any(|(n, _)| hub_server::is_lfs(n)), "the fixture has an LFS-served file");
    let sha = "89abcdef0123456789abcdef0123456789abcdef";
    let hub = hub_server::serve(files.clone(), sha, hub_server::Lies::default());
    let cache = dir.path().join("cache");
    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();

    let (ok, err) = build_with(&cache, &work, Some(&hub.url), &["--model", "org/tiny", "--output", "out"]);
    assert!(ok, "{err}");
    assert!(work.join("out/model.onnx").is_file() && work.join("out/tokenizer.json").is_file(), "{err}");
    // The Python client's layout: refs/main -> commit (no newline), snapshot links into
    // blobs/<etag>, the etag of an LFS file being its X-Linked-Etag (the CDN's ETag is none).
    let repo = cache.join("models--org--tiny");
    assert_eq!(std::fs::read_to_string(repo.join("refs/main")).unwrap(), sha);
    for (name, data) in files.iter().filter(|(n, _)| n != "pytorch_model.bin") {
        let link = repo.join("snapshots").join(sha).join(name);
        assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink(), "{name} is a link into blobs/");
        let ups = "../".repeat(name.matches('/').count() + 2);
        assert_eq!(std::fs::read_link(&link).unwrap(), Path::new(&format!("{ups}blobs/{}", hub_server::etag_of(name, data))), "{name}");
        assert_eq!(&std::fs::read(&link).unwrap(), data, "{name}");
    }
    let blobs: Vec<String> = std::fs::read_dir(repo.join("blobs")).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(blobs.len(), files.len() - 1, "one blob per fetched file, no temporary file left: {blobs:?}");
    let fetched = hub.requests();
    assert!(!fetched.iter().any(|p| p.ends_with("pytorch_model.bin")), "{fetched:?}");
    assert!(fetched.iter().any(|p| p == &format!("/org/tiny/resolve/{sha}/model.safetensors")), "files are fetched at the listed commit: {fetched:?}");
    assert!(fetched.iter().any(|p| p.starts_with("/cdn/")), "the LFS redirect is followed: {fetched:?}");
    assert_eq!(fetched.last().map(String::as_str), Some(&*format!("/org/tiny/resolve/{sha}/config.json")), "config.json comes last");

    // Now cached: offline works, and so does online, and nothing is requested again.
    let before = hub.requests().len();
    let (ok, err) = build(&cache, &work, &["--model", "org/tiny", "--output", "out2"]);
    assert!(ok, "{err}");
    let (ok, err) = build_with(&cache, &work, Some(&hub.url), &["--model", "org/tiny", "--output", "out3"]);
    assert!(ok, "{err}");
    assert_eq!(hub.requests().len(), before);

    // A snapshot missing one file (refs/main not yet written, as after an interrupted
    // download): only that file is fetched again.
    std::fs::remove_file(repo.join("refs/main")).unwrap();
    std::fs::remove_file(repo.join("snapshots").join(sha).join("tokenizer.json")).unwrap();
    let (ok, err) = build_with(&cache, &work, Some(&hub.url), &["--model", "org/tiny", "--output", "out4"]);
    assert!(ok, "{err}");
    let again: Vec<String> = hub.requests()[before..].to_vec();
    assert_eq!(again, vec!["/api/models/org/tiny/revision/main".to_string(), format!("/org/tiny/resolve/{sha}/tokenizer.json")]);
    assert_eq!(std::fs::read_to_string(repo.join("refs/main")).unwrap(), sha);

    // A model the hub does not have: the error names what was tried.
    let (ok, err) = build_with(&cache, &work, Some(&hub.url), &["--model", "org/missing", "--output", "x"]);
    assert!(!ok && err.contains("models--org--missing does not exist") && err.contains("downloading it failed"), "{err}");
    assert!(err.contains(&hub.url) && err.contains("404") && err.contains("Repository not found"), "{err}");
    assert!(!work.join("x").exists());
}

/// Mistral's repositories carry their weights twice: the transformers shards (with
/// `model.safetensors.index.json`) and `consolidated.safetensors` in Mistral's own names. Only
/// what a build reads is fetched: the index first, then the shards it maps; beside a single
/// `model.safetensors`, that file.
#[test]
fn weights_a_build_does_not_read_are_not_downloaded() {
    for fixture_name in ["tiny-llama-sharded", "tiny-llama"] {
        let dir = tempfile::tempdir().unwrap();
        let fixture = dir.path().join("fx");
        copy_fixture(fixture_name, &fixture);
        let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&fixture)
            .unwrap()
            .map(|e| e.unwrap())
            .map(|e| (e.file_name().to_string_lossy().into_owned(), std::fs::read(e.path()).unwrap()))
            .collect();
        files.push(("consolidated.safetensors".into(), vec![7u8; 4096]));
        let sha = "fedcba9876543210fedcba9876543210fedcba98";
        let hub = hub_server::serve(files.clone(), sha, hub_server::Lies::default());
        let (cache, work) = (dir.path().join("cache"), dir.path().join("work"));
        std::fs::create_dir(&work).unwrap();
        let (ok, err) = build_with(&cache, &work, Some(&hub.url), &["--model", "org/tiny", "--output", "out"]);
        assert!(ok, "{fixture_name}: {err}");
        assert!(err.contains("not downloading consolidated.safetensors"), "{fixture_name}: {err}");
        let fetched = hub.requests();
        assert!(!fetched.iter().any(|p| p.contains("consolidated")), "{fixture_name}: {fetched:?}");
        let shards: Vec<&(String, Vec<u8>)> = files.iter().filter(|(n, _)| n.starts_with("model") && n.ends_with(".safetensors")).collect();
        assert!(!shards.is_empty());
        for (name, _) in &shards {
            assert!(fetched.iter().any(|p| p.ends_with(&format!("/{name}"))), "{fixture_name}: {name} fetched: {fetched:?}");
        }
        if fixture_name == "tiny-llama-sharded" {
            let at = |name: &str| fetched.iter().position(|p| p.ends_with(name)).unwrap();
            assert!(at("/model.safetensors.index.json") < shards.iter().map(|(n, _)| at(&format!("/{n}"))).min().unwrap(), "the index first: {fetched:?}");
        }
        assert!(work.join("out/model.onnx").is_file());
    }
}

/// A download that breaks off is continued by the next attempt from where it stopped (a
/// `Range` request), not started over, and the blob is whole and checked.
#[test]
fn a_broken_off_download_resumes_where_it_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = dir.path().join("fx");
    copy_fixture("tiny-llama", &fixture);
    let files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&fixture)
        .unwrap()
        .map(|e| e.unwrap())
        .map(|e| (e.file_name().to_string_lossy().into_owned(), std::fs::read(e.path()).unwrap()))
        .collect();
    let weights = files.iter().find(|(n, _)| n == "model.safetensors").unwrap().1.clone();
    let sha = "0123456789abcdef0123456789abcdef01234567";
    let lies = hub_server::Lies { broken: Some(("model.safetensors".into(), hub_server::Break::TruncateOnce)), ..hub_server::Lies::default() };
    let hub = hub_server::serve(files, sha, lies);
    let cache = dir.path().join("cache");
    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let (ok, err) = build_with(&cache, &work, Some(&hub.url), &["--model", "org/tiny", "--output", "out"]);
    assert!(ok, "{err}");
    let half = weights.len() / 2;
    assert!(err.contains(&format!("model.safetensors: resuming at byte {half} of {}", weights.len())), "{err}");
    let cdn: Vec<String> = hub.requests().into_iter().filter(|p| p.starts_with("/cdn/")).collect();
    let object = format!("/cdn/{}", hub_server::sha256(&weights));
    assert_eq!(cdn, vec![object.clone(), format!("{object}#bytes={half}-")]);
    let blob = cache.join("models--org--tiny/blobs").join(hub_server::sha256(&weights));
    assert_eq!(std::fs::read(&blob).unwrap(), weights);
    let left: Vec<String> = std::fs::read_dir(cache.join("models--org--tiny/blobs")).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert!(!left.iter().any(|n| n.ends_with(".incomplete")), "{left:?}");

    // A server that answers the range with the whole file: the file starts over, still whole.
    let files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&fixture).unwrap().map(|e| e.unwrap()).map(|e| (e.file_name().to_string_lossy().into_owned(), std::fs::read(e.path()).unwrap())).collect();
    let lies = hub_server::Lies { broken: Some(("model.safetensors".into(), hub_server::Break::TruncateOnce)), ignore_range: true, ..hub_server::Lies::default() };
    let hub = hub_server::serve(files, sha, lies);
    let cache = dir.path().join("cache2");
    let (ok, err) = build_with(&cache, &work, Some(&hub.url), &["--model", "org/tiny", "--output", "out2"]);
    assert!(ok, "{err}");
    assert!(!err.contains("resuming"), "nothing was resumed: {err}");
    assert_eq!(std::fs::read(cache.join("models--org--tiny/blobs").join(hub_server::sha256(&weights))).unwrap(), weights);
    let cdn: Vec<String> = hub.requests().into_iter().filter(|p| p.starts_with("/cdn/")).collect();
    assert_eq!(cdn, vec![object.clone(), format!("{object}#bytes={half}-")], "asked for the rest, sent the whole");
    let left: Vec<String> = std::fs::read_dir(cache.join("models--org--tiny/blobs")).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert!(!left.iter().any(|n| n.ends_with(".incomplete")), "{left:?}");
}

/// A GGUF repository as llama.cpp's conversions are published: no config.json, one model per
/// quantization (here one split in three files inside a folder, one single file), a vision
/// projector and a README.
fn gguf_repository() -> Vec<(String, Vec<u8>)> {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/python/data");
    let read = |p: &str| std::fs::read(data.join(p)).unwrap();
    let mut files: Vec<(String, Vec<u8>)> =
        (1..=3).map(|i| (format!("Q4/tiny-gemma-Q4_0-{i:05}-of-00003.gguf"), read(&format!("gguf-split/tiny-gemma-Q-{i:05}-of-00003.gguf")))).collect();
    files.push(("tiny-gemma-F32.gguf".into(), read("gguf-gemma/tiny-gemma.F32.gguf")));
    files.push(("mmproj-tiny-gemma-f16.gguf".into(), vec![0u8; 64]));
    files.push(("README.md".into(), b"# tiny-gemma GGUF".to_vec()));
    files
}

/// The package's files but build_report.json (which names where the checkpoint was read).
fn package(dir: &Path) -> Vec<(String, Vec<u8>)> {
    snapshot(dir)
        .into_iter()
        .map(|(p, b)| (p.file_name().unwrap().to_string_lossy().into_owned(), b))
        .filter(|(n, _)| n != "build_report.json")
        .collect()
}

#[test]
fn a_gguf_repository_gives_the_one_model_its_tag_names() {
    let dir = tempfile::tempdir().unwrap();
    let sha = "fedcba9876543210fedcba9876543210fedcba98";
    let hub = hub_server::serve(gguf_repository(), sha, hub_server::Lies::default());
    let cache = dir.path().join("cache");
    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let online = |args: &[&str]| build_with(&cache, &work, Some(&hub.url), args);
    let resolves = |from: usize| -> Vec<String> {
        hub.requests()[from..].iter().filter_map(|p| p.strip_prefix(&format!("/org/tiny/resolve/{sha}/")).map(str::to_string)).collect()
    };

    // Two models and no tag: refused, naming both and how to name one, before any file.
    let (ok, err) = online(&["--model", "org/tiny", "--output", "x"]);
    assert!(!ok && err.contains("lists 2 GGUF models for `org/tiny`") && err.contains("`org/tiny:TAG`"), "{err}");
    assert!(err.contains("`Q4_0` (Q4/tiny-gemma-Q4_0-00001-of-00003.gguf and the 2 other files of its split set)") && err.contains("`F32` (tiny-gemma-F32.gguf)"), "{err}");
    assert!(!err.contains("mmproj"), "a vision projector is no model: {err}");
    // A tag no file has: refused the same way.
    let (ok, err) = online(&["--model", "org/tiny:Q5_K_M", "--output", "x"]);
    assert!(!ok && err.contains("no GGUF model of `org/tiny` named `Q5_K_M`") && err.contains("`F32`"), "{err}");
    assert_eq!(hub.requests(), vec!["/api/models/org/tiny/revision/main".to_string(); 2], "only the listing is asked for");
    assert!(!work.join("x").exists() && !cache.join("models--org--tiny/snapshots").exists());

    // The tag, in any case: the three files of its split set and nothing else, giving the
    // package the same set builds from a folder.
    let (ok, err) = online(&["--model", "org/tiny:q4_0", "--output", "out"]);
    assert!(ok, "{err}");
    assert!(err.contains("downloading org/tiny's GGUF model Q4/tiny-gemma-Q4_0 (main, 3 of 3 files)"), "{err}");
    let mut got = resolves(2);
    got.sort();
    assert_eq!(got, (1..=3).map(|i| format!("Q4/tiny-gemma-Q4_0-{i:05}-of-00003.gguf")).collect::<Vec<_>>());
    let local = dir.path().join("local");
    let split = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/python/data/gguf-split/tiny-gemma-Q-00001-of-00003.gguf");
    let r = tailor(&split, &local, &[]);
    assert!(r.status.success(), "{}", r.stderr);
    assert_eq!(package(&work.join("out")), package(&local), "the downloaded model builds the package of the same files read locally");
    let report = std::fs::read_to_string(work.join("out/build_report.json")).unwrap();
    assert!(report.contains("\"file\": \"tiny-gemma-Q4_0-00001-of-00003.gguf and the 2 other files of its split set\""), "{report}");

    // Cached: offline with the tag asks for nothing; without one it says what to add; a model
    // not cached says how to fetch it.
    let before = hub.requests().len();
    let (ok, err) = build(&cache, &work, &["--model", "org/tiny:Q4_0", "--output", "out2"]);
    assert!(ok, "{err}");
    let (ok, err) = build(&cache, &work, &["--model", "org/tiny", "--output", "x"]);
    assert!(!ok && err.contains("`org/tiny` is cached at revision `main` as GGUF files only, `Q4_0` (Q4/") && err.contains("name the model with its tag (`org/tiny:TAG`)"), "{err}");
    let (ok, err) = build(&cache, &work, &["--model", "org/tiny:f32", "--output", "x"]);
    assert!(!ok && err.contains("no GGUF model of `org/tiny` named `f32`") && err.contains("huggingface-cli download org/tiny --include '*[Ff]32*.gguf'"), "{err}");
    assert_eq!(hub.requests().len(), before);
    // Online, the listing says which model a tag names (the cached files could name fewer):
    // one request, no file fetched again.
    let (ok, err) = online(&["--model", "org/tiny:Q4_0", "--output", "out2b"]);
    assert!(ok, "{err}");
    assert_eq!(hub.requests()[before..], ["/api/models/org/tiny/revision/main".to_string()]);
    let before = hub.requests().len();
    // Online, the other model: only its file is fetched.
    let (ok, err) = online(&["--model", "org/tiny:F32", "--output", "out3"]);
    assert!(ok, "{err}");
    assert_eq!(resolves(before), vec!["tiny-gemma-F32.gguf".to_string()]);

    // A split file gone from the cache: offline names it; online fetches it alone.
    let snapshot_dir = cache.join("models--org--tiny/snapshots").join(sha);
    std::fs::remove_file(snapshot_dir.join("Q4/tiny-gemma-Q4_0-00002-of-00003.gguf")).unwrap();
    let (ok, err) = build(&cache, &work, &["--model", "org/tiny:Q4_0", "--output", "x"]);
    assert!(!ok && err.contains("only 2 of the 3 files of `Q4/tiny-gemma-Q4_0`'s split set (missing: `Q4/tiny-gemma-Q4_0-00002-of-00003.gguf`)"), "{err}");
    let before = hub.requests().len();
    let (ok, err) = online(&["--model", "org/tiny:Q4_0", "--output", "out4"]);
    assert!(ok, "{err}");
    assert_eq!(resolves(before), vec!["Q4/tiny-gemma-Q4_0-00002-of-00003.gguf".to_string()]);
    assert_eq!(package(&work.join("out4")), package(&local));
    assert!(!work.join("x").exists());

    // A repository of one GGUF model needs no tag, also with a config.json beside it (some
    // uploaders add one) when it has no safetensors.
    let mut one: Vec<(String, Vec<u8>)> = gguf_repository().into_iter().filter(|(n, _)| !n.starts_with("Q4/")).collect();
    one.push(("config.json".into(), br#"{"model_type": "gemma"}"#.to_vec()));
    let hub1 = hub_server::serve(one, sha, hub_server::Lies::default());
    let cache1 = dir.path().join("cache1");
    let (ok, err) = build_with(&cache1, &work, Some(&hub1.url), &["--model", "org/tiny", "--output", "out5"]);
    assert!(ok, "{err}");
    assert_eq!(package(&work.join("out5")), package(&work.join("out3")));
    // A tag that is no name is refused before the hub is asked.
    let (ok, err) = build_with(&cache1, &work, Some(&hub1.url), &["--model", "org/tiny:../x", "--output", "x"]);
    assert!(!ok && err.contains("the tag after `:`"), "{err}");
}

#[test]
fn build_help_names_the_hub_variables() {
    let out = Command::new(env!("CARGO_BIN_EXE_tailor")).args(["build", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    for var in ["HF_HUB_CACHE", "HF_ENDPOINT", "HF_TOKEN", "HF_HUB_OFFLINE", "HF_HUB_ETAG_TIMEOUT", "HF_HUB_DOWNLOAD_TIMEOUT", "refs/pr/1"] {
        assert!(help.contains(var), "{var}: {help}");
    }
}
