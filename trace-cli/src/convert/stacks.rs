//! Stack samples in Chrome's form: `"stackFrames"` held (one entry per
//! distinct frame path), `"samples"` written to a temporary file as they
//! come, since Chrome's format puts them after every event.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom, Write};

use serde_json::{Map, Value};
use trace_perfetto::{DecodedSample, SampleReader};

use super::micros;
use crate::samples;

/// The stack samples of a conversion.
#[derive(Default)]
pub(super) struct Samples {
    pub(super) reader: SampleReader,
    /// Frame id by (parent id, name).
    ids: HashMap<(Option<u64>, String), u64>,
    /// `"stackFrames"`.
    frames: Map<String, Value>,
    /// The `"samples"` so far, as JSON separated by `,\n`.
    spill: Option<BufWriter<File>>,
    /// Samples written to `spill`.
    pub(super) count: u64,
    /// Problems in the packets.
    pub(super) errors: u64,
}

impl Samples {
    /// Adds `s`, interning its frames root first.
    pub(super) fn add(&mut self, s: &DecodedSample) -> std::io::Result<()> {
        let mut parent: Option<u64> = None;
        for frame in s.frames.iter().rev() {
            let name = samples::frame_name(frame);
            let next = self.ids.len() as u64 + 1;
            let id = *self.ids.entry((parent, name.clone())).or_insert(next);
            if id == next {
                let mut f = Map::new();
                f.insert("name".into(), name.into());
                f.insert("category".into(), frame.mapping_path.clone().into());
                if let Some(p) = parent {
                    f.insert("parent".into(), p.into());
                }
                self.frames.insert(id.to_string(), Value::Object(f));
            }
            parent = Some(id);
        }
        let mut sample = Map::new();
        sample.insert("cpu".into(), s.cpu.into());
        sample.insert("pid".into(), s.pid.into());
        sample.insert("tid".into(), s.tid.into());
        sample.insert("ts".into(), micros(s.ts));
        sample.insert("name".into(), s.timebase.clone().into());
        if let Some(leaf) = parent {
            sample.insert("sf".into(), leaf.into());
        }
        sample.insert("weight".into(), samples::weight(s).into());
        let spill = match &mut self.spill {
            Some(f) => f,
            None => self
                .spill
                .insert(BufWriter::with_capacity(1 << 20, tempfile::tempfile()?)),
        };
        if self.count > 0 {
            spill.write_all(b",\n")?;
        }
        serde_json::to_writer(&mut *spill, &Value::Object(sample))?;
        self.count += 1;
        Ok(())
    }

    /// Writes `,"stackFrames":{...},"samples":[...]` if there are samples.
    pub(super) fn write(&mut self, out: &mut dyn Write) -> std::io::Result<()> {
        let Some(spill) = self.spill.take() else {
            return Ok(());
        };
        let mut file = spill.into_inner().map_err(|e| e.into_error())?;
        file.seek(SeekFrom::Start(0))?;
        out.write_all(b",\n\"stackFrames\":")?;
        serde_json::to_writer(&mut *out, &self.frames)?;
        out.write_all(b",\n\"samples\":[")?;
        std::io::copy(&mut file, out)?;
        out.write_all(b"]")
    }
}
