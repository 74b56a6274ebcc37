//! The names a download puts on the file system, each parsed into a type before any file is
//! created. They come from the server (the listing's commit and file names, each file's ETag)
//! or from the user (`--revision`), so a path joined from them must stay inside the model's
//! cache folder whatever was sent: a commit is 40 hex digits, a blob is a hash, a file name is
//! a plain relative path, a revision is a git ref name or a commit.

use std::fmt;

/// A value from the server or the user as an error shows it: at most 120 characters, control
/// characters escaped (a hostile server's value must not drive the terminal).
pub(crate) fn shown(s: &str) -> String {
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i == 120 {
            out.push_str("...");
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

fn is_lower_hex(s: &str) -> bool {
    s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// A git commit hash as the hub names snapshots: 40 lowercase hex digits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Commit(String);

impl Commit {
    pub(crate) fn parse(s: &str) -> Option<Commit> {
        (s.len() == 40 && is_lower_hex(s)).then(|| Commit(s.to_string()))
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Commit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A branch or tag name (`main`, `v1.0`, `refs/pr/1`) with git's ref-name restrictions
/// (`git check-ref-format`), limited to printable ASCII: no component starts with `.` (so
/// none is `.` or `..`), no `..`, no empty component or leading/trailing `/`, none of
/// `~^:?*[\`, no `@{`, no `.lock` component end. So `refs/<name>` stays inside `refs/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RefName(String);

impl RefName {
    /// The name, or why it is not one (a phrase: "it ...").
    fn parse(s: &str) -> Result<RefName, &'static str> {
        if s.is_empty() {
            return Err("it is empty");
        }
        if s.len() > 255 {
            return Err("it is longer than 255 bytes");
        }
        if s.bytes().any(|b| !(0x21..0x7f).contains(&b)) {
            return Err("it holds a space, a control character or a non-ASCII character");
        }
        if s.bytes().any(|b| b"~^:?*[\\".contains(&b)) {
            return Err("it holds one of ~ ^ : ? * [ \\");
        }
        if s.starts_with('/') {
            return Err("it is an absolute path");
        }
        if s.ends_with('/') || s.contains("//") {
            return Err("it has an empty component");
        }
        if s.contains("..") {
            return Err("it contains `..`");
        }
        if s.split('/').any(|c| c.starts_with('.')) {
            return Err("a component starts with `.`");
        }
        if s.split('/').any(|c| c.ends_with(".lock")) {
            return Err("a component ends with `.lock`");
        }
        if s.ends_with('.') {
            return Err("it ends with `.`");
        }
        if s.contains("@{") || s == "@" {
            return Err("it is `@` or contains `@{`");
        }
        Ok(RefName(s.to_string()))
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

/// What `--revision` names: a commit, or a branch/tag the hub resolves to one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Revision {
    Commit(Commit),
    Ref(RefName),
}

impl Revision {
    /// The revision, or an error naming the value and what a revision looks like.
    pub(crate) fn parse(s: &str) -> Result<Revision, String> {
        if let Some(c) = Commit::parse(s) {
            return Ok(Revision::Commit(c));
        }
        RefName::parse(s).map(Revision::Ref).map_err(|why| {
            format!(
                "`{}` is not a branch, tag or commit hash ({why}); a revision is a git ref name such as `main`, `v1.0` or `refs/pr/1`, or a commit's 40 lowercase hex digits",
                shown(s)
            )
        })
    }

    pub(crate) fn as_str(&self) -> &str {
        match self {
            Revision::Commit(c) => c.as_str(),
            Revision::Ref(r) => r.as_str(),
        }
    }
}

/// Which hash a blob is named by: the hub's ETag is a regular file's git blob hash (SHA-1 of
/// `blob <size>\0` and the bytes) or an LFS file's SHA-256 (of the bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HashKind {
    GitSha1,
    Sha256,
}

/// A file name in `blobs/`: the server's ETag, unquoted, that is a hash of the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BlobName {
    name: String,
    kind: HashKind,
}

impl BlobName {
    /// The blob an ETag names, as the hub sends it (`"<hash>"`, maybe `W/"<hash>"`), or an
    /// error naming the value and what was expected.
    pub(crate) fn from_etag(raw: &str) -> Result<BlobName, String> {
        let v = raw.trim();
        let v = v.strip_prefix("W/").unwrap_or(v).trim_matches('"');
        let kind = match v.len() {
            40 => Some(HashKind::GitSha1),
            64 => Some(HashKind::Sha256),
            _ => None,
        };
        match kind {
            Some(kind) if v.bytes().all(|b| b.is_ascii_hexdigit()) => Ok(BlobName { name: v.to_string(), kind }),
            _ => Err(format!(
                "its ETag `{}` is not a file hash: expected a git SHA-1 (40 hex digits) or a SHA-256 (64 hex digits), quoted",
                shown(raw)
            )),
        }
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.name
    }

    pub(crate) fn kind(&self) -> HashKind {
        self.kind
    }
}

impl fmt::Display for BlobName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}

/// A file's path in the repository, as a relative path of plain components: no `..`, `.`,
/// empty components, leading `/`, backslashes, NULs or other characters outside letters,
/// digits and `-_.+=@,~`; at most 16 components of at most 255 bytes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct RepoFile(String);

impl RepoFile {
    /// The path, or an error naming the listing's value and what was expected.
    pub(crate) fn parse(s: &str) -> Result<RepoFile, String> {
        let why = if s.is_empty() {
            Some("it is empty")
        } else if s.len() > 1024 {
            Some("it is longer than 1024 bytes")
        } else if s.starts_with('/') {
            Some("it is an absolute path")
        } else if s.contains('\\') {
            Some("it holds a backslash")
        } else if s.split('/').any(str::is_empty) {
            Some("it has an empty component")
        } else if s.split('/').any(|c| c == "." || c == "..") {
            Some("it has a `.` or `..` component")
        } else if s.split('/').count() > 16 {
            Some("it has more than 16 components")
        } else if s.split('/').any(|c| c.len() > 255) {
            Some("a component is longer than 255 bytes")
        } else if !s.chars().all(|c| c == '/' || c.is_ascii_alphanumeric() || "-_.+=@,~".contains(c)) {
            Some("it holds a character other than letters, digits and - _ . + = @ , ~ (a control character, a NUL, a space or non-ASCII)")
        } else {
            None
        };
        match why {
            None => Ok(RepoFile(s.to_string())),
            Some(why) => Err(format!("file name `{}` is not a relative path inside the repository: {why}", shown(s))),
        }
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }

    /// The symbolic link's text from `snapshots/<commit>/<self>` to `blobs/<blob>`: one `..`
    /// per folder up to the repository folder (two for a top-level file).
    pub(crate) fn link_to(&self, blob: &BlobName) -> String {
        let ups = self.0.split('/').count() + 1;
        format!("{}blobs/{blob}", "../".repeat(ups))
    }

    /// The path in a URL: each component percent-encoded, the `/` kept.
    pub(crate) fn url_path(&self) -> String {
        self.0.split('/').map(encode_segment).collect::<Vec<_>>().join("/")
    }
}

impl fmt::Display for RepoFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// `s` as one URL path segment: unreserved characters kept, every other byte `%XX` (so
/// `refs/pr/1` is `refs%2Fpr%2F1`, as the hub's API expects a revision).
pub(crate) fn encode_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commits_are_40_lowercase_hex_digits() {
        assert!(Commit::parse("0123456789abcdef0123456789abcdef01234567").is_some());
        for not in ["0123456789ABCDEF0123456789abcdef01234567", "0123", "../../dir", "0123456789abcdef0123456789abcdef0123456g", ""] {
            assert!(Commit::parse(not).is_none(), "{not}");
        }
    }

    #[test]
    fn revisions_are_ref_names_or_commits() {
        for ok in ["main", "v1.0", "refs/pr/1", "release-2024.01", "feature/x_y", "abc1234"] {
            assert!(matches!(Revision::parse(ok), Ok(Revision::Ref(_))), "{ok}");
        }
        assert!(matches!(Revision::parse("0123456789abcdef0123456789abcdef01234567"), Ok(Revision::Commit(_))));
        for not in [
            "../../../secret.txt",
            "/etc/passwd",
            "..",
            ".",
            "a/../b",
            "a//b",
            "main/",
            ".hidden",
            "a/.b",
            "x.lock",
            "a b",
            "a\0b",
            "a\\b",
            "a:b",
            "v1.",
            "@",
            "a@{1}",
            "",
            "é",
        ] {
            let e = Revision::parse(not).unwrap_err();
            assert!(e.contains("is not a branch, tag or commit hash") && e.contains("refs/pr/1"), "{not}: {e}");
        }
        assert!(Revision::parse("../../../secret.txt").unwrap_err().contains("`../../../secret.txt`"));
    }

    #[test]
    fn blob_names_are_hashes_from_the_etag() {
        let sha1 = "d9e9f15bc825e4b2c9249e9578f884bbcb5e3684";
        let sha256 = "4b243c475af8d0a7754e87d7d096c92e5199ec2fe168a2ee7998e3b8e9bcb1d3";
        for (raw, name, kind) in [
            (format!("\"{sha1}\""), sha1, HashKind::GitSha1),
            (format!("W/\"{sha1}\""), sha1, HashKind::GitSha1),
            (sha256.to_string(), sha256, HashKind::Sha256),
            (format!(" \"{sha256}\" "), sha256, HashKind::Sha256),
        ] {
            let b = BlobName::from_etag(&raw).unwrap();
            assert_eq!((b.as_str(), b.kind()), (name, kind), "{raw}");
        }
        for not in ["\"/tmp/canary\"", "/tmp/canary", "../../x", "\"blob-0\"", "", "\"\"", &format!("{sha1}/.."), &format!("\"{}\"", &sha256[..63])] {
            let e = BlobName::from_etag(not).unwrap_err();
            assert!(e.contains("is not a file hash") && e.contains("SHA-256"), "{not}: {e}");
        }
    }

    #[test]
    fn repo_files_are_plain_relative_paths() {
        for ok in ["config.json", "1_Pooling/config.json", "model-00001-of-00002.safetensors", ".gitattributes", "a+b=c@d,e~f.json"] {
            assert_eq!(RepoFile::parse(ok).unwrap().as_str(), ok);
        }
        for not in ["", "/abs/x.json", "../../x.json", "a/../x.json", "./x.json", "a//x.json", "a/", "a\\x.json", "x\0.json", "x\n.json", "a b.json", "é.json", "..", "C:x.json"] {
            let e = RepoFile::parse(not).unwrap_err();
            assert!(e.contains("is not a relative path inside the repository"), "{not:?}: {e}");
        }
        assert!(RepoFile::parse(&["a"; 16].join("/")).is_ok());
        assert!(RepoFile::parse(&["a"; 17].join("/")).unwrap_err().contains("more than 16 components"));
    }

    #[test]
    fn links_climb_to_the_repository_folder() {
        let blob = BlobName::from_etag("\"d9e9f15bc825e4b2c9249e9578f884bbcb5e3684\"").unwrap();
        assert_eq!(RepoFile::parse("config.json").unwrap().link_to(&blob), "../../blobs/d9e9f15bc825e4b2c9249e9578f884bbcb5e3684");
        assert_eq!(RepoFile::parse("1_Pooling/config.json").unwrap().link_to(&blob), "../../../blobs/d9e9f15bc825e4b2c9249e9578f884bbcb5e3684");
    }

    #[test]
    fn urls_encode_revisions_and_names() {
        assert_eq!(encode_segment("refs/pr/1"), "refs%2Fpr%2F1");
        assert_eq!(encode_segment("v1.0~x"), "v1.0~x");
        assert_eq!(RepoFile::parse("1_Pooling/a+b.json").unwrap().url_path(), "1_Pooling/a%2Bb.json");
    }

    #[test]
    fn shown_values_are_bounded_and_escaped() {
        assert_eq!(shown("a\u{1b}[31mb"), "a\\u{1b}[31mb");
        assert_eq!(shown(&"x".repeat(500)).len(), 123);
    }
}
