//! The list of argument types after a probe's name
//! (`python:function__entry(str,str,int)`).

use trace_common::kernel::{
    USDT_FORMAT_POINTER, USDT_FORMAT_STRING, USDT_MAX_STRS, USDT_STR_LEN, UsdtSpec,
};

/// An argument type of the optional list after the probe name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ArgType {
    /// As the note declares it.
    Declared,
    /// A signed number.
    Int,
    /// An unsigned number.
    Uint,
    /// A pointer.
    Pointer,
    /// A pointer to a NUL-terminated string, recorded as the string.
    Str,
}

/// Splits `PROBE(TYPE,...)` into the probe and its argument types (none
/// when there is no list).
pub(super) fn split_types(spec: &str) -> Result<(&str, Vec<ArgType>), String> {
    // After the last `:`: the binary's path may hold parentheses.
    let name_at = spec.rfind(':').map_or(0, |i| i + 1);
    let Some(open) = spec[name_at..].find('(').map(|i| name_at + i) else {
        return Ok((spec, Vec::new()));
    };
    let list = spec[open + 1..]
        .strip_suffix(')')
        .ok_or_else(|| "the argument types must end with `)`".to_owned())?;
    let types = list
        .split(',')
        .map(|t| match t.trim() {
            "_" | "" => Ok(ArgType::Declared),
            "int" => Ok(ArgType::Int),
            "uint" => Ok(ArgType::Uint),
            "ptr" => Ok(ArgType::Pointer),
            "str" => Ok(ArgType::Str),
            other => Err(format!(
                "unknown argument type `{other}` (known: str, ptr, int, uint, _)"
            )),
        })
        .collect::<Result<Vec<_>, _>>()?;
    if types.iter().filter(|t| **t == ArgType::Str).count() > USDT_MAX_STRS {
        return Err(format!("at most {USDT_MAX_STRS} `str` arguments per probe"));
    }
    Ok((&spec[..open], types))
}

/// Applies the argument types to a site's spec.
pub(super) fn apply_types(spec: &mut UsdtSpec, types: &[ArgType]) -> Result<(), String> {
    if types.len() > spec.nargs as usize {
        return Err(format!(
            "{} argument types given, but the probe has {} arguments",
            types.len(),
            spec.nargs
        ));
    }
    let mut slots = 0;
    for (i, (arg, ty)) in spec.args.iter_mut().zip(types).enumerate() {
        match ty {
            ArgType::Declared => {}
            ArgType::Int => arg.signed = 1,
            ArgType::Uint => arg.signed = 0,
            ArgType::Pointer | ArgType::Str => {
                if arg.size != 8 && arg.size != 4 {
                    return Err(format!("a {}-byte argument cannot be a pointer", arg.size));
                }
                // A pointer is never sign-extended.
                arg.signed = 0;
                arg.format = if *ty == ArgType::Str {
                    spec.strings[slots] = i as u8;
                    slots += 1;
                    USDT_FORMAT_STRING
                } else {
                    USDT_FORMAT_POINTER
                };
            }
        }
    }
    Ok(())
}

/// The text of a string slot: up to the NUL, invalid UTF-8 replaced.
pub fn slot_text(slot: &[u8; USDT_STR_LEN]) -> String {
    let end = slot.iter().position(|&b| b == 0).unwrap_or(slot.len());
    String::from_utf8_lossy(&slot[..end]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::usdt::{Arch, parse_args};

    #[test]
    fn argument_types_follow_the_name() {
        let (probe, types) = split_types("python:function__entry(str, str,int)").unwrap();
        assert_eq!(probe, "python:function__entry");
        assert_eq!(types, [ArgType::Str, ArgType::Str, ArgType::Int]);
        assert_eq!(split_types("a:b").unwrap(), ("a:b", vec![]));
        assert_eq!(
            split_types("/opt/x (1)/app:p:n").unwrap(),
            ("/opt/x (1)/app:p:n", vec![])
        );
        assert_eq!(
            split_types("/opt/x (1)/app:p:n(str)").unwrap(),
            ("/opt/x (1)/app:p:n", vec![ArgType::Str])
        );
        assert!(split_types("a:b(str").is_err());
        assert!(
            split_types("a:b(float)")
                .unwrap_err()
                .contains("unknown argument type")
        );
        assert!(
            split_types("a:b(str,str,str)")
                .unwrap_err()
                .contains("at most")
        );

        let (mut spec, _) = parse_args("8@%rdi -8@%rsi -4@%edx 2@%cx", Arch::X86_64);
        apply_types(
            &mut spec,
            &[
                ArgType::Str,
                ArgType::Pointer,
                ArgType::Uint,
                ArgType::Declared,
            ],
        )
        .unwrap();
        assert_eq!(spec.args[0].format, USDT_FORMAT_STRING);
        assert_eq!(spec.strings, [0, trace_common::kernel::USDT_NO_STRING]);
        assert_eq!(
            (spec.args[1].format, spec.args[1].signed),
            (USDT_FORMAT_POINTER, 0)
        );
        assert_eq!(spec.args[2].signed, 0);
        assert_eq!(spec.args[3].format, 0);
        assert!(apply_types(&mut spec, &[ArgType::Declared; 5]).is_err());
        let two_byte_pointer = [
            ArgType::Declared,
            ArgType::Declared,
            ArgType::Declared,
            ArgType::Str,
        ];
        assert!(apply_types(&mut spec, &two_byte_pointer).is_err());
        let mut slot = [0u8; USDT_STR_LEN];
        slot[..5].copy_from_slice(b"hello");
        assert_eq!(slot_text(&slot), "hello");
    }
}
