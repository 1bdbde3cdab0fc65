//! `tokio_app`: a provider (`tokio-app`) whose multi-thread tokio runtime,
//! built with tokio's instrumentation (`--cfg tokio_unstable`), runs 100
//! `request` tasks on two workers (`app-worker`): each sleeps 2 ms, then awaits a channel that a
//! `sender` task sends on after 8 ms.
//!
//! It waits (up to 10 s) for a trace to enable `tokio::task`, then prints
//! `requests=100 p50_ns=N p99_ns=N`: the requests' times from spawn to
//! completion, as it measured them.

use std::time::{Duration, Instant};

use tracing_subscriber::layer::SubscriberExt;

/// Requests spawned.
const REQUESTS: usize = 100;

fn main() {
    let _provider = trace_provider::init_with_categories("tokio-app", &["tokio::task"]);
    tracing::subscriber::set_global_default(
        tracing_subscriber::registry().with(trace_provider::layer::TraceLayer),
    )
    .expect("the only subscriber");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !trace_provider::category_enabled!("tokio::task") {
        assert!(Instant::now() < deadline, "no trace enabled tokio::task");
        std::thread::sleep(Duration::from_millis(5));
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("app-worker")
        .enable_time()
        .build()
        .expect("a runtime");
    let mut took: Vec<u64> = runtime.block_on(async {
        let mut requests = Vec::new();
        for i in 0..REQUESTS {
            let (tx, rx) = tokio::sync::oneshot::channel();
            let start = Instant::now();
            requests.push(
                tokio::task::Builder::new()
                    .name("request")
                    .spawn(async move {
                        tokio::time::sleep(Duration::from_millis(2)).await;
                        rx.await.expect("the sender's value");
                        start.elapsed().as_nanos() as u64
                    })
                    .expect("a request task"),
            );
            tokio::task::Builder::new()
                .name("sender")
                .spawn(async move {
                    tokio::time::sleep(Duration::from_millis(8)).await;
                    let _ = tx.send(i);
                })
                .expect("a sender task");
        }
        let mut took = Vec::new();
        for r in requests {
            took.push(r.await.expect("a request"));
        }
        took
    });
    drop(runtime);
    took.sort_unstable();
    println!(
        "requests={} p50_ns={} p99_ns={}",
        took.len(),
        took[took.len() / 2 - 1],
        took[took.len() * 99 / 100 - 1]
    );
}
