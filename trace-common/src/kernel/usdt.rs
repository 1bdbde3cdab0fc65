//! Where the arguments of a USDT probe site are: the [`UsdtSpec`] values of
//! the [`MAP_USDT_SPECS`] map, which the `usdt` program reads them by.

#[cfg(doc)]
use super::MAP_USDT_SPECS;

/// Most arguments a USDT probe has (the `sys/sdt.h` limit).
pub const USDT_MAX_ARGS: usize = 12;
/// Most bytes of the register file (`struct pt_regs`) a USDT program copies:
/// all 168 on x86-64, `x0`..`x30` and `sp` on arm64; a multiple of 8.
pub const USDT_MAX_REGS_BYTES: u16 = 256;

/// [`UsdtArg::kind`]: the argument is not recorded (its location could not
/// be understood).
pub const USDT_ARG_ABSENT: u8 = 0;
/// [`UsdtArg::kind`]: a constant, [`UsdtArg::value`].
pub const USDT_ARG_CONST: u8 = 1;
/// [`UsdtArg::kind`]: the value of the register at [`UsdtArg::reg_offset`].
pub const USDT_ARG_REG: u8 = 2;
/// [`UsdtArg::kind`]: the value in user memory at the register's value plus
/// [`UsdtArg::value`].
pub const USDT_ARG_DEREF: u8 = 3;

/// [`UsdtArg::format`]: a number, signed or not as declared.
pub const USDT_FORMAT_NUMBER: u8 = 0;
/// [`UsdtArg::format`]: a pointer to a NUL-terminated string in the
/// program's memory; the program copies up to [`USDT_STR_LEN`] bytes of it
/// into the event's next string slot (at most [`USDT_MAX_STRS`] per event).
pub const USDT_FORMAT_STRING: u8 = 1;
/// [`UsdtArg::format`]: a pointer, recorded as such.
pub const USDT_FORMAT_POINTER: u8 = 2;
/// Bytes of each string argument a USDT event carries, the NUL included.
pub const USDT_STR_LEN: usize = 64;
/// String arguments a USDT event carries at most.
pub const USDT_MAX_STRS: usize = 2;

/// Where one argument of a USDT probe site is, as the eBPF program reads
/// it (the `sys/sdt.h` argument string, parsed by userspace).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UsdtArg {
    /// `USDT_ARG_*`.
    pub kind: u8,
    /// Size in bytes: 1, 2, 4 or 8.
    pub size: u8,
    /// 1 when the value is signed (sign-extended from `size` bytes).
    pub signed: u8,
    /// `USDT_FORMAT_*`: how the value is recorded.
    pub format: u8,
    /// Offset of the register in the copied register file (a multiple of 8,
    /// below [`UsdtSpec::regs_size`]).
    pub reg_offset: u32,
    /// The constant, or the displacement added to the register.
    pub value: i64,
}

/// The arguments of one USDT probe site: the value of `USDT_SPECS[cookie]`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UsdtSpec {
    /// How many of `args` are used.
    pub nargs: u32,
    /// Bytes of the register file (`struct pt_regs`) to copy, a multiple of
    /// 8 and at most [`USDT_MAX_REGS_BYTES`]; 0 when no argument is in a
    /// register.
    pub regs_size: u32,
    /// The arguments.
    pub args: [UsdtArg; USDT_MAX_ARGS],
    /// For each string slot of the event, the index of the argument whose
    /// string goes there ([`USDT_NO_STRING`]: none).
    pub strings: [u8; USDT_MAX_STRS],
    /// Zero.
    pub reserved: [u8; 8 - USDT_MAX_STRS],
}

/// [`UsdtSpec::strings`]: the slot is not used.
pub const USDT_NO_STRING: u8 = 0xff;

impl Default for UsdtSpec {
    fn default() -> Self {
        UsdtSpec {
            nargs: 0,
            regs_size: 0,
            args: [UsdtArg::default(); USDT_MAX_ARGS],
            strings: [USDT_NO_STRING; USDT_MAX_STRS],
            reserved: [0; 8 - USDT_MAX_STRS],
        }
    }
}

const _: () = {
    assert!(size_of::<UsdtArg>() == 16);
    assert!(size_of::<UsdtSpec>() == 8 + 16 * USDT_MAX_ARGS + 8);
    assert!(USDT_MAX_STRS <= 8);
    assert!(USDT_MAX_REGS_BYTES.is_multiple_of(8));
};
