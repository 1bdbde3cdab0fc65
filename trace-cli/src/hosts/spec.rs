//! The machines of `record --host` / `--hosts`, and what each is asked to
//! record.

use std::path::Path;

use anyhow::{Context, Result, bail};

/// One remote machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostSpec {
    /// Its name in the trace.
    pub name: String,
    /// Where ssh reaches it (`[USER@]HOST`, `ssh://[USER@]HOST[:PORT]`, or
    /// a name of the ssh configuration).
    pub destination: String,
    /// Selection options of its own (replacing the recording's
    /// `--cgroup`, `--unit`, `--container`).
    pub select: Vec<String>,
}

/// `NAME=DESTINATION` of `--host`.
pub fn parse_host(s: &str) -> Result<HostSpec> {
    let Some((name, destination)) = s.split_once('=') else {
        bail!("--host {s:?}: expected NAME=DESTINATION (e.g. db=root@10.0.0.2)");
    };
    host(name, destination, Vec::new()).with_context(|| format!("--host {s:?}"))
}

fn host(name: &str, destination: &str, select: Vec<String>) -> Result<HostSpec> {
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    {
        bail!("a host's name is letters, digits, '-', '_' and '.'; not {name:?}");
    }
    if destination.is_empty() || destination.starts_with('-') {
        bail!("{destination:?} is no ssh destination");
    }
    Ok(HostSpec {
        name: name.to_owned(),
        destination: destination.to_owned(),
        select,
    })
}

/// The hosts a `--hosts` file lists: a line `NAME DESTINATION [OPTIONS...]`
/// each (words split at white space; `#` starts a comment), the options
/// selecting what that host records (`--cgroup PATH`, `--unit NAME`,
/// `--container ID`, `-c ...`).
pub fn parse_hosts_file(text: &str, path: &Path) -> Result<Vec<HostSpec>> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or_default();
        let mut words = line.split_whitespace();
        let Some(name) = words.next() else { continue };
        let Some(destination) = words.next() else {
            bail!(
                "{}:{}: expected NAME DESTINATION [OPTIONS...]",
                path.display(),
                n + 1
            );
        };
        out.push(
            host(name, destination, words.map(str::to_owned).collect())
                .with_context(|| format!("{}:{}", path.display(), n + 1))?,
        );
    }
    Ok(out)
}

/// The hosts of `--host` and `--hosts`, names checked to be unique and
/// other than the recording machine's.
pub fn hosts(flags: &[String], file: Option<&Path>, local: &str) -> Result<Vec<HostSpec>> {
    let mut hosts: Vec<HostSpec> = flags.iter().map(|s| parse_host(s)).collect::<Result<_>>()?;
    if let Some(path) = file {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        hosts.extend(parse_hosts_file(&text, path)?);
    }
    let mut names = vec![local];
    for h in &hosts {
        if names.contains(&h.name.as_str()) {
            bail!(
                "host name {:?} is used twice (the recording machine is {local:?})",
                h.name
            );
        }
        names.push(&h.name);
    }
    Ok(hosts)
}

/// A word for a POSIX shell: ssh hands the remote command to the remote
/// user's shell as one line.
pub fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,@%+".contains(c))
    {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_from_flags_and_a_file() {
        let file = "# the cluster\nweb root@10.0.0.2 --cgroup /web.slice\n\ndb ssh://db:2222  # no own selection\n";
        let path = std::env::temp_dir().join(format!("hosts-{}", std::process::id()));
        std::fs::write(&path, file).unwrap();
        let hosts = hosts(&["cache=cache.example".into()], Some(&path), "here").unwrap();
        std::fs::remove_file(&path).ok();
        assert_eq!(hosts.len(), 3);
        assert_eq!(hosts[1].select, ["--cgroup", "/web.slice"]);
        assert_eq!(hosts[2].destination, "ssh://db:2222");
        assert!(parse_host("nodest").is_err());
        assert!(parse_host("a b=x").is_err());
        assert!(parse_host("a=-oProxyCommand=x").is_err());
        assert!(super::hosts(&["here=x".into()], None, "here").is_err());
        assert!(super::hosts(&["a=x".into(), "a=y".into()], None, "here").is_err());
    }

    #[test]
    fn words_reach_the_remote_shell_whole() {
        assert_eq!(shell_quote("kernel:*"), "'kernel:*'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote("/usr/bin/trace-cli"), "/usr/bin/trace-cli");
        assert_eq!(shell_quote(""), "''");
    }
}
