use super::*;
use crate::controller::*;
use crate::provider::BufferDisposition;
use alloc::string::ToString;
use alloc::vec;
use proptest::prelude::*;

fn roundtrip_request(body: Request) {
    let m = Envelope { txid: 7, body };
    let bytes = m.encode().unwrap();
    assert_eq!(Envelope::<Request>::decode(&bytes).unwrap(), m);
    // Every strict prefix is refused, never misread.
    for n in 0..bytes.len() {
        assert!(Envelope::<Request>::decode(&bytes[..n]).is_err(), "{n}");
    }
}

fn roundtrip_reply(body: Reply) {
    let m = Envelope { txid: 9, body };
    let bytes = m.encode().unwrap();
    assert_eq!(Envelope::<Reply>::decode(&bytes).unwrap(), m);
    for n in 0..bytes.len() {
        assert!(Envelope::<Reply>::decode(&bytes[..n]).is_err(), "{n}");
    }
}

#[test]
fn every_request_round_trips() {
    roundtrip_request(Request::GetProviders);
    roundtrip_request(Request::GetKnownCategories);
    roundtrip_request(Request::InitializeTracing(TraceConfig::default()));
    roundtrip_request(Request::InitializeTracing(TraceConfig {
        categories: vec!["kernel:sched".to_string(), "app".to_string()],
        provider_specs: vec![ProviderSpec {
            name: "p".to_string(),
            buffer_size_megabytes_hint: 8,
            categories: vec!["x".to_string()],
        }],
        defer_transfer: true,
        pids: Some(vec![1, 2, 3]),
        uprobes: vec!["/bin/ls:main".to_string()],
        usdt: vec!["python:gc__start".to_string()],
        tracepoints: vec!["sched:* if prev_prio < 100".to_string()],
        triggers: vec!["syscall:fsync>50ms".to_string(), "oom".to_string()],
        cgroups: vec!["/system.slice/a.service".to_string()],
        buffering_mode: BufferingMode::Streaming,
        kernel_buffering_mode: BufferingMode::Circular,
        stacks: crate::controller::StackOptions {
            sample_hz: 999,
            offcpu_min_us: 5,
            frame_pointers: true,
            stack_bytes: 4096,
            probe_stacks: vec!["uprobe".to_string(), "syscall".to_string()],
        },
        ..TraceConfig::default()
    }));
    roundtrip_request(Request::StartTracing(StartOptions {
        buffer_disposition: BufferDisposition::Retain,
        additional_categories: vec!["a".to_string()],
    }));
    roundtrip_request(Request::StopTracing {
        write_results: true,
    });
    roundtrip_request(Request::WatchAlert);
    roundtrip_request(Request::TerminateTracing);
    roundtrip_request(Request::Follow { pid: 42 });
    roundtrip_request(Request::GetStatus);
    roundtrip_request(Request::GetProviderStats { offset: 120 });
    roundtrip_request(Request::Snapshot);
    roundtrip_request(Request::GetSessions);
}

#[test]
fn every_reply_round_trips() {
    let result = StopResult {
        provider_stats: vec![ProviderStats {
            id: 2,
            name: "app".to_string(),
            pid: 99,
            records_written: 5,
            bytes_written: 80,
            records_dropped: 1,
            buffer_wrapped_count: 3,
            percentage_durable_buffer_used: 12,
            started: true,
            aborted: false,
        }],
        providers_total: 3,
        kernel: KernelStats {
            events: 10,
            dropped: 2,
            dropped_per_cpu: vec![(0, 1), (1, 1)],
            malformed: 0,
            counts: vec![
                (KernelCount::Switches, 4),
                (
                    KernelCount::Tracepoint("sched:sched_migrate_task".into()),
                    2,
                ),
            ],
            categories: vec!["kernel:sched".to_string()],
        },
        records: 100,
        bytes: 1000,
        traced_ns: 5,
    };
    roundtrip_reply(Reply::Providers(vec![ProviderInfo {
        id: 2,
        name: "app".to_string(),
        pid: 5,
        state: "registered".to_string(),
        categories: vec!["c".to_string()],
    }]));
    roundtrip_reply(Reply::KnownCategories(vec![(
        "kernel:sched".to_string(),
        "switches".to_string(),
    )]));
    roundtrip_reply(Reply::Initialized);
    roundtrip_reply(Reply::StartResult(Ok(())));
    for v in 1..=4 {
        roundtrip_reply(Reply::StartResult(Err(StartError::from_value(v).unwrap())));
    }
    roundtrip_reply(Reply::StopResult(Ok(result.clone())));
    for v in 1..=3 {
        roundtrip_reply(Reply::StopResult(Err(StopError::from_value(v).unwrap())));
    }
    roundtrip_reply(Reply::Alert {
        name: "oops".to_string(),
        provider: "app".to_string(),
    });
    roundtrip_reply(Reply::ProviderStats {
        offset: 1,
        total: 3,
        stats: result.provider_stats.clone(),
    });
    roundtrip_reply(Reply::ProviderStats {
        offset: 3,
        total: 3,
        stats: vec![],
    });
    roundtrip_reply(Reply::Terminated(result));
    roundtrip_reply(Reply::Followed);
    roundtrip_reply(Reply::Status(Status {
        state: Some(SessionState::Started),
        elapsed_ns: 1,
        kernel_events: 2,
        bytes: 3,
        dropped: 4,
        kernel_fill_permille: 500,
        providers: 2,
        providers_started: 1,
        provider_progress: vec![ProviderProgress {
            name: "app".to_string(),
            fill_permille: 250,
            dropped: 3,
            bytes_written: 4096,
        }],
    }));
    for v in 1..=7 {
        roundtrip_reply(Reply::StateChanged(SessionState::from_value(v).unwrap()));
    }
    roundtrip_reply(Reply::Failed {
        fatal: true,
        code: fail::MALFORMED,
        message: "bad".to_string(),
    });
    roundtrip_reply(Reply::Snapshot(SnapshotResult {
        bytes: 1 << 40,
        records: 12,
    }));
    roundtrip_reply(Reply::Sessions(vec![
        SessionInfo {
            kind: SessionKind::FlightRecorder,
            owner_pid: 0,
            state: "started".to_string(),
            categories: vec!["kernel:sched".to_string()],
            elapsed_ns: 5,
            bytes: 6,
            dropped: 7,
            window_ns: 30_000_000_000,
        },
        SessionInfo {
            kind: SessionKind::Recording,
            owner_pid: 42,
            state: "stopped".to_string(),
            categories: vec![],
            elapsed_ns: 1,
            bytes: 2,
            dropped: 0,
            window_ns: 0,
        },
    ]));
}

#[test]
fn foreign_and_future_messages_are_refused() {
    let mut bytes = Envelope {
        txid: 1,
        body: Request::GetProviders,
    }
    .encode()
    .unwrap();
    assert!(is_controller_message(&bytes));
    for v in [0, VERSION - 1, VERSION + 1] {
        bytes[4..6].copy_from_slice(&v.to_le_bytes());
        assert_eq!(
            Envelope::<Request>::decode(&bytes),
            Err(ControlError::UnsupportedVersion(v))
        );
    }
    bytes[0] ^= 1;
    assert_eq!(
        Envelope::<Request>::decode(&bytes),
        Err(ControlError::BadMagic)
    );
    // A reply is no request.
    let reply = Envelope {
        txid: 1,
        body: Reply::Initialized,
    }
    .encode()
    .unwrap();
    assert_eq!(
        Envelope::<Request>::decode(&reply),
        Err(ControlError::UnknownKind(kind::INITIALIZED))
    );
}

#[test]
fn forged_counts_do_not_allocate() {
    let mut e = Encoder::new(kind::KNOWN_CATEGORIES, 1);
    e.u16(1000);
    let bytes = e.finish().unwrap();
    assert_eq!(
        Envelope::<Reply>::decode(&bytes),
        Err(ControlError::Truncated)
    );
}

fn stats(n: usize, name_len: usize) -> Vec<ProviderStats> {
    (0..n)
        .map(|i| ProviderStats {
            id: i as u32 + 1,
            name: alloc::format!("{i:0>width$}", width = name_len),
            pid: i as i32,
            ..ProviderStats::default()
        })
        .collect()
}

/// Pages through a stop result as a client does: the result, then
/// GetProviderStats until every provider is there.
fn page_through(result: StopResult) -> Vec<ProviderStats> {
    let (first, all) = result.paged();
    let reply = Envelope {
        txid: 1,
        body: Reply::StopResult(Ok(first)),
    };
    let bytes = reply.encode().unwrap();
    assert!(bytes.len() <= MAX_MESSAGE_BYTES);
    let Reply::StopResult(Ok(first)) = Envelope::<Reply>::decode(&bytes).unwrap().body else {
        panic!();
    };
    let total = first.providers_total;
    let mut got = first.provider_stats;
    while got.len() < total as usize {
        let page = provider_stats_page(&all, got.len() as u32).unwrap();
        let bytes = Envelope {
            txid: 2,
            body: page,
        }
        .encode()
        .unwrap();
        assert!(bytes.len() <= MAX_MESSAGE_BYTES);
        match Envelope::<Reply>::decode(&bytes).unwrap().body {
            Reply::ProviderStats {
                offset,
                total: t,
                stats,
            } => {
                assert_eq!((offset as usize, t), (got.len(), total));
                assert!(!stats.is_empty());
                got.extend(stats);
            }
            other => panic!("{other:?}"),
        }
    }
    got
}

#[test]
fn every_provider_is_reported_whatever_their_number() {
    // Few: all in the result itself.
    let few = stats(120, 12);
    let (first, _) = StopResult {
        provider_stats: few.clone(),
        ..StopResult::default()
    }
    .paged();
    assert_eq!(first.providers_total, 120);
    assert_eq!(first.provider_stats, few);
    // A thousand with long names: paged, none lost, in order.
    for (n, len) in [(1001, 100), (2000, 4000), (0, 0)] {
        let all = stats(n, len);
        let got = page_through(StopResult {
            provider_stats: all.clone(),
            kernel: KernelStats {
                counts: vec![(KernelCount::Switches, 5)],
                ..KernelStats::default()
            },
            ..StopResult::default()
        });
        assert_eq!(got, all);
    }
    // Past the end: no page.
    assert_eq!(provider_stats_page(&few, 121), None);
    assert!(matches!(
        provider_stats_page(&few, 120),
        Some(Reply::ProviderStats { stats, .. }) if stats.is_empty()
    ));
}

#[test]
fn forged_totals_and_pages_are_refused() {
    let result = StopResult {
        provider_stats: stats(2, 3),
        providers_total: 2,
        ..StopResult::default()
    };
    let mut bytes = Envelope {
        txid: 1,
        body: Reply::Terminated(result),
    }
    .encode()
    .unwrap();
    // A total below the list's length, or past the limit.
    for (total, err) in [
        (1u32, ControlError::BadValue("provider total")),
        (
            MAX_PROVIDER_STATS as u32 + 1,
            ControlError::TooLong("provider total"),
        ),
    ] {
        bytes[12..16].copy_from_slice(&total.to_le_bytes());
        assert_eq!(Envelope::<Reply>::decode(&bytes), Err(err));
    }
    // A page past its total.
    let page = Reply::ProviderStats {
        offset: 2,
        total: 3,
        stats: stats(2, 3),
    };
    assert!(
        Envelope {
            txid: 1,
            body: page
        }
        .encode()
        .is_err()
    );
    let mut e = Encoder::new(kind::PROVIDER_STATS, 1);
    e.u32(2);
    e.u32(3);
    ProviderStats::encode_list(&stats(2, 3), &mut e).unwrap();
    assert_eq!(
        Envelope::<Reply>::decode(&e.finish().unwrap()),
        Err(ControlError::BadValue("provider stats page"))
    );
}

#[test]
fn an_older_client_reads_why_it_is_refused() {
    let failed = Envelope {
        txid: 0,
        body: Reply::Failed {
            fatal: true,
            code: fail::MALFORMED,
            message: "this manager speaks version 2".to_string(),
        },
    };
    for v in OLDEST_READABLE_FAILED..=VERSION {
        let mut bytes = failed.encode_failed_as(v).unwrap();
        assert_eq!(bytes[4..6], v.to_le_bytes());
        bytes[4..6].copy_from_slice(&VERSION.to_le_bytes());
        assert_eq!(Envelope::<Reply>::decode(&bytes).unwrap(), failed);
    }
    assert_eq!(failed.encode_failed_as(VERSION + 1), None);
    assert_eq!(failed.encode_failed_as(0), None);
    let other = Envelope {
        txid: 0,
        body: Reply::Initialized,
    };
    assert_eq!(other.encode_failed_as(1), None);
}

proptest! {
    #[test]
    fn any_bytes_decode_without_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = Envelope::<Request>::decode(&bytes);
        let _ = Envelope::<Reply>::decode(&bytes);
    }

    #[test]
    fn mutated_requests_decode_without_panic(
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        cut in any::<prop::sample::Index>(),
    ) {
        let config = TraceConfig {
            categories: vec!["a".to_string(), "kernel:*".to_string()],
            provider_specs: vec![ProviderSpec {
                name: "p".to_string(),
                buffer_size_megabytes_hint: 1,
                categories: vec![],
            }],
            pids: Some(vec![1]),
            ..TraceConfig::default()
        };
        let mut bytes = Envelope { txid: 3, body: Request::InitializeTracing(config) }
            .encode()
            .unwrap();
        for (at, v) in flips {
            let i = at.index(bytes.len());
            bytes[i] = v;
        }
        let n = cut.index(bytes.len() + 1);
        let _ = Envelope::<Request>::decode(&bytes[..n]);
    }

    #[test]
    fn mutated_replies_decode_without_panic(
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
    ) {
        let mut bytes = Envelope {
            txid: 3,
            body: Reply::StopResult(Ok(StopResult {
                provider_stats: vec![ProviderStats::default()],
                kernel: KernelStats {
                    counts: vec![(KernelCount::UsdtEvents, 1)],
                    dropped_per_cpu: vec![(0, 1)],
                    ..KernelStats::default()
                },
                ..StopResult::default()
            })),
        }
        .encode()
        .unwrap();
        for (at, v) in flips {
            let i = at.index(bytes.len());
            bytes[i] = v;
        }
        let _ = Envelope::<Reply>::decode(&bytes);
    }
}
