//! The files around the weights, through the real binary (issue #27): a checkpoint's
//! sentence-transformers files, generation config and tokenizer files, and a package's files
//! as `tailor inspect` and `tailor diff` read them. Each is read as config.json is (a regular
//! file, never opened in a way that blocks, of bounded size): a FIFO, a link to /dev/zero, a
//! dangling link or a folder is named, never hangs and is never taken as absent. Broken
//! tokenizer files are warnings (errors with --strict); a package whose external data is
//! truncated or lies outside it fails inspect naming the tensor; a failed write to stdout
//! fails the command.
//!
//! Every run is bounded in time: a hang fails the test instead of stalling it.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

/// Runs `tailor ARGS` with stdout to `stdout` (captured when `None`), failing the test if it
/// runs longer than 60 s (a read that blocks) or panics.
fn run(args: &[&str], paths: &[&Path], stdout: Option<std::fs::File>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tailor"));
    cmd.args(args).args(paths).stderr(Stdio::piped());
    match stdout {
        Some(f) => cmd.stdout(f),
        None => cmd.stdout(Stdio::piped()),
    };
    let child = cmd.spawn().unwrap();
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out = match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(out) => out.unwrap(),
        Err(_) => {
            // SAFETY: killing the child this test started.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            panic!("tailor {args:?} {paths:?} hangs");
        }
    };
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "tailor {args:?} panicked: {stderr}");
    out
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn build(model: &Path, out: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["build"];
    args.extend(extra);
    run(&args, &[Path::new("--model"), model, Path::new("--output"), out], None)
}

fn make_fifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

/// Makes an entry at a path.
type Make = fn(&Path);

/// Ways a file can be there without being a regular file, with what the message must say.
fn not_regular() -> Vec<(&'static str, Make)> {
    vec![
        ("FIFO", |p| make_fifo(p)),
        ("not a regular file", |p| std::os::unix::fs::symlink("/dev/zero", p).unwrap()),
        ("does not exist", |p| std::os::unix::fs::symlink("nowhere.json", p).unwrap()),
        ("folder", |p| std::fs::create_dir(p).unwrap()),
    ]
}

/// Replaces `path` (if there) by the entry `make` creates.
fn replace(path: &Path, make: Make) {
    let _ = std::fs::remove_file(path);
    make(path);
}

/// tiny-bert plus a sentence-transformers module list and pooling config in `dir/st`.
fn sentence_transformers(dir: &Path) -> PathBuf {
    let model = dir.join("st");
    copy_fixture("tiny-bert", &model);
    std::fs::write(
        model.join("modules.json"),
        r#"[{"idx":0,"name":"0","path":"","type":"sentence_transformers.models.Transformer"},
            {"idx":1,"name":"1","path":"1_Pooling","type":"sentence_transformers.models.Pooling"}]"#,
    )
    .unwrap();
    std::fs::create_dir(model.join("1_Pooling")).unwrap();
    std::fs::write(model.join("1_Pooling/config.json"), r#"{"pooling_mode_mean_tokens": true}"#).unwrap();
    model
}

/// A modules.json that is a dangling link, a FIFO, a link to /dev/zero or a folder fails the
/// build naming it (it was taken as absent: the model built without `sentence_embedding`,
/// exit 0); a FIFO pooling config fails at once (it hung the build), a link to /dev/zero is
/// refused (it was read without bound).
#[test]
fn sentence_transformers_files_that_are_not_regular_files_fail_the_build() {
    let dir = tempfile::tempdir().unwrap();
    let model = sentence_transformers(dir.path());
    let ok = build(&model, &dir.path().join("ok"), &[]);
    assert!(ok.status.success(), "{}", stderr(&ok));
    assert!(stderr(&ok).contains("sentence-embedding"), "{}", stderr(&ok));
    for (file, with_task) in [("modules.json", false), ("1_Pooling/config.json", true)] {
        for (says, make) in not_regular() {
            let model = sentence_transformers(&dir.path().join(format!("{}-{says}", file.replace('/', "_"))));
            replace(&model.join(file), make);
            let out = dir.path().join("pkg");
            // The pooling config is read whether the task is named or not.
            let o = build(&model, &out, if with_task { &["--task", "sentence-embedding"] } else { &[] });
            let e = stderr(&o);
            assert_eq!(o.status.code(), Some(1), "{file} {says}: {e}");
            assert!(e.contains(file) && e.contains(says), "{file} {says}: {e}");
            assert!(!out.exists(), "{file} {says}: nothing is written");
        }
    }
}

/// generation_config.json is read as config.json: a FIFO or a link to /dev/zero fails the
/// build naming it (a FIFO hung it, /dev/zero was read without bound).
#[test]
fn a_generation_config_that_is_not_a_regular_file_fails_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    for (says, make) in not_regular().into_iter().take(2) {
        let model = dir.path().join(format!("m-{says}"));
        copy_fixture("tiny-llama", &model);
        replace(&model.join("generation_config.json"), make);
        let out = dir.path().join("pkg");
        let o = build(&model, &out, &[]);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{says}: {e}");
        assert!(e.contains("generation_config.json") && e.contains(says), "{says}: {e}");
        assert!(!out.exists());
    }
}

/// A tokenizer file that is there but broken (not JSON, JSON that is no tokenizer, a
/// tokenizer.model that is no SentencePiece model, a link to /dev/zero) is a warning naming
/// the file and what is wrong, recorded in the report; with --strict the build fails before
/// anything is written. (No warning was given, and --strict passed.)
#[test]
fn broken_tokenizer_files_warn_and_fail_under_strict() {
    let dir = tempfile::tempdir().unwrap();
    let cases: Vec<(&str, Option<&[u8]>, Make, &str)> = vec![
        ("tokenizer.json", Some(b"{not json"), |_| {}, "not valid JSON"),
        ("tokenizer.json", Some(br#"{"version": "1.0", "added_tokens": []}"#), |_| {}, "no `model` object"),
        ("tokenizer_config.json", Some(b"[1, 2]"), |_| {}, "not a JSON object"),
        ("tokenizer.model", Some(b"\x0a\x05ab"), |_| {}, "not a SentencePiece model"),
        ("tokenizer.json", None, |p| std::os::unix::fs::symlink("/dev/zero", p).unwrap(), "not a regular file"),
        ("special_tokens_map.json", None, |p| make_fifo(p), "FIFO"),
    ];
    for (i, (file, bytes, make, says)) in cases.into_iter().enumerate() {
        let model = dir.path().join(format!("m{i}"));
        copy_fixture("tiny-llama", &model);
        match bytes {
            Some(b) => std::fs::write(model.join(file), b).unwrap(),
            None => replace(&model.join(file), make),
        }
        let out = dir.path().join(format!("pkg{i}"));
        let o = build(&model, &out, &[]);
        let e = stderr(&o);
        assert!(o.status.success(), "{file}: {e}");
        let warning = e.lines().find(|l| l.starts_with("warning:") && l.contains(file)).unwrap_or_else(|| panic!("{file}: no warning: {e}"));
        assert!(warning.contains(says), "{file}: {warning}");
        let report: serde_json::Value = serde_json::from_slice(&std::fs::read(out.join("build_report.json")).unwrap()).unwrap();
        assert!(report["warnings"].as_array().unwrap().iter().any(|w| w.as_str().unwrap().contains(file)), "{report}");
        if file == "tokenizer.json" || file == "tokenizer_config.json" {
            assert_eq!(report["tokenizer"]["genai_loadable"], false, "{file}");
        }
        let strict = dir.path().join(format!("strict{i}"));
        let o = build(&model, &strict, &["--strict"]);
        assert_eq!(o.status.code(), Some(1), "{file}: {}", stderr(&o));
        assert!(stderr(&o).contains("--strict") && stderr(&o).contains(file), "{}", stderr(&o));
        assert!(!strict.exists());
    }
}

fn package(dir: &Path, name: &str) -> PathBuf {
    let out = dir.join(name);
    let o = build(&fixture("tiny-llama"), &out, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    out
}

/// inspect and diff on a package whose genai_config.json or build_report.json is a FIFO (they
/// hung), or a link to /dev/zero: an error naming the file. A model.onnx that is a FIFO is
/// "not a regular file" (it was "has no model.onnx").
#[test]
fn inspect_and_diff_name_package_files_that_are_not_regular_files() {
    let dir = tempfile::tempdir().unwrap();
    let good = package(dir.path(), "good");
    for file in ["genai_config.json", "build_report.json", "model.onnx"] {
        for (says, make) in not_regular().into_iter().take(2) {
            let pkg = package(dir.path(), "pkg");
            replace(&pkg.join(file), make);
            let o = run(&["inspect"], &[&pkg], None);
            assert_eq!(o.status.code(), Some(1), "inspect, {file} {says}: {}", stderr(&o));
            assert!(stderr(&o).contains(file) && stderr(&o).contains(says), "inspect, {file} {says}: {}", stderr(&o));
            assert!(!stderr(&o).contains("has no model.onnx"), "{}", stderr(&o));
            let o = run(&["diff"], &[&good, &pkg], None);
            assert_eq!(o.status.code(), Some(2), "diff, {file} {says}: {}", stderr(&o));
            assert!(stderr(&o).contains(file) && stderr(&o).contains(says), "diff, {file} {says}: {}", stderr(&o));
            std::fs::remove_dir_all(&pkg).unwrap();
        }
    }
}

/// Replaces every `from` in `path` by `to` (of the same length, so the protobuf stays valid).
fn rewrite(path: &Path, from: &str, to: &str) {
    assert_eq!(from.len(), to.len());
    let bytes = std::fs::read(path).unwrap();
    let mut out = Vec::new();
    let mut i = 0;
    let mut hits = 0;
    while i < bytes.len() {
        if bytes[i..].starts_with(from.as_bytes()) {
            out.extend_from_slice(to.as_bytes());
            i += from.len();
            hits += 1;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    assert!(hits > 0, "`{from}` not in {}", path.display());
    std::fs::write(path, out).unwrap();
}

/// inspect checks external data: a truncated model.onnx.data, a location with `..` and a
/// data file that is a link out of the package each make it exit non-zero naming the tensor
/// and the problem (each was reported as fine, the outside file read as the package's).
#[test]
fn inspect_refuses_external_data_that_is_truncated_or_outside_the_package() {
    let dir = tempfile::tempdir().unwrap();
    let check = |pkg: &Path, says: &str| {
        let o = run(&["inspect"], &[pkg], None);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{says}: {e}");
        assert!(e.contains("tensor `") && e.contains("external data") && e.contains(says), "{says}: {e}");
        let o = run(&["inspect", "--json"], &[pkg], None);
        assert_eq!(o.status.code(), Some(1), "--json, {says}: {}", stderr(&o));
    };

    let pkg = package(dir.path(), "truncated");
    let data = pkg.join("model.onnx.data");
    let len = std::fs::metadata(&data).unwrap().len();
    std::fs::OpenOptions::new().write(true).open(&data).unwrap().set_len(len / 2).unwrap();
    check(&pkg, "truncated");

    // The package's data moved beside it and the model pointed at it with `..`.
    let pkg = package(dir.path(), "dotdot");
    std::fs::rename(pkg.join("model.onnx.data"), dir.path().join("model.o.data")).unwrap();
    rewrite(&pkg.join("model.onnx"), "model.onnx.data", "../model.o.data");
    check(&pkg, "`..`");

    // The data file a link to a copy outside the package.
    let pkg = package(dir.path(), "linked");
    std::fs::rename(pkg.join("model.onnx.data"), dir.path().join("elsewhere.data")).unwrap();
    std::os::unix::fs::symlink(dir.path().join("elsewhere.data"), pkg.join("model.onnx.data")).unwrap();
    check(&pkg, "outside the model's folder");

    // Missing altogether.
    let pkg = package(dir.path(), "missing");
    std::fs::remove_file(pkg.join("model.onnx.data")).unwrap();
    check(&pkg, "does not exist");
}

fn dev_full() -> std::fs::File {
    std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap()
}

/// Output that cannot be written to stdout (`> /dev/full`) fails the command with a message
/// (inspect --json exited 0 with the document lost); a build's --diag-format json says its
/// package was written. A closed pipe is not such a failure (`closed_pipes_do_not_stop_a_build`
/// in cli.rs).
#[test]
fn stdout_write_errors_fail_the_command() {
    let dir = tempfile::tempdir().unwrap();
    let pkg = package(dir.path(), "pkg");
    for (args, code) in [(&["inspect", "--json"][..], 1), (&["inspect"][..], 1), (&["diff"][..], 2), (&["diff", "--json"][..], 2)] {
        let paths: Vec<&Path> = if args[0] == "diff" { vec![&pkg, &pkg] } else { vec![&pkg] };
        let o = run(args, &paths, Some(dev_full()));
        assert_eq!(o.status.code(), Some(code), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains("cannot write to standard output") && stderr(&o).contains("No space left"), "{args:?}: {}", stderr(&o));
    }
    for args in [&["--help"][..], &["--version"][..], &["inspect", "--help"][..]] {
        let o = run(args, &[], Some(dev_full()));
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains("cannot write to standard output"), "{args:?}: {}", stderr(&o));
    }
    let out = dir.path().join("json");
    let o = run(&["build", "--diag-format", "json", "--model"], &[&fixture("tiny-llama"), Path::new("--output"), &out], Some(dev_full()));
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("cannot write the --diag-format json document") && stderr(&o).contains("was written"), "{}", stderr(&o));
    assert!(out.join("model.onnx").is_file());
}

/// inspect's text folds repeated inputs and outputs (`past_key_values.{0..N}.key`); --json
/// keeps each one.
#[test]
fn inspect_folds_repeated_ports_in_text_only() {
    let dir = tempfile::tempdir().unwrap();
    let pkg = package(dir.path(), "pkg");
    let o = run(&["inspect"], &[&pkg], None);
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    for line in [
        "    past_key_values.{0..1}.key f32[batch_size, 2, past_sequence_length, 16]",
        "    past_key_values.{0..1}.value f32[batch_size, 2, past_sequence_length, 16]",
        "    present.{0..1}.key f32[batch_size, 2, total_sequence_length, 16]",
        "    input_ids i64[batch_size, sequence_length]",
    ] {
        assert!(text.lines().any(|l| l == line), "no line `{line}`:\n{text}");
    }
    assert!(!text.contains("past_key_values.0.key"), "{text}");
    let o = run(&["inspect", "--json"], &[&pkg], None);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let inputs: Vec<&str> = v["parts"][0]["inputs"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert!(inputs.contains(&"past_key_values.0.key") && inputs.contains(&"past_key_values.1.value"), "{inputs:?}");
}

/// A checkpoint with a SentencePiece tokenizer.model and no tokenizer.json: onnxruntime-genai
/// reads tokenizer.json only, so the build warns that it lacks it and says how to write one
/// (it was taken as loadable: no warning, `genai_loadable` true).
#[test]
fn a_sentencepiece_model_does_not_stand_in_for_tokenizer_json() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("m");
    copy_fixture("tiny-llama", &model);
    std::fs::remove_file(model.join("tokenizer.json")).unwrap();
    // pieces { piece: "a" } pieces { piece: "b" }, trainer_spec { model_type: UNIGRAM }
    std::fs::write(model.join("tokenizer.model"), [0x0a, 0x03, 0x0a, 0x01, b'a', 0x0a, 0x03, 0x0a, 0x01, b'b', 0x12, 0x02, 0x18, 0x01]).unwrap();
    let out = dir.path().join("pkg");
    let o = build(&model, &out, &[]);
    let e = stderr(&o);
    assert!(o.status.success(), "{e}");
    let warning = e.lines().find(|l| l.starts_with("warning:") && l.contains("lacks tokenizer.json")).unwrap_or_else(|| panic!("no warning: {e}"));
    assert!(warning.contains("not a SentencePiece tokenizer.model") && warning.contains("save_pretrained"), "{warning}");
    assert!(out.join("tokenizer.model").is_file(), "copied all the same");
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(out.join("build_report.json")).unwrap()).unwrap();
    assert_eq!(report["tokenizer"]["genai_loadable"], false);
}
