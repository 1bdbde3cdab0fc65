//! Python frames: the interpreter a process runs, and the frames the stack programs read of it
//! named as `qualname`, file and line.
//!
//! The kernel provider reads, at each sample of a thread of a process it was told runs a
//! readable CPython, the thread's interpreter frames: for each, the code object's address, the
//! instruction pointer and a stamp of the code object ([`RawFrame`]). [`PythonReader`] does the
//! rest in userspace:
//!
//! 1. [`PythonReader::examine`]: whether a process runs an interpreter, which version, and where
//!    its `_PyRuntime` is (read from the mapped program or `libpython`'s dynamic symbols and
//!    `Py_Version`): the manager gives that to the programs.
//! 2. [`PythonReader::read`]: as a stack arrives, every code object not seen before is read from
//!    the process's memory (its qualified name, file name, first line and location table), while
//!    the process lives. A code object is known by its process, address and stamp, so another
//!    code object made where a freed one was is read anew.
//! 3. [`PythonReader::name`]: a frame's function, file and line (from the location table and
//!    the frame's instruction).
//!
//! Supported: CPython 3.11 ([`layout::SUPPORTED`]). Other versions are found and reported as
//! unreadable ([`Interpreter::Unreadable`]), their stacks left native.

mod detect;
pub mod layout;
mod lines;
mod memory;

use std::sync::Arc;
use std::time::{Duration, Instant};

use foldhash::HashMap;

pub use detect::Interpreter;
pub use lines::line_of;

use memory::{Code, Memory};

/// Code objects kept at most; past this many the cache starts again.
const MAX_CODES: usize = 1 << 16;

/// One Python frame as the stack programs read it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RawFrame {
    /// The code object's address.
    pub code: u64,
    /// The frame's instruction pointer.
    pub instr: u64,
    /// The stamp of the code object.
    pub stamp: u32,
    /// The frame is its C evaluation loop's first (the next frames belong to the next
    /// `_PyEval_EvalFrameDefault` further out).
    pub entry: bool,
}

/// A Python frame named.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamedFrame {
    /// The function's qualified name (`Class.method`, `<module>`); `[python]` when its code
    /// object could not be read.
    pub function: String,
    /// The source file, as the code object names it.
    pub file: Arc<str>,
    /// The line the frame is at, if its location table says.
    pub line: Option<i64>,
    /// See [`RawFrame::entry`].
    pub entry: bool,
}

impl NamedFrame {
    /// The frame as a profiler shows it: `function (file.py:LINE)`, the file's last path
    /// component only (the mapping carries the whole path).
    pub fn display_name(&self) -> String {
        let base = self.file.rsplit('/').next().unwrap_or(&self.file);
        match self.line {
            Some(line) => format!("{} ({base}:{line})", self.function),
            None => format!("{} ({base})", self.function),
        }
    }
}

/// A process's interpreter and its memory.
struct Process {
    interpreter: Interpreter,
    memory: Option<Memory>,
    /// When it was examined last, and how many times.
    examined_at: Instant,
    examinations: u32,
}

/// A process found to run no interpreter is examined again, at most this
/// many times in all (an interpreter may be loaded after the program
/// starts: `libpython` by the dynamic loader, or by an embedding program).
const EXAMINATIONS_MAX: u32 = 6;
/// ... the first time this long after the first, then twice as long after
/// each.
const EXAMINE_AGAIN_AFTER: Duration = Duration::from_millis(10);

/// The interpreters of one recording's processes and their code objects.
#[derive(Default)]
pub struct PythonReader {
    processes: HashMap<u32, Process>,
    codes: HashMap<(u32, u64, u32), Option<Arc<Code>>>,
}

impl std::fmt::Debug for PythonReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PythonReader")
            .field("processes", &self.processes.len())
            .field("codes", &self.codes.len())
            .finish()
    }
}

impl PythonReader {
    /// A reader that knows no process yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether process `pid` was examined (since it was last forgotten).
    pub fn examined(&self, pid: u32) -> bool {
        self.processes.contains_key(&pid)
    }

    /// Examines process `pid` for an interpreter (reading its mappings and the files named like
    /// an interpreter) if it was not yet, or if it was found to run none and is due to be
    /// examined again: what was found, when it was examined now.
    pub fn examine(&mut self, pid: u32) -> Option<&Interpreter> {
        let again = match self.processes.get(&pid) {
            None => 0,
            Some(p)
                if p.interpreter == Interpreter::None
                    && p.examinations < EXAMINATIONS_MAX
                    && p.examined_at.elapsed()
                        >= EXAMINE_AGAIN_AFTER * (1 << (p.examinations - 1)) =>
            {
                p.examinations
            }
            Some(_) => return None,
        };
        let interpreter = detect::find(pid);
        let memory = match interpreter {
            Interpreter::Readable { .. } => Memory::open(pid)
                .inspect_err(|e| log::debug!("process {pid}: memory: {e}"))
                .ok(),
            _ => None,
        };
        let process = Process {
            interpreter,
            memory,
            examined_at: Instant::now(),
            examinations: again + 1,
        };
        self.processes.insert(pid, process);
        self.processes.get(&pid).map(|p| &p.interpreter)
    }

    /// Forgets process `pid` (it executed another program, or exited and its pid may be
    /// reused); its code objects read stay for the samples already taken.
    pub fn forget(&mut self, pid: u32) {
        self.processes.remove(&pid);
    }

    /// Lets go of the processes that exited (their memory files, open); the names of their code
    /// objects stay for the samples still to be written. Call it now and then.
    pub fn trim(&mut self) {
        self.processes
            .retain(|&pid, _| std::path::Path::new(&format!("/proc/{pid}")).exists());
    }

    /// Reads the code objects of `frames` (of process `pid`) not read yet.
    pub fn read(&mut self, pid: u32, frames: &[RawFrame]) {
        let Some(Process {
            interpreter: Interpreter::Readable { layout, .. },
            memory: Some(memory),
            ..
        }) = self.processes.get(&pid)
        else {
            return;
        };
        for f in frames {
            let key = (pid, f.code, f.stamp);
            if f.code == 0 || self.codes.contains_key(&key) {
                continue;
            }
            if self.codes.len() >= MAX_CODES {
                self.codes.clear();
            }
            let code = memory.code(f.code, layout).map(Arc::new);
            if code.is_none() {
                log::debug!("process {pid}: code object at {:#x} unreadable", f.code);
            }
            self.codes.insert(key, code);
        }
    }

    /// Frame `f` of process `pid` named (from the code objects [`read`](Self::read) read).
    pub fn name(&self, pid: u32, f: &RawFrame) -> NamedFrame {
        let Some(Some(code)) = self.codes.get(&(pid, f.code, f.stamp)) else {
            return NamedFrame {
                function: "[python]".to_owned(),
                file: Arc::from("[unknown]"),
                line: None,
                entry: f.entry,
            };
        };
        // The instruction before the first is the frame's start: its first line.
        let line = match f.instr.checked_sub(code.units) {
            Some(offset) => line_of(&code.linetable, code.first_line, offset / 2),
            None => Some(code.first_line),
        };
        NamedFrame {
            function: code.qualname.clone(),
            file: Arc::clone(&code.filename),
            line,
            entry: f.entry,
        }
    }
}
