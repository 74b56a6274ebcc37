//! Checks of fragment definitions on their own, at the fragment's `file:line:col`: everything
//! that is wrong whichever rule uses it (unknown ops, unbound or unused captures, results no
//! line produces, lines not connected to the results, unknown fragments, recursion). A
//! fragment with an error is not inlined anywhere, so each problem is reported once.

use super::{Def, Occurrences};
use crate::ast::{AttrVal, FragmentItem, FragmentUse, Pos, Slot};
use crate::check::{check_expr, check_match_line, note_kind, Kind};
use crate::diag::Diagnostic;
use crate::vocab;
use std::collections::{BTreeMap, HashMap, HashSet};

/// Checks every definition; returns the problems and the names of fragments that must not be
/// inlined (they have problems, or use one that has).
pub(super) fn check_all(defs: &[Def]) -> (Vec<Diagnostic>, HashSet<String>) {
    let mut out = Vec::new();
    let mut bad: HashSet<String> = HashSet::new();
    let mut first: HashMap<&str, &Def> = HashMap::new();
    for d in defs {
        if let Some(earlier) = first.get(d.frag.name.as_str()) {
            out.push(Diagnostic::new(
                &d.file.path,
                d.frag.pos,
                format!("fragment `{}` is already defined at {}:{}:{}", d.frag.name, earlier.file.path, earlier.frag.pos.line, earlier.frag.pos.col),
                "give each fragment a unique name: rules of every file can use it",
            ));
            bad.insert(d.frag.name.clone());
        } else {
            first.insert(&d.frag.name, d);
        }
    }
    for d in defs {
        let before = out.len();
        check_one(d, &first, &mut out);
        if out.len() > before {
            bad.insert(d.frag.name.clone());
        }
    }
    for cycle in cycles(&first, &mut out) {
        bad.extend(cycle);
    }
    // A fragment that uses a bad one cannot be inlined either.
    loop {
        let more: Vec<String> = first
            .values()
            .filter(|d| !bad.contains(&d.frag.name) && uses(&d.frag.body).any(|u| bad.contains(&u.name) || !first.contains_key(u.name.as_str())))
            .map(|d| d.frag.name.clone())
            .collect();
        if more.is_empty() {
            break;
        }
        bad.extend(more);
    }
    (out, bad)
}

fn uses(body: &[FragmentItem]) -> impl Iterator<Item = &FragmentUse> {
    body.iter().filter_map(|i| match i {
        FragmentItem::Use(u) => Some(u),
        _ => None,
    })
}

/// Checks a use of fragment `u.name` against its definition: it exists, the argument and result
/// counts match, and it stands where its kind may (a fragment without results among the checks,
/// one with results in a match block). Shared by rules and fragments.
pub(crate) fn check_use(u: &FragmentUse, defs: &HashMap<&str, &Def>, err: &mut dyn FnMut(Pos, String, String)) {
    let Some(d) = defs.get(u.name.as_str()) else {
        let help = if vocab::ops_of(vocab::ONNX).is_some_and(|ops| ops.contains(&u.name.as_str())) {
            format!("an operator is written with its domain alias: `onnx.{}`", u.name)
        } else if vocab::ops_of(vocab::MICROSOFT).is_some_and(|ops| ops.contains(&u.name.as_str())) {
            format!("an operator is written with its domain alias: `ms.{}`", u.name)
        } else {
            let close: Vec<&str> = defs.keys().copied().filter(|k| k.contains(u.name.as_str()) || u.name.contains(*k)).collect();
            if close.is_empty() { format!("define it: `fragment {}(?a, ...) -> ?r {{ ... }}`", u.name) } else { format!("did you mean `{}`?", close.join("`, `")) }
        };
        err(u.pos, format!("unknown fragment `{}`", u.name), help);
        return;
    };
    let f = &d.frag;
    let names = |v: &[(String, Pos)]| v.iter().map(|(c, _)| format!("?{c}")).collect::<Vec<_>>().join(", ");
    if u.args.len() != f.params.len() {
        err(u.pos, format!("fragment `{}` takes {} argument(s) ({}), not {}", f.name, f.params.len(), names(&f.params), u.args.len()), format!("see its definition at {}:{}", d.file.path, f.pos.line));
    }
    if u.in_checks && !f.results.is_empty() {
        err(u.pos, format!("fragment `{}` matches nodes, so it cannot stand among the checks", f.name), format!("use it in the match block: `({}) = {}(...)`", names(&f.results), f.name));
    } else if !u.in_checks && f.results.is_empty() {
        err(u.pos, format!("fragment `{}` has no result, so it cannot stand for a node", f.name), format!("use it among the checks: `check {}(...)`", f.name));
    } else if !u.in_checks && u.outputs.len() != f.results.len() {
        err(u.pos, format!("fragment `{}` gives {} result(s) ({}), not {}", f.name, f.results.len(), names(&f.results), u.outputs.len()), "name one capture (or `_`) per result".to_string());
    }
    for s in u.outputs.iter().filter(|s| matches!(s, Slot::Absent(_) | Slot::List(..))) {
        err(s.pos(), format!("a result of fragment `{}` is a capture or `_`", f.name), "`-` and `..?xs` are not results".to_string());
    }
    for s in u.args.iter().filter(|s| s.is_list()) {
        err(s.pos(), format!("list capture as an argument of fragment `{}`", f.name), "pass a capture, `_` or `-`".to_string());
    }
}

fn check_one(d: &Def, defs: &HashMap<&str, &Def>, out: &mut Vec<Diagnostic>) {
    let f = &d.frag;
    let path = d.file.path.as_str();
    let mut errs: Vec<(Pos, String, String)> = Vec::new();
    let mut err = |p: Pos, m: String, h: String| errs.push((p, m, h));

    let mut interface: HashSet<&str> = HashSet::new();
    for (c, p) in f.params.iter().chain(&f.results) {
        if !interface.insert(c) {
            err(*p, format!("`?{c}` is named twice among fragment `{}`'s parameters and results", f.name), "name each parameter and result once".into());
        }
    }
    let occ = Occurrences::of(f);
    let mut kinds: BTreeMap<&str, (Pos, Kind)> = BTreeMap::new();
    let mut check_ids: HashMap<&str, Pos> = HashMap::new();
    let mut lets_so_far: HashSet<&str> = HashSet::new();
    let all_lets: HashSet<&str> = f.body.iter().filter_map(|i| if let FragmentItem::Let(l) = i { Some(l.name.as_str()) } else { None }).collect();
    let bound_by_lines = |c: &str| interface.contains(c) || occ.in_lines(c);
    for item in &f.body {
        match item {
            FragmentItem::Line(m) => {
                let mut e2 = |p: Pos, m: String, h: &str| err(p, m, h.to_string());
                check_match_line(&d.file, m, &mut e2);
                for s in m.outputs.iter().chain(&m.args) {
                    if let Some(c) = s.capture() {
                        note_kind(c, s.pos(), if s.is_list() { Kind::List } else { Kind::Value }, &mut kinds, &mut e2);
                    }
                }
                for a in &m.attrs {
                    if let AttrVal::Capture(c, p) = &a.value {
                        note_kind(c, *p, Kind::Attr, &mut kinds, &mut e2);
                    }
                }
            }
            FragmentItem::Use(u) => check_use(u, defs, &mut err),
            FragmentItem::Let(l) => {
                let mut e2 = |p: Pos, m: String, h: &str| err(p, m, h.to_string());
                check_expr(&l.expr, &mut e2);
                l.expr.captures(&mut |c, p| {
                    if !bound_by_lines(c) && !lets_so_far.contains(c) {
                        err(p, format!("capture `?{c}` is not bound before this `let` in fragment `{}`", f.name), "bind it in one of the fragment's lines or an earlier `let`, or make it a parameter".into());
                    }
                });
                if occ.in_lines(&l.name) || lets_so_far.contains(l.name.as_str()) {
                    err(l.pos, format!("capture `?{}` is bound twice in fragment `{}`", l.name, f.name), "give the `let` a fresh name".into());
                }
                lets_so_far.insert(&l.name);
            }
            FragmentItem::Check(c) => {
                if let Some(first) = check_ids.get(c.id.as_str()) {
                    err(c.pos, format!("duplicate check id `{}` in fragment `{}` (first at {}:{})", c.id, f.name, first.line, first.col), "give each check its own id: reports count failures by check id".into());
                } else {
                    check_ids.insert(&c.id, c.pos);
                }
                let mut e2 = |p: Pos, m: String, h: &str| err(p, m, h.to_string());
                check_expr(&c.expr, &mut e2);
                for e in std::iter::once(&c.expr).chain(c.message.iter().filter_map(|m| match m {
                    crate::ast::MsgPart::Expr(e) => Some(e),
                    crate::ast::MsgPart::Text(_) => None,
                })) {
                    e.captures(&mut |cap, p| {
                        if !bound_by_lines(cap) && !all_lets.contains(cap) {
                            err(p, format!("capture `?{cap}` is not bound in fragment `{}`", f.name), "bind it in one of the fragment's lines, or make it a parameter".into());
                        }
                    });
                }
            }
        }
    }
    // Results come from the fragment's lines; every line leads to a result.
    for (r, p) in &f.results {
        if !occ.is_output(r) {
            err(*p, format!("result `?{r}` of fragment `{}` is not the output of any of its lines", f.name), "name it on the left of a match line (or of a use) in the fragment".into());
        }
    }
    connected(f, &mut err);
    // Every capture is used: parameters somewhere, the fragment's own ones twice.
    for (c, p) in &f.params {
        if occ.count(c) == 0 {
            err(*p, format!("parameter `?{c}` of fragment `{}` is not used", f.name), "drop it, or use it in a line or a check".into());
        }
    }
    for (c, p) in occ.firsts() {
        if !interface.contains(c) && occ.count(c) <= 1 {
            err(p, format!("capture `?{c}` is bound but never used in fragment `{}`", f.name), "write `_` instead, or use it in a check".into());
        }
    }
    out.extend(errs.into_iter().map(|(p, m, h)| Diagnostic::new(path, p, m, h)));
}

/// Every match line (and match-block use) must lead to a result by following operands back to
/// their producers; a fragment without results holds no lines at all.
fn connected(f: &crate::ast::Fragment, err: &mut dyn FnMut(Pos, String, String)) {
    let nodes: Vec<(Pos, String, Vec<&str>, Vec<&str>)> = f
        .body
        .iter()
        .filter_map(|i| match i {
            FragmentItem::Line(m) => Some((m.pos, format!("this `{}`", m.op.name), m.outputs.iter().filter_map(Slot::capture).collect(), m.args.iter().filter_map(Slot::capture).collect())),
            FragmentItem::Use(u) if !u.in_checks => Some((u.pos, format!("this use of `{}`", u.name), u.outputs.iter().filter_map(Slot::capture).collect(), u.args.iter().filter_map(Slot::capture).collect())),
            _ => None,
        })
        .collect();
    if f.results.is_empty() {
        for (p, what, ..) in &nodes {
            err(*p, format!("{what} matches a node, but fragment `{}` has no result to connect it to", f.name), format!("name the value it produces: `fragment {}(...) -> ?r`", f.name));
        }
        return;
    }
    let mut values: Vec<&str> = f.results.iter().map(|(r, _)| r.as_str()).collect();
    let mut known: HashSet<&str> = HashSet::new();
    let mut reached: HashSet<usize> = HashSet::new();
    while let Some(v) = values.pop() {
        if !known.insert(v) {
            continue;
        }
        for (i, (_, _, outs, args)) in nodes.iter().enumerate() {
            if outs.contains(&v) && reached.insert(i) {
                values.extend(args.iter().chain(outs.iter()).copied());
            }
        }
    }
    for (i, (p, what, ..)) in nodes.iter().enumerate() {
        if !reached.contains(&i) {
            err(*p, format!("{what} is not connected to the results of fragment `{}`", f.name), "its output must be an operand of a line that leads to a result".into());
        }
    }
}

/// Fragments that use themselves, directly or through others: each cycle once, reported at the
/// use that closes it. Returns the names on each cycle.
fn cycles(defs: &HashMap<&str, &Def>, out: &mut Vec<Diagnostic>) -> Vec<Vec<String>> {
    let mut names: Vec<&str> = defs.keys().copied().collect();
    names.sort();
    let mut found = Vec::new();
    let mut done: HashSet<&str> = HashSet::new();
    for start in names {
        let mut stack: Vec<&str> = Vec::new();
        walk(start, defs, &mut stack, &mut done, &mut found, out);
    }
    found
}

fn walk<'a>(n: &'a str, defs: &HashMap<&str, &'a Def>, stack: &mut Vec<&'a str>, done: &mut HashSet<&'a str>, found: &mut Vec<Vec<String>>, out: &mut Vec<Diagnostic>) {
    if done.contains(n) {
        return;
    }
    let Some(d) = defs.get(n) else { return };
    stack.push(n);
    for u in uses(&d.frag.body) {
        if let Some(k) = stack.iter().position(|s| *s == u.name) {
            let mut cycle: Vec<&str> = stack[k..].to_vec();
            cycle.push(&u.name);
            out.push(Diagnostic::new(
                &d.file.path,
                u.pos,
                format!("fragment `{}` uses itself: {}", u.name, cycle.join(" -> ")),
                "a fragment is inlined where it is used, so it cannot use itself, directly or through others",
            ));
            found.push(stack[k..].iter().map(|s| s.to_string()).collect());
        } else {
            walk(&u.name, defs, stack, done, found, out);
        }
    }
    stack.pop();
    done.insert(n);
}
