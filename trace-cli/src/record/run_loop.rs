//! A recording under way: waiting for its end (the duration, the
//! command's exit, an interruption, a trigger alert, or the session's
//! failure) while alerts are said and the status line is drawn.

use std::time::Duration;

use anyhow::{Result, bail};
use trace_common::controller::{Reply, Request, fail};
use trace_manager::Controller;

use super::failed;
use super::progress::{PROGRESS_TICK, ProgressLine};

/// Why a recording ended.
pub(super) enum StopReason {
    /// Its duration passed.
    Duration,
    /// A provider raised this trigger alert.
    Trigger(String),
    /// The command exited (with this status, when known).
    CommandExited(Option<std::process::ExitStatus>),
    /// Every process of `-p` exited.
    TargetsExited,
    /// SIGINT or SIGTERM came.
    Signal,
    /// The manager aborted the session (why): its output failed, say.
    Aborted(String),
    /// Another machine of `--host` stopped on its trigger (what it said).
    HostTrigger(String),
    /// The recording machine of `--host` asked (standard input ended).
    Asked,
}

/// Waits until the recording should stop, and says why: after `duration`,
/// when `child` exits, when every process of `targets` has exited, when
/// `interrupted`, on one of the `triggers` alerts, when the manager
/// aborts the session, or with what `other` resolves to.
pub(super) async fn wait_for_stop(
    ctl: &mut Controller,
    mut child: Option<&mut tokio::process::Child>,
    targets: Option<&super::targets::Targets>,
    duration: Option<Duration>,
    interrupted: &mut tokio::sync::watch::Receiver<u32>,
    triggers: &[String],
    other: impl std::future::Future<Output = StopReason>,
) -> Result<StopReason> {
    let mut watch = ctl.send(Request::WatchAlert, None)?;
    let stop = async {
        let deadline = async {
            match duration {
                Some(d) => tokio::time::sleep(d).await,
                None => std::future::pending().await,
            }
        };
        let exited = async {
            match child.as_mut() {
                Some(c) => Some(c.wait().await),
                None => std::future::pending().await,
            }
        };
        let gone = async {
            match targets {
                Some(t) => t.all_exited().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = deadline => StopReason::Duration,
            () = gone => StopReason::TargetsExited,
            status = exited => StopReason::CommandExited(status.and_then(|s| s.ok())),
            _ = interrupted.wait_for(|&n| n > 0) => StopReason::Signal,
            reason = other => reason,
        }
    };
    tokio::pin!(stop);
    let progress = ProgressLine::new();
    let mut tick = tokio::time::interval(PROGRESS_TICK);
    let reason = loop {
        let mut news = Vec::new();
        tokio::select! {
            reason = &mut stop => break reason,
            m = ctl.recv() => news.push(m?),
            _ = tick.tick() => {
                if progress.shown() {
                    let status =
                        tokio::time::timeout(PROGRESS_TICK * 8, ctl.call(Request::GetStatus, None));
                    match status.await {
                        Ok(Ok(Reply::Status(s))) => progress.update(&s),
                        Ok(Ok(other)) => return Err(failed("asking for the status", other)),
                        Ok(Err(e)) => return Err(e.into()),
                        // A busy manager: the line waits.
                        Err(_) => {}
                    }
                }
            }
        }
        news.extend(ctl.take_early());
        let mut triggered = None;
        let mut aborted = None;
        for m in news {
            match m.body {
                Reply::Alert { name, provider } => {
                    if provider == trace_manager::KERNEL_PROVIDER_NAME {
                        progress.println(&format!("trace-cli: trigger {name:?} fired"));
                    } else {
                        progress.println(&format!(
                            "trace-cli: provider {provider:?} raised alert {name:?}"
                        ));
                    }
                    if triggered.is_none() && triggers.contains(&name) {
                        triggered = Some(name);
                    }
                    watch = ctl.send(Request::WatchAlert, None)?;
                }
                Reply::StateChanged(_) => {}
                // The session failed (its output, say): nothing more
                // is recorded, so nothing more is waited for.
                Reply::Failed {
                    code: fail::ABORTED,
                    message,
                    ..
                } if m.txid == 0 => {
                    aborted.get_or_insert(message);
                }
                Reply::Failed { message, .. } => bail!("{message}"),
                other if m.txid == watch => return Err(failed("watching alerts", other)),
                _ => {}
            }
        }
        if let Some(why) = aborted {
            break StopReason::Aborted(why);
        }
        if let Some(alert) = triggered {
            break StopReason::Trigger(alert);
        }
    };
    progress.finish();
    Ok(reason)
}
