//! Where each supported CPython version keeps what a Python stack needs: offsets into its
//! structures on x86-64, one table per version.
//!
//! The offsets of 3.11 were read from CPython's headers (`Include/internal/pycore_runtime.h`,
//! `pycore_interp.h`, `cpython/pystate.h`, `pycore_frame.h`, `cpython/code.h`,
//! `cpython/unicodeobject.h`) and are checked against a running interpreter by the tests
//! (`tests/tests/python.rs` reads them back through `ctypes`). A version without a table here is
//! reported as unreadable, never guessed.

/// Byte offsets into one CPython version's structures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// `_PyRuntime.interpreters.head`.
    pub runtime_interpreters_head: u64,
    /// `PyInterpreterState.threads.head`.
    pub interp_threads_head: u32,
    /// `PyThreadState.next`.
    pub thread_next: u32,
    /// `PyThreadState.native_thread_id`.
    pub thread_native_id: u32,
    /// `PyThreadState.cframe`, if the version has one.
    pub thread_cframe: Option<u32>,
    /// `_PyCFrame.current_frame` (or `PyThreadState.current_frame` without a cframe).
    pub current_frame: u32,
    /// `_PyInterpreterFrame.f_code`.
    pub frame_code: u32,
    /// `_PyInterpreterFrame.previous`.
    pub frame_previous: u32,
    /// `_PyInterpreterFrame.prev_instr`.
    pub frame_instr: u32,
    /// `_PyInterpreterFrame.is_entry`, if the version has it.
    pub frame_is_entry: Option<u32>,
    /// `_PyInterpreterFrame.owner`.
    pub frame_owner: u32,
    /// The `owner` of a C call's shim frame, if the version has them.
    pub owner_cstack: Option<u32>,
    /// `PyCodeObject.co_firstlineno` (an `int`).
    pub code_firstlineno: u32,
    /// `PyCodeObject.co_filename`.
    pub code_filename: u32,
    /// `PyCodeObject.co_qualname`.
    pub code_qualname: u32,
    /// `PyCodeObject.co_linetable`.
    pub code_linetable: u32,
    /// `PyCodeObject.co_code_adaptive`: the first code unit (2 bytes each).
    pub code_units: u32,
    /// `PyASCIIObject.length`.
    pub unicode_length: u32,
    /// `PyASCIIObject.state` (the bit field's first byte).
    pub unicode_state: u32,
    /// `sizeof(PyASCIIObject)`: where a compact ASCII string's characters start.
    pub unicode_ascii_data: u32,
    /// `sizeof(PyCompactUnicodeObject)`: where another compact string's characters start.
    pub unicode_compact_data: u32,
    /// `PyVarObject.ob_size` of a `bytes` object.
    pub bytes_size: u32,
    /// `PyBytesObject.ob_sval`.
    pub bytes_data: u32,
}

/// CPython 3.11 (3.11.0 to 3.11.x: the layouts did not change within the series).
pub const PYTHON_3_11: Layout = Layout {
    runtime_interpreters_head: 40,
    interp_threads_head: 16,
    thread_next: 8,
    thread_native_id: 160,
    thread_cframe: Some(56),
    current_frame: 8,
    frame_code: 32,
    frame_previous: 48,
    frame_instr: 56,
    frame_is_entry: Some(68),
    frame_owner: 69,
    owner_cstack: None,
    code_firstlineno: 72,
    code_filename: 112,
    code_qualname: 128,
    code_linetable: 136,
    code_units: 184,
    unicode_length: 16,
    unicode_state: 32,
    unicode_ascii_data: 48,
    unicode_compact_data: 72,
    bytes_size: 16,
    bytes_data: 32,
};

/// The layout of CPython `major.minor`, if it has one here.
pub fn for_version(major: u8, minor: u8) -> Option<&'static Layout> {
    match (major, minor) {
        (3, 11) => Some(&PYTHON_3_11),
        _ => None,
    }
}

/// The versions with a layout, as `3.11`.
pub const SUPPORTED: &[&str] = &["3.11"];
