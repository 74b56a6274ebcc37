//! Pattern fragments: named, parameterised sub-patterns (match lines, lets, checks) defined once
//! and used by rules like one match line (`?std = rms(?sq, ?x, ?eps)`) or among their checks
//! (`check gqa_inputs(?q, ?k, ?v)`). They exist only at compile time: [`expand_set`] inlines
//! every use into the rule, so the macro compiles an ordinary rule and the matcher stays
//! straight-line code. Definitions are checked on their own ([`define`]), uses where they
//! stand ([`inline`]).

mod define;
mod emit;
mod inline;

use crate::ast::{AttrVal, Fragment, FragmentItem, MsgPart, Pos, RuleFile, Slot};
use crate::diag::Diagnostic;
use std::collections::{BTreeMap, HashMap, HashSet};

/// A fragment with the file it was written in (its path and `use` lines resolve its ops).
pub(crate) struct Def {
    pub file: RuleFile,
    pub frag: Fragment,
}

/// Checks every fragment and inlines every use in every rule. Returns the problems and the
/// rules (file index, rule index) that could not be inlined, which the caller must not check
/// again on their own.
pub(crate) fn expand_set(files: &mut [RuleFile]) -> (Vec<Diagnostic>, HashSet<(usize, usize)>) {
    let defs: Vec<Def> = files
        .iter()
        .flat_map(|f| {
            let file = RuleFile { path: f.path.clone(), uses: f.uses.clone(), rules: vec![], fragments: vec![], emit_fragments: vec![] };
            f.fragments.iter().map(move |g| Def { file: file.clone(), frag: g.clone() })
        })
        .collect();
    let (mut out, bad) = define::check_all(&defs);
    let mut by_name: HashMap<&str, &Def> = HashMap::new();
    for d in &defs {
        by_name.entry(&d.frag.name).or_insert(d);
    }
    let mut emit_defs: Vec<emit::EmitDef> = files
        .iter()
        .flat_map(|f| {
            let file = RuleFile { path: f.path.clone(), uses: f.uses.clone(), rules: vec![], fragments: vec![], emit_fragments: vec![] };
            f.emit_fragments.iter().map(move |g| emit::EmitDef { file: file.clone(), frag: g.clone() })
        })
        .collect();
    let pattern: HashSet<&str> = by_name.keys().copied().collect();
    let (flat_diags, mut emit_bad) = emit::flatten_all(&mut emit_defs, &pattern);
    out.extend(flat_diags);
    let (emit_diags, bad_defs) = emit::check_defs(&emit_defs, &pattern);
    out.extend(emit_diags);
    emit_bad.extend(bad_defs);
    let mut emit_by_name: HashMap<&str, &emit::EmitDef> = HashMap::new();
    for d in &emit_defs {
        emit_by_name.entry(&d.frag.name).or_insert(d);
    }
    let mut skip = HashSet::new();
    for (fi, f) in files.iter_mut().enumerate() {
        let path = f.path.clone();
        for (ri, r) in f.rules.iter_mut().enumerate() {
            if !r.emit_uses.is_empty() {
                if let Err(diags) = emit::inline_rule(r, &path, &emit_by_name, &pattern, &emit_bad) {
                    out.extend(diags);
                    skip.insert((fi, ri));
                    continue;
                }
            }
            if r.uses.is_empty() {
                continue;
            }
            match inline::rule(r, &path, &by_name, &bad) {
                Ok(()) => {}
                Err(diags) => {
                    out.extend(diags);
                    skip.insert((fi, ri));
                }
            }
        }
    }
    (out, skip)
}

/// How often, and where, each capture of a fragment's body occurs.
#[derive(Default)]
pub(crate) struct Occurrences<'a> {
    map: BTreeMap<&'a str, Occ>,
}

#[derive(Default, Clone, Copy)]
struct Occ {
    first: Option<Pos>,
    /// Operand slots of ordered match lines.
    operands: usize,
    /// Operand slots between `{...}`.
    commutative: usize,
    /// Outputs of match lines and results of uses.
    outputs: usize,
    attrs: usize,
    /// Arguments of uses.
    use_args: usize,
    lets: usize,
    reads: usize,
}

impl Occ {
    fn total(&self) -> usize {
        self.operands + self.commutative + self.outputs + self.attrs + self.use_args + self.lets + self.reads
    }
}

impl<'a> Occurrences<'a> {
    pub(crate) fn of(f: &'a Fragment) -> Self {
        let mut o = Occurrences::default();
        for item in &f.body {
            match item {
                FragmentItem::Line(m) => {
                    for s in &m.outputs {
                        o.slot(s, |x| x.outputs += 1);
                    }
                    for s in &m.args {
                        if m.commutative { o.slot(s, |x| x.commutative += 1) } else { o.slot(s, |x| x.operands += 1) }
                    }
                    for a in &m.attrs {
                        if let AttrVal::Capture(c, p) = &a.value {
                            o.note(c, *p, |x| x.attrs += 1);
                        }
                    }
                }
                FragmentItem::Use(u) => {
                    for s in &u.outputs {
                        o.slot(s, |x| x.outputs += 1);
                    }
                    for s in &u.args {
                        o.slot(s, |x| x.use_args += 1);
                    }
                }
                FragmentItem::Let(l) => {
                    o.note(&l.name, l.pos, |x| x.lets += 1);
                    l.expr.captures(&mut |c, p| o.note(c, p, |x| x.reads += 1));
                }
                FragmentItem::Check(c) => {
                    c.expr.captures(&mut |cap, p| o.note(cap, p, |x| x.reads += 1));
                    for m in &c.message {
                        if let MsgPart::Expr(e) = m {
                            e.captures(&mut |cap, p| o.note(cap, p, |x| x.reads += 1));
                        }
                    }
                }
            }
        }
        o
    }

    fn slot(&mut self, s: &'a Slot, f: impl FnOnce(&mut Occ)) {
        if let Some(c) = s.capture() {
            self.note(c, s.pos(), f);
        }
    }

    fn note(&mut self, c: &'a str, p: Pos, f: impl FnOnce(&mut Occ)) {
        let e = self.map.entry(c).or_default();
        e.first.get_or_insert(p);
        f(e);
    }

    fn get(&self, c: &str) -> Occ {
        self.map.get(c).copied().unwrap_or_default()
    }

    /// Bound by matching: in a line's slots or attributes, or passed to or named by a use.
    pub(crate) fn in_lines(&self, c: &str) -> bool {
        let o = self.get(c);
        o.operands + o.commutative + o.outputs + o.attrs + o.use_args > 0
    }

    pub(crate) fn is_output(&self, c: &str) -> bool {
        self.get(c).outputs > 0
    }

    pub(crate) fn count(&self, c: &str) -> usize {
        self.get(c).total()
    }

    /// Each capture that is bound somewhere (not only read), with its first position.
    pub(crate) fn firsts(&self) -> impl Iterator<Item = (&'a str, Pos)> + '_ {
        self.map.iter().filter(|(_, o)| o.total() > o.reads).map(|(c, o)| (*c, o.first.unwrap_or_default()))
    }

    /// Written once, as a line's operand or output: a use may pass `_` and the slot becomes `_`.
    fn single_slot(&self, c: &str) -> bool {
        let o = self.get(c);
        o.total() == 1 && o.operands + o.commutative + o.outputs == 1
    }

    /// Only ever an operand of ordered match lines: a use may pass `-` (absent).
    fn operand_only(&self, c: &str) -> bool {
        let o = self.get(c);
        o.operands > 0 && o.total() == o.operands
    }

    /// Read by a let or check but bound by nothing in the fragment (the user must bind it).
    fn read_only(&self, c: &str) -> bool {
        let o = self.get(c);
        o.total() == o.reads
    }
}
