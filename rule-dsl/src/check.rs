//! Semantic checks of a rule set: everything the grammar accepts but the engine could not
//! run, or would run wrongly. Each finding says where and how to fix it.

use crate::ast::*;
use crate::diag::Diagnostic;
use crate::vocab;
use std::collections::{BTreeMap, HashMap, HashSet};

/// The domain and opset an operator reference resolves to: through the `use` lines of the file
/// it was written in (for a line inlined from a fragment, resolved when it was inlined), which
/// include the set's prelude.
pub fn resolve<'a>(file: &'a RuleFile, op: &'a OpRef) -> Option<&'a UseDecl> {
    if let Some(u) = &op.resolved {
        return Some(u);
    }
    let alias = op.alias.as_deref()?;
    file.uses.iter().find(|u| u.alias == alias)
}

/// Checks every rule of every file, and the set as a whole (ids, ordering).
pub fn check_set(files: &[RuleFile]) -> Vec<Diagnostic> {
    check_set_skipping(files, &HashSet::new())
}

/// [`check_set`], except that the rules at `skip` (file index, rule index), whose fragments
/// could not be inlined, are not checked on their own (their errors are already reported).
pub(crate) fn check_set_skipping(files: &[RuleFile], skip: &HashSet<(usize, usize)>) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    let mut ids: HashMap<&str, (&str, Pos)> = HashMap::new();
    for (fi, f) in files.iter().enumerate() {
        check_uses(f, &mut out);
        for (ri, r) in f.rules.iter().enumerate() {
            if let Some((other_file, other)) = ids.get(r.id.as_str()) {
                out.push(Diagnostic::new(
                    &f.path,
                    r.pos,
                    format!("duplicate rule id `{}`; it is already defined at {other_file}:{}:{}", r.id, other.line, other.col),
                    "give each rule a unique id",
                ));
            } else {
                ids.insert(&r.id, (&f.path, r.pos));
            }
            if !skip.contains(&(fi, ri)) {
                check_rule(f, r, &mut out);
            }
        }
    }
    // Suggestions scan every id, so only the first few unknown ids get them: thousands of
    // unknown ids made the check quadratic (four seconds for 10,000).
    let mut suggested = 0;
    for f in files {
        for r in &f.rules {
            for (other, p) in r.before.iter().chain(&r.after) {
                if !ids.contains_key(other.as_str()) {
                    suggested += 1;
                    let known: Vec<&str> = if suggested <= MAX_SUGGESTED { nearest(other, ids.keys().copied()) } else { vec![] };
                    out.push(Diagnostic::new(
                        &f.path,
                        *p,
                        format!("unknown rule id `{other}` in `{}` of rule `{}`", if r.before.iter().any(|b| &b.0 == other) { "before" } else { "after" }, r.id),
                        if known.is_empty() { "name a rule defined in the rules directory".to_string() } else { format!("did you mean `{}`?", known.join("`, `")) },
                    ));
                }
            }
        }
    }
    check_cycles(files, &mut out);
    out.sort();
    out.dedup();
    out
}

/// How many unknown rule ids get a "did you mean" suggestion.
const MAX_SUGGESTED: usize = 32;

fn nearest<'a>(name: &str, known: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let tail = name.rsplit('.').next().unwrap_or(name);
    let mut v: Vec<&str> = known.filter(|k| k.contains(tail) || tail.contains(k.rsplit('.').next().unwrap_or(k))).collect();
    v.sort();
    v
}

fn check_uses(f: &RuleFile, out: &mut Vec<Diagnostic>) {
    let mut seen = HashSet::new();
    for u in f.uses.iter().filter(|u| !u.from_prelude) {
        if vocab::ops_of(&u.domain).is_none() {
            out.push(Diagnostic::new(
                &f.path,
                u.pos,
                format!("unknown domain `{}`", u.domain),
                format!("use one of `{}`, `{}`", vocab::ONNX, vocab::MICROSOFT),
            ));
        }
        if !seen.insert(&u.alias) {
            out.push(Diagnostic::new(&f.path, u.pos, format!("alias `{}` is declared twice", u.alias), "give each domain its own alias"));
        }
    }
}

/// The value kind of a capture: tensor values and attribute values never mix.
#[derive(Clone, Copy, PartialEq, Debug)]
pub(crate) enum Kind {
    Value,
    Attr,
    /// A list capture (`..?xs`): a list of values, read by checks and iterated by `for`.
    List,
}

/// A `stage` line names a known stage (a rule without one may run in any list).
fn check_stage(r: &Rule, err: &mut dyn FnMut(Pos, String, &str)) {
    if let Some((s, p)) = &r.stage {
        match ep_sets::Stage::parse(s) {
            None => err(*p, format!("unknown stage `{s}`"), &format!("use one of: {}", rule_stage_names())),
            Some(st) if !st.runs_rules() => err(*p, format!("stage `{s}` runs the quantize step, not rules"), &format!("use one of: {}", rule_stage_names())),
            Some(_) => {}
        }
    }
}

/// The stages a rule may name (every stage but the quantize step's).
fn rule_stage_names() -> String {
    ep_sets::Stage::ALL.into_iter().filter(|s| s.runs_rules()).map(|s| s.name()).collect::<Vec<_>>().join(", ")
}

/// Match lines and emit lines on their own: known operators (emitted ones with an opset),
/// `-` and list captures only where they mean something, helpers from the fixed list with
/// their arities.
fn check_lines_and_ops(f: &RuleFile, r: &Rule, err: &mut dyn FnMut(Pos, String, &str)) {
    for m in &r.matches {
        check_match_line(f, m, err);
    }
    for e in &r.emits {
        for s in e.outputs().iter().chain(e.args()).filter(|s| matches!(s, Slot::Absent(_))) {
            err(s.pos(), "`-` in an emit line".to_string(), "an emitted node's omitted input is `_`; `-` only matches absent inputs");
        }
        list_outputs_last(e.outputs(), err);
        for a in e.args().iter().filter(|a| a.is_list()) {
            err(a.pos(), format!("list capture `..?{}` as an operand", a.capture().unwrap_or_default()), "take its values one at a time with `for (?x) in (?xs) { ... }`");
        }
    }
    for e in &r.emits {
        match e {
            EmitLine::Op { op, outputs, .. } => {
                check_op(f, op, true, err);
                for o in outputs.iter().filter(|o| o.is_list()) {
                    err(o.pos(), format!("`{}` creates a fixed number of outputs; list capture `..?{}` is for helpers that return one value per item", op.name, o.capture().unwrap_or_default()), "name each output, or emit one node per item in a `for` block");
                }
            }
            EmitLine::Helper { name, args, outputs, pos, .. } => match vocab::HELPERS.iter().find(|h| h.0 == name) {
                None => err(*pos, format!("unknown helper `{name}`"), &format!("helpers come from a fixed list: {}", vocab::HELPERS.iter().map(|h| h.0).collect::<Vec<_>>().join(", "))),
                Some(h) => {
                    let list = outputs.iter().any(Slot::is_list);
                    if args.len() != h.1 || (h.2 != vocab::ANY && (list || outputs.len() != h.2)) {
                        err(*pos, format!("helper `{name}` takes {} input(s) and returns {} value(s), not {} and {}", h.1, h.2, args.len(), if list { "a list".to_string() } else { outputs.len().to_string() }), "see docs/rule-language.md, section Helpers");
                    }
                }
            },
        }
    }
}

/// The root is bound as the output of a match line and every line is reachable from it; the
/// rule replaces something.
fn check_root_and_replaces(r: &Rule, err: &mut dyn FnMut(Pos, String, &str)) {
    match &r.root {
        None => err(r.match_pos, format!("rule `{}` has no root", r.id), "add `root ?x` inside `match`, naming the output of the node the rule starts from"),
        Some((root, p)) => {
            if !r.matches.iter().any(|m| m.outputs.iter().any(|o| o.capture() == Some(root))) {
                err(*p, format!("root `?{root}` is not the output of any match line"), "name a capture bound on the left of `=` in the match block");
            } else {
                check_connected(r, root, err);
            }
        }
    }
    if r.replaces.is_empty() {
        err(r.emit_pos, format!("rule `{}` replaces nothing, so it would change nothing", r.id), "add `replace ?old with ?new` to the emit block (usually `replace ?root with ...`)");
    }
}

fn check_rule(f: &RuleFile, r: &Rule, out: &mut Vec<Diagnostic>) {
    let path = f.path.as_str();
    let mut err = |p: Pos, m: String, h: &str| out.push(Diagnostic::new(path, p, m, h));
    check_stage(r, &mut err);
    check_lines_and_ops(f, r, &mut err);
    let mut caps = Captures::default();
    bind_match_captures(r, &mut caps, &mut err);
    check_root_and_replaces(r, &mut err);
    check_lets(r, &mut caps, &mut err);
    check_checks(r, &mut caps, &mut err);
    // What `replace ?old` may name: what the match block (and the lets) bound.
    let match_bound = caps.bound.clone();
    check_emit_block(r, &mut caps, &mut err);
    check_replace_lines(r, &match_bound, &mut caps, &mut err);
    check_unused(r, &caps, &mut err);
}

/// What [`check_rule`] learns of a rule's captures as it walks the rule in order.
#[derive(Default)]
struct Captures<'r> {
    /// Where each capture is bound, and as what.
    bound: BTreeMap<&'r str, (Pos, Kind)>,
    /// How often each is read by a let, check, emit line, `for` or replace.
    uses: HashMap<&'r str, usize>,
    /// How often each appears in the match block.
    match_occ: HashMap<&'r str, usize>,
    /// Captures bound inside a `for` block, with the block's index.
    local: HashMap<&'r str, usize>,
}

impl<'r> Captures<'r> {
    fn read(&mut self, c: &'r str) {
        *self.uses.entry(c).or_default() += 1;
    }

    /// A capture local to a `for` block is read only inside it (`scope`).
    fn check_visible(&self, r: &Rule, c: &str, p: Pos, scope: Option<usize>, err: &mut dyn FnMut(Pos, String, &str)) {
        if let Some(&s) = self.local.get(c) {
            if scope != Some(s) {
                let at = r.loops[s].pos;
                err(p, format!("capture `?{c}` is local to the `for` at {}:{}", at.line, at.col), "use it inside that block, or bind it outside");
            }
        }
    }
}

/// The match block's captures: where each is bound, and as what (values and attributes never
/// mix).
fn bind_match_captures<'r>(r: &'r Rule, caps: &mut Captures<'r>, err: &mut dyn FnMut(Pos, String, &str)) {
    for m in &r.matches {
        for s in m.outputs.iter().chain(&m.args) {
            if let Some(c) = s.capture() {
                *caps.match_occ.entry(c).or_default() += 1;
                let kind = if s.is_list() { Kind::List } else { Kind::Value };
                note_kind(c, s.pos(), kind, &mut caps.bound, err);
            }
        }
        for a in &m.attrs {
            if let AttrVal::Capture(c, p) = &a.value {
                *caps.match_occ.entry(c).or_default() += 1;
                note_kind(c, *p, Kind::Attr, &mut caps.bound, err);
            }
        }
    }
}

/// Lets: their expressions read bound captures; each binds a fresh attribute capture.
fn check_lets<'r>(r: &'r Rule, caps: &mut Captures<'r>, err: &mut dyn FnMut(Pos, String, &str)) {
    for l in &r.lets {
        check_expr(&l.expr, err);
        l.expr.captures(&mut |cap, p| {
            caps.read(cap);
            if !caps.bound.contains_key(cap) {
                err(p, format!("capture `?{cap}` is not bound before this `let`"), "bind it in `match` or in an earlier `let`");
            }
        });
        if let Some((first, _)) = caps.bound.get(l.name.as_str()) {
            err(l.pos, format!("capture `?{}` is already bound at {}:{}", l.name, first.line, first.col), "give the `let` a fresh name");
        } else {
            caps.bound.insert(&l.name, (l.pos, Kind::Attr));
        }
    }
}

/// Check ids unique; expressions only use bound captures and known functions.
fn check_checks<'r>(r: &'r Rule, caps: &mut Captures<'r>, err: &mut dyn FnMut(Pos, String, &str)) {
    let mut check_ids: HashMap<&str, Pos> = HashMap::new();
    for c in &r.checks {
        if let Some(first) = check_ids.get(c.id.as_str()) {
            err(c.pos, format!("duplicate check id `{}` in rule `{}` (first at {}:{})", c.id, r.id, first.line, first.col), "give each check its own id: reports count failures by check id");
        } else {
            check_ids.insert(&c.id, c.pos);
        }
        let mut exprs = vec![&c.expr];
        exprs.extend(c.message.iter().filter_map(|m| match m {
            MsgPart::Expr(e) => Some(e),
            MsgPart::Text(_) => None,
        }));
        for e in exprs {
            check_expr(e, err);
            e.captures(&mut |cap, p| {
                caps.read(cap);
                if !caps.bound.contains_key(cap) {
                    err(p, format!("capture `?{cap}` is not bound by the match block"), "bind it in `match`, or fix the spelling");
                }
            });
        }
    }
}

/// Emit: arguments bound (by match or an earlier emit line), outputs new. A `for` binds its
/// variables when it starts (source order); what is bound inside it is visible there only. A
/// loop with no emit line (only replaces) still binds its variables.
fn check_emit_block<'r>(r: &'r Rule, caps: &mut Captures<'r>, err: &mut dyn FnMut(Pos, String, &str)) {
    let mut events: Vec<(Pos, Option<usize>, Option<usize>)> = r.loops.iter().enumerate().map(|(s, l)| (l.pos, Some(s), None)).collect();
    events.extend(r.emits.iter().enumerate().map(|(i, e)| (e.pos(), None, Some(i))));
    events.sort_by_key(|e| e.0);
    for (_, lp, line) in events {
        match lp {
            Some(s) => check_for_header(r, s, caps, err),
            None => check_emit_line(r, &r.emits[line.expect("an event is a loop or a line")], caps, err),
        }
    }
}

/// A `for` line: one variable per list, each list a bound list capture, each variable fresh
/// (and local to the block).
fn check_for_header<'r>(r: &'r Rule, s: usize, caps: &mut Captures<'r>, err: &mut dyn FnMut(Pos, String, &str)) {
    let l = &r.loops[s];
    if l.vars.len() != l.lists.len() {
        err(l.pos, format!("`for` names {} variable(s) and {} list(s)", l.vars.len(), l.lists.len()), "write one variable per list: `for (?y, ?t) in (?ys, ?ts)`");
    }
    for (c, p) in &l.lists {
        caps.read(c);
        caps.check_visible(r, c, *p, None, err);
        match caps.bound.get(c.as_str()) {
            None => err(*p, format!("capture `?{c}` is used before it is bound"), "bind it as `..?{c}` in `match` or on an earlier helper line"),
            Some((_, Kind::List)) => {}
            Some(_) => err(*p, format!("capture `?{c}` is not a list"), "a `for` iterates list captures (`..?xs` outputs)"),
        }
    }
    for (c, p) in &l.vars {
        if let Some((first, _)) = caps.bound.get(c.as_str()) {
            err(*p, format!("capture `?{c}` is already bound at {}:{}", first.line, first.col), "give the `for` variable a fresh name");
        } else {
            caps.bound.insert(c, (*p, Kind::Value));
            caps.local.insert(c, s);
        }
    }
}

/// One emit line: operands bound and of the kind the op or helper takes, attribute captures
/// bound as attributes, outputs fresh.
fn check_emit_line<'r>(r: &'r Rule, e: &'r EmitLine, caps: &mut Captures<'r>, err: &mut dyn FnMut(Pos, String, &str)) {
    if let EmitLine::Op { op, attrs, .. } = e {
        for (name, v, _) in attrs {
            check_dtype_attr(op, name, v, err);
        }
    }
    let scope = e.scope();
    let takes_graphs = matches!(e, EmitLine::Helper { name, .. } if vocab::GRAPH_HELPERS.contains(&name.as_str()));
    let takes_list = matches!(e, EmitLine::Helper { name, .. } if vocab::LIST_HELPERS.contains(&name.as_str()));
    let last = e.args().len().saturating_sub(1);
    for (k, a) in e.args().iter().enumerate() {
        if let Slot::Capture(c, p) = a {
            caps.read(c);
            caps.check_visible(r, c, *p, scope, err);
            match caps.bound.get(c.as_str()) {
                None => err(*p, format!("capture `?{c}` is used before it is bound"), "bind it in `match` or on an earlier emit line"),
                Some((_, Kind::List)) => err(*p, format!("capture `?{c}` holds a list of values, not one value"), "take its values one at a time with `for (?x) in (?xs) { ... }`"),
                Some((_, Kind::Attr)) if takes_list && k == last => {}
                Some((_, Kind::Value)) if takes_list && k == last => err(*p, format!("capture `?{c}` holds a value, but this helper's last input is an integer list"), "compute the list with `let ?sizes = [...]`"),
                Some((_, Kind::Attr)) if takes_graphs => {}
                Some((_, Kind::Value)) if takes_graphs => err(*p, format!("capture `?{c}` holds a value, but this helper takes a subgraph attribute"), "capture the branch in `match` with `[then_branch: ?g]`"),
                Some((_, Kind::Attr)) => err(*p, format!("capture `?{c}` holds an attribute, not a value"), "pass it in the `[...]` attributes instead"),
                _ => {}
            }
        }
    }
    if let EmitLine::Op { attrs, .. } = e {
        for (_, v, _) in attrs {
            if let AttrVal::Capture(c, p) = v {
                caps.read(c);
                match caps.bound.get(c.as_str()) {
                    None => err(*p, format!("capture `?{c}` is not bound by the match block"), "capture the attribute in `match` with `[name: ?{c}]`"),
                    Some((_, Kind::Value | Kind::List)) => err(*p, format!("capture `?{c}` holds a value, not an attribute"), "pass it as an operand instead"),
                    _ => {}
                }
            }
        }
    }
    for o in e.outputs() {
        if let Some(c) = o.capture() {
            if let Some((first, _)) = caps.bound.get(c) {
                err(o.pos(), format!("capture `?{c}` is already bound at {}:{}", first.line, first.col), "emit outputs need fresh names");
            } else {
                caps.bound.insert(c, (o.pos(), if o.is_list() { Kind::List } else { Kind::Value }));
                if let Some(s) = scope {
                    caps.local.insert(c, s);
                }
            }
        }
    }
}

/// `replace ?old with ?new`: `?old` a value the match block bound (or a `for` variable over a
/// list it bound), `?new` a value an emit line creates.
fn check_replace_lines<'r>(r: &'r Rule, match_bound: &BTreeMap<&str, (Pos, Kind)>, caps: &mut Captures<'r>, err: &mut dyn FnMut(Pos, String, &str)) {
    for rp in &r.replaces {
        caps.read(&rp.old.0);
        caps.read(&rp.new.0);
        caps.check_visible(r, &rp.old.0, rp.old.1, rp.scope, err);
        caps.check_visible(r, &rp.new.0, rp.new.1, rp.scope, err);
        // A `for` variable over a list the match bound stands for a matched value.
        let from_match_list = caps.local.get(rp.old.0.as_str()).is_some_and(|&s| {
            let l = &r.loops[s];
            l.vars.iter().position(|v| v.0 == rp.old.0).and_then(|i| l.lists.get(i)).is_some_and(|(list, _)| matches!(match_bound.get(list.as_str()), Some((_, Kind::List))))
        });
        match match_bound.get(rp.old.0.as_str()) {
            Some((_, Kind::Value)) => {}
            _ if from_match_list => {}
            _ => err(rp.old.1, format!("`replace ?{}`: only values bound by the match block can be replaced", rp.old.0), "name a value captured in `match` (or a `for` variable over a list captured there)"),
        }
        let emitted = r.emits.iter().any(|e| e.outputs().iter().any(|o| !o.is_list() && o.capture() == Some(rp.new.0.as_str())));
        if !emitted {
            err(rp.new.1, format!("`with ?{}`: the replacement must be a value created in the emit block", rp.new.0), "bind it on the left of an emit line");
        }
    }
}

/// Unused: bound once and never read.
fn check_unused(r: &Rule, caps: &Captures, err: &mut dyn FnMut(Pos, String, &str)) {
    for (c, (p, _)) in &caps.bound {
        let in_match = caps.match_occ.get(c).copied().unwrap_or(0);
        let used = caps.uses.get(c).copied().unwrap_or(0);
        let is_root = r.root.as_ref().is_some_and(|(root, _)| root == c);
        // A fragment's own captures (`name#n`) were checked with the fragment.
        if used == 0 && in_match <= 1 && !is_root && !c.contains('#') {
            let help = if caps.local.contains_key(c) && r.loops.iter().any(|l| l.vars.iter().any(|v| v.0 == *c)) { "drop it and its list from the `for`" } else { "write `_` instead, or use it in a check or in emit" };
            err(*p, format!("capture `?{c}` is bound but never used"), help);
        }
    }
}

/// An operator reference: known domain, known op; an emitted one needs an opset too.
pub(crate) fn check_op(f: &RuleFile, op: &OpRef, emitted: bool, err: &mut dyn FnMut(Pos, String, &str)) {
    let Some(alias) = &op.alias else {
        let what = if emitted { "emitted op" } else { "op" };
        err(op.pos, format!("{what} `{}` has no domain", op.name), "write it as `alias.Op` and declare the alias with `use domain <domain> as <alias> opset <N>`");
        return;
    };
    let Some(u) = resolve(f, op) else {
        err(op.pos, format!("unknown domain alias `{alias}` in `{alias}.{}`", op.name), &format!("declare it at the top of the file: `use domain {} as {alias} opset <N>`", if alias == "ms" { vocab::MICROSOFT } else { vocab::ONNX }));
        return;
    };
    if let Some(ops) = vocab::ops_of(&u.domain) {
        if !ops.contains(&op.name.as_str()) {
            let close: Vec<&str> = ops.iter().copied().filter(|o| o.eq_ignore_ascii_case(&op.name) || o.to_lowercase().starts_with(&op.name.to_lowercase())).take(3).collect();
            err(op.pos, format!("unknown op `{}` in domain `{}`", op.name, u.domain), &if close.is_empty() { "check the spelling against the domain's operator list".to_string() } else { format!("did you mean `{}`?", close.join("`, `")) });
        }
    }
    if emitted && u.opset.is_none() {
        err(op.pos, format!("emitted op `{alias}.{}` has no opset", op.name), &format!("add the opset to its domain: `use domain {} as {alias} opset <N>`", u.domain));
    }
}

/// One match line on its own: its op, `{a, b}`, `-` and `..?xs` where they may stand.
pub(crate) fn check_match_line(f: &RuleFile, m: &MatchLine, err: &mut dyn FnMut(Pos, String, &str)) {
    check_op(f, &m.op, false, err);
    for a in &m.attrs {
        check_dtype_attr(&m.op, &a.name, &a.value, err);
    }
    if m.commutative && (m.args.len() != 2 || m.rest) {
        err(m.pos, format!("`{{...}}` operands of `{}` must be exactly two", m.op.name), "write `(a, b, ...)` for ordered operands");
    }
    // `-` (absent input): only an ordered operand before a present one says anything.
    for o in m.outputs.iter().filter(|o| matches!(o, Slot::Absent(_))) {
        err(o.pos(), "`-` in an output position".to_string(), "`-` marks an absent input; an output nobody reads is `_`");
    }
    if m.commutative {
        for a in m.args.iter().filter(|a| matches!(a, Slot::Absent(_))) {
            err(a.pos(), "`-` between `{...}`".to_string(), "an absent input has a fixed slot: write the operands in order `(a, -, ...)`");
        }
    } else if let Some(Slot::Absent(p)) = m.args.last() {
        if !m.rest {
            err(*p, "trailing `-` says nothing".to_string(), "trailing absent inputs never count: drop it (the operand count already excludes them)");
        }
    }
    list_outputs_last(&m.outputs, err);
    for a in m.args.iter().filter(|a| a.is_list()) {
        err(a.pos(), format!("list capture `..?{}` among the operands", a.capture().unwrap_or_default()), "a list capture binds the remaining outputs of a node; `..` alone lets more inputs follow");
    }
}

/// A list capture takes every output from its position on, so it can only be the last.
pub(crate) fn list_outputs_last(outputs: &[Slot], err: &mut dyn FnMut(Pos, String, &str)) {
    let n = outputs.len();
    for o in outputs.iter().take(n.saturating_sub(1)).filter(|o| o.is_list()) {
        err(o.pos(), format!("list capture `..?{}` before the last output", o.capture().unwrap_or_default()), "a list capture binds every output from its position on: put it last");
    }
}

pub(crate) fn note_kind<'a>(c: &'a str, p: Pos, k: Kind, bound: &mut BTreeMap<&'a str, (Pos, Kind)>, err: &mut dyn FnMut(Pos, String, &str)) {
    match bound.get(c) {
        Some((_, k0)) if *k0 != k => err(p, format!("capture `?{c}` is used both as a value and as an attribute"), "use two different captures"),
        Some(_) => {}
        None => {
            bound.insert(c, (p, k));
        }
    }
}

/// Every match line must be reachable from the root by following operands to producers.
fn check_connected(r: &Rule, root: &str, err: &mut dyn FnMut(Pos, String, &str)) {
    let mut reached: HashSet<usize> = HashSet::new();
    let mut values: Vec<&str> = vec![root];
    let mut known: HashSet<&str> = HashSet::new();
    while let Some(v) = values.pop() {
        if !known.insert(v) {
            continue;
        }
        for (i, m) in r.matches.iter().enumerate() {
            if m.outputs.iter().any(|o| o.capture() == Some(v)) && reached.insert(i) {
                values.extend(m.args.iter().filter_map(Slot::capture));
                values.extend(m.outputs.iter().filter_map(Slot::capture));
            }
        }
    }
    for (i, m) in r.matches.iter().enumerate() {
        if !reached.contains(&i) {
            err(m.pos, format!("this `{}` is not connected to the root", m.op.name), "its output must be an operand of a line reachable from `root`");
        }
    }
    for (i, m) in r.matches.iter().enumerate() {
        if m.outputs.iter().all(|o| o.capture().is_none()) {
            err(m.pos, format!("match line {} binds no output", i + 1), "name at least one output with a capture");
        }
    }
}

/// The attributes that hold a dtype (`Cast`'s `to`) take a dtype name, never a raw
/// `TensorProto.DataType` code: `[to: f32]`, not `[to: 1]`.
pub(crate) fn check_dtype_attr(op: &OpRef, name: &str, v: &AttrVal, err: &mut dyn FnMut(Pos, String, &str)) {
    if op.name == "Cast" && name == "to" {
        if let AttrVal::Lit(Literal::Int(code), p) = v {
            let hint = ep_sets::DType::ALL.iter().find(|d| i64::from(d.to_onnx()) == *code).map_or(String::new(), |d| format!(" (`{code}` is `{d}`)"));
            err(*p, format!("`Cast` target written as the code `{code}`"), &format!("write the dtype name, e.g. `[to: f32]`{hint}; the dtypes are {}", dtype_names()));
        }
    }
}

/// Every dtype name, for messages.
pub(crate) fn dtype_names() -> String {
    ep_sets::DType::ALL.map(|d| d.name()).join(", ")
}

/// Does `e` give a dtype name (`dtype(?x)`, `branch_dtype(?g, i)`)?
fn gives_dtype(e: &Expr) -> bool {
    matches!(e, Expr::Call { name, .. } if name == "dtype" || name == "branch_dtype")
}

/// Whether `s` is a form `stored_form(?w)` can give: `float`, or `<4|8>-bit, block <n>, <zero
/// points>[, act-order <8 hex digits>]` (`ir::StoredForm`'s spelling: the digits fingerprint
/// the row order). A comparison with anything else would be a check that never passes.
fn is_stored_form(s: &str) -> bool {
    if s == "float" {
        return true;
    }
    let s = match s.rsplit_once(", act-order ") {
        Some((form, order)) if order.len() == 8 && order.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) => form,
        Some(_) => return false,
        None => s,
    };
    let parts: Vec<&str> = s.split(", ").collect();
    let [bits, block, zeros] = parts[..] else { return false };
    let block_ok = block.strip_prefix("block ").and_then(|b| b.parse::<usize>().ok()).is_some_and(|b| b > 0);
    matches!(bits, "4-bit" | "8-bit") && block_ok && matches!(zeros, "mid zero point" | "integer zero points" | "float zero points")
}

pub(crate) fn check_expr(e: &Expr, err: &mut dyn FnMut(Pos, String, &str)) {
    if let Expr::Bin { op: BinOp::Eq | BinOp::Ne, lhs, rhs, .. } = e {
        for (a, b) in [(lhs, rhs), (rhs, lhs)] {
            if let (true, Expr::Lit(Literal::Str(s), p)) = (gives_dtype(a), b.as_ref()) {
                err(*p, format!("dtype compared with the string \"{s}\""), &format!("write the dtype as a name, unquoted, so it is checked: `{s}` ({})", dtype_names()));
            }
            if let (Expr::Call { name, .. }, Expr::Lit(lit, p)) = (a.as_ref(), b.as_ref()) {
                if name == "stored_form" && !matches!(lit, Literal::Str(s) if is_stored_form(s)) {
                    err(
                        *p,
                        "`stored_form` compared with something it never gives".to_string(),
                        "it gives \"float\" or \"<4|8>-bit, block <n>, <mid zero point|integer zero points|float zero points>\" (\", act-order <8 hex digits of the row order>\" after it for GPTQ act-order), e.g. \"4-bit, block 32, float zero points\"",
                    );
                }
            }
        }
    }
    match e {
        Expr::Call { name, args, pos } => {
            match vocab::FUNCTIONS.iter().find(|f| f.0 == name) {
                None => err(*pos, format!("unknown function `{name}`"), &format!("checks may call: {}", vocab::FUNCTIONS.iter().map(|f| f.0).collect::<Vec<_>>().join(", "))),
                Some(f) if f.1 != args.len() => err(*pos, format!("`{name}` takes {} argument(s), not {}", f.1, args.len()), f.2),
                Some(_) => {}
            }
            args.iter().for_each(|a| check_expr(a, err));
        }
        Expr::Bin { lhs, rhs, .. } => {
            check_expr(lhs, err);
            check_expr(rhs, err);
        }
        Expr::Not(e, _) => check_expr(e, err),
        Expr::List(items, _) => items.iter().for_each(|a| check_expr(a, err)),
        _ => {}
    }
}

fn check_cycles(files: &[RuleFile], out: &mut Vec<Diagnostic>) {
    // Edges a -> b mean "a runs before b".
    let mut edges: HashMap<&str, Vec<&str>> = HashMap::new();
    let mut at: HashMap<&str, (&str, Pos)> = HashMap::new();
    for f in files {
        for r in &f.rules {
            at.insert(&r.id, (&f.path, r.pos));
            for (b, _) in &r.before {
                edges.entry(&r.id).or_default().push(b);
            }
            for (a, _) in &r.after {
                edges.entry(a).or_default().push(&r.id);
            }
        }
    }
    let mut state: HashMap<&str, u8> = HashMap::new();
    // Depth-first from `start`, without recursion (a chain of ten thousand `before`s
    // overflowed the stack): `path` holds each node on the way with its next edge to follow.
    // 1 = on the path, 2 = done. The cycle found is the path from the node reached again.
    fn visit<'a>(start: &'a str, edges: &HashMap<&'a str, Vec<&'a str>>, state: &mut HashMap<&'a str, u8>) -> Option<Vec<&'a str>> {
        if state.contains_key(start) {
            return None;
        }
        state.insert(start, 1);
        let mut path: Vec<(&str, usize)> = vec![(start, 0)];
        while let Some((n, next)) = path.last_mut() {
            let n = *n;
            match edges.get(n).and_then(|v| v.get(*next)) {
                Some(&m) => {
                    *next += 1;
                    match state.get(m) {
                        Some(1) => {
                            let from = path.iter().position(|(s, _)| *s == m).unwrap_or(0);
                            let mut cyc: Vec<&str> = path[from..].iter().map(|(s, _)| *s).collect();
                            cyc.push(m);
                            return Some(cyc);
                        }
                        Some(_) => {}
                        None => {
                            state.insert(m, 1);
                            path.push((m, 0));
                        }
                    }
                }
                None => {
                    path.pop();
                    state.insert(n, 2);
                }
            }
        }
        None
    }
    let mut ids: Vec<&str> = at.keys().copied().collect();
    ids.sort();
    for id in ids {
        if let Some(cyc) = visit(id, &edges, &mut state) {
            // The cycle may pass through an id no rule defines (`before x` in one rule,
            // `after x` in another); point at the first rule on it that is defined. Every
            // edge has a defined rule at one end, so there is one.
            let Some(&(file, pos)) = cyc.iter().find_map(|n| at.get(n)) else { return };
            out.push(Diagnostic::new(file, pos, format!("`before`/`after` form a cycle: {}", cyc.join(" -> ")), "remove one of the orderings"));
            return;
        }
    }
}
