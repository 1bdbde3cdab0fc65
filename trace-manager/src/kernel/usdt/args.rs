//! A note's argument string (`-4@%edi 8@-24(%rbp) -4@$5`) as the spec the
//! eBPF program reads.

use trace_common::kernel::{
    USDT_ARG_ABSENT, USDT_ARG_CONST, USDT_ARG_DEREF, USDT_ARG_REG, USDT_MAX_ARGS, UsdtArg, UsdtSpec,
};

/// Register files the eBPF program reads arguments from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    /// x86-64 `struct pt_regs`.
    X86_64,
    /// arm64 `struct pt_regs` (`regs[31]`, `sp`).
    Aarch64,
}

impl Arch {
    /// The architecture this program runs on, if USDT arguments can be read
    /// on it.
    pub const fn host() -> Option<Arch> {
        if cfg!(target_arch = "x86_64") {
            Some(Arch::X86_64)
        } else if cfg!(target_arch = "aarch64") {
            Some(Arch::Aarch64)
        } else {
            None
        }
    }

    /// Bytes of the register file the program copies.
    const fn regs_size(self) -> u32 {
        match self {
            Arch::X86_64 => 168,
            Arch::Aarch64 => 256,
        }
    }

    /// Offset of register `name` in the register file.
    fn register(self, name: &str) -> Option<u32> {
        match self {
            Arch::X86_64 => x86_register(name),
            Arch::Aarch64 => {
                if name == "sp" {
                    return Some(31 * 8);
                }
                let n: u32 = name
                    .strip_prefix('x')
                    .or_else(|| name.strip_prefix('w'))?
                    .parse()
                    .ok()?;
                (n <= 30).then_some(n * 8)
            }
        }
    }
}

/// Offset in x86-64 `struct pt_regs` of register `name` (without `%`), any
/// width (`rax`, `eax`, `ax`, `al`; `r8`, `r8d`, `r8w`, `r8b`). The high
/// byte registers (`ah`, ...) are not supported.
fn x86_register(name: &str) -> Option<u32> {
    const REGS: [(&str, [&str; 4], u32); 8] = [
        ("ax", ["rax", "eax", "ax", "al"], 80),
        ("bx", ["rbx", "ebx", "bx", "bl"], 40),
        ("cx", ["rcx", "ecx", "cx", "cl"], 88),
        ("dx", ["rdx", "edx", "dx", "dl"], 96),
        ("si", ["rsi", "esi", "si", "sil"], 104),
        ("di", ["rdi", "edi", "di", "dil"], 112),
        ("bp", ["rbp", "ebp", "bp", "bpl"], 32),
        ("sp", ["rsp", "esp", "sp", "spl"], 152),
    ];
    if let Some((_, _, off)) = REGS.iter().find(|(_, names, _)| names.contains(&name)) {
        return Some(*off);
    }
    if name == "rip" {
        return Some(128);
    }
    let rest = name.strip_prefix('r')?;
    let digits = rest.trim_end_matches(['d', 'w', 'b']);
    if rest.len() - digits.len() > 1 {
        return None;
    }
    // r8..r15 in pt_regs order: r15 r14 r13 r12 bp bx r11 r10 r9 r8.
    match digits.parse::<u32>().ok()? {
        n @ 12..=15 => Some((15 - n) * 8),
        n @ 8..=11 => Some(48 + (11 - n) * 8),
        _ => None,
    }
}

/// Parses a note's argument string for `arch`. Returns the spec for the
/// eBPF program and one message per argument it could not place (that
/// argument is then recorded as unreadable).
pub fn parse_args(text: &str, arch: Arch) -> (UsdtSpec, Vec<String>) {
    let mut spec = UsdtSpec::default();
    let mut problems = Vec::new();
    let mut uses_regs = false;
    for (i, token) in split_args(text).into_iter().enumerate() {
        if i >= USDT_MAX_ARGS {
            problems.push(format!(
                "more than {USDT_MAX_ARGS} arguments; the rest are left out"
            ));
            break;
        }
        spec.nargs = i as u32 + 1;
        match parse_arg(token, arch) {
            Ok(arg) => {
                uses_regs |= arg.kind == USDT_ARG_REG || arg.kind == USDT_ARG_DEREF;
                spec.args[i] = arg;
            }
            Err(why) => {
                let size = token
                    .split_once('@')
                    .and_then(|(s, _)| s.parse::<i8>().ok())
                    .unwrap_or(8);
                spec.args[i] = UsdtArg {
                    kind: USDT_ARG_ABSENT,
                    size: size.unsigned_abs().clamp(1, 8),
                    signed: u8::from(size < 0),
                    ..UsdtArg::default()
                };
                problems.push(format!("argument {i} `{token}`: {why}"));
            }
        }
    }
    if uses_regs {
        spec.regs_size = arch.regs_size();
    }
    (spec, problems)
}

/// Splits an argument string at white space outside brackets (arm64 memory
/// operands read `8@[sp, 16]`).
fn split_args(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0usize, None);
    for (i, c) in text.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth = depth.saturating_sub(1),
            c if c.is_whitespace() && depth == 0 => {
                if let Some(s) = start.take() {
                    out.push(&text[s..i]);
                }
                continue;
            }
            _ => {}
        }
        start.get_or_insert(i);
    }
    if let Some(s) = start {
        out.push(&text[s..]);
    }
    out
}

/// Parses one `SIZE@OPERAND` argument.
fn parse_arg(token: &str, arch: Arch) -> Result<UsdtArg, String> {
    let (size, operand) = token
        .split_once('@')
        .ok_or_else(|| "no `SIZE@` before the operand".to_owned())?;
    let size: i8 = size.parse().map_err(|_| format!("bad size `{size}`"))?;
    if ![1, 2, 4, 8].contains(&size.unsigned_abs()) {
        return Err(format!("size {size} is not 1, 2, 4 or 8 bytes"));
    }
    let mut arg = UsdtArg {
        size: size.unsigned_abs(),
        signed: u8::from(size < 0),
        ..UsdtArg::default()
    };
    let register = |name: &str| {
        arch.register(name)
            .ok_or_else(|| format!("unknown register `{name}`"))
    };
    match arch {
        Arch::X86_64 => {
            if let Some(imm) = operand.strip_prefix('$') {
                arg.kind = USDT_ARG_CONST;
                arg.value = parse_int(imm).ok_or_else(|| format!("bad constant `{imm}`"))?;
            } else if let Some(reg) = operand.strip_prefix('%') {
                arg.kind = USDT_ARG_REG;
                arg.reg_offset = register(reg)?;
            } else if let Some((disp, rest)) = operand.split_once('(') {
                let inner = rest
                    .strip_suffix(')')
                    .ok_or_else(|| "unbalanced parentheses".to_owned())?;
                if inner.contains(',') {
                    return Err("indexed memory operands are not supported".to_owned());
                }
                let reg = inner
                    .strip_prefix('%')
                    .ok_or_else(|| "no register in the memory operand".to_owned())?;
                if reg == "rip" {
                    return Err("%rip-relative operands are not supported".to_owned());
                }
                arg.kind = USDT_ARG_DEREF;
                arg.reg_offset = register(reg)?;
                arg.value = if disp.is_empty() {
                    0
                } else {
                    parse_int(disp).ok_or_else(|| format!("bad displacement `{disp}`"))?
                };
            } else {
                return Err("not a constant, register or memory operand".to_owned());
            }
        }
        Arch::Aarch64 => {
            if let Some(inner) = operand.strip_prefix('[') {
                let inner = inner
                    .strip_suffix(']')
                    .ok_or_else(|| "unbalanced brackets".to_owned())?;
                let (reg, disp) = match inner.split_once(',') {
                    Some((r, d)) => (r.trim(), d.trim().trim_start_matches('#')),
                    None => (inner.trim(), "0"),
                };
                arg.kind = USDT_ARG_DEREF;
                arg.reg_offset = register(reg)?;
                arg.value = parse_int(disp).ok_or_else(|| format!("bad displacement `{disp}`"))?;
            } else if let Some(v) = parse_int(operand.trim_start_matches('#')) {
                arg.kind = USDT_ARG_CONST;
                arg.value = v;
            } else {
                arg.kind = USDT_ARG_REG;
                arg.reg_offset = register(operand)?;
            }
        }
    }
    Ok(arg)
}

/// A decimal or `0x` hexadecimal integer, optionally negative.
fn parse_int(text: &str) -> Option<i64> {
    let (neg, digits) = match text.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    let v = match digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        Some(hex) => u64::from_str_radix(hex, 16).ok()? as i64,
        None => digits.parse::<u64>().ok()? as i64,
    };
    Some(if neg { v.wrapping_neg() } else { v })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(token: &str, arch: Arch) -> UsdtArg {
        let (spec, problems) = parse_args(token, arch);
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(spec.nargs, 1);
        spec.args[0]
    }

    #[test]
    fn x86_operands() {
        let a = one("-4@%edi", Arch::X86_64);
        assert_eq!(
            (a.kind, a.size, a.signed, a.reg_offset),
            (USDT_ARG_REG, 4, 1, 112)
        );
        let a = one("8@%r12", Arch::X86_64);
        assert_eq!(
            (a.kind, a.size, a.signed, a.reg_offset),
            (USDT_ARG_REG, 8, 0, 24)
        );
        let a = one("2@%r9w", Arch::X86_64);
        assert_eq!(a.reg_offset, 64);
        let a = one("-8@-24(%rbp)", Arch::X86_64);
        assert_eq!((a.kind, a.reg_offset, a.value), (USDT_ARG_DEREF, 32, -24));
        let a = one("4@(%rsp)", Arch::X86_64);
        assert_eq!((a.kind, a.reg_offset, a.value), (USDT_ARG_DEREF, 152, 0));
        let a = one("1@0x10(%rax)", Arch::X86_64);
        assert_eq!((a.kind, a.size, a.value), (USDT_ARG_DEREF, 1, 16));
        let a = one("-4@$-5", Arch::X86_64);
        assert_eq!((a.kind, a.value, a.signed), (USDT_ARG_CONST, -5, 1));
    }

    #[test]
    fn aarch64_operands() {
        let a = one("-4@x0", Arch::Aarch64);
        assert_eq!((a.kind, a.reg_offset), (USDT_ARG_REG, 0));
        let a = one("8@[sp, 16]", Arch::Aarch64);
        assert_eq!((a.kind, a.reg_offset, a.value), (USDT_ARG_DEREF, 248, 16));
        let a = one("-4@[x29, -12]", Arch::Aarch64);
        assert_eq!((a.kind, a.reg_offset, a.value), (USDT_ARG_DEREF, 232, -12));
        let a = one("8@[x1]", Arch::Aarch64);
        assert_eq!((a.kind, a.reg_offset, a.value), (USDT_ARG_DEREF, 8, 0));
        let a = one("4@5", Arch::Aarch64);
        assert_eq!((a.kind, a.value), (USDT_ARG_CONST, 5));
    }
    #[test]
    fn arguments_split_outside_brackets() {
        assert_eq!(
            split_args(" -4@x0  8@[sp, 16] 8@[x1]\t-4@5 "),
            ["-4@x0", "8@[sp, 16]", "8@[x1]", "-4@5"]
        );
        let (spec, problems) = parse_args("-4@x0 8@[sp, 16] 8@[x1]", Arch::Aarch64);
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(spec.nargs, 3);
        assert_eq!(spec.regs_size, 256);
    }

    #[test]
    fn unreadable_operands_are_kept_in_place() {
        let (spec, problems) =
            parse_args("8@%rdi -4@8(%rax,%rbx,4) 8@foo(%rip) 4@%ah", Arch::X86_64);
        assert_eq!(spec.nargs, 4);
        assert_eq!(spec.args[0].kind, USDT_ARG_REG);
        assert_eq!(spec.args[1].kind, USDT_ARG_ABSENT);
        assert_eq!((spec.args[1].size, spec.args[1].signed), (4, 1));
        assert_eq!(spec.args[2].kind, USDT_ARG_ABSENT);
        assert_eq!(spec.args[3].kind, USDT_ARG_ABSENT);
        assert_eq!(problems.len(), 3, "{problems:?}");
        assert_eq!(spec.regs_size, 168);
    }

    #[test]
    fn constants_alone_need_no_registers() {
        let (spec, _) = parse_args("-4@$1 8@$0x20", Arch::X86_64);
        assert_eq!(spec.regs_size, 0);
        assert_eq!(spec.args[1].value, 32);
        let (spec, _) = parse_args("", Arch::X86_64);
        assert_eq!(spec.nargs, 0);
    }

    #[test]
    fn every_x86_register_has_its_pt_regs_slot() {
        let table = [
            ("r15", 0),
            ("r14d", 8),
            ("r13", 16),
            ("r12b", 24),
            ("rbp", 32),
            ("ebx", 40),
            ("r11", 48),
            ("r10", 56),
            ("r9", 64),
            ("r8d", 72),
            ("rax", 80),
            ("cl", 88),
            ("dx", 96),
            ("sil", 104),
            ("rdi", 112),
            ("rsp", 152),
        ];
        for (name, off) in table {
            assert_eq!(x86_register(name), Some(off), "{name}");
        }
        assert_eq!(x86_register("r16"), None);
        assert_eq!(x86_register("ah"), None);
        assert_eq!(x86_register("r8dd"), None);
    }
}
