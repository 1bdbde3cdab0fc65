//! Interned strings: names, categories and argument names are stored once
//! and passed around as [`Sym`]s.

use foldhash::HashMap;

/// An interned string of a [`Strings`] table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Sym(u32);

impl Sym {
    /// The empty string, interned in every table.
    pub const EMPTY: Sym = Sym(0);
}

/// A table of interned strings. It grows with the number of *distinct*
/// strings of a trace (names, categories, argument names), not with the
/// number of events.
#[derive(Debug)]
pub struct Strings {
    names: Vec<Box<str>>,
    index: HashMap<Box<str>, Sym>,
}

impl Default for Strings {
    fn default() -> Self {
        let mut s = Strings {
            names: Vec::new(),
            index: HashMap::default(),
        };
        s.intern("");
        s
    }
}

impl Strings {
    /// The symbol of `s`, added if new.
    pub fn intern(&mut self, s: &str) -> Sym {
        if let Some(&sym) = self.index.get(s) {
            return sym;
        }
        let sym = Sym(u32::try_from(self.names.len()).unwrap_or(u32::MAX));
        self.names.push(s.into());
        self.index.insert(s.into(), sym);
        sym
    }

    /// The symbol of `s` if it was interned.
    pub fn lookup(&self, s: &str) -> Option<Sym> {
        self.index.get(s).copied()
    }

    /// The text of `sym` (`""` for a symbol of another table).
    pub fn get(&self, sym: Sym) -> &str {
        self.names.get(sym.0 as usize).map_or("", |s| s)
    }

    /// How many strings are interned.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Whether only the empty string is interned.
    pub fn is_empty(&self) -> bool {
        self.names.len() <= 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interns_once() {
        let mut s = Strings::default();
        assert_eq!(s.intern(""), Sym::EMPTY);
        let a = s.intern("read");
        let b = s.intern("write");
        assert_ne!(a, b);
        assert_eq!(s.intern("read"), a);
        assert_eq!(s.get(b), "write");
        assert_eq!(s.lookup("write"), Some(b));
        assert_eq!(s.lookup("open"), None);
        assert_eq!(s.len(), 3);
    }
}
