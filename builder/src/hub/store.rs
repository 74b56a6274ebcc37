//! Writing one model's folder of the hub cache in the Python client's layout: `blobs/<etag>`
//! holds the bytes, `snapshots/<commit>/<file>` is a relative link to the blob, `refs/<rev>`
//! holds the commit. Every path is joined from checked names ([`super::names`]), and every
//! file appears by renaming a complete temporary one: a download that is refused, breaks off
//! or does not match its hash leaves no blob, link or ref behind. A download that breaks off,
//! fails or is interrupted keeps what arrived as `blobs/<blob>.tailor.incomplete`, which the
//! next attempt or run continues ([`Partial`]); the blob's hash, checked over every byte,
//! decides what is kept. (The Python client's own `blobs/<blob>.incomplete`, which its older
//! versions write and resume under their lock file, is never touched.)

use std::fs;
use std::io::{IsTerminal, Read, Seek, SeekFrom, Write};
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

/// The bytes of a blob written so far, which a later attempt or run continues (a `Range`
/// request) instead of starting over.
///
/// They are written to a name of this process only: a download claims the kept bytes by
/// renaming `<blob>.tailor.incomplete` to its own name (a rename succeeds for one process, so
/// two never write one file, whatever the file system's locks do; huggingface_hub 2.x writes
/// process-unique files for that reason), and gives them back by renaming its file to the kept
/// name when it stops without the blob: dropped after its last attempt or on any error, or on
/// an interrupt ([`crate::output::keep_on_interrupt`]). Bytes that prove wrong are removed.
pub(super) struct Partial {
    blob: BlobName,
    size: u64,
    got: u64,
    /// Of `got`, the bytes an earlier run kept (their hash is only checked at the end).
    earlier: u64,
    out: fs::File,
    /// The hash of the `got` bytes so far.
    hasher: Hasher,
    /// This process's file.
    tmp: PathBuf,
    /// `blobs/<blob>.tailor.incomplete`, where the bytes are kept.
    kept: PathBuf,
    /// Renamed into the blob or removed: nothing to keep.
    settled: bool,
    /// Kept when the download stops (a later run can continue it: the bytes come from a
    /// server asked for ranges), else removed.
    keep: bool,
    _on_interrupt: OnInterrupt,
}

/// What an interrupt does with a [`Partial`]'s file.
enum OnInterrupt {
    Keep(#[allow(dead_code)] crate::output::KeptOnInterrupt),
    Remove(#[allow(dead_code)] crate::RemoveOnInterrupt),
}

impl Partial {
    /// Starts the file over: a server that sends the whole file, or kept bytes that were wrong.
    fn restart(&mut self) -> Result<(), Failure> {
        self.out.set_len(0).and_then(|()| self.out.seek(SeekFrom::Start(0))).map_err(|e| local(&self.tmp, e))?;
        (self.got, self.earlier, self.hasher) = (0, 0, Hasher::new(self.blob.kind(), self.size));
        Ok(())
    }

    /// The bytes kept for a later run once this one stops, and where.
    pub(super) fn kept(&self) -> Option<(u64, &Path)> {
        (self.keep && self.got > 0).then_some((self.got, self.kept.as_path()))
    }

    /// Removes the file (its bytes are not the blob's).
    fn discard(mut self) {
        let _ = fs::remove_file(&self.tmp);
        self.settled = true;
    }
}

impl Drop for Partial {
    /// Keeps the bytes for the next run ([`crate::output::give_back`]: an empty file goes), or
    /// removes them when no run would continue them.
    fn drop(&mut self) {
        if self.settled {
        } else if self.keep {
            let _ = self.out.sync_all();
            crate::output::give_back(&self.tmp, &self.kept);
        } else {
            let _ = fs::remove_file(&self.tmp);
        }
    }
}

/// Gives claimed bytes back if their download stops before it is a [`Partial`].
struct Claimed<'a> {
    tmp: &'a Path,
    kept: &'a Path,
    armed: bool,
}

impl Drop for Claimed<'_> {
    fn drop(&mut self) {
        if self.armed {
            crate::output::give_back(self.tmp, self.kept);
        }
    }
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
#[derive(Clone)]
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

    /// Where `file` of `commit` is in the snapshot (a link to its blob).
    pub(super) fn cached_path(&self, commit: &Commit, file: &RepoFile) -> PathBuf {
        self.pointer(commit, file)
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

    /// Where a download of `blob` (`size` bytes) continues: the bytes `partial` holds of it,
    /// taken first from what an earlier run kept when `partial` holds nothing of this blob.
    pub(super) fn resume_from(&self, partial: &mut Option<Partial>, blob: &BlobName, size: u64) -> Result<u64, Failure> {
        if !partial.as_ref().is_some_and(|p| p.blob == *blob && p.size == size) {
            *partial = Some(self.partial(blob, size, true, true)?);
        }
        Ok(partial.as_ref().filter(|p| p.got < size).map_or(0, |p| p.got))
    }

    /// This process's file for `blob`: with `claim`, the bytes an earlier run kept, claimed by
    /// renaming `<blob>.tailor.incomplete` to it and hashed again from disk (as many bytes as
    /// the file has, or more, start over), else a new file. A link at the kept name is removed,
    /// not followed; anything else there but a file is refused. With `keep` false (bytes the hub
    /// sends whole, never continued) the file goes when the download stops.
    fn partial(&self, blob: &BlobName, size: u64, claim: bool, keep: bool) -> Result<Partial, Failure> {
        use std::os::unix::fs::OpenOptionsExt;
        let dir = self.root.join("blobs");
        fs::create_dir_all(&dir).map_err(|e| local(&dir, e))?;
        let kept = dir.join(format!("{blob}.tailor.incomplete"));
        let tmp = dir.join(format!("{blob}.{}.incomplete", unique()));
        if !keep {
            let out = fs::OpenOptions::new().read(true).write(true).create_new(true).mode(0o666).open(&tmp).map_err(|e| local(&tmp, e))?;
            let on_interrupt = OnInterrupt::Remove(crate::remove_on_interrupt(&tmp));
            let hasher = Hasher::new(blob.kind(), size);
            return Ok(Partial { blob: blob.clone(), size, got: 0, earlier: 0, out, hasher, tmp, kept, settled: false, keep, _on_interrupt: on_interrupt });
        }
        let claim = match fs::symlink_metadata(&kept) {
            Ok(m) if m.is_file() => claim,
            Ok(m) if m.file_type().is_symlink() => {
                fs::remove_file(&kept).map_err(|e| local(&kept, e))?;
                false
            }
            Ok(_) => return Err(Failure::Fatal(format!("{} is not a file, where a download keeps its bytes: remove it", kept.display()))),
            Err(_) => false,
        };
        let Some((on_interrupt, claimed)) = crate::output::keep_on_interrupt(&tmp, &kept, || claim && fs::rename(&kept, &tmp).is_ok()) else {
            return Err(Failure::Fatal("interrupted".into()));
        };
        let mut back = Claimed { tmp: &tmp, kept: &kept, armed: claimed };
        let mut out = fs::OpenOptions::new().read(true).write(true).create_new(!claimed).mode(0o666).custom_flags(libc::O_NOFOLLOW).open(&tmp).map_err(|e| local(&tmp, e))?;
        let mut hasher = Hasher::new(blob.kind(), size);
        let mut got = 0;
        if claimed {
            let mut buf = vec![0u8; 1 << 16];
            loop {
                match out.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        hasher.update(&buf[..n]);
                        got += n as u64;
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(local(&tmp, e)),
                }
            }
        }
        back.armed = false;
        let (tmp, kept) = (tmp.clone(), kept.clone());
        let mut p = Partial { blob: blob.clone(), size, got, earlier: got, out, hasher, tmp, kept, settled: false, keep, _on_interrupt: OnInterrupt::Keep(on_interrupt) };
        if p.got >= size {
            p.restart()?;
        }
        Ok(p)
    }

    /// Streams `body` into `blobs/<blob>`: a temporary file in `blobs/` ([`RepoCache::partial`]),
    /// the bytes counted against `size` and hashed against the blob's name, flushed to disk,
    /// then renamed. A body that starts past 0 continues `partial` (the bytes an earlier
    /// attempt or run wrote); one from 0 starts it over. A body that breaks off leaves what it
    /// wrote in `partial` for the next attempt (and on disk for a later run, but for a name of
    /// this run); bytes that are not the blob's are removed.
    pub(super) fn write_blob(&self, blob: &BlobName, size: u64, body: Body, file: &RepoFile, partial: &mut Option<Partial>, ranged: bool) -> Result<(), Failure> {
        if !partial.as_ref().is_some_and(|p| p.blob == *blob && p.size == size) {
            // Kept bytes are claimed only to be continued.
            *partial = Some(self.partial(blob, size, body.start > 0, ranged)?);
        }
        let mut p = partial.take().expect("set above");
        if body.start == 0 && p.got > 0 {
            p.restart()?;
        } else if body.start != p.got {
            return Err(Failure::Fatal(format!("{} sends {blob} from byte {}, where no earlier attempt stopped", body.url, body.start)));
        }
        if p.got > 0 {
            let earlier = if p.earlier > 0 { " (kept by an earlier run)" } else { "" };
            eprintln!("  {file}: resuming at byte {} of {size}{earlier}", p.got);
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
                p.discard();
                return Err(Failure::Fatal(format!("{} sends more than the {size} bytes the hub announced", body.url)));
            }
            p.hasher.update(&buf[..n]);
            if let Err(e) = p.out.write_all(&buf[..n]) {
                let failure = local(&p.tmp, e);
                p.discard();
                return Err(failure);
            }
            p.got += n as u64;
            bar.0.inc(n as u64);
        }
        if p.got < size {
            let failure = Failure::Transient(format!("the download from {} ended after {} of {size} bytes", body.url, p.got));
            *partial = Some(p);
            return Err(failure);
        }
        let digest = p.hasher.clone().hex();
        if !digest.eq_ignore_ascii_case(blob.as_str()) {
            if p.earlier > 0 {
                // The kept bytes may be what is wrong (another file, a damaged disk): once more,
                // all of it.
                let earlier = p.earlier;
                p.restart()?;
                *partial = Some(p);
                return Err(Failure::Transient(format!(
                    "the {size} bytes of {blob}, the first {earlier} kept by an earlier run, hash to {digest}, not to the ETag {blob}: starting over"
                )));
            }
            p.discard();
            return Err(Failure::Fatal(format!(
                "the {size} bytes from {} hash to {digest}, not to the ETag {blob} the hub named them by: damaged on the way, or not the file the server said; nothing was kept",
                body.url
            )));
        }
        p.out.sync_all().map_err(|e| local(&p.tmp, e))?;
        let dst = self.blob(blob);
        fs::rename(&p.tmp, &dst).map_err(|e| local(&dst, e))?;
        p.settled = true;
        // Bytes another run kept of this blob are no longer needed.
        let _ = fs::remove_file(&p.kept);
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

#[cfg(test)]
mod tests {
    use super::*;

    const BLOB: &str = "0123456789abcdef0123456789abcdef01234567";

    fn incomplete(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        names
    }

    /// Kept bytes are claimed by one download at a time (a rename), handed back when it stops,
    /// and an empty file is not kept.
    #[test]
    fn kept_bytes_are_claimed_by_one_download_and_given_back() {
        let cache = tempfile::tempdir().unwrap();
        let repo = RepoCache::new(cache.path(), "org/name");
        let blob = BlobName::from_etag(BLOB).unwrap();
        let blobs = repo.root.join("blobs");
        fs::create_dir_all(&blobs).unwrap();
        let kept = blobs.join(format!("{BLOB}.tailor.incomplete"));
        fs::write(&kept, b"first bytes").unwrap();
        let mut first = None;
        assert_eq!(repo.resume_from(&mut first, &blob, 100).unwrap(), 11);
        assert!(!kept.exists(), "claimed: renamed to this download's own name");
        // A second download meanwhile finds nothing kept and starts its own file.
        let mut second = None;
        assert_eq!(repo.resume_from(&mut second, &blob, 100).unwrap(), 0);
        assert_eq!(incomplete(&blobs).len(), 2);
        drop(second);
        assert_eq!(incomplete(&blobs).len(), 1, "an empty file is not kept");
        drop(first);
        assert_eq!(incomplete(&blobs), [format!("{BLOB}.tailor.incomplete")]);
        assert_eq!(fs::read(&kept).unwrap(), b"first bytes");
        // As many bytes as the file has, or more, are not a partial download: start over.
        let mut third = None;
        assert_eq!(repo.resume_from(&mut third, &blob, 11).unwrap(), 0);
        drop(third);
        assert!(!kept.exists() && incomplete(&blobs).is_empty());
    }

    /// A kept name that is a link is not followed: the download starts over in a file of its own.
    #[test]
    fn a_kept_link_is_not_followed() {
        let cache = tempfile::tempdir().unwrap();
        let repo = RepoCache::new(cache.path(), "org/name");
        let blob = BlobName::from_etag(BLOB).unwrap();
        let blobs = repo.root.join("blobs");
        fs::create_dir_all(&blobs).unwrap();
        let target = cache.path().join("elsewhere");
        fs::write(&target, b"not the cache's").unwrap();
        std::os::unix::fs::symlink(&target, blobs.join(format!("{BLOB}.tailor.incomplete"))).unwrap();
        let mut p = None;
        assert_eq!(repo.resume_from(&mut p, &blob, 100).unwrap(), 0);
        assert_eq!(fs::read(&target).unwrap(), b"not the cache's");
        let names = incomplete(&blobs);
        assert!(names.len() == 1 && names[0].starts_with(&format!("{BLOB}.")) && !names[0].starts_with(&format!("{BLOB}.tailor")), "{names:?}");
    }

    /// Another tool's files at the Python client's name are never touched; a folder at the kept
    /// name is refused, naming it.
    #[test]
    fn other_files_are_left_alone() {
        let cache = tempfile::tempdir().unwrap();
        let repo = RepoCache::new(cache.path(), "org/name");
        let blob = BlobName::from_etag(BLOB).unwrap();
        let blobs = repo.root.join("blobs");
        fs::create_dir_all(&blobs).unwrap();
        let python = blobs.join(format!("{BLOB}.incomplete"));
        fs::write(&python, b"the python client's").unwrap();
        let mut p = None;
        assert_eq!(repo.resume_from(&mut p, &blob, 100).unwrap(), 0);
        drop(p);
        assert_eq!(fs::read(&python).unwrap(), b"the python client's");
        fs::create_dir(blobs.join(format!("{BLOB}.tailor.incomplete"))).unwrap();
        let e = match repo.resume_from(&mut None, &blob, 100) {
            Err(Failure::Fatal(m)) => m,
            _ => panic!("a folder at the kept name is refused"),
        };
        assert!(e.contains(".tailor.incomplete is not a file"), "{e}");
    }
}
