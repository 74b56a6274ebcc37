//! The data file's sink: page-aligned direct I/O (`O_DIRECT`) where the file system takes it,
//! buffered writes otherwise.
//!
//! Why direct I/O: a build writes gigabytes once and never reads them back. Through the page
//! cache, every byte is first copied into freshly allocated cache pages, which is pathologically
//! slow on the VMs this project is measured on (2.5 GB with `dd`: 11.7 s buffered, 1.7 s direct,
//! of which 10.8 s and 0.3 s kernel time), and it evicts the user's other files. Direct writes
//! go from the writer's buffers to the disk. They need the file offset, the length and the
//! buffer's address aligned to the device's block size; [`PAGE`] covers every common device.
//! The data layout puts every tensor at a multiple of [`PAGE`] and the writer cuts tensors
//! into blocks of whole pages, so only a tensor's last block ends mid-page: that block is
//! written padded with zeros to the page end, which lies in the gap before the next tensor, and
//! the file is cut to its real length at the end.
//!
//! A page is never written both ways: whether a tensor is written directly is decided once per
//! tensor, and tensors never share a page. (A buffered partial-page write could otherwise read
//! the page before a direct write lands and later write back its stale half.)

use crate::{Error, Result};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// Alignment of direct writes: offsets, lengths and buffer addresses.
pub const PAGE: usize = 4096;

/// A reusable buffer whose usable part starts at a [`PAGE`]-aligned address.
pub(crate) struct AlignedBuf {
    storage: Vec<u8>,
}

impl AlignedBuf {
    pub(crate) const fn new() -> AlignedBuf {
        AlignedBuf { storage: Vec::new() }
    }

    /// Bytes held (for the pool's size limit).
    pub(crate) fn capacity(&self) -> usize {
        self.storage.len()
    }

    /// The page-padded slice holding `len` bytes filled by [`AlignedBuf::get`].
    pub(crate) fn written(&self, len: usize) -> &[u8] {
        let padded = len.div_ceil(PAGE) * PAGE;
        let skew = self.storage.as_ptr().align_offset(PAGE);
        &self.storage[skew..skew + padded]
    }

    /// `len` bytes rounded up to whole pages, page-aligned in memory. The first `len` bytes are
    /// stale (the caller overwrites them); the padding after them is zero.
    pub(crate) fn get(&mut self, len: usize) -> &mut [u8] {
        let padded = len.div_ceil(PAGE) * PAGE;
        if self.storage.len() < padded + PAGE {
            // Grown, never shrunk: a writer thread reuses its buffer for every block, since a
            // fresh allocation of block size is faulted in page by page each time.
            self.storage = vec![0u8; padded + PAGE];
        }
        let skew = self.storage.as_ptr().align_offset(PAGE);
        let buf = &mut self.storage[skew..skew + padded];
        buf[len..].fill(0);
        buf
    }
}

/// Flushes written data to disk and drops it from the page cache every `every` bytes, for
/// buffered writes only. One thread flushes at a time; the others keep writing.
struct Flusher {
    every: u64,
    written: std::sync::atomic::AtomicU64,
    last: std::sync::Mutex<u64>,
}

/// The data file, opened for direct writes where possible.
pub(crate) struct Sink {
    path: PathBuf,
    buffered: File,
    direct: Option<File>,
    flusher: Flusher,
}

impl Sink {
    /// Creates `path` (truncated) with room for `total` bytes. `try_direct` asks for direct
    /// I/O; a file system that refuses it (tmpfs, some network file systems) gets buffered
    /// writes, which produce the same bytes.
    pub(crate) fn create(path: &Path, total: u64, try_direct: bool, flush_every: u64) -> Result<Sink> {
        let buffered = File::create(path).map_err(|e| Error::io(path, e))?;
        buffered.set_len(total).map_err(|e| Error::io(path, e))?;
        // Reserve the blocks up front (best effort; the bytes still read as zeros), so the
        // parallel writes do not allocate extents one by one, and a full disk fails here,
        // before any work, rather than midway.
        // The padded last block may reach past `total` to the page end.
        reserve(&buffered, total.div_ceil(PAGE as u64) * PAGE as u64).map_err(|e| Error::io(path, e))?;
        let direct = if try_direct && pages_fit(&buffered) { open_direct(path) } else { None };
        Ok(Sink {
            path: path.to_path_buf(),
            buffered,
            direct,
            flusher: Flusher { every: flush_every, written: Default::default(), last: std::sync::Mutex::new(0) },
        })
    }

    /// Whether a tensor at `offset` whose blocks have the given byte lengths (all but the last
    /// whole pages) can be written directly.
    pub(crate) fn direct_for(&self, offset: u64, interior_block_bytes: impl IntoIterator<Item = usize>) -> bool {
        self.direct.is_some()
            && offset.is_multiple_of(PAGE as u64)
            && interior_block_bytes.into_iter().all(|b| b.is_multiple_of(PAGE))
    }

    /// Writes the first `len` bytes of `buf` (from [`AlignedBuf::get`], so page-padded with
    /// zeros) at `offset`; `direct` as decided by [`Sink::direct_for`] for the tensor.
    pub(crate) fn write(&self, offset: u64, buf: &[u8], len: usize, direct: bool) -> Result<()> {
        match &self.direct {
            Some(file) if direct => {
                let padded = len.div_ceil(PAGE) * PAGE;
                debug_assert!(offset.is_multiple_of(PAGE as u64) && buf.as_ptr().align_offset(PAGE) == 0 && buf.len() >= padded);
                file.write_all_at(&buf[..padded], offset).map_err(|e| Error::io(&self.path, e))
            }
            _ => {
                self.buffered.write_all_at(&buf[..len], offset).map_err(|e| Error::io(&self.path, e))?;
                self.wrote_buffered(len);
                Ok(())
            }
        }
    }

    /// Cuts the file to `total` bytes (a padded last block may have written past it).
    pub(crate) fn finish(self, total: u64) -> Result<()> {
        self.buffered.set_len(total).map_err(|e| Error::io(&self.path, e))
    }

    fn wrote_buffered(&self, n: usize) {
        use std::sync::atomic::Ordering;
        let f = &self.flusher;
        if f.every == 0 {
            return;
        }
        let total = f.written.fetch_add(n as u64, Ordering::Relaxed) + n as u64;
        if let Ok(mut last) = f.last.try_lock() {
            // Another writer may have flushed past this total meanwhile.
            if total.saturating_sub(*last) >= f.every {
                *last = total;
                use std::os::unix::io::AsRawFd;
                let fd = self.buffered.as_raw_fd();
                // Best effort: a failure here only loses the speed-up, never data. Keeping the
                // dirty set small makes a multi-GB buffered write several times faster on VMs
                // where fresh page-cache pages are expensive.
                // SAFETY: plain syscalls on a file descriptor we own for the whole write.
                unsafe {
                    libc::fdatasync(fd);
                    libc::posix_fadvise(fd, 0, 0, libc::POSIX_FADV_DONTNEED);
                }
            }
        }
    }
}

/// Whether [`PAGE`] covers the page cache's pages and the file system's blocks. The design
/// keeps each page written one way only by aligning tensors to [`PAGE`]; on a kernel with
/// larger pages (16 or 64 KiB on some arm64/ppc64 systems) or a file system with larger blocks,
/// a buffered tensor could share a page or block with a direct one, so such files are written
/// buffered throughout (the same bytes).
fn pages_fit(file: &File) -> bool {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    let block = file.metadata().map(|m| m.blksize()).unwrap_or(u64::MAX);
    page > 0 && page as usize <= PAGE && block <= PAGE as u64
}

/// `fallocate` of `len` bytes; file systems without it (EOPNOTSUPP) are fine, a full disk is not.
fn reserve(file: &File, len: u64) -> std::io::Result<()> {
    use std::os::unix::io::AsRawFd;
    if len == 0 {
        return Ok(());
    }
    // SAFETY: a plain syscall on a file descriptor we own.
    let rc = unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, len as libc::off_t) };
    if rc == 0 {
        return Ok(());
    }
    let err = std::io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::ENOSPC) | Some(libc::EFBIG) => Err(err),
        _ => Ok(()),
    }
}

/// Opens `path` for direct writes and checks with one aligned page that the file system takes
/// them (some accept `O_DIRECT` at open and refuse the writes).
fn open_direct(path: &Path) -> Option<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new().write(true).custom_flags(libc::O_DIRECT).open(path).ok()?;
    let mut probe = AlignedBuf::new();
    let page = probe.get(PAGE);
    page.fill(0);
    // The file is freshly created and zero-filled; writing a zero page changes nothing.
    file.write_all_at(page, 0).ok()?;
    Some(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_buffers_are_aligned_padded_and_zeroed_after_len() {
        let mut b = AlignedBuf::new();
        let s = b.get(10);
        assert_eq!((s.as_ptr().align_offset(PAGE), s.len()), (0, PAGE));
        s.fill(7);
        let s = b.get(5);
        assert_eq!(&s[..5], &[7; 5], "reused, stale before len");
        assert!(s[5..].iter().all(|&x| x == 0), "padding is zero");
        assert_eq!(b.get(PAGE + 1).len(), 2 * PAGE);
    }

    #[test]
    fn direct_and_buffered_writes_give_the_same_file() {
        let dir = tempfile::tempdir().unwrap();
        let mut files = Vec::new();
        for try_direct in [true, false] {
            let path = dir.path().join(format!("data-{try_direct}"));
            let total = (PAGE + 100) as u64;
            let sink = Sink::create(&path, total, try_direct, 0).unwrap();
            let mut buf = AlignedBuf::new();
            let b = buf.get(PAGE + 100);
            b[..PAGE + 100].iter_mut().enumerate().for_each(|(i, x)| *x = (i % 251) as u8);
            let direct = sink.direct_for(0, []);
            assert_eq!(direct, sink.direct.is_some());
            sink.write(0, b, PAGE + 100, direct).unwrap();
            sink.finish(total).unwrap();
            files.push(std::fs::read(&path).unwrap());
        }
        assert_eq!(files[0].len(), PAGE + 100);
        assert_eq!(files[0], files[1]);
    }
}
