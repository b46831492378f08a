//! Authentication of udp datagrams: every datagram carries a tag, a keyed BLAKE3 hash of its
//! header, its frames and the address it is sent to, truncated to 128 bits, under a key
//! shared by the whole fabric (docs/udp.md, "Authentication").
//!
//! One tag per datagram authenticates every frame in it (1Pipe packets, control frames, other
//! protocols) and the credit it carries, at one hash per datagram: syscalls and per-datagram
//! work dominate here, and BLAKE3 hashes a full 9 KB datagram in about a microsecond on this
//! machine's AVX2/AVX-512 cores. The destination address is hashed in (not sent) so that a
//! datagram captured on one link cannot be replayed into another.
//!
//! Keys live in a key file ([`KeyRing::load`]): one key per line, `ID HEX`, the key to sign
//! with first and, during a rotation, the previous key after it (accepted, never used to
//! sign). The datagram names its key by id, so both are accepted while a change rolls through
//! the fabric. A running node reads its key file again when it changes
//! ([`KeyRing::reloaded`]).

use std::io::Write;
use std::net::SocketAddr;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Bytes of a key (BLAKE3's key size).
pub const KEY_BYTES: usize = 32;
/// Bytes of the tag at the end of an authenticated datagram.
pub const TAG_BYTES: usize = 16;
/// Keys a ring holds: the one to sign with and, during a rotation, the previous one.
pub const KEYS_MAX: usize = 2;
/// A key file larger than this is not a key file.
const KEY_FILE_BYTES_MAX: u64 = 4096;

/// How a node's datagrams are authenticated.
#[derive(Clone, Debug)]
pub enum Auth {
    /// Every datagram carries a tag under these keys; datagrams without a valid one are
    /// dropped and counted.
    Keys(Arc<KeyRing>),
    /// No tags: anyone who can send to a node's address speaks for its neighbours. Only on an
    /// explicit `--insecure-no-auth`.
    Off,
}

impl Auth {
    /// A fresh random key, for a fabric whose nodes all run in this process.
    pub fn generate() -> Result<Auth, KeyError> {
        Ok(Auth::Keys(Arc::new(KeyRing::generate()?)))
    }

    pub fn is_on(&self) -> bool {
        matches!(self, Auth::Keys(_))
    }
}

/// One key and the id that names it in datagrams (never 0, which means "no tag").
#[derive(Clone, PartialEq, Eq)]
pub struct Key {
    pub id: u8,
    bytes: [u8; KEY_BYTES],
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key itself: configurations are printed in logs.
        write!(f, "Key {{ id: {} }}", self.id)
    }
}

impl Key {
    pub fn new(id: u8, bytes: [u8; KEY_BYTES]) -> Key {
        assert!(id != 0, "key id 0 means an unauthenticated datagram");
        Key { id, bytes }
    }

    /// The tag of `body` (a datagram without its tag) sent to `to`.
    pub fn tag(&self, body: &[u8], to: SocketAddr) -> [u8; TAG_BYTES] {
        let mut h = blake3::Hasher::new_keyed(&self.bytes);
        h.update(body);
        match to {
            SocketAddr::V4(a) => h.update(&a.ip().octets()),
            SocketAddr::V6(a) => h.update(&a.ip().octets()),
        };
        h.update(&to.port().to_le_bytes());
        let mut tag = [0u8; TAG_BYTES];
        tag.copy_from_slice(&h.finalize().as_bytes()[..TAG_BYTES]);
        tag
    }

    /// Whether `tag` is the tag of `body` sent to `to`, compared in constant time.
    pub fn verify(&self, body: &[u8], to: SocketAddr, tag: &[u8]) -> bool {
        tag.len() == TAG_BYTES && constant_time_eq::constant_time_eq(&self.tag(body, to), tag)
    }
}

/// Where a ring was read from, to notice when the file changes.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Source {
    path: PathBuf,
    modified: Option<std::time::SystemTime>,
    len: u64,
}

/// The keys of a fabric: the first signs, every one is accepted.
#[derive(Clone, Debug)]
pub struct KeyRing {
    keys: Vec<Key>,
    source: Option<Source>,
}

/// What is wrong with a key or a key file.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("key file {path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error(
        "key file {path} may be read or written by others than its owner (mode {mode:o}): \
         `chmod 600 {path}`"
    )]
    Permissions { path: String, mode: u32 },
    #[error("key file {path}, line {line}: {why} (expected `ID HEX`: an id 1-255 and 64 hex digits)")]
    Syntax {
        path: String,
        line: usize,
        why: &'static str,
    },
    #[error("key file {path} holds no key")]
    Empty { path: String },
    #[error("key file {path} holds more than {KEYS_MAX} keys (the current and the previous)")]
    TooMany { path: String },
    #[error("key file {path} names key {id} twice")]
    DuplicateId { path: String, id: u8 },
    #[error("the OS random source failed: {0}")]
    Random(String),
}

impl KeyRing {
    /// A ring of the given keys, the first to sign with; `None` if there are none, more than
    /// [`KEYS_MAX`], or two with one id.
    pub fn new(keys: Vec<Key>) -> Option<KeyRing> {
        let distinct = keys.len() < 2 || keys[0].id != keys[1].id;
        (!keys.is_empty() && keys.len() <= KEYS_MAX && distinct).then_some(KeyRing { keys, source: None })
    }

    /// One fresh random key (id 1).
    pub fn generate() -> Result<KeyRing, KeyError> {
        let mut bytes = [0u8; KEY_BYTES];
        getrandom::fill(&mut bytes).map_err(|e| KeyError::Random(e.to_string()))?;
        Ok(KeyRing {
            keys: vec![Key::new(1, bytes)],
            source: None,
        })
    }

    /// The key new datagrams are signed with.
    pub fn signing(&self) -> &Key {
        &self.keys[0]
    }

    /// The key named `id`, if this ring accepts it.
    pub fn find(&self, id: u8) -> Option<&Key> {
        self.keys.iter().find(|k| k.id == id)
    }

    pub fn keys(&self) -> &[Key] {
        &self.keys
    }

    /// Parses a key file's text; `path` names it in errors.
    pub fn parse(text: &str, path: &str) -> Result<KeyRing, KeyError> {
        let mut keys = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let syntax = |why| KeyError::Syntax {
                path: path.to_string(),
                line: i + 1,
                why,
            };
            let (id, hex) = line
                .split_once(char::is_whitespace)
                .ok_or(syntax("no key after the id"))?;
            let id: u8 = id.parse().map_err(|_| syntax("the id is not a number 1-255"))?;
            if id == 0 {
                return Err(syntax("id 0 is reserved for unauthenticated datagrams"));
            }
            let bytes = parse_hex(hex.trim()).ok_or(syntax("the key is not 64 hex digits"))?;
            if keys.iter().any(|k: &Key| k.id == id) {
                return Err(KeyError::DuplicateId {
                    path: path.to_string(),
                    id,
                });
            }
            keys.push(Key::new(id, bytes));
            if keys.len() > KEYS_MAX {
                return Err(KeyError::TooMany {
                    path: path.to_string(),
                });
            }
        }
        KeyRing::new(keys).ok_or(KeyError::Empty {
            path: path.to_string(),
        })
    }

    /// The key file's text for this ring.
    pub fn to_file_text(&self) -> String {
        let mut text = String::from(
            "# onepipe fabric key (docs/udp.md, \"Authentication\"): ID HEX, the key to sign with\n\
             # first; during a rotation the previous key after it. Keep this file mode 600.\n",
        );
        for k in &self.keys {
            text += &format!("{} {}\n", k.id, to_hex(&k.bytes));
        }
        text
    }

    /// Reads the key file at `path`, refusing one that others than its owner may read or
    /// write.
    pub fn load(path: &Path) -> Result<KeyRing, KeyError> {
        let shown = path.display().to_string();
        let io = |source| KeyError::Io {
            path: shown.clone(),
            source,
        };
        let mut file = std::fs::File::open(path).map_err(io)?;
        let meta = file.metadata().map_err(io)?;
        check_private(&meta, &shown)?;
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::Read::take(&mut file, KEY_FILE_BYTES_MAX), &mut text)
            .map_err(io)?;
        let mut ring = KeyRing::parse(&text, &shown)?;
        ring.source = Some(Source {
            path: path.to_path_buf(),
            modified: meta.modified().ok(),
            len: meta.len(),
        });
        Ok(ring)
    }

    /// The ring read again from its key file, if it was read from one and the file changed
    /// since: `None` if unchanged (or not from a file).
    pub fn reloaded(&self) -> Option<Result<KeyRing, KeyError>> {
        let source = self.source.as_ref()?;
        let meta = std::fs::metadata(&source.path).ok()?;
        if meta.modified().ok() == source.modified && meta.len() == source.len {
            return None;
        }
        Some(KeyRing::load(&source.path))
    }

    /// Reads the key file at `path`, or makes one with a fresh key if there is none (mode 600,
    /// in a directory of mode 700 if it has to make that too). Nodes started together may
    /// race to make it: the file appears whole or not at all, and every one reads the winner's.
    pub fn load_or_create(path: &Path) -> Result<KeyRing, KeyError> {
        match KeyRing::load(path) {
            Err(KeyError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {}
            other => return other,
        }
        let shown = path.display().to_string();
        let io = |source| KeyError::Io {
            path: shown.clone(),
            source,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(io)?;
        }
        let ring = KeyRing::generate()?;
        // Written under a name of its own, then linked into place: link fails if another
        // node made the file meanwhile, and a reader never sees half a key.
        let temp = path.with_extension(format!("tmp.{}", std::process::id()));
        let written = (|| {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&temp)?;
            f.write_all(ring.to_file_text().as_bytes())?;
            f.sync_all()?;
            std::fs::hard_link(&temp, path)
        })();
        let _ = std::fs::remove_file(&temp);
        match written {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(io(e)),
        }
        KeyRing::load(path)
    }
}

/// A key file must be the owner's alone, as ssh requires of private keys. Other secrets read
/// from files (etcd's credentials and client key, crates/etcd) are held to the same rule.
pub fn check_private(meta: &std::fs::Metadata, path: &str) -> Result<(), KeyError> {
    let mode = meta.mode() & 0o777;
    match mode & 0o077 {
        0 => Ok(()),
        _ => Err(KeyError::Permissions {
            path: path.to_string(),
            mode,
        }),
    }
}

fn parse_hex(hex: &str) -> Option<[u8; KEY_BYTES]> {
    let digits = hex.as_bytes();
    if digits.len() != 2 * KEY_BYTES {
        return None;
    }
    let mut out = [0u8; KEY_BYTES];
    for (o, pair) in out.iter_mut().zip(digits.chunks(2)) {
        *o = u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok()?;
    }
    Some(out)
}

fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("onepipe-auth-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn a_key_file_round_trips_and_bad_ones_are_refused() {
        let ring = KeyRing::generate().unwrap();
        let parsed = KeyRing::parse(&ring.to_file_text(), "k").unwrap();
        assert_eq!(parsed.keys(), ring.keys());
        let key = "ab".repeat(32);
        let two = KeyRing::parse(&format!("2 {key}\n# old\n1 {}\n", "cd".repeat(32)), "k").unwrap();
        assert_eq!(two.signing().id, 2);
        assert!(two.find(1).is_some() && two.find(3).is_none());
        for (text, bad) in [
            ("".to_string(), "holds no key"),
            ("0 ".to_string() + &key, "id 0"),
            ("256 ".to_string() + &key, "1-255"),
            ("1 abc".to_string(), "64 hex"),
            ("1 ".to_string() + &"zz".repeat(32), "64 hex"),
            (format!("1 {key}\n1 {key}"), "twice"),
            (format!("1 {key}\n2 {key}\n3 {key}"), "more than 2"),
            ("1".to_string(), "no key"),
        ] {
            let e = KeyRing::parse(&text, "k").unwrap_err().to_string();
            assert!(e.contains(bad), "{text:?}: {e}");
        }
    }

    #[test]
    fn a_key_file_others_may_read_is_refused_and_one_is_made_when_missing() {
        let d = dir("perm");
        let path = d.join("keys").join("fabric.key");
        let made = KeyRing::load_or_create(&path).unwrap();
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(meta.mode() & 0o777, 0o600);
        assert_eq!(
            std::fs::metadata(path.parent().unwrap()).unwrap().mode() & 0o777,
            0o700
        );
        // A second node finds the same key.
        assert_eq!(KeyRing::load_or_create(&path).unwrap().keys(), made.keys());
        assert!(made.reloaded().is_none(), "unchanged");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = KeyRing::load(&path).unwrap_err();
        assert!(matches!(e, KeyError::Permissions { mode: 0o644, .. }), "{e}");
        assert!(e.to_string().contains("chmod 600"));
        // Rotation: a new key first, the old one after it; the node notices the change.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let rotated = format!("2 {}\n1 {}\n", "11".repeat(32), to_hex(&made.keys()[0].bytes));
        std::fs::write(&path, rotated).unwrap();
        let again = made.reloaded().expect("changed").unwrap();
        assert_eq!(again.signing().id, 2);
        assert_eq!(again.find(1), made.find(1));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn tags_depend_on_key_body_and_destination() {
        let a: SocketAddr = "127.0.0.1:7000".parse().unwrap();
        let b: SocketAddr = "127.0.0.1:7001".parse().unwrap();
        let k1 = Key::new(1, [1; KEY_BYTES]);
        let k2 = Key::new(1, [2; KEY_BYTES]);
        let t = k1.tag(b"body", a);
        assert!(k1.verify(b"body", a, &t));
        assert!(!k2.verify(b"body", a, &t), "another key");
        assert!(!k1.verify(b"bodY", a, &t), "another body");
        assert!(!k1.verify(b"body", b, &t), "another destination");
        assert!(!k1.verify(b"body", a, &t[..TAG_BYTES - 1]), "a short tag");
        assert_eq!(format!("{k1:?}"), "Key { id: 1 }", "never printed");
    }
}

#[cfg(test)]
mod speed {
    use super::*;

    #[test]
    #[ignore = "prints how long a tag takes"]
    fn tag_speed() {
        let key = Key::new(1, [7; KEY_BYTES]);
        let to: SocketAddr = "127.0.0.1:7000".parse().unwrap();
        for len in [64usize, 1_500, 8_972] {
            let body = vec![3u8; len];
            let n = 200_000;
            let t = std::time::Instant::now();
            let mut x = 0u8;
            for _ in 0..n {
                x ^= key.tag(&body, to)[0];
            }
            let ns = t.elapsed().as_nanos() as f64 / n as f64;
            println!("{len} bytes: {ns:.0} ns per tag ({x})");
        }
    }
}
