//! Inlining the fragments a rule uses. A use's parameters and results become the rule's
//! captures; the fragment's own captures get fresh names (`name#n`, shown as `name`), so two
//! uses never share one. Inlined items keep where they were written (`origin`: the fragment's
//! file and line, for run-time reports) and take the use's position for everything else, so a
//! semantic error that only the combination shows points at the rule.
//!
//! Order: the lets and checks of the match block's uses come first, in the order the uses are
//! written (a fragment's own in its source order, a nested use's at its place), then the rule's
//! lets, checks and `check f(..)` uses in source order; all lets still run before all checks.

use super::define::check_use;
use super::{Def, Occurrences};
use crate::ast::*;
use crate::check::resolve;
use crate::diag::Diagnostic;
use std::collections::{BTreeSet, HashMap, HashSet};

/// What a fragment's capture stands for at one use.
type Subst = HashMap<String, Slot>;

/// Inlines every use in `r`; on any problem, returns them and leaves `r` unusable.
pub(super) fn rule(r: &mut Rule, path: &str, defs: &HashMap<&str, &Def>, bad: &HashSet<String>) -> Result<(), Vec<Diagnostic>> {
    let mut errs: Vec<Diagnostic> = Vec::new();
    for u in &r.uses {
        let mut err = |p: Pos, m: String, h: String| errs.push(Diagnostic::new(path, p, m, h));
        check_use(u, defs, &mut err);
    }
    if !errs.is_empty() {
        return Err(errs);
    }
    if r.uses.iter().any(|u| bad.contains(&u.name)) {
        // The fragment's own errors are reported at its definition.
        return Err(Vec::new());
    }
    let own = own_captures(r);
    let mut inl = Inliner { defs, next: 0, fresh: Vec::new(), lines: Vec::new(), lets: Vec::new(), checks: Vec::new(), errs: Vec::new(), path };
    let mut match_uses: Vec<&FragmentUse> = r.uses.iter().filter(|u| !u.in_checks).collect();
    match_uses.sort_by_key(|u| u.pos);
    for u in match_uses {
        inl.inline(u, None, u.pos);
    }
    // The rule's own lets and checks, and its `check f(..)` uses, in source order.
    enum Own<'a> {
        Let(&'a Let),
        Check(&'a Check),
        Use(&'a FragmentUse),
    }
    let mut items: Vec<(Pos, Own)> = r.lets.iter().map(|l| (l.pos, Own::Let(l))).collect();
    items.extend(r.checks.iter().map(|c| (c.pos, Own::Check(c))));
    items.extend(r.uses.iter().filter(|u| u.in_checks).map(|u| (u.pos, Own::Use(u))));
    items.sort_by_key(|i| i.0);
    for (_, item) in items {
        match item {
            Own::Let(l) => inl.lets.push(l.clone()),
            Own::Check(c) => inl.checks.push(c.clone()),
            Own::Use(u) => inl.inline(u, None, u.pos),
        }
    }
    for (shown, frag, at) in &inl.fresh {
        if own.contains(shown.as_str()) {
            inl.errs.push(Diagnostic::new(
                path,
                *at,
                format!("fragment `{frag}` has a capture `?{shown}` of its own, and rule `{}` uses `?{shown}` too", r.id),
                format!("they are different values, and reports would give their steps one name: rename one, or pass `?{shown}` to `{frag}` if they are meant to be the same value"),
            ));
        }
    }
    if !inl.errs.is_empty() {
        return Err(inl.errs);
    }
    let Inliner { lines, lets, checks, .. } = inl;
    r.matches.extend(lines);
    r.matches.sort_by_key(|m| m.pos); // stable: a use's lines stay in their order, at the use
    r.lets = lets;
    r.checks = checks;
    duplicate_steps(r, path)
}

/// Step ids name lines by their first output (`match.x`) and lets by their capture (`let.x`):
/// two inlined items may not share one.
fn duplicate_steps(r: &Rule, path: &str) -> Result<(), Vec<Diagnostic>> {
    let mut seen: HashMap<String, (Pos, bool)> = HashMap::new();
    let mut errs = Vec::new();
    let ids = r
        .matches
        .iter()
        .map(|m| (format!("match.{}", m.outputs.iter().find_map(Slot::capture).map(display).unwrap_or("_")), m.pos, m.origin.is_some()))
        .chain(r.lets.iter().map(|l| (format!("let.{}", display(&l.name)), l.pos, l.origin.is_some())));
    for (id, p, inlined) in ids {
        if let Some((first, first_inlined)) = seen.get(&id) {
            if inlined || *first_inlined {
                errs.push(Diagnostic::new(
                    path,
                    p,
                    format!("two steps of rule `{}` would be named `{id}` (the other at {}:{})", r.id, first.line, first.col),
                    "a fragment whose lines bind captures of their own can be used once per rule: make that capture a parameter to use it again",
                ));
            }
        } else {
            seen.insert(id, (p, inlined));
        }
    }
    if errs.is_empty() { Ok(()) } else { Err(errs) }
}

/// Every capture name the rule writes itself (not through a fragment).
fn own_captures(r: &Rule) -> BTreeSet<&str> {
    let mut out = BTreeSet::new();
    for m in &r.matches {
        out.extend(m.outputs.iter().chain(&m.args).filter_map(Slot::capture));
        out.extend(m.attrs.iter().filter_map(|a| if let AttrVal::Capture(c, _) = &a.value { Some(c.as_str()) } else { None }));
    }
    for u in &r.uses {
        out.extend(u.outputs.iter().chain(&u.args).filter_map(Slot::capture));
    }
    for l in &r.lets {
        out.insert(&l.name);
        l.expr.captures(&mut |c, _| {
            out.insert(c);
        });
    }
    for c in &r.checks {
        c.expr.captures(&mut |x, _| {
            out.insert(x);
        });
    }
    for e in &r.emits {
        out.extend(e.outputs().iter().chain(e.args()).filter_map(Slot::capture).map(display));
    }
    out
}

struct Inliner<'a> {
    defs: &'a HashMap<&'a str, &'a Def>,
    next: usize,
    /// Fresh captures made for fragments' own ones: (shown name, fragment, use position).
    fresh: Vec<(String, String, Pos)>,
    lines: Vec<MatchLine>,
    lets: Vec<Let>,
    checks: Vec<Check>,
    errs: Vec<Diagnostic>,
    path: &'a str,
}

impl Inliner<'_> {
    /// Inlines use `u` (written in the rule, or in a fragment whose captures `outer` maps).
    /// `at` is the position of the rule's own use this one is part of.
    fn inline(&mut self, u: &FragmentUse, outer: Option<&Subst>, at: Pos) {
        let d: &Def = self.defs[u.name.as_str()];
        let f = &d.frag;
        let occ = Occurrences::of(f);
        let lift = |s: &Slot| -> Slot {
            match (s, outer) {
                (Slot::Capture(c, _), Some(m)) => m.get(c).cloned().unwrap_or_else(|| s.clone()),
                _ => s.clone(),
            }
        };
        let mut map: Subst = HashMap::new();
        let pairs = f.params.iter().zip(&u.args).chain(f.results.iter().zip(&u.outputs));
        for ((name, _), given) in pairs {
            let s = match lift(given) {
                Slot::Capture(c, _) => Slot::Capture(c, at),
                Slot::Wild(_) if occ.read_only(name) => {
                    self.errs.push(Diagnostic::new(
                        self.path,
                        at,
                        format!("fragment `{}` only reads `?{name}` (in a let or check), so `_` leaves it unbound", f.name),
                        "pass a capture the rule binds",
                    ));
                    continue;
                }
                Slot::Wild(_) if occ.single_slot(name) => Slot::Wild(at),
                Slot::Absent(_) if occ.operand_only(name) => Slot::Absent(at),
                Slot::Absent(_) => {
                    self.errs.push(Diagnostic::new(
                        self.path,
                        at,
                        format!("`-` for `?{name}` of fragment `{}`, which is not only an operand there", f.name),
                        "`-` (an absent input) can stand only for a parameter the fragment uses as operands of ordered match lines",
                    ));
                    continue;
                }
                _ => self.fresh_capture(name, &f.name, at),
            };
            map.insert(name.clone(), s);
        }
        let interface: HashSet<&str> = f.params.iter().chain(&f.results).map(|(c, _)| c.as_str()).collect();
        for (c, _) in occ.firsts() {
            if !interface.contains(c) && !map.contains_key(c) {
                let s = self.fresh_capture(c, &f.name, at);
                map.insert(c.to_string(), s);
            }
        }
        let origin = |pos: Pos| Some(Origin { fragment: f.name.clone(), file: d.file.path.clone(), pos });
        for item in &f.body {
            match item {
                FragmentItem::Line(m) => {
                    let line = MatchLine {
                        outputs: m.outputs.iter().map(|s| subst_slot(s, &map, at)).collect(),
                        op: OpRef { pos: at, resolved: resolve(&d.file, &m.op).cloned(), ..m.op.clone() },
                        args: m.args.iter().map(|s| subst_slot(s, &map, at)).collect(),
                        commutative: m.commutative,
                        rest: m.rest,
                        attrs: m.attrs.iter().map(|a| AttrPat { name: a.name.clone(), value: subst_attr(&a.value, &map, at), default: a.default.clone(), pos: at }).collect(),
                        pos: at,
                        origin: origin(m.pos),
                    };
                    self.lines.push(line);
                }
                FragmentItem::Use(v) => self.inline(v, Some(&map), at),
                FragmentItem::Let(l) => self.lets.push(Let {
                    name: cap_of(&l.name, &map),
                    pos: at,
                    expr: subst_expr(&l.expr, &map, at),
                    expr_text: l.expr_text.clone(),
                    origin: origin(l.pos),
                }),
                FragmentItem::Check(c) => self.checks.push(Check {
                    id: c.id.clone(),
                    pos: at,
                    expr: subst_expr(&c.expr, &map, at),
                    expr_text: c.expr_text.clone(),
                    message: c
                        .message
                        .iter()
                        .map(|p| match p {
                            MsgPart::Text(t) => MsgPart::Text(t.clone()),
                            MsgPart::Expr(e) => MsgPart::Expr(subst_expr(e, &map, at)),
                        })
                        .collect(),
                    origin: origin(c.pos),
                }),
            }
        }
    }

    fn fresh_capture(&mut self, name: &str, frag: &str, at: Pos) -> Slot {
        self.next += 1;
        self.fresh.push((name.to_string(), frag.to_string(), at));
        Slot::Capture(format!("{name}#{}", self.next), at)
    }
}

fn cap_of(c: &str, map: &Subst) -> String {
    match map.get(c) {
        Some(Slot::Capture(x, _)) => x.clone(),
        _ => c.to_string(),
    }
}

fn subst_slot(s: &Slot, map: &Subst, at: Pos) -> Slot {
    match s {
        Slot::Capture(c, _) => match map.get(c) {
            Some(x) => x.clone(),
            None => Slot::Capture(c.clone(), at),
        },
        Slot::List(c, _) => Slot::List(cap_of(c, map), at),
        Slot::Wild(_) => Slot::Wild(at),
        Slot::Absent(_) => Slot::Absent(at),
    }
}

fn subst_attr(v: &AttrVal, map: &Subst, at: Pos) -> AttrVal {
    match v {
        AttrVal::Capture(c, _) => AttrVal::Capture(cap_of(c, map), at),
        AttrVal::Lit(l, _) => AttrVal::Lit(l.clone(), at),
    }
}

fn subst_expr(e: &Expr, map: &Subst, at: Pos) -> Expr {
    match e {
        Expr::Capture(c, _) => Expr::Capture(cap_of(c, map), at),
        Expr::Lit(l, _) => Expr::Lit(l.clone(), at),
        Expr::Call { name, args, .. } => Expr::Call { name: name.clone(), args: args.iter().map(|a| subst_expr(a, map, at)).collect(), pos: at },
        Expr::Bin { op, lhs, rhs, .. } => Expr::Bin { op: *op, lhs: Box::new(subst_expr(lhs, map, at)), rhs: Box::new(subst_expr(rhs, map, at)), pos: at },
        Expr::Not(x, _) => Expr::Not(Box::new(subst_expr(x, map, at)), at),
        Expr::List(items, _) => Expr::List(items.iter().map(|a| subst_expr(a, map, at)).collect(), at),
    }
}
