//! How a client reaches etcd (docs/udp.md, "Securing etcd"): the endpoint, and for a secured
//! etcd the files that let it in: over TLS (`https://`), the CA that signed etcd's certificate
//! and this client's certificate and key; with etcd's authentication on, a credentials file.
//! Every file is read when the client is made, so a wrong one is an error at start, naming it.

use crate::client::EtcdError;
use onepipe_fabric::EtcdFiles;
use std::io::Read;
use std::path::{Path, PathBuf};

/// The environment variable that names the credentials file when no flag does.
pub const USER_FILE_ENV: &str = "ONEPIPE_ETCD_USER_FILE";

/// A PEM file or a credentials file larger than this is not one (a certificate chain is a few
/// KB).
const FILE_BYTES_MAX: u64 = 1 << 20;

/// An etcd endpoint and the files that secure the way to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Connect {
    /// `http://HOST:PORT`, or `https://HOST:PORT` over TLS.
    pub endpoint: String,
    pub files: EtcdFiles,
}

impl Connect {
    /// `endpoint` without TLS files or credentials.
    pub fn new(endpoint: &str) -> Connect {
        Connect {
            endpoint: endpoint.to_string(),
            files: EtcdFiles::default(),
        }
    }

    /// `endpoint` with, for each file, the one `given` (the command line), else for the
    /// credentials the one [`USER_FILE_ENV`] names, else the topology's.
    pub fn resolve(endpoint: &str, given: &EtcdFiles, topology: &EtcdFiles) -> Connect {
        let pick = |g: &Option<PathBuf>, t: &Option<PathBuf>| g.clone().or_else(|| t.clone());
        let env = std::env::var_os(USER_FILE_ENV)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from);
        Connect {
            endpoint: endpoint.to_string(),
            files: EtcdFiles {
                ca_file: pick(&given.ca_file, &topology.ca_file),
                cert_file: pick(&given.cert_file, &topology.cert_file),
                key_file: pick(&given.key_file, &topology.key_file),
                user_file: given
                    .user_file
                    .clone()
                    .or(env)
                    .or_else(|| topology.user_file.clone()),
            },
        }
    }
}

/// A user of etcd's authentication and its password, from a credentials file: TOML with two
/// keys, `user = "NAME"` and `password = "SECRET"`, mode 600.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    pub user: String,
    pub password: String,
    /// The file they came from, for messages.
    pub path: String,
}

/// The password stays out of logs and panics.
impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("user", &self.user)
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct CredentialsFile {
    user: String,
    password: String,
}

impl Credentials {
    /// Reads the credentials file at `path`, refusing one others than its owner may read.
    pub fn load(endpoint: &str, path: &Path) -> Result<Credentials, EtcdError> {
        const WHAT: &str = "credentials file";
        let bad = |reason: String| file_error(endpoint, WHAT, path, reason);
        let bytes = read_file(endpoint, WHAT, path, true)?;
        let text = String::from_utf8(bytes).map_err(|_| bad("not UTF-8 text".into()))?;
        let file: CredentialsFile = toml::from_str(&text).map_err(|e| {
            bad(format!(
                "expected `user = \"NAME\"` and `password = \"SECRET\"` ({})",
                e.message()
            ))
        })?;
        if file.user.is_empty() || file.password.is_empty() {
            return Err(bad("the user and the password must not be empty".into()));
        }
        Ok(Credentials {
            user: file.user,
            password: file.password,
            path: path.display().to_string(),
        })
    }
}

/// The TLS settings for an `https://` endpoint: its CA file's certificates as the only roots
/// (else the public web's), and the client certificate, if any.
pub(crate) fn tls_config(endpoint: &str, files: &EtcdFiles) -> Result<ureq::tls::TlsConfig, EtcdError> {
    let mut config = ureq::tls::TlsConfig::builder();
    if let Some(path) = &files.ca_file {
        let roots = certificates(endpoint, "CA file", path)?;
        config = config.root_certs(ureq::tls::RootCerts::new_with_certs(&roots));
    }
    match (&files.cert_file, &files.key_file) {
        (None, None) => {}
        (Some(cert), Some(key)) => {
            let chain = certificates(endpoint, "client certificate", cert)?;
            let key = private_key(endpoint, key)?;
            config = config.client_cert(Some(ureq::tls::ClientCert::new_with_certs(&chain, key)));
        }
        (Some(path), None) | (None, Some(path)) => {
            return Err(file_error(
                endpoint,
                "client certificate or key",
                path,
                "a client certificate needs its key, and a key its certificate".into(),
            ));
        }
    }
    Ok(config.build())
}

/// Every certificate of a PEM file; none is an error.
fn certificates(
    endpoint: &str,
    what: &'static str,
    path: &Path,
) -> Result<Vec<ureq::tls::Certificate<'static>>, EtcdError> {
    let pem = read_file(endpoint, what, path, false)?;
    let mut certs = Vec::new();
    for item in ureq::tls::parse_pem(&pem) {
        match item {
            Ok(ureq::tls::PemItem::Certificate(c)) => certs.push(c),
            Ok(_) => {}
            Err(e) => return Err(file_error(endpoint, what, path, format!("not PEM ({e})"))),
        }
    }
    if certs.is_empty() {
        return Err(file_error(
            endpoint,
            what,
            path,
            "holds no PEM certificate".into(),
        ));
    }
    Ok(certs)
}

/// The first private key of a PEM file, which must be its owner's alone.
fn private_key(endpoint: &str, path: &Path) -> Result<ureq::tls::PrivateKey<'static>, EtcdError> {
    const WHAT: &str = "client key";
    let pem = read_file(endpoint, WHAT, path, true)?;
    for item in ureq::tls::parse_pem(&pem) {
        match item {
            Ok(ureq::tls::PemItem::PrivateKey(k)) => return Ok(k),
            Ok(_) => {}
            Err(e) => return Err(file_error(endpoint, WHAT, path, format!("not PEM ({e})"))),
        }
    }
    Err(file_error(
        endpoint,
        WHAT,
        path,
        "holds no PEM private key".into(),
    ))
}

/// The bytes of a file of at most [`FILE_BYTES_MAX`]; a `secret` one must be its owner's
/// alone, checked as the fabric's key files are.
fn read_file(endpoint: &str, what: &'static str, path: &Path, secret: bool) -> Result<Vec<u8>, EtcdError> {
    let bad = |reason: String| file_error(endpoint, what, path, reason);
    let file = std::fs::File::open(path).map_err(|e| bad(e.to_string()))?;
    let meta = file.metadata().map_err(|e| bad(e.to_string()))?;
    if secret {
        onepipe_runtime::udp::auth::check_private(&meta, &path.display().to_string()).map_err(|_| {
            use std::os::unix::fs::PermissionsExt;
            bad(format!(
                "may be read or written by others than its owner (mode {:o}): `chmod 600 {}`",
                meta.permissions().mode() & 0o777,
                path.display()
            ))
        })?;
    }
    let mut bytes = Vec::new();
    file.take(FILE_BYTES_MAX + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| bad(e.to_string()))?;
    if bytes.len() as u64 > FILE_BYTES_MAX {
        return Err(bad(format!("larger than {FILE_BYTES_MAX} bytes")));
    }
    Ok(bytes)
}

fn file_error(endpoint: &str, what: &'static str, path: &Path, reason: String) -> EtcdError {
    EtcdError::BadFile {
        endpoint: endpoint.to_string(),
        what,
        path: path.display().to_string(),
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::TestDir;

    fn reason(e: EtcdError, path: &Path) -> String {
        let text = e.to_string();
        assert!(text.contains(&path.display().to_string()), "{text}");
        match e {
            EtcdError::BadFile { reason, .. } => reason,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_credentials_file_is_read_and_its_password_never_printed() {
        let dir = TestDir::new("credentials");
        let good = dir.file("user", "user = \"root\"\npassword = 'p\"w'\n", 0o600);
        let c = Credentials::load("http://e", &good).unwrap();
        assert_eq!((c.user.as_str(), c.password.as_str()), ("root", "p\"w"));
        assert!(!format!("{c:?}").contains("p\"w"), "{c:?}");
    }

    #[test]
    fn a_credentials_file_others_may_read_or_that_is_malformed_is_refused_naming_it() {
        let dir = TestDir::new("credentials-bad");
        let open = dir.file("open", "user = \"root\"\npassword = \"pw\"\n", 0o644);
        let why = reason(Credentials::load("http://e", &open).unwrap_err(), &open);
        assert!(why.contains("mode 644") && why.contains("chmod 600"), "{why}");
        for (name, text) in [
            ("no-password", "user = \"root\"\n"),
            ("unknown", "user = \"root\"\npassword = \"pw\"\nrole = \"x\"\n"),
            ("lines", "user root\npassword pw\n"),
            ("empty", "user = \"\"\npassword = \"pw\"\n"),
        ] {
            let path = dir.file(name, text, 0o600);
            let why = reason(Credentials::load("http://e", &path).unwrap_err(), &path);
            assert!(why.contains("user") || why.contains("expected"), "{name}: {why}");
        }
        let missing = dir.path().join("missing");
        reason(Credentials::load("http://e", &missing).unwrap_err(), &missing);
    }

    #[test]
    fn tls_files_that_are_missing_empty_or_alone_are_refused_naming_them() {
        let dir = TestDir::new("tls-bad");
        let empty = dir.file("empty.pem", "", 0o644);
        let files = |ca: Option<&PathBuf>, cert: Option<&PathBuf>, key: Option<&PathBuf>| EtcdFiles {
            ca_file: ca.cloned(),
            cert_file: cert.cloned(),
            key_file: key.cloned(),
            user_file: None,
        };
        let why = reason(
            tls_config("https://e", &files(Some(&empty), None, None)).unwrap_err(),
            &empty,
        );
        assert!(why.contains("no PEM certificate"), "{why}");
        let missing = dir.path().join("missing.pem");
        reason(
            tls_config("https://e", &files(Some(&missing), None, None)).unwrap_err(),
            &missing,
        );
        let why = reason(
            tls_config("https://e", &files(None, Some(&empty), None)).unwrap_err(),
            &empty,
        );
        assert!(why.contains("needs its key"), "{why}");
        let key = dir.file("key.pem", "", 0o640);
        let why = reason(
            tls_config("https://e", &files(None, None, Some(&key))).unwrap_err(),
            &key,
        );
        assert!(why.contains("needs its key"), "{why}");
        assert!(tls_config("https://e", &files(None, None, None)).is_ok());
    }

    #[test]
    fn files_on_the_command_line_come_first_then_the_environment_then_the_topology() {
        let given = EtcdFiles {
            ca_file: Some("/given/ca".into()),
            ..EtcdFiles::default()
        };
        let topology = EtcdFiles {
            ca_file: Some("/topology/ca".into()),
            key_file: Some("/topology/key".into()),
            user_file: Some("/topology/user".into()),
            ..EtcdFiles::default()
        };
        let c = Connect::resolve("https://e:1", &given, &topology);
        assert_eq!(c.files.ca_file, Some("/given/ca".into()));
        assert_eq!(c.files.key_file, Some("/topology/key".into()));
        assert_eq!(c.files.cert_file, None);
        if std::env::var_os(USER_FILE_ENV).is_none() {
            assert_eq!(c.files.user_file, Some("/topology/user".into()));
        }
    }
}
