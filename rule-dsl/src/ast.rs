//! The syntax tree of a `.rule` file. Every node keeps the position it came from, so semantic
//! errors and run-time diagnostics can point back at `file:line:col`.

/// A 1-based line and column in a `.rule` file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Pos {
    pub line: usize,
    pub col: usize,
}

/// One parsed `.rule` file.
#[derive(Clone, Debug)]
pub struct RuleFile {
    /// The path as it should appear in messages (relative to the crate that owns the rules).
    pub path: String,
    /// The file's `use domain` lines, then those it inherits from the set's prelude.
    pub uses: Vec<UseDecl>,
    pub rules: Vec<Rule>,
    pub fragments: Vec<Fragment>,
    /// `emit fragment`s: emit lines rules share.
    pub emit_fragments: Vec<EmitFragment>,
}

/// `use domain com.microsoft as ms opset 1`
#[derive(Clone, Debug)]
pub struct UseDecl {
    pub domain: String,
    pub alias: String,
    pub opset: Option<i64>,
    pub pos: Pos,
    /// Declared in the set's `prelude.rule`, not in this file (checked there, once).
    pub from_prelude: bool,
}

/// One `rule id { ... }` block.
#[derive(Clone, Debug)]
pub struct Rule {
    pub id: String,
    pub pos: Pos,
    /// The `///` lines above the rule, joined with newlines.
    pub doc: String,
    pub stage: Option<(String, Pos)>,
    pub priority: i64,
    pub before: Vec<(String, Pos)>,
    pub after: Vec<(String, Pos)>,
    pub matches: Vec<MatchLine>,
    pub root: Option<(String, Pos)>,
    /// `let ?x = expr`: attributes computed after the pattern matched, before the checks.
    pub lets: Vec<Let>,
    pub checks: Vec<Check>,
    /// Every emit line in order, those inside a `for` block included (their `scope`).
    pub emits: Vec<EmitLine>,
    /// Every `replace`, those inside a `for` block included (their `scope`).
    pub replaces: Vec<Replace>,
    /// The `for` blocks of the emit block, indexed by the `scope` of their lines.
    pub loops: Vec<ForLoop>,
    /// Where the `emit` block starts (or the rule, when it has none).
    pub emit_pos: Pos,
    pub match_pos: Pos,
    /// The fragments the rule uses, as written (in its match block and among its checks). After
    /// [`crate::prepare`], `matches`, `lets` and `checks` hold their inlined lines as well.
    pub uses: Vec<FragmentUse>,
    /// The emit fragments the emit block uses, as written. After [`crate::prepare`], `emits` and
    /// `replaces` hold their inlined lines, where each use stood.
    pub emit_uses: Vec<EmitUse>,
}

/// `emit fragment name(?a, ?b) -> ?r { ... }`: emit lines (op, helper and `replace` lines) that
/// rules share, inlined where an emit block uses them. Parameters and results are the user's
/// captures; every other capture is the fragment's own, fresh at each use.
#[derive(Clone, Debug)]
pub struct EmitFragment {
    pub name: String,
    pub pos: Pos,
    /// The `///` lines above it, joined with newlines.
    pub doc: String,
    pub params: Vec<(String, Pos)>,
    pub results: Vec<(String, Pos)>,
    /// The body's emit lines (those of its `replace ... with Op(..)` included), in order.
    pub emits: Vec<EmitLine>,
    /// The body's `replace`s, in order.
    pub replaces: Vec<Replace>,
    /// Other emit fragments it uses, where they stand (inlined before its own uses are).
    pub uses: Vec<EmitUse>,
}

/// `(?a, _) = name(?x, _, -1)` (or `name(..)` alone) in an emit block.
#[derive(Clone, Debug)]
pub struct EmitUse {
    pub name: String,
    /// The results as the user names them (`_`: not needed).
    pub outputs: Vec<Slot>,
    /// One per parameter.
    pub args: Vec<EmitArg>,
    pub pos: Pos,
    /// Where the use stands: how many of the rule's emit lines and replaces come before it.
    pub emits_at: usize,
    pub replaces_at: usize,
}

/// An argument of an emit fragment use: a capture or `_`, or a literal for a parameter the
/// fragment uses only as an attribute value (`-1`, `f32`).
#[derive(Clone, Debug)]
pub enum EmitArg {
    Slot(Slot),
    Lit(Literal, Pos),
}

/// `fragment name(?a, ?b) -> ?r { ... }`: a named sub-pattern (match lines, uses of other
/// fragments, lets and checks) that rules use like one match line. Its parameters and results
/// are shared with the user; every other capture is its own, fresh at each use.
#[derive(Clone, Debug)]
pub struct Fragment {
    pub name: String,
    pub pos: Pos,
    /// The `///` lines above it, joined with newlines.
    pub doc: String,
    pub params: Vec<(String, Pos)>,
    /// The values the fragment's lines produce, in the order a use names them.
    pub results: Vec<(String, Pos)>,
    /// The body in source order: lets and checks run in this order.
    pub body: Vec<FragmentItem>,
}

#[derive(Clone, Debug)]
pub enum FragmentItem {
    Line(MatchLine),
    Use(FragmentUse),
    Let(Let),
    Check(Check),
}

/// `(?a, ?b) = name(?x, _, -)` in a match block or a fragment, or `check name(?x)` among checks.
#[derive(Clone, Debug)]
pub struct FragmentUse {
    pub name: String,
    /// The results as the user names them (`_`: not needed); empty for `check name(..)`.
    pub outputs: Vec<Slot>,
    /// One per parameter: a capture, `_` (nothing to share), or `-` (an absent operand).
    pub args: Vec<Slot>,
    /// `check name(...)`: a fragment of lets and checks only, placed among the checks.
    pub in_checks: bool,
    pub pos: Pos,
}

/// Where an inlined line, let or check was written: the fragment, its file and position.
/// (The item's own positions are those of the use, so semantic errors point at the rule.)
#[derive(Clone, Debug, PartialEq)]
pub struct Origin {
    pub fragment: String,
    pub file: String,
    pub pos: Pos,
}

/// A capture (`?x`) or a wildcard (`_`) in an operand or output position.
#[derive(Clone, Debug, PartialEq)]
pub enum Slot {
    Capture(String, Pos),
    Wild(Pos),
    /// `-` in a match operand: the optional input must be absent (empty or past the end).
    Absent(Pos),
    /// `..?xs` last in an outputs tuple: the outputs from here to the node's last, bound as
    /// one list (a match line's outputs, or the values a helper returns).
    List(String, Pos),
}

impl Slot {
    /// The capture's name, a list capture's included.
    pub fn capture(&self) -> Option<&str> {
        match self {
            Slot::Capture(c, _) | Slot::List(c, _) => Some(c),
            Slot::Wild(_) | Slot::Absent(_) => None,
        }
    }
    pub fn pos(&self) -> Pos {
        match self {
            Slot::Capture(_, p) | Slot::Wild(p) | Slot::Absent(p) | Slot::List(_, p) => *p,
        }
    }
    pub fn is_list(&self) -> bool {
        matches!(self, Slot::List(..))
    }
}

/// `alias.Op`, or a bare `Op` (an error wherever a domain is needed).
#[derive(Clone, Debug)]
pub struct OpRef {
    pub alias: Option<String>,
    pub name: String,
    pub pos: Pos,
    /// For a line inlined from a fragment: the `use` line its alias resolved to in the
    /// fragment's file (the rule's file may name the domain differently, or not at all).
    pub resolved: Option<UseDecl>,
}

/// `?out = onnx.RMSNormalization(?sum, ?gamma) [axis: -1 default -1]`
#[derive(Clone, Debug)]
pub struct MatchLine {
    pub outputs: Vec<Slot>,
    pub op: OpRef,
    pub args: Vec<Slot>,
    /// `{a, b}`: the two operands may come in either order.
    pub commutative: bool,
    /// `(a, b, ..)`: more inputs may follow and are ignored.
    pub rest: bool,
    pub attrs: Vec<AttrPat>,
    pub pos: Pos,
    /// Set when the line was inlined from a fragment.
    pub origin: Option<Origin>,
}

/// An attribute constraint or capture in a match line.
#[derive(Clone, Debug)]
pub struct AttrPat {
    pub name: String,
    pub value: AttrVal,
    /// The value the operator's schema uses when the attribute is absent.
    pub default: Option<Literal>,
    pub pos: Pos,
}

#[derive(Clone, Debug)]
pub enum AttrVal {
    Capture(String, Pos),
    Lit(Literal, Pos),
}

#[derive(Clone, Debug, PartialEq)]
pub enum Literal {
    Int(i64),
    Float(f64),
    Str(String),
    Bool(bool),
    List(Vec<Literal>),
    /// A dtype token (`f32`): an attribute's `TensorProto.DataType` code (`[to: f32]` is
    /// `to = 1`), a dtype name in an expression (`dtype(?x) == f16`).
    DType(ep_sets::DType),
}

/// `check id: expr else "message {expr}"`
#[derive(Clone, Debug)]
pub struct Check {
    pub id: String,
    pub pos: Pos,
    pub expr: Expr,
    /// The source text of the condition, for docs and records.
    pub expr_text: String,
    pub message: Vec<MsgPart>,
    /// Set when the check was inlined from a fragment.
    pub origin: Option<Origin>,
}

#[derive(Clone, Debug)]
pub enum MsgPart {
    Text(String),
    Expr(Expr),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinOp {
    Or,
    And,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Add,
    Sub,
    Mul,
    Div,
    Rem,
}

#[derive(Clone, Debug)]
pub enum Expr {
    Capture(String, Pos),
    Lit(Literal, Pos),
    Call { name: String, args: Vec<Expr>, pos: Pos },
    Bin { op: BinOp, lhs: Box<Expr>, rhs: Box<Expr>, pos: Pos },
    Not(Box<Expr>, Pos),
    /// `[e1, e2, ...]` with computed items (a `let` of integers becomes an ints attribute).
    List(Vec<Expr>, Pos),
}

impl Expr {
    pub fn pos(&self) -> Pos {
        match self {
            Expr::Capture(_, p) | Expr::Lit(_, p) | Expr::Not(_, p) | Expr::List(_, p) => *p,
            Expr::Call { pos, .. } | Expr::Bin { pos, .. } => *pos,
        }
    }
    /// Calls `f` on every capture the expression mentions.
    pub fn captures<'a>(&'a self, f: &mut dyn FnMut(&'a str, Pos)) {
        match self {
            Expr::Capture(c, p) => f(c, *p),
            Expr::Lit(..) => {}
            Expr::Call { args, .. } => args.iter().for_each(|a| a.captures(f)),
            Expr::Bin { lhs, rhs, .. } => {
                lhs.captures(f);
                rhs.captures(f);
            }
            Expr::Not(e, _) => e.captures(f),
            Expr::List(items, _) => items.iter().for_each(|a| a.captures(f)),
        }
    }
}

/// A line of an `emit` block that creates values. `scope` is the index (in `Rule::loops`) of
/// the `for` block the line is in, `None` at the top of the emit block.
#[derive(Clone, Debug)]
pub enum EmitLine {
    Op { outputs: Vec<Slot>, op: OpRef, args: Vec<Slot>, attrs: Vec<(String, AttrVal, Pos)>, pos: Pos, scope: Option<usize> },
    Helper { outputs: Vec<Slot>, name: String, args: Vec<Slot>, pos: Pos, scope: Option<usize> },
}

impl EmitLine {
    pub fn scope(&self) -> Option<usize> {
        match self {
            EmitLine::Op { scope, .. } | EmitLine::Helper { scope, .. } => *scope,
        }
    }
    pub fn pos(&self) -> Pos {
        match self {
            EmitLine::Op { pos, .. } | EmitLine::Helper { pos, .. } => *pos,
        }
    }
    pub fn outputs(&self) -> &[Slot] {
        match self {
            EmitLine::Op { outputs, .. } | EmitLine::Helper { outputs, .. } => outputs,
        }
    }
    pub fn args(&self) -> &[Slot] {
        match self {
            EmitLine::Op { args, .. } | EmitLine::Helper { args, .. } => args,
        }
    }
}

/// `replace ?old with ?new`: every reader of `?old` reads `?new` instead.
#[derive(Clone, Debug)]
pub struct Replace {
    pub old: (String, Pos),
    pub new: (String, Pos),
    pub pos: Pos,
    /// The `for` block it is in (index into `Rule::loops`), if any.
    pub scope: Option<usize>,
}

/// `for (?y, ?t) in (?ys, ?ts) { ... }`: the block's lines run once per position of the
/// lists (list captures of equal length), with `?y`, `?t` bound to that position's values.
#[derive(Clone, Debug)]
pub struct ForLoop {
    pub vars: Vec<(String, Pos)>,
    pub lists: Vec<(String, Pos)>,
    pub pos: Pos,
}

/// `let ?window = const_int(?width) - 1`: a value computed from the match, usable as an
/// attribute in checks and emit. Evaluated in order after the pattern, before the checks.
#[derive(Clone, Debug)]
pub struct Let {
    pub name: String,
    pub pos: Pos,
    pub expr: Expr,
    pub expr_text: String,
    /// Set when the let was inlined from a fragment.
    pub origin: Option<Origin>,
}

/// The name a capture is shown by: a fragment's own captures are renamed `name#<use>` when
/// inlined (so two uses never share one), and shown as `name`.
pub fn display(capture: &str) -> &str {
    capture.split('#').next().unwrap_or(capture)
}
