//! Property tests of the safetensors header reader (`ir::safetensors_header`, what
//! `MappedFile::safetensors_tensors` runs on a mapped file): whatever the bytes, it returns
//! the tensors or an error naming the file, never panics, and each case finishes within
//! `proptest_bounds::LIMIT`. When it returns tensors, each one's bytes lie inside the file and are as many
//! as its dtype and shape need.
//!
//! Three generators, bounded in cases and size: arbitrary bytes (up to 4 KiB); small valid
//! files, then truncated, bit-flipped, extended or given another length prefix; and headers
//! assembled from edge values (dims whose product overflows, offsets past `u64`, unknown
//! dtypes, gaps and overlaps). The last two count their outcomes: a generator that never
//! yields a readable file, or never an error, tests nothing.
//!
//! Cases come from a fixed seed, so a run is repeatable; `PROPTEST_RNG_SEED=<n>` and
//! `PROPTEST_CASES=<n>` explore further. A failure prints the smallest input found: add it
//! below as a plain test when fixing it.

use ir::{safetensors_header, DType, Error};
use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::TestRunner;
use std::cell::Cell;
use std::path::Path;

#[path = "../../tests/support/proptest_bounds.rs"]
mod proptest_bounds;
use proptest_bounds::{bounded, config};

const FILE: &str = "fuzz.safetensors";

/// Reads `bytes` on a bounded thread and checks what comes back; `Ok(true)` when readable.
fn read(bytes: Vec<u8>) -> Result<bool, TestCaseError> {
    let (result, bytes) = bounded(move || (safetensors_header(Path::new(FILE), &bytes), bytes));
    match result {
        Ok(entries) => {
            let mut names = std::collections::BTreeSet::new();
            for (i, e) in entries.iter().enumerate() {
                prop_assert!(names.insert(&e.name), "`{}` listed twice", e.name);
                let end = e.offset.checked_add(e.len);
                prop_assert!(end.is_some_and(|end| end <= bytes.len()), "`{}` at {}+{} lies outside {} bytes", e.name, e.offset, e.len, bytes.len());
                // Exact: a zero dim makes any other dim fine.
                let need = if e.shape.contains(&0) { Some(0) } else { e.shape.iter().try_fold(e.dtype.size() as u128, |n, &d| n.checked_mul(d as u128)) };
                prop_assert_eq!(need, Some(e.len as u128), "`{}` {:?} {:?}", e.name, e.dtype, e.shape);
                if i > 0 {
                    prop_assert!(entries[i - 1].offset <= e.offset, "not in offset order");
                }
            }
            Ok(true)
        }
        Err(e @ (Error::Safetensors { .. } | Error::UnsupportedSourceDtype { .. })) => {
            prop_assert!(e.to_string().starts_with(FILE), "the error does not name the file: {e}");
            Ok(false)
        }
        Err(other) => Err(TestCaseError::fail(format!("unexpected error kind: {other}"))),
    }
}

#[test]
fn arbitrary_bytes_read_or_fail() {
    let bytes = prop::collection::vec(any::<u8>(), 0..4096);
    // A plausible length prefix in front, so the reader gets to the JSON.
    let prefixed = prop::collection::vec(any::<u8>(), 0..2048).prop_map(|b| [&(b.len() as u64).to_le_bytes()[..], &b].concat());
    TestRunner::new(config(256)).run(&prop_oneof![bytes, prefixed], |b| read(b).map(drop)).unwrap();
}

/// A safetensors file: the 8-byte little-endian header length, the header, the data.
fn file(header: &str, data: &[u8]) -> Vec<u8> {
    [&(header.len() as u64).to_le_bytes()[..], header.as_bytes(), data].concat()
}

const DTYPES: &[(&str, usize)] = &[("F32", 4), ("F16", 2), ("BF16", 2), ("I64", 8), ("U8", 1), ("BOOL", 1), ("F64", 8)];

/// A valid file of up to four small tensors, and its byte length.
fn valid_file() -> impl Strategy<Value = Vec<u8>> {
    let tensor = (select(DTYPES), prop::collection::vec(0usize..5, 0..4));
    prop::collection::vec(tensor, 0..5).prop_map(|tensors| {
        let (mut entries, mut offset) = (Vec::new(), 0);
        for (i, ((dtype, size), shape)) in tensors.iter().enumerate() {
            let len = size * shape.iter().product::<usize>();
            entries.push(format!(r#""t{i}":{{"dtype":"{dtype}","shape":{shape:?},"data_offsets":[{offset},{}]}}"#, offset + len));
            offset += len;
        }
        entries.push(r#""__metadata__":{"format":"pt"}"#.into());
        let data: Vec<u8> = (0..offset).map(|i| i as u8).collect();
        file(&format!("{{{}}}", entries.join(",")), &data)
    })
}

#[derive(Clone, Debug)]
enum Damage {
    None,
    Truncate(prop::sample::Index),
    FlipBit(prop::sample::Index, u8),
    Append(Vec<u8>),
    Prefix(u64),
    PrefixOffBy(i8),
}

#[test]
fn damaged_valid_files_read_or_fail() {
    let damage = prop_oneof![
        Just(Damage::None),
        any::<prop::sample::Index>().prop_map(Damage::Truncate),
        (any::<prop::sample::Index>(), 0u8..8).prop_map(|(i, b)| Damage::FlipBit(i, b)),
        prop::collection::vec(any::<u8>(), 1..16).prop_map(Damage::Append),
        prop_oneof![Just(u64::MAX), Just(1 << 63), Just(100_000_001), any::<u64>()].prop_map(Damage::Prefix),
        any::<i8>().prop_map(Damage::PrefixOffBy),
    ];
    let (readable, refused) = (Cell::new(0), Cell::new(0));
    TestRunner::new(config(384))
        .run(&(valid_file(), prop::collection::vec(damage, 1..3)), |(mut bytes, damage)| {
            for d in damage {
                let n = bytes.len();
                match d {
                    Damage::None => {}
                    Damage::Truncate(i) => bytes.truncate(i.index(n)),
                    Damage::FlipBit(i, b) if n > 0 => bytes[i.index(n)] ^= 1 << b,
                    Damage::FlipBit(..) => {}
                    Damage::Append(extra) => bytes.extend(extra),
                    Damage::Prefix(p) if n >= 8 => bytes[..8].copy_from_slice(&p.to_le_bytes()),
                    Damage::PrefixOffBy(k) if n >= 8 => {
                        let p = u64::from_le_bytes(bytes[..8].try_into().unwrap()).wrapping_add(k as u64);
                        bytes[..8].copy_from_slice(&p.to_le_bytes());
                    }
                    Damage::Prefix(_) | Damage::PrefixOffBy(_) => {}
                }
            }
            let counter = if read(bytes)? { &readable } else { &refused };
            counter.set(counter.get() + 1);
            Ok(())
        })
        .unwrap();
    eprintln!("readable {}, refused {}", readable.get(), refused.get());
    assert!(readable.get() > 0 && refused.get() > 0, "readable {} refused {}: the damage is vacuous", readable.get(), refused.get());
}

/// Dims at the edges: a product of a few of them overflows `usize`.
const DIMS: &[u64] = &[0, 1, 2, 3, 7, 1 << 31, 1 << 32, (1 << 61) - 1, 1 << 63, u64::MAX];

/// How a tensor's `data_offsets` are written.
#[derive(Clone, Debug)]
enum Offsets {
    /// Where the tensors before it end, for as many bytes as its shape needs (computed
    /// without overflow, so past `u64` when the shape is huge).
    Exact,
    /// Exact, then the end moved by this much.
    EndOffBy(i64),
    Given(u64, u64),
}

#[test]
fn assembled_headers_read_or_fail() {
    let dtype = prop_oneof![
        4 => select(DTYPES).prop_map(|(d, s)| (d.to_string(), s)),
        1 => select(vec!["F8_E4M3", "F4", "C64", "f32", "", "\u{0}"]).prop_map(|d| (d.to_string(), 1)),
    ];
    let shape = prop_oneof![
        3 => prop::collection::vec(0u64..4, 0..3),
        1 => prop::collection::vec(select(DIMS), 0..4),
        // The most bytes one tensor can have (its bit count just fits): eight overflow.
        1 => Just(vec![(1 << 61) - 1]),
    ];
    let offsets = prop_oneof![
        4 => Just(Offsets::Exact),
        1 => select(vec![-1i64, 1, i64::MIN, i64::MAX]).prop_map(Offsets::EndOffBy),
        1 => (select(DIMS), select(DIMS)).prop_map(|(a, b)| Offsets::Given(a, b)),
    ];
    let tensor = (dtype, shape, offsets, select(vec!["w", "w", "b", "\\u0000", "__metadata__", "é"]));
    let (readable, refused) = (Cell::new(0), Cell::new(0));
    TestRunner::new(config(384))
        .run(&(prop::collection::vec(tensor, 0..10), any::<bool>()), |(mut tensors, many)| {
            // `many`: eight copies of the first tensor, whose sizes add up past `usize`
            // when it is huge even though each one fits.
            if many && !tensors.is_empty() {
                tensors = vec![tensors[0].clone(); 8];
            }
            let (mut entries, mut end) = (Vec::new(), 0u128);
            for (i, ((dtype, size), shape, offsets, name)) in tensors.iter().enumerate() {
                let need = shape.iter().fold(*size as u128, |n, &d| n.saturating_mul(d as u128));
                let (start, stop) = match offsets {
                    Offsets::Exact => (end, end.saturating_add(need)),
                    Offsets::EndOffBy(k) => (end, (end.saturating_add(need).min(i128::MAX as u128) as i128).saturating_add(*k as i128).max(0) as u128),
                    Offsets::Given(a, b) => (*a as u128, *b as u128),
                };
                end = stop;
                let name = if many { format!("t{i}") } else { format!("{name}{}", i % 3) };
                entries.push(format!(r#""{name}":{{"dtype":"{dtype}","shape":{shape:?},"data_offsets":[{start},{stop}]}}"#));
            }
            let data = vec![0u8; usize::try_from(end).unwrap_or(0).min(1 << 16)];
            read(file(&format!("{{{}}}", entries.join(",")), &data))
                .map(|ok| {
                    let counter = if ok { &readable } else { &refused };
                    counter.set(counter.get() + 1);
                })
        })
        .unwrap();
    eprintln!("readable {}, refused {}", readable.get(), refused.get());
    assert!(readable.get() > 0 && refused.get() > 0, "readable {} refused {}: the generator is vacuous", readable.get(), refused.get());
}

/// Eight U8 tensors of 2^61 - 1 bytes: each size fits, their sum plus the header length
/// overflows `usize`. The safetensors crate panicked ("attempt to add with overflow").
#[test]
fn a_data_section_past_usize_max_is_an_error() {
    let size: u64 = (1 << 61) - 1;
    let entries: Vec<String> = (0..8u64)
        .map(|i| format!(r#""t{i}":{{"dtype":"U8","shape":[{size}],"data_offsets":[{},{}]}}"#, i * size, (i + 1) * size))
        .collect();
    let bytes = file(&format!("{{{}}}", entries.join(",")), &[]);
    let e = safetensors_header(Path::new(FILE), &bytes).unwrap_err().to_string();
    assert!(e.starts_with("fuzz.safetensors: not a valid safetensors file (tensor `t7` ends at data offset 18446744073709551608"), "{e}");
}

/// The header gives what the file holds: names, dtypes, shapes and where the bytes are.
#[test]
fn a_valid_header_lists_every_tensor_in_offset_order() {
    let header = r#"{"b":{"dtype":"F16","shape":[2],"data_offsets":[8,12]},"a":{"dtype":"F32","shape":[2,1],"data_offsets":[0,8]}}"#;
    let bytes = file(header, &[0; 12]);
    let entries = safetensors_header(Path::new(FILE), &bytes).unwrap();
    let start = 8 + header.len();
    let got: Vec<_> = entries.iter().map(|e| (e.name.as_str(), e.dtype, e.shape.clone(), e.offset - start, e.len)).collect();
    assert_eq!(got, [("a", DType::F32, vec![2, 1], 0, 8), ("b", DType::F16, vec![2], 8, 4)]);
}
