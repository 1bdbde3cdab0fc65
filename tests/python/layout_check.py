"""Checks a table of CPython structure offsets against this running interpreter through
ctypes. Arguments: NAME=OFFSET pairs. Prints `ok NAME` or `wrong NAME: ...` for each."""
import ctypes
import sys
import threading

off = dict(arg.split("=") for arg in sys.argv[1:])
off = {k: int(v) for k, v in off.items()}
api = ctypes.pythonapi
api.PyThreadState_Get.restype = ctypes.c_void_p
api.PyInterpreterState_Get.restype = ctypes.c_void_p


def u64(at):
    return ctypes.c_uint64.from_address(at).value


def report(name, ok, detail=""):
    print(("ok " if ok else "wrong ") + name + ("" if ok else ": " + detail))


runtime = ctypes.addressof(ctypes.c_char.in_dll(api, "_PyRuntime"))
interp = api.PyInterpreterState_Get()
tstate = api.PyThreadState_Get()
report("runtime_interpreters_head", u64(runtime + off["runtime_interpreters_head"]) == interp)
report("interp_threads_head", u64(interp + off["interp_threads_head"]) == tstate)
report("thread_native_id", u64(tstate + off["thread_native_id"]) == threading.get_native_id())

# A second thread: the list is followed through `next`.
seen = []
ready = threading.Event()
done = threading.Event()


def other():
    seen.append(api.PyThreadState_Get())
    ready.set()
    done.wait()


t = threading.Thread(target=other)
t.start()
ready.wait()
report("thread_next", u64(u64(interp + off["interp_threads_head"]) + off["thread_next"]) == tstate)
done.set()
t.join()


def frame_of(f):
    # PyFrameObject: ob_refcnt, ob_type, f_back, f_frame
    return u64(id(f) + 24)


def caller():
    return callee()


def callee():
    me = sys._getframe()
    # Read without calling a Python function, which would be the current frame.
    cframe = ctypes.c_uint64.from_address(tstate + off["thread_cframe"]).value
    frame = ctypes.c_uint64.from_address(cframe + off["current_frame"]).value
    report("current_frame", frame == frame_of(me))
    report("frame_code", u64(frame + off["frame_code"]) == id(me.f_code))
    report("frame_previous", u64(frame + off["frame_previous"]) == frame_of(me.f_back))
    instr = u64(frame + off["frame_instr"])
    units = id(me.f_code) + off["code_units"]
    report("frame_instr", units <= instr < units + 2 * len(me.f_code.co_code),
           f"{instr:#x} not in the code at {units:#x}")
    report("frame_owner", ctypes.c_uint8.from_address(frame + off["frame_owner"]).value == 0)
    report("frame_is_entry", ctypes.c_uint8.from_address(frame + off["frame_is_entry"]).value == 0)
    code = me.f_code
    report("code_firstlineno",
           ctypes.c_int.from_address(id(code) + off["code_firstlineno"]).value == code.co_firstlineno)
    report("code_filename", u64(id(code) + off["code_filename"]) == id(code.co_filename))
    report("code_qualname", u64(id(code) + off["code_qualname"]) == id(code.co_qualname))
    report("code_linetable", u64(id(code) + off["code_linetable"]) == id(code.co_linetable))
    report("code_units", type(code).__basicsize__ == off["code_units"])
    s = "plain ascii"
    report("unicode_ascii_data",
           ctypes.string_at(id(s) + off["unicode_ascii_data"], len(s)) == s.encode())
    wide = "naïve café"
    report("unicode_compact_data",
           ctypes.string_at(id(wide) + off["unicode_compact_data"], len(wide)) == wide.encode("latin-1"))
    report("unicode_length", u64(id(wide) + off["unicode_length"]) == len(wide))
    state = ctypes.c_uint8.from_address
    # compact (0x20) and ascii (0x40); kind (bits 2-4) 1
    report("unicode_state", state(id(s) + off["unicode_state"]).value & 0x7c == 0x64
           and state(id(wide) + off["unicode_state"]).value & 0x7c == 0x24)
    b = b"some bytes"
    report("bytes_data", ctypes.string_at(id(b) + off["bytes_data"], len(b)) == b)
    report("bytes_size", u64(id(b) + off["bytes_size"]) == len(b))
    return 0


caller()
