//! With the `off` feature every macro compiles to nothing, like NTRACE:
//! arguments are not evaluated and nothing is written, even while a trace
//! that enables every category runs. Run with `--features off`.
#![cfg(feature = "off")]

use std::sync::atomic::{AtomicBool, Ordering};

use trace_common::provider::buffer::{HEADER_BYTES, Header};
use trace_common::provider::{BufferDisposition, BufferingMode};
use trace_provider::engine;

static EVALUATED: AtomicBool = AtomicBool::new(false);

#[allow(dead_code)]
fn evaluated() -> u64 {
    EVALUATED.store(true, Ordering::Relaxed);
    1
}

#[test]
fn macros_compile_to_nothing() {
    let mut words = vec![0u64; 64 * 1024 / 8];
    // SAFETY: the buffer outlives the trace: the engine is terminated below.
    unsafe {
        engine::initialize(
            words.as_mut_ptr().cast(),
            words.len() * 8,
            BufferingMode::Oneshot,
            Vec::new(),
            None,
        )
    }
    .unwrap();
    engine::start(BufferDisposition::ClearEntire, Vec::new());

    trace_provider::instant!("c", "instant", "a" => evaluated());
    trace_provider::duration!("c", "duration", "a" => evaluated());
    trace_provider::duration_begin!("c", "begin", "a" => evaluated());
    trace_provider::duration_end!("c", "begin");
    trace_provider::counter!("c", "counter", 1, "v" => evaluated());
    trace_provider::async_begin!("c", "async", 7, "a" => evaluated());
    trace_provider::flow_begin!("c", "flow", 8);
    trace_provider::blob!("c", "blob", b"bytes");
    let enabled = trace_provider::category_enabled!("c");

    let stats = engine::stop();
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    engine::terminate();
    assert!(!enabled);
    assert!(
        !EVALUATED.load(Ordering::Relaxed),
        "arguments were evaluated"
    );
    assert_eq!(stats.dropped, 0);
    let h = Header::read(bytes[..HEADER_BYTES].try_into().unwrap());
    assert_eq!(h.rolling_data_end[0], 0, "no record was written");
}
