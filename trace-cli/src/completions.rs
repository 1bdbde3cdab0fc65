//! Shell completions: the script clap_complete generates from the command
//! definitions, which completes the values it knows (categories, report
//! sections: [`Suggested`] lists them without refusing others), and, for
//! bash, a function in front of it that completes what the generated
//! script cannot: words with `:` (`kernel:sched`), comma lists, and the
//! tracepoint names of `record -e`, asked of `trace-cli events` when the
//! completion runs, since they are the running kernel's.

use std::ffi::OsStr;

use clap::builder::{PossibleValue, TypedValueParser};

/// A value parser that takes any string, and offers these names to
/// shell completions (not shown in `--help`: set `hide_possible_values`).
#[derive(Clone)]
pub struct Suggested(pub fn() -> Vec<&'static str>);

impl TypedValueParser for Suggested {
    type Value = String;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &OsStr,
    ) -> Result<String, clap::Error> {
        clap::builder::StringValueParser::new().parse_ref(cmd, arg, value)
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(Box::new((self.0)().into_iter().map(PossibleValue::new)))
    }
}

/// What `record -c` offers: the kernel categories, `kernel:*`, and `none`
/// (the `-e` tracepoints alone); userspace providers name their own.
pub fn category_names() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = trace_common::category::KERNEL_CATEGORIES
        .iter()
        .map(|(name, _)| *name)
        .collect();
    names.extend(["kernel:*", "none"]);
    names
}

/// What `report --section` offers.
pub fn section_names() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = trace_analysis::report::SectionId::ALL
        .iter()
        .map(|s| s.name())
        .collect();
    names.push("all");
    names
}

/// The bash function that completes `record -c` and `record -e` (with
/// `:` in words and comma lists) and hands everything else to the
/// generated `_trace__cli`; `@CATEGORIES@` is replaced by the category
/// names.
const BASH_VALUES: &str = r#"
# Values of `record -c` and `record -e`: whole words with `:` (which bash
# splits words at) and comma lists; tracepoint names from the running
# kernel, asked of trace-cli itself (reading them usually needs root).
_trace__cli__values() {
    local line="${COMP_LINE:0:COMP_POINT}" words cur opt
    read -ra words <<< "$line"
    if [[ -z "$line" || "$line" =~ [[:space:]]$ ]]; then
        cur=""
        opt="${words[${#words[@]}-1]}"
    else
        cur="${words[${#words[@]}-1]}"
        opt="${words[${#words[@]}-2]}"
    fi
    local names
    case "${words[1]} $opt" in
        "record -c"|"record --categories")
            names="@CATEGORIES@"
            ;;
        "record -e"|"record --event")
            names="$("${COMP_WORDS[0]}" events --names-only 2>/dev/null)"
            ;;
        *)
            _trace__cli "$@"
            return
            ;;
    esac
    local done="" last="$cur"
    if [[ "$cur" == *,* ]]; then
        done="${cur%,*},"
        last="${cur##*,}"
    fi
    compopt +o default 2>/dev/null
    COMPREPLY=($(compgen -P "$done" -W "$names" -- "$last"))
    # Bash replaces the text after the last `:` only: drop what is before.
    if [[ "$cur" == *:* && "$COMP_WORDBREAKS" == *:* ]]; then
        local colon_word="${cur%"${cur##*:}"}" i
        for i in "${!COMPREPLY[@]}"; do
            COMPREPLY[$i]="${COMPREPLY[$i]#"$colon_word"}"
        done
    fi
}

complete -F _trace__cli__values -o nosort -o bashdefault -o default trace-cli
"#;

/// The completion script for `shell`.
pub fn script(shell: clap_complete::Shell, cmd: &mut clap::Command) -> Vec<u8> {
    // Generated into memory: the generator panics on a write error.
    let mut script = Vec::new();
    clap_complete::generate(shell, cmd, "trace-cli", &mut script);
    if shell != clap_complete::Shell::Bash {
        return script;
    }
    // clap_complete 4.6 names the cases of subcommands with every `-` of
    // the program's name made `__subcmd__` (`trace__subcmd__cli__...`),
    // but the variable it matches them against with `__` (`trace__cli__`):
    // no option or value of a subcommand would complete.
    let mut text = String::from_utf8_lossy(&script).replace("trace__subcmd__cli", "trace__cli");
    text.push_str(&BASH_VALUES.replace("@CATEGORIES@", &category_names().join(" ")));
    text.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggested_values_are_offered_and_any_is_taken() {
        let cmd = clap::Command::new("t").arg(
            clap::Arg::new("c")
                .long("c")
                .value_parser(Suggested(category_names))
                .hide_possible_values(true),
        );
        let offered: Vec<String> = cmd
            .get_arguments()
            .next()
            .unwrap()
            .get_possible_values()
            .iter()
            .map(|v| v.get_name().to_owned())
            .collect();
        assert!(offered.iter().any(|v| v == "kernel:sched"), "{offered:?}");
        let m = cmd.try_get_matches_from(["t", "--c", "myapp"]).unwrap();
        assert_eq!(m.get_one::<String>("c").unwrap(), "myapp");
    }
}
