//! `--usdt`: USDT probe sites, attached at every site with its index in
//! `USDT_SPECS` (where its arguments are) as the attach cookie.

use core::ffi::c_void;
use core::mem::MaybeUninit;
use core::ptr;

use aya_ebpf::{
    EbpfContext as _,
    helpers::{
        bpf_get_current_pid_tgid, bpf_probe_read_user, bpf_probe_read_user_str_bytes, generated,
    },
    macros::uprobe,
    programs::ProbeContext,
};
use trace_common::kernel::stack::SOURCE_USDT;
use trace_common::kernel::{
    EventKind, USDT_ARG_CONST, USDT_ARG_DEREF, USDT_ARG_REG, USDT_MAX_ARGS, USDT_MAX_REGS_BYTES,
    USDT_MAX_STRS, USDT_STR_LEN, UsdtEvent,
};

use crate::follow::wanted_current;
use crate::maps::USDT_SPECS;
use crate::ring::{header_of, layout, now, reserve, wakeup_flags};
use crate::stack::probe_stack;

/// Words of the register file a USDT program copies (registers are read by
/// an index masked with `USDT_REG_WORDS - 1`).
pub(crate) const USDT_REG_WORDS: usize = USDT_MAX_REGS_BYTES as usize / 8;
const _: () = assert!(USDT_REG_WORDS.is_power_of_two());
// String slots are indexed with a mask.
const _: () = assert!(USDT_MAX_STRS.is_power_of_two() && USDT_STR_LEN > 1);

/// A USDT probe site: one instant event with the site's arguments, read as
/// its `USDT_SPECS` entry says (registers from a copy of the register file,
/// memory operands from user memory).
#[uprobe]
pub fn usdt(ctx: ProbeContext) -> u32 {
    let ts = now();
    let Some(layout) = layout(ts) else { return 0 };
    let pid_tgid = bpf_get_current_pid_tgid();
    if !wanted_current(layout, pid_tgid as u32) {
        return 0;
    }
    let regs = ctx.as_ptr();
    // SAFETY: `regs` is the context the kernel passed to this uprobe program.
    let site = unsafe { generated::bpf_get_attach_cookie(regs) } as u32;
    let Some(spec) = USDT_SPECS.get(site) else {
        return 0;
    };
    // The register file is copied onto this program's own stack, not into
    // the per-CPU scratch: a uprobe program may be interrupted (or, on a
    // preemptible kernel, preempted) by another program that uses it.
    let mut saved = [0u64; USDT_REG_WORDS];
    let copied = if spec.regs_size == 0 {
        false
    } else {
        let size = if spec.regs_size > u32::from(USDT_MAX_REGS_BYTES) {
            u32::from(USDT_MAX_REGS_BYTES)
        } else {
            spec.regs_size
        };
        // SAFETY: `saved` holds USDT_MAX_REGS_BYTES bytes, at least `size`;
        // the source is the register file the kernel saved (`size` is at
        // most its size, as userspace computed for this architecture), and
        // the helper checks the address itself.
        unsafe {
            generated::bpf_probe_read_kernel(
                saved.as_mut_ptr().cast::<c_void>(),
                size,
                regs.cast_const(),
            ) == 0
        }
    };
    let Some(mut entry) = reserve::<UsdtEvent>() else {
        return 0;
    };
    let e = MaybeUninit::as_mut_ptr(&mut entry);
    let nargs = spec.nargs as usize;
    let mut unreadable = 0u32;
    // SAFETY: `e` points at a reserved, writable ring-buffer entry of
    // size_of::<UsdtEvent>() bytes; every field is written before the entry
    // is submitted.
    unsafe {
        (*e).header = header_of(EventKind::Usdt, ts, pid_tgid);
        (*e).site = site;
        (*e).nargs = spec.nargs;
        (*e).reserved = 0;
        for i in 0..USDT_MAX_ARGS {
            let arg = &spec.args[i];
            let reg = || saved[(arg.reg_offset as usize / 8) & (USDT_REG_WORDS - 1)];
            let value = if i >= nargs {
                Some(0)
            } else if arg.kind == USDT_ARG_CONST {
                Some(arg.value as u64)
            } else if arg.kind == USDT_ARG_REG && copied {
                Some(reg())
            } else if arg.kind == USDT_ARG_DEREF && copied {
                let at = reg().wrapping_add(arg.value as u64);
                match arg.size {
                    1 => bpf_probe_read_user(at as *const u8).ok().map(u64::from),
                    2 => bpf_probe_read_user(at as *const u16).ok().map(u64::from),
                    4 => bpf_probe_read_user(at as *const u32).ok().map(u64::from),
                    _ => bpf_probe_read_user(at as *const u64).ok(),
                }
            } else {
                None
            };
            (*e).args[i] = match value {
                Some(v) => extend(v, arg.size, arg.signed != 0),
                None => {
                    unreadable |= 1 << i;
                    0
                }
            };
        }
        (*e).unreadable = unreadable;
        // String arguments: copy the text each points at into its slot.
        // The pointer is read back from the event, so the verifier sees
        // one unknown value whatever path the arguments took.
        for k in 0..USDT_MAX_STRS {
            let slot = &mut (*e).strings[k];
            slot[0] = 0;
            let i = spec.strings[k] as usize;
            if i >= USDT_MAX_ARGS {
                continue;
            }
            let at = ptr::read_volatile(ptr::addr_of!((*e).args[i]));
            if bpf_probe_read_user_str_bytes(at as *const u8, slot).is_err() {
                let mask = ptr::addr_of_mut!((*e).unreadable);
                ptr::write_volatile(mask, ptr::read_volatile(mask) | 1 << i);
            }
        }
    }
    entry.submit(wakeup_flags(layout));
    probe_stack(
        regs,
        layout,
        SOURCE_USDT,
        u64::from(site),
        ts,
        pid_tgid,
        false,
    );
    0
}

/// The low `size` bytes of `v`, sign- or zero-extended to 64 bits.
#[inline(always)]
pub(crate) fn extend(v: u64, size: u8, signed: bool) -> u64 {
    if size == 0 || size >= 8 {
        return v;
    }
    let shift = 64 - u32::from(size) * 8;
    if signed {
        (((v << shift) as i64) >> shift) as u64
    } else {
        (v << shift) >> shift
    }
}
