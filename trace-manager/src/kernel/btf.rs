//! Just enough of a BTF reader to find where a kernel struct keeps a field:
//! the BTF tracepoint programs read task and register fields at offsets
//! taken from the running kernel's `/sys/kernel/btf/vmlinux`, never compiled
//! in for one kernel.

use std::collections::HashMap;

/// Most composite types one member lookup visits.
const FIND_BUDGET: u32 = 10_000;

/// Where the running kernel describes its types.
pub const VMLINUX_BTF: &str = "/sys/kernel/btf/vmlinux";

/// Why the BTF could not be read.
#[derive(Debug, thiserror::Error)]
pub enum BtfError {
    /// Not BTF, or cut short.
    #[error("malformed BTF: {0}")]
    Malformed(&'static str),
    /// The struct is not there.
    #[error("no struct `{0}` in the kernel's BTF")]
    NoStruct(String),
    /// The field is not there.
    #[error("no field `{field}` in struct `{strukt}`")]
    NoField {
        /// The struct.
        strukt: String,
        /// The dotted field path asked for.
        field: String,
    },
}

const KIND_INT: u32 = 1;
const KIND_ARRAY: u32 = 3;
const KIND_STRUCT: u32 = 4;
const KIND_UNION: u32 = 5;
const KIND_ENUM: u32 = 6;
const KIND_TYPEDEF: u32 = 8;
const KIND_VOLATILE: u32 = 9;
const KIND_CONST: u32 = 10;
const KIND_RESTRICT: u32 = 11;
const KIND_FUNC_PROTO: u32 = 13;
const KIND_VAR: u32 = 14;
const KIND_DATASEC: u32 = 15;
const KIND_DECL_TAG: u32 = 17;
const KIND_TYPE_TAG: u32 = 18;
const KIND_ENUM64: u32 = 19;

/// A member of a struct or union.
#[derive(Clone, Debug)]
struct Member {
    name: String,
    type_id: u32,
    /// Offset in bits.
    bit_offset: u32,
}

/// One type, as far as this reader cares.
#[derive(Clone, Debug)]
enum Type {
    /// A struct or union.
    Composite { members: Vec<Member> },
    /// A typedef or qualifier: the type it stands for.
    Alias(u32),
    /// Anything else.
    Other,
}

/// The kernel's types, by id.
#[derive(Debug)]
pub struct Btf {
    types: Vec<Type>,
    structs: HashMap<String, u32>,
}

impl Btf {
    /// Reads the running kernel's BTF.
    pub fn from_kernel() -> std::io::Result<Result<Btf, BtfError>> {
        Ok(Btf::parse(&std::fs::read(VMLINUX_BTF)?))
    }

    /// Parses raw BTF (`.BTF` section layout).
    pub fn parse(data: &[u8]) -> Result<Btf, BtfError> {
        let u16_at = |at: usize| {
            data.get(at..at + 2)
                .map(|b| u16::from_le_bytes([b[0], b[1]]))
        };
        let u32_at = |at: usize| {
            data.get(at..at + 4)
                .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        };
        if u16_at(0) != Some(0xeb9f) {
            return Err(BtfError::Malformed("no BTF magic (or not little-endian)"));
        }
        let header = |at: usize| {
            u32_at(at)
                .map(|v| v as usize)
                .ok_or(BtfError::Malformed("header cut short"))
        };
        let (hdr_len, type_off, type_len) = (header(4)?, header(8)?, header(12)?);
        let (str_off, str_len) = (header(16)?, header(20)?);
        let types_start = hdr_len.saturating_add(type_off);
        let types_end = types_start.saturating_add(type_len);
        let strings_start = hdr_len.saturating_add(str_off);
        let strings = data
            .get(strings_start..strings_start.saturating_add(str_len))
            .ok_or(BtfError::Malformed("string section out of bounds"))?;
        if data.len() < types_end {
            return Err(BtfError::Malformed("type section out of bounds"));
        }
        let name = |off: u32| -> String {
            strings
                .get(off as usize..)
                .and_then(|s| s.split(|&b| b == 0).next())
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .unwrap_or_default()
        };
        // Type id 0 is `void`.
        let mut types = vec![Type::Other];
        let mut structs = HashMap::new();
        let mut at = types_start;
        let field = |at: usize| u32_at(at).ok_or(BtfError::Malformed("type cut short"));
        while at < types_end {
            let (name_off, info, size_or_type) = (field(at)?, field(at + 4)?, field(at + 8)?);
            at += 12;
            let kind = (info >> 24) & 0x1f;
            let vlen = (info & 0xffff) as usize;
            let kind_flag = info >> 31 != 0;
            let ty = match kind {
                KIND_STRUCT | KIND_UNION => {
                    let mut members = Vec::with_capacity(vlen);
                    for i in 0..vlen {
                        let m = at + i * 12;
                        let (Some(n), Some(t), Some(o)) = (u32_at(m), u32_at(m + 4), u32_at(m + 8))
                        else {
                            return Err(BtfError::Malformed("member cut short"));
                        };
                        members.push(Member {
                            name: name(n),
                            type_id: t,
                            bit_offset: if kind_flag { o & 0xff_ffff } else { o },
                        });
                    }
                    at += vlen * 12;
                    let n = name(name_off);
                    if kind == KIND_STRUCT && !n.is_empty() {
                        structs.entry(n).or_insert(types.len() as u32);
                    }
                    Type::Composite { members }
                }
                KIND_TYPEDEF | KIND_VOLATILE | KIND_CONST | KIND_RESTRICT | KIND_TYPE_TAG => {
                    Type::Alias(size_or_type)
                }
                KIND_INT | KIND_VAR | KIND_DECL_TAG => {
                    at += 4;
                    Type::Other
                }
                KIND_ARRAY => {
                    at += 12;
                    Type::Other
                }
                KIND_ENUM | KIND_FUNC_PROTO => {
                    at += vlen * 8;
                    Type::Other
                }
                KIND_DATASEC | KIND_ENUM64 => {
                    at += vlen * 12;
                    Type::Other
                }
                // PTR, FWD, FUNC, FLOAT: nothing follows.
                2 | 7 | 12 | 16 => Type::Other,
                _ => return Err(BtfError::Malformed("unknown type kind")),
            };
            types.push(ty);
        }
        Ok(Btf { types, structs })
    }

    /// The byte offset of `path` (`pid`, or `thread_info.cpu` through
    /// nested structs) in struct `strukt`; members of anonymous structs and
    /// unions are found as if they were the struct's own.
    pub fn member_offset(&self, strukt: &str, path: &str) -> Result<u32, BtfError> {
        let mut id = *self
            .structs
            .get(strukt)
            .ok_or_else(|| BtfError::NoStruct(strukt.to_owned()))?;
        let no_field = || BtfError::NoField {
            strukt: strukt.to_owned(),
            field: path.to_owned(),
        };
        let mut bits = 0u32;
        for part in path.split('.') {
            let mut budget = FIND_BUDGET;
            let (off, ty) = self.find(id, part, 0, &mut budget).ok_or_else(no_field)?;
            bits = bits.checked_add(off).ok_or_else(no_field)?;
            id = ty;
        }
        if !bits.is_multiple_of(8) {
            return Err(no_field());
        }
        Ok(bits / 8)
    }

    /// Member `name` of composite type `id` (looking into anonymous
    /// members): its bit offset and type. `depth` and `budget` (composite
    /// types visited) bound the search, whatever loops the data holds.
    fn find(&self, id: u32, name: &str, depth: u32, budget: &mut u32) -> Option<(u32, u32)> {
        if depth > 16 || *budget == 0 {
            return None;
        }
        *budget -= 1;
        let Type::Composite { members, .. } = self.types.get(self.resolve(id) as usize)? else {
            return None;
        };
        for m in members {
            if m.name == name {
                return Some((m.bit_offset, m.type_id));
            }
            if m.name.is_empty()
                && let Some((off, ty)) = self.find(m.type_id, name, depth + 1, budget)
            {
                return Some((m.bit_offset.checked_add(off)?, ty));
            }
        }
        None
    }

    /// `id` with typedefs and qualifiers looked through.
    fn resolve(&self, mut id: u32) -> u32 {
        for _ in 0..32 {
            match self.types.get(id as usize) {
                Some(Type::Alias(to)) => id = *to,
                _ => break,
            }
        }
        id
    }

    /// Whether the kernel has a struct named `name`.
    pub fn has_struct(&self, name: &str) -> bool {
        self.structs.contains_key(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A BTF blob: `struct inner { int a; int cpu; }`, `struct outer { int x;
    /// struct inner in; union { long y; }; }` (the union anonymous).
    fn blob() -> Vec<u8> {
        let strings = b"\0int\0a\0cpu\0inner\0x\0in\0outer\0y\0long\0";
        let s = |name: &str| -> u32 {
            let needle = format!("\0{name}\0");
            strings
                .windows(needle.len())
                .position(|w| w == needle.as_bytes())
                .unwrap() as u32
                + 1
        };
        let mut types: Vec<u32> = Vec::new();
        // 1: int
        types.extend([s("int"), KIND_INT << 24, 4, 32]);
        // 2: struct inner { int a @0; int cpu @32 }
        types.extend([s("inner"), (KIND_STRUCT << 24) | 2, 8]);
        types.extend([s("a"), 1, 0, s("cpu"), 1, 32]);
        // 3: long
        types.extend([s("long"), KIND_INT << 24, 8, 64]);
        // 4: union { long y }
        types.extend([0, (KIND_UNION << 24) | 1, 8]);
        types.extend([s("y"), 3, 0]);
        // 5: typedef inner_t = inner
        types.extend([s("in"), KIND_TYPEDEF << 24, 2]);
        // 6: struct outer { int x @0; inner_t in @64; union @128 }
        types.extend([s("outer"), (KIND_STRUCT << 24) | 3, 24]);
        types.extend([s("x"), 1, 0, s("in"), 5, 64, 0, 4, 128]);
        let type_bytes: Vec<u8> = types.iter().flat_map(|v| v.to_le_bytes()).collect();
        let mut out = Vec::new();
        out.extend(0xeb9fu16.to_le_bytes());
        out.extend([1u8, 0]);
        out.extend(24u32.to_le_bytes());
        out.extend(0u32.to_le_bytes());
        out.extend((type_bytes.len() as u32).to_le_bytes());
        out.extend((type_bytes.len() as u32).to_le_bytes());
        out.extend((strings.len() as u32).to_le_bytes());
        out.extend(type_bytes);
        out.extend(strings);
        out
    }

    #[test]
    fn finds_nested_typedefed_and_anonymous_members() {
        let btf = Btf::parse(&blob()).unwrap();
        assert!(btf.has_struct("inner") && btf.has_struct("outer"));
        assert_eq!(btf.member_offset("outer", "x").unwrap(), 0);
        assert_eq!(btf.member_offset("outer", "in.cpu").unwrap(), 12);
        assert_eq!(btf.member_offset("outer", "y").unwrap(), 16);
        assert!(matches!(
            btf.member_offset("outer", "in.nope"),
            Err(BtfError::NoField { .. })
        ));
        assert!(matches!(
            btf.member_offset("none", "x"),
            Err(BtfError::NoStruct(_))
        ));
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(Btf::parse(b"").is_err());
        assert!(Btf::parse(&[0x9f, 0xeb, 1, 0, 24, 0, 0, 0]).is_err());
        let mut b = blob();
        b.truncate(b.len() - 20);
        assert!(Btf::parse(&b).is_err());
        for cut in 0..blob().len() {
            let _ = Btf::parse(&blob()[..cut]);
        }
    }

    #[test]
    fn the_running_kernel_has_task_fields() {
        let Ok(Ok(btf)) = Btf::from_kernel() else {
            eprintln!("no kernel BTF here: skipped");
            return;
        };
        let pid = btf.member_offset("task_struct", "pid").unwrap();
        let tgid = btf.member_offset("task_struct", "tgid").unwrap();
        assert_eq!(tgid, pid + 4);
        assert!(btf.member_offset("task_struct", "comm").unwrap() > 0);
        assert!(btf.has_struct("pt_regs"));
    }
}
