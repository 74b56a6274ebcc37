//! `--model ORG/NAME` through the real binary, against a fake Hugging Face cache with the real
//! layout (blobs, snapshots of relative symlinks, refs): found by id and revision; offline, a
//! missing model, revision or file says where it looked and how to fetch it; online, it is
//! downloaded from a local server on 127.0.0.1 that answers the hub's URLs for one fixture.

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

/// `tailor build ARGS` with the cache at `cache`; `endpoint` `None` runs it offline.
fn build_with(cache: &Path, cwd: &Path, endpoint: Option<&str>, args: &[&str]) -> (bool, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tailor"));
    cmd.arg("build").args(args).env("HF_HUB_CACHE", cache).env_remove("HF_TOKEN").current_dir(cwd);
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

/// A stand-in for the hub on 127.0.0.1: the file list of `org/tiny` at `main`, and each file
/// with the headers `hf-hub` reads (`etag`, `x-repo-commit`, `Content-Range` for ranges). Every
/// request's path is recorded. Serves until the test ends.
struct FakeHub {
    url: String,
    requests: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

fn fake_hub(files: Vec<(String, Vec<u8>)>, sha: &'static str) -> FakeHub {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let requests = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = requests.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            if reader.read_line(&mut line).is_err() {
                continue;
            }
            let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
            let mut range = None;
            loop {
                let mut h = String::new();
                if reader.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
                    break;
                }
                if let Some((k, v)) = h.split_once(':') {
                    if k.eq_ignore_ascii_case("range") {
                        range = Some(v.trim().to_string());
                    }
                }
            }
            seen.lock().unwrap().push(path.clone());
            let (status, headers, body): (&str, Vec<String>, Vec<u8>) = if path == "/api/models/org/tiny/revision/main" {
                let siblings: Vec<String> = files.iter().map(|(n, _)| format!("{{\"rfilename\":\"{n}\"}}")).collect();
                let json = format!("{{\"sha\":\"{sha}\",\"siblings\":[{}]}}", siblings.join(","));
                ("200 OK", vec!["Content-Type: application/json".into()], json.into_bytes())
            } else if let Some((i, (_, data))) = path.strip_prefix("/org/tiny/resolve/main/").and_then(|f| files.iter().enumerate().find(|(_, (n, _))| n == f)) {
                let total = data.len();
                let (start, end) = match range.as_deref().and_then(|r| r.strip_prefix("bytes=")).and_then(|r| r.split_once('-')) {
                    Some((a, b)) => (a.parse().unwrap_or(0), b.parse::<usize>().map_or(total.saturating_sub(1), |e| e.min(total.saturating_sub(1)))),
                    None => (0, total.saturating_sub(1)),
                };
                let body = if total == 0 || start > end { Vec::new() } else { data[start..=end].to_vec() };
                let headers = vec![
                    format!("etag: \"blob-{i}\""),
                    format!("x-repo-commit: {sha}"),
                    format!("Content-Range: bytes {start}-{end}/{total}"),
                ];
                ("206 Partial Content", headers, body)
            } else {
                ("404 Not Found", vec![], b"not found".to_vec())
            };
            let mut head = format!("HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n", body.len());
            for h in headers {
                head.push_str(&h);
                head.push_str("\r\n");
            }
            head.push_str("\r\n");
            let _ = stream.write_all(head.as_bytes()).and_then(|_| stream.write_all(&body));
        }
    });
    FakeHub { url, requests }
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
    // A file a build never reads is listed but not fetched.
    files.push(("pytorch_model.bin".into(), vec![0u8; 64]));
    let sha = "89abcdef0123456789abcdef0123456789abcdef";
    let hub = fake_hub(files.clone(), sha);
    let cache = dir.path().join("cache");
    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();

    let (ok, err) = build_with(&cache, &work, Some(&hub.url), &["--model", "org/tiny", "--output", "out"]);
    assert!(ok, "{err}");
    assert!(work.join("out/model.onnx").is_file() && work.join("out/tokenizer.json").is_file(), "{err}");
    // The Python client's layout: refs/main -> commit, snapshot links into blobs.
    let repo = cache.join("models--org--tiny");
    assert_eq!(std::fs::read_to_string(repo.join("refs/main")).unwrap().trim(), sha);
    for (name, data) in files.iter().filter(|(n, _)| n != "pytorch_model.bin") {
        let link = repo.join("snapshots").join(sha).join(name);
        assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink(), "{name} is a link into blobs/");
        assert_eq!(&std::fs::read(&link).unwrap(), data, "{name}");
    }
    let fetched = hub.requests.lock().unwrap().clone();
    assert!(!fetched.iter().any(|p| p.ends_with("pytorch_model.bin")), "{fetched:?}");
    assert!(fetched.iter().any(|p| p.ends_with("/model.safetensors")), "{fetched:?}");

    // Now cached: offline works, and nothing is requested again.
    let before = hub.requests.lock().unwrap().len();
    let (ok, err) = build(&cache, &work, &["--model", "org/tiny", "--output", "out2"]);
    assert!(ok, "{err}");
    assert_eq!(hub.requests.lock().unwrap().len(), before);

    // A model the hub does not have: the error names what was tried.
    let (ok, err) = build_with(&cache, &work, Some(&hub.url), &["--model", "org/missing", "--output", "x"]);
    assert!(!ok && err.contains("models--org--missing does not exist") && err.contains("downloading it failed"), "{err}");
    assert!(err.contains(&hub.url) && err.contains("404"), "{err}");
    assert!(!work.join("x").exists());
}
