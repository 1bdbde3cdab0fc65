//! Containers and services, recognised from cgroup paths.
//!
//! Container runtimes put each container in a cgroup named after it, and
//! the names are stable conventions (a container's cgroup is the only
//! thing every runtime shares with the kernel):
//!
//! | runtime | systemd cgroup driver | cgroupfs driver |
//! |---|---|---|
//! | Docker | `docker-<id>.scope` | `/docker/<id>` |
//! | Podman | `libpod-<id>.scope` | `/libpod_parent/libpod-<id>` |
//! | containerd (CRI, nerdctl) | `cri-containerd-<id>.scope`, `nerdctl-<id>.scope` | `/kubepods/…/pod<uid>/<id>` |
//! | CRI-O | `crio-<id>.scope` | `/kubepods/…/pod<uid>/crio-<id>` |
//! | systemd-nspawn | `machine-<name>.scope` | — |
//!
//! Ids are 64 hexadecimal digits. Names come from the runtime's state
//! where it is readable: Docker's `config.v2.json`, Podman's
//! `containers.json` (root and rootless stores); nspawn's is the scope's.
//! Kubernetes names (pod, container) live in the kubelet's API, not on
//! disk: CRI containers carry their id only.

use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};

use super::Hierarchy;

/// A container runtime.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Runtime {
    /// Docker (moby).
    Docker,
    /// Podman.
    Podman,
    /// containerd, through the CRI (Kubernetes) or nerdctl.
    Containerd,
    /// CRI-O.
    CriO,
    /// systemd-nspawn (a machine).
    Nspawn,
}

impl Runtime {
    /// The runtime's name as the trace and `report` show it.
    pub fn name(self) -> &'static str {
        match self {
            Runtime::Docker => "docker",
            Runtime::Podman => "podman",
            Runtime::Containerd => "containerd",
            Runtime::CriO => "cri-o",
            Runtime::Nspawn => "nspawn",
        }
    }
}

impl fmt::Display for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A container, as its cgroup names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Container {
    /// Which runtime made it.
    pub runtime: Runtime,
    /// Its id (64 hexadecimal digits; an nspawn machine's name).
    pub id: String,
    /// Its name, where the runtime's state says it.
    pub name: Option<String>,
    /// Its cgroup (the cgroup every process of it is in or below).
    pub cgroup: String,
}

impl Container {
    /// The container cgroup `path` (a path from the v2 hierarchy's root)
    /// belongs to: the innermost component that a runtime names.
    pub fn of_cgroup(path: &str) -> Option<Container> {
        let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
        (0..parts.len()).rev().find_map(|i| {
            let parent = i.checked_sub(1).map(|p| parts[p]);
            let (runtime, id, name) = recognise(parts[i], parent)?;
            Some(Container {
                runtime,
                id,
                name,
                cgroup: format!("/{}", parts[..=i].join("/")),
            })
        })
    }

    /// The first 12 digits of its id, as `docker ps` shows it.
    pub fn short_id(&self) -> &str {
        self.id.get(..12).unwrap_or(&self.id)
    }

    /// `runtime name` or `runtime short-id` when it has no name.
    pub fn label(&self) -> String {
        format!(
            "{} {}",
            self.runtime,
            self.name.as_deref().unwrap_or(self.short_id())
        )
    }
}

/// The runtime, id and (nspawn) name that cgroup directory `part` (whose
/// parent directory is `parent`) says.
fn recognise(part: &str, parent: Option<&str>) -> Option<(Runtime, String, Option<String>)> {
    let scoped = |prefix: &str| {
        part.strip_prefix(prefix)?
            .strip_suffix(".scope")
            .filter(|id| is_id(id))
            .map(str::to_owned)
    };
    if let Some(id) = scoped("docker-") {
        return Some((Runtime::Docker, id, None));
    }
    if let Some(id) = scoped("libpod-") {
        return Some((Runtime::Podman, id, None));
    }
    if let Some(id) = scoped("cri-containerd-").or_else(|| scoped("nerdctl-")) {
        return Some((Runtime::Containerd, id, None));
    }
    if let Some(id) = scoped("crio-") {
        return Some((Runtime::CriO, id, None));
    }
    if let Some(machine) = part
        .strip_prefix("machine-")
        .and_then(|m| m.strip_suffix(".scope"))
        .filter(|_| parent == Some("machine.slice"))
    {
        let name = unescape_unit(machine);
        return Some((Runtime::Nspawn, name.clone(), Some(name)));
    }
    // The cgroupfs drivers: a bare id under the runtime's directory or a
    // Kubernetes pod's.
    match parent {
        Some("docker") if is_id(part) => Some((Runtime::Docker, part.to_owned(), None)),
        Some("libpod_parent") => part
            .strip_prefix("libpod-")
            .filter(|id| is_id(id))
            .map(|id| (Runtime::Podman, id.to_owned(), None)),
        Some(p) if p.starts_with("pod") => {
            if is_id(part) {
                Some((Runtime::Containerd, part.to_owned(), None))
            } else {
                part.strip_prefix("crio-")
                    .filter(|id| is_id(id))
                    .map(|id| (Runtime::CriO, id.to_owned(), None))
            }
        }
        _ => None,
    }
}

/// Whether `s` is a container id: 64 lowercase hexadecimal digits.
fn is_id(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Undoes systemd's unit-name escapes (`\x2d` for `-`).
fn unescape_unit(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.find("\\x") {
        out.push_str(&rest[..at]);
        let hex = rest.get(at + 2..at + 4);
        match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
            Some(b) => {
                out.push(char::from(b));
                rest = &rest[at + 4..];
            }
            None => {
                out.push_str("\\x");
                rest = &rest[at + 2..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Where Docker keeps its containers' state.
const DOCKER_STATE: &str = "/var/lib/docker/containers";
/// Podman's (root) container store list, below a storage root.
const PODMAN_LIST: &str = "overlay-containers/containers.json";

/// The name the runtime's state gives container `id`, where readable.
pub fn name_of(runtime: Runtime, id: &str) -> Option<String> {
    match runtime {
        Runtime::Docker => docker_name(Path::new(DOCKER_STATE), id),
        Runtime::Podman => podman_stores()
            .iter()
            .find_map(|store| podman_name(&store.join(PODMAN_LIST), id)),
        _ => None,
    }
}

/// The name in Docker's `config.v2.json` of container `id` (without the
/// leading `/`).
fn docker_name(state: &Path, id: &str) -> Option<String> {
    let text = fs::read_to_string(state.join(id).join("config.v2.json")).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    let name = v.get("Name")?.as_str()?;
    Some(name.trim_start_matches('/').to_owned())
}

/// Podman's storage roots: root's and every user's rootless one.
fn podman_stores() -> Vec<PathBuf> {
    let mut stores = vec![PathBuf::from("/var/lib/containers/storage")];
    let homes = fs::read_dir("/home")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .chain(std::iter::once(PathBuf::from("/root")));
    stores.extend(homes.map(|h| h.join(".local/share/containers/storage")));
    stores
}

/// The first name `containers.json` gives container `id`.
fn podman_name(list: &Path, id: &str) -> Option<String> {
    let text = fs::read_to_string(list).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    v.as_array()?
        .iter()
        .find(|c| c.get("id").and_then(|i| i.as_str()) == Some(id))?
        .get("names")?
        .as_array()?
        .first()?
        .as_str()
        .map(str::to_owned)
}

/// Why `--container` or `--unit` found nothing, or too much.
#[derive(Debug, thiserror::Error)]
pub enum LookupError {
    /// Nothing matches.
    #[error("no {what} {wanted:?} here; {}", listing(known))]
    Unknown {
        /// `container` or `unit`.
        what: &'static str,
        /// What was asked for.
        wanted: String,
        /// What there is, one per line.
        known: Vec<String>,
    },
    /// Several match.
    #[error("{what} {wanted:?} is ambiguous: it matches {}", matches.join(", "))]
    Ambiguous {
        /// `container` or `unit`.
        what: &'static str,
        /// What was asked for.
        wanted: String,
        /// What matches.
        matches: Vec<String>,
    },
}

fn listing(known: &[String]) -> String {
    if known.is_empty() {
        "there are none".to_owned()
    } else {
        format!("there are:\n  {}", known.join("\n  "))
    }
}

/// Every container with a cgroup in `hierarchy`, named where the runtime
/// says, outermost cgroups only (a container's own sub-cgroups are its).
pub fn containers(hierarchy: &Hierarchy) -> Vec<Container> {
    let mut found: Vec<Container> = Vec::new();
    for path in hierarchy.all() {
        if let Some(mut c) = Container::of_cgroup(&path)
            && c.cgroup == path
            && !found.iter().any(|f| f.id == c.id && f.runtime == c.runtime)
        {
            c.name = name_of(c.runtime, &c.id).or(c.name);
            found.push(c);
        }
    }
    found
}

/// The container `wanted` names among `all`: its name, its whole id, or a
/// prefix of its id (as `docker ps` shows it).
pub fn find_container<'a>(
    all: &'a [Container],
    wanted: &str,
) -> Result<&'a Container, LookupError> {
    if let Some(c) = all.iter().find(|c| c.name.as_deref() == Some(wanted)) {
        return Ok(c);
    }
    let by_id: Vec<&Container> = if wanted.is_empty() {
        Vec::new()
    } else {
        all.iter().filter(|c| c.id.starts_with(wanted)).collect()
    };
    match by_id.as_slice() {
        [one] => Ok(one),
        [] => Err(LookupError::Unknown {
            what: "container",
            wanted: wanted.to_owned(),
            known: all
                .iter()
                .map(|c| {
                    format!(
                        "{} {} {} ({})",
                        c.runtime,
                        c.short_id(),
                        c.name.as_deref().unwrap_or("-"),
                        c.cgroup
                    )
                })
                .collect(),
        }),
        many => Err(LookupError::Ambiguous {
            what: "container",
            wanted: wanted.to_owned(),
            matches: many.iter().map(|c| c.label()).collect(),
        }),
    }
}

/// The cgroup of systemd unit `unit` (`nginx`, `nginx.service`,
/// `session-3.scope`, `user.slice`), searched in the whole hierarchy: a
/// name without a suffix is a service.
pub fn find_unit(hierarchy: &Hierarchy, unit: &str) -> Result<String, LookupError> {
    let wanted = if [".service", ".scope", ".slice", ".socket", ".mount", ".swap"]
        .iter()
        .any(|s| unit.ends_with(s))
    {
        unit.to_owned()
    } else {
        format!("{unit}.service")
    };
    let all = hierarchy.all();
    let matches: Vec<&String> = all
        .iter()
        .filter(|p| p.rsplit('/').next() == Some(wanted.as_str()))
        .collect();
    match matches.as_slice() {
        [one] => Ok((*one).clone()),
        [] => Err(LookupError::Unknown {
            what: "unit",
            wanted: unit.to_owned(),
            known: {
                let mut units: Vec<String> = all
                    .iter()
                    .filter_map(|p| p.rsplit('/').next())
                    .filter(|n| n.ends_with(".service") || n.ends_with(".scope"))
                    .map(str::to_owned)
                    .collect();
                units.sort();
                units.dedup();
                units
            },
        }),
        many => Err(LookupError::Ambiguous {
            what: "unit",
            wanted: unit.to_owned(),
            matches: many.iter().map(|p| (*p).clone()).collect(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "4f1c2a9b8e7d6c5b4a39281706f5e4d3c2b1a09f8e7d6c5b4a3928170615e4d3";

    #[test]
    fn recognises_each_runtime_naming() {
        let c = Container::of_cgroup(&format!("/system.slice/docker-{ID}.scope")).unwrap();
        assert_eq!((c.runtime, c.id.as_str()), (Runtime::Docker, ID));
        assert_eq!(c.cgroup, format!("/system.slice/docker-{ID}.scope"));
        assert_eq!(c.short_id(), &ID[..12]);
        let c = Container::of_cgroup(&format!("/docker/{ID}/sub")).unwrap();
        assert_eq!(
            (c.runtime, c.cgroup.as_str()),
            (Runtime::Docker, &*format!("/docker/{ID}"))
        );
        let c = Container::of_cgroup(&format!(
            "/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-{ID}.scope/container"
        ))
        .unwrap();
        assert_eq!(c.runtime, Runtime::Podman);
        let c = Container::of_cgroup(&format!(
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice/cri-containerd-{ID}.scope"
        ))
        .unwrap();
        assert_eq!(c.runtime, Runtime::Containerd);
        let c = Container::of_cgroup(&format!("/kubepods/burstable/pod1234/{ID}")).unwrap();
        assert_eq!(c.runtime, Runtime::Containerd);
        let c = Container::of_cgroup(&format!("/system.slice/crio-{ID}.scope")).unwrap();
        assert_eq!(c.runtime, Runtime::CriO);
        let c = Container::of_cgroup("/machine.slice/machine-web\\x2d1.scope/payload").unwrap();
        assert_eq!(
            (c.runtime, c.name.as_deref()),
            (Runtime::Nspawn, Some("web-1"))
        );
        assert!(Container::of_cgroup("/system.slice/nginx.service").is_none());
        assert!(Container::of_cgroup("/system.slice/docker-abc.scope").is_none());
        assert!(Container::of_cgroup("/").is_none());
    }

    #[test]
    fn finds_by_name_whole_id_or_prefix_and_lists_what_is_there() {
        let other = format!("4f1c{}", "0".repeat(60));
        let all = vec![
            Container {
                runtime: Runtime::Docker,
                id: ID.to_owned(),
                name: Some("web".into()),
                cgroup: "/a".into(),
            },
            Container {
                runtime: Runtime::Podman,
                id: other.clone(),
                name: None,
                cgroup: "/b".into(),
            },
        ];
        assert_eq!(find_container(&all, "web").unwrap().id, ID);
        assert_eq!(find_container(&all, &ID[..6]).unwrap().id, ID);
        assert_eq!(find_container(&all, &other[..8]).unwrap().id, other);
        assert!(matches!(
            find_container(&all, "4f1c"),
            Err(LookupError::Ambiguous { .. })
        ));
        let e = find_container(&all, "db").unwrap_err().to_string();
        assert!(e.contains("docker 4f1c2a9b8e7d web (/a)"), "{e}");
        assert!(e.contains("podman"), "{e}");
    }

    #[test]
    fn reads_docker_and_podman_names() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join(ID)).unwrap();
        fs::write(
            dir.path().join(ID).join("config.v2.json"),
            r#"{"ID":"x","Name":"/web","State":{}}"#,
        )
        .unwrap();
        assert_eq!(docker_name(dir.path(), ID).as_deref(), Some("web"));
        let list = dir.path().join("containers.json");
        fs::write(
            &list,
            format!(r#"[{{"id":"{ID}","names":["db","db2"],"image":"x"}}]"#),
        )
        .unwrap();
        assert_eq!(podman_name(&list, ID).as_deref(), Some("db"));
        assert_eq!(podman_name(&list, "nope"), None);
    }
}
