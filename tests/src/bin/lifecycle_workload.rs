//! `lifecycle_workload [--wait] [ROUNDS]`: processes and threads born,
//! renamed and gone while a recording runs, for the tests that every
//! thread of every category mix is owned by its process and named.
//!
//! Each round (default 3): runs `/bin/ls` on a directory (a short process
//! that executes another program), `sh -c` running `find` (a subshell that
//! forks and executes), and `dd` writing 256 KiB with `fsync` (block
//! requests); starts three threads that each make system calls, touch
//! fresh pages and sleep a little, one of them renaming itself
//! `renamed-worker`, and joins them; and bounces a byte over two pipes
//! with a child thread a few hundred times (context switches and
//! wake-ups). With `--wait` it prints `pid=P` and waits for a line on
//! standard input before the first round. It prints `done` at the end.

use std::io::{BufRead, Read, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

/// A thread's share: system calls, fresh pages, a short sleep.
fn worker(i: usize) {
    if i == 0 {
        // SAFETY: PR_SET_NAME reads a NUL-terminated string of at most 16
        // bytes, which this literal is.
        unsafe {
            libc::prctl(libc::PR_SET_NAME, c"renamed-worker".as_ptr());
        }
    }
    let mut pages = vec![0u8; 64 * 4096];
    for p in pages.chunks_mut(4096) {
        p[0] = i as u8;
    }
    for _ in 0..20 {
        // SAFETY: getppid has no preconditions.
        unsafe {
            libc::getppid();
        }
    }
    std::hint::black_box(&pages);
    std::thread::sleep(Duration::from_millis(5));
}

/// A byte bounced `rounds` times between this thread and another.
fn pingpong(rounds: usize) {
    let (mut a_rx, mut a_tx) = std::io::pipe().expect("pipe");
    let (mut b_rx, mut b_tx) = std::io::pipe().expect("pipe");
    let echo = std::thread::spawn(move || {
        let mut byte = [0u8];
        for _ in 0..rounds {
            if a_rx.read_exact(&mut byte).is_err() || b_tx.write_all(&byte).is_err() {
                return;
            }
        }
    });
    let mut byte = [7u8];
    for _ in 0..rounds {
        a_tx.write_all(&byte).expect("write");
        b_rx.read_exact(&mut byte).expect("read");
    }
    echo.join().expect("echo thread");
}

/// Runs `program` with `args`, its output discarded.
fn run(program: &str, args: &[&str]) {
    let _ = Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let wait = args.first().is_some_and(|a| a == "--wait");
    if wait {
        args.remove(0);
    }
    let rounds: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(3);
    if wait {
        println!("pid={}", std::process::id());
        std::io::stdout().flush().expect("stdout");
        let mut line = String::new();
        let _ = std::io::stdin().lock().read_line(&mut line);
    }
    let dir = std::env::temp_dir().join(format!("lifecycle-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("dd.out");
    for _ in 0..rounds {
        run("/bin/ls", &["/usr/lib"]);
        run(
            "/bin/sh",
            &["-c", "find /usr/share -maxdepth 1 -name 'z*' > /dev/null"],
        );
        let of = format!("of={}", file.display());
        run(
            "dd",
            &["if=/dev/zero", &of, "bs=64k", "count=4", "conv=fsync"],
        );
        let threads: Vec<_> = (0..3)
            .map(|i| std::thread::spawn(move || worker(i)))
            .collect();
        for t in threads {
            t.join().expect("worker");
        }
        pingpong(300);
    }
    let _ = std::fs::remove_dir_all(&dir);
    println!("done");
}
