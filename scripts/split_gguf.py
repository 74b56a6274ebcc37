"""Splits a GGUF file into a set of files as llama.cpp's `gguf-split` does, with gguf-py's
writer (`split_max_tensors`): `OUT_PREFIX-00001-of-0000N.gguf`, ..., the first holding the
metadata, every file `split.no`, `split.count` and `split.tensors.count`, the tensors' bytes
copied unchanged. Test data for split-file imports (tests/python/test_gguf_split.py); needs
gguf and numpy only.

usage: split_gguf.py FILE.gguf OUT_PREFIX TENSORS_PER_FILE
"""
import sys

import gguf
import numpy as np


def split(src, out_prefix, per_file):
    """Writes the split set; returns the paths written, first to last."""
    reader = gguf.GGUFReader(src)
    arch = reader.fields["general.architecture"].contents()
    writer = gguf.GGUFWriter(f"{out_prefix}.gguf", arch, split_max_tensors=per_file)
    for field in reader.fields.values():
        # The header's own fields, and the architecture the writer adds itself.
        if field.name.startswith("GGUF.") or field.name == "general.architecture":
            continue
        value_type = field.types[0]
        sub_type = field.types[-1] if value_type == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), value_type, sub_type=sub_type)
    for t in reader.tensors:
        # The stored bytes as they are: the reader gives a quantized tensor as its rows of
        # blocks (the writer reads the shape back from them), a float tensor as its values.
        writer.add_tensor(t.name, np.asarray(t.data), raw_dtype=t.tensor_type)
    paths = writer.format_shard_names(writer.path)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return paths


if __name__ == "__main__":
    for p in split(sys.argv[1], sys.argv[2], int(sys.argv[3])):
        print(p)
