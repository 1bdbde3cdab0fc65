//! Compiles the C parts of the test programs with the system C compiler,
//! warnings as errors, into static libraries the binaries link: the example
//! provider (`c/provider_app.c`, against `trace-provider`'s header) for
//! `provider_app_c`, the probed C functions (`c/uprobe_target.c`) for
//! `uprobe_target`, and the C USDT probes (`c/usdt_target.c`, with the
//! system's `sys/sdt.h`, unoptimised so that their arguments are memory
//! operands) for `usdt_target`, and the spinning functions
//! (`c/stack_spin.c`, without frame pointers, inlining or tail calls, with
//! debug information) for `stack_spin_c`.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets it"));
    let include = manifest.join("../trace-provider/include");
    compile(
        &manifest.join("c/provider_app.c"),
        &include,
        &out,
        "provider_app_c",
        &["-O2"],
    );
    compile(
        &manifest.join("c/uprobe_target.c"),
        &include,
        &out,
        "uprobe_target_c",
        &["-O2"],
    );
    compile(
        &manifest.join("c/usdt_target.c"),
        &include,
        &out,
        "usdt_target_c",
        &["-O0"],
    );
    compile(
        &manifest.join("c/stack_spin.c"),
        &include,
        &out,
        "stack_spin_c",
        &[
            "-O2",
            "-g",
            "-fomit-frame-pointer",
            "-fno-optimize-sibling-calls",
            "-fno-inline",
        ],
    );
    println!("cargo:rustc-link-search=native={}", out.display());
    println!("cargo:rerun-if-changed=c/provider_app.c");
    println!("cargo:rerun-if-changed=c/uprobe_target.c");
    println!("cargo:rerun-if-changed=c/usdt_target.c");
    println!("cargo:rerun-if-changed=c/stack_spin.c");
    println!("cargo:rerun-if-changed=../trace-provider/include/trace/event.h");
}

/// Compiles `source` with the code generation flags `flags` (e.g. `-O2`)
/// into `lib<name>.a` in `out`.
fn compile(source: &Path, include: &Path, out: &Path, name: &str, flags: &[&str]) {
    let object = out.join(format!("{name}.o"));
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_owned());
    let status = Command::new(&cc)
        .arg("-c")
        .args(flags)
        .args(["-std=gnu11", "-Wall", "-Wextra", "-Werror", "-fPIC", "-I"])
        .arg(include)
        .arg(source)
        .arg("-o")
        .arg(&object)
        .status()
        .unwrap_or_else(|e| panic!("running the C compiler {cc:?}: {e}"));
    assert!(status.success(), "compiling {} failed", source.display());
    let lib = out.join(format!("lib{name}.a"));
    let _ = std::fs::remove_file(&lib);
    let status = Command::new("ar")
        .arg("crs")
        .arg(&lib)
        .arg(&object)
        .status()
        .unwrap_or_else(|e| panic!("running ar: {e}"));
    assert!(status.success(), "archiving {} failed", source.display());
}
