//! From text to [`RuleFile`]: pest does the syntax, this module builds the tree and keeps
//! every position.

use crate::ast::{AttrPat, AttrVal, BinOp, Check, EmitArg, EmitFragment, EmitLine, EmitUse, Expr, ForLoop, Fragment, FragmentItem, FragmentUse, Let, Literal, MatchLine, MsgPart, OpRef, Pos, Replace, RuleFile, Slot, UseDecl};
use crate::diag::Diagnostic;
use pest::iterators::Pair;
use pest::Parser;

#[derive(pest_derive::Parser)]
#[grammar = "grammar.pest"]
struct RuleParser;

/// How deeply brackets (`(`, `[`, `{`) may nest in a file or in a message's `{...}`. The
/// grammar recurses once per level, so unbounded nesting overflowed the stack (an abort, not
/// an error) at a few hundred levels; the real rules nest fewer than 10.
pub const MAX_NESTING: usize = 32;

/// How tall an expression tree may be: a chain of `a + b + ...` or a run of `!` parses
/// without recursion but builds one tree level per operator, and every later walk of the
/// tree recurses, so tens of thousands of operators overflowed the stack.
pub const MAX_EXPR_DEPTH: usize = 128;

/// The largest `.rule` file read. Parsing is linear, but some checks compare every line of a
/// rule with every other (about 3 s for a 1 MB rule in a debug build); the real files are
/// under 12 KB.
pub const MAX_FILE_BYTES: usize = 1 << 20;

/// One source being parsed: its name in messages and its line index.
struct Cx<'a> {
    path: &'a str,
    lines: Lines<'a>,
}

impl<'a> Cx<'a> {
    fn new(path: &'a str, src: &'a str) -> Self {
        Cx { path, lines: Lines::new(src) }
    }

    fn pos(&self, p: &Pair<Rule>) -> Pos {
        self.lines.pos(p.as_span().start())
    }
}

/// Line and column (1-based, the column in characters) of byte offsets in one source, in
/// O(log n) per offset. pest's `Position::line_col` scans the text from its start on every
/// call, which made parsing quadratic: a 690 KB file took over a minute.
struct Lines<'a> {
    src: &'a [u8],
    /// Byte offset where each line starts.
    starts: Vec<usize>,
    /// Characters before each block of [`Lines::BLOCK`] bytes.
    chars_before: Vec<usize>,
}

impl<'a> Lines<'a> {
    const BLOCK: usize = 64;

    fn new(src: &'a str) -> Self {
        let bytes = src.as_bytes();
        let starts = std::iter::once(0).chain(bytes.iter().enumerate().filter(|(_, &b)| b == b'\n').map(|(i, _)| i + 1)).collect();
        let mut chars_before = Vec::with_capacity(bytes.len() / Self::BLOCK + 1);
        let mut n = 0;
        for block in bytes.chunks(Self::BLOCK) {
            chars_before.push(n);
            n += chars_in(block);
        }
        chars_before.push(n);
        Lines { src: bytes, starts, chars_before }
    }

    /// Characters in `src[..offset]`.
    fn chars_to(&self, offset: usize) -> usize {
        let offset = offset.min(self.src.len());
        let block = offset / Self::BLOCK;
        self.chars_before[block] + chars_in(&self.src[block * Self::BLOCK..offset])
    }

    fn pos(&self, offset: usize) -> Pos {
        let line = self.starts.partition_point(|&s| s <= offset).max(1);
        let start = self.starts[line - 1];
        Pos { line, col: self.chars_to(offset) - self.chars_to(start) + 1 }
    }
}

/// Characters in a run of UTF-8: every byte but continuation bytes starts one.
fn chars_in(bytes: &[u8]) -> usize {
    bytes.iter().filter(|&&b| b & 0xC0 != 0x80).count()
}

/// The first bracket that opens level [`MAX_NESTING`] + 1, outside strings and comments, as
/// an error.
fn check_nesting(cx: &Cx, src: &str) -> Result<(), Diagnostic> {
    let bytes = src.as_bytes();
    let (mut depth, mut i) = (0usize, 0);
    while i < bytes.len() {
        match bytes[i] {
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                i = bytes[i..].iter().position(|&b| b == b'\n').map_or(bytes.len(), |n| i + n);
            }
            b'"' => {
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'(' | b'[' | b'{' => {
                depth += 1;
                if depth > MAX_NESTING {
                    return Err(Diagnostic::new(
                        cx.path,
                        cx.lines.pos(i),
                        format!("brackets nest more than {MAX_NESTING} levels deep"),
                        "split the expression with `let ?x = ...`",
                    ));
                }
            }
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    Ok(())
}

/// Parses one file. `path` is how the file is named in messages.
pub fn parse_file(path: &str, src: &str) -> Result<RuleFile, Diagnostic> {
    if src.len() > MAX_FILE_BYTES {
        return Err(Diagnostic::new(
            path,
            Pos { line: 1, col: 1 },
            format!("the file holds {} bytes; a rule file may hold at most {MAX_FILE_BYTES}", src.len()),
            "split it into several files",
        ));
    }
    let cx = &Cx::new(path, src);
    check_nesting(cx, src)?;
    let mut pairs = RuleParser::parse(Rule::file, src).map_err(|e| syntax_error(cx, e))?;
    let file = pairs.next().expect("the file rule always yields one pair");
    let mut out = RuleFile { path: path.to_string(), uses: Vec::new(), rules: Vec::new(), fragments: Vec::new(), emit_fragments: Vec::new() };
    for item in file.into_inner() {
        match item.as_rule() {
            Rule::use_decl => out.uses.push(use_decl(cx, item)),
            Rule::rule => out.rules.push(rule(cx, item)?),
            Rule::fragment => out.fragments.push(fragment(cx, item)?),
            Rule::emit_fragment => out.emit_fragments.push(emit_fragment(cx, item)?),
            _ => {}
        }
    }
    Ok(out)
}

fn syntax_error(cx: &Cx, e: pest::error::Error<Rule>) -> Diagnostic {
    let (line, col) = match e.line_col {
        pest::error::LineColLocation::Pos(p) | pest::error::LineColLocation::Span(p, _) => p,
    };
    let expected = match &e.variant {
        pest::error::ErrorVariant::ParsingError { positives, .. } => {
            let mut names: Vec<String> = positives.iter().map(|r| describe(*r)).collect();
            names.sort();
            names.dedup();
            names.join(", ")
        }
        pest::error::ErrorVariant::CustomError { message } => message.clone(),
    };
    Diagnostic::new(
        cx.path,
        Pos { line, col },
        format!("syntax error: expected {expected}"),
        "see docs/rule-language.md for the grammar of each construct",
    )
}

fn describe(r: Rule) -> String {
    match r {
        Rule::capture => "a capture like `?x`".into(),
        Rule::slot => "a capture `?x` or `_`".into(),
        Rule::ident => "a name".into(),
        Rule::rule_id => "a rule id like `fuse.gqa`".into(),
        Rule::expr | Rule::or_expr | Rule::primary | Rule::unary => "an expression".into(),
        Rule::string => "a string \"...\"".into(),
        Rule::op_ref => "an operator like `onnx.Add`".into(),
        Rule::EOI => "end of file".into(),
        other => format!("`{other:?}`"),
    }
}

fn use_decl(cx: &Cx, p: Pair<Rule>) -> UseDecl {
    let at = cx.pos(&p);
    let mut it = p.into_inner();
    let domain = it.next().map(|x| x.as_str().to_string()).unwrap_or_default();
    let alias = it.next().map(|x| x.as_str().to_string()).unwrap_or_default();
    let opset = it.next().and_then(|o| o.into_inner().next()).and_then(|i| i.as_str().parse().ok());
    UseDecl { domain, alias, opset, pos: at, from_prelude: false }
}

/// A rule with nothing in it yet, at `at`.
fn empty_rule(at: Pos) -> Rule_ {
    Rule_ {
        id: String::new(),
        pos: at,
        doc: String::new(),
        stage: None,
        priority: 0,
        before: vec![],
        after: vec![],
        matches: vec![],
        root: None,
        lets: vec![],
        checks: vec![],
        emits: vec![],
        replaces: vec![],
        loops: vec![],
        emit_pos: at,
        match_pos: at,
        uses: vec![],
        emit_uses: vec![],
    }
}

fn rule(cx: &Cx, p: Pair<Rule>) -> Result<Rule_, Diagnostic> {
    let at = cx.pos(&p);
    let mut r = empty_rule(at);
    let mut docs = Vec::new();
    for item in p.into_inner() {
        match item.as_rule() {
            Rule::doc => docs.push(item.as_str().trim_start_matches("///").trim().to_string()),
            Rule::rule_id => {
                r.id = item.as_str().to_string();
                r.pos = cx.pos(&item);
            }
            Rule::stage_decl => r.stage = item.into_inner().next().map(|i| (i.as_str().to_string(), cx.pos(&i))),
            Rule::priority_decl => {
                let i = item.into_inner().next().expect("grammar: priority has an int");
                r.priority = i.as_str().parse().map_err(|_| {
                    Diagnostic::new(cx.path, cx.pos(&i), "priority does not fit in 64 bits", "use a smaller number")
                })?;
            }
            Rule::before_decl => r.before.extend(item.into_inner().map(|i| (i.as_str().to_string(), cx.pos(&i)))),
            Rule::after_decl => r.after.extend(item.into_inner().map(|i| (i.as_str().to_string(), cx.pos(&i)))),
            Rule::match_block => {
                r.match_pos = cx.pos(&item);
                for line in item.into_inner() {
                    match line.as_rule() {
                        Rule::root_decl => {
                            let c = line.into_inner().next().expect("grammar: root has a capture");
                            r.root = Some((cap_name(&c), cx.pos(&c)));
                        }
                        Rule::fragment_use => r.uses.push(fragment_use(cx, line)),
                        _ => r.matches.push(match_line(cx, line)?),
                    }
                }
            }
            Rule::check_decl => r.checks.push(check(cx, item)?),
            Rule::check_use => r.uses.push(fragment_use(cx, item)),
            Rule::let_decl => r.lets.push(let_decl(cx, item)?),
            Rule::emit_block => {
                r.emit_pos = cx.pos(&item);
                for line in item.into_inner() {
                    match line.as_rule() {
                        Rule::for_block => {
                            let scope = r.loops.len();
                            let at = cx.pos(&line);
                            let mut it = line.into_inner();
                            let caps = |p: Pair<Rule>| p.into_inner().map(|c| (cap_name(&c), cx.pos(&c))).collect::<Vec<_>>();
                            let vars = caps(it.next().expect("grammar: for variables"));
                            let lists = caps(it.next().expect("grammar: for lists"));
                            r.loops.push(ForLoop { vars, lists, pos: at });
                            for inner in it {
                                emit_item(cx, inner, Some(scope), &mut r)?;
                            }
                        }
                        Rule::emit_use => {
                            let u = emit_use(cx, line, &r)?;
                            r.emit_uses.push(u);
                        }
                        _ => emit_item(cx, line, None, &mut r)?,
                    }
                }
            }
            _ => {}
        }
    }
    r.doc = docs.join("\n");
    Ok(r)
}

type Rule_ = crate::ast::Rule;

fn let_decl(cx: &Cx, item: Pair<Rule>) -> Result<Let, Diagnostic> {
    let mut it = item.into_inner();
    let c = it.next().expect("grammar: let capture");
    let e = it.next().expect("grammar: let expr");
    let expr_text = e.as_str().trim().to_string();
    Ok(Let { name: cap_name(&c), pos: cx.pos(&c), expr: expr(cx, e)?, expr_text, origin: None })
}

/// `fragment name(?a, ?b) -> (?r) { ... }`.
fn fragment(cx: &Cx, p: Pair<Rule>) -> Result<Fragment, Diagnostic> {
    let mut f = Fragment { name: String::new(), pos: cx.pos(&p), doc: String::new(), params: vec![], results: vec![], body: vec![] };
    let mut docs = Vec::new();
    for item in p.into_inner() {
        match item.as_rule() {
            Rule::doc => docs.push(item.as_str().trim_start_matches("///").trim().to_string()),
            Rule::ident => {
                f.name = item.as_str().to_string();
                f.pos = cx.pos(&item);
            }
            Rule::capture => f.params.push((cap_name(&item), cx.pos(&item))),
            Rule::frag_results => f.results.extend(item.into_inner().map(|c| (cap_name(&c), cx.pos(&c)))),
            Rule::fragment_use => f.body.push(FragmentItem::Use(fragment_use(cx, item))),
            Rule::check_use => f.body.push(FragmentItem::Use(fragment_use(cx, item))),
            Rule::match_line => f.body.push(FragmentItem::Line(match_line(cx, item)?)),
            Rule::let_decl => f.body.push(FragmentItem::Let(let_decl(cx, item)?)),
            Rule::check_decl => f.body.push(FragmentItem::Check(check(cx, item)?)),
            _ => {}
        }
    }
    f.doc = docs.join("\n");
    Ok(f)
}

/// `emit fragment name(?a, ?b) -> (?r) { ... }`: its lines are parsed as an emit block's.
fn emit_fragment(cx: &Cx, p: Pair<Rule>) -> Result<EmitFragment, Diagnostic> {
    let at = cx.pos(&p);
    let mut scratch = empty_rule(at);
    let mut f = EmitFragment { name: String::new(), pos: at, doc: String::new(), params: vec![], results: vec![], emits: vec![], replaces: vec![], uses: vec![] };
    let mut docs = Vec::new();
    for item in p.into_inner() {
        match item.as_rule() {
            Rule::doc => docs.push(item.as_str().trim_start_matches("///").trim().to_string()),
            Rule::ident => {
                f.name = item.as_str().to_string();
                f.pos = cx.pos(&item);
            }
            Rule::capture => f.params.push((cap_name(&item), cx.pos(&item))),
            Rule::frag_results => f.results.extend(item.into_inner().map(|c| (cap_name(&c), cx.pos(&c)))),
            Rule::replace_line | Rule::emit_line => emit_item(cx, item, None, &mut scratch)?,
            Rule::emit_use => {
                let u = emit_use(cx, item, &scratch)?;
                f.uses.push(u);
            }
            _ => {}
        }
    }
    f.doc = docs.join("\n");
    f.emits = scratch.emits;
    f.replaces = scratch.replaces;
    Ok(f)
}

/// `(?a, _) = name(?x, _, -1)` in an emit block, standing after the lines parsed so far.
fn emit_use(cx: &Cx, p: Pair<Rule>, r: &Rule_) -> Result<EmitUse, Diagnostic> {
    let at = cx.pos(&p);
    let mut u = EmitUse { name: String::new(), outputs: vec![], args: vec![], pos: at, emits_at: r.emits.len(), replaces_at: r.replaces.len() };
    for item in p.into_inner() {
        match item.as_rule() {
            Rule::outputs => u.outputs = outputs(cx, item),
            Rule::ident => u.name = item.as_str().to_string(),
            Rule::emit_args => {
                for a in item.into_inner() {
                    let inner = a.into_inner().next().expect("grammar: an argument");
                    let ap = cx.pos(&inner);
                    u.args.push(match inner.as_rule() {
                        Rule::slot => EmitArg::Slot(slot(cx, inner)),
                        Rule::dtype_name => EmitArg::Lit(dtype_name(cx, &inner)?, ap),
                        _ => EmitArg::Lit(literal(cx, inner)?, ap),
                    });
                }
            }
            _ => {}
        }
    }
    Ok(u)
}

/// A use of a fragment: `(?a, _) = name(?x, _, -)` or `check name(?x)`.
fn fragment_use(cx: &Cx, p: Pair<Rule>) -> FragmentUse {
    let in_checks = p.as_rule() == Rule::check_use;
    let at = cx.pos(&p);
    let mut u = FragmentUse { name: String::new(), outputs: vec![], args: vec![], in_checks, pos: at };
    for item in p.into_inner() {
        match item.as_rule() {
            Rule::outputs => u.outputs = outputs(cx, item),
            Rule::ident => {
                u.name = item.as_str().to_string();
                if in_checks {
                    u.pos = cx.pos(&item);
                }
            }
            Rule::use_args => u.args = item.into_inner().map(|x| slot(cx, x)).collect(),
            _ => {}
        }
    }
    u
}

/// A `replace` or an emit line, at the top of the emit block (`scope` None) or in a `for`.
fn emit_item(cx: &Cx, line: Pair<Rule>, scope: Option<usize>, r: &mut Rule_) -> Result<(), Diagnostic> {
    match line.as_rule() {
        Rule::replace_line => replace_line(cx, line, scope, r)?,
        _ => r.emits.push(emit_line(cx, line, scope)?),
    }
    Ok(())
}

/// `replace ?old with ?new`, or `replace (?a, _, ?b) with alias.Op(...)`: the node is emitted
/// where the `replace` stands, its outputs named where the list names a value (hidden captures
/// `?a#with`), and each named value replaced by its output, in order.
fn replace_line(cx: &Cx, line: Pair<Rule>, scope: Option<usize>, r: &mut Rule_) -> Result<(), Diagnostic> {
    let at = cx.pos(&line);
    let mut it = line.into_inner();
    let olds = outputs(cx, it.next().expect("grammar: replaced values"));
    let new = it.next().expect("grammar: replacement");
    for o in &olds {
        if matches!(o, Slot::Absent(_) | Slot::List(..)) {
            return Err(Diagnostic::new(cx.path, o.pos(), "`replace` lists the values to replace: captures, or `_` for an output left unnamed", "write `replace (?out, _, ?sum) with alias.Op(...)`"));
        }
    }
    if new.as_rule() == Rule::capture {
        let [Slot::Capture(old, old_pos)] = olds.as_slice() else {
            return Err(Diagnostic::new(cx.path, at, "a list of values is replaced by the outputs of one emitted node", "write `replace (?a, ?b) with alias.Op(...)`, or one `replace ?old with ?new` per value"));
        };
        r.replaces.push(Replace { old: (old.clone(), *old_pos), new: (cap_name(&new), cx.pos(&new)), pos: at, scope });
        return Ok(());
    }
    let hidden = |c: &str| format!("{c}#with");
    let outs: Vec<Slot> = olds.iter().map(|o| match o {
        Slot::Capture(c, p) => Slot::Capture(hidden(c), *p),
        other => Slot::Wild(other.pos()),
    }).collect();
    if outs.iter().all(|o| matches!(o, Slot::Wild(_))) {
        return Err(Diagnostic::new(cx.path, at, "this `replace` replaces nothing", "name the value an output replaces: `replace ?out with alias.Op(...)`"));
    }
    r.emits.push(op_call(cx, new, outs, at, scope)?);
    for o in &olds {
        if let Slot::Capture(c, p) = o {
            r.replaces.push(Replace { old: (c.clone(), *p), new: (hidden(c), *p), pos: at, scope });
        }
    }
    Ok(())
}

fn cap_name(p: &Pair<Rule>) -> String {
    p.as_str().trim_start_matches('?').to_string()
}

fn slot(cx: &Cx, p: Pair<Rule>) -> Slot {
    let inner = p.into_inner().next().expect("grammar: slot has one child");
    match inner.as_rule() {
        Rule::capture => Slot::Capture(cap_name(&inner), cx.pos(&inner)),
        Rule::absent => Slot::Absent(cx.pos(&inner)),
        Rule::list_capture => {
            let c = inner.into_inner().next().expect("grammar: list capture has a capture");
            Slot::List(cap_name(&c), cx.pos(&c))
        }
        _ => Slot::Wild(cx.pos(&inner)),
    }
}

fn outputs(cx: &Cx, p: Pair<Rule>) -> Vec<Slot> {
    p.into_inner().map(|x| slot(cx, x)).collect()
}

fn op_ref(cx: &Cx, p: Pair<Rule>) -> OpRef {
    let at = cx.pos(&p);
    let parts: Vec<String> = p.into_inner().map(|i| i.as_str().to_string()).collect();
    match parts.as_slice() {
        [alias, name] => OpRef { alias: Some(alias.clone()), name: name.clone(), pos: at, resolved: None },
        [name] => OpRef { alias: None, name: name.clone(), pos: at, resolved: None },
        _ => OpRef { alias: None, name: String::new(), pos: at, resolved: None },
    }
}

fn match_line(cx: &Cx, p: Pair<Rule>) -> Result<MatchLine, Diagnostic> {
    let at = cx.pos(&p);
    let mut it = p.into_inner();
    let outs = outputs(cx, it.next().expect("grammar: outputs"));
    let op = op_ref(cx, it.next().expect("grammar: op"));
    let args_pair = it.next().expect("grammar: args");
    let commutative = args_pair.as_rule() == Rule::commutative_args;
    let mut args = Vec::new();
    let mut rest = false;
    for a in args_pair.into_inner().next().expect("grammar: arg_list").into_inner() {
        match a.as_rule() {
            Rule::rest => rest = true,
            _ => args.push(slot(cx, a)),
        }
    }
    let mut attrs = Vec::new();
    if let Some(ap) = it.next() {
        for a in ap.into_inner() {
            let at = cx.pos(&a);
            let mut ai = a.into_inner();
            let name = ai.next().expect("grammar").as_str().to_string();
            let value = attr_val(cx, ai.next().expect("grammar"))?;
            let default = ai.next().map(|l| literal(cx, l)).transpose()?;
            attrs.push(AttrPat { name, value, default, pos: at });
        }
    }
    Ok(MatchLine { outputs: outs, op, args, commutative, rest, attrs, pos: at, origin: None })
}

fn attr_val(cx: &Cx, p: Pair<Rule>) -> Result<AttrVal, Diagnostic> {
    let inner = p.into_inner().next().expect("grammar: attr value");
    let at = cx.pos(&inner);
    Ok(match inner.as_rule() {
        Rule::capture => AttrVal::Capture(cap_name(&inner), at),
        Rule::dtype_name => AttrVal::Lit(dtype_name(cx, &inner)?, at),
        _ => AttrVal::Lit(literal(cx, inner)?, at),
    })
}

fn literal(cx: &Cx, p: Pair<Rule>) -> Result<Literal, Diagnostic> {
    let p = if p.as_rule() == Rule::literal { p.into_inner().next().expect("grammar: literal") } else { p };
    let at = cx.pos(&p);
    let bad = |what: &str| Diagnostic::new(cx.path, at, format!("{what} `{}` is out of range", p.as_str()), "use a smaller value");
    Ok(match p.as_rule() {
        Rule::int => Literal::Int(p.as_str().parse().map_err(|_| bad("integer"))?),
        Rule::float => Literal::Float(p.as_str().parse().map_err(|_| bad("number"))?),
        Rule::boolean => Literal::Bool(p.as_str() == "true"),
        Rule::string => Literal::Str(unescape(p.into_inner().next().map(|s| s.as_str()).unwrap_or(""))),
        Rule::list => Literal::List(p.into_inner().map(|l| literal(cx, l)).collect::<Result<_, _>>()?),
        _ => return Err(Diagnostic::new(cx.path, at, "expected a literal", "write a number, a string or a list")),
    })
}

/// A dtype token (`f16`) as a literal: a name of [`ep_sets::DType`], or an error naming the
/// ones that exist.
fn dtype_name(cx: &Cx, p: &Pair<Rule>) -> Result<Literal, Diagnostic> {
    let name = p.as_str();
    ep_sets::DType::parse(name).map(Literal::DType).ok_or_else(|| {
        Diagnostic::new(
            cx.path,
            cx.pos(p),
            format!("unknown dtype `{name}`"),
            format!("the dtypes are {}", ep_sets::DType::ALL.map(|d| d.name()).join(", ")),
        )
    })
}

fn unescape(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some(other) => out.push(other),
                None => {}
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn check(cx: &Cx, p: Pair<Rule>) -> Result<Check, Diagnostic> {
    let mut it = p.into_inner();
    let id_pair = it.next().expect("grammar: check id");
    let e = it.next().expect("grammar: check expr");
    let expr_text = e.as_str().trim().to_string();
    let expr_ = expr(cx, e)?;
    let msg = it.next().expect("grammar: check message");
    let message = message(cx, msg)?;
    Ok(Check { id: id_pair.as_str().to_string(), pos: cx.pos(&id_pair), expr: expr_, expr_text, message, origin: None })
}

/// Splits a message into text and `{expr}` parts; `{{` and `}}` are literal braces.
fn message(cx: &Cx, p: Pair<Rule>) -> Result<Vec<MsgPart>, Diagnostic> {
    let start = cx.pos(&p);
    let raw = p.into_inner().next().map(|s| s.as_str()).unwrap_or("");
    let mut parts = Vec::new();
    let mut text = String::new();
    let bytes: Vec<char> = raw.chars().collect();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c == '{' && bytes.get(i + 1) == Some(&'{') {
            text.push('{');
            i += 2;
        } else if c == '}' && bytes.get(i + 1) == Some(&'}') {
            text.push('}');
            i += 2;
        } else if c == '{' {
            let close = (i + 1..bytes.len()).find(|&j| bytes[j] == '}');
            let at = Pos { line: start.line, col: start.col + 1 + i };
            let Some(close) = close else {
                return Err(Diagnostic::new(cx.path, at, "unclosed `{` in message", "close it with `}`, or write `{{` for a brace"));
            };
            let inner: String = bytes[i + 1..close].iter().collect();
            // Positions in `inner` are relative to it (`shift` makes them absolute).
            let inner_cx = &Cx::new(cx.path, &inner);
            check_nesting(inner_cx, &inner).map_err(|d| Diagnostic { pos: at, ..d })?;
            let mut pairs = RuleParser::parse(Rule::expr_only, &inner).map_err(|_| {
                Diagnostic::new(cx.path, at, format!("`{{{inner}}}` in the message is not an expression"), "write an expression such as `{shape(?x)}`, or `{{` for a brace")
            })?;
            let e = pairs.next().and_then(|p| p.into_inner().next()).expect("grammar: expr_only has expr");
            if !text.is_empty() {
                parts.push(MsgPart::Text(std::mem::take(&mut text)));
            }
            let e = expr(inner_cx, e).map_err(|d| Diagnostic { pos: Pos { line: at.line, col: at.col + d.pos.col }, ..d })?;
            parts.push(MsgPart::Expr(shift(e, at)));
            i = close + 1;
        } else {
            text.push(c);
            i += 1;
        }
    }
    if !text.is_empty() {
        parts.push(MsgPart::Text(unescape(&text)));
    }
    Ok(parts)
}

/// Positions inside a message's `{...}` are relative to the braces; make them absolute.
fn shift(e: Expr, at: Pos) -> Expr {
    let mv = |p: Pos| Pos { line: at.line, col: at.col + p.col };
    match e {
        Expr::Capture(c, p) => Expr::Capture(c, mv(p)),
        Expr::Lit(l, p) => Expr::Lit(l, mv(p)),
        Expr::Call { name, args, pos } => Expr::Call { name, args: args.into_iter().map(|a| shift(a, at)).collect(), pos: mv(pos) },
        Expr::Bin { op, lhs, rhs, pos } => Expr::Bin { op, lhs: Box::new(shift(*lhs, at)), rhs: Box::new(shift(*rhs, at)), pos: mv(pos) },
        Expr::Not(e, p) => Expr::Not(Box::new(shift(*e, at)), mv(p)),
        Expr::List(items, p) => Expr::List(items.into_iter().map(|a| shift(a, at)).collect(), mv(p)),
    }
}

fn expr(cx: &Cx, p: Pair<Rule>) -> Result<Expr, Diagnostic> {
    expr_h(cx, p).map(|(e, _)| e)
}

/// An expression and the height of its tree, refused past [`MAX_EXPR_DEPTH`].
fn expr_h(cx: &Cx, p: Pair<Rule>) -> Result<(Expr, usize), Diagnostic> {
    let at = cx.pos(&p);
    let too_deep = |at: Pos| {
        Diagnostic::new(
            cx.path,
            at,
            format!("expression nests more than {MAX_EXPR_DEPTH} operators deep"),
            "split it with `let ?x = ...`",
        )
    };
    let node = |e: Expr, h: usize| if h > MAX_EXPR_DEPTH { Err(too_deep(at)) } else { Ok((e, h)) };
    match p.as_rule() {
        Rule::expr | Rule::primary => expr_h(cx, p.into_inner().next().expect("grammar: one child")),
        Rule::or_expr | Rule::and_expr | Rule::sum_expr | Rule::prod_expr | Rule::cmp_expr => {
            let fixed = match p.as_rule() {
                Rule::or_expr => Some(BinOp::Or),
                Rule::and_expr => Some(BinOp::And),
                _ => None,
            };
            let mut it = p.into_inner();
            let (mut lhs, mut h) = expr_h(cx, it.next().expect("grammar: operand"))?;
            while let Some(next) = it.next() {
                if next.as_rule() == Rule::in_op {
                    // `x in {a, b}` is `x == a || x == b`, compiled as written out.
                    let set = it.next().expect("grammar: a dtype set after `in`");
                    let mut alt: Option<Expr> = None;
                    for d in set.into_inner() {
                        let dp = cx.pos(&d);
                        let eq = Expr::Bin { op: BinOp::Eq, lhs: Box::new(lhs.clone()), rhs: Box::new(Expr::Lit(dtype_name(cx, &d)?, dp)), pos: at };
                        alt = Some(match alt {
                            None => eq,
                            Some(a) => Expr::Bin { op: BinOp::Or, lhs: Box::new(a), rhs: Box::new(eq), pos: at },
                        });
                    }
                    let n = alt.as_ref().map_or(0, count_alts);
                    (lhs, h) = node(alt.expect("grammar: a dtype set is not empty"), h + 1 + n)?;
                    continue;
                }
                let (op, rhs) = match fixed {
                    Some(op) => (op, next),
                    None => (bin_op(next.as_str()), it.next().expect("grammar: operand after operator")),
                };
                let (rhs, hr) = expr_h(cx, rhs)?;
                (lhs, h) = node(Expr::Bin { op, lhs: Box::new(lhs), rhs: Box::new(rhs), pos: at }, h.max(hr) + 1)?;
            }
            Ok((lhs, h))
        }
        Rule::unary => {
            let mut nots = 0;
            let mut inner = None;
            for c in p.into_inner() {
                if c.as_rule() == Rule::not_op {
                    nots += 1;
                } else {
                    inner = Some(expr_h(cx, c)?);
                }
            }
            let (mut e, h) = inner.expect("grammar: unary has an operand");
            if h + nots > MAX_EXPR_DEPTH {
                return Err(too_deep(at));
            }
            for _ in 0..nots {
                e = Expr::Not(Box::new(e), at);
            }
            Ok((e, h + nots))
        }
        Rule::call => {
            let mut it = p.into_inner();
            let name = it.next().expect("grammar: call name").as_str().to_string();
            let (args, h) = exprs_h(cx, it)?;
            node(Expr::Call { name, args, pos: at }, h + 1)
        }
        Rule::list_expr => {
            let (items, h) = exprs_h(cx, p.into_inner())?;
            node(Expr::List(items, at), h + 1)
        }
        Rule::capture => Ok((Expr::Capture(cap_name(&p), at), 1)),
        Rule::dtype_name => Ok((Expr::Lit(dtype_name(cx, &p)?, at), 1)),
        Rule::literal => Ok((Expr::Lit(literal(cx, p)?, at), 1)),
        _ => Err(Diagnostic::new(cx.path, at, "expected an expression", "see docs/rule-language.md, section Checks")),
    }
}

/// Several expressions (call arguments, list items) and the height of the tallest.
fn exprs_h<'i>(cx: &Cx, pairs: impl Iterator<Item = Pair<'i, Rule>>) -> Result<(Vec<Expr>, usize), Diagnostic> {
    let mut out = Vec::new();
    let mut h = 0;
    for p in pairs {
        let (e, he) = expr_h(cx, p)?;
        out.push(e);
        h = h.max(he);
    }
    Ok((out, h))
}

/// How many `||` a desugared `in` set holds.
fn count_alts(e: &Expr) -> usize {
    match e {
        Expr::Bin { op: BinOp::Or, lhs, .. } => 1 + count_alts(lhs),
        _ => 0,
    }
}

fn bin_op(s: &str) -> BinOp {
    match s {
        "==" => BinOp::Eq,
        "!=" => BinOp::Ne,
        "<" => BinOp::Lt,
        "<=" => BinOp::Le,
        ">" => BinOp::Gt,
        ">=" => BinOp::Ge,
        "+" => BinOp::Add,
        "-" => BinOp::Sub,
        "*" => BinOp::Mul,
        "/" => BinOp::Div,
        _ => BinOp::Rem,
    }
}

fn emit_line(cx: &Cx, p: Pair<Rule>, scope: Option<usize>) -> Result<EmitLine, Diagnostic> {
    let at = cx.pos(&p);
    let mut it = p.into_inner();
    let outs = outputs(cx, it.next().expect("grammar: outputs"));
    let call = it.next().expect("grammar: call");
    match call.as_rule() {
        Rule::helper_call => {
            let mut ci = call.into_inner();
            let name = ci.next().expect("grammar").as_str().to_string();
            Ok(EmitLine::Helper { outputs: outs, name, args: ci.map(|x| slot(cx, x)).collect(), pos: at, scope })
        }
        _ => op_call(cx, call, outs, at, scope),
    }
}

/// `alias.Op(operands) [attributes]` emitted with the given outputs.
fn op_call(cx: &Cx, call: Pair<Rule>, outs: Vec<Slot>, at: Pos, scope: Option<usize>) -> Result<EmitLine, Diagnostic> {
    let mut ci = call.into_inner();
    let op = op_ref(cx, ci.next().expect("grammar"));
    let mut args = Vec::new();
    let mut attrs = Vec::new();
    for c in ci {
        match c.as_rule() {
            Rule::slot => args.push(slot(cx, c)),
            _ => {
                for a in c.into_inner() {
                    let ap = cx.pos(&a);
                    let mut ai = a.into_inner();
                    let name = ai.next().expect("grammar").as_str().to_string();
                    attrs.push((name, attr_val(cx, ai.next().expect("grammar"))?, ap));
                }
            }
        }
    }
    Ok(EmitLine::Op { outputs: outs, op, args, attrs, pos: at, scope })
}
