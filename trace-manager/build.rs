//! Puts the kernel provider's eBPF object at `$OUT_DIR/trace-ebpf`, where
//! `src/kernel/mod.rs` embeds it: the committed object
//! (`trace-manager/ebpf/trace-ebpf.o`) while it matches its sources, else
//! one built from source with `trace_ebpf_build` (the nightly toolchain and
//! bpf-linker, which `cargo xtask setup` installs). `TRACE_EBPF_FROM_SOURCE=1`
//! builds it from source always.

use std::env;
use std::fs;
use std::path::PathBuf;

use trace_ebpf_build::prebuilt;

fn main() {
    let manifest_dir = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let root = manifest_dir
        .parent()
        .expect("trace-manager is in the workspace");
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("set by cargo"));
    for path in trace_ebpf_build::inputs(root) {
        println!("cargo::rerun-if-changed={}", path.display());
    }
    println!(
        "cargo::rerun-if-changed={}",
        root.join(prebuilt::OBJECT).display()
    );
    println!(
        "cargo::rerun-if-changed={}",
        root.join(prebuilt::DIGEST).display()
    );
    println!("cargo::rerun-if-env-changed=TRACE_EBPF_FROM_SOURCE");
    let from_source = env::var_os("TRACE_EBPF_FROM_SOURCE").is_some_and(|v| v == "1");
    let committed = if from_source {
        None
    } else {
        prebuilt::current(root).unwrap_or_else(|e| panic!("{e}"))
    };
    let object = match committed {
        Some(object) => object,
        None => trace_ebpf_build::build(root, false).unwrap_or_else(|e| {
            panic!(
                "{e}\n(the committed {} does not match trace-ebpf's and trace-common's sources, \
                 so the object is built from them; `cargo xtask build-ebpf` then updates the \
                 committed copy)",
                prebuilt::OBJECT
            )
        }),
    };
    let dest = out_dir.join("trace-ebpf");
    fs::copy(&object, &dest).unwrap_or_else(|e| {
        panic!(
            "cannot copy {} to {}: {e}",
            object.display(),
            dest.display()
        )
    });
}
