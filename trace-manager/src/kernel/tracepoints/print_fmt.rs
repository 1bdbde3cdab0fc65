//! The names a format file's `print fmt:` gives a field's values:
//! `__print_symbolic(REC->vec, { 0, "HI" }, …)` and
//! `__print_flags(REC->gfp_flags, "|", { (unsigned long)(…), "GFP_KERNEL" }, …)`.
//!
//! The values are C constant expressions as the preprocessor left them
//! (casts, shifts, `|`, `&`, `~`), evaluated here.

use std::collections::HashMap;

/// How a field's values are named.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Names {
    /// One name per value (`__print_symbolic`).
    Symbolic(Vec<(u64, String)>),
    /// A name per bit mask, joined by `delim` (`__print_flags`).
    Flags {
        /// The separator, e.g. `|`.
        delim: String,
        /// Masks and their names, in the kernel's order.
        flags: Vec<(u64, String)>,
    },
}

impl Names {
    /// `value` (a field `bits` wide) as the kernel prints it: the symbol, or
    /// `0x…` when none matches; flags joined, unnamed bits as `0x…` last.
    pub fn render(&self, value: u64, bits: u32) -> String {
        let mask = width_mask(bits);
        let value = value & mask;
        match self {
            Names::Symbolic(symbols) => symbols
                .iter()
                .find(|(v, _)| v & mask == value)
                .map_or_else(|| format!("{value:#x}"), |(_, n)| n.clone()),
            Names::Flags { delim, flags } => {
                let mut left = value;
                let mut parts: Vec<String> = Vec::new();
                for (m, name) in flags {
                    let m = m & mask;
                    if left == 0 {
                        break;
                    }
                    if m == 0 || left & m != m {
                        continue;
                    }
                    left &= !m;
                    parts.push(name.clone());
                }
                if left != 0 || parts.is_empty() {
                    parts.push(format!("{left:#x}"));
                }
                parts.join(delim)
            }
        }
    }

    /// The value of the symbol or flag `name`, if the field has it.
    pub fn value_of(&self, name: &str) -> Option<u64> {
        let list = match self {
            Names::Symbolic(s) => s,
            Names::Flags { flags, .. } => flags,
        };
        list.iter().find(|(_, n)| n == name).map(|(v, _)| *v)
    }

    /// Whether the names are bit flags.
    pub fn is_flags(&self) -> bool {
        matches!(self, Names::Flags { .. })
    }
}

/// All bits of a `bits`-wide value.
fn width_mask(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

/// The named fields of a `print fmt:` text, by field name (the first
/// `__print_*` call of a field wins). Calls it cannot understand are left
/// out; their fields stay numbers.
pub fn field_names(print_fmt: &str) -> HashMap<String, Names> {
    let mut out = HashMap::new();
    for (call, flags) in [
        ("__print_symbolic(", false),
        ("__print_symbolic_u64(", false),
        ("__print_flags(", true),
        ("__print_flags_u64(", true),
    ] {
        let mut from = 0;
        while let Some(at) = print_fmt[from..].find(call) {
            let start = from + at + call.len();
            from = start;
            // `__print_flags(` is also the start of `__print_flags_u64(`
            // only if the name matched fully, which `find` ensures.
            let Some(args) = split_call(&print_fmt[start..]) else {
                continue;
            };
            if let Some((field, names)) = parse_call(&args, flags) {
                out.entry(field).or_insert(names);
            }
        }
    }
    out
}

/// The fields the print format shows as pointers (`(void *)REC->call_site`
/// printed with `%pS`): integers that are addresses.
pub fn pointer_fields(print_fmt: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = print_fmt;
    while let Some(at) = rest.find("(void *)REC->") {
        rest = &rest[at + "(void *)REC->".len()..];
        let len = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        out.push(rest[..len].to_owned());
    }
    out
}

/// The top-level, comma-separated arguments of a call whose text starts
/// after its `(`; `None` when the parentheses do not close.
fn split_call(text: &str) -> Option<Vec<&str>> {
    let mut depth = 0i32;
    let mut args = Vec::new();
    let mut start = 0;
    let mut in_str = false;
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        if in_str {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_str = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_str = true,
            '(' | '{' | '[' => depth += 1,
            ')' | '}' | ']' if depth > 0 => depth -= 1,
            ')' => {
                args.push(text[start..i].trim());
                return Some(args);
            }
            ',' if depth == 0 => {
                args.push(text[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    None
}

/// The field and names of one call's arguments.
fn parse_call(args: &[&str], flags: bool) -> Option<(String, Names)> {
    let field = plain_field(args.first()?)?;
    let (delim, entries) = if flags {
        (Some(string_literal(args.get(1)?)?), &args[2..])
    } else {
        (None, &args[1..])
    };
    let mut list = Vec::new();
    for entry in entries {
        let inner = entry.strip_prefix('{')?.strip_suffix('}')?;
        let closed = format!("{inner})");
        let parts = split_call(&closed)?;
        let [value, name] = parts.as_slice() else {
            return None;
        };
        // The terminator `{ 0, ((void *)0) }` / `{ -1, NULL }`.
        let Some(name) = string_literal(name) else {
            continue;
        };
        list.push((eval(value)?, name));
    }
    let names = match delim {
        Some(delim) => Names::Flags { delim, flags: list },
        None => Names::Symbolic(list),
    };
    Some((field, names))
}

/// `x` when `arg` is `REC->x` under casts and parentheses only.
fn plain_field(arg: &str) -> Option<String> {
    let at = arg.find("REC->")?;
    let rest = &arg[at + 5..];
    let len = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(rest.len());
    let name = &rest[..len];
    let others = format!("{}{}", &arg[..at], &rest[len..]);
    let plain = others
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '(' || c == ')' || c == ' ');
    (plain && !name.is_empty()).then(|| name.to_owned())
}

/// The text of a C string literal (simple escapes only).
fn string_literal(s: &str) -> Option<String> {
    let inner = s.trim().strip_prefix('"')?.strip_suffix('"')?;
    let mut out = String::new();
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next()? {
                'n' => out.push('\n'),
                't' => out.push('\t'),
                other => out.push(other),
            }
        } else {
            out.push(c);
        }
    }
    Some(out)
}

// A C constant expression evaluator -------------------------------------------

#[derive(Clone, Debug, PartialEq, Eq)]
enum Token {
    Num(u64),
    Ident(String),
    Op(&'static str),
}

fn tokenize(s: &str) -> Option<Vec<Token>> {
    let b = s.as_bytes();
    let mut i = 0;
    let mut out = Vec::new();
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c.is_ascii_digit() {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric()) {
                i += 1;
            }
            let text = s[start..i].trim_end_matches(['u', 'U', 'l', 'L']);
            let v = if let Some(h) = text.strip_prefix("0x").or(text.strip_prefix("0X")) {
                u64::from_str_radix(h, 16).ok()?
            } else if text.len() > 1 && text.starts_with('0') {
                u64::from_str_radix(&text[1..], 8).ok()?
            } else {
                text.parse().ok()?
            };
            out.push(Token::Num(v));
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push(Token::Ident(s[start..i].to_owned()));
        } else {
            let two = s.get(i..i + 2).unwrap_or("");
            let op = match two {
                "<<" => "<<",
                ">>" => ">>",
                _ => match c {
                    b'(' => "(",
                    b')' => ")",
                    b'|' => "|",
                    b'&' => "&",
                    b'^' => "^",
                    b'~' => "~",
                    b'+' => "+",
                    b'-' => "-",
                    b'*' => "*",
                    b'/' => "/",
                    b'!' => "!",
                    _ => return None,
                },
            };
            i += op.len();
            out.push(Token::Op(op));
        }
    }
    Some(out)
}

/// Evaluates a C integer constant expression (wrapping, 64 bits).
pub(crate) fn eval(s: &str) -> Option<u64> {
    let tokens = tokenize(s)?;
    let mut p = Parser { t: &tokens, i: 0 };
    let v = p.binary(0)?;
    (p.i == tokens.len()).then_some(v)
}

struct Parser<'a> {
    t: &'a [Token],
    i: usize,
}

/// Binary operators by precedence, lowest first.
const LEVELS: &[&[&str]] = &[
    &["|"],
    &["^"],
    &["&"],
    &["<<", ">>"],
    &["+", "-"],
    &["*", "/"],
];

impl Parser<'_> {
    fn peek(&self) -> Option<&Token> {
        self.t.get(self.i)
    }

    fn binary(&mut self, level: usize) -> Option<u64> {
        if level == LEVELS.len() {
            return self.unary();
        }
        let mut v = self.binary(level + 1)?;
        while let Some(Token::Op(op)) = self.peek() {
            let op = *op;
            if !LEVELS[level].contains(&op) {
                break;
            }
            self.i += 1;
            let r = self.binary(level + 1)?;
            v = match op {
                "|" => v | r,
                "^" => v ^ r,
                "&" => v & r,
                "<<" => v.checked_shl(u32::try_from(r).ok()?)?,
                ">>" => v.checked_shr(u32::try_from(r).ok()?)?,
                "+" => v.wrapping_add(r),
                "-" => v.wrapping_sub(r),
                "*" => v.wrapping_mul(r),
                _ => v.checked_div(r)?,
            };
        }
        Some(v)
    }

    fn unary(&mut self) -> Option<u64> {
        match self.peek()?.clone() {
            Token::Op("~") => {
                self.i += 1;
                Some(!self.unary()?)
            }
            Token::Op("-") => {
                self.i += 1;
                Some(self.unary()?.wrapping_neg())
            }
            Token::Op("!") => {
                self.i += 1;
                Some(u64::from(self.unary()? == 0))
            }
            Token::Op("(") => {
                if let Some(after) = self.cast_end() {
                    self.i = after;
                    return self.unary();
                }
                self.i += 1;
                let v = self.binary(0)?;
                (self.peek()? == &Token::Op(")")).then_some(())?;
                self.i += 1;
                Some(v)
            }
            Token::Num(v) => {
                self.i += 1;
                Some(v)
            }
            _ => None,
        }
    }

    /// After `( type words )` at the cursor: a cast, whose end is returned.
    fn cast_end(&self) -> Option<usize> {
        let mut j = self.i + 1;
        let mut words = 0;
        while let Some(t) = self.t.get(j) {
            match t {
                Token::Ident(_) => words += 1,
                Token::Op("*") if words > 0 => {}
                Token::Op(")") if words > 0 => return Some(j + 1),
                _ => return None,
            }
            j += 1;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evaluates_the_kernels_constant_expressions() {
        assert_eq!(eval("0"), Some(0));
        assert_eq!(
            eval("( unsigned long)(( gfp_t)((((1UL))) << (6)))"),
            Some(64)
        );
        assert_eq!(
            eval(
                "((( gfp_t)(((((1UL))) << (10))|((((1UL))) << (11)))) | (( gfp_t)((((1UL))) << (6))))"
            ),
            Some((1 << 10) | (1 << 11) | (1 << 6))
        );
        assert_eq!(eval("~(( gfp_t)0x4) & 0xf"), Some(0xb));
        assert_eq!(eval("-1"), Some(u64::MAX));
        assert_eq!(eval("REC->x"), None);
    }

    #[test]
    fn symbolic_and_flag_fields_from_real_formats() {
        let softirq = r#""vec=%u [action=%s]", REC->vec, __print_symbolic(REC->vec, { 0, "HI" }, { 1, "TIMER" }, { 2, "NET_TX" }, { 3, "NET_RX" })"#;
        let names = field_names(softirq);
        let vec = &names["vec"];
        assert_eq!(vec.render(1, 32), "TIMER");
        assert_eq!(vec.render(9, 32), "0x9");
        assert_eq!(vec.value_of("NET_RX"), Some(3));

        let kmalloc = r#""gfp_flags=%s", (REC->gfp_flags) ? __print_flags(REC->gfp_flags, "|", {( unsigned long)((( gfp_t)(((((1UL))) << (10))|((((1UL))) << (11)))) | (( gfp_t)((((1UL))) << (6))) | (( gfp_t)((((1UL))) << (7)))), "GFP_KERNEL"}, {( unsigned long)(( gfp_t)((((1UL))) << (18))), "__GFP_COMP"}, {( unsigned long)(( gfp_t)((((1UL))) << (0))), "__GFP_DMA"}, { 0, ((void *)0) } ) : "none""#;
        let names = field_names(kmalloc);
        let gfp = &names["gfp_flags"];
        assert!(gfp.is_flags());
        let kernel = (1 << 10) | (1 << 11) | (1 << 6) | (1 << 7);
        assert_eq!(gfp.render(kernel, 32), "GFP_KERNEL");
        assert_eq!(gfp.render(kernel | 1 << 18, 32), "GFP_KERNEL|__GFP_COMP");
        assert_eq!(gfp.render(1 << 18 | 1 << 30, 32), "__GFP_COMP|0x40000000");
        assert_eq!(gfp.render(0, 32), "0x0");
    }

    #[test]
    fn addresses_cast_to_pointers_are_found() {
        let fmt = r#""call_site=%pS ptr=%p", (void *)REC->call_site, REC->ptr"#;
        assert_eq!(pointer_fields(fmt), ["call_site"]);
    }

    #[test]
    fn fields_under_expressions_are_left_out() {
        let fmt = r#""%s", __print_symbolic(REC->a & 3, { 0, "X" }), __print_symbolic((int)REC->b, { 1, "Y" })"#;
        let names = field_names(fmt);
        assert!(!names.contains_key("a"));
        assert_eq!(names["b"].render(1, 32), "Y");
    }
}
