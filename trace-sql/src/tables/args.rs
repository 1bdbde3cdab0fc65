//! Arguments as a JSON object, the `args` column of several tables.

use std::fmt::Write as _;

use trace_analysis::event::Args;
use trace_analysis::{Context, Sym, Value};

/// Writes `args` into `out` (cleared first) as one JSON object, in the
/// order of the record, with only the arguments whose name `keep` keeps.
/// Integers and kernel object ids are numbers, pointers `"0x..."`
/// strings, non-finite doubles `null`.
pub fn write_json(out: &mut String, args: &Args, cx: &Context, keep: impl Fn(Sym) -> bool) {
    out.clear();
    out.push('{');
    let mut first = true;
    for (name, value) in args {
        if !keep(*name) {
            continue;
        }
        let name = cx.strings.get(*name);
        if !first {
            out.push(',');
        }
        first = false;
        string(out, name);
        out.push(':');
        match value {
            Value::Null => out.push_str("null"),
            Value::Int(v) => {
                let _ = write!(out, "{v}");
            }
            Value::Uint(v) | Value::Koid(v) => {
                let _ = write!(out, "{v}");
            }
            Value::Double(v) if v.is_finite() => {
                let _ = write!(out, "{v:?}");
            }
            Value::Double(_) => out.push_str("null"),
            Value::Str(s) => string(out, s),
            Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Value::Pointer(p) => {
                let _ = write!(out, "\"{p:#x}\"");
            }
        }
    }
    out.push('}');
}

/// `s` as a JSON string.
fn string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tables::testing;

    #[test]
    fn every_value_is_valid_json() {
        let mut cx = testing::cx();
        let args = testing::args(
            &mut cx,
            &[
                ("i", Value::Int(-3)),
                ("u", Value::Uint(u64::MAX)),
                ("d", Value::Double(1.5)),
                ("nan", Value::Double(f64::NAN)),
                ("s", Value::Str("a\"b\\c\n\u{1}é".into())),
                ("b", Value::Bool(true)),
                ("p", Value::Pointer(0xdead)),
                ("k", Value::Koid(42)),
                ("n", Value::Null),
                ("skipped", Value::Int(1)),
            ],
        );
        let mut out = String::new();
        let skipped = cx.strings.lookup("skipped").unwrap();
        write_json(&mut out, &args, &cx, |n| n != skipped);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "i": -3, "u": u64::MAX, "d": 1.5, "nan": null, "s": "a\"b\\c\n\u{1}é",
                "b": true, "p": "0xdead", "k": 42, "n": null
            })
        );
        // In the record's order.
        assert!(out.starts_with("{\"i\":-3,\"u\":"));
        write_json(&mut out, &Vec::new(), &cx, |_| true);
        assert_eq!(out, "{}");
    }
}
