//! A stand-in for the Hugging Face hub on 127.0.0.1, shared by the hub tests: the listing of
//! `org/tiny` (`/api/models/org/tiny/revision/REV`) and each file at
//! `/org/tiny/resolve/REV/FILE`, answered as the hub does: a regular file with its git blob
//! hash as `ETag`; an LFS file (`*.safetensors`, `*.gguf`) by a redirect to `/cdn/<sha256>` carrying
//! `X-Linked-Etag` and `X-Linked-Size`, the CDN's own `ETag` being no hash; `X-Repo-Commit`
//! on both. Honest by default; [`Lies`] changes one answer. A path it does not know (outside
//! `/api/`) is served as a small JSON file, so a client that follows a lying name gets bytes
//! to write. Every request's path is recorded. One thread per connection, so a connection
//! left hanging does not stop the others.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sha1::Digest;

/// Removes the variables of the outer environment that would change how `cmd` reaches the
/// hub (proxies, timeouts, a token, the cache folders).
pub fn clean_env(cmd: &mut std::process::Command) -> &mut std::process::Command {
    for var in [
        "ALL_PROXY", "all_proxy", "HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy",
        "HF_HUB_ETAG_TIMEOUT", "HF_HUB_DOWNLOAD_TIMEOUT", "HF_TOKEN", "HF_HOME", "XDG_CACHE_HOME", "HF_HUB_OFFLINE", "HF_ENDPOINT",
    ] {
        cmd.env_remove(var);
    }
    cmd
}

/// The git blob hash of `data` (the hub's `ETag` of a regular file).
pub fn git_sha1(data: &[u8]) -> String {
    let mut h = sha1::Sha1::new();
    h.update(format!("blob {}\0", data.len()).as_bytes());
    h.update(data);
    hex(&h.finalize())
}

/// The SHA-256 of `data` (an LFS file's `X-Linked-Etag`).
pub fn sha256(data: &[u8]) -> String {
    hex(&sha2::Sha256::digest(data))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Is `name` served as an LFS file (through the CDN redirect)?
pub fn is_lfs(name: &str) -> bool {
    name.ends_with(".safetensors") || name.ends_with(".gguf")
}

/// The hash the hub names `name`'s blob by.
pub fn etag_of(name: &str, data: &[u8]) -> String {
    if is_lfs(name) {
        sha256(data)
    } else {
        git_sha1(data)
    }
}

/// How the bytes of one file go wrong.
#[derive(Clone, Debug)]
pub enum Break {
    /// Headers and half the bytes, then nothing (the connection stays open).
    Stall,
    /// Headers announcing every byte, half of them, then the connection closes.
    Truncate,
    /// [`Break::Truncate`] the first time the bytes are asked for, honest after.
    TruncateOnce,
}

/// What the server lies about; each `None`/empty field is answered honestly.
#[derive(Clone, Debug, Default)]
pub struct Lies {
    /// The listing's `sha`.
    pub sha: Option<String>,
    /// More names in the listing (served as JSON when asked for).
    pub extra_names: Vec<String>,
    /// Every file's hash header (`ETag`, or an LFS file's `X-Linked-Etag`), sent as is.
    pub etag: Option<String>,
    /// Every file's `X-Repo-Commit`.
    pub commit: Option<String>,
    /// The listing request is accepted and never answered.
    pub listing_hangs: bool,
    /// One file's bytes go wrong.
    pub broken: Option<(String, Break)>,
    /// A `Range` request is answered with the whole file (`200`), as a server may.
    pub ignore_range: bool,
    /// The `Content-Range` sent with a ranged answer, whatever was asked.
    pub content_range: Option<String>,
    /// A request for a whole file is answered `206` with the whole file and its range.
    pub unsolicited_206: bool,
}

pub struct Hub {
    pub url: String,
    pub requests: Arc<Mutex<Vec<String>>>,
}

impl Hub {
    pub fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }
}

/// Serves `files` of `org/tiny` at commit `sha`, with `lies`, until the test process ends.
pub fn serve(files: Vec<(String, Vec<u8>)>, sha: &str, lies: Lies) -> Hub {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let requests = Arc::new(Mutex::new(Vec::new()));
    let state = Arc::new(State { url: url.clone(), files, sha: sha.to_string(), lies, requests: requests.clone(), served: Mutex::new(Vec::new()) });
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let state = state.clone();
            std::thread::spawn(move || state.answer(stream));
        }
    });
    Hub { url, requests }
}

struct State {
    url: String,
    files: Vec<(String, Vec<u8>)>,
    sha: String,
    lies: Lies,
    requests: Arc<Mutex<Vec<String>>>,
    /// The names whose bytes were sent, once per time.
    served: Mutex<Vec<String>>,
}

impl State {
    fn answer(&self, mut stream: TcpStream) {
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut line = String::new();
        if reader.read_line(&mut line).is_err() {
            return;
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
        // A ranged request is recorded with its range: `PATH#bytes=N-`.
        self.requests.lock().unwrap().push(match &range {
            Some(r) => format!("{path}#{r}"),
            None => path.clone(),
        });

        if path.starts_with("/api/models/org/tiny/revision/") {
            if self.lies.listing_hangs {
                std::thread::sleep(Duration::from_secs(120));
                return;
            }
            let names = self.files.iter().map(|(n, _)| n.clone()).chain(self.lies.extra_names.iter().cloned());
            let siblings: Vec<serde_json::Value> = names.map(|n| serde_json::json!({ "rfilename": n })).collect();
            let sha = self.lies.sha.clone().unwrap_or_else(|| self.sha.clone());
            let body = serde_json::json!({ "id": "org/tiny", "sha": sha, "siblings": siblings }).to_string();
            return reply(&mut stream, "200 OK", &["Content-Type: application/json".into()], body.as_bytes());
        }
        if path.starts_with("/api/") {
            return reply(&mut stream, "404 Not Found", &["X-Error-Message: Repository not found".into()], b"not found");
        }
        let commit = format!("X-Repo-Commit: {}", self.lies.commit.clone().unwrap_or_else(|| self.sha.clone()));
        if let Some(hash) = path.strip_prefix("/cdn/") {
            let Some((name, data)) = self.files.iter().find(|(n, d)| is_lfs(n) && sha256(d) == hash) else {
                return reply(&mut stream, "404 Not Found", &[], b"no such object");
            };
            return self.bytes(&mut stream, name, data, vec!["ETag: \"cdn-object-1\"".into()], range.as_deref());
        }
        let file = path.strip_prefix("/org/tiny/resolve/").and_then(|rest| rest.split_once('/')).map(|(_, f)| f.to_string());
        let known = file.as_deref().and_then(|f| self.files.iter().find(|(n, _)| n == f));
        match known {
            Some((name, data)) if is_lfs(name) => {
                let etag = self.lies.etag.clone().unwrap_or_else(|| format!("\"{}\"", sha256(data)));
                let headers = vec![
                    format!("Location: {}/cdn/{}", self.url, sha256(data)),
                    format!("X-Linked-Etag: {etag}"),
                    format!("X-Linked-Size: {}", data.len()),
                    // The git hash of the LFS pointer: a hash, but not the blob's name.
                    format!("ETag: \"{}\"", git_sha1(b"version https://git-lfs.github.com/spec/v1\n")),
                    commit,
                ];
                reply(&mut stream, "302 Found", &headers, b"")
            }
            Some((name, data)) => {
                let etag = self.lies.etag.clone().unwrap_or_else(|| format!("\"{}\"", git_sha1(data)));
                self.bytes(&mut stream, name, data, vec![format!("ETag: {etag}"), commit], range.as_deref());
            }
            None => {
                let data = b"{}";
                let etag = self.lies.etag.clone().unwrap_or_else(|| format!("\"{}\"", git_sha1(data)));
                self.bytes(&mut stream, "", data, vec![format!("ETag: {etag}"), commit], range.as_deref());
            }
        }
    }

    /// `data` (or the range asked for), broken as the lies say for `name`.
    fn bytes(&self, stream: &mut TcpStream, name: &str, data: &[u8], mut headers: Vec<String>, range: Option<&str>) {
        let total = data.len();
        let range = range.filter(|_| !self.lies.ignore_range);
        let (status, body) = match range.and_then(|r| r.strip_prefix("bytes=")).and_then(|r| r.split_once('-')) {
            Some((a, b)) => {
                let start = a.parse().unwrap_or(0);
                let end = b.parse::<usize>().map_or(total.saturating_sub(1), |e| e.min(total.saturating_sub(1)));
                headers.push(self.lies.content_range.as_ref().map_or_else(|| format!("Content-Range: bytes {start}-{end}/{total}"), |r| format!("Content-Range: {r}")));
                ("206 Partial Content", if total == 0 || start > end { Vec::new() } else { data[start..=end].to_vec() })
            }
            None if self.lies.unsolicited_206 && !name.is_empty() => {
                headers.push(format!("Content-Range: bytes 0-{}/{total}", total.saturating_sub(1)));
                ("206 Partial Content", data.to_vec())
            }
            None => ("200 OK", data.to_vec()),
        };
        // Whether this file's bytes are served for the first time.
        let first = {
            let mut served = self.served.lock().unwrap();
            let first = !served.iter().any(|n| n == name);
            served.push(name.to_string());
            first
        };
        match &self.lies.broken {
            Some((broken, how)) if broken == name && (first || !matches!(how, Break::TruncateOnce)) => {
                let mut head = format!("HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n", body.len());
                for h in &headers {
                    head.push_str(h);
                    head.push_str("\r\n");
                }
                head.push_str("\r\n");
                let _ = stream.write_all(head.as_bytes()).and_then(|_| stream.write_all(&body[..body.len() / 2])).and_then(|_| stream.flush());
                if let Break::Stall = how {
                    std::thread::sleep(Duration::from_secs(120));
                }
            }
            _ => reply(stream, status, &headers, &body),
        }
    }
}

fn reply(stream: &mut TcpStream, status: &str, headers: &[String], body: &[u8]) {
    let mut head = format!("HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n", body.len());
    for h in headers {
        head.push_str(h);
        head.push_str("\r\n");
    }
    head.push_str("\r\n");
    let _ = stream.write_all(head.as_bytes()).and_then(|_| stream.write_all(body));
}
