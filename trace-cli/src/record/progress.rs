//! The live status line of a recording.

use std::time::Duration;

use trace_common::controller::Status;

/// How often the progress line is redrawn (and alerts looked at).
pub(super) const PROGRESS_TICK: Duration = Duration::from_millis(250);

/// The live status line on a terminal: elapsed time, events, bytes,
/// drops, providers. Nothing when standard error is not a terminal.
pub(super) struct ProgressLine {
    bar: Option<indicatif::ProgressBar>,
}

impl ProgressLine {
    pub(super) fn new() -> Self {
        use std::io::IsTerminal as _;
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = indicatif::ProgressBar::with_draw_target(
                None,
                indicatif::ProgressDrawTarget::stderr_with_hz(4),
            );
            bar.set_style(
                indicatif::ProgressStyle::with_template("{spinner} {msg}")
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
            );
            bar
        });
        ProgressLine { bar }
    }

    /// Whether the line is drawn (standard error is a terminal).
    pub(super) fn shown(&self) -> bool {
        self.bar.is_some()
    }

    pub(super) fn update(&self, p: &Status) {
        let Some(bar) = &self.bar else { return };
        let mut msg = format!(
            "{:.1} s  {} kernel events  {:.1} MiB written  {} dropped  kernel buffers {:.0}% full",
            Duration::from_nanos(p.elapsed_ns).as_secs_f64(),
            p.kernel_events,
            p.bytes as f64 / (1024.0 * 1024.0),
            p.dropped,
            f64::from(p.kernel_fill_permille) / 10.0
        );
        if p.providers > 0 {
            msg.push_str(&format!(
                "  {} providers ({} tracing)",
                p.providers, p.providers_started
            ));
        }
        for q in &p.provider_progress {
            msg.push_str(&format!(
                "  {} {:.0}%",
                q.name,
                f64::from(q.fill_permille) / 10.0
            ));
            if q.dropped > 0 {
                msg.push_str(&format!(" ({} dropped)", q.dropped));
            }
        }
        bar.set_message(msg);
        bar.tick();
    }

    /// Prints `line` above the progress line (or alone).
    pub(super) fn println(&self, line: &str) {
        match &self.bar {
            Some(bar) => bar.println(line),
            None => eprintln!("{line}"),
        }
    }

    pub(super) fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
