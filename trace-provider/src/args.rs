//! Argument values: every FXT argument type a macro accepts.

use trace_common::fxt::wire::{self, arg_type};

use crate::engine::{Name, Words};

/// A pointer argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pointer(pub usize);

/// A kernel object id argument (a pid or tid, say).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Koid(pub u64);

/// One argument value. Macros convert their values with `Value::from`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value<'a> {
    /// No value.
    Null,
    /// Signed 32-bit integer.
    I32(i32),
    /// Unsigned 32-bit integer.
    U32(u32),
    /// Signed 64-bit integer.
    I64(i64),
    /// Unsigned 64-bit integer.
    U64(u64),
    /// Double.
    F64(f64),
    /// String, written inline and cut at 32 000 bytes.
    Str(&'a str),
    /// Pointer.
    Pointer(usize),
    /// Kernel object id.
    Koid(u64),
    /// Boolean.
    Bool(bool),
}

macro_rules! from {
    ($t:ty, |$v:ident| $e:expr) => {
        impl From<$t> for Value<'_> {
            fn from($v: $t) -> Self {
                $e
            }
        }
    };
}

from!((), |_v| Value::Null);
from!(i8, |v| Value::I32(i32::from(v)));
from!(i16, |v| Value::I32(i32::from(v)));
from!(i32, |v| Value::I32(v));
from!(u8, |v| Value::U32(u32::from(v)));
from!(u16, |v| Value::U32(u32::from(v)));
from!(u32, |v| Value::U32(v));
from!(i64, |v| Value::I64(v));
from!(isize, |v| Value::I64(v as i64));
from!(u64, |v| Value::U64(v));
from!(usize, |v| Value::U64(v as u64));
from!(f32, |v| Value::F64(f64::from(v)));
from!(f64, |v| Value::F64(v));
from!(bool, |v| Value::Bool(v));
from!(Pointer, |v| Value::Pointer(v.0));
from!(Koid, |v| Value::Koid(v.0));

impl<T> From<*const T> for Value<'_> {
    fn from(p: *const T) -> Self {
        Value::Pointer(p as usize)
    }
}

impl<T> From<*mut T> for Value<'_> {
    fn from(p: *mut T) -> Self {
        Value::Pointer(p as usize)
    }
}

impl<'a> From<&'a str> for Value<'a> {
    fn from(s: &'a str) -> Self {
        Value::Str(s)
    }
}

impl<'a> From<&'a String> for Value<'a> {
    fn from(s: &'a String) -> Self {
        Value::Str(s)
    }
}

fn clip(s: &str) -> &str {
    let mut end = s.len().min(wire::PRACTICAL_MAX_STRING_LEN);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

impl Value<'_> {
    /// Words after the argument header.
    #[inline(always)]
    pub(crate) fn value_words(&self) -> usize {
        match self {
            Value::Null | Value::I32(_) | Value::U32(_) | Value::Bool(_) => 0,
            Value::Str(s) => wire::words(clip(s).len()),
            _ => 1,
        }
    }

    /// Words of the whole argument with name `name`.
    #[inline(always)]
    pub(crate) fn words(&self, name: &Name) -> usize {
        1 + name.inline_words() + self.value_words()
    }

    /// Writes the whole argument, named by string table index `name`.
    #[inline(always)]
    pub(crate) fn write_indexed(&self, name: u16, w: &mut Words) {
        self.write_parts(name, None, 1 + self.value_words(), w);
    }

    /// The argument type, the 32 bits that go in the header, and the value
    /// word if any; `None` for a string.
    #[inline(always)]
    fn scalar(&self) -> Option<(u8, u32, Option<u64>)> {
        Some(match *self {
            Value::Null => (arg_type::NULL, 0, None),
            Value::I32(v) => (arg_type::INT32, v as u32, None),
            Value::U32(v) => (arg_type::UINT32, v, None),
            Value::Bool(v) => (arg_type::BOOL, u32::from(v), None),
            Value::I64(v) => (arg_type::INT64, 0, Some(v as u64)),
            Value::U64(v) => (arg_type::UINT64, 0, Some(v)),
            Value::F64(v) => (arg_type::DOUBLE, 0, Some(v.to_bits())),
            Value::Pointer(v) => (arg_type::POINTER, 0, Some(v as u64)),
            Value::Koid(v) => (arg_type::KOID, 0, Some(v)),
            Value::Str(_) => return None,
        })
    }

    /// Writes the argument of `words` words named by reference `name`,
    /// followed by `inline`'s bytes when the name is written inline.
    #[inline(always)]
    fn write_parts(&self, name: u16, inline: Option<&Name>, words: usize, w: &mut Words) {
        match self.scalar() {
            Some((ty, bits, word)) => {
                w.push(wire::arg_header(ty, words, name) | (u64::from(bits) << 32));
                if let Some(n) = inline {
                    n.write_inline(w);
                }
                if let Some(v) = word {
                    w.push(v);
                }
            }
            None => {
                let Value::Str(s) = *self else { return };
                let s = clip(s);
                w.push(
                    wire::arg_header(arg_type::STRING, words, name)
                        | (u64::from(wire::inline_string_ref(s.len())) << 32),
                );
                if let Some(n) = inline {
                    n.write_inline(w);
                }
                w.push_bytes(s.as_bytes());
            }
        }
    }

    /// Writes the whole argument.
    #[inline(always)]
    pub(crate) fn write(&self, name: &Name, w: &mut Words) {
        self.write_parts(name.reference, Some(name), self.words(name), w);
    }
}
