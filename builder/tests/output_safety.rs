//! What a build may do to the folder it writes (docs/pipeline.md, "Output guarantees"), through
//! the real binary: `--force` replaces only an earlier package and never a checkpoint's file;
//! an interrupted build leaves nothing; stale staging folders are swept; two builds of one
//! output never both succeed. Each test lists the output's parent afterwards.

mod common;

use common::*;
use std::path::Path;

/// The size of the checkpoint whose build a test catches mid-write: the f32 package is twice
/// this on disk. Small, since [`stop_in_write`] holds the build still while the test acts;
/// CI once ran out of disk when these builds wrote 0.6 to 1.2 GB each.
const CHECKPOINT_MIB: usize = 64;

/// The first case: `--output . --force` inside a folder of the user's.
#[test]
fn force_refuses_a_folder_that_is_not_a_package() {
    let root = tempfile::tempdir().unwrap();
    let work = root.path().join("w");
    std::fs::create_dir(&work).unwrap();
    std::fs::write(work.join("keep"), b"x").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tailor"))
        .current_dir(&work)
        .args(["build", "--output", ".", "--force", "--model"])
        .arg(fixture("tiny-llama"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("not a tailor package") && stderr.contains("--force only replaces"), "{stderr}");
    assert_eq!(listing(&work), ["keep"]);
    assert_eq!(std::fs::read(work.join("keep")).unwrap(), b"x");
    assert_eq!(listing(root.path()), ["w"], "no staging or lock left beside it");
}

/// An earlier package is replaced with --force, but not once a foreign file is put in it.
#[test]
fn force_replaces_only_an_earlier_package() {
    let root = tempfile::tempdir().unwrap();
    let out = root.path().join("pkg");
    assert!(tailor(&fixture("tiny-llama"), &out, &[]).status.success());
    let first = std::fs::read(out.join("model.onnx")).unwrap();
    std::fs::write(out.join("notes.txt"), b"mine").unwrap();
    let r = tailor(&fixture("tiny-qwen2"), &out, &["--force"]);
    assert_eq!(r.status.code(), Some(1), "{}", r.stderr);
    assert!(r.stderr.contains("notes.txt") && r.stderr.contains("did not write"), "{}", r.stderr);
    assert_eq!(std::fs::read(out.join("model.onnx")).unwrap(), first, "untouched");
    std::fs::remove_file(out.join("notes.txt")).unwrap();
    let r = tailor(&fixture("tiny-qwen2"), &out, &["--force"]);
    assert!(r.status.success(), "{}", r.stderr);
    assert_ne!(std::fs::read(out.join("model.onnx")).unwrap(), first, "replaced");
    assert_eq!(listing(root.path()), ["pkg"]);
    // A subfolder is foreign too.
    std::fs::create_dir(out.join("sub")).unwrap();
    assert_eq!(tailor(&fixture("tiny-llama"), &out, &["--force"]).status.code(), Some(1));
    assert!(out.join("sub").is_dir());
}

/// The Hugging Face layout: the checkpoint's weights are links into another folder. Given that
/// folder as the output, --force refuses and the link still resolves.
#[test]
fn force_never_deletes_what_the_checkpoint_links_to() {
    let root = tempfile::tempdir().unwrap();
    let weights = root.path().join("weights");
    copy_fixture("tiny-llama", &weights);
    let model = root.path().join("model");
    std::fs::create_dir(&model).unwrap();
    for name in listing(&weights) {
        std::os::unix::fs::symlink(Path::new("../weights").join(&name), model.join(&name)).unwrap();
    }
    let r = tailor(&model, &weights, &["--force"]);
    assert_eq!(r.status.code(), Some(1), "{}", r.stderr);
    assert!(std::fs::metadata(model.join("model.safetensors")).is_ok(), "the link still resolves");
    assert_eq!(listing(root.path()), ["model", "weights"]);
}

/// A package folder holding one of the checkpoint's own files (hard link, or the target of
/// the checkpoint's symbolic link) is never replaced.
#[test]
fn force_never_replaces_a_package_holding_a_checkpoint_file() {
    for how in ["hard link", "symlink target"] {
        let root = tempfile::tempdir().unwrap();
        let model = root.path().join("model");
        copy_fixture("tiny-llama", &model);
        let out = root.path().join("pkg");
        assert!(tailor(&model, &out, &[]).status.success());
        let (pkg_file, ckpt_file) = (out.join("tokenizer.json"), model.join("tokenizer.json"));
        std::fs::remove_file(&pkg_file).unwrap();
        if how == "hard link" {
            std::fs::hard_link(&ckpt_file, &pkg_file).unwrap();
        } else {
            std::fs::rename(&ckpt_file, &pkg_file).unwrap();
            std::os::unix::fs::symlink(&pkg_file, &ckpt_file).unwrap();
        }
        let before = std::fs::read(&ckpt_file).unwrap();
        let r = tailor(&model, &out, &["--force"]);
        assert_eq!(r.status.code(), Some(1), "{how}: {}", r.stderr);
        assert!(r.stderr.contains("the checkpoint's file"), "{how}: {}", r.stderr);
        assert_eq!(std::fs::read(&ckpt_file).unwrap(), before, "{how}: the checkpoint's file is intact");
        assert_eq!(listing(root.path()), ["model", "pkg"], "{how}");
    }
}

/// SIGINT, SIGTERM and SIGHUP in the middle of the write: exit 128 + signal, no staging
/// folder, no lock, no output; an existing package given with --force is untouched.
#[test]
fn interrupted_builds_leave_nothing() {
    let root = tempfile::tempdir().unwrap();
    let model = big_checkpoint(root.path(), CHECKPOINT_MIB);
    let out_dir = root.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    let previous = out_dir.join("previous");
    assert!(tailor(&fixture("tiny-llama"), &previous, &[]).status.success());
    let before = snapshot(&previous);
    for (sig, name, target, extra) in [
        (libc::SIGINT, "SIGINT", "pkg", &[][..]),
        (libc::SIGTERM, "SIGTERM", "previous", &["--force"][..]),
        (libc::SIGHUP, "SIGHUP", "pkg", &[][..]),
    ] {
        let child = spawn_tailor(&model, &out_dir.join(target), extra);
        stop_in_write(&child, &out_dir, target, "model.onnx.data");
        signal(&child, sig);
        resume(&child);
        let (code, stderr) = finish(child);
        assert_eq!(code, Some(128 + sig), "{name}: {stderr}");
        assert!(stderr.contains(&format!("interrupted by {name}")) && stderr.contains("removed the unfinished"), "{name}: {stderr}");
        assert_eq!(listing(&out_dir), ["previous"], "{name}: nothing but the earlier package is left");
        assert_eq!(snapshot(&previous), before, "{name}: the earlier package is untouched");
    }
}

/// What a killed build (SIGKILL: no cleanup possible) leaves is swept by the next build of
/// that output. Folders with a staging name that are not clearly a killed build's (a user's
/// folder, one an older version may still be writing, one a live build holds) are left in
/// place and reported.
#[test]
fn stale_staging_is_swept_by_the_next_build() {
    let root = tempfile::tempdir().unwrap();
    let model = big_checkpoint(root.path(), CHECKPOINT_MIB);
    let out_dir = root.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    let child = spawn_tailor(&model, &out_dir.join("pkg"), &[]);
    let staging = stop_in_write(&child, &out_dir, "pkg", "model.onnx.data");
    signal(&child, libc::SIGKILL);
    finish(child);
    assert!(staging.is_dir(), "SIGKILL leaves the staging folder");
    // A user's folder that happens to have a staging name.
    let users = out_dir.join(".pkg.tailor-notes");
    std::fs::create_dir(&users).unwrap();
    std::fs::write(users.join("a.txt"), b"mine").unwrap();
    // An unmarked folder of package files written just now: maybe an older version's build.
    let recent = out_dir.join(".pkg.tailor-Ab12Cd");
    std::fs::create_dir(&recent).unwrap();
    std::fs::write(recent.join("model.onnx"), b"being written").unwrap();
    // An older version's aside folder holding user data.
    let aside = out_dir.join(".pkg.old");
    std::fs::create_dir(&aside).unwrap();
    std::fs::write(aside.join("build_report.json"), b"{}").unwrap();
    std::fs::write(aside.join("thesis.tex"), b"mine").unwrap();
    // A staging folder some live build holds.
    let live = out_dir.join(".pkg.tailor-live");
    std::fs::create_dir(&live).unwrap();
    std::fs::write(live.join(".tailor-staging"), b"").unwrap();
    let held = std::fs::File::open(&live).unwrap();
    held.try_lock().unwrap();
    // Folders count as stale only when older than the build that finds them.
    std::thread::sleep(std::time::Duration::from_millis(50));
    let r = tailor(&fixture("tiny-llama"), &out_dir.join("pkg"), &[]);
    assert!(r.status.success(), "{}", r.stderr);
    assert!(r.stderr.contains("left by an interrupted build"), "reported: {}", r.stderr);
    assert!(!staging.exists(), "the killed build's staging folder is removed");
    assert!(r.stderr.contains(".pkg.tailor-notes") && r.stderr.contains("left in place"), "{}", r.stderr);
    assert_eq!(listing(&out_dir), [".pkg.old", ".pkg.tailor-Ab12Cd", ".pkg.tailor-live", ".pkg.tailor-notes", "pkg"]);
    assert_eq!(std::fs::read(users.join("a.txt")).unwrap(), b"mine");
    assert_eq!(std::fs::read(aside.join("thesis.tex")).unwrap(), b"mine");
    drop(held);
}

/// A folder that changes while the build runs (a file added to the earlier package, another
/// folder moved in its place) is never removed: the commit checks it again, swaps back and
/// fails with the reason.
#[test]
fn an_output_that_changes_during_the_build_is_kept() {
    let root = tempfile::tempdir().unwrap();
    let model = big_checkpoint(root.path(), CHECKPOINT_MIB);
    let out_dir = root.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    let out = out_dir.join("pkg");
    assert!(tailor(&fixture("tiny-llama"), &out, &[]).status.success());
    for how in ["file added", "folder replaced"] {
        let child = spawn_tailor(&model, &out, &["--force"]);
        stop_in_write(&child, &out_dir, "pkg", "model.onnx.data");
        if how == "file added" {
            std::fs::write(out.join("notes.txt"), b"precious").unwrap();
        } else {
            std::fs::rename(&out, out_dir.join("moved")).unwrap();
            std::fs::create_dir(&out).unwrap();
            std::fs::write(out.join("thesis.tex"), b"precious").unwrap();
        }
        resume(&child);
        let (code, stderr) = finish(child);
        assert_eq!(code, Some(1), "{how}: {stderr}");
        assert!(stderr.contains("changed while this build ran"), "{how}: {stderr}");
        let kept = if how == "file added" { out.join("notes.txt") } else { out.join("thesis.tex") };
        assert_eq!(std::fs::read(&kept).unwrap(), b"precious", "{how}");
        if how == "file added" {
            std::fs::remove_file(&kept).unwrap(); // a package again, for the next case
        }
    }
    assert_eq!(listing(&out_dir), ["moved", "pkg"], "no staging folder left");
}

/// `..` after a missing part of the path is resolved before the checks, and a refused path
/// creates nothing.
#[test]
fn dot_dot_cannot_reach_into_the_checkpoint() {
    let root = tempfile::tempdir().unwrap();
    let model = root.path().join("model");
    copy_fixture("tiny-llama", &model);
    let before = listing(&model);
    for out in [root.path().join("ghost/../model/out"), model.join("a/b/out")] {
        let r = tailor(&model, &out, &[]);
        assert_eq!(r.status.code(), Some(1), "{}: {}", out.display(), r.stderr);
        assert!(r.stderr.contains("inside the model folder"), "{}", r.stderr);
        assert_eq!(listing(&model), before, "nothing was created in the checkpoint");
    }
    assert_eq!(listing(root.path()), ["model"]);
}

/// A GGUF checkpoint is one file: the package may go beside it (`--model x.gguf --output
/// x-onnx` in the same folder), but never replace the file, its folder or a folder holding it.
#[test]
fn a_gguf_files_package_may_sit_beside_it() {
    let root = tempfile::tempdir().unwrap();
    let models = root.path().join("models");
    std::fs::create_dir(&models).unwrap();
    let gguf = models.join("tiny-gemma.Q.gguf");
    let committed = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/python/data/gguf-gemma/tiny-gemma.Q.gguf");
    std::fs::copy(committed, &gguf).unwrap();
    let before = std::fs::read(&gguf).unwrap();

    let beside = models.join("tiny-gemma-onnx");
    let r = tailor(&gguf, &beside, &[]);
    assert!(r.status.success(), "{}", r.stderr);
    assert_eq!(listing(&models), ["tiny-gemma-onnx", "tiny-gemma.Q.gguf"]);
    assert!(beside.join("model.onnx").is_file());

    for (out, why) in [
        (gguf.clone(), "is the model file itself"),
        (models.clone(), "is the folder the model file sits in"),
        (root.path().to_path_buf(), "contains the model file"),
    ] {
        let r = tailor(&gguf, &out, &["--force"]);
        assert_eq!(r.status.code(), Some(1), "{}: {}", out.display(), r.stderr);
        assert!(r.stderr.contains(why), "{}: {}", out.display(), r.stderr);
    }
    assert_eq!(std::fs::read(&gguf).unwrap(), before, "the checkpoint is untouched");
    assert_eq!(listing(&models), ["tiny-gemma-onnx", "tiny-gemma.Q.gguf"]);
}

/// Two builds of one new output at once: exactly one wins, the other fails naming the lock,
/// and only the winner's package is left.
#[test]
fn concurrent_builds_of_one_output() {
    let root = tempfile::tempdir().unwrap();
    let model = big_checkpoint(root.path(), CHECKPOINT_MIB);
    let out_dir = root.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    let out = out_dir.join("pkg");
    let first = spawn_tailor(&model, &out, &[]);
    stop_in_write(&first, &out_dir, "pkg", "model.onnx.data");
    let second = tailor(&fixture("tiny-llama"), &out, &[]);
    assert_eq!(second.status.code(), Some(1), "{}", second.stderr);
    assert!(second.stderr.contains("another tailor build"), "{}", second.stderr);
    resume(&first);
    let (code, stderr) = finish(first);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(listing(&out_dir), ["pkg"]);
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(out.join("build_report.json")).unwrap()).unwrap();
    assert_eq!(report["model_type"], "llama");
    assert!(std::fs::metadata(out.join("model.onnx.data")).unwrap().len() > (CHECKPOINT_MIB as u64) << 20, "the first build's package");
    // After it, a plain second build is refused (no silent replacement), with --force it replaces.
    let again = tailor(&fixture("tiny-llama"), &out, &[]);
    assert_eq!(again.status.code(), Some(1));
    assert!(again.stderr.contains("earlier package") && again.stderr.contains("--force"), "{}", again.stderr);
    assert!(tailor(&fixture("tiny-llama"), &out, &["--force"]).status.success());
    assert_eq!(listing(&out_dir), ["pkg"]);
}

/// `--output` naming the current folder (`.`, `./`, `../NAME`, its absolute path) is refused
/// before anything is written, whether the folder is empty or holds an earlier package given
/// with --force: the commit's rename would move the folder away from under the calling shell
/// (an empty current folder was replaced, leaving the shell in a deleted folder).
#[test]
fn the_current_folder_is_never_the_output() {
    use std::os::unix::fs::MetadataExt;
    let root = tempfile::tempdir().unwrap();
    let work = root.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let inode = std::fs::metadata(&work).unwrap().ino();
    let absolute = work.display().to_string();
    let run = |output: &str, extra: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_tailor"))
            .current_dir(&work)
            .args(["build", "--output", output, "--model"])
            .arg(fixture("tiny-llama"))
            .args(extra)
            .output()
            .unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    for output in [".", "./", "../work", absolute.as_str(), "../work/./"] {
        let (code, stderr) = run(output, &[]);
        assert_eq!(code, Some(1), "--output {output}: {stderr}");
        assert!(stderr.contains("is the current folder") && stderr.contains("--output ./package"), "--output {output}: {stderr}");
        assert_eq!(std::fs::metadata(&work).unwrap().ino(), inode, "--output {output}: the folder is the same");
        assert!(listing(&work).is_empty(), "--output {output}: nothing written into it");
        assert_eq!(listing(root.path()), ["work"], "--output {output}: nothing beside it");
    }
    // An earlier package in the current folder, with --force: refused too, left as it is.
    let r = tailor(&fixture("tiny-llama"), &work.join("pkg"), &[]);
    assert!(r.status.success(), "{}", r.stderr);
    for name in listing(&work.join("pkg")) {
        std::fs::rename(work.join("pkg").join(&name), work.join(&name)).unwrap();
    }
    std::fs::remove_dir(work.join("pkg")).unwrap();
    let before = snapshot(&work);
    let (code, stderr) = run(".", &["--force"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("is the current folder"), "{stderr}");
    assert_eq!(snapshot(&work), before);
    assert_eq!(std::fs::metadata(&work).unwrap().ino(), inode);
}

/// Makes a file impossible to remove for this process (undone by `allow_removal`): immutable
/// (`FS_IMMUTABLE_FL`) when running as root, whom permissions do not stop; else its folder
/// read-only.
fn forbid_removal(file: &Path) {
    use std::os::unix::fs::PermissionsExt;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        set_immutable(file, true);
    } else {
        std::fs::set_permissions(file.parent().unwrap(), std::fs::Permissions::from_mode(0o555)).unwrap();
    }
}

fn allow_removal(file: &Path) {
    use std::os::unix::fs::PermissionsExt;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        set_immutable(file, false);
    } else {
        std::fs::set_permissions(file.parent().unwrap(), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

/// Sets or clears the immutable flag of `file` (what `chattr +i` does).
fn set_immutable(file: &Path, on: bool) {
    const FS_IOC_GETFLAGS: libc::c_ulong = 0x8008_6601;
    const FS_IOC_SETFLAGS: libc::c_ulong = 0x4008_6602;
    const FS_IMMUTABLE_FL: libc::c_long = 0x10;
    let f = std::fs::File::open(file).unwrap();
    let fd = std::os::fd::AsRawFd::as_raw_fd(&f);
    let mut flags: libc::c_long = 0;
    // SAFETY: the ioctls read and write one long through a valid pointer on an open file.
    unsafe {
        assert_eq!(libc::ioctl(fd, FS_IOC_GETFLAGS, &mut flags), 0, "FS_IOC_GETFLAGS: {}", std::io::Error::last_os_error());
        flags = if on { flags | FS_IMMUTABLE_FL } else { flags & !FS_IMMUTABLE_FL };
        assert_eq!(libc::ioctl(fd, FS_IOC_SETFLAGS, &flags), 0, "FS_IOC_SETFLAGS (the test needs a filesystem with the immutable flag): {}", std::io::Error::last_os_error());
    }
}

/// `--force` over an earlier package that cannot be fully removed: the new package is in
/// place and the build succeeds, with a warning naming the folder where the rest of the old
/// one is left and saying to remove it (it was silent, the whole old package left in a
/// hidden folder).
#[test]
fn force_reports_what_it_could_not_remove() {
    let root = tempfile::tempdir().unwrap();
    let out = root.path().join("pkg");
    assert!(tailor(&fixture("tiny-llama"), &out, &[]).status.success());
    let stuck = out.join("tokenizer.json");
    forbid_removal(&stuck);
    let r = tailor(&fixture("tiny-qwen2"), &out, &["--force"]);
    // Undo first, so that a failed assertion does not leave an unremovable folder.
    let left: Vec<String> = listing(root.path()).into_iter().filter(|n| n.starts_with(".pkg.tailor-")).collect();
    for name in &left {
        let file = root.path().join(name).join("tokenizer.json");
        if file.exists() {
            allow_removal(&file);
        }
    }
    if left.is_empty() {
        allow_removal(&stuck);
    }
    assert!(r.status.success(), "{}", r.stderr);
    assert_eq!(left.len(), 1, "the rest of the old package is in one folder: {left:?}");
    let warning = r.stderr.lines().find(|l| l.starts_with("warning:") && l.contains(&left[0])).unwrap_or_else(|| panic!("no warning naming {}: {}", left[0], r.stderr));
    assert!(warning.contains("could not be fully removed") && warning.contains("remove that folder yourself"), "{warning}");
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(out.join("build_report.json")).unwrap()).unwrap();
    assert_eq!(report["model_type"], "qwen2", "the new package is in place");
}
