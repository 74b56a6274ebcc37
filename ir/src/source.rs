//! Memory-mapped tensor files. Source tensors are views into a mapping: nothing is copied
//! until a recipe is materialized at write time.

use crate::{DType, Error, Result};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A read-only memory mapping of one file.
pub struct MappedFile {
    pub path: PathBuf,
    /// Positional reads (`pread`) for streaming: they do not leave file pages mapped into the
    /// process, so reading a whole checkpoint does not grow the resident set.
    file: std::fs::File,
    /// The mapping serves headers and small random reads.
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
        Ok(Arc::new(MappedFile { path: path.to_path_buf(), file, map }))
    }

    /// Reads `len` bytes at `offset` without touching the mapping.
    pub fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        let mut buf = vec![0u8; len];
        self.read_into(offset, &mut buf)?;
        Ok(buf)
    }

    /// Fills `out` with the bytes at `offset` (a `pread` into the caller's buffer).
    pub fn read_into(&self, offset: u64, out: &mut [u8]) -> Result<()> {
        use std::os::unix::fs::FileExt;
        self.file.read_exact_at(out, offset).map_err(|e| Error::io(&self.path, e))
    }

    pub fn bytes(&self) -> &[u8] {
        self.map.as_deref().unwrap_or(&[])
    }

    /// Reads the header of a safetensors file and returns a view of every tensor in it, in
    /// the order of their data offsets (deterministic, unlike the header's JSON object order).
    pub fn safetensors_tensors(self: &Arc<Self>) -> Result<Vec<SourceTensor>> {
        let bytes = self.bytes();
        let st = safetensors::SafeTensors::deserialize(bytes)
            .map_err(|e| Error::Safetensors { path: self.path.clone(), reason: e.to_string() })?;
        let base = bytes.as_ptr() as usize;
        let mut out = Vec::new();
        for (name, view) in st.tensors() {
            let dtype = DType::from_safetensors(view.dtype()).ok_or_else(|| Error::UnsupportedSourceDtype {
                path: self.path.clone(),
                name: name.clone(),
                dtype: format!("{:?}", view.dtype()),
            })?;
            let data = view.data();
            out.push(SourceTensor {
                name,
                file: Arc::clone(self),
                dtype,
                shape: view.shape().to_vec(),
                offset: data.as_ptr() as usize - base,
                len: data.len(),
            });
        }
        out.sort_by_key(|t| (t.offset, t.name.clone()));
        Ok(out)
    }
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
