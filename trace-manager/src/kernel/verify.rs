//! Loading every program of the eBPF object into the running kernel without
//! attaching it: which the verifier accepts, how many instructions it
//! walked for each, and why it refused the others. `trace-cli doctor` says
//! it; the test suite checks the counts against the limit.

use object::{Object as _, ObjectSection as _, ObjectSymbol as _};

use aya::programs::{Program, ProgramError};
use aya::{Btf, EbpfLoader};
use trace_common::kernel::stack::{
    MAP_OFFCPU, MAP_STACK_SCRATCH, MAP_STACK_SEEN, OFFCPU_SWITCH_PROGRAM, OFFCPU_SYS_EXIT_PROGRAM,
    OFFCPU_WAKING_PROGRAM, PROFILE_PROGRAM,
};
use trace_common::kernel::tracepoint::TRACEPOINT_PROGRAM;
use trace_common::kernel::{
    BTF_VARIANTS, MAP_EVENTS, MAP_USDT_SPECS, TRACEPOINTS, UPROBE_ENTRY_PROGRAM,
    UPROBE_RETURN_PROGRAM, USDT_PROGRAM,
};

use super::load::{EBPF_OBJECT, ObjectBytes, btf_field_offsets, raise_memlock_limit};
use super::{KernelError, patch};

/// The most instructions the verifier walks for one program, on every
/// kernel since 5.2 (`BPF_COMPLEXITY_LIMIT_INSNS`).
pub const COMPLEXITY_LIMIT: u32 = 1_000_000;

/// What the verifier said of one program.
#[derive(Clone, Debug)]
pub struct ProgramVerdict {
    /// The program's name in the object.
    pub program: String,
    /// Its kind: `tracepoint`, `tp_btf`, `perf_event`, `uprobe`.
    pub kind: &'static str,
    /// What it records: a category, or the option that needs it.
    pub serves: String,
    /// Instructions the verifier walked when it accepted the program
    /// (`None`: refused, or a kernel before 5.16, which does not say).
    pub verified_instructions: Option<u32>,
    /// Why the kernel refused it (the last lines of the verifier's log).
    pub refused: Option<String>,
}

/// Loads every program the recordings use (not the benchmarks' `floor_*`
/// ones) and returns what the verifier said of each. `with_btf`: the BTF
/// tracepoint programs get the kernel's field offsets and are loaded too;
/// without, they are left out, as a recording without BTF leaves them.
///
/// Needs root (or CAP_BPF and CAP_PERFMON).
pub fn verify_programs(with_btf: bool) -> Result<Vec<ProgramVerdict>, KernelError> {
    raise_memlock_limit();
    let btf = if with_btf {
        Some(Btf::from_sys_fs().map_err(|e| KernelError::ProgramLoad {
            program: "every BTF tracepoint program",
            reason: format!("reading the kernel's BTF: {e}"),
            source: Box::new(ProgramError::from(std::io::Error::other(e.to_string()))),
        })?)
    } else {
        None
    };
    let object = if with_btf {
        let offsets = btf_field_offsets().map_err(|reason| KernelError::ProgramLoad {
            program: "every BTF tracepoint program",
            reason: reason.clone(),
            source: Box::new(ProgramError::from(std::io::Error::other(reason))),
        })?;
        let mut object = ObjectBytes::copy(EBPF_OBJECT);
        patch::patch_offsets(object.bytes_mut(), &offsets).map_err(|e| {
            KernelError::ProgramLoad {
                program: "every BTF tracepoint program",
                reason: e.to_string(),
                source: Box::new(ProgramError::from(std::io::Error::other(e.to_string()))),
            }
        })?;
        object
    } else {
        ObjectBytes::Embedded
    };
    let object = super::load::without_missing_helpers(object);
    let btf_targets = btf_targets(object.bytes());
    let mut ebpf = EbpfLoader::new()
        .map_max_entries(MAP_EVENTS, 1)
        .map_max_entries(MAP_USDT_SPECS, 1)
        .map_max_entries(MAP_OFFCPU, 1)
        .map_max_entries(MAP_STACK_SEEN, 1)
        .map_max_entries(MAP_STACK_SCRATCH, 1)
        .load(object.bytes())
        .map_err(super::error::load_error)?;
    let mut verdicts = Vec::new();
    for (name, program) in ebpf.programs_mut() {
        if name.starts_with("floor_") {
            continue;
        }
        let serves = serves(name);
        let (kind, loaded): (&'static str, Option<Result<(), ProgramError>>) = match program {
            Program::TracePoint(p) => ("tracepoint", Some(p.load())),
            Program::PerfEvent(p) => ("perf_event", Some(p.load())),
            Program::UProbe(p) => ("uprobe", Some(p.load())),
            Program::BtfTracePoint(p) => {
                let target = btf_targets
                    .iter()
                    .find(|(program, _)| program == name)
                    .map(|(_, target)| target.as_str());
                let loaded = match (&btf, target) {
                    (Some(btf), Some(target)) => Some(p.load(target, btf)),
                    _ => None,
                };
                ("tp_btf", loaded)
            }
            _ => continue,
        };
        let Some(loaded) = loaded else { continue };
        let verdict = match loaded {
            Ok(()) => ProgramVerdict {
                program: name.to_owned(),
                kind,
                serves,
                verified_instructions: program
                    .info()
                    .ok()
                    .and_then(|info| info.verified_instruction_count()),
                refused: None,
            },
            Err(e) => {
                if super::error::is_eperm(&e) {
                    return Err(KernelError::Permission {
                        detail: format!("loading eBPF program {name}: {e}"),
                    });
                }
                ProgramVerdict {
                    program: name.to_owned(),
                    kind,
                    serves,
                    verified_instructions: None,
                    refused: Some(super::error::refusal(&e)),
                }
            }
        };
        verdicts.push(verdict);
    }
    verdicts.sort_by(|a, b| (a.kind, &a.program).cmp(&(b.kind, &b.program)));
    Ok(verdicts)
}

/// What a program records, for a user: its category, or the option that
/// loads it.
fn serves(program: &str) -> String {
    if let Some(spec) = TRACEPOINTS.iter().find(|t| t.program == program) {
        return spec.category.to_owned();
    }
    if let Some(variant) = BTF_VARIANTS.iter().find(|v| v.program == program)
        && let Some(spec) = TRACEPOINTS.iter().find(|t| t.program == variant.classic)
    {
        return spec.category.to_owned();
    }
    match program {
        p if p == PROFILE_PROGRAM => "kernel:profile".to_owned(),
        p if [
            OFFCPU_SWITCH_PROGRAM,
            OFFCPU_WAKING_PROGRAM,
            OFFCPU_SYS_EXIT_PROGRAM,
        ]
        .contains(&p) =>
        {
            "kernel:offcpu".to_owned()
        }
        p if p == UPROBE_ENTRY_PROGRAM || p == UPROBE_RETURN_PROGRAM => "--uprobe".to_owned(),
        p if p == USDT_PROGRAM => "--usdt".to_owned(),
        p if p == TRACEPOINT_PROGRAM => "-e (tracepoints by name)".to_owned(),
        _ => "-".to_owned(),
    }
}

/// Each BTF tracepoint program of the object and the tracepoint it
/// attaches to, from its section name (`tp_btf/<tracepoint>`).
fn btf_targets(object: &[u8]) -> Vec<(String, String)> {
    let Ok(file) = object::File::parse(object) else {
        return Vec::new();
    };
    file.symbols()
        .filter_map(|symbol| {
            let section = file.section_by_index(symbol.section_index()?).ok()?;
            let target = section.name().ok()?.strip_prefix("tp_btf/")?;
            let name = symbol.name().ok()?;
            (!name.is_empty() && !name.starts_with('.'))
                .then(|| (name.to_owned(), target.to_owned()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_btf_variant_has_its_tracepoint_in_the_object() {
        let targets = btf_targets(EBPF_OBJECT);
        for variant in BTF_VARIANTS {
            let target = targets
                .iter()
                .find(|(p, _)| p == variant.program)
                .map(|(_, t)| t.as_str());
            assert_eq!(target, Some(variant.tracepoint), "{}", variant.program);
        }
    }

    #[test]
    fn programs_say_what_they_record() {
        assert_eq!(serves(PROFILE_PROGRAM), "kernel:profile");
        assert_eq!(serves(USDT_PROGRAM), "--usdt");
        for spec in TRACEPOINTS {
            assert_eq!(serves(spec.program), spec.category);
        }
    }

    /// Needs root: every program the recordings use passes the verifier
    /// here, with and without BTF, within the complexity limit of every
    /// kernel since 5.2.
    #[test]
    fn root_every_program_loads_within_the_oldest_kernels_limit() {
        assert!(
            nix::unistd::geteuid().is_root(),
            "this test loads eBPF programs and must run as root (sudo -E cargo test)"
        );
        for with_btf in [true, false] {
            let verdicts = verify_programs(with_btf).expect("loading the object");
            assert!(verdicts.len() >= TRACEPOINTS.len(), "{verdicts:?}");
            for v in &verdicts {
                assert!(
                    v.refused.is_none(),
                    "{} refused: {:?}",
                    v.program,
                    v.refused
                );
                let walked = v.verified_instructions.expect("this kernel says it");
                assert!(
                    walked < COMPLEXITY_LIMIT / 4,
                    "{} walked {walked} instructions",
                    v.program
                );
            }
            assert_eq!(
                verdicts.iter().any(|v| v.kind == "tp_btf"),
                with_btf,
                "BTF tracepoint programs only with BTF"
            );
        }
    }
}
