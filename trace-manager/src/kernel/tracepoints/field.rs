//! What each field of a tracepoint record is, from its format file
//! declaration, and its value read from a record.

use super::print_fmt::Names;
use crate::kernel::format::FormatField;

/// Where a text or array lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// In the field itself (`char comm[16]`).
    Inline,
    /// Where the field's `__data_loc` word points.
    DataLoc,
    /// Where the field's `__rel_loc` word points (from the word's end).
    RelLoc,
}

/// How a field is decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FieldKind {
    /// An integer `size` bytes wide (1, 2, 4 or 8).
    Int {
        /// Bytes read.
        size: u8,
        /// Sign-extended.
        signed: bool,
    },
    /// A C `bool`.
    Bool,
    /// A NUL-terminated text.
    Text(Place),
    /// A pointer, shown as one.
    Pointer,
    /// A pointer to a NUL-terminated string in the traced process's memory,
    /// read by the program (a system call's file name).
    UserString,
    /// An array of integers.
    Array {
        /// Where its elements are.
        place: Place,
        /// Bytes per element.
        elem: u8,
        /// Sign-extended elements.
        signed: bool,
    },
    /// Anything else: its bytes.
    Bytes,
}

/// One field with how to decode it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    /// The format file's line.
    pub format: FormatField,
    /// How it is decoded.
    pub kind: FieldKind,
    /// The names its values have, when the format gives them.
    pub names: Option<Names>,
}

/// Width and signedness of the C integer types tracepoints use.
fn c_int(ty: &str) -> Option<(u8, bool)> {
    let ty = ty
        .trim_start_matches("const ")
        .trim_start_matches("volatile ")
        .trim();
    Some(match ty {
        "char" | "signed char" | "s8" | "__s8" | "int8_t" => (1, true),
        "unsigned char" | "u8" | "__u8" | "uint8_t" => (1, false),
        "short" | "signed short" | "short int" | "s16" | "__s16" | "int16_t" => (2, true),
        "unsigned short" | "unsigned short int" | "u16" | "__u16" | "uint16_t" | "umode_t"
        | "__be16" | "__le16" => (2, false),
        "int" | "signed int" | "signed" | "s32" | "__s32" | "int32_t" | "pid_t"
        | "key_serial_t" | "clockid_t" | "timer_t" | "mqd_t" | "rwf_t" => (4, true),
        "unsigned int" | "unsigned" | "u32" | "__u32" | "uint32_t" | "uid_t" | "gid_t"
        | "qid_t" | "gfp_t" | "fmode_t" | "dev_t" | "__be32" | "__le32" | "blk_opf_t" => (4, false),
        "long" | "long int" | "long long" | "long long int" | "s64" | "__s64" | "int64_t"
        | "loff_t" | "ssize_t" | "off_t" | "time64_t" | "ktime_t" | "time_t"
        | "__kernel_time_t" => (8, true),
        "unsigned long"
        | "unsigned long int"
        | "unsigned long long"
        | "unsigned long long int"
        | "u64"
        | "__u64"
        | "uint64_t"
        | "size_t"
        | "sector_t"
        | "cputime_t"
        | "__be64"
        | "__le64"
        | "aio_context_t"
        | "key_t" => (8, false),
        _ => return None,
    })
}

impl Field {
    /// Classifies `format` (a field of tracepoint group `group`), with
    /// `names` from the print format.
    pub fn new(group: &str, format: FormatField, names: Option<Names>) -> Field {
        let kind = classify(group, &format);
        Field {
            format,
            kind,
            names,
        }
    }

    /// The field's name.
    pub fn name(&self) -> &str {
        &self.format.name
    }
}

fn classify(group: &str, f: &FormatField) -> FieldKind {
    let ty = f.c_type.as_str();
    let place = if f.is_data_loc() {
        Some(Place::DataLoc)
    } else if f.is_rel_loc() {
        Some(Place::RelLoc)
    } else {
        None
    };
    if let Some(place) = place {
        // `__data_loc char[] name`, `__data_loc u8[] buf`.
        let elem = ty
            .trim_start_matches("__data_loc")
            .trim_start_matches("__rel_loc")
            .trim()
            .trim_end_matches("[]")
            .trim();
        if elem == "char" || elem == "const char" {
            return FieldKind::Text(place);
        }
        return match c_int(elem) {
            Some((size, signed)) => FieldKind::Array {
                place,
                elem: size,
                signed,
            },
            None => FieldKind::Bytes,
        };
    }
    if let Some(n) = f.array_len {
        let elem = ty.split('[').next().unwrap_or("").trim();
        if elem == "char" || elem == "const char" {
            return FieldKind::Text(Place::Inline);
        }
        return match c_int(elem) {
            Some((size, signed)) if n > 0 && f.size == u32::from(size) * n => FieldKind::Array {
                place: Place::Inline,
                elem: size,
                signed,
            },
            _ => FieldKind::Bytes,
        };
    }
    if ty.contains('*') {
        let user_string = group == "syscalls"
            && ty.replace(' ', "").ends_with("char*")
            && !f.name.contains("buf")
            && f.size == 8;
        return if user_string {
            FieldKind::UserString
        } else {
            FieldKind::Pointer
        };
    }
    if ty == "bool" || ty == "_Bool" {
        return FieldKind::Bool;
    }
    // A system call argument is an 8-byte slot whatever its C type: the
    // value is in the type's own width (an `int` fd of -100 is stored as
    // 0x00000000ffffff9c).
    if let Some((size, signed)) = c_int(ty)
        && u32::from(size) <= f.size
    {
        return FieldKind::Int { size, signed };
    }
    match f.size {
        1 | 2 | 4 | 8 => FieldKind::Int {
            size: f.size as u8,
            signed: f.signed,
        },
        _ => FieldKind::Bytes,
    }
}

/// The `u64` of the `size` bytes at `at` in `data`, sign-extended when
/// `signed`; `None` when outside `data`.
pub fn read_int(data: &[u8], at: usize, size: u8, signed: bool) -> Option<u64> {
    let bytes = data.get(at..at.checked_add(usize::from(size))?)?;
    let mut word = [0u8; 8];
    word[..bytes.len()].copy_from_slice(bytes);
    let raw = u64::from_le_bytes(word);
    let bits = 8 * u32::from(size);
    Some(if signed && bits < 64 {
        (((raw << (64 - bits)) as i64) >> (64 - bits)) as u64
    } else {
        raw
    })
}

/// The bytes a `__data_loc`/`__rel_loc` word at `at` points at, and
/// whether they were cut off by the end of the copy.
pub fn located(data: &[u8], at: usize, place: Place) -> Option<(&[u8], bool)> {
    let loc = read_int(data, at, 4, false)? as u32;
    let mut start = (loc & 0xffff) as usize;
    if place == Place::RelLoc {
        start += at + 4;
    }
    let len = (loc >> 16) as usize;
    let end = start + len;
    if start > data.len() {
        return Some((&[], len > 0));
    }
    Some((&data[start..end.min(data.len())], end > data.len()))
}

/// `bytes` up to the first NUL, as text.
pub fn text(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(decl: &str, offset: u32, size: u32, signed: bool) -> FormatField {
        let text = format!(
            "name: x\nID: 1\nformat:\n\tfield:{decl};\toffset:{offset};\tsize:{size};\tsigned:{};\n",
            u8::from(signed)
        );
        crate::kernel::format::parse_format(&text)
            .unwrap()
            .fields
            .remove(0)
    }

    #[test]
    fn fields_are_classified_by_declaration() {
        let k = |g: &str, d: &str, size: u32, signed: bool| classify(g, &field(d, 8, size, signed));
        assert_eq!(
            k("sched", "pid_t pid", 4, true),
            FieldKind::Int {
                size: 4,
                signed: true
            }
        );
        // A system call's `int` in an 8-byte slot.
        assert_eq!(
            k("syscalls", "int dfd", 8, false),
            FieldKind::Int {
                size: 4,
                signed: true
            }
        );
        assert_eq!(
            k("syscalls", "const char * filename", 8, false),
            FieldKind::UserString
        );
        assert_eq!(
            k("syscalls", "const char * buf", 8, false),
            FieldKind::Pointer
        );
        assert_eq!(k("kmem", "const void * ptr", 8, false), FieldKind::Pointer);
        assert_eq!(
            k("sched", "char comm[16]", 16, false),
            FieldKind::Text(Place::Inline)
        );
        assert_eq!(
            k("signal", "__data_loc char[] name", 4, false),
            FieldKind::Text(Place::DataLoc)
        );
        assert_eq!(
            k("x", "unsigned long args[6]", 48, false),
            FieldKind::Array {
                place: Place::Inline,
                elem: 8,
                signed: false
            }
        );
        assert_eq!(
            k("x", "__data_loc u8[] buf", 4, false),
            FieldKind::Array {
                place: Place::DataLoc,
                elem: 1,
                signed: false
            }
        );
        assert_eq!(k("x", "bool ok", 1, false), FieldKind::Bool);
        assert_eq!(k("x", "struct foo f", 12, false), FieldKind::Bytes);
    }

    #[test]
    fn values_are_read_and_extended() {
        let data = [0x9c, 0xff, 0xff, 0xff, 0, 0, 0, 0, 5, 0, 0x10, 0x00];
        assert_eq!(read_int(&data, 0, 4, true), Some(-100i64 as u64));
        assert_eq!(read_int(&data, 0, 8, false), Some(0xffff_ff9c));
        assert_eq!(read_int(&data, 10, 4, false), None);
        // A location word: 2 bytes at offset 8.
        let mut rec = vec![0u8; 8];
        rec.extend_from_slice(&(8u32 | 3 << 16).to_le_bytes());
        rec.truncate(8);
        rec.extend_from_slice(&(12u32 | 3 << 16).to_le_bytes());
        rec.extend_from_slice(b"hi\0");
        assert_eq!(
            located(&rec, 8, Place::DataLoc),
            Some((&b"hi\0"[..], false))
        );
        assert_eq!(located(&rec, 8, Place::RelLoc), Some((&[][..], true)));
        assert_eq!(text(b"hi\0xx"), "hi");
    }
}
