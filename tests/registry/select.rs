//! Selectors: how tests name a set of fixtures by what they are instead of listing them, so a
//! new fixture joins every set its traits put it in.
//!
//! A selector is terms separated by spaces, all of which must hold: a kind (`decoder`,
//! `encoder`) or a declared trait, or `!` before one for "not". `rope !qk_norm` is every
//! fixture with the `rope` trait and without `qk_norm`.

use super::{Error, Fixture, Kind, Registry, Result};

impl Registry {
    /// The fixtures `selector` picks, in registry order. An unknown term, an empty selector or
    /// one that picks nothing is an error: a typo must not quietly drop a test.
    pub fn select(&self, selector: &str) -> Result<Vec<&Fixture>> {
        let fail = |reason: String| Error::Selector { selector: selector.to_string(), reason };
        let mut terms = Vec::new();
        for word in selector.split_whitespace() {
            let (negated, name) = match word.strip_prefix('!') {
                Some(n) => (true, n),
                None => (false, word),
            };
            let kind = Kind::ALL.into_iter().find(|k| k.name() == name);
            if kind.is_none() && !self.traits.contains_key(name) {
                let known: Vec<&str> = Kind::ALL.iter().map(|k| k.name()).chain(self.traits.keys().map(|t| t.as_str())).collect();
                return Err(fail(format!("`{name}` is neither a kind nor a declared trait (known: {})", known.join(", "))));
            }
            terms.push((negated, name, kind));
        }
        if terms.is_empty() {
            return Err(fail("it has no term".into()));
        }
        let holds = |f: &Fixture| {
            terms.iter().all(|(negated, name, kind)| {
                let has = match kind {
                    Some(k) => f.kind == *k,
                    None => f.has(name),
                };
                has != *negated
            })
        };
        let picked: Vec<&Fixture> = self.fixtures.iter().filter(|f| holds(f)).collect();
        if picked.is_empty() {
            return Err(fail("it picks no fixture".into()));
        }
        Ok(picked)
    }
}
