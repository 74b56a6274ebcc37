//! Rust code for a checked rule set. Generated code calls the small runtime in `rules::rt`
//! (look up a producer, bind an operand, compare an attribute) with every operator name,
//! operand slot, attribute and check of the rule spelled out in the code.

use proc_macro2::TokenStream;
use quote::{format_ident, quote};
use rule_dsl::ast::*;
use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;

/// One step of a rule's matcher: a match line or a check, in the order they are tried.
struct Step {
    id: String,
    kind: &'static str,
    pos: Pos,
    text: String,
    /// The file the step is written in: the rule's, or the fragment's it was inlined from.
    file: String,
    fragment: Option<String>,
}

impl Step {
    fn new(id: String, kind: &'static str, pos: Pos, text: String, file: &RuleFile, origin: Option<&Origin>) -> Step {
        match origin {
            Some(o) => Step { id, kind, pos: o.pos, text, file: o.file.clone(), fragment: Some(o.fragment.clone()) },
            None => Step { id, kind, pos, text, file: file.path.clone(), fragment: None },
        }
    }
}

pub fn generate(files: &[(PathBuf, RuleFile)]) -> TokenStream {
    let mut tracked = Vec::new();
    let mut modules = Vec::new();
    let mut entries = Vec::new();
    let mut n = 0usize;
    for (abs, file) in files {
        let abs_s = abs.display().to_string();
        tracked.push(quote! { const _: &[u8] = include_bytes!(#abs_s); });
        for rule in &file.rules {
            let m = format_ident!("rule_{}", n);
            let (module, info) = rule_module(file, rule);
            modules.push(quote! { pub mod #m { #module } });
            entries.push(quote! { crate::RuleDef { info: #info, matcher: #m::matcher, emitter: #m::emit } });
            n += 1;
        }
    }
    let body = quote! {
        #(#modules)*
        /// Every compiled rule, in file order.
        pub static RULES: &[crate::RuleDef] = &[#(#entries),*];
    };
    let source = body.to_string();
    // The helper vocabulary, once: rule-dsl's list, handed to the run-time crate here.
    let helpers = rule_dsl::vocab::HELPERS.iter().map(|h| h.0);
    quote! {
        #(#tracked)*
        #[allow(unused_variables, unused_mut, unused_parens, clippy::all)]
        pub mod generated {
            #body
            /// The code above as text (one line; run it through rustfmt to read it).
            pub const SOURCE: &str = #source;
            /// The native helpers rules may call (`rule_dsl::vocab::HELPERS`).
            pub const HELPERS: &[&str] = &[#(#helpers),*];
        }
    }
}

fn lit_tokens(l: &Literal_) -> TokenStream {
    match l {
        Literal_::Int(v) => quote! { crate::rt::Lit::Int(#v) },
        Literal_::Float(v) => quote! { crate::rt::Lit::Float(#v) },
        Literal_::Str(s) => quote! { crate::rt::Lit::Str(#s) },
        Literal_::Bool(b) => quote! { crate::rt::Lit::Bool(#b) },
        // In an attribute, a dtype is its `TensorProto.DataType` code (`[to: f32]` is `to = 1`);
        // in an expression it is its name (`expr_tokens`), as `dtype(?x)` gives it.
        Literal_::DType(d) => {
            let code = i64::from(d.to_onnx());
            quote! { crate::rt::Lit::Int(#code) }
        }
        Literal_::List(items) => {
            let items: Vec<TokenStream> = items.iter().map(lit_tokens).collect();
            quote! { crate::rt::Lit::List(&[#(#items),*]) }
        }
    }
}

type Literal_ = rule_dsl::ast::Literal;

fn domain_of(file: &RuleFile, op: &OpRef) -> (String, i64) {
    match rule_dsl::resolve(file, op) {
        Some(u) => {
            let d = if u.domain == rule_dsl::vocab::ONNX { String::new() } else { u.domain.clone() };
            (d, u.opset.unwrap_or(0))
        }
        None => (String::new(), 0),
    }
}

fn rule_module(file: &RuleFile, rule: &Rule) -> (TokenStream, TokenStream) {
    let order = line_order(rule);
    let caps = capture_indices(rule, &order);
    let cap = |c: &str| -> usize { caps[c] };
    let mut steps: Vec<Step> = Vec::new();
    let mut bit = 0u32;
    let line_code: Vec<TokenStream> =
        order.iter().enumerate().map(|(step, line)| match_line_tokens(file, rule, line, step, &cap, &mut bit, &mut steps)).collect();
    let check_code = check_tokens(file, rule, &cap, &mut steps);
    let mut helpers = Vec::new();
    let mut emitted_ops = Vec::new();
    let emit_code = emit_block_tokens(file, rule, &cap, &mut helpers, &mut emitted_ops);
    let module = module_tokens(1u32 << bit, caps.len(), &line_code, &check_code, &emit_code);
    let root_line = order[0].0;
    (module, info_tokens(file, rule, root_line, &steps, &helpers, &emitted_ops))
}

/// A match line's index, and how the matcher reaches it: `None` for the root's line, else the
/// capture and output slot of the node that produces an operand of an earlier line.
type LineVia = (usize, Option<(String, usize)>);

/// The order the matcher visits match lines: breadth first from the root, following operands
/// to their producers.
fn line_order(rule: &Rule) -> Vec<LineVia> {
    let root = rule.root.as_ref().map(|r| r.0.clone()).unwrap_or_default();
    let mut order: Vec<LineVia> = Vec::new();
    let mut done: HashSet<usize> = HashSet::new();
    let root_line = rule.matches.iter().position(|m| m.outputs.iter().any(|o| o.capture() == Some(&root))).unwrap_or(0);
    order.push((root_line, None));
    done.insert(root_line);
    let mut qi = 0;
    while qi < order.len() {
        let m = &rule.matches[order[qi].0];
        for c in m.args.iter().filter_map(Slot::capture) {
            for (j, other) in rule.matches.iter().enumerate() {
                if done.contains(&j) {
                    continue;
                }
                if let Some(slot) = other.outputs.iter().position(|o| o.capture() == Some(c)) {
                    done.insert(j);
                    order.push((j, Some((c.to_string(), slot))));
                }
            }
        }
        qi += 1;
    }
    order
}

/// Capture indices, in the order the matcher meets them (lines breadth first, each line's
/// outputs, operands, attributes), then lets, emit outputs and `for` variables. Indices follow
/// the pattern's structure, not the order lines are written in, so writing a rule with
/// fragments (or reordering its lines) leaves its matcher unchanged.
fn capture_indices(rule: &Rule, order: &[LineVia]) -> BTreeMap<String, usize> {
    let mut caps: BTreeMap<String, usize> = BTreeMap::new();
    let mut add = |c: &str| {
        let n = caps.len();
        caps.entry(c.to_string()).or_insert(n);
    };
    for (li, _) in order {
        let m = &rule.matches[*li];
        m.outputs.iter().chain(&m.args).filter_map(Slot::capture).for_each(&mut add);
        for a in &m.attrs {
            if let AttrVal::Capture(c, _) = &a.value {
                add(c);
            }
        }
    }
    for l in &rule.lets {
        add(&l.name);
    }
    for e in &rule.emits {
        e.outputs().iter().filter_map(Slot::capture).for_each(&mut add);
    }
    for l in &rule.loops {
        l.vars.iter().for_each(|(v, _)| add(v));
    }
    caps
}

/// The matcher code of one match line (step `step`): find the node, check its op and counts,
/// bind its outputs, operands (a commutative pair takes the next bit of `choice`) and
/// attributes. Records the line's step.
fn match_line_tokens(file: &RuleFile, rule: &Rule, (li, via): &LineVia, step: usize, cap: &dyn Fn(&str) -> usize, bit: &mut u32, steps: &mut Vec<Step>) -> TokenStream {
    let m = &rule.matches[*li];
    let sid = format!("match.{}", m.outputs.iter().find_map(Slot::capture).map(display).unwrap_or("_"));
    let (domain, _) = domain_of(file, &m.op);
    let shown_domain = rule_dsl::Domain::parse(domain.as_str()).shown().to_string();
    steps.push(Step::new(sid, "pattern", m.pos, format!("{}.{}", shown_domain, m.op.name), file, m.origin.as_ref()));
    let op = &m.op.name;
    let find = match via {
        None => quote! { let node = root; },
        Some((c, slot)) => {
            let ci = cap(c);
            quote! { let node = crate::rt::producer(cx, &b, #ci, #slot, #step)?; }
        }
    };
    let nout = m.outputs.len();
    let mut body = vec![quote! { crate::rt::expect_op(cx, node, #domain, #op, #step)?; }];
    // A list capture (`..?ys`, last) takes every output from its position on.
    if !m.outputs.iter().any(Slot::is_list) {
        body.push(quote! { crate::rt::expect_outputs(cx, node, #nout, #step)?; });
    }
    for (k, o) in m.outputs.iter().enumerate() {
        match o {
            Slot::Capture(c, _) => {
                let ci = cap(c);
                body.push(quote! { crate::rt::bind_output(cx, &mut b, node, #k, #ci, #step)?; });
            }
            Slot::List(c, _) => {
                let ci = cap(c);
                body.push(quote! { crate::rt::bind_outputs_from(cx, &mut b, node, #k, #ci, #step)?; });
            }
            _ => {}
        }
    }
    let nargs = m.args.len();
    let rest = m.rest;
    body.push(quote! { crate::rt::expect_inputs(cx, node, #nargs, #rest, #step)?; });
    let slots: Vec<TokenStream> = if m.commutative {
        let mask = 1u32 << *bit;
        *bit += 1;
        vec![quote! { (if choice & #mask != 0 { 1 } else { 0 }) }, quote! { (if choice & #mask != 0 { 0 } else { 1 }) }]
    } else {
        (0..nargs).map(|k| quote! { #k }).collect()
    };
    for (a, slot) in m.args.iter().zip(&slots) {
        match a {
            Slot::Capture(c, _) => {
                let ci = cap(c);
                body.push(quote! { crate::rt::bind_input(cx, &mut b, node, #slot, #ci, #step)?; });
            }
            Slot::Wild(_) => body.push(quote! { crate::rt::input_present(cx, node, #slot, #step)?; }),
            Slot::Absent(_) => body.push(quote! { crate::rt::input_absent(cx, node, #slot, #step)?; }),
            Slot::List(..) => {} // rejected by rule-dsl's checks
        }
    }
    body.extend(m.attrs.iter().map(|a| match_attr_tokens(a, cap, step)));
    quote! { { #find #(#body)* b.nodes.push(node); } }
}

/// One attribute of a match line: bound to a capture, or compared with a literal (either with
/// the attribute's default when the node omits it).
fn match_attr_tokens(a: &AttrPat, cap: &dyn Fn(&str) -> usize, step: usize) -> TokenStream {
    let name = &a.name;
    let default = match &a.default {
        Some(l) => {
            let t = lit_tokens(l);
            quote! { Some(&#t) }
        }
        None => quote! { None },
    };
    match &a.value {
        AttrVal::Capture(c, _) => {
            let ci = cap(c);
            quote! { crate::rt::bind_attr(cx, &mut b, node, #name, #ci, #default, #step)?; }
        }
        AttrVal::Lit(l, _) => {
            let t = lit_tokens(l);
            quote! { crate::rt::attr_is(cx, node, #name, &#t, #default, #step)?; }
        }
    }
}

/// The lets, then the checks, each one step after the match lines: a let binds its value, a
/// check fails with its message.
fn check_tokens(file: &RuleFile, rule: &Rule, cap: &dyn Fn(&str) -> usize, steps: &mut Vec<Step>) -> Vec<TokenStream> {
    let mut check_code = Vec::new();
    for l in &rule.lets {
        let step = steps.len();
        steps.push(Step::new(format!("let.{}", display(&l.name)), "let", l.pos, l.expr_text.clone(), file, l.origin.as_ref()));
        let value = expr_tokens(&l.expr, cap);
        let ci = cap(&l.name);
        let shown = format!("?{}", display(&l.name));
        check_code.push(quote! {
            let value = (|| -> Result<crate::rt::Val, String> { #value })();
            crate::rt::bind_let(&mut b, #ci, #shown, value, #step)?;
        });
    }
    for c in &rule.checks {
        let step = steps.len();
        steps.push(Step::new(c.id.clone(), "check", c.pos, c.expr_text.clone(), file, c.origin.as_ref()));
        let cond = expr_tokens(&c.expr, cap);
        let parts: Vec<TokenStream> = c
            .message
            .iter()
            .map(|p| match p {
                MsgPart::Text(t) => quote! { msg.push_str(#t); },
                MsgPart::Expr(e) => {
                    let t = expr_tokens(e, cap);
                    quote! { msg.push_str(&crate::rt::show((|| -> Result<crate::rt::Val, String> { #t })())); }
                }
            })
            .collect();
        check_code.push(quote! {
            crate::rt::check((|| -> Result<crate::rt::Val, String> { #cond })(), #step, || {
                let mut msg = String::new();
                #(#parts)*
                msg
            })?;
        });
    }
    check_code
}

/// Emit: lines in order; the lines and replaces of a `for` block run once per position.
fn emit_block_tokens(file: &RuleFile, rule: &Rule, cap: &dyn Fn(&str) -> usize, helpers: &mut Vec<String>, emitted_ops: &mut Vec<TokenStream>) -> Vec<TokenStream> {
    let mut emit_code = Vec::new();
    let mut done_loops: HashSet<usize> = HashSet::new();
    for e in &rule.emits {
        match e.scope() {
            None => emit_code.push(emit_line_tokens(file, e, cap, helpers, emitted_ops)),
            Some(s) if done_loops.insert(s) => {
                let l = &rule.loops[s];
                let body: Vec<TokenStream> = rule.emits.iter().filter(|x| x.scope() == Some(s)).map(|x| emit_line_tokens(file, x, cap, helpers, emitted_ops)).collect();
                emit_code.push(loop_tokens(l, body, rule.replaces.iter().filter(|r| r.scope == Some(s)), cap));
            }
            Some(_) => {}
        }
    }
    // A `for` with replaces only.
    for (s, l) in rule.loops.iter().enumerate().filter(|(s, _)| !done_loops.contains(s)) {
        emit_code.push(loop_tokens(l, Vec::new(), rule.replaces.iter().filter(|r| r.scope == Some(s)), cap));
    }
    emit_code.extend(rule.replaces.iter().filter(|r| r.scope.is_none()).map(|r| replace_tokens(r, cap)));
    emit_code
}

/// The rule's module: `matcher` tries every choice of commutative operands and keeps the
/// failure that got furthest; `attempt` runs the match lines and checks; `emit`.
fn module_tokens(choices: u32, ncaps: usize, line_code: &[TokenStream], check_code: &[TokenStream], emit_code: &[TokenStream]) -> TokenStream {
    quote! {
        pub fn matcher(cx: &crate::rt::Cx, root: usize) -> Result<crate::rt::Binds, crate::rt::Failure> {
            let mut best: Option<crate::rt::Failure> = None;
            for choice in 0u32..#choices {
                match attempt(cx, root, choice) {
                    Ok(b) => return Ok(b),
                    Err(f) => {
                        if best.as_ref().map_or(true, |x| f.step > x.step) {
                            best = Some(f);
                        }
                    }
                }
            }
            Err(best.expect("at least one attempt"))
        }
        fn attempt(cx: &crate::rt::Cx, root: usize, choice: u32) -> Result<crate::rt::Binds, crate::rt::Failure> {
            let mut b = crate::rt::Binds::new(#ncaps);
            #(#line_code)*
            #(#check_code)*
            Ok(b)
        }
        pub fn emit(em: &mut crate::Emitter, b: &crate::rt::Binds) -> Result<(), crate::Error> {
            let mut b = b.clone();
            #(#emit_code)*
            Ok(())
        }
    }
}

/// The rule's `RuleInfo`: id, doc, ordering, location, root op, steps, helpers and emitted ops.
fn info_tokens(file: &RuleFile, rule: &Rule, root_line: usize, steps: &[Step], helpers: &[String], emitted_ops: &[TokenStream]) -> TokenStream {
    let id = &rule.id;
    let doc = &rule.doc;
    // Checked by rule-dsl: a present stage name parses.
    let stage = match rule.stage.as_ref().and_then(|s| rule_dsl::Stage::parse(&s.0)) {
        Some(s) => {
            let variant = format_ident!("{}", format!("{s:?}"));
            quote! { Some(crate::Stage::#variant) }
        }
        None => quote! { None },
    };
    let priority = rule.priority;
    let before: Vec<&str> = rule.before.iter().map(|b| b.0.as_str()).collect();
    let after: Vec<&str> = rule.after.iter().map(|b| b.0.as_str()).collect();
    let path = &file.path;
    let line = rule.pos.line as u32;
    let root_m = &rule.matches[root_line];
    let (root_domain, _) = domain_of(file, &root_m.op);
    let root_op = &root_m.op.name;
    let step_info: Vec<TokenStream> = steps.iter().map(step_info_tokens).collect();
    quote! {
        crate::RuleInfo {
            id: #id,
            doc: #doc,
            stage: #stage,
            priority: #priority,
            before: &[#(#before),*],
            after: &[#(#after),*],
            file: #path,
            line: #line,
            root_domain: #root_domain,
            root_op: #root_op,
            steps: &[#(#step_info),*],
            helpers: &[#(#helpers),*],
            emits: &[#(#emitted_ops),*],
        }
    }
}

fn step_info_tokens(s: &Step) -> TokenStream {
    let (sid, l, c, text, sfile) = (&s.id, s.pos.line as u32, s.pos.col as u32, &s.text, &s.file);
    let fragment = match &s.fragment {
        Some(f) => quote! { Some(#f) },
        None => quote! { None },
    };
    let kind = match s.kind {
        "check" => quote! { crate::StepKind::Check },
        "let" => quote! { crate::StepKind::Let },
        _ => quote! { crate::StepKind::Pattern },
    };
    quote! { crate::StepInfo { id: #sid, kind: #kind, file: #sfile, line: #l, col: #c, text: #text, fragment: #fragment } }
}

/// One emit line: call the op or helper, bind its outputs (a list capture takes the rest).
fn emit_line_tokens(file: &RuleFile, e: &EmitLine, cap: &dyn Fn(&str) -> usize, helpers: &mut Vec<String>, emitted_ops: &mut Vec<TokenStream>) -> TokenStream {
    let args: Vec<TokenStream> = e
        .args()
        .iter()
        .map(|a| match a {
            Slot::Capture(c, _) => {
                let ci = cap(c);
                quote! { em.value(&b, #ci)? }
            }
            Slot::Wild(_) | Slot::Absent(_) | Slot::List(..) => quote! { String::new() },
        })
        .collect();
    let call = match e {
        EmitLine::Helper { name, .. } if rule_dsl::vocab::GRAPH_HELPERS.contains(&name.as_str()) => {
            // Subgraph attributes, borrowed from the binds so the emitter stays writable.
            helpers.push(name.clone());
            let f = format_ident!("{}", name);
            let graphs: Vec<TokenStream> = e
                .args()
                .iter()
                .filter_map(|a| a.capture().map(|c| {
                    let ci = cap(c);
                    quote! { em.subgraph(&b, #ci)? }
                }))
                .collect();
            quote! { { let graphs: Vec<&ir::Graph> = vec![#(#graphs),*]; crate::helpers::allowed::#f(em, &graphs)? } }
        }
        EmitLine::Helper { name, .. } if rule_dsl::vocab::LIST_HELPERS.contains(&name.as_str()) => {
            // Values, then the integer list a `let` computed (the last input).
            helpers.push(name.clone());
            let f = format_ident!("{}", name);
            let n = e.args().len().saturating_sub(1);
            let values = &args[..n];
            let list = match e.args().last().and_then(|a| a.capture()) {
                Some(c) => {
                    let ci = cap(c);
                    quote! { em.ints(&b, #ci)? }
                }
                None => quote! { Vec::<i64>::new() },
            };
            quote! { { let list: Vec<i64> = #list; crate::helpers::allowed::#f(em, &[#(#values),*], &list)? } }
        }
        EmitLine::Helper { name, .. } => {
            helpers.push(name.clone());
            let f = format_ident!("{}", name);
            quote! { crate::helpers::allowed::#f(em, &[#(#args),*])? }
        }
        EmitLine::Op { op, attrs, .. } => {
            let (domain, opset) = domain_of(file, op);
            let name = &op.name;
            emitted_ops.push(quote! { (#domain, #name, #opset) });
            let named: Vec<bool> = e.outputs().iter().map(|o| o.capture().is_some()).collect();
            let attr_code: Vec<TokenStream> = attrs
                .iter()
                .map(|(an, v, _)| match v {
                    AttrVal::Capture(c, _) => {
                        let ci = cap(c);
                        quote! { em.attr(&b, #ci, #an)? }
                    }
                    AttrVal::Lit(l, _) => {
                        let t = lit_tokens(l);
                        quote! { crate::rt::lit_attr(#an, &#t) }
                    }
                })
                .collect();
            quote! { em.node(#domain, #name, #opset, vec![#(#args),*], &[#(#named),*], vec![#(#attr_code),*])? }
        }
    };
    let sets: Vec<TokenStream> = e
        .outputs()
        .iter()
        .enumerate()
        .filter_map(|(k, o)| o.capture().map(|c| (k, cap(c), o.is_list())))
        .map(|(k, ci, list)| {
            if list {
                quote! { b.caps[#ci] = Some(crate::rt::Bound::Values(outs.get(#k..).ok_or_else(|| em.missing_output(#k, outs.len()))?.to_vec())); }
            } else {
                quote! { b.caps[#ci] = Some(crate::rt::Bound::Value(outs.get(#k).cloned().ok_or_else(|| em.missing_output(#k, outs.len()))?)); }
            }
        })
        .collect();
    quote! { { let outs: Vec<String> = #call; #(#sets)* } }
}

fn replace_tokens(r: &Replace, cap: &dyn Fn(&str) -> usize) -> TokenStream {
    let (o, n) = (cap(&r.old.0), cap(&r.new.0));
    quote! { { let old = em.value(&b, #o)?; let new = em.value(&b, #n)?; em.replace(old, new); } }
}

/// A `for` block: the zipped lists' length (equal, or an `Emit` error), then per position the
/// variables bound to that position's values and the block's lines and replaces.
fn loop_tokens<'r>(l: &ForLoop, body: Vec<TokenStream>, replaces: impl Iterator<Item = &'r Replace>, cap: &dyn Fn(&str) -> usize) -> TokenStream {
    let lists: Vec<usize> = l.lists.iter().map(|(c, _)| cap(c)).collect();
    let vars: Vec<usize> = l.vars.iter().map(|(c, _)| cap(c)).collect();
    let idx: Vec<usize> = (0..vars.len()).collect();
    let replaces: Vec<TokenStream> = replaces.map(|r| replace_tokens(r, cap)).collect();
    quote! {
        {
            let lists: Vec<Vec<String>> = vec![#(em.values(&b, #lists)?),*];
            let n = em.zipped_len(&lists)?;
            for k in 0..n {
                #(b.caps[#vars] = Some(crate::rt::Bound::Value(lists[#idx][k].clone()));)*
                #(#body)*
                #(#replaces)*
            }
        }
    }
}

/// An expression as Rust code of type `Result<Val, String>`.
fn expr_tokens(e: &Expr, cap: &dyn Fn(&str) -> usize) -> TokenStream {
    match e {
        Expr::Capture(c, _) => {
            let ci = cap(c);
            let shown = format!("?{}", display(c));
            quote! { crate::rt::cap_val(cx, &b, #ci, #shown) }
        }
        Expr::Lit(Literal_::DType(d), _) => {
            let name = d.name();
            quote! { Ok::<crate::rt::Val, String>(crate::rt::Val::from_lit(&crate::rt::Lit::Str(#name))) }
        }
        Expr::Lit(l, _) => {
            let t = lit_tokens(l);
            quote! { Ok::<crate::rt::Val, String>(crate::rt::Val::from_lit(&#t)) }
        }
        Expr::Call { name, args, .. } if rule_dsl::vocab::VALUE_FUNCTIONS.contains(&name.as_str()) && !args.is_empty() => {
            // A function of a value, mapped over a list capture (`rank(?ys)`).
            let f = format_ident!("fn_{}", name);
            let first = expr_tokens(&args[0], cap);
            let rest: Vec<TokenStream> = args[1..].iter().map(|a| expr_tokens(a, cap)).collect();
            let names: Vec<proc_macro2::Ident> = (0..rest.len()).map(|i| format_ident!("arg{}", i + 1)).collect();
            quote! { (|| -> Result<crate::rt::Val, String> { let first = (#first)?; #(let #names = (#rest)?;)* crate::rt::each(first, |v| crate::rt::#f(cx, v, #(#names.clone()),*)) })() }
        }
        Expr::Call { name, args, .. } => {
            let f = format_ident!("fn_{}", name);
            let args: Vec<TokenStream> = args.iter().map(|a| expr_tokens(a, cap)).collect();
            quote! { crate::rt::#f(cx, #((#args)?),*) }
        }
        Expr::List(items, _) => {
            let items: Vec<TokenStream> = items.iter().map(|a| expr_tokens(a, cap)).collect();
            quote! { (|| -> Result<crate::rt::Val, String> { Ok(crate::rt::Val::List(vec![#((#items)?),*])) })() }
        }
        Expr::Not(inner, _) => {
            let t = expr_tokens(inner, cap);
            quote! { Ok::<crate::rt::Val, String>(crate::rt::Val::Bool(!crate::rt::truthy(&(#t)?)?)) }
        }
        Expr::Bin { op, lhs, rhs, .. } => {
            let l = expr_tokens(lhs, cap);
            let r = expr_tokens(rhs, cap);
            match op {
                BinOp::And => quote! { (|| -> Result<crate::rt::Val, String> { if crate::rt::truthy(&(#l)?)? { Ok(crate::rt::Val::Bool(crate::rt::truthy(&(#r)?)?)) } else { Ok(crate::rt::Val::Bool(false)) } })() },
                BinOp::Or => quote! { (|| -> Result<crate::rt::Val, String> { if crate::rt::truthy(&(#l)?)? { Ok(crate::rt::Val::Bool(true)) } else { Ok(crate::rt::Val::Bool(crate::rt::truthy(&(#r)?)?)) } })() },
                other => {
                    let f = format_ident!("op_{}", format!("{other:?}").to_lowercase());
                    quote! { crate::rt::#f((#l)?, (#r)?) }
                }
            }
        }
    }
}
