//! The HTTP side of a download (`ureq`, blocking): connect and read timeouts from the
//! environment (the Python client's variable names and defaults), a bounded number of
//! attempts, redirects followed by hand so the hub's own headers are read before a CDN's,
//! bounded reads, and the token sent only to the endpoint's own server.

use std::io::Read;
use std::time::Duration;

use super::names::shown;

/// Attempts per request in all (the first and two more), for network errors, 429 and 5xx.
pub(super) const ATTEMPTS: u32 = 3;
/// Redirects followed per request.
const MAX_REDIRECTS: usize = 5;
/// Seconds a connect, a send or a read may wait when no variable says otherwise (the Python
/// client's `DEFAULT_ETAG_TIMEOUT` / `DEFAULT_DOWNLOAD_TIMEOUT`).
const DEFAULT_TIMEOUT_SECS: u64 = 10;
/// The variable for the file listing (a metadata request, as the Python client's `HEAD`s).
pub(super) const ETAG_TIMEOUT_VAR: &str = "HF_HUB_ETAG_TIMEOUT";
/// The variable for each file's request (headers and bytes).
pub(super) const DOWNLOAD_TIMEOUT_VAR: &str = "HF_HUB_DOWNLOAD_TIMEOUT";

/// One attempt's failure: worth another attempt (the network, an overloaded server), or not
/// (the server's answer is wrong, a local write failed).
#[derive(Debug)]
pub(super) enum Failure {
    Transient(String),
    Fatal(String),
}

/// Runs `f` until it succeeds, fails for good, or has failed transiently [`ATTEMPTS`] times
/// (1 s, then 2 s apart; each retry is said on stderr).
pub(super) fn with_retries<T>(mut f: impl FnMut() -> Result<T, Failure>) -> Result<T, String> {
    let mut attempt = 1;
    loop {
        match f() {
            Ok(v) => return Ok(v),
            Err(Failure::Fatal(m)) => return Err(m),
            Err(Failure::Transient(m)) if attempt >= ATTEMPTS => return Err(format!("{m} (tried {ATTEMPTS} times)")),
            Err(Failure::Transient(m)) => {
                eprintln!("  {m}; trying again");
                std::thread::sleep(Duration::from_secs(u64::from(attempt)));
                attempt += 1;
            }
        }
    }
}

/// How long one connect, send or read may wait, and the variable that set it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Timeout {
    var: &'static str,
    value: Duration,
}

impl Timeout {
    /// `var` in seconds (a positive number, at most a day), else the default.
    fn from_env(var: &'static str) -> Result<Timeout, String> {
        let value = match std::env::var(var) {
            Ok(v) if !v.trim().is_empty() => match v.trim().parse::<f64>() {
                Ok(s) if s > 0.0 && s <= 86_400.0 => Duration::from_secs_f64(s),
                _ => {
                    return Err(format!(
                        "{var}=`{}` is not a number of seconds above 0 and at most 86400; unset it for the default ({DEFAULT_TIMEOUT_SECS} s)",
                        shown(&v)
                    ))
                }
            },
            _ => Duration::from_secs(DEFAULT_TIMEOUT_SECS),
        };
        Ok(Timeout { var, value })
    }

    fn said(&self) -> String {
        format!("{} s (set {} to wait longer)", self.value.as_secs_f64(), self.var)
    }
}

/// A client for one endpoint: `HF_ENDPOINT` (default `https://huggingface.co`), `HF_TOKEN`
/// as a bearer token, a proxy from the environment (`ALL_PROXY`, `HTTPS_PROXY`, `HTTP_PROXY`)
/// unless `NO_PROXY` names the endpoint's host.
pub(super) struct Client {
    endpoint: String,
    token: Option<String>,
    listing: Agent,
    files: Agent,
}

struct Agent {
    agent: ureq::Agent,
    timeout: Timeout,
}

/// A file's hub answer: the headers the cache layout needs, and where its bytes are.
pub(super) struct Resolved {
    /// The hub URL that answered (after redirects on the same server).
    pub url: String,
    /// `X-Repo-Commit`.
    pub commit: Option<String>,
    /// `X-Linked-Etag` (an LFS file's SHA-256), else `ETag`.
    pub etag: Option<String>,
    /// `X-Linked-Size`, else (when the hub sends the bytes itself) `Content-Length`.
    pub size: Option<u64>,
    bytes: Pending,
}

enum Pending {
    /// The hub's answer carries the bytes.
    Here(Box<ureq::Response>),
    /// The hub redirects to another server (a CDN) for them.
    At(String),
}

/// A response body being read, with what checks it.
pub(super) struct Body {
    pub url: String,
    /// `Content-Length`, when sent.
    pub len: Option<u64>,
    /// Where the bytes start in the file: the offset asked for when the server answered the
    /// range (`206`, its `Content-Range` checked), else 0 (the whole file from its start).
    pub start: u64,
    pub reader: Box<dyn Read + Send + Sync>,
    pub timeout: Timeout,
}

impl Client {
    pub(super) fn from_env() -> Result<Client, String> {
        let endpoint = std::env::var("HF_ENDPOINT")
            .ok()
            .map(|e| e.trim().trim_end_matches('/').to_string())
            .filter(|e| !e.is_empty())
            .unwrap_or_else(|| "https://huggingface.co".to_string());
        if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) || host(&endpoint).is_empty() {
            return Err(format!("HF_ENDPOINT=`{}` is not an http:// or https:// URL", shown(&endpoint)));
        }
        let token = std::env::var("HF_TOKEN").ok().map(|t| t.trim().to_string()).filter(|t| !t.is_empty());
        let proxy = !no_proxy_names(&host(&endpoint), std::env::var("NO_PROXY").or_else(|_| std::env::var("no_proxy")).ok().as_deref());
        let agent = |var| -> Result<Agent, String> {
            let timeout = Timeout::from_env(var)?;
            let agent = ureq::AgentBuilder::new()
                .timeout_connect(timeout.value)
                .timeout_read(timeout.value)
                .timeout_write(timeout.value)
                .redirects(0)
                .try_proxy_from_env(proxy)
                .user_agent(&format!("tailor/{}", env!("CARGO_PKG_VERSION")))
                .build();
            Ok(Agent { agent, timeout })
        };
        Ok(Client { listing: agent(ETAG_TIMEOUT_VAR)?, files: agent(DOWNLOAD_TIMEOUT_VAR)?, endpoint, token })
    }

    pub(super) fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The JSON at `url` (the file listing), at most `limit` bytes of it.
    pub(super) fn get_json(&self, url: &str, limit: u64) -> Result<serde_json::Value, Failure> {
        let (resp, _) = self.get(&self.listing, url, false)?;
        let at = resp.get_url().to_string();
        let mut buf = Vec::new();
        resp.into_reader().take(limit + 1).read_to_end(&mut buf).map_err(|e| read_failure(&at, e, self.listing.timeout, None))?;
        if buf.len() as u64 > limit {
            return Err(Failure::Fatal(format!(
                "{at} answered more than {} MiB, far more than a file listing; check HF_ENDPOINT",
                limit >> 20
            )));
        }
        serde_json::from_slice(&buf).map_err(|e| Failure::Fatal(format!("{at} did not answer with JSON ({e}); check HF_ENDPOINT")))
    }

    /// The hub's answer for a file's `resolve` URL, up to its bytes: redirects on the same
    /// server are followed, one to another server is where the bytes are (the Python
    /// client reads the hub's headers the same way).
    pub(super) fn resolve(&self, url: &str) -> Result<Resolved, Failure> {
        let (resp, elsewhere) = self.get(&self.files, url, true)?;
        let at = resp.get_url().to_string();
        let header = |n: &str| resp.header(n).map(str::to_string);
        let size = match header("X-Linked-Size").or_else(|| if elsewhere.is_none() { header("Content-Length") } else { None }) {
            None => None,
            Some(s) => Some(s.trim().parse::<u64>().map_err(|_| Failure::Fatal(format!("{at} gives the size `{}`, not a number of bytes", shown(&s))))?),
        };
        Ok(Resolved {
            commit: header("X-Repo-Commit"),
            etag: header("X-Linked-Etag").or_else(|| header("ETag")),
            size,
            url: at,
            bytes: match elsewhere {
                Some(location) => Pending::At(location),
                None => Pending::Here(Box::new(resp)),
            },
        })
    }

    /// Whether the bytes come from a redirect's target, the only server asked for a range.
    pub(super) fn ranged(resolved: &Resolved) -> bool {
        matches!(resolved.bytes, Pending::At(_))
    }

    /// The bytes a [`Resolved`] points at: its own body, or a GET of the redirect's target,
    /// from byte `from` of `size` when `from` is not 0 and the bytes come from the target (an
    /// LFS file: a `Range` request, which a server may ignore; see [`Body::start`]).
    pub(super) fn body(&self, resolved: Resolved, from: u64, size: u64) -> Result<Body, Failure> {
        // Only the redirect's target is asked for a range: the hub's own answer is whole.
        let (resp, from) = match resolved.bytes {
            Pending::Here(resp) => (*resp, 0),
            Pending::At(location) => (self.get_from(&self.files, &location, false, from)?.0, from),
        };
        let url = resp.get_url().to_string();
        let len = match resp.header("Content-Length") {
            None => None,
            Some(s) => Some(s.trim().parse::<u64>().map_err(|_| Failure::Fatal(format!("{url} gives the Content-Length `{}`, not a number of bytes", shown(s))))?),
        };
        let start = if resp.status() == 206 {
            let range = resp.header("Content-Range").unwrap_or_default();
            if from == 0 {
                return Err(Failure::Fatal(format!("{url} answered 206 (part of the file) to a request for all of it")));
            }
            if content_range(range) != Some((from, size.saturating_sub(1), size)) {
                return Err(Failure::Fatal(format!(
                    "{url} answered the range from byte {from} of {size} with `Content-Range: {}`, not `bytes {from}-{}/{size}`",
                    shown(range),
                    size.saturating_sub(1)
                )));
            }
            from
        } else {
            0
        };
        Ok(Body { url, len, start, reader: resp.into_reader(), timeout: self.files.timeout })
    }

    /// GET `url`, following redirects; with `stop_elsewhere`, a redirect to an absolute URL
    /// is not followed but returned (with the response that made it).
    fn get(&self, agent: &Agent, url: &str, stop_elsewhere: bool) -> Result<(ureq::Response, Option<String>), Failure> {
        self.get_from(agent, url, stop_elsewhere, 0)
    }

    /// [`Self::get`] asking for the bytes from `from` on (`Range`, on every hop) when it is
    /// not 0.
    fn get_from(&self, agent: &Agent, url: &str, stop_elsewhere: bool, from: u64) -> Result<(ureq::Response, Option<String>), Failure> {
        let mut url = url.to_string();
        for _ in 0..=MAX_REDIRECTS {
            let resp = self.call(agent, &url, from)?;
            if !(300..400).contains(&resp.status()) {
                return Ok((resp, None));
            }
            let Some(location) = resp.header("Location").map(str::trim).filter(|l| !l.is_empty()) else {
                return Err(Failure::Fatal(format!("{url} answered {} without a Location to go to", resp.status())));
            };
            let next = if location.starts_with('/') && !location.starts_with("//") {
                format!("{}{location}", origin(&url))
            } else if location.starts_with("https://") || location.starts_with("http://") {
                if url.starts_with("https://") && location.starts_with("http://") {
                    return Err(Failure::Fatal(format!("{url} redirects from https to plain http ({}); refused", shown(location))));
                }
                if stop_elsewhere {
                    let location = location.to_string();
                    return Ok((resp, Some(location)));
                }
                location.to_string()
            } else {
                return Err(Failure::Fatal(format!("{url} redirects to `{}`, neither a path nor an http(s) URL", shown(location))));
            };
            url = next;
        }
        Err(Failure::Fatal(format!("{url}: more than {MAX_REDIRECTS} redirects")))
    }

    /// One request; the token goes only to the endpoint's own server (scheme, host, port).
    fn call(&self, agent: &Agent, url: &str, from: u64) -> Result<ureq::Response, Failure> {
        let mut req = agent.agent.get(url).set("Accept-Encoding", "identity");
        if from > 0 {
            req = req.set("Range", &format!("bytes={from}-"));
        }
        if let Some(token) = &self.token {
            if origin(url).eq_ignore_ascii_case(origin(&self.endpoint)) {
                req = req.set("Authorization", &format!("Bearer {token}"));
            }
        }
        match req.call() {
            Ok(resp) => Ok(resp),
            Err(ureq::Error::Status(code, resp)) => Err(status_failure(url, code, &resp)),
            Err(ureq::Error::Transport(t)) => Err(transport_failure(url, &t, agent.timeout)),
        }
    }
}

fn status_failure(url: &str, code: u16, resp: &ureq::Response) -> Failure {
    let detail = resp.header("X-Error-Message").map(|m| format!(": {}", shown(m))).unwrap_or_default();
    let hint = match code {
        401 | 403 => "; a gated or private model needs HF_TOKEN set to a token with access to it",
        404 => "; check the model id and --revision (a private model needs HF_TOKEN)",
        429 => "; the server limits requests, try again later",
        500..=599 => "; the server failed, try again later",
        _ => "",
    };
    let message = format!("{url} answered {code} {}{detail}{hint}", shown(resp.status_text()));
    if code == 429 || code >= 500 {
        Failure::Transient(message)
    } else {
        Failure::Fatal(message)
    }
}

/// Did an I/O wait run out (a read or connect timeout)?
fn timed_out(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur = Some(e);
    while let Some(e) = cur {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            if matches!(io.kind(), std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock) {
                return true;
            }
            if let Some(inner) = io.get_ref() {
                if timed_out(inner) {
                    return true;
                }
            }
        }
        cur = e.source();
    }
    false
}

fn transport_failure(url: &str, t: &ureq::Transport, timeout: Timeout) -> Failure {
    use ureq::ErrorKind as K;
    if timed_out(t) {
        return Failure::Transient(format!("no answer from {url} within {}", timeout.said()));
    }
    match t.kind() {
        K::InvalidUrl | K::UnknownScheme | K::InvalidProxyUrl | K::InsecureRequestHttpsOnly | K::ProxyUnauthorized | K::BadHeader => {
            Failure::Fatal(format!("{url}: {t}"))
        }
        _ => Failure::Transient(format!("{url}: {t}; check the network and HF_ENDPOINT")),
    }
}

/// `(first, last, total)` of a `Content-Range: bytes FIRST-LAST/TOTAL` value.
fn content_range(v: &str) -> Option<(u64, u64, u64)> {
    let (span, total) = v.trim().strip_prefix("bytes ")?.split_once('/')?;
    let (first, last) = span.split_once('-')?;
    Some((first.parse().ok()?, last.parse().ok()?, total.parse().ok()?))
}

/// A failed read of a body from `url`; `progress` is (bytes read, bytes expected).
pub(super) fn read_failure(url: &str, e: std::io::Error, timeout: Timeout, progress: Option<(u64, u64)>) -> Failure {
    let at = progress.map(|(got, of)| format!(" after {got} of {of} bytes")).unwrap_or_default();
    if timed_out(&e) {
        Failure::Transient(format!("no data from {url} for {}{at}", timeout.said()))
    } else {
        Failure::Transient(format!("reading {url} broke off{at}: {e}"))
    }
}

/// `scheme://authority` of `url`.
fn origin(url: &str) -> &str {
    let Some(start) = url.find("://").map(|i| i + 3) else { return url };
    let end = url[start..].find(['/', '?', '#']).map_or(url.len(), |j| start + j);
    &url[..end]
}

/// The host of `url`, lowercase, without user, port or IPv6 brackets.
fn host(url: &str) -> String {
    let o = origin(url);
    let authority = o.find("://").map_or(o, |i| &o[i + 3..]);
    let authority = authority.rsplit('@').next().unwrap_or(authority);
    let h = if let Some(rest) = authority.strip_prefix('[') {
        rest.split(']').next().unwrap_or(rest)
    } else {
        authority.split(':').next().unwrap_or(authority)
    };
    h.to_ascii_lowercase()
}

/// Does a `NO_PROXY` list (`*`, hosts, `.domain` suffixes, comma-separated) name `host`?
fn no_proxy_names(host: &str, list: Option<&str>) -> bool {
    list.unwrap_or("").split(',').map(str::trim).filter(|e| !e.is_empty()).any(|e| {
        if e == "*" {
            return true;
        }
        let e = e.trim_start_matches("*.").trim_start_matches('.');
        let e = if e.starts_with('[') { e.trim_start_matches('[').split(']').next().unwrap_or(e) } else { e.split(':').next().unwrap_or(e) };
        let e = e.to_ascii_lowercase();
        host == e || host.ends_with(&format!(".{e}"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_and_hosts() {
        assert_eq!(origin("https://huggingface.co/api/models/a/b"), "https://huggingface.co");
        assert_eq!(origin("http://127.0.0.1:8080"), "http://127.0.0.1:8080");
        assert_eq!(origin("http://h:1/x?y"), "http://h:1");
        assert_eq!(host("http://user:pw@Mirror.Example:8080/hf"), "mirror.example");
        assert_eq!(host("http://[::1]:9/"), "::1");
    }

    #[test]
    fn no_proxy_lists() {
        assert!(no_proxy_names("127.0.0.1", Some("localhost, 127.0.0.1")));
        assert!(no_proxy_names("hub.corp.example", Some(".corp.example")));
        assert!(no_proxy_names("hub.corp.example", Some("corp.example:443")));
        assert!(no_proxy_names("anything", Some("*")));
        assert!(!no_proxy_names("huggingface.co", Some("corp.example")));
        assert!(!no_proxy_names("evilcorp.example", Some("corp.example")));
        assert!(!no_proxy_names("huggingface.co", None));
    }
}
