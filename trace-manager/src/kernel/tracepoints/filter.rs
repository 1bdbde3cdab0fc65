//! Filter expressions (`-e 'sched:sched_switch if prev_prio < 100'`),
//! checked against an event's fields and compiled into the postfix program
//! the eBPF program runs (`trace_common::kernel::tracepoint`).
//!
//! ```text
//! expr  := and ( "||" and )*
//! and   := unary ( "&&" unary )*
//! unary := "!" unary | "(" expr ")" | FIELD OP VALUE
//! OP    := "==" | "!=" | "<" | "<=" | ">" | ">=" | "&"   ("&": any of the bits set)
//! VALUE := integer (decimal, 0x hex, negative) | a name the event's format
//!          gives the field's values (`vec == TIMER`, `gfp_flags & __GFP_COMP`)
//!          | "text" for text fields (== and != only; "abc*" matches a prefix)
//! ```

use std::fmt;

use trace_common::kernel::tracepoint::{
    FILTER_MAX_INSNS, FILTER_TEXT_MAX, FLAG_DATA_LOC, FLAG_PREFIX, FLAG_REL_LOC, FLAG_SIGNED,
    FilterInsn, OP_AND, OP_BITS, OP_EQ, OP_GE, OP_GT, OP_LE, OP_LT, OP_NE, OP_NOT, OP_OR, OP_TEXT,
};

use super::field::{Field, FieldKind, Place};

/// Why a filter cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct FilterError {
    /// What is wrong, naming the field or the text at fault.
    pub message: String,
}

fn err<T>(message: impl Into<String>) -> Result<T, FilterError> {
    Err(FilterError {
        message: message.into(),
    })
}

/// A parsed filter expression.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expr {
    /// Both hold.
    And(Box<Expr>, Box<Expr>),
    /// Either holds.
    Or(Box<Expr>, Box<Expr>),
    /// Does not hold.
    Not(Box<Expr>),
    /// `field op value`.
    Compare {
        /// The field's name.
        field: String,
        /// The operator as written.
        op: Op,
        /// The value as written.
        value: Value,
    },
}

/// A comparison operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `&`
    Bits,
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Op::Eq => "==",
            Op::Ne => "!=",
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Gt => ">",
            Op::Ge => ">=",
            Op::Bits => "&",
        })
    }
}

/// A value as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    /// An integer (negative ones as their two's complement with `negative`).
    Int(i128),
    /// A name of a value.
    Name(String),
    /// A quoted text.
    Text(String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Tok {
    Ident(String),
    Int(i128),
    Text(String),
    Sym(&'static str),
}

fn lex(s: &str) -> Result<Vec<Tok>, FilterError> {
    let b = s.as_bytes();
    let mut i = 0;
    let mut out = Vec::new();
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c.is_ascii_digit() {
            let start = i;
            while i < b.len() && b[i].is_ascii_alphanumeric() {
                i += 1;
            }
            let t = &s[start..i];
            let v = if let Some(h) = t.strip_prefix("0x").or(t.strip_prefix("0X")) {
                i128::from_str_radix(h, 16)
            } else {
                t.parse()
            };
            out.push(Tok::Int(v.map_err(|_| FilterError {
                message: format!("`{t}` is not a number"),
            })?));
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push(Tok::Ident(s[start..i].to_owned()));
        } else if c == b'"' {
            let start = i + 1;
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += 1;
            }
            if i == b.len() {
                return err("a quoted text does not end");
            }
            out.push(Tok::Text(s[start..i].to_owned()));
            i += 1;
        } else {
            let two = s.get(i..i + 2).unwrap_or("");
            let sym = match two {
                "==" | "!=" | "<=" | ">=" | "&&" | "||" => Some(two),
                _ => None,
            };
            let sym: &'static str = match sym {
                Some("==") => "==",
                Some("!=") => "!=",
                Some("<=") => "<=",
                Some(">=") => ">=",
                Some("&&") => "&&",
                Some("||") => "||",
                _ => match c {
                    b'<' => "<",
                    b'>' => ">",
                    b'&' => "&",
                    b'!' => "!",
                    b'(' => "(",
                    b')' => ")",
                    b'-' => "-",
                    _ => {
                        return err(format!(
                            "unexpected `{}`",
                            s[i..].chars().next().unwrap_or(' ')
                        ));
                    }
                },
            };
            i += sym.len();
            out.push(Tok::Sym(sym));
        }
    }
    Ok(out)
}

/// Parses a filter expression.
pub fn parse(text: &str) -> Result<Expr, FilterError> {
    let toks = lex(text)?;
    if toks.is_empty() {
        return err("the filter is empty");
    }
    let mut p = Parser { t: &toks, i: 0 };
    let e = p.or()?;
    match p.t.get(p.i) {
        None => Ok(e),
        Some(t) => err(format!(
            "unexpected {} after a complete expression",
            show(t)
        )),
    }
}

fn show(t: &Tok) -> String {
    match t {
        Tok::Ident(s) => format!("`{s}`"),
        Tok::Int(v) => format!("`{v}`"),
        Tok::Text(s) => format!("\"{s}\""),
        Tok::Sym(s) => format!("`{s}`"),
    }
}

struct Parser<'a> {
    t: &'a [Tok],
    i: usize,
}

impl Parser<'_> {
    fn eat(&mut self, sym: &str) -> bool {
        if matches!(self.t.get(self.i), Some(Tok::Sym(s)) if *s == sym) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn or(&mut self) -> Result<Expr, FilterError> {
        let mut e = self.and()?;
        while self.eat("||") {
            e = Expr::Or(Box::new(e), Box::new(self.and()?));
        }
        Ok(e)
    }

    fn and(&mut self) -> Result<Expr, FilterError> {
        let mut e = self.unary()?;
        while self.eat("&&") {
            e = Expr::And(Box::new(e), Box::new(self.unary()?));
        }
        Ok(e)
    }

    fn unary(&mut self) -> Result<Expr, FilterError> {
        if self.eat("!") {
            return Ok(Expr::Not(Box::new(self.unary()?)));
        }
        if self.eat("(") {
            let e = self.or()?;
            if !self.eat(")") {
                return err("a `(` is not closed");
            }
            return Ok(e);
        }
        let field = match self.t.get(self.i) {
            Some(Tok::Ident(f)) => f.clone(),
            Some(t) => return err(format!("expected a field name, found {}", show(t))),
            None => return err("the filter ends where a field name was expected"),
        };
        self.i += 1;
        let op = match self.t.get(self.i) {
            Some(Tok::Sym("==")) => Op::Eq,
            Some(Tok::Sym("!=")) => Op::Ne,
            Some(Tok::Sym("<")) => Op::Lt,
            Some(Tok::Sym("<=")) => Op::Le,
            Some(Tok::Sym(">")) => Op::Gt,
            Some(Tok::Sym(">=")) => Op::Ge,
            Some(Tok::Sym("&")) => Op::Bits,
            Some(t) => {
                return err(format!(
                    "expected a comparison (== != < <= > >= &) after `{field}`, found {}",
                    show(t)
                ));
            }
            None => return err(format!("`{field}` is not compared with anything")),
        };
        self.i += 1;
        let negative = self.eat("-");
        let value = match self.t.get(self.i) {
            Some(Tok::Int(v)) => Value::Int(if negative { -v } else { *v }),
            Some(Tok::Ident(n)) if !negative => Value::Name(n.clone()),
            Some(Tok::Text(s)) if !negative => Value::Text(s.clone()),
            Some(t) => {
                return err(format!(
                    "expected a value after `{field} {op}`, found {}",
                    show(t)
                ));
            }
            None => return err(format!("`{field} {op}` has no value")),
        };
        self.i += 1;
        Ok(Expr::Compare { field, op, value })
    }
}

/// Compiles `expr` against the event's `fields` (the `common_*` ones
/// included).
pub fn compile(expr: &Expr, fields: &[Field]) -> Result<Vec<FilterInsn>, FilterError> {
    let mut out = Vec::new();
    emit(expr, fields, &mut out)?;
    if out.len() > FILTER_MAX_INSNS {
        return err(format!(
            "the filter has {} comparisons and operators; at most {FILTER_MAX_INSNS} fit",
            out.len()
        ));
    }
    Ok(out)
}

fn emit(e: &Expr, fields: &[Field], out: &mut Vec<FilterInsn>) -> Result<(), FilterError> {
    let op = |op: u8| FilterInsn {
        op,
        ..Default::default()
    };
    match e {
        Expr::And(a, b) | Expr::Or(a, b) => {
            emit(a, fields, out)?;
            emit(b, fields, out)?;
            out.push(op(if matches!(e, Expr::And(..)) {
                OP_AND
            } else {
                OP_OR
            }));
        }
        Expr::Not(a) => {
            emit(a, fields, out)?;
            out.push(op(OP_NOT));
        }
        Expr::Compare {
            field,
            op: cmp,
            value,
        } => {
            let Some(f) = fields.iter().find(|f| f.name() == field) else {
                let names: Vec<&str> = fields.iter().map(Field::name).collect();
                return err(format!(
                    "the event has no field `{field}` (fields: {})",
                    names.join(", ")
                ));
            };
            if field.starts_with("common_") {
                return err(format!(
                    "`{field}` is not available to a filter in the kernel (BPF programs see \
                     a register pointer in the common fields); use -p to select processes"
                ));
            }
            if let Value::Name(n) = value
                && fields.iter().any(|g| g.name() == n)
                && f.names
                    .as_ref()
                    .and_then(|names| names.value_of(n))
                    .is_none()
            {
                return err(format!(
                    "`{n}` is a field: a filter compares a field with a constant, not with \
                     another field"
                ));
            }
            comparison(f, *cmp, value, out)?;
        }
    }
    Ok(())
}

fn comparison(
    f: &Field,
    cmp: Op,
    value: &Value,
    out: &mut Vec<FilterInsn>,
) -> Result<(), FilterError> {
    let name = f.name();
    let offset = u16::try_from(f.format.offset).map_err(|_| FilterError {
        message: format!("`{name}` lies beyond the record's first 64 KiB"),
    })?;
    if usize::from(offset) >= trace_common::kernel::tracepoint::DATA_MAX - 8 {
        return err(format!("`{name}` lies beyond the bytes a filter can read"));
    }
    let (size, signed) = match &f.kind {
        FieldKind::Int { size, signed } => (*size, *signed),
        FieldKind::Bool => (1, false),
        FieldKind::Pointer => (8, false),
        FieldKind::Text(place) => return text_comparison(f, *place, offset, cmp, value, out),
        FieldKind::UserString => {
            if !matches!(value, Value::Int(_)) {
                return err(format!(
                    "`{name}` points into the traced process's memory: a filter compares the \
                     pointer (a number), not the text"
                ));
            }
            (8, false)
        }
        FieldKind::Array { .. } | FieldKind::Bytes => {
            return err(format!("`{name}` ({}) cannot be compared", f.format.c_type));
        }
    };
    int_comparison(f, offset, size, signed, cmp, value, out)
}

fn int_comparison(
    f: &Field,
    offset: u16,
    size: u8,
    signed: bool,
    cmp: Op,
    value: &Value,
    out: &mut Vec<FilterInsn>,
) -> Result<(), FilterError> {
    let name = f.name();
    let v: i128 = match value {
        Value::Int(v) => *v,
        Value::Name(n) => match f.names.as_ref().and_then(|names| names.value_of(n)) {
            Some(v) => i128::from(v),
            None => {
                return err(match &f.names {
                    Some(_) => format!("`{n}` is not a name of `{name}`'s values"),
                    None => format!("`{name}` has no named values; `{n}` must be a number"),
                });
            }
        },
        Value::Text(t) => {
            return err(format!("`{name}` is a number; \"{t}\" is a text"));
        }
    };
    let bits = 8 * u32::from(size);
    let (min, max) = if signed {
        (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
    } else {
        (0, (1i128 << bits) - 1)
    };
    // Names of values are taken as the kernel wrote them, whatever the sign.
    let v = if matches!(value, Value::Name(_)) && signed && v > max {
        v - (1i128 << bits)
    } else {
        v
    };
    if v < min || v > max {
        return err(format!(
            "{v} does not fit `{name}` ({}{bits}: {min}..={max})",
            if signed { "i" } else { "u" }
        ));
    }
    let op = match cmp {
        Op::Eq => OP_EQ,
        Op::Ne => OP_NE,
        Op::Lt => OP_LT,
        Op::Le => OP_LE,
        Op::Gt => OP_GT,
        Op::Ge => OP_GE,
        Op::Bits => OP_BITS,
    };
    out.push(FilterInsn {
        op,
        size,
        flags: if signed { FLAG_SIGNED } else { 0 },
        offset,
        value: v as i64 as u64,
        ..Default::default()
    });
    Ok(())
}

fn text_comparison(
    f: &Field,
    place: Place,
    offset: u16,
    cmp: Op,
    value: &Value,
    out: &mut Vec<FilterInsn>,
) -> Result<(), FilterError> {
    let name = f.name();
    let Value::Text(t) = value else {
        return err(format!("`{name}` is a text: compare it with a quoted text"));
    };
    if !matches!(cmp, Op::Eq | Op::Ne) {
        return err(format!("`{name}` is a text: only == and != compare it"));
    }
    let (pattern, prefix) = match t.strip_suffix('*') {
        Some(p) => (p, true),
        None => (t.as_str(), false),
    };
    if pattern.contains('*') || pattern.contains('?') {
        return err(format!("\"{t}\": only a `*` at the end is understood"));
    }
    if pattern.len() > FILTER_TEXT_MAX {
        return err(format!(
            "\"{t}\" is longer than the {FILTER_TEXT_MAX} bytes a filter compares"
        ));
    }
    let mut text = [0u8; FILTER_TEXT_MAX];
    text[..pattern.len()].copy_from_slice(pattern.as_bytes());
    let mut flags = if prefix { FLAG_PREFIX } else { 0 };
    let size = match place {
        Place::Inline => u8::try_from(f.format.size).unwrap_or(u8::MAX),
        Place::DataLoc => {
            flags |= FLAG_DATA_LOC;
            0
        }
        Place::RelLoc => {
            flags |= FLAG_REL_LOC;
            0
        }
    };
    out.push(FilterInsn {
        op: OP_TEXT,
        size,
        flags,
        len: pattern.len() as u8,
        offset,
        text,
        ..Default::default()
    });
    if cmp == Op::Ne {
        out.push(FilterInsn {
            op: OP_NOT,
            ..Default::default()
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::format::parse_format;
    use crate::kernel::tracepoints::print_fmt::field_names;

    const SWITCH: &str = include_str!("../testdata/sched_switch.format");

    fn fields(text: &str) -> Vec<Field> {
        let f = parse_format(text).unwrap();
        let names = field_names(&f.print_fmt);
        f.fields
            .into_iter()
            .map(|x| {
                let n = names.get(&x.name).cloned();
                Field::new("sched", x, n)
            })
            .collect()
    }

    #[test]
    fn parses_precedence_and_negation() {
        let e = parse("a == 1 || b < -2 && !(c & 0x10)").unwrap();
        let Expr::Or(_, right) = e else {
            panic!("|| binds loosest")
        };
        assert!(matches!(*right, Expr::And(..)));
    }

    #[test]
    fn compiles_to_postfix() {
        let f = fields(SWITCH);
        let p = compile(&parse("prev_prio < 100 && next_pid != 0").unwrap(), &f).unwrap();
        assert_eq!(p.len(), 3);
        assert_eq!(p[0].op, OP_LT);
        assert_eq!(p[0].flags, FLAG_SIGNED);
        assert_eq!(p[0].value, 100);
        assert_eq!(p[1].op, OP_NE);
        assert_eq!(p[2].op, OP_AND);
        let p = compile(&parse("prev_comm != \"kworker*\"").unwrap(), &f).unwrap();
        assert_eq!(p[0].op, OP_TEXT);
        assert_eq!(p[0].flags, FLAG_PREFIX);
        assert_eq!(&p[0].text[..7], b"kworker");
        assert_eq!(p[1].op, OP_NOT);
        let p = compile(&parse("prev_pid == -1").unwrap(), &f).unwrap();
        assert_eq!(p[0].value, u64::MAX);
    }

    #[test]
    fn errors_name_what_is_wrong() {
        let f = fields(SWITCH);
        let e = |s: &str| compile(&parse(s).unwrap(), &f).unwrap_err().message;
        assert!(
            e("nope == 1").contains("no field `nope`"),
            "{}",
            e("nope == 1")
        );
        assert!(e("prev_comm < \"a\"").contains("only == and !="));
        assert!(e("prev_pid == \"a\"").contains("is a number"));
        assert!(e("prev_prio == 99999999999").contains("does not fit"));
        assert!(
            parse("prev_pid ==")
                .unwrap_err()
                .message
                .contains("no value")
        );
        assert!(parse("(a == 1").unwrap_err().message.contains("not closed"));
        assert!(parse("a = 1").is_err());
        assert!(e("prev_pid == next_pid").contains("not with another field"));
    }
}
