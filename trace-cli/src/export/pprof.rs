//! `trace-cli export --pprof DIR`: the stack samples of a trace as pprof
//! profiles (gzipped `profile.proto`), one file per timebase
//! (`DIR/cpu-clock.pb.gz`, `DIR/off-cpu.pb.gz`, `DIR/syscall_read.pb.gz`,
//! ...), for `go tool pprof`, Perfetto's pprof import, speedscope and
//! Pyroscope.
//!
//! Each profile is weighted as `trace-cli flamegraph` weighs the same
//! timebase: samples of a timebase counted in ns (off-CPU, wakers) have two
//! values, `samples/count` and `off-cpu/nanoseconds` (or `wakeup/...`), the
//! second shown by default; the others one, `samples/count`. Frames are
//! named as the flame graph names them (an unnamed native frame as
//! `[FILE+0xADDR]`, a Python frame as `function (file.py:LINE)`), and a
//! Python frame's location also carries its source file and line. Every
//! sample is labelled with its `process` and `thread` names and `pid` and
//! `tid`.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use flate2::Compression;
use flate2::write::GzEncoder;
use prost::Message;
use trace_perfetto::{DecodedFrame, DecodedSample};

use super::profile::{Function, Label, Line, Location, Mapping, Profile, Sample, ValueType};
use crate::damage::{DamageArgs, Skipped};
use crate::samples::{self, Names, Scan};

/// One timebase's profile being built.
struct Builder {
    strings: Vec<String>,
    string_ids: HashMap<String, i64>,
    mappings: HashMap<(String, Option<Vec<u8>>), u64>,
    functions: HashMap<(String, String, String), u64>,
    locations: HashMap<(u64, u64, u64, i64), u64>,
    profile: Profile,
    /// Per (pid, tid, locations leaf first): (samples, weight).
    stacks: HashMap<(u32, u32, Vec<u64>), (u64, u64)>,
    first_ts: u64,
    last_ts: u64,
}

impl Default for Builder {
    fn default() -> Self {
        let mut b = Builder {
            strings: Vec::new(),
            string_ids: HashMap::new(),
            mappings: HashMap::new(),
            functions: HashMap::new(),
            locations: HashMap::new(),
            profile: Profile::default(),
            stacks: HashMap::new(),
            first_ts: u64::MAX,
            last_ts: 0,
        };
        // The string table starts with "".
        b.string("");
        b
    }
}

impl Builder {
    fn string(&mut self, s: &str) -> i64 {
        if let Some(&id) = self.string_ids.get(s) {
            return id;
        }
        let id = self.strings.len() as i64;
        self.strings.push(s.to_owned());
        self.string_ids.insert(s.to_owned(), id);
        id
    }

    fn mapping(&mut self, path: &str, build_id: Option<&[u8]>) -> u64 {
        let key = (path.to_owned(), build_id.map(<[u8]>::to_vec));
        if let Some(&id) = self.mappings.get(&key) {
            return id;
        }
        let id = self.mappings.len() as u64 + 1;
        let filename = self.string(path);
        let hex: String = build_id
            .unwrap_or_default()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let build_id = self.string(&hex);
        self.profile.mapping.push(Mapping {
            id,
            memory_start: 0,
            memory_limit: 0,
            file_offset: 0,
            filename,
            build_id,
            has_functions: true,
        });
        self.mappings.insert(key, id);
        id
    }

    fn function(&mut self, name: &str, system_name: &str, filename: &str) -> u64 {
        let key = (name.to_owned(), system_name.to_owned(), filename.to_owned());
        if let Some(&id) = self.functions.get(&key) {
            return id;
        }
        let id = self.functions.len() as u64 + 1;
        let function = Function {
            id,
            name: self.string(name),
            system_name: self.string(system_name),
            filename: self.string(filename),
        };
        self.profile.function.push(function);
        self.functions.insert(key, id);
        id
    }

    fn location(&mut self, frame: &DecodedFrame) -> u64 {
        let name = samples::frame_name(frame);
        let line = python_line(frame);
        let filename = if line.is_some() {
            frame.mapping_path.as_str()
        } else {
            ""
        };
        let mapping = self.mapping(&frame.mapping_path, frame.build_id.as_deref());
        let function = self.function(&name, &frame.function, filename);
        let line = line.unwrap_or(0);
        let key = (mapping, frame.rel_pc, function, line);
        if let Some(&id) = self.locations.get(&key) {
            return id;
        }
        let id = self.locations.len() as u64 + 1;
        self.profile.location.push(Location {
            id,
            mapping_id: mapping,
            address: frame.rel_pc,
            line: vec![Line {
                function_id: function,
                line,
            }],
        });
        self.locations.insert(key, id);
        id
    }

    fn add(&mut self, s: &DecodedSample) {
        let ids: Vec<u64> = s.frames.iter().map(|f| self.location(f)).collect();
        let at = self.stacks.entry((s.pid, s.tid, ids)).or_default();
        at.0 += 1;
        at.1 = at.1.saturating_add(samples::weight(s));
        self.first_ts = self.first_ts.min(s.ts);
        self.last_ts = self.last_ts.max(s.ts);
    }

    /// The profile of timebase `timebase`, its samples labelled with the
    /// names in `names`.
    fn finish(mut self, timebase: &str, names: &Names) -> Profile {
        let ns = samples::counts_ns(timebase);
        let samples_type = ValueType {
            r#type: self.string("samples"),
            unit: self.string("count"),
        };
        let mut types = vec![samples_type];
        if ns {
            types.push(ValueType {
                r#type: self.string(timebase),
                unit: self.string("nanoseconds"),
            });
        }
        self.profile.default_sample_type = types.last().map_or(0, |t| t.r#type);
        self.profile.period_type = types.last().cloned();
        self.profile.sample_type = types;
        let mut stacks: Vec<_> = std::mem::take(&mut self.stacks).into_iter().collect();
        stacks.sort();
        let (key_pid, key_tid) = (self.string("pid"), self.string("tid"));
        let (key_process, key_thread) = (self.string("process"), self.string("thread"));
        for ((pid, tid, location_id), (n, weight)) in stacks {
            let process = names.root(pid, tid);
            let thread = names.thread(tid).unwrap_or_default().to_owned();
            let label = vec![
                Label {
                    key: key_process,
                    str: self.string(&process),
                    num: 0,
                },
                Label {
                    key: key_thread,
                    str: self.string(&thread),
                    num: 0,
                },
                Label {
                    key: key_pid,
                    str: 0,
                    num: i64::from(pid),
                },
                Label {
                    key: key_tid,
                    str: 0,
                    num: i64::from(tid),
                },
            ];
            let mut value = vec![n as i64];
            if ns {
                value.push(i64::try_from(weight).unwrap_or(i64::MAX));
            }
            self.profile.sample.push(Sample {
                location_id,
                value,
                label,
            });
        }
        if self.first_ts <= self.last_ts {
            self.profile.time_nanos = i64::try_from(self.first_ts).unwrap_or(0);
            self.profile.duration_nanos = (self.last_ts - self.first_ts) as i64;
        }
        let comment = self.string(&format!("trace-cli export --pprof, timebase {timebase}"));
        self.profile.comment = vec![comment];
        self.profile.string_table = std::mem::take(&mut self.strings);
        self.profile
    }
}

/// The line of a Python frame (named `function (file.py:LINE)`, in the
/// mapping of its source file, the line as its relative pc).
fn python_line(frame: &DecodedFrame) -> Option<i64> {
    let (_, place) = frame.function.strip_suffix(')')?.rsplit_once(" (")?;
    let (file, line) = place.rsplit_once(':')?;
    let line: u64 = line.parse().ok()?;
    (line == frame.rel_pc && frame.mapping_path.ends_with(file))
        .then(|| i64::try_from(line).ok())
        .flatten()
}

/// The file name of timebase `timebase`'s profile.
fn file_name(timebase: &str) -> String {
    let safe: String = timebase
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{safe}.pb.gz")
}

/// Writes the profiles of `file` into `dir`.
pub fn run(file: &Path, dir: &Path, damage: &DamageArgs) -> Result<ExitCode> {
    let input = crate::open_trace(file)?;
    let mut builders: BTreeMap<String, Builder> = BTreeMap::new();
    let scan = Scan::read(input, |s| {
        builders.entry(s.timebase.clone()).or_default().add(&s);
    })?;
    let skipped = Skipped {
        records: scan.malformed,
        packets: scan.packet_errors,
    };
    damage.warn(skipped, file, None);
    if builders.is_empty() {
        anyhow::bail!("{} has no stack samples", file.display());
    }
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    for (timebase, builder) in builders {
        let samples: u64 = builder.stacks.values().map(|v| v.0).sum();
        let profile = builder.finish(&timebase, &scan.names);
        let path: PathBuf = dir.join(file_name(&timebase));
        write_profile(&profile, &path)?;
        println!("{} ({samples} samples of {timebase})", path.display());
    }
    Ok(damage.status(skipped))
}

fn write_profile(profile: &Profile, path: &Path) -> Result<()> {
    let out =
        std::fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    let mut gz = GzEncoder::new(std::io::BufWriter::new(out), Compression::default());
    gz.write_all(&profile.encode_to_vec())
        .and_then(|()| gz.finish()?.flush())
        .with_context(|| format!("cannot write {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::samples::testing;

    fn read(path: &Path) -> Profile {
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(
            &mut flate2::read::GzDecoder::new(std::fs::File::open(path).unwrap()),
            &mut bytes,
        )
        .unwrap();
        Profile::decode(&bytes[..]).unwrap()
    }

    #[test]
    fn a_profile_per_timebase_weighted_as_flame_graphs() {
        let dir = tempfile::tempdir().unwrap();
        let trace = dir.path().join("t.fxt");
        let mut data = testing::fxt("off-cpu", &[(&["main", "read"], 3)], Some(5_000));
        std::fs::write(&trace, &data).unwrap();
        let out = dir.path().join("out");
        run(&trace, &out, &DamageArgs::default()).unwrap();
        let p = read(&out.join("off-cpu.pb.gz"));
        let s = |i: i64| p.string_table[i as usize].as_str();
        assert_eq!(s(p.sample_type[1].r#type), "off-cpu");
        assert_eq!(s(p.default_sample_type), "off-cpu");
        assert_eq!(p.sample.len(), 1);
        assert_eq!(p.sample[0].value, [3, 15_000]);
        // Leaf first.
        let names: Vec<&str> = p.sample[0]
            .location_id
            .iter()
            .map(|&id| {
                let l = &p.location[id as usize - 1];
                s(p.function[l.line[0].function_id as usize - 1].name)
            })
            .collect();
        assert_eq!(names, ["read", "main"]);
        let labels: Vec<&str> = p.sample[0].label.iter().map(|l| s(l.key)).collect();
        assert_eq!(labels, ["process", "thread", "pid", "tid"]);
        assert_eq!(s(p.sample[0].label[0].str), "spin");

        data = testing::fxt("cpu-clock", &[(&["main", "spin"], 2)], None);
        std::fs::write(&trace, &data).unwrap();
        run(&trace, &out, &DamageArgs::default()).unwrap();
        let p = read(&out.join("cpu-clock.pb.gz"));
        assert_eq!(p.sample_type.len(), 1);
        assert_eq!(p.sample[0].value, [2]);
    }

    #[test]
    fn python_frames_carry_their_file_and_line() {
        let frame = |function: &str, path: &str, rel_pc| DecodedFrame {
            function: function.into(),
            mapping_path: path.into(),
            build_id: None,
            rel_pc,
        };
        assert_eq!(
            python_line(&frame("inner (hot.py:12)", "/x/hot.py", 12)),
            Some(12)
        );
        assert_eq!(
            python_line(&frame("inner (hot.py:12)", "/x/hot.py", 13)),
            None
        );
        assert_eq!(python_line(&frame("f (a, b)", "/lib/x.so", 0)), None);
        assert_eq!(file_name("syscall:read"), "syscall_read.pb.gz");
    }
}
