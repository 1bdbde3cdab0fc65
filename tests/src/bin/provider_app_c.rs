//! Runs the C example provider (`tests/c/provider_app.c`), linked with the
//! `trace-provider` C ABI. Arguments as for `provider_app`.

use std::ffi::{CString, c_char, c_int};

// The C code calls the `trace_provider::ffi` functions: link the crate.
extern crate trace_provider;
#[link(name = "provider_app_c", kind = "static")]
unsafe extern "C" {
    fn provider_app_main(argc: c_int, argv: *mut *mut c_char) -> c_int;
}

fn main() {
    let args: Vec<CString> = std::env::args()
        .map(|a| CString::new(a).expect("arguments have no NUL"))
        .collect();
    let mut argv: Vec<*mut c_char> = args.iter().map(|a| a.as_ptr() as *mut c_char).collect();
    argv.push(std::ptr::null_mut());
    // SAFETY: argv holds argc valid C strings and a terminating null, alive
    // for the call.
    let code = unsafe { provider_app_main(args.len() as c_int, argv.as_mut_ptr()) };
    std::process::exit(code);
}
