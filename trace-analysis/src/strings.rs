//! Interned strings: names, categories and argument names are stored once
//! and passed around as [`Sym`]s.
//!
//! A table holds at most [`MAX_STRINGS`] strings and [`MAX_BYTES`] bytes
//! of text, so that a trace with endless distinct names cannot exhaust
//! memory: past either, every string not already interned gets the one
//! symbol [`Sym::TOO_MANY`] (whose text is [`TOO_MANY_TEXT`]) and is
//! counted in [`Strings::refused`].

use foldhash::HashMap;

/// Distinct strings a table holds, at most.
pub const MAX_STRINGS: usize = 1 << 20;
/// Bytes of text a table holds, at most.
pub const MAX_BYTES: usize = 64 << 20;
/// The text of [`Sym::TOO_MANY`].
pub const TOO_MANY_TEXT: &str = "(too many distinct names)";

/// An interned string of a [`Strings`] table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Sym(u32);

impl Sym {
    /// The empty string, interned in every table.
    pub const EMPTY: Sym = Sym(0);
    /// Every string a full table could not take ([`TOO_MANY_TEXT`]).
    pub const TOO_MANY: Sym = Sym(1);
}

/// A table of interned strings. It grows with the number of *distinct*
/// strings of a trace (names, categories, argument names), not with the
/// number of events, and never past its limits.
#[derive(Debug)]
pub struct Strings {
    names: Vec<Box<str>>,
    index: HashMap<Box<str>, Sym>,
    bytes: usize,
    max_strings: usize,
    max_bytes: usize,
    refused: u64,
}

impl Default for Strings {
    fn default() -> Self {
        Strings::with_limits(MAX_STRINGS, MAX_BYTES)
    }
}

impl Strings {
    /// A table of at most `max_strings` strings (besides the empty one and
    /// [`TOO_MANY_TEXT`]) and `max_bytes` bytes of text.
    pub fn with_limits(max_strings: usize, max_bytes: usize) -> Self {
        let mut s = Strings {
            names: Vec::new(),
            index: HashMap::default(),
            bytes: 0,
            max_strings: max_strings.min(u32::MAX as usize - 2),
            max_bytes,
            refused: 0,
        };
        s.add("");
        s.add(TOO_MANY_TEXT);
        s
    }

    fn add(&mut self, s: &str) -> Sym {
        let sym = Sym(self.names.len() as u32);
        self.bytes += s.len();
        self.names.push(s.into());
        self.index.insert(s.into(), sym);
        sym
    }

    /// The symbol of `s`, added if new; [`Sym::TOO_MANY`] when it is new
    /// and the table is full.
    pub fn intern(&mut self, s: &str) -> Sym {
        if let Some(&sym) = self.index.get(s) {
            return sym;
        }
        if self.names.len() - 2 >= self.max_strings
            || self.bytes.saturating_add(s.len()) > self.max_bytes
        {
            self.refused += 1;
            return Sym::TOO_MANY;
        }
        self.add(s)
    }

    /// The symbol of `s` if it was interned.
    pub fn lookup(&self, s: &str) -> Option<Sym> {
        self.index.get(s).copied()
    }

    /// The text of `sym` (`""` for a symbol of another table).
    pub fn get(&self, sym: Sym) -> &str {
        self.names.get(sym.0 as usize).map_or("", |s| s)
    }

    /// How many strings are interned (the empty one and [`TOO_MANY_TEXT`]
    /// included).
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Whether no string but the two every table has is interned.
    pub fn is_empty(&self) -> bool {
        self.names.len() <= 2
    }

    /// How many times a new string was given [`Sym::TOO_MANY`] because the
    /// table was full.
    pub fn refused(&self) -> u64 {
        self.refused
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
        assert_eq!(s.len(), 4);
        assert_eq!(s.refused(), 0);
    }

    #[test]
    fn a_full_table_gives_one_symbol_and_counts() {
        let mut s = Strings::with_limits(2, 1000);
        let a = s.intern("a");
        let b = s.intern("b");
        assert_eq!(s.intern("c"), Sym::TOO_MANY);
        assert_eq!(s.intern("d"), Sym::TOO_MANY);
        assert_eq!(s.get(Sym::TOO_MANY), TOO_MANY_TEXT);
        // Known strings keep their symbols.
        assert_eq!((s.intern("a"), s.intern("b")), (a, b));
        assert_eq!(s.refused(), 2);
        assert_eq!(s.lookup("c"), None);
        let mut s = Strings::with_limits(100, TOO_MANY_TEXT.len() + 4);
        assert_ne!(s.intern("abcd"), Sym::TOO_MANY);
        assert_eq!(s.intern("e"), Sym::TOO_MANY);
        assert_eq!(s.refused(), 1);
    }
}
