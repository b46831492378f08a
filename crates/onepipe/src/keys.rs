//! Which key authenticates a udp fabric (docs/udp.md, "Authentication"): every switch,
//! process and controller started with one topology finds the same key file, or makes it.
//!
//! In order: a key file given on the command line, the file `ONEPIPE_KEY_FILE` names, the
//! topology's `key_file`, and otherwise a key made for the topology in a private directory of
//! this user ([`default_key_file`]), so that `onepipe up` and the processes joining it agree
//! without being told. A key file that is named must exist; only the default one is made.
//! Authentication is off only when asked for by name (`--insecure-no-auth`).

use onepipe_fabric::Topology;
use onepipe_runtime::udp::auth::{Auth, KeyError, KeyRing};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The environment variable that names a fabric's key file.
pub const KEY_FILE_ENV: &str = "ONEPIPE_KEY_FILE";

/// Where a fabric's key comes from, and whether it is made if missing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeySource {
    pub path: PathBuf,
    /// Only the default key file is made when missing; a named one must exist.
    pub create: bool,
}

/// The key file of `topology`: `given` (a command-line flag), else [`KEY_FILE_ENV`], else the
/// topology's `key_file`, else [`default_key_file`].
pub fn key_source(topology: &Topology, given: Option<&Path>) -> KeySource {
    let env = std::env::var_os(KEY_FILE_ENV)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from);
    match given
        .map(Path::to_path_buf)
        .or(env)
        .or_else(|| topology.key_file.clone())
    {
        Some(path) => KeySource { path, create: false },
        None => KeySource {
            path: default_key_file(topology),
            create: true,
        },
    }
}

/// The key made for a topology that names none: one file per topology name, in this user's
/// private directory (mode 700). Every place that needs it asks this function.
pub fn default_key_file(topology: &Topology) -> PathBuf {
    let name: String = topology
        .name
        .chars()
        .map(|c| match c.is_ascii_alphanumeric() || c == '-' || c == '_' {
            true => c,
            false => '_',
        })
        .collect();
    private_dir().join("keys").join(format!("{name}.key"))
}

/// This user's private onepipe directory: `$XDG_RUNTIME_DIR/onepipe` where the session has
/// one (a tmpfs only this user can enter), else `~/.onepipe`, else one under the temporary
/// directory named after the user id (made mode 700 by whoever makes a file in it).
fn private_dir() -> PathBuf {
    let var = |name| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(run) = var("XDG_RUNTIME_DIR") {
        return run.join("onepipe");
    }
    if let Some(home) = var("HOME") {
        return home.join(".onepipe");
    }
    std::env::temp_dir().join(format!("onepipe-{}", uid()))
}

/// This process's user id (the owner of its /proc entry).
fn uid() -> u32 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").map_or(0, |m| m.uid())
}

/// How a participant of `topology` authenticates: no tags if `insecure_no_auth`, else the keys
/// of [`key_source`] (made if it is the default file and missing).
pub fn fabric_auth(
    topology: &Topology,
    given: Option<&Path>,
    insecure_no_auth: bool,
) -> Result<Auth, KeyError> {
    if insecure_no_auth {
        return Ok(Auth::Off);
    }
    let source = key_source(topology, given);
    let ring = match source.create {
        true => KeyRing::load_or_create(&source.path)?,
        false => KeyRing::load(&source.path)?,
    };
    Ok(Auth::Keys(Arc::new(ring)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_named_key_file_comes_first_and_the_default_is_per_topology_name() {
        let mut t = Topology::preset("single:2").unwrap();
        t.name = "fat-tree:4 / x".into();
        let default = default_key_file(&t);
        assert!(default.ends_with("keys/fat-tree_4___x.key"), "{default:?}");
        if std::env::var_os(KEY_FILE_ENV).is_none() {
            assert_eq!(
                key_source(&t, None),
                KeySource {
                    path: default,
                    create: true
                }
            );
            t.key_file = Some("/topology.key".into());
            assert_eq!(key_source(&t, None).path, PathBuf::from("/topology.key"));
        }
        let given = key_source(&t, Some(Path::new("/given.key")));
        assert_eq!(
            given,
            KeySource {
                path: "/given.key".into(),
                create: false
            }
        );
        assert!(matches!(fabric_auth(&t, None, true), Ok(Auth::Off)));
        // A named key file that does not exist is an error, not made.
        let e = fabric_auth(&t, Some(Path::new("/nonexistent/onepipe.key")), false).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/onepipe.key"), "{e}");
    }
}
