//! Emit fragments: named, parameterised emit lines (op, helper and `replace` lines) that rules
//! share the way they share pattern fragments. Like those they exist only at compile time:
//! every use is inlined where it stands in the emit block, in order, so the emitted nodes (and
//! their names) are those of the lines written out. A definition is checked on its own, at its
//! `file:line` ([`check_defs`]); a use where it stands ([`inline_rule`]), and the rule with its
//! inlined lines is then checked like any other (those lines take the use's position).

use crate::ast::*;
use crate::check::{check_dtype_attr, check_op, resolve};
use crate::diag::Diagnostic;
use crate::vocab;
use std::collections::{HashMap, HashSet};

/// An emit fragment with the file it was written in (its `use` lines resolve its ops).
pub(crate) struct EmitDef {
    pub file: RuleFile,
    pub frag: EmitFragment,
}

/// What a fragment's capture stands for at one use.
#[derive(Clone)]
enum Bound {
    Slot(Slot),
    Lit(Literal),
}

/// How a capture appears in a fragment's body.
#[derive(Default)]
struct Occ {
    /// Operand of an op or helper line, or the replacement of a `replace ?old with ?new`.
    operand: usize,
    /// Output of a line.
    output: usize,
    /// Attribute value.
    attr: usize,
    /// Replaced (`replace ?old ...`).
    replaced: usize,
}

/// Where each capture of `f` appears. A `replace (?a) with Op(..)`'s hidden `?a#with` counts as
/// `?a` replaced (the parser's own name for the node's output).
fn occurrences(f: &EmitFragment) -> HashMap<String, Occ> {
    let mut o: HashMap<String, Occ> = HashMap::new();
    let hidden = |c: &str| c.ends_with("#with");
    for e in &f.emits {
        for s in e.args() {
            if let Some(c) = s.capture() {
                o.entry(c.to_string()).or_default().operand += 1;
            }
        }
        for s in e.outputs() {
            if let Some(c) = s.capture().filter(|c| !hidden(c)) {
                o.entry(c.to_string()).or_default().output += 1;
            }
        }
        if let EmitLine::Op { attrs, .. } = e {
            for (_, v, _) in attrs {
                if let AttrVal::Capture(c, _) = v {
                    o.entry(c.clone()).or_default().attr += 1;
                }
            }
        }
    }
    for r in &f.replaces {
        o.entry(r.old.0.clone()).or_default().replaced += 1;
        if !hidden(&r.new.0) {
            o.entry(r.new.0.clone()).or_default().operand += 1;
        }
    }
    o
}

/// Inlines the emit fragments each definition uses into it (so a definition is checked, and
/// later inlined, with all its lines). A use of an unknown fragment, a wrong arity or a cycle
/// is reported at the use, in the using fragment's file; that fragment is then bad.
pub(crate) fn flatten_all(defs: &mut [EmitDef], pattern: &HashSet<&str>) -> (Vec<Diagnostic>, HashSet<String>) {
    let mut out = Vec::new();
    let mut bad = HashSet::new();
    let originals: Vec<EmitDef> = defs.iter().map(|d| EmitDef { file: d.file.clone(), frag: d.frag.clone() }).collect();
    let by_name: HashMap<&str, &EmitDef> = originals.iter().rev().map(|d| (d.frag.name.as_str(), d)).collect();
    for d in defs.iter_mut() {
        let mut stack = vec![d.frag.name.clone()];
        let mut errs = Vec::new();
        flatten(&mut d.frag, &d.file.path, &by_name, pattern, &mut stack, &mut errs);
        if !errs.is_empty() {
            bad.insert(d.frag.name.clone());
            out.extend(errs);
        }
    }
    (out, bad)
}

/// Inlines `f`'s uses (recursively, `stack` the fragments being inlined, against cycles).
fn flatten(f: &mut EmitFragment, path: &str, defs: &HashMap<&str, &EmitDef>, pattern: &HashSet<&str>, stack: &mut Vec<String>, errs: &mut Vec<Diagnostic>) {
    let uses = std::mem::take(&mut f.uses);
    let before = errs.len();
    for u in &uses {
        if stack.contains(&u.name) {
            errs.push(Diagnostic::new(path, u.pos, format!("emit fragment `{}` uses itself (through {})", u.name, stack.join(" -> ")), "a fragment cannot contain itself"));
            continue;
        }
        check_use(u, defs, pattern, &mut |p, m, h| errs.push(Diagnostic::new(path, p, m, h)));
    }
    if errs.len() > before {
        return;
    }
    for (n, u) in uses.iter().enumerate().rev() {
        let mut inner = defs[u.name.as_str()].frag.clone();
        stack.push(u.name.clone());
        flatten(&mut inner, path, defs, pattern, stack, errs);
        stack.pop();
        let d = EmitDef { file: defs[u.name.as_str()].file.clone(), frag: inner };
        let (emits, replaces) = expand(&d, u, n);
        f.emits.splice(u.emits_at..u.emits_at, emits);
        f.replaces.splice(u.replaces_at..u.replaces_at, replaces);
    }
}

/// Checks each definition on its own; returns the problems and the names of the fragments
/// that have some (their uses are not inlined, and not reported again).
pub(crate) fn check_defs(defs: &[EmitDef], pattern: &HashSet<&str>) -> (Vec<Diagnostic>, HashSet<String>) {
    let mut out = Vec::new();
    let mut bad = HashSet::new();
    let mut seen: HashMap<&str, (&str, Pos)> = HashMap::new();
    for d in defs {
        let f = &d.frag;
        let path = d.file.path.as_str();
        let before = out.len();
        let mut err = |p: Pos, m: String, h: &str| out.push(Diagnostic::new(path, p, m, h));
        if let Some((file, at)) = seen.get(f.name.as_str()) {
            err(f.pos, format!("emit fragment `{}` is already defined at {file}:{}", f.name, at.line), "give each fragment a unique name");
        } else {
            seen.insert(&f.name, (path, f.pos));
        }
        if pattern.contains(f.name.as_str()) {
            err(f.pos, format!("`{}` names a pattern fragment and an emit fragment", f.name), "give each fragment a unique name");
        }
        let occ = occurrences(f);
        let params: HashSet<&str> = f.params.iter().map(|(c, _)| c.as_str()).collect();
        let results: HashSet<&str> = f.results.iter().map(|(c, _)| c.as_str()).collect();
        for (c, p) in &f.params {
            match occ.get(c) {
                None => err(*p, format!("parameter `?{c}` of emit fragment `{}` is not used", f.name), "use it, or drop it"),
                Some(o) if o.output > 0 => err(*p, format!("parameter `?{c}` of emit fragment `{}` is an output of one of its lines", f.name), "values the fragment creates are its results: `-> ?r`"),
                Some(_) => {}
            }
            if results.contains(c.as_str()) {
                err(*p, format!("`?{c}` is both a parameter and a result of emit fragment `{}`", f.name), "a result is a value the fragment creates");
            }
        }
        for (c, p) in &f.results {
            if occ.get(c).is_none_or(|o| o.output == 0) {
                err(*p, format!("result `?{c}` of emit fragment `{}` is not an output of its lines", f.name), "name it as the output of an op or helper line");
            }
        }
        // Own captures: bound by an earlier line before they are read, and read once bound.
        let mut bound: HashSet<&str> = HashSet::new();
        let mut replaces = f.replaces.iter().peekable();
        let check_read = |c: &str, p: Pos, bound: &HashSet<&str>, err: &mut dyn FnMut(Pos, String, &str)| {
            if !params.contains(c) && !bound.contains(c) && !c.ends_with("#with") {
                err(p, format!("capture `?{c}` is used before it is bound"), "pass it as a parameter, or bind it on an earlier line of the fragment");
            }
        };
        for e in &f.emits {
            for s in e.args() {
                if let Slot::Capture(c, p) = s {
                    check_read(c, *p, &bound, &mut err);
                }
            }
            match e {
                EmitLine::Op { op, attrs, .. } => {
                    check_op(&d.file, op, true, &mut err);
                    for (name, v, _) in attrs {
                        check_dtype_attr(op, name, v, &mut err);
                        if let AttrVal::Capture(c, p) = v {
                            if !params.contains(c.as_str()) {
                                err(*p, format!("attribute capture `?{c}` is not a parameter of emit fragment `{}`", f.name), "pass the attribute value as a parameter");
                            }
                        }
                    }
                }
                EmitLine::Helper { name, pos, .. } => {
                    if !vocab::HELPERS.iter().any(|h| h.0 == name) {
                        err(*pos, format!("unknown helper `{name}`"), "see rule_dsl::vocab::HELPERS");
                    }
                }
            }
            for s in e.outputs() {
                if let Some(c) = s.capture() {
                    bound.insert(c);
                }
            }
            while let Some(r) = replaces.next_if(|r| r.pos <= e.pos()) {
                check_read(&r.new.0, r.new.1, &bound, &mut err);
            }
        }
        for r in replaces {
            check_read(&r.new.0, r.new.1, &bound, &mut err);
        }
        for r in &f.replaces {
            if !params.contains(r.old.0.as_str()) {
                err(r.old.1, format!("emit fragment `{}` replaces `?{}`, which is not a parameter", f.name, r.old.0), "a fragment replaces values its user matched: pass them as parameters");
            }
        }
        for (c, o) in &occ {
            if !params.contains(c.as_str()) && !results.contains(c.as_str()) && o.output > 0 && o.operand == 0 {
                let p = f.emits.iter().flat_map(|e| e.outputs()).find(|s| s.capture() == Some(c)).map_or(f.pos, |s| s.pos());
                err(p, format!("capture `?{c}` is bound but never used"), "write `_` for an output nobody reads, or make it a result");
            }
        }
        if out.len() > before {
            bad.insert(f.name.clone());
        }
    }
    (out, bad)
}

/// Inlines every emit fragment use of `r` where it stands; on any problem returns them.
pub(crate) fn inline_rule(r: &mut Rule, path: &str, defs: &HashMap<&str, &EmitDef>, pattern: &HashSet<&str>, bad: &HashSet<String>) -> Result<(), Vec<Diagnostic>> {
    let mut errs = Vec::new();
    for u in &r.emit_uses {
        check_use(u, defs, pattern, &mut |p, m, h| errs.push(Diagnostic::new(path, p, m, h)));
    }
    if !errs.is_empty() {
        return Err(errs);
    }
    if r.emit_uses.iter().any(|u| bad.contains(&u.name)) {
        return Err(Vec::new());
    }
    // Last use first, so the positions of earlier ones stay valid.
    let uses = std::mem::take(&mut r.emit_uses);
    for (n, u) in uses.iter().enumerate().rev() {
        let d = defs[u.name.as_str()];
        let (emits, replaces) = expand(d, u, n);
        r.emits.splice(u.emits_at..u.emits_at, emits);
        r.replaces.splice(u.replaces_at..u.replaces_at, replaces);
    }
    r.emit_uses = uses;
    Ok(())
}

/// A use on its own: the fragment exists, arguments and results match its interface, a literal
/// stands only for an attribute, `_` never for one or for a replaced value.
fn check_use(u: &EmitUse, defs: &HashMap<&str, &EmitDef>, pattern: &HashSet<&str>, err: &mut dyn FnMut(Pos, String, &str)) {
    let Some(d) = defs.get(u.name.as_str()) else {
        let mut names: Vec<&str> = defs.keys().copied().collect();
        names.sort();
        let help = if pattern.contains(u.name.as_str()) {
            format!("`{}` is a pattern fragment: use it in the match block", u.name)
        } else if vocab::ops_of(vocab::ONNX).is_some_and(|ops| ops.contains(&u.name.as_str())) {
            format!("an operator is written with its domain alias: `onnx.{}`", u.name)
        } else if vocab::ops_of(vocab::MICROSOFT).is_some_and(|ops| ops.contains(&u.name.as_str())) {
            format!("an operator is written with its domain alias: `ms.{}`", u.name)
        } else if names.is_empty() {
            format!("define it: `emit fragment {}(?a, ...) {{ ... }}`", u.name)
        } else {
            format!("the emit fragments are {}", names.join(", "))
        };
        err(u.pos, format!("unknown emit fragment `{}`", u.name), &help);
        return;
    };
    let f = &d.frag;
    let names = |v: &[(String, Pos)]| v.iter().map(|(c, _)| format!("?{c}")).collect::<Vec<_>>().join(", ");
    let seen_at = format!("see its definition at {}:{}", d.file.path, f.pos.line);
    if u.args.len() != f.params.len() {
        err(u.pos, format!("emit fragment `{}` takes {} argument(s) ({}), not {}", f.name, f.params.len(), names(&f.params), u.args.len()), &seen_at);
        return;
    }
    if u.outputs.len() != f.results.len() {
        err(u.pos, format!("emit fragment `{}` gives {} result(s) ({}), not {}", f.name, f.results.len(), names(&f.results), u.outputs.len()), &seen_at);
        return;
    }
    for s in u.outputs.iter().filter(|s| matches!(s, Slot::Absent(_) | Slot::List(..))) {
        err(s.pos(), format!("a result of emit fragment `{}` is a capture or `_`", f.name), "`-` and `..?xs` are not results");
    }
    let occ = occurrences(f);
    for ((c, _), a) in f.params.iter().zip(&u.args) {
        let o = occ.get(c).unwrap_or(&Occ::default()).clone_counts();
        match a {
            EmitArg::Lit(_, p) if o.operand + o.replaced > 0 => {
                err(*p, format!("a literal for `?{c}`, which emit fragment `{}` uses as a value", f.name), "a literal can stand only for an attribute: pass a capture");
            }
            EmitArg::Slot(Slot::Wild(p)) if o.attr + o.replaced > 0 => {
                err(*p, format!("`_` for `?{c}`, which emit fragment `{}` uses as an attribute or replaces", f.name), "pass a capture (or a literal for an attribute)");
            }
            EmitArg::Slot(s @ (Slot::Absent(_) | Slot::List(..))) => {
                err(s.pos(), format!("`{}` as an argument of emit fragment `{}`", if s.is_list() { "..?xs" } else { "-" }, f.name), "pass a capture, `_`, or a literal for an attribute");
            }
            _ => {}
        }
    }
}

impl Occ {
    fn clone_counts(&self) -> Occ {
        Occ { operand: self.operand, output: self.output, attr: self.attr, replaced: self.replaced }
    }
}

/// The fragment's lines for use `u` (the `n`th of its rule): parameters and results become the
/// use's arguments and outputs, own captures `name#e<n>`, and every line takes the use's
/// position (its op resolved in the fragment's file).
fn expand(d: &EmitDef, u: &EmitUse, n: usize) -> (Vec<EmitLine>, Vec<Replace>) {
    let f = &d.frag;
    let at = u.pos;
    let mut map: HashMap<&str, Bound> = HashMap::new();
    for ((c, _), a) in f.params.iter().zip(&u.args) {
        map.insert(c, match a {
            EmitArg::Slot(s) => Bound::Slot(s.clone()),
            EmitArg::Lit(l, _) => Bound::Lit(l.clone()),
        });
    }
    for ((c, _), s) in f.results.iter().zip(&u.outputs) {
        map.insert(c, Bound::Slot(s.clone()));
    }
    let name = |c: &str| -> Option<String> {
        // `?a#with`, the hidden output of `replace (?a) with Op(..)`, follows `?a`.
        if let Some(base) = c.strip_suffix("#with") {
            return match map.get(base) {
                Some(Bound::Slot(Slot::Capture(b, _))) => Some(format!("{b}#with")),
                Some(_) => None,
                None => Some(format!("{base}#e{n}#with")),
            };
        }
        match map.get(c) {
            Some(Bound::Slot(s)) => s.capture().map(str::to_string),
            Some(Bound::Lit(_)) => None,
            None => Some(format!("{c}#e{n}")),
        }
    };
    let slot = |s: &Slot| -> Slot {
        match s {
            Slot::Capture(c, _) => name(c).map_or(Slot::Wild(at), |c| Slot::Capture(c, at)),
            Slot::List(c, _) => name(c).map_or(Slot::Wild(at), |c| Slot::List(c, at)),
            Slot::Wild(_) => Slot::Wild(at),
            Slot::Absent(_) => Slot::Absent(at),
        }
    };
    let emits = f
        .emits
        .iter()
        .map(|e| match e {
            EmitLine::Op { outputs, op, args, attrs, .. } => EmitLine::Op {
                outputs: outputs.iter().map(slot).collect(),
                op: OpRef { pos: at, resolved: op.resolved.clone().or_else(|| resolve(&d.file, op).cloned()), ..op.clone() },
                args: args.iter().map(slot).collect(),
                attrs: attrs
                    .iter()
                    .map(|(an, v, _)| {
                        let v = match v {
                            AttrVal::Capture(c, _) => match map.get(c.as_str()) {
                                Some(Bound::Lit(l)) => AttrVal::Lit(l.clone(), at),
                                _ => AttrVal::Capture(name(c).unwrap_or_default(), at),
                            },
                            AttrVal::Lit(l, _) => AttrVal::Lit(l.clone(), at),
                        };
                        (an.clone(), v, at)
                    })
                    .collect(),
                pos: at,
                scope: None,
            },
            EmitLine::Helper { outputs, name: h, args, .. } => {
                EmitLine::Helper { outputs: outputs.iter().map(slot).collect(), name: h.clone(), args: args.iter().map(slot).collect(), pos: at, scope: None }
            }
        })
        .collect();
    let replaces = f
        .replaces
        .iter()
        .map(|r| Replace { old: (name(&r.old.0).unwrap_or_default(), at), new: (name(&r.new.0).unwrap_or_default(), at), pos: at, scope: None })
        .collect();
    (emits, replaces)
}
