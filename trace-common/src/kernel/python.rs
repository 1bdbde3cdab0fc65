//! Python frames read at sample time: where a CPython interpreter's
//! structures are ([`PythonLayout`]), the processes that run one
//! ([`PythonProcess`], in the [`MAP_PYTHON_PROCS`] map the manager fills),
//! and the frames the stack programs write ([`PythonFrame`], a run of a
//! stack event).
//!
//! Since CPython 3.11 the interpreter's frames live in its own data stack
//! on the heap, not on the C stack, so they must be read while the thread is
//! stopped in the sample. For a process in [`MAP_PYTHON_PROCS`] the stack
//! programs find the sampled thread's `PyThreadState` (from
//! `_PyRuntime.interpreters.head`, through the interpreter's thread list,
//! the one whose `native_thread_id` is the thread's id; cached per thread
//! in [`MAP_PYTHON_THREADS`] and checked at each use), follow its current
//! frame through `previous`, and write each frame's code object address,
//! instruction pointer and a stamp of the code object (so that userspace
//! notices a code object freed and another made at the same address).
//! Userspace reads the code objects' names, files and line tables from
//! the process's memory.

/// Processes running a readable interpreter: process id →
/// [`PythonProcess`] (an LRU hash).
pub const MAP_PYTHON_PROCS: &str = "PYTHON_PROCS";
/// Most processes [`MAP_PYTHON_PROCS`] holds.
pub const PYTHON_PROCS_MAX: u32 = 4096;
/// Thread id → its `PyThreadState` address, as last found (an LRU hash).
pub const MAP_PYTHON_THREADS: &str = "PYTHON_THREADS";
/// Most threads [`MAP_PYTHON_THREADS`] holds.
pub const PYTHON_THREADS_MAX: u32 = 16384;
/// Python stacks already written (a hash of their code objects → 1, an
/// LRU hash): a stack not seen before wakes the reader at once, so that it
/// reads the new code objects while the process lives.
pub const MAP_PYTHON_SEEN: &str = "PYTHON_SEEN";
/// Most stacks [`MAP_PYTHON_SEEN`] remembers.
pub const PYTHON_SEEN_MAX: u32 = 16384;

/// Most Python frames written per stack (the innermost).
pub const PYTHON_FRAMES_MAX: usize = 96;
/// Most threads of an interpreter searched for the sampled one.
pub const PYTHON_THREAD_SEARCH: usize = 64;
/// [`PythonLayout`]'s offsets: this one means the field does not exist.
pub const PYTHON_ABSENT: u32 = u32::MAX;

/// [`PythonFrame::flags`]: the frame is its C evaluation loop's first
/// (`is_entry`): the frames after it were run by the next
/// `_PyEval_EvalFrameDefault` further out on the C stack.
pub const PYTHON_FRAME_ENTRY: u32 = 1;

/// Where the interpreter keeps what a walk reads: byte offsets into its
/// structures, for one CPython version (see `trace-stacks`'s tables).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PythonLayout {
    /// `PyInterpreterState.threads.head`.
    pub interp_threads_head: u32,
    /// `PyThreadState.next`.
    pub thread_next: u32,
    /// `PyThreadState.native_thread_id`.
    pub thread_native_id: u32,
    /// `PyThreadState.cframe` (3.11, 3.12), or [`PYTHON_ABSENT`].
    pub thread_cframe: u32,
    /// The current frame: in `_PyCFrame` when [`Self::thread_cframe`] is
    /// set, else in `PyThreadState` (3.13 on).
    pub current_frame: u32,
    /// `_PyInterpreterFrame.f_code` (`f_executable` from 3.13).
    pub frame_code: u32,
    /// `_PyInterpreterFrame.previous`.
    pub frame_previous: u32,
    /// `_PyInterpreterFrame.prev_instr` (`instr_ptr` from 3.13).
    pub frame_instr: u32,
    /// `_PyInterpreterFrame.is_entry` (a byte; 3.11), or [`PYTHON_ABSENT`].
    pub frame_is_entry: u32,
    /// `_PyInterpreterFrame.owner` (a byte).
    pub frame_owner: u32,
    /// The `owner` value of a frame that is not a Python function's (a C
    /// call's shim frame, 3.12 on; it marks an entry), or [`PYTHON_ABSENT`].
    pub owner_cstack: u32,
    /// The 8 bytes of a code object read as its stamp
    /// (`co_firstlineno` and the field after it).
    pub code_stamp: u32,
}

/// A process running an interpreter, in [`MAP_PYTHON_PROCS`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PythonProcess {
    /// The address of `_PyRuntime.interpreters.head` in the process.
    pub interpreters_head: u64,
    /// Its interpreter's layout.
    pub layout: PythonLayout,
}

/// One Python frame as a stack program writes it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PythonFrame {
    /// The code object's address.
    pub code: u64,
    /// The frame's instruction pointer (the instruction it runs, or the
    /// call it waits in).
    pub instr: u64,
    /// The 8 bytes at [`PythonLayout::code_stamp`] of the code object,
    /// folded to 32 bits.
    pub stamp: u32,
    /// `PYTHON_FRAME_*` flags.
    pub flags: u32,
}

/// [`PythonFrame::flags`]: the frame is a C call's shim frame (3.12 on),
/// not a Python function's: the frame before it was its loop's first.
pub const PYTHON_FRAME_SHIM: u32 = 2;

/// Bytes of a stack event's Python run at most.
pub const PYTHON_RUN_MAX: usize = PYTHON_FRAMES_MAX * core::mem::size_of::<PythonFrame>();

const _: () = {
    assert!(core::mem::size_of::<PythonLayout>() == 48);
    assert!(core::mem::size_of::<PythonProcess>() == 56);
    assert!(core::mem::size_of::<PythonFrame>() == 24);
};

impl super::events::PlainData for PythonFrame {}
