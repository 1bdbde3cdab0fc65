//! The engine writing into a real buffer, read back the way the manager
//! reads it.

mod read;

use std::sync::Mutex;
use std::sync::mpsc;

use trace_common::fxt::read::Reader;
use trace_common::fxt::{EventKind, Record};
use trace_common::provider::{BufferDisposition, BufferingMode};

use crate::engine;
use read::{Buffer, collect, collect_at_stop, events, header, seq, tid};

#[test]
fn every_macro_writes_a_decodable_event_on_its_thread() {
    let _g = engine::serial();
    let mut buf = Buffer::new(BufferingMode::Oneshot, 1 << 20);
    buf.attach(&["app", "net"], None);
    crate::instant!("app", "before-start");
    engine::start(BufferDisposition::ClearEntire, vec![]);
    let n = 7u64;
    let peer = String::from("10.0.0.1");
    {
        crate::duration!("net", "send", "bytes" => n, "peer" => &peer);
        crate::instant!("app", "tick", "ok" => true, "ratio" => 0.5f64);
    }
    crate::instant!(process, "app", "proc-wide");
    crate::instant!("disabled-category", "never");
    crate::counter!("app", "queue", 3, "depth" => 12i64);
    crate::async_begin!("app", "req", 99u64, "url" => "/x");
    crate::async_end!("app", "req", 99u64);
    crate::flow_begin!("app", "hop", 5u64);
    crate::blob!("app", "payload", b"0123456789");
    crate::duration_begin!("app", "phase");
    crate::duration_end!("app", "phase");
    assert!(crate::category_enabled!("net"));
    assert!(!crate::category_enabled!("other"));
    let other = std::thread::spawn(|| {
        crate::instant!("app", "from-thread", "seq" => 1u64);
        tid()
    })
    .join()
    .unwrap();
    engine::stop();
    let dropped = engine::dropped();
    crate::instant!("app", "after-stop");
    assert_eq!(dropped, 0);
    let bytes = buf.bytes();
    engine::terminate();

    let fxt = collect_at_stop(&bytes, BufferingMode::Oneshot);
    let blobs: Vec<_> = Reader::new(&fxt)
        .filter_map(|r| match r.unwrap().1 {
            Record::Blob {
                payload, blob_type, ..
            } => Some((blob_type, payload.into_owned())),
            _ => None,
        })
        .collect();
    assert_eq!(blobs, [(1, b"0123456789".to_vec())]);

    let ev = events(&collect_at_stop(&bytes, BufferingMode::Oneshot));
    let names: Vec<_> = ev.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "tick",
            "send",
            "proc-wide",
            "queue",
            "req",
            "req",
            "hop",
            "phase",
            "phase",
            "from-thread"
        ]
    );
    let me = (u64::from(std::process::id()), tid());
    assert!(ev[..9].iter().all(|e| e.thread == me));
    assert_eq!(ev[9].thread, (me.0, other));
    let send = &ev[1];
    assert_eq!(send.category, "net");
    assert!(matches!(send.kind, EventKind::DurationComplete { end_ts } if end_ts >= send.ts));
    assert_eq!(
        send.args,
        [
            ("bytes".to_owned(), "Uint64(7)".to_owned()),
            ("peer".to_owned(), "10.0.0.1".to_owned())
        ]
    );
    assert_eq!(ev[0].args[0], ("ok".to_owned(), "Bool(true)".to_owned()));
    assert!(matches!(ev[3].kind, EventKind::Counter { id: 3 }));
    assert!(matches!(ev[4].kind, EventKind::AsyncBegin { id: 99 }));
    // Timestamps of one thread never go backwards.
    assert!(
        ev[..9]
            .windows(2)
            .all(|w| w[0].ts <= w[1].ts || w[1].name == "send")
    );
}

fn hammer(threads: usize, per_thread: u64) -> Vec<u64> {
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            std::thread::spawn(move || {
                for i in 0..per_thread {
                    crate::instant!("load", "ev", "seq" => i, "pad" => 0u64);
                }
                tid()
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

#[test]
fn oneshot_keeps_the_first_records_and_counts_drops() {
    let _g = engine::serial();
    let mut buf = Buffer::new(BufferingMode::Oneshot, 64 * 1024);
    buf.attach(&[], None);
    engine::start(BufferDisposition::ClearEntire, vec![]);
    let per = 20_000;
    let tids = hammer(2, per);
    engine::stop();
    let dropped = engine::dropped();
    let bytes = buf.bytes();
    engine::terminate();
    let ev = events(&collect_at_stop(&bytes, BufferingMode::Oneshot));
    assert!(!ev.is_empty() && ev.len() < 2 * per as usize);
    assert_eq!(
        ev.len() as u64 + dropped,
        2 * per,
        "kept + dropped = written"
    );
    assert_eq!(header(&bytes).num_records_dropped, dropped);
    for t in tids {
        let mine: Vec<_> = ev.iter().filter(|e| e.thread.1 == t).map(seq).collect();
        // Each thread's records are its first ones, in order, without gaps.
        assert_eq!(mine, (0..mine.len() as u64).collect::<Vec<_>>());
    }
}

#[test]
fn circular_keeps_the_newest_and_durable_strings_stay_valid() {
    let _g = engine::serial();
    let mut buf = Buffer::new(BufferingMode::Circular, 64 * 1024);
    buf.attach(&["load"], None);
    engine::start(BufferDisposition::ClearEntire, vec![]);
    let per = 20_000;
    let tids = hammer(2, per);
    engine::stop();
    let dropped = engine::dropped();
    let bytes = buf.bytes();
    engine::terminate();
    let h = header(&bytes);
    assert!(h.wrapped_count >= 2, "the buffer wrapped: {h:?}");
    // `events` fails if any string or thread reference does not resolve.
    let ev = events(&collect_at_stop(&bytes, BufferingMode::Circular));
    assert!(ev.iter().all(|e| e.name == "ev" && e.category == "load"));
    assert!(dropped < 16, "circular mode overwrites instead of dropping");
    let mut kept = 0;
    for t in tids {
        let mine: Vec<_> = ev.iter().filter(|e| e.thread.1 == t).map(seq).collect();
        // A thread that finished early may have been overwritten entirely;
        // otherwise its newest records are kept, in order and without gaps.
        if let Some(&last) = mine.last() {
            kept += 1;
            assert_eq!(last, per - 1);
            assert!(mine.windows(2).all(|w| w[1] == w[0] + 1), "gap in {mine:?}");
        }
    }
    assert!(kept >= 1);
}

/// Indexes cached by call sites in one trace must not leak into the next,
/// whatever record a thread writes first (a blob takes a region without
/// registering the thread).
#[test]
fn a_new_trace_never_reuses_indexes_of_the_last() {
    let _g = engine::serial();
    fn emit(first_blob: bool) {
        if first_blob {
            crate::blob!("gen", "blob", b"payload");
        }
        crate::instant!("gen", "second", "k2" => 2u64);
        crate::instant!("gen", "first", "k1" => 1u64);
    }
    for round in 0..3 {
        let mut buf = Buffer::new(BufferingMode::Oneshot, 64 * 1024);
        buf.attach(&[], None);
        engine::start(BufferDisposition::ClearEntire, vec![]);
        // Interned in a different order each round, so stale indexes
        // would name the wrong strings.
        if round % 2 == 1 {
            std::thread::spawn(|| {
                crate::instant!("gen-other", "padding", "pad" => 0u64);
            })
            .join()
            .unwrap();
        }
        emit(round > 0);
        std::thread::spawn(move || emit(round > 0)).join().unwrap();
        engine::stop();
        let bytes = buf.bytes();
        engine::terminate();
        let ev = events(&collect_at_stop(&bytes, BufferingMode::Oneshot));
        let named: Vec<_> = ev
            .iter()
            .filter(|e| e.category == "gen")
            .map(|e| (e.name.as_str(), e.args[0].0.as_str()))
            .collect();
        assert_eq!(
            named,
            [
                ("second", "k2"),
                ("first", "k1"),
                ("second", "k2"),
                ("first", "k1")
            ],
            "round {round}"
        );
    }
}

/// Circular mode reuses each rolling buffer many times. Records of varying
/// size (and a few larger than a chunk) make every pass leave its record
/// boundaries elsewhere: reading any leftover of an earlier pass would show
/// as an undecodable record or a gap in a thread's sequence.
#[test]
fn circular_reuse_never_reads_leftovers_of_earlier_passes() {
    let _g = engine::serial();
    let mut buf = Buffer::new(BufferingMode::Circular, 4 << 20);
    buf.attach(&["load"], None);
    engine::start(BufferDisposition::ClearEntire, vec![]);
    let per = 150_000u64;
    let text = "x".repeat(64);
    let blob = vec![0xA5u8; 6000];
    let handles: Vec<_> = (0..2)
        .map(|_| {
            let (text, blob) = (text.clone(), blob.clone());
            std::thread::spawn(move || {
                for i in 0..per {
                    let s = &text[..(i % 61) as usize];
                    crate::instant!("load", "ev", "seq" => i, "s" => s);
                    if i % 5000 == 0 {
                        crate::blob!("load", "big", &blob);
                    }
                }
                tid()
            })
        })
        .collect();
    let tids: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    engine::stop();
    let dropped = engine::dropped();
    let bytes = buf.bytes();
    engine::terminate();
    let h = header(&bytes);
    assert!(h.wrapped_count >= 4, "the buffers were reused: {h:?}");
    let ev = events(&collect_at_stop(&bytes, BufferingMode::Circular));
    assert_eq!(dropped, 0);
    let mut kept = 0;
    for t in tids {
        let mine: Vec<_> = ev.iter().filter(|e| e.thread.1 == t).collect();
        for e in &mine {
            let i = seq(e);
            let s = &e.args.iter().find(|(n, _)| n == "s").unwrap().1;
            assert_eq!(s.len() as u64, i % 61, "event {i} carries its own string");
        }
        let seqs: Vec<_> = mine.iter().map(|e| seq(e)).collect();
        if let Some(&last) = seqs.last() {
            kept += seqs.len();
            assert_eq!(last, per - 1);
            assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "a gap");
        }
    }
    // The older and the current rolling buffer hold about 4 MiB of ~60-byte
    // records.
    assert!(kept > 20_000, "kept {kept}");
}

#[test]
fn streaming_with_a_saver_that_keeps_up_loses_nothing() {
    let _g = engine::serial();
    let mut buf = Buffer::new(BufferingMode::Streaming, 64 * 1024);
    let base = buf.words.as_ptr() as usize;
    let len = buf.words.len() * 8;
    let (tx, rx) = mpsc::channel::<(u32, u64)>();
    let tx = Mutex::new(tx);
    buf.attach(
        &[],
        Some(Box::new(move |p| {
            if let trace_common::provider::fifo::FromProvider::SaveBuffer {
                wrapped_count,
                durable_data_end,
            } = p
            {
                let _ = tx.lock().unwrap().send((wrapped_count, durable_data_end));
            }
        })),
    );
    // The saver: copies the full rolling buffer, then says it is saved.
    let saver = std::thread::spawn(move || {
        let mut saved = Vec::new();
        let mut last_durable = 0;
        let mut expect = 0u32;
        while let Ok((wrapped, durable)) = rx.recv() {
            assert_eq!(wrapped, expect, "save requests come in order");
            expect += 1;
            // SAFETY: the test's buffer lives until the saver is joined.
            let bytes = unsafe { std::slice::from_raw_parts(base as *const u8, len) }.to_vec();
            let h = header(&bytes);
            let b = (wrapped & 1) as usize;
            saved.push(collect(
                &bytes,
                BufferingMode::Streaming,
                &[(last_durable, durable, b, h.rolling_data_end[b])],
            ));
            last_durable = durable;
            engine::buffer_saved(wrapped);
        }
        (saved, last_durable)
    });
    engine::start(BufferDisposition::ClearEntire, vec![]);
    let per = 4_000;
    let mut tids = Vec::new();
    for _ in 0..per {
        // One writer at a pace the saver keeps up with.
        crate::instant!("load", "ev", "seq" => tids.len() as u64, "pad" => 0u64);
        tids.push(());
        // About 1 ms per kilobyte: the saver has several milliseconds for
        // each 24 KiB rolling buffer, even on a busy machine.
        if tids.len() % 16 == 0 {
            std::thread::sleep(std::time::Duration::from_micros(500));
        }
    }
    engine::stop();
    let dropped = engine::dropped();
    let bytes = buf.bytes();
    engine::terminate();
    // Closing the channel ends the saver.
    let (saved, last_durable) = saver.join().unwrap();
    assert!(!saved.is_empty(), "the buffer was saved while tracing");
    let h = header(&bytes);
    let cur = (h.wrapped_count & 1) as usize;
    let mut stream = Vec::new();
    for (i, s) in saved.iter().enumerate() {
        stream.extend_from_slice(if i == 0 { s } else { &s[8..] });
    }
    let last = collect(
        &bytes,
        BufferingMode::Streaming,
        &[(
            last_durable,
            h.durable_data_end,
            cur,
            h.rolling_data_end[cur],
        )],
    );
    stream.extend_from_slice(&last[8..]);
    let ev = events(&stream);
    assert_eq!(dropped, 0);
    let seqs: Vec<_> = ev.iter().map(seq).collect();
    assert_eq!(
        seqs,
        (0..per).collect::<Vec<_>>(),
        "every event exactly once"
    );
}

#[test]
fn dispositions_keep_or_clear_what_earlier_runs_wrote() {
    let _g = engine::serial();
    let mut buf = Buffer::new(BufferingMode::Oneshot, 256 * 1024);
    buf.attach(&[], None);
    let run = |disposition, from: u64| {
        engine::start(disposition, vec![]);
        for seq in from..from + 100 {
            crate::instant!("t", "run", "seq" => seq);
        }
        engine::stop();
    };
    let seqs = |buf: &Buffer| -> Vec<u64> {
        events(&collect_at_stop(&buf.bytes(), BufferingMode::Oneshot))
            .iter()
            .filter(|e| e.name == "run")
            .map(seq)
            .collect()
    };
    run(BufferDisposition::ClearEntire, 0);
    // Retain: the first run's records stay, the second's follow them.
    run(BufferDisposition::Retain, 100);
    assert_eq!(seqs(&buf), (0..200).collect::<Vec<_>>());
    // Clearing the rolling buffers forgets both runs.
    run(BufferDisposition::ClearNondurable, 200);
    assert_eq!(seqs(&buf), (200..300).collect::<Vec<_>>());
    run(BufferDisposition::ClearEntire, 300);
    assert_eq!(seqs(&buf), (300..400).collect::<Vec<_>>());
    engine::terminate();
}
