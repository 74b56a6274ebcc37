//! Can two patterns match the same node? Can a node a rule emits match a pattern line?
//!
//! Both questions are answered conservatively from structure alone: an operand that the
//! pattern does not pin to a producing op (a free capture or `_`) matches anything, and checks
//! are ignored. So "no" is a proof; "yes" means "nothing in the patterns keeps them apart".

use crate::ast::{AttrPat, AttrVal, EmitLine, Literal, MatchLine, Rule, RuleFile, Slot};
use crate::check::resolve;

/// How two patterns relate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Overlap {
    /// Some structure keeps them apart.
    Disjoint,
    /// They overlap only on nodes whose outputs past the shorter pattern's tuple are unread
    /// (a pattern with fewer outputs accepts such nodes, docs/rule-language.md).
    Unread,
    /// They overlap only if a commutative op's operands are paired the other way round from
    /// how both rules wrote them.
    Swapped,
    /// Nothing keeps them apart.
    Overlaps,
}

/// An op reference resolved through the file's `use` lines: (domain, op), domain `""` for
/// the default ONNX domain.
pub fn op_key(file: &RuleFile, op: &crate::ast::OpRef) -> Option<(String, String)> {
    let u = resolve(file, op)?;
    Some((ep_sets::normalize_domain(&u.domain).to_string(), op.name.clone()))
}

/// The match line producing `capture`, and which of its outputs it is.
pub fn producer<'a>(rule: &'a Rule, capture: &str) -> Option<(&'a MatchLine, usize)> {
    rule.matches.iter().find_map(|m| {
        m.outputs.iter().position(|s| s.capture() == Some(capture)).map(|i| (m, i))
    })
}

/// The root pattern line of a rule.
pub fn root_line(rule: &Rule) -> Option<&MatchLine> {
    rule.root.as_ref().and_then(|(c, _)| producer(rule, c)).map(|(m, _)| m)
}

fn lit_eq(a: &Literal, b: &Literal) -> bool {
    match (a, b) {
        (Literal::Int(i), Literal::Float(f)) | (Literal::Float(f), Literal::Int(i)) => (*i as f64) == *f,
        (Literal::Int(i), Literal::DType(d)) | (Literal::DType(d), Literal::Int(i)) => *i == i64::from(d.to_onnx()),
        _ => a == b,
    }
}

/// Do the attribute constraints of two pattern lines contradict each other?
fn attrs_clash(a: &[AttrPat], b: &[AttrPat]) -> bool {
    a.iter().any(|x| {
        b.iter().any(|y| {
            x.name == y.name
                && matches!((&x.value, &y.value), (AttrVal::Lit(l, _), AttrVal::Lit(m, _)) if !lit_eq(l, m))
        })
    })
}

struct Side<'a> {
    file: &'a RuleFile,
    rule: &'a Rule,
}

/// The depth past which patterns are taken to overlap (patterns are small DAGs).
const MAX_DEPTH: usize = 24;

fn slot_overlap(a: &Side, sa: &Slot, b: &Side, sb: &Slot, depth: usize) -> Overlap {
    // An absent input (`-`) and a present one (a capture or `_`) never match the same node.
    match (matches!(sa, Slot::Absent(_)), matches!(sb, Slot::Absent(_))) {
        (true, true) => return Overlap::Overlaps,
        (true, false) | (false, true) => return Overlap::Disjoint,
        _ => {}
    }
    let (Some(ca), Some(cb)) = (sa.capture(), sb.capture()) else { return Overlap::Overlaps };
    let (Some((la, oa)), Some((lb, ob))) = (producer(a.rule, ca), producer(b.rule, cb)) else {
        return Overlap::Overlaps;
    };
    if oa != ob {
        return Overlap::Disjoint;
    }
    line_overlap(a, la, b, lb, depth)
}

fn args_overlap(a: &Side, xs: &[&Slot], b: &Side, ys: &[&Slot], depth: usize) -> Overlap {
    let mut worst = Overlap::Overlaps;
    for (x, y) in xs.iter().zip(ys) {
        worst = worst.min(slot_overlap(a, x, b, y, depth + 1));
        if worst == Overlap::Disjoint {
            break;
        }
    }
    worst
}

fn line_overlap(a: &Side, la: &MatchLine, b: &Side, lb: &MatchLine, depth: usize) -> Overlap {
    if depth > MAX_DEPTH {
        return Overlap::Overlaps;
    }
    if op_key(a.file, &la.op) != op_key(b.file, &lb.op) || attrs_clash(&la.attrs, &lb.attrs) {
        return Overlap::Disjoint;
    }
    if !la.rest && !lb.rest && la.args.len() != lb.args.len() {
        return Overlap::Disjoint;
    }
    let xs: Vec<&Slot> = la.args.iter().collect();
    let ys: Vec<&Slot> = lb.args.iter().collect();
    let cap = if la.outputs.len() != lb.outputs.len() { Overlap::Unread } else { Overlap::Overlaps };
    let written = args_overlap(a, &xs, b, &ys, depth);
    if written != Overlap::Disjoint || !(la.commutative || lb.commutative) || ys.len() < 2 {
        return written.min(cap);
    }
    let mut swapped = ys.clone();
    swapped.swap(0, 1);
    match args_overlap(a, &xs, b, &swapped, depth) {
        Overlap::Disjoint => Overlap::Disjoint,
        _ => Overlap::Swapped.min(cap),
    }
}

/// Can a node matching rule `a`'s root line also match rule `b`'s?
pub fn roots_overlap(fa: &RuleFile, a: &Rule, fb: &RuleFile, b: &Rule) -> Overlap {
    match (root_line(a), root_line(b)) {
        (Some(la), Some(lb)) => line_overlap(&Side { file: fa, rule: a }, la, &Side { file: fb, rule: b }, lb, 0),
        _ => Overlap::Disjoint,
    }
}

/// Can the node an `emit` line creates match pattern line `m` (of a rule in file `fm`)?
/// Only the node itself is compared: op, operand count and literal attributes.
pub fn emit_matches(fe: &RuleFile, e: &EmitLine, fm: &RuleFile, m: &MatchLine) -> bool {
    let EmitLine::Op { op, args, attrs, .. } = e else { return false };
    if op_key(fe, op).is_none() || op_key(fe, op) != op_key(fm, &m.op) {
        return false;
    }
    if if m.rest { args.len() < m.args.len() } else { args.len() != m.args.len() } {
        return false;
    }
    m.attrs.iter().all(|p| {
        let AttrVal::Lit(want, _) = &p.value else { return true };
        match attrs.iter().find(|(n, _, _)| *n == p.name) {
            Some((_, AttrVal::Lit(got, _), _)) => lit_eq(want, got),
            Some((_, AttrVal::Capture(..), _)) => true,
            // A missing attribute takes the schema default, or fails the line without one.
            None => p.default.as_ref().is_some_and(|d| lit_eq(want, d)),
        }
    })
}

/// [`emit_matches`], and also the operands: an operand the pattern pins to a producing op
/// (`?n` with a line `?n = onnx.Mul(..)`) cannot be an emitted operand that the same emit
/// block produced with another op (or another output of it). Operands from the match, from
/// helpers, or left free in the pattern stay "may match". `{a, b}` tries both orders.
pub fn emit_feeds(fe: &RuleFile, er: &Rule, e: &EmitLine, fm: &RuleFile, mr: &Rule, m: &MatchLine) -> bool {
    if !emit_matches(fe, e, fm, m) {
        return false;
    }
    let EmitLine::Op { args, .. } = e else { return false };
    let made_by = |s: &Slot| -> Option<(Option<(String, String)>, usize)> {
        let c = s.capture()?;
        er.emits.iter().find_map(|l| match l {
            EmitLine::Op { outputs, op, .. } => outputs.iter().position(|o| o.capture() == Some(c)).map(|i| (op_key(fe, op), i)),
            EmitLine::Helper { .. } => None,
        })
    };
    let disjoint = |got: &Slot, want: &Slot| -> bool {
        let (Some((made, i)), Some(c)) = (made_by(got), want.capture()) else { return false };
        let Some((line, j)) = producer(mr, c) else { return false };
        made.is_some() && (made != op_key(fm, &line.op) || i != j)
    };
    let fits = |order: &[&Slot]| !args.iter().zip(order).any(|(g, w)| disjoint(g, w));
    let written: Vec<&Slot> = m.args.iter().collect();
    if fits(&written) {
        return true;
    }
    if m.commutative && written.len() >= 2 {
        let mut swapped = written.clone();
        swapped.swap(0, 1);
        return fits(&swapped);
    }
    false
}
