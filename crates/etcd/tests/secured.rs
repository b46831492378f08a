//! Against an etcd of its own with its doors shut (docs/udp.md, "Securing etcd"): one with
//! authentication on, one that takes only TLS clients with a certificate of its CA. Each test
//! starts its own `etcd` on free loopback ports with a data dir of its own, and stops it
//! whatever happens; the etcd of the live tests is not touched.
//!
//! `.ci/run` installs etcd and runs these; by hand, with `etcd` on PATH:
//! `cargo test -p onepipe-etcd --test secured -- --ignored`.
// etcd starts, and its tokens lapse, in real time.
#![allow(clippy::disallowed_methods)]

use onepipe_etcd::gateway::RangeRequest;
use onepipe_etcd::testing::{TestDir, TestEtcd, write_user_file};
use onepipe_etcd::{Client, Connect, ElectionConfig, EtcdError, EtcdStore, Replica};
use onepipe_proto::controller::store::{Event, Record, Store};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(2);

fn tick(at_ns: u64) -> Record {
    Record {
        at_ns,
        event: Event::Tick,
    }
}

/// Shows that `client` may run the controller's log under `prefix`: it wins the election, its
/// store appends, and the records read back.
fn append_and_read_back(client: &Client, prefix: &str, records: &[Record]) {
    let mut replica = Replica::new(client.clone(), prefix, "a", ElectionConfig::with_ttl_secs(2));
    let term = replica.wait_for_leadership(Duration::from_secs(10)).unwrap();
    assert!(term.is_some(), "never led: {:?}", replica.known_leader());
    let mut store = replica.store().unwrap();
    let before = store.load().unwrap();
    for r in records {
        store.append(r).unwrap();
    }
    let all = EtcdStore::read(client, prefix).unwrap();
    assert_eq!(all.len(), before.len() + records.len());
    assert_eq!(&all[before.len()..], records);
    replica.resign().unwrap();
}

/// etcd's authentication, set up as docs/udp.md says: user root (with role root, which
/// enabling authentication needs), and user onepipe whose role may read and write only under
/// /onepipe/. Then a client without credentials and one with a wrong password are refused with
/// errors that say so, and one with onepipe's runs the controller's log, also after its token
/// lapsed (etcd started with tokens that lapse after 1 s unused).
#[test]
#[ignore = "needs etcd on PATH: .ci/run installs it; or cargo test -p onepipe-etcd --test secured -- --ignored"]
fn with_authentication_on_only_a_client_with_the_right_password_runs_the_log() {
    let dir = TestDir::new("auth");
    let args = [
        "--auth-token=simple".to_string(),
        "--auth-token-ttl=1".to_string(),
    ];
    let mut etcd = TestEtcd::start(dir.path(), "http", &args).unwrap();
    let open = Client::new(&etcd.connect(), TIMEOUT).unwrap();
    etcd.wait_until_up(&open).unwrap();
    etcd.enable_auth("onepipe", "s3cret pass", "/onepipe/").unwrap();

    // Without credentials.
    let e = open.range(&RangeRequest::key(b"/onepipe/x")).unwrap_err();
    assert!(matches!(e, EtcdError::NoCredentials { .. }), "{e:?}");
    eprintln!("without credentials: {e}");

    // With a wrong password.
    let with_user = |file: &Path| {
        let mut c = etcd.connect();
        c.files.user_file = Some(file.to_path_buf());
        Client::new(&c, TIMEOUT).unwrap()
    };
    let wrong = dir.path().join("wrong");
    write_user_file(&wrong, "onepipe", "guess").unwrap();
    let e = with_user(&wrong)
        .range(&RangeRequest::key(b"/onepipe/x"))
        .unwrap_err();
    assert!(matches!(e, EtcdError::BadCredentials { .. }), "{e:?}");
    assert!(e.to_string().contains(&wrong.display().to_string()), "{e}");
    eprintln!("with a wrong password: {e}");

    // With the right one, within its role's keys, and not outside them.
    let right = dir.path().join("right");
    write_user_file(&right, "onepipe", "s3cret pass").unwrap();
    let client = with_user(&right);
    let prefix = "/onepipe/secured/controller";
    append_and_read_back(&client, prefix, &[tick(1), tick(2), tick(3)]);
    let e = client.range(&RangeRequest::key(b"/elsewhere")).unwrap_err();
    assert!(e.to_string().contains("permission denied"), "{e}");
    let authentications = client.authentications();
    assert!(authentications >= 1);

    // The token lapses while unused: the next calls get a new one by themselves.
    std::thread::sleep(Duration::from_millis(2_500));
    append_and_read_back(&client, prefix, &[tick(4)]);
    assert!(
        client.authentications() > authentications,
        "no new token after the first lapsed ({authentications} authentications)"
    );
    assert_eq!(EtcdStore::read(&client, prefix).unwrap().len(), 4);
}

/// A CA, and certificates it signed: etcd's (for 127.0.0.1; the server key also signs the
/// gateway's own calls to etcd's gRPC port, so it may act as a client too) and a client's.
struct Pki {
    ca: PathBuf,
    server_cert: PathBuf,
    server_key: PathBuf,
    client_cert: PathBuf,
    client_key: PathBuf,
}

fn certify(
    dir: &TestDir,
    name: &str,
    names: Vec<String>,
    usages: Vec<rcgen::ExtendedKeyUsagePurpose>,
    issuer: &rcgen::Issuer<'_, rcgen::KeyPair>,
) -> (PathBuf, PathBuf) {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(names).unwrap();
    params.distinguished_name.push(rcgen::DnType::CommonName, name);
    params.extended_key_usages = usages;
    let cert = params.signed_by(&key, issuer).unwrap();
    (
        dir.file(&format!("{name}.pem"), &cert.pem(), 0o644),
        dir.file(&format!("{name}-key.pem"), &key.serialize_pem(), 0o600),
    )
}

fn pki(dir: &TestDir, ca_name: &str) -> Pki {
    use rcgen::ExtendedKeyUsagePurpose::{ClientAuth, ServerAuth};
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.distinguished_name.push(rcgen::DnType::CommonName, ca_name);
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::CrlSign,
        rcgen::KeyUsagePurpose::DigitalSignature,
    ];
    let ca = rcgen::CertifiedIssuer::self_signed(params, rcgen::KeyPair::generate().unwrap()).unwrap();
    let ca_file = dir.file(&format!("{ca_name}.pem"), &ca.pem(), 0o644);
    let names = vec!["127.0.0.1".to_string(), "localhost".to_string()];
    let server = format!("{ca_name}-server");
    let (server_cert, server_key) = certify(dir, &server, names, vec![ServerAuth, ClientAuth], &ca);
    let client = format!("{ca_name}-client");
    let (client_cert, client_key) = certify(dir, &client, Vec::new(), vec![ClientAuth], &ca);
    Pki {
        ca: ca_file,
        server_cert,
        server_key,
        client_cert,
        client_key,
    }
}

/// etcd over TLS taking only clients with a certificate of its CA: a client with one runs the
/// controller's log; one without, or with another CA's, or that does not trust etcd's CA, is
/// refused; a client key others may read is refused before any call.
#[test]
#[ignore = "needs etcd on PATH: .ci/run installs it; or cargo test -p onepipe-etcd --test secured -- --ignored"]
fn over_tls_only_a_client_with_a_certificate_of_the_ca_runs_the_log() {
    let dir = TestDir::new("tls");
    let ours = pki(&dir, "ca");
    let theirs = pki(&dir, "stranger");
    let path = |p: &PathBuf| p.display().to_string();
    let args = [
        format!("--cert-file={}", path(&ours.server_cert)),
        format!("--key-file={}", path(&ours.server_key)),
        format!("--trusted-ca-file={}", path(&ours.ca)),
        "--client-cert-auth".to_string(),
    ];
    let mut etcd = TestEtcd::start(dir.path(), "https", &args).unwrap();
    let plain = etcd.connect();
    let connect = |ca: &PathBuf, cert: Option<&PathBuf>, key: Option<&PathBuf>| {
        let mut c = plain.clone();
        c.files.ca_file = Some(ca.clone());
        c.files.cert_file = cert.cloned();
        c.files.key_file = key.cloned();
        c
    };
    let good = Client::new(
        &connect(&ours.ca, Some(&ours.client_cert), Some(&ours.client_key)),
        TIMEOUT,
    )
    .unwrap();
    etcd.wait_until_up(&good).unwrap();
    append_and_read_back(&good, "/onepipe/tls/controller", &[tick(1), tick(2)]);

    // etcd refuses a client's certificate after the client has sent its own Finished (TLS
    // 1.3): the client then hears etcd's alert, or finds the connection closed under it.
    let refused = |name: &str, c: Connect| {
        let client = Client::new(&c, TIMEOUT).unwrap();
        let e = client.range(&RangeRequest::key(b"/onepipe/x")).unwrap_err();
        assert!(
            matches!(e, EtcdError::Tls { .. } | EtcdError::Unreachable { .. }),
            "{name}: {e:?}"
        );
        eprintln!("{name}: {e}");
        e
    };
    refused("without a client certificate", connect(&ours.ca, None, None));
    refused(
        "with another CA's client certificate",
        connect(&ours.ca, Some(&theirs.client_cert), Some(&theirs.client_key)),
    );
    let e = refused(
        "trusting another CA",
        connect(&theirs.ca, Some(&ours.client_cert), Some(&ours.client_key)),
    );
    // This one the client decides itself.
    assert!(
        matches!(e, EtcdError::Tls { .. }) && e.to_string().contains("UnknownIssuer"),
        "{e}"
    );
    let mut public_roots = connect(&ours.ca, Some(&ours.client_cert), Some(&ours.client_key));
    public_roots.files.ca_file = None;
    let e = refused("trusting the public web's CAs", public_roots);
    assert!(matches!(e, EtcdError::Tls { .. }), "{e:?}");

    std::fs::set_permissions(&ours.client_key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let e = Client::new(
        &connect(&ours.ca, Some(&ours.client_cert), Some(&ours.client_key)),
        TIMEOUT,
    )
    .unwrap_err();
    assert!(
        matches!(
            e,
            EtcdError::BadFile {
                what: "client key",
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains(&path(&ours.client_key)), "{e}");
}
