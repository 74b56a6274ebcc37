//! `--model ORG/NAME:TAG`: which files of a GGUF repository make the model asked for.
//!
//! A GGUF repository on the hub (llama.cpp's conversions) holds one file per quantization
//! (`Model-Q4_K_M.gguf`, `Model.Q8_0.gguf`), a large one split as llama.cpp's `gguf-split`
//! names it (`Model-Q8_0-00001-of-00002.gguf`, sometimes in a folder such as `Q8_0/`), and
//! often vision projectors (`mmproj-*.gguf`), which are not a model on their own. A tag names
//! one quantization as llama.cpp's `-hf ORG/NAME:QUANT` does: the model whose file name,
//! without `.gguf` and the split suffix, ends with the tag after a `-`, `.` or `_` (or is the
//! tag), compared without regard to case.

use std::collections::BTreeMap;
use std::fmt;

use super::names::shown;

/// The quantization a user names after the `:` of `ORG/NAME:TAG` (`Q4_K_M`, `q8_0`, `F16`):
/// 1 to 64 letters, digits, `_`, `-` or `.`. Only ever compared with file names, never joined
/// into a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Tag(String);

impl Tag {
    pub(crate) fn parse(s: &str) -> Option<Tag> {
        let ok = !s.is_empty() && s.len() <= 64 && s.chars().all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c));
        ok.then(|| Tag(s.to_string()))
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Tag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One model among a repository's GGUF files: a single file, or the files of one split set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GgufModel {
    /// The model's path without `.gguf` and the split suffix (`Q8_0/Model-Q8_0`).
    pub label: String,
    /// Its files as the repository names them, in order: the first is the one to open.
    pub files: Vec<String>,
    /// For a split set, how many files it says it has (`-of-0000N`).
    pub split_count: Option<usize>,
}

impl GgufModel {
    /// The file name without folders, `.gguf` and the split suffix (`Model-Q8_0`).
    fn stem(&self) -> &str {
        self.label.rsplit('/').next().unwrap_or(&self.label)
    }

    /// Does `tag` name this model?
    fn is_tagged(&self, tag: &Tag) -> bool {
        let (stem, tag) = (self.stem().to_ascii_lowercase(), tag.as_str().to_ascii_lowercase());
        stem == tag || stem.strip_suffix(&tag).is_some_and(|head| head.ends_with(['-', '.', '_']))
    }

    /// The tag to name it by among `all`: the shortest end of its name after a `-` or `.`
    /// that names it alone (`Q4_K_XL`, or `UD-Q4_K_XL` beside `Model-Q4_K_XL`), else its
    /// whole name.
    fn suggested_tag(&self, all: &[GgufModel]) -> String {
        let stem = self.stem();
        let starts = stem.char_indices().filter(|&(_, c)| c == '-' || c == '.').map(|(i, _)| i + 1).rev().chain([0]);
        starts
            .filter_map(|i| Tag::parse(&stem[i..]))
            .find(|t| all.iter().filter(|m| m.is_tagged(t)).count() == 1)
            .map_or_else(|| stem.to_string(), |t| t.0)
    }

    /// The split set's files that are not among `files`, by name, compared without regard to
    /// case (empty when complete).
    pub(crate) fn missing_files(&self) -> Vec<String> {
        let Some(count) = self.split_count else { return Vec::new() };
        (1..=count)
            .map(|i| format!("{}.gguf", ir::gguf::split_file_stem(&self.label, i, count)))
            .filter(|n| !self.files.iter().any(|f| f.eq_ignore_ascii_case(n)))
            .collect()
    }

    /// How it is shown in a list among `all`: `` `Q4_K_M` (Model-Q4_K_M.gguf) ``.
    fn listed(&self, all: &[GgufModel]) -> String {
        let files = match (self.files.first(), self.split_count) {
            (Some(first), Some(n)) => format!("{} and the {} other files of its split set", shown(first), n.saturating_sub(1)),
            (Some(first), None) => shown(first),
            (None, _) => shown(&self.label),
        };
        format!("`{}` ({files})", shown(&self.suggested_tag(all)))
    }
}

/// Is `name` (a path in the repository) a vision projector rather than a model?
fn is_projector(name: &str) -> bool {
    name.rsplit('/').next().unwrap_or(name).to_ascii_lowercase().contains("mmproj")
}

/// The GGUF models among `names` (a repository's or a snapshot's file paths), by label;
/// vision projectors left out. A split set's files are grouped whether or not all are there.
pub(crate) fn models<'a>(names: impl IntoIterator<Item = &'a str>) -> Vec<GgufModel> {
    let mut by_label: BTreeMap<String, GgufModel> = BTreeMap::new();
    for name in names {
        let Some(path_stem) = name.len().checked_sub(5).filter(|&n| name.is_char_boundary(n) && name[n..].eq_ignore_ascii_case(".gguf")).map(|n| &name[..n]) else {
            continue;
        };
        if is_projector(name) {
            continue;
        }
        let (label, count) = match ir::gguf::split_stem(path_stem) {
            Some((label, _, count)) => (label, Some(count)),
            None => (path_stem, None),
        };
        let key = format!("{label}\u{0}{}", count.unwrap_or(0));
        let m = by_label.entry(key).or_insert_with(|| GgufModel { label: label.to_string(), files: Vec::new(), split_count: count });
        m.files.push(name.to_string());
    }
    let mut out: Vec<GgufModel> = by_label.into_values().collect();
    for m in &mut out {
        m.files.sort();
        m.files.dedup();
    }
    out
}

/// `shown` (some of `all`) as a list for a message: each with the tag that names it alone
/// among `all` and its files.
pub(crate) fn listing<'a>(shown: impl IntoIterator<Item = &'a GgufModel>, all: &[GgufModel]) -> String {
    shown.into_iter().map(|m| m.listed(all)).collect::<Vec<_>>().join(", ")
}

/// The one model `tag` names among `models` (the only one when `tag` is `None`), or why
/// there is none, listing what there is and how to name it. `id` is `ORG/NAME` for the message;
/// `where_` says where the files were listed ("the hub lists", "the cache holds").
pub(crate) fn choose(models: &[GgufModel], tag: Option<&Tag>, id: &str, where_: &str) -> Result<GgufModel, String> {
    let list = |ms: &[&GgufModel]| listing(ms.iter().copied(), models);
    let all: Vec<&GgufModel> = models.iter().collect();
    let chosen: Vec<&GgufModel> = match tag {
        Some(t) => models.iter().filter(|m| m.is_tagged(t)).collect(),
        None => all.clone(),
    };
    let example = all.first().map_or("Q4_K_M".to_string(), |m| shown(&m.suggested_tag(models)));
    match (chosen.as_slice(), tag) {
        ([], _) if all.is_empty() => Err(format!("{where_} no GGUF model file for `{id}` (vision projectors `mmproj*.gguf` are not one)")),
        ([], Some(t)) => Err(format!(
            "{where_} no GGUF model of `{id}` named `{t}` (a file whose name, without `.gguf` and a split suffix, ends with `-{t}`, `.{t}` or `_{t}` or is `{t}`, in any case); it has {}; name one as `{id}:{example}`",
            list(&all)
        )),
        ([one], _) => {
            let missing = one.missing_files();
            if missing.is_empty() {
                Ok((*one).clone())
            } else {
                Err(format!(
                    "{where_} only {} of the {} files of `{}`'s split set (missing: {})",
                    one.files.len(),
                    one.split_count.unwrap_or(0),
                    shown(&one.label),
                    missing.iter().map(|n| format!("`{}`", shown(n))).collect::<Vec<_>>().join(", ")
                ))
            }
        }
        (several, None) => Err(format!("{where_} {} GGUF models for `{id}`: {}; name one as `{id}:TAG`, for example `{id}:{example}`", several.len(), list(several))),
        (several, Some(t)) => Err(format!(
            "{where_} {} GGUF models of `{id}` that `{t}` could name: {}; give the tag in full, as the file names it",
            several.len(),
            list(several)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(ns: &[&str]) -> Vec<GgufModel> {
        models(ns.iter().copied())
    }

    #[test]
    fn files_group_into_models_and_projectors_are_left_out() {
        let ms = names(&[
            "README.md",
            "Model-Q4_K_M.gguf",
            "Model.Q8_0.GGUF",
            "mmproj-Model-f16.gguf",
            "Q8_0/Model-Q8_0-00002-of-00002.gguf",
            "Q8_0/Model-Q8_0-00001-of-00002.gguf",
            "config.json",
        ]);
        let got: Vec<(&str, usize, Option<usize>)> = ms.iter().map(|m| (m.label.as_str(), m.files.len(), m.split_count)).collect();
        assert_eq!(got, vec![("Model-Q4_K_M", 1, None), ("Model.Q8_0", 1, None), ("Q8_0/Model-Q8_0", 2, Some(2))]);
        assert_eq!(ms[2].files[0], "Q8_0/Model-Q8_0-00001-of-00002.gguf", "the first file of a set opens it");
        assert!(ms[2].missing_files().is_empty());
    }

    #[test]
    fn a_tag_names_the_model_whose_name_ends_with_it() {
        let ms = names(&["m-Q4_K_M.gguf", "m-Q4_K_S.gguf", "m.Q8_0.gguf", "m-F16.gguf", "m-IQ4_XS-00001-of-00002.gguf", "m-IQ4_XS-00002-of-00002.gguf"]);
        let pick = |t: &str| choose(&ms, Tag::parse(t).as_ref(), "o/m", "the hub lists").map(|m| m.files[0].clone());
        assert_eq!(pick("Q4_K_M").unwrap(), "m-Q4_K_M.gguf");
        assert_eq!(pick("q8_0").unwrap(), "m.Q8_0.gguf", "any case");
        assert_eq!(pick("iq4_xs").unwrap(), "m-IQ4_XS-00001-of-00002.gguf");
        let e = pick("Q5_K_M").unwrap_err();
        assert!(e.contains("named `Q5_K_M`") && e.contains("`Q4_K_S` (m-Q4_K_S.gguf)") && e.contains("`IQ4_XS` (m-IQ4_XS-00001-of-00002.gguf and the 1 other files"), "{e}");
        // `K_M` ends only Q4_K_M here (after its `_`); `4_K_M` starts inside `Q4`.
        assert_eq!(pick("K_M").unwrap(), "m-Q4_K_M.gguf");
        let e = choose(&names(&["a-Q4_0.gguf", "b-Q4_0.gguf"]), Tag::parse("Q4_0").as_ref(), "o/m", "the hub lists").unwrap_err();
        assert!(e.contains("2 GGUF models of `o/m` that `Q4_0` could name") && e.contains("a-Q4_0.gguf") && e.contains("b-Q4_0.gguf"), "{e}");
        assert!(!ms[0].is_tagged(&Tag::parse("4_K_M").unwrap()), "a tag starts at a separator");
    }

    #[test]
    fn a_suggested_tag_names_one_model_alone() {
        let ms = names(&["M-Q4_K_XL.gguf", "M-UD-Q4_K_XL.gguf", "M.Q8_0.gguf", "a-Q4_0.gguf", "b-Q4_0.gguf"]);
        let tags: Vec<String> = ms.iter().map(|m| m.suggested_tag(&ms)).collect();
        assert_eq!(tags, ["M-Q4_K_XL", "UD-Q4_K_XL", "Q8_0", "a-Q4_0", "b-Q4_0"]);
        for (m, t) in ms.iter().zip(&tags) {
            let got = choose(&ms, Tag::parse(t).as_ref(), "o/m", "the hub lists").unwrap();
            assert_eq!(&got, m, "{t}");
        }
        let e = choose(&ms, Tag::parse("Q4_K_XL").as_ref(), "o/m", "the hub lists").unwrap_err();
        assert!(e.contains("`M-Q4_K_XL` (M-Q4_K_XL.gguf)") && e.contains("`UD-Q4_K_XL` (M-UD-Q4_K_XL.gguf)"), "{e}");
    }

    #[test]
    fn without_a_tag_only_a_single_model_is_chosen() {
        let one = names(&["m-Q4_0.gguf", "mmproj-m-f16.gguf"]);
        assert_eq!(choose(&one, None, "o/m", "the hub lists").unwrap().files, vec!["m-Q4_0.gguf".to_string()]);
        let e = choose(&names(&["m-Q4_0.gguf", "m-Q8_0.gguf"]), None, "o/m", "the hub lists").unwrap_err();
        assert!(e.contains("2 GGUF models for `o/m`") && e.contains("`o/m:Q4_0`"), "{e}");
        let e = choose(&names(&["mmproj-m-f16.gguf"]), None, "o/m", "the hub lists").unwrap_err();
        assert!(e.contains("no GGUF model file"), "{e}");
    }

    #[test]
    fn an_incomplete_split_set_says_which_files_are_missing() {
        let ms = names(&["m-Q8_0-00001-of-00003.gguf", "m-Q8_0-00003-of-00003.gguf"]);
        assert_eq!(ms[0].missing_files(), vec!["m-Q8_0-00002-of-00003.gguf".to_string()]);
        let e = choose(&ms, None, "o/m", "the cache holds").unwrap_err();
        assert!(e.contains("only 2 of the 3 files") && e.contains("`m-Q8_0-00002-of-00003.gguf`"), "{e}");
        // The extension in another case is the same file.
        assert!(names(&["m-00001-of-00002.GGUF", "m-00002-of-00002.GGUF"])[0].missing_files().is_empty());
        // Numbers outside 1..=N are not a split name: the file is a model of its own.
        assert_eq!(names(&["m-00004-of-00003.gguf"])[0].split_count, None);
    }

    #[test]
    fn tags_are_plain_words() {
        for ok in ["Q4_K_M", "f16", "UD-Q4_K_XL", "bf16.v2"] {
            assert!(Tag::parse(ok).is_some(), "{ok}");
        }
        for bad in ["", "../x", "a/b", "Q4 K", "x:y", &"a".repeat(65)] {
            assert!(Tag::parse(bad).is_none(), "{bad}");
        }
    }
}
