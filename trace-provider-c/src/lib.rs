//! `libtrace_provider.a` / `libtrace_provider.so`: the C ABI of
//! [`trace-provider`](../trace_provider/ffi/index.html) for C programs
//! including `trace-provider/include/trace/event.h`.
//!
//! ```sh
//! cargo build --release -p trace-provider-c
//! cc -I trace-provider/include app.c target/release/libtrace_provider.a -lpthread -ldl -lm
//! ```

#![forbid(unsafe_code)]

pub use provider::ffi::*;
