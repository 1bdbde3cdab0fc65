//! Perf events opened with `perf_event_open` directly, for what aya's
//! `UProbe` and `TracePoint` do not offer: a BPF cookie per attachment (the
//! program learns which probe or tracepoint fired; a tracepoint program
//! cannot read its record's `common_type`, which the kernel overwrites with
//! a register pointer), and a reference counter (`ref_ctr_offset`), which
//! USDT probes with a semaphore need. The kernel raises the counter in every
//! process that maps the file while the probe exists and lowers it when the
//! probe goes, so the program computes the probe's arguments only while it
//! is traced. Each event is linked to a loaded program with
//! `BPF_LINK_CREATE`, carrying its cookie.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd as _, BorrowedFd, FromRawFd as _, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use aya_obj::generated::{bpf_attach_type, bpf_cmd};

/// Where the uprobe PMU says its type number is.
const UPROBE_TYPE: &str = "/sys/bus/event_source/devices/uprobe/type";
/// Present when the kernel takes a reference counter offset (Linux 4.20).
const UPROBE_REF_CTR_FORMAT: &str = "/sys/bus/event_source/devices/uprobe/format/ref_ctr_offset";
/// Where the reference counter offset goes in `perf_event_attr::config`.
const REF_CTR_OFFSET_SHIFT: u32 = 32;
/// Which bit of `config` makes a uprobe a return probe.
const UPROBE_RETPROBE_FORMAT: &str = "/sys/bus/event_source/devices/uprobe/format/retprobe";
/// `PERF_FLAG_FD_CLOEXEC`.
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;
/// `PERF_TYPE_TRACEPOINT`.
const PERF_TYPE_TRACEPOINT: u32 = 2;
/// `PERF_EVENT_IOC_ENABLE`, `_IO('$', 0)`.
/// (`libc::Ioctl`: the request's type, `c_ulong` in glibc and `c_int` in
/// musl.)
const PERF_EVENT_IOC_ENABLE: libc::Ioctl = 0x2400;

/// `struct perf_event_attr` up to `config2` (`PERF_ATTR_SIZE_VER1`).
#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    type_: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    /// For a uprobe: a pointer to the file's path.
    config1: u64,
    /// For a uprobe: the offset in the file.
    config2: u64,
}

const _: () = assert!(size_of::<PerfEventAttr>() == 72);

/// `union bpf_attr` as `BPF_LINK_CREATE` of a perf event reads it.
#[repr(C, align(8))]
#[derive(Default)]
struct LinkCreateAttr {
    prog_fd: u32,
    target_fd: u32,
    attach_type: u32,
    flags: u32,
    bpf_cookie: u64,
    /// The rest of the union, zero.
    reserved: [u64; 5],
}

/// An attached probe: the perf event and the link that runs the program on
/// it. Dropping it removes the probe (and lowers its reference counter).
#[derive(Debug)]
pub struct ProbeLink {
    // Declared first: dropped before the event it links.
    _link: OwnedFd,
    _event: OwnedFd,
}

/// Probes fewer than this are closed where they are detached.
const DETACH_INLINE: usize = 16;

/// Probes [`detach_all`] has not closed yet.
static OPEN: AtomicUsize = AtomicUsize::new(0);

/// The threads still closing probes ([`detach_all`]).
static DETACHING: std::sync::Mutex<Vec<std::thread::JoinHandle<()>>> =
    std::sync::Mutex::new(Vec::new());

/// Removes `links`. The kernel takes a grace period to close each (tens of
/// milliseconds in a virtual machine, one after the other: a minute for a
/// thousand tracepoints), so many are closed on a thread of their own and
/// the caller goes on at once; [`wait_detached`] waits for them.
pub fn detach_all(links: Vec<ProbeLink>) {
    let n = links.len();
    if n < DETACH_INLINE {
        drop(links);
        return;
    }
    OPEN.fetch_add(n, Ordering::Relaxed);
    let spawned = std::thread::Builder::new()
        .name("probe-detach".into())
        .spawn(move || {
            for link in links {
                drop(link);
                OPEN.fetch_sub(1, Ordering::Relaxed);
            }
        });
    match spawned {
        Ok(handle) => {
            let mut running = DETACHING.lock().unwrap_or_else(|e| e.into_inner());
            running.retain(|h| !h.is_finished());
            running.push(handle);
        }
        // No thread: the links were closed here, with the closure.
        Err(e) => {
            OPEN.fetch_sub(n, Ordering::Relaxed);
            log::warn!("closing probes in the background: {e}");
        }
    }
}

/// How many probes are still being closed in the background.
pub fn detaching() -> usize {
    OPEN.load(Ordering::Relaxed)
}

/// Waits until every probe [`detach_all`] was given is closed: a process
/// that exits sooner leaves the kernel closing them one after the other.
pub fn wait_detached() {
    let running = std::mem::take(&mut *DETACHING.lock().unwrap_or_else(|e| e.into_inner()));
    for handle in running {
        let _ = handle.join();
    }
}

/// Places a uprobe at `offset` of `binary` (in process `pid` only, or in
/// every process) that runs `program` with `cookie`; `ref_ctr_offset`, when
/// not 0, is the file offset of a `u16` the kernel increments while the
/// probe exists.
pub fn attach_uprobe(
    program: BorrowedFd<'_>,
    binary: &Path,
    offset: u64,
    ref_ctr_offset: u64,
    pid: Option<u32>,
    cookie: u64,
) -> io::Result<ProbeLink> {
    open_uprobe(program, binary, offset, ref_ctr_offset, pid, cookie, false)
}

/// Places a return probe (a uretprobe) on the function at `offset` of
/// `binary` (in process `pid` only, or in every process): `program` runs
/// with `cookie` each time the function returns.
pub fn attach_uretprobe(
    program: BorrowedFd<'_>,
    binary: &Path,
    offset: u64,
    pid: Option<u32>,
    cookie: u64,
) -> io::Result<ProbeLink> {
    open_uprobe(program, binary, offset, 0, pid, cookie, true)
}

/// [`attach_uprobe`], or [`attach_uretprobe`] when `retprobe`.
fn open_uprobe(
    program: BorrowedFd<'_>,
    binary: &Path,
    offset: u64,
    ref_ctr_offset: u64,
    pid: Option<u32>,
    cookie: u64,
    retprobe: bool,
) -> io::Result<ProbeLink> {
    let pmu: u32 = std::fs::read_to_string(UPROBE_TYPE)?
        .trim()
        .parse()
        .map_err(|_| io::Error::other(format!("{UPROBE_TYPE} holds no number")))?;
    if ref_ctr_offset != 0 && !Path::new(UPROBE_REF_CTR_FORMAT).exists() {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "this kernel cannot raise a USDT semaphore (uprobe ref_ctr_offset needs Linux 4.20)",
        ));
    }
    if ref_ctr_offset >> (64 - REF_CTR_OFFSET_SHIFT) != 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "semaphore offset too large",
        ));
    }
    let path = CString::new(binary.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in the path"))?;
    let attr = PerfEventAttr {
        type_: pmu,
        size: size_of::<PerfEventAttr>() as u32,
        config: ref_ctr_offset << REF_CTR_OFFSET_SHIFT | if retprobe { retprobe_bit()? } else { 0 },
        config1: path.as_ptr() as u64,
        config2: offset,
        ..PerfEventAttr::default()
    };
    // A probe for every process is opened on one CPU: the program runs
    // wherever the probe fires all the same.
    let (pid, cpu) = match pid {
        Some(p) => (p as libc::pid_t, -1),
        None => (-1, 0),
    };
    // `config1` points at `path`, which outlives the call.
    open_and_link(program, &attr, pid, cpu, cookie)
}

/// The bit of a uprobe's `config` that makes it a return probe, as the
/// uprobe PMU's `format/retprobe` says (`config:0`).
fn retprobe_bit() -> io::Result<u64> {
    let text = std::fs::read_to_string(UPROBE_RETPROBE_FORMAT)?;
    text.trim()
        .strip_prefix("config:")
        .and_then(|bit| bit.parse::<u32>().ok())
        .filter(|&bit| bit < 64)
        .map(|bit| 1u64 << bit)
        .ok_or_else(|| {
            io::Error::other(format!("{UPROBE_RETPROBE_FORMAT} holds {:?}", text.trim()))
        })
}

/// Runs `program` with `cookie` on every hit of the tracepoint with id `id`
/// (the `ID:` of its format file), on any CPU.
pub fn attach_tracepoint(program: BorrowedFd<'_>, id: u32, cookie: u64) -> io::Result<ProbeLink> {
    let attr = PerfEventAttr {
        type_: PERF_TYPE_TRACEPOINT,
        size: size_of::<PerfEventAttr>() as u32,
        config: u64::from(id),
        // `sample_period` 1: the program runs on every hit.
        sample_period: 1,
        ..PerfEventAttr::default()
    };
    // Opened on one CPU, for every process: a tracepoint runs its program
    // wherever it fires.
    open_and_link(program, &attr, -1, 0, cookie)
}

/// Opens the perf event `attr` describes and links `program` to it with
/// `cookie`; `attr`'s pointers (if any) must be valid for the call.
fn open_and_link(
    program: BorrowedFd<'_>,
    attr: &PerfEventAttr,
    pid: libc::pid_t,
    cpu: libc::c_int,
    cookie: u64,
) -> io::Result<ProbeLink> {
    // SAFETY: `attr` is a valid perf_event_attr of the size it declares,
    // and whatever it points at outlives the call (the caller's contract);
    // the kernel only reads it during the call.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            attr as *const PerfEventAttr,
            pid,
            cpu,
            -1 as libc::c_int,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: perf_event_open returned a new descriptor that nothing else owns.
    let event = unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) };
    let link_attr = LinkCreateAttr {
        prog_fd: program.as_raw_fd() as u32,
        target_fd: event.as_raw_fd() as u32,
        attach_type: bpf_attach_type::BPF_PERF_EVENT as u32,
        bpf_cookie: cookie,
        ..LinkCreateAttr::default()
    };
    // SAFETY: `link_attr` is a valid BPF_LINK_CREATE attribute of the size
    // passed, naming two open descriptors; the kernel only reads it.
    let link = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            bpf_cmd::BPF_LINK_CREATE as libc::c_long,
            &link_attr as *const LinkCreateAttr,
            size_of::<LinkCreateAttr>() as libc::c_uint,
        )
    };
    if link < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: BPF_LINK_CREATE returned a new descriptor that nothing else owns.
    let link = unsafe { OwnedFd::from_raw_fd(link as libc::c_int) };
    // SAFETY: PERF_EVENT_IOC_ENABLE takes no argument; `event` is a perf
    // event descriptor.
    if unsafe { libc::ioctl(event.as_raw_fd(), PERF_EVENT_IOC_ENABLE, 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(ProbeLink {
        _link: link,
        _event: event,
    })
}
