//! Compiles the C example provider (`c/provider_app.c`) with the system C
//! compiler against `trace-provider`'s header, warnings as errors, into a
//! static library the `provider_app_c` binary links.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets it"));
    let include = manifest.join("../trace-provider/include");
    let source = manifest.join("c/provider_app.c");
    let object = out.join("provider_app.o");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_owned());
    let status = Command::new(&cc)
        .args([
            "-c",
            "-O2",
            "-std=gnu11",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-fPIC",
            "-I",
        ])
        .arg(&include)
        .arg(&source)
        .arg("-o")
        .arg(&object)
        .status()
        .unwrap_or_else(|e| panic!("running the C compiler {cc:?}: {e}"));
    assert!(status.success(), "compiling {} failed", source.display());
    let lib = out.join("libprovider_app_c.a");
    let _ = std::fs::remove_file(&lib);
    let status = Command::new("ar")
        .arg("crs")
        .arg(&lib)
        .arg(&object)
        .status()
        .unwrap_or_else(|e| panic!("running ar: {e}"));
    assert!(status.success(), "archiving the C example failed");
    println!("cargo:rustc-link-search=native={}", out.display());
    println!("cargo:rerun-if-changed=c/provider_app.c");
    println!("cargo:rerun-if-changed=../trace-provider/include/trace/event.h");
}
