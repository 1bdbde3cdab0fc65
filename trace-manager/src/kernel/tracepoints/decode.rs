//! A tracepoint event's fields, decoded into typed values.

use std::fmt::Write as _;

use trace_common::kernel::tracepoint::TracepointRecord;

use super::Tracepoint;
use super::field::{FieldKind, Place, located, read_int, text};

/// Most array elements shown; the rest is summarized.
const ARRAY_SHOWN: usize = 64;

/// One decoded field value.
#[derive(Clone, Debug, PartialEq)]
pub enum Decoded {
    /// A signed integer 4 bytes wide or less.
    I32(i32),
    /// An unsigned integer 4 bytes wide or less.
    U32(u32),
    /// A signed 8-byte integer.
    I64(i64),
    /// An unsigned 8-byte integer.
    U64(u64),
    /// A boolean.
    Bool(bool),
    /// A pointer.
    Pointer(u64),
    /// A text: a string field, a named value, an array.
    Text(String),
}

/// The fields of `record` (an event of `tp`) other than the `common_*`
/// ones, in format order, as `(name, value)`. A field the record is too
/// short for is left out.
pub fn decode(tp: &Tracepoint, record: &TracepointRecord<'_>) -> Vec<(String, Decoded)> {
    let data = record.data;
    let mut strings = record.strings();
    let mut out = Vec::with_capacity(tp.fields.len());
    for f in &tp.fields {
        let name = f.name();
        if name.starts_with("common_") || name == "__syscall_nr" {
            continue;
        }
        let at = f.format.offset as usize;
        let value = match &f.kind {
            FieldKind::Int { size, signed } => {
                let Some(v) = read_int(data, at, *size, *signed) else {
                    continue;
                };
                match &f.names {
                    Some(names) => Decoded::Text(names.render(v, 8 * u32::from(*size))),
                    None => int(v, *size, *signed),
                }
            }
            FieldKind::Bool => match read_int(data, at, 1, false) {
                Some(v) => Decoded::Bool(v != 0),
                None => continue,
            },
            FieldKind::Pointer => match read_int(data, at, 8, false) {
                Some(v) => Decoded::Pointer(v),
                None => continue,
            },
            FieldKind::UserString => {
                let pointer = read_int(data, at, 8, false);
                match strings.next().flatten() {
                    Some(s) => Decoded::Text(String::from_utf8_lossy(s).into_owned()),
                    None => match pointer {
                        Some(p) => Decoded::Pointer(p),
                        None => continue,
                    },
                }
            }
            FieldKind::Text(Place::Inline) => {
                let end = at + f.format.size as usize;
                let Some(bytes) = data.get(at..end) else {
                    continue;
                };
                Decoded::Text(text(bytes))
            }
            FieldKind::Text(place) => {
                let Some((bytes, cut)) = located(data, at, *place) else {
                    continue;
                };
                let mut s = text(bytes);
                if cut {
                    s.push('…');
                }
                Decoded::Text(s)
            }
            FieldKind::Array {
                place,
                elem,
                signed,
            } => {
                let (bytes, cut) = match place {
                    Place::Inline => match data.get(at..at + f.format.size as usize) {
                        Some(b) => (b, false),
                        None => continue,
                    },
                    _ => match located(data, at, *place) {
                        Some(x) => x,
                        None => continue,
                    },
                };
                Decoded::Text(array(bytes, *elem, *signed, cut))
            }
            FieldKind::Bytes => {
                let bytes = if f.format.is_data_loc() || f.format.is_rel_loc() {
                    let place = if f.format.is_data_loc() {
                        Place::DataLoc
                    } else {
                        Place::RelLoc
                    };
                    match located(data, at, place) {
                        Some((b, _)) => b,
                        None => continue,
                    }
                } else {
                    match data.get(at..at + f.format.size as usize) {
                        Some(b) => b,
                        None => continue,
                    }
                };
                Decoded::Text(hex(bytes))
            }
        };
        out.push((name.to_owned(), value));
    }
    out
}

fn int(v: u64, size: u8, signed: bool) -> Decoded {
    match (size, signed) {
        (8, true) => Decoded::I64(v as i64),
        (8, false) => Decoded::U64(v),
        (_, true) => Decoded::I32(v as i64 as i32),
        (_, false) => Decoded::U32(v as u32),
    }
}

/// `[1, 2, 3]`, at most [`ARRAY_SHOWN`] elements.
fn array(bytes: &[u8], elem: u8, signed: bool, cut: bool) -> String {
    let elem = usize::from(elem.max(1));
    let n = bytes.len() / elem;
    let mut s = String::from("[");
    for i in 0..n.min(ARRAY_SHOWN) {
        if i > 0 {
            s.push_str(", ");
        }
        let v = read_int(bytes, i * elem, elem as u8, signed).unwrap_or(0);
        if signed {
            let _ = write!(s, "{}", v as i64);
        } else {
            let _ = write!(s, "{v}");
        }
    }
    if n > ARRAY_SHOWN {
        let _ = write!(s, ", … {} more", n - ARRAY_SHOWN);
    }
    if cut {
        s.push_str(", …");
    }
    s.push(']');
    s
}

/// Lower-case hex, two digits a byte.
fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(2 * bytes.len());
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}
