//! An etcd of a test's own, for the tests of a secured etcd (crates/etcd/tests/secured.rs,
//! crates/cli/tests/replicas.rs): started on free loopback ports with its data in the test's
//! directory, and killed when dropped. Needs the `etcd` binary on PATH.

// etcd starts in real time.
#![allow(clippy::disallowed_methods)]

use crate::gateway::RangeRequest;
use crate::{Client, Connect, EtcdError};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const NEEDS_ETCD: &str = "needs the `etcd` binary on PATH (.ci/run installs Debian's etcd-server)";

/// The most an etcd is given to start answering.
const START_FOR: Duration = Duration::from_secs(20);

pub struct TestEtcd {
    child: Child,
    endpoint: String,
    log: PathBuf,
}

impl Drop for TestEtcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> Result<u16, String> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    Ok(listener.local_addr().map_err(|e| e.to_string())?.port())
}

impl TestEtcd {
    /// Starts etcd with its data and log in `dir`, serving clients at `scheme://127.0.0.1:PORT`,
    /// with `args` added (TLS files, token options).
    pub fn start(dir: &Path, scheme: &str, args: &[String]) -> Result<TestEtcd, String> {
        let (client_port, peer_port) = (free_port()?, free_port()?);
        let endpoint = format!("{scheme}://127.0.0.1:{client_port}");
        let peer = format!("http://127.0.0.1:{peer_port}");
        let log = dir.join("etcd.log");
        let stderr = std::fs::File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
        let child = Command::new("etcd")
            .args(["--name", "test", "--data-dir"])
            .arg(dir.join("etcd-data"))
            .args([
                "--listen-client-urls",
                &endpoint,
                "--advertise-client-urls",
                &endpoint,
            ])
            .args([
                "--listen-peer-urls",
                &peer,
                "--initial-advertise-peer-urls",
                &peer,
            ])
            .args(["--initial-cluster", &format!("test={peer}")])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .map_err(|e| format!("{NEEDS_ETCD}: {e}"))?;
        Ok(TestEtcd { child, endpoint, log })
    }

    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    pub fn connect(&self) -> Connect {
        Connect::new(&self.endpoint)
    }

    /// Waits until `client` gets an answer (a refusal is one too); its log if it does not.
    pub fn wait_until_up(&mut self, client: &Client) -> Result<(), String> {
        let started = Instant::now();
        loop {
            match client.range(&RangeRequest::key(b"/up")) {
                Ok(_) | Err(EtcdError::Refused { .. } | EtcdError::NoCredentials { .. }) => return Ok(()),
                Err(e) => {
                    let exited = self.child.try_wait().map_err(|e| e.to_string())?;
                    if exited.is_some() || started.elapsed() > START_FOR {
                        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
                        return Err(format!(
                            "etcd at {} did not come up ({exited:?}, last: {e}); its log:\n{log}",
                            self.endpoint
                        ));
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Turns etcd's authentication on as docs/udp.md says: user root (with role root, which
    /// turning it on needs), and `user` with `password`, whose role may read and write only the
    /// keys under `prefix`.
    pub fn enable_auth(&self, user: &str, password: &str, prefix: &str) -> Result<(), String> {
        let b64 = |s: &[u8]| STANDARD.encode(s);
        let end = crate::gateway::prefix_end(prefix.as_bytes());
        let perm = serde_json::json!({"permType": "READWRITE", "key": b64(prefix.as_bytes()), "range_end": b64(&end)});
        let calls = [
            (
                "/v3/auth/user/add",
                serde_json::json!({"name": "root", "password": format!("root-{password}")}),
            ),
            ("/v3/auth/role/add", serde_json::json!({"name": "root"})),
            (
                "/v3/auth/user/grant",
                serde_json::json!({"user": "root", "role": "root"}),
            ),
            ("/v3/auth/role/add", serde_json::json!({"name": user})),
            (
                "/v3/auth/role/grant",
                serde_json::json!({"name": user, "perm": perm}),
            ),
            (
                "/v3/auth/user/add",
                serde_json::json!({"name": user, "password": password}),
            ),
            (
                "/v3/auth/user/grant",
                serde_json::json!({"user": user, "role": user}),
            ),
            ("/v3/auth/enable", serde_json::json!({})),
        ];
        for (path, body) in calls {
            self.admin(path, &body)?;
        }
        Ok(())
    }

    /// An administrator's call through the gateway, before authentication is on.
    fn admin(&self, path: &str, body: &serde_json::Value) -> Result<(), String> {
        let json = serde_json::to_vec(body).map_err(|e| e.to_string())?;
        let failed = |e: ureq::Error| format!("{path}: {e}");
        let mut answer = ureq::post(format!("{}{path}", self.endpoint))
            .config()
            .http_status_as_error(false)
            .build()
            .content_type("application/json")
            .send(&json[..])
            .map_err(failed)?;
        let text = answer.body_mut().read_to_string().map_err(failed)?;
        match answer.status().as_u16() {
            200 => Ok(()),
            status => Err(format!("{path}: HTTP {status}: {text}")),
        }
    }
}

/// A credentials file of mode 600 at `path`.
pub fn write_user_file(path: &Path, user: &str, password: &str) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let text = format!(
        "user = {}\npassword = {}\n",
        toml_string(user),
        toml_string(password)
    );
    std::fs::write(path, text)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
}

/// `s` as a TOML basic string.
fn toml_string(s: &str) -> String {
    serde_json::to_string(s).expect("a string always serializes")
}

/// A directory of a test's own under the system's temporary directory, removed when dropped.
pub struct TestDir(PathBuf);

impl TestDir {
    pub fn new(test: &str) -> TestDir {
        let dir = std::env::temp_dir().join(format!("onepipe-etcd-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        TestDir(dir)
    }

    /// Writes `text` to `name` in it with permissions `mode`.
    pub fn file(&self, name: &str, text: &str, mode: u32) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = self.0.join(name);
        std::fs::write(&path, text).expect("a file in the test's directory");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("its mode");
        path
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
