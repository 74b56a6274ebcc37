//! `ruleck [--rules DIR] [--ep-sets DIR] [--format text|json]`: lints the `.rule` files and
//! EP tables together (docs/ruleck.md). Exit status: 0 clean or warnings only, 1 errors found,
//! 2 bad arguments or unreadable input.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use rule_dsl::lint::{rules_page, run, Inputs};

const USAGE: &str = "usage: ruleck [--rules DIR] [--ep-sets DIR] [--format text|json] [--emit-docs]";

/// The workspace root: the nearest ancestor of the current directory with `rules/rules` and
/// `ep-sets/tables`, else the one this binary was built from.
fn workspace_root(cwd: &Path) -> PathBuf {
    cwd.ancestors()
        .find(|d| d.join("rules/rules").is_dir() && d.join("ep-sets/tables").is_dir())
        .map(Path::to_path_buf)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".."))
}

fn main() -> ExitCode {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let root = workspace_root(&cwd);
    let (mut rules, mut ep_sets, mut json, mut docs) = (root.join("rules"), root.join("ep-sets"), false, false);
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = |name: &str| args.next().ok_or_else(|| format!("{name} needs a value"));
        let r = match a.as_str() {
            "--rules" => value("--rules").map(|v| rules = cwd.join(v)),
            "--ep-sets" => value("--ep-sets").map(|v| ep_sets = cwd.join(v)),
            "--format" => value("--format").and_then(|v| match v.as_str() {
                "json" | "text" => {
                    json = v == "json";
                    Ok(())
                }
                other => Err(format!("unknown format `{other}`")),
            }),
            "--emit-docs" => {
                docs = true;
                Ok(())
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            other => Err(format!("unknown argument `{other}`")),
        };
        if let Err(e) = r {
            eprintln!("ruleck: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    }
    // Names are shown relative to the current directory, or to the workspace root when the
    // inputs are inside it but not below the current directory.
    let inside = |d: &Path| rules.starts_with(d) && ep_sets.starts_with(d);
    let base = if inside(&cwd) || !inside(&root) { cwd.clone() } else { root };
    let inputs = Inputs { rules, ep_sets, base };
    if docs {
        // The generated docs/rules.md on stdout; findings (if any) on stderr.
        return match rules_page(&inputs) {
            Ok((_, Some(page))) => {
                print!("{page}");
                ExitCode::SUCCESS
            }
            Ok((report, None)) => {
                eprint!("{}", report.text());
                eprintln!("ruleck: no page: the rules or tables have errors");
                ExitCode::from(1)
            }
            Err(e) => {
                eprintln!("ruleck: {e}");
                ExitCode::from(2)
            }
        };
    }
    match run(&inputs) {
        Ok(report) => {
            if json {
                println!("{}", report.json());
            } else {
                print!("{}", report.text());
            }
            if report.errors() > 0 { ExitCode::from(1) } else { ExitCode::SUCCESS }
        }
        Err(e) => {
            eprintln!("ruleck: {e}");
            ExitCode::from(2)
        }
    }
}
