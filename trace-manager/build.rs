//! Builds the kernel provider's eBPF object with `trace_ebpf_build` and
//! copies it to `$OUT_DIR/trace-ebpf`, where `src/kernel/mod.rs` embeds it.

use std::env;
use std::fs;
use std::path::PathBuf;

fn main() {
    let manifest_dir = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let root = manifest_dir
        .parent()
        .expect("trace-manager is in the workspace");
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("set by cargo"));
    for path in trace_ebpf_build::inputs(root) {
        println!("cargo::rerun-if-changed={}", path.display());
    }
    let object = trace_ebpf_build::build(root, false).unwrap_or_else(|e| panic!("{e}"));
    let dest = out_dir.join("trace-ebpf");
    fs::copy(&object, &dest).unwrap_or_else(|e| {
        panic!(
            "cannot copy {} to {}: {e}",
            object.display(),
            dest.display()
        )
    });
}
