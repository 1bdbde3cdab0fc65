//! `--usdt` sites, as instants with their arguments.

use std::io::Write;

use trace_common::fxt::{ArgValue, EventKind, StringRef};
use trace_common::kernel::UsdtEvent;

use super::{EventRecord, KernelTranslator};
use crate::output::{FxtStream, OutputError};

/// What the translator needs to know of a USDT probe site.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UsdtSiteInfo {
    /// `PROVIDER:NAME`.
    pub name: String,
    /// Each argument: whether it is signed, and its
    /// `trace_common::kernel::USDT_FORMAT_*`.
    pub args: Vec<(bool, u8)>,
}

/// What the USDT translation keeps.
#[derive(Default)]
pub(super) struct UsdtState {
    /// The sites, by index.
    pub(super) sites: Vec<UsdtSiteInfo>,
}

impl KernelTranslator {
    /// Describes the USDT sites: `sites[i]` is site `i`.
    pub fn set_usdt_sites(&mut self, sites: Vec<UsdtSiteInfo>) {
        self.usdt.sites = sites;
    }

    /// The current task passed USDT site `e.site` with `e.args` (bit `i`
    /// of `e.unreadable` set when argument `i` could not be read; its
    /// string slots hold the texts of its string arguments in order).
    pub fn usdt<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        e: &UsdtEvent,
    ) -> Result<(), OutputError> {
        let (ts, tid, tgid, site, unreadable) = (
            e.header.ts,
            e.header.tid,
            e.header.tgid,
            e.site,
            e.unreadable,
        );
        let args = &e.args[..(e.nargs as usize).min(e.args.len())];
        let strings: Vec<String> = e
            .strings
            .iter()
            .map(crate::kernel::usdt::slot_text)
            .collect();
        self.know_thread(out, tid, tgid)?;
        let info = self.usdt.sites.get(site as usize).cloned();
        let name = info
            .as_ref()
            .map_or_else(|| format!("usdt site {site}"), |i| i.name.clone());
        let keys: Vec<String> = (0..args.len()).map(|i| format!("arg{i}")).collect();
        let mut list: Vec<(&str, ArgValue<'_>)> = Vec::with_capacity(args.len() + 1);
        let mut string_slot = 0;
        for (i, &v) in args.iter().enumerate() {
            let (signed, format) = info
                .as_ref()
                .and_then(|info| info.args.get(i).copied())
                .unwrap_or((false, trace_common::kernel::USDT_FORMAT_NUMBER));
            let text = (format == trace_common::kernel::USDT_FORMAT_STRING).then(|| {
                string_slot += 1;
                strings.get(string_slot - 1)
            });
            if unreadable & (1 << i) != 0 {
                continue;
            }
            let value = match (text, format) {
                (Some(Some(text)), _) => ArgValue::String(StringRef::inline(text.clone())),
                (Some(None), _) => continue,
                (None, trace_common::kernel::USDT_FORMAT_POINTER) => ArgValue::Pointer(v),
                (None, _) if signed => ArgValue::Int64(v as i64),
                (None, _) => ArgValue::Uint64(v),
            };
            list.push((&keys[i], value));
        }
        if unreadable != 0 {
            list.push(("unreadable_args", ArgValue::Uint64(u64::from(unreadable))));
        }
        self.event(
            out,
            EventRecord {
                ts,
                category: "usdt",
                thread: (tgid, tid),
                name: &name,
                args: &list,
                kind: EventKind::Instant,
            },
        )?;
        self.counts.usdt += 1;
        if self.has_triggers() {
            self.check_event(
                out,
                |c| matches!(c, super::Condition::Usdt(n) if *n == name),
                ts,
                (tgid, tid),
            )?;
        }
        Ok(())
    }
}
