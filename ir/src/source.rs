//! Memory-mapped tensor files. Source tensors are views into a mapping: nothing is copied
//! until a recipe is materialized at write time.

use crate::{DType, Error, Result};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// How far around a released range pages are released too (see [`MappedFile::release`]).
const FAULT_AROUND_MARGIN: usize = 2 << 20;

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if size > 0 {
        size as usize
    } else {
        4096
    }
}

/// A read-only memory mapping of one file.
pub struct MappedFile {
    pub path: PathBuf,
    /// Everything is read through the mapping: headers, and at write time tensor bytes, which
    /// the writer converts straight from the page cache and then releases (`release`), so the
    /// resident set stays at the writer's window.
    map: Option<memmap2::Mmap>,
}

impl std::fmt::Debug for MappedFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MappedFile({})", self.path.display())
    }
}

impl MappedFile {
    pub fn open(path: &Path) -> Result<Arc<MappedFile>> {
        let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
        let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
        // An empty file cannot be mapped; keep it as an empty slice.
        let map = if len == 0 {
            None
        } else {
            // SAFETY: the mapping is read-only; the tool never writes its inputs. A file changed
            // by another process during a build is outside what any builder can guard against.
            Some(unsafe { memmap2::Mmap::map(&file) }.map_err(|e| Error::io(path, e))?)
        };
        Ok(Arc::new(MappedFile { path: path.to_path_buf(), map }))
    }

    pub fn bytes(&self) -> &[u8] {
        self.map.as_deref().unwrap_or(&[])
    }

    /// Drops this process's mapping of the pages holding bytes `offset..offset + len`
    /// (`MADV_DONTNEED`, rounded out to whole pages): they leave the resident set and stay in
    /// the page cache, and a later read maps them again. Best effort.
    ///
    /// The range is widened by [`FAULT_AROUND_MARGIN`] on each side: a read fault maps the
    /// cached pages around the faulting one too (Linux "fault-around"; with large page-cache
    /// folios, up to a whole folio of up to 2 MiB), so reading a range maps some of its
    /// neighbours; without the margin those pages piled up (measured on Linux 6.18: 120 MB of
    /// a 0.9 GB checkpoint stayed resident; with a 256 KiB margin still 40 MB). A neighbour
    /// being read by another thread at that moment only faults its pages in again.
    pub fn release(&self, offset: usize, len: usize) {
        let Some(map) = &self.map else { return };
        let page = page_size();
        let base = map.as_ptr() as usize;
        let offset = offset.min(map.len());
        let begin = (base + offset.saturating_sub(FAULT_AROUND_MARGIN)) / page * page;
        let end = (base + (offset + len + FAULT_AROUND_MARGIN).min(map.len())).div_ceil(page) * page;
        if end > begin {
            // SAFETY: the range lies within our read-only file mapping (the mapping starts on a
            // page boundary and its last page is whole); DONTNEED on a file mapping only drops
            // page-table entries, the contents stay readable.
            unsafe { libc::madvise(begin as *mut libc::c_void, end - begin, libc::MADV_DONTNEED) };
        }
    }

    /// Reads the header of a safetensors file and returns a view of every tensor in it, in
    /// the order of their data offsets (deterministic, unlike the header's JSON object order).
    pub fn safetensors_tensors(self: &Arc<Self>) -> Result<Vec<SourceTensor>> {
        Ok(safetensors_header(&self.path, self.bytes())?
            .into_iter()
            .map(|e| SourceTensor { name: e.name, file: Arc::clone(self), dtype: e.dtype, shape: e.shape, offset: e.offset, len: e.len })
            .collect())
    }
}

/// One tensor listed in a safetensors header: its bytes are `file[offset..offset + len]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeaderEntry {
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub offset: usize,
    pub len: usize,
}

/// Reads and checks the header of the safetensors file whose whole content is `bytes`
/// (`path` names it in errors): every tensor, in the order of their data offsets. Each
/// entry's bytes lie inside `bytes` and are as many as its dtype and shape need.
pub fn safetensors_header(path: &Path, bytes: &[u8]) -> Result<Vec<HeaderEntry>> {
    let bad = |reason: String| Error::Safetensors { path: path.to_path_buf(), reason };
    data_end_fits(bytes).map_err(bad)?;
    let st = safetensors::SafeTensors::deserialize(bytes).map_err(|e| bad(e.to_string()))?;
    let base = bytes.as_ptr() as usize;
    let mut out = Vec::new();
    for (name, view) in st.tensors() {
        let dtype = crate::dtype_from_safetensors(view.dtype()).ok_or_else(|| Error::UnsupportedSourceDtype {
            path: path.to_path_buf(),
            name: name.clone(),
            dtype: format!("{:?}", view.dtype()),
        })?;
        let data = view.data();
        out.push(HeaderEntry { name, dtype, shape: view.shape().to_vec(), offset: data.as_ptr() as usize - base, len: data.len() });
    }
    out.sort_by_key(|t| (t.offset, t.name.clone()));
    Ok(out)
}

/// Refuses a header whose data section would end past `usize::MAX`. The safetensors crate
/// (0.6) checks each tensor's size, but adds the end of the data section to the header's
/// length unchecked: eight tensors of 2^61 - 1 bytes each overflow it, a panic in a debug
/// build and, in a release build, a wrapped sum that can match the file's length and panic
/// when the tensors are sliced. Anything else is left to the crate, with its own messages.
fn data_end_fits(bytes: &[u8]) -> std::result::Result<(), String> {
    let Some(prefix) = bytes.get(..8) else { return Ok(()) };
    let n = u64::from_le_bytes(prefix.try_into().expect("8 bytes"));
    let Some(header) = usize::try_from(n).ok().and_then(|n| bytes.get(8..n.checked_add(8)?)) else { return Ok(()) };
    // An end past `usize::MAX - 8 - n` (n is at most 10^8) is written with 19 digits or
    // more; real headers have none, so they are not parsed twice.
    if !header.split(|b| !b.is_ascii_digit()).any(|digits| digits.len() >= 19) {
        return Ok(());
    }
    let Ok(serde_json::Value::Object(tensors)) = serde_json::from_slice::<serde_json::Value>(header) else { return Ok(()) };
    let limit = (usize::MAX as u64).saturating_sub(8).saturating_sub(n);
    for (name, info) in &tensors {
        if let Some(end) = info.get("data_offsets").and_then(|o| o.get(1)).and_then(serde_json::Value::as_u64) {
            if end > limit {
                return Err(format!("tensor `{name}` ends at data offset {end}, past what any file can hold"));
            }
        }
    }
    Ok(())
}

/// A tensor stored in a mapped file: its bytes are `file[offset..offset + len]`, little-endian.
#[derive(Clone, Debug)]
pub struct SourceTensor {
    pub name: String,
    pub file: Arc<MappedFile>,
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub offset: usize,
    pub len: usize,
}

impl SourceTensor {
    pub fn bytes(&self) -> Result<&[u8]> {
        self.file.bytes().get(self.offset..self.offset + self.len).ok_or_else(|| Error::Recipe {
            tensor: self.name.clone(),
            reason: format!(
                "bytes {}..{} lie outside {} ({} bytes): the file is truncated",
                self.offset,
                self.offset + self.len,
                self.file.path.display(),
                self.file.bytes().len()
            ),
        })
    }

    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }
}
