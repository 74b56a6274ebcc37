//! Writing one model's folder of the hub cache in the Python client's layout: `blobs/<etag>`
//! holds the bytes, `snapshots/<commit>/<file>` is a relative link to the blob, `refs/<rev>`
//! holds the commit. Every path is joined from checked names ([`super::names`]), and every
//! file appears by renaming a complete temporary one: a download that is refused, breaks off
//! or does not match its hash leaves no blob, link or ref behind. Within one run, a retry
//! continues the bytes an attempt that broke off wrote ([`Partial`]).

use std::fs;
use std::io::{IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use sha1::Digest;

use super::http::{read_failure, Body, Failure};
use super::names::{BlobName, Commit, HashKind, RefName, RepoFile};

/// `models--ORG--NAME` in a hub cache folder.
pub(super) struct RepoCache {
    root: PathBuf,
}

/// A temporary file or link, removed when dropped unless it was renamed into place, and
/// removed by the signal handler if the process is interrupted (Ctrl-C) meanwhile.
struct Temp {
    path: Option<PathBuf>,
    _on_interrupt: crate::RemoveOnInterrupt,
}

impl Temp {
    /// Takes charge of `path`, which exists.
    fn new(path: &Path) -> Temp {
        Temp { path: Some(path.to_path_buf()), _on_interrupt: crate::remove_on_interrupt(path) }
    }

    fn kept(mut self) {
        self.path = None;
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        if let Some(p) = self.path.take() {
            let _ = fs::remove_file(p);
        }
    }
}

/// The bytes one attempt wrote of a blob before its download broke off, which the next
/// attempt of the same run continues (a `Range` request) instead of starting over.
pub(super) struct Partial {
    blob: BlobName,
    size: u64,
    got: u64,
    out: fs::File,
    /// The hash of the `got` bytes so far.
    hasher: Hasher,
    tmp: PathBuf,
    /// Removes the temporary file unless it becomes the blob.
    guard: Temp,
}

/// A name no other writer uses at the same time (this process's id and a counter).
fn unique() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!("{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))
}

fn local(path: &Path, e: std::io::Error) -> Failure {
    Failure::Fatal(format!(
        "cannot write {}: {e} (check free space and the permissions of the hub cache; HF_HUB_CACHE moves it)",
        path.display()
    ))
}

/// Flushes a folder's entries (a rename into it) to disk; best effort.
fn sync_dir(dir: &Path) {
    if let Ok(d) = fs::File::open(dir) {
        let _ = d.sync_all();
    }
}

/// The hash a blob's name claims, computed over the bytes as they arrive.
enum Hasher {
    GitSha1(sha1::Sha1),
    Sha256(sha2::Sha256),
}

impl Hasher {
    fn new(kind: HashKind, size: u64) -> Hasher {
        match kind {
            HashKind::GitSha1 => {
                let mut h = sha1::Sha1::new();
                h.update(format!("blob {size}\0").as_bytes());
                Hasher::GitSha1(h)
            }
            HashKind::Sha256 => Hasher::Sha256(sha2::Sha256::new()),
        }
    }

    fn update(&mut self, bytes: &[u8]) {
        match self {
            Hasher::GitSha1(h) => h.update(bytes),
            Hasher::Sha256(h) => h.update(bytes),
        }
    }

    fn hex(self) -> String {
        let digest: Vec<u8> = match self {
            Hasher::GitSha1(h) => h.finalize().to_vec(),
            Hasher::Sha256(h) => h.finalize().to_vec(),
        };
        digest.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// A byte-progress bar for one file on stderr when it is a terminal; cleared when dropped.
struct Bar(indicatif::ProgressBar);

impl Bar {
    fn new(file: &RepoFile, size: u64) -> Bar {
        if !std::io::stderr().is_terminal() {
            return Bar(indicatif::ProgressBar::hidden());
        }
        let bar = indicatif::ProgressBar::with_draw_target(Some(size), indicatif::ProgressDrawTarget::stderr());
        if let Ok(style) = indicatif::ProgressStyle::with_template("  {msg} {bar:30} {bytes}/{total_bytes} {binary_bytes_per_sec} {eta}") {
            bar.set_style(style);
        }
        bar.set_message(file.to_string());
        Bar(bar)
    }
}

impl Drop for Bar {
    fn drop(&mut self) {
        self.0.finish_and_clear();
    }
}

impl RepoCache {
    pub(super) fn new(cache: &Path, id: &str) -> RepoCache {
        RepoCache { root: cache.join(format!("models--{}", id.replace('/', "--"))) }
    }

    fn pointer(&self, commit: &Commit, file: &RepoFile) -> PathBuf {
        self.root.join("snapshots").join(commit.as_str()).join(file.as_str())
    }

    fn blob(&self, blob: &BlobName) -> PathBuf {
        self.root.join("blobs").join(blob.as_str())
    }

    /// Is `file` already in the snapshot of `commit` (its link leads to a regular file)?
    pub(super) fn is_cached(&self, commit: &Commit, file: &RepoFile) -> bool {
        fs::metadata(self.pointer(commit, file)).is_ok_and(|m| m.is_file())
    }

    /// Is the blob already cached (a regular file of `size` bytes, from another revision or
    /// an earlier, interrupted download)?
    pub(super) fn has_blob(&self, blob: &BlobName, size: u64) -> bool {
        fs::symlink_metadata(self.blob(blob)).is_ok_and(|m| m.is_file() && m.len() == size)
    }

    /// Where a resumed download of `blob` (`size` bytes) would continue: the bytes `partial`
    /// holds of it, else 0.
    pub(super) fn resume_from(partial: &Option<Partial>, blob: &BlobName, size: u64) -> u64 {
        partial.as_ref().filter(|p| p.blob == *blob && p.size == size && p.got < size).map_or(0, |p| p.got)
    }

    /// Streams `body` into `blobs/<blob>`: a temporary file in `blobs/`, the bytes counted
    /// against `size` and hashed against the blob's name, flushed to disk, then renamed. A body
    /// that starts past 0 continues `partial` (the bytes an earlier attempt of this run wrote);
    /// one that breaks off leaves what it wrote in `partial` for the next attempt (the file is
    /// still removed when `partial` is dropped, or on an interrupt); any other failure drops it.
    pub(super) fn write_blob(&self, blob: &BlobName, size: u64, body: Body, file: &RepoFile, partial: &mut Option<Partial>) -> Result<(), Failure> {
        if body.start == 0 {
            *partial = None;
        } else if Self::resume_from(partial, blob, size) != body.start {
            return Err(Failure::Fatal(format!("{} sends {blob} from byte {}, where no earlier attempt stopped", body.url, body.start)));
        }
        let mut p = match partial.take() {
            Some(p) => p,
            None => {
                let dir = self.root.join("blobs");
                fs::create_dir_all(&dir).map_err(|e| local(&dir, e))?;
                let tmp = dir.join(format!("{blob}.{}.incomplete", unique()));
                let out = {
                    use std::os::unix::fs::OpenOptionsExt;
                    fs::OpenOptions::new().write(true).create_new(true).mode(0o666).open(&tmp).map_err(|e| local(&tmp, e))?
                };
                let guard = Temp::new(&tmp);
                Partial { blob: blob.clone(), size, got: 0, out, hasher: Hasher::new(blob.kind(), size), tmp, guard }
            }
        };
        if p.got > 0 {
            eprintln!("  {file}: resuming at byte {} of {size}", p.got);
        }
        let bar = Bar::new(file, size);
        bar.0.set_position(p.got);
        let mut reader = body.reader.take((size - p.got).saturating_add(1));
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let n = match reader.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                // Every byte came before the error: the hash decides.
                Err(_) if p.got == size => break,
                Err(e) => {
                    let failure = read_failure(&body.url, e, body.timeout, Some((p.got, size)));
                    *partial = Some(p);
                    return Err(failure);
                }
            };
            if p.got + n as u64 > size {
                return Err(Failure::Fatal(format!("{} sends more than the {size} bytes the hub announced", body.url)));
            }
            p.hasher.update(&buf[..n]);
            p.out.write_all(&buf[..n]).map_err(|e| local(&p.tmp, e))?;
            p.got += n as u64;
            bar.0.inc(n as u64);
        }
        if p.got < size {
            let failure = Failure::Transient(format!("the download from {} ended after {} of {size} bytes", body.url, p.got));
            *partial = Some(p);
            return Err(failure);
        }
        let Partial { out, hasher, tmp, guard, .. } = p;
        let digest = hasher.hex();
        if !digest.eq_ignore_ascii_case(blob.as_str()) {
            return Err(Failure::Fatal(format!(
                "the {size} bytes from {} hash to {digest}, not to the ETag {blob} the hub named them by: damaged on the way, or not the file the server said; nothing was kept",
                body.url
            )));
        }
        out.sync_all().map_err(|e| local(&tmp, e))?;
        drop(out);
        let dst = self.blob(blob);
        fs::rename(&tmp, &dst).map_err(|e| local(&dst, e))?;
        guard.kept();
        sync_dir(&self.root.join("blobs"));
        Ok(())
    }

    /// Links `snapshots/<commit>/<file>` to `blobs/<blob>` (relative, as the Python client
    /// does): the link is made beside the model's folder under a temporary name and renamed
    /// into place, replacing a stale link.
    pub(super) fn link(&self, commit: &Commit, file: &RepoFile, blob: &BlobName) -> Result<(), Failure> {
        let ptr = self.pointer(commit, file);
        let parent = ptr.parent().unwrap_or(&self.root);
        fs::create_dir_all(parent).map_err(|e| local(parent, e))?;
        let tmp = self.root.join(format!(".tailor-link.{}", unique()));
        std::os::unix::fs::symlink(file.link_to(blob), &tmp).map_err(|e| local(&tmp, e))?;
        let guard = Temp::new(&tmp);
        fs::rename(&tmp, &ptr).map_err(|e| local(&ptr, e))?;
        guard.kept();
        Ok(())
    }

    /// Writes `refs/<rev>` (the commit, no newline, as the Python client does), atomically.
    pub(super) fn write_ref(&self, rev: &RefName, commit: &Commit) -> Result<(), Failure> {
        let path = self.root.join("refs").join(rev.as_str());
        let parent = path.parent().unwrap_or(&self.root);
        fs::create_dir_all(parent).map_err(|e| local(parent, e))?;
        let tmp = self.root.join(format!(".tailor-ref.{}", unique()));
        let mut f = fs::OpenOptions::new().write(true).create_new(true).open(&tmp).map_err(|e| local(&tmp, e))?;
        let guard = Temp::new(&tmp);
        f.write_all(commit.as_str().as_bytes()).and_then(|_| f.sync_all()).map_err(|e| local(&tmp, e))?;
        drop(f);
        fs::rename(&tmp, &path).map_err(|e| local(&path, e))?;
        guard.kept();
        sync_dir(parent);
        Ok(())
    }
}
