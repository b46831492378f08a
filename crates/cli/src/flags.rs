//! Flag groups that several commands share (`#[command(flatten)]`), so that one concept has one
//! flag, one spelling and one meaning everywhere. Where commands differ only in a default, the
//! flag is optional and each command says its own default in its help.

use crate::demo::RuntimeKind;
use clap::Args;
use onepipe_etcd::Connect;
use onepipe_fabric::{EtcdFiles, Topology};
use onepipe_runtime::udp::auth::Auth;
use std::path::PathBuf;

/// `--json`.
#[derive(Args, Clone, Copy, Debug)]
pub struct JsonFlag {
    /// Print one JSON object instead of tables or a summary
    #[arg(long)]
    pub json: bool,
}

/// `--seed`.
#[derive(Args, Clone, Copy, Debug)]
pub struct SeedFlag {
    /// Seed of every random draw of the run (workload, clocks, faults)
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// `--message-bytes`.
#[derive(Args, Clone, Copy, Debug)]
pub struct MessageBytesFlag {
    /// Payload of each message, in bytes
    #[arg(long, default_value_t = 64, value_parser = crate::bounds::int::<usize>(0..=crate::bounds::MESSAGE_BYTES_MAX))]
    pub message_bytes: usize,
}

/// `--dead-after-intervals` (formerly `--dead-after-beacons`, still accepted): the name of
/// the configuration field it sets everywhere (`dead_after_intervals`).
#[derive(Args, Clone, Copy, Debug)]
pub struct DeadAfterFlag {
    /// An input link silent for this many beacon intervals is removed. [default: the
    /// command's own: 500 for `demo` (the paper uses 10 at 3 us with a core per switch; here
    /// switches share two cores and a worker can be descheduled for milliseconds), 1000 over
    /// udp (`up`, `switch`, `controller`: 0.5 s), 10 in `sim`]
    #[arg(long, alias = "dead-after-beacons", value_name = "INTERVALS", value_parser = crate::bounds::int::<u32>(1..=crate::bounds::INTERVALS_MAX))]
    pub dead_after_intervals: Option<u32>,
}

/// How a udp fabric's datagrams are authenticated: `--key-file` and `--insecure-no-auth`
/// (`up`, `switch`, `controller`; docs/udp.md, "Authentication").
#[derive(Args, Clone, Debug)]
pub struct KeyFlags {
    /// The fabric's key file [default: $ONEPIPE_KEY_FILE, else the topology's `key_file`, else
    /// a key made for the topology in this user's private directory]
    #[arg(long, value_name = "FILE")]
    pub key_file: Option<PathBuf>,
    /// Send and take datagrams without authentication: anyone who can send to the fabric's
    /// addresses can then forge its traffic (barriers, acknowledgements, controller orders)
    #[arg(long, conflicts_with = "key_file")]
    pub insecure_no_auth: bool,
}

impl KeyFlags {
    /// The fabric's keys (made if none is named and none was made before), or none if asked.
    pub fn auth(&self, topology: &Topology) -> Result<Auth, String> {
        onepipe::keys::fabric_auth(topology, self.key_file.as_deref(), self.insecure_no_auth)
            .map_err(|e| e.to_string())
    }

    /// Names the key file these flags resolve to, so that processes started with them read
    /// that file whatever their environment.
    pub fn pin(&mut self, topology: &Topology) {
        if !self.insecure_no_auth {
            self.key_file = Some(onepipe::keys::key_source(topology, self.key_file.as_deref()).path);
        }
    }

    pub fn to_cli(&self) -> Vec<String> {
        let mut v = Vec::new();
        if let Some(path) = &self.key_file {
            v.push(format!("--key-file={}", path.display()));
        }
        if self.insecure_no_auth {
            v.push("--insecure-no-auth".into());
        }
        v
    }
}

/// How the controller's replicas reach a secured etcd: `--etcd-ca-file`, `--etcd-cert-file`,
/// `--etcd-key-file`, `--etcd-user-file` (`controller`, `up`; docs/udp.md, "Securing etcd").
#[derive(Args, Clone, Debug, Default)]
pub struct EtcdFlags {
    /// The CA that signed etcd's certificate (PEM), for an https:// etcd [default: the
    /// topology's `etcd_ca_file`, else the public web's CAs]
    #[arg(long, value_name = "FILE")]
    pub etcd_ca_file: Option<PathBuf>,
    /// This client's certificate (PEM), for an etcd that asks for one (--client-cert-auth)
    /// [default: the topology's `etcd_cert_file`]
    #[arg(long, value_name = "FILE", requires = "etcd_key_file")]
    pub etcd_cert_file: Option<PathBuf>,
    /// This client's private key (PEM, mode 600) [default: the topology's `etcd_key_file`]
    #[arg(long, value_name = "FILE", requires = "etcd_cert_file")]
    pub etcd_key_file: Option<PathBuf>,
    /// etcd's user and password, for an etcd with authentication on: a TOML file of mode 600,
    /// `user = "NAME"` and `password = "SECRET"` [default: $ONEPIPE_ETCD_USER_FILE, else the
    /// topology's `etcd_user_file`]
    #[arg(long, value_name = "FILE")]
    pub etcd_user_file: Option<PathBuf>,
}

impl EtcdFlags {
    fn given(&self) -> EtcdFiles {
        EtcdFiles {
            ca_file: self.etcd_ca_file.clone(),
            cert_file: self.etcd_cert_file.clone(),
            key_file: self.etcd_key_file.clone(),
            user_file: self.etcd_user_file.clone(),
        }
    }

    /// How to reach etcd at `endpoint`, or an error if these flags name files and there is no
    /// etcd.
    pub fn connect(&self, endpoint: Option<&str>, topology: &Topology) -> Result<Option<Connect>, String> {
        let given = self.given();
        let Some(endpoint) = endpoint else {
            return match given.is_empty() {
                true => Ok(None),
                false => Err(
                    "the --etcd-*-file flags need etcd: `etcd` in the topology's [controller] (or, for \
                              `onepipe controller`, --etcd URL)"
                        .into(),
                ),
            };
        };
        let table = topology
            .controller
            .as_ref()
            .map(|c| c.etcd_files.clone())
            .unwrap_or_default();
        Ok(Some(Connect::resolve(endpoint, &given, &table)))
    }

    /// The flags that name each file of `files`, so that a process started with them reads
    /// those files whatever its environment.
    pub fn to_cli(files: &EtcdFiles) -> Vec<String> {
        let flag =
            |name: &str, path: &Option<PathBuf>| path.as_ref().map(|p| format!("--{name}={}", p.display()));
        [
            flag("etcd-ca-file", &files.ca_file),
            flag("etcd-cert-file", &files.cert_file),
            flag("etcd-key-file", &files.key_file),
            flag("etcd-user-file", &files.user_file),
        ]
        .into_iter()
        .flatten()
        .collect()
    }
}

/// How 1Pipe's hosts keep barriers moving on a real runtime: `--beacon-interval-us` and
/// `--promise-lead-us` (`demo`, `bench fig8`).
#[derive(Args, Clone, Copy, Debug)]
pub struct BarrierFlags {
    /// How often hosts and idle links send beacons, and the Lamport baseline's exchange
    /// interval [default: each runtime's own: 50 inproc, 500 udp (`onepipe up`'s)]
    #[arg(long, value_parser = crate::bounds::float(0.0, crate::bounds::MICROS_MAX))]
    pub beacon_interval_us: Option<f64>,
    /// Hosts promise their barrier this far ahead of their clock at the end of each visit of
    /// their thread; 0 turns promises off (docs/ordering.md, "Promises") [default: each
    /// runtime's own: off inproc, 5000 udp]
    #[arg(long, value_parser = crate::bounds::float(0.0, crate::bounds::MICROS_MAX))]
    pub promise_lead_us: Option<f64>,
}

/// Which runtime runs a demo or a benchmark, and the udp runtime's knobs (`demo`,
/// `bench fig8`).
#[derive(Args, Clone, Copy, Debug)]
pub struct RuntimeFlags {
    /// inproc: every link a ring in memory on a worker pool; udp: every node on a thread with
    /// its own UDP socket on loopback (link faults and rates then do not apply)
    #[arg(long, value_enum, default_value_t = RuntimeKind::Inproc)]
    pub runtime: RuntimeKind,
    /// udp runtime: largest datagram, header included
    #[arg(long, default_value_t = 8_972, value_parser = crate::bounds::int::<usize>(64..=onepipe_runtime::udp::DATAGRAM_BYTES_LIMIT as u64))]
    pub datagram_bytes: usize,
    /// udp runtime: OS threads that run the nodes, each node keeping its own socket; 0 is a
    /// thread per node, as `onepipe up` runs them [default: one per core]
    #[arg(long, value_parser = crate::bounds::int::<usize>(0..=crate::bounds::THREADS_MAX))]
    pub udp_threads: Option<usize>,
    /// udp runtime: most datagrams in flight on a link (its credit window, at least 2)
    #[arg(long, default_value_t = 16, value_parser = crate::bounds::int::<usize>(2..=crate::bounds::PACKETS_MAX))]
    pub udp_window_datagrams: usize,
    /// udp runtime: datagrams without authentication (by default each carries a tag under a
    /// key made for the run; docs/udp.md, "Authentication")
    #[arg(long)]
    pub insecure_no_auth: bool,
}

/// Which fabric a run builds: `--topology`, `--topology-file`, `--processes-per-host`
/// (`demo`, `sim`).
#[derive(Args, Clone, Debug)]
pub struct TopologyFlags {
    /// Topology preset (testbed, single:HOSTS, leaf-spine:L,S,H, three-layer:P,T,S,C,H, fat-tree:K)
    #[arg(long, default_value = "testbed", conflicts_with = "topology_file")]
    pub topology: String,
    /// Topology from a TOML file (docs/topology.md)
    #[arg(long, value_name = "FILE")]
    pub topology_file: Option<PathBuf>,
    #[arg(long, default_value_t = 1, value_parser = crate::bounds::int::<u32>(1..=onepipe_fabric::limits::PROCESSES_PER_HOST_MAX as u64))]
    pub processes_per_host: u32,
}

impl TopologyFlags {
    /// The topology asked for: the file if given, else the preset.
    pub fn load(&self) -> Result<Topology, String> {
        match &self.topology_file {
            Some(path) => Topology::from_file(path),
            None => Topology::preset(&self.topology),
        }
        .map_err(|e| e.to_string())
    }
}

/// `--time-ahead-max-ms` (`demo`, `sim`, `switch`, `controller`, `up`; the examples' processes
/// take the same flag): how far ahead of a node's clock a barrier or timestamp may be.
#[derive(Args, Clone, Copy, Debug)]
pub struct TimeAheadFlag {
    /// A barrier or message timestamp further ahead of a switch's or process's clock than this,
    /// beyond the hosts' promise lead, is refused, counted and reported to the controller: the
    /// fabric's clock skew bound plus a margin (docs/ordering.md, "Implausible time")
    #[arg(long, value_name = "MS", default_value_t = TIME_AHEAD_MAX_MS, value_parser = crate::bounds::float(0.0, TIME_AHEAD_MAX_MS_MAX))]
    pub time_ahead_max_ms: f64,
}

/// The default `--time-ahead-max-ms` ([`onepipe_proto::plausible::TIME_AHEAD_MAX`]).
const TIME_AHEAD_MAX_MS: f64 = onepipe_proto::plausible::TIME_AHEAD_MAX.as_nanos() as f64 / 1e6;

/// The most `--time-ahead-max-ms` may say: half the 48-bit wire clock's range, past which a
/// timestamp ahead cannot be told from one behind.
const TIME_AHEAD_MAX_MS_MAX: f64 = (1u64 << 47) as f64 / 1e6;

impl TimeAheadFlag {
    pub fn duration(self) -> Result<onepipe_wire::Duration, String> {
        let ms = self.time_ahead_max_ms;
        if !(ms.is_finite() && (0.0..=TIME_AHEAD_MAX_MS_MAX).contains(&ms)) {
            return Err(format!(
                "--time-ahead-max-ms must be between 0 and {TIME_AHEAD_MAX_MS_MAX} (half the wire clock's range)"
            ));
        }
        Ok(onepipe_wire::Duration::from_nanos((ms * 1e6).round() as u64))
    }

    pub fn to_cli(self) -> String {
        format!("--time-ahead-max-ms={}", self.time_ahead_max_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Etcd {
        #[command(flatten)]
        etcd: EtcdFlags,
    }

    /// `onepipe up` finds the files once and names them to every replica it starts.
    #[test]
    fn etcd_files_reach_a_child_replica_unchanged() {
        let files = EtcdFiles {
            ca_file: Some("/a/ca.pem".into()),
            cert_file: Some("rel/cert.pem".into()),
            key_file: Some("/a/key with space.pem".into()),
            user_file: Some("/a/user".into()),
        };
        let args = EtcdFlags::to_cli(&files);
        let parsed = Etcd::try_parse_from(std::iter::once("onepipe".to_string()).chain(args)).unwrap();
        assert_eq!(parsed.etcd.given(), files);
        assert!(EtcdFlags::to_cli(&EtcdFiles::default()).is_empty());
        let t = Topology::preset("single:2").unwrap();
        assert_eq!(
            parsed.etcd.connect(None, &t).unwrap_err().split(':').next(),
            Some("the --etcd-*-file flags need etcd")
        );
        assert_eq!(EtcdFlags::default().connect(None, &t), Ok(None));
    }
}

/// Where a Redis-protocol server listens.
#[derive(Args, Debug)]
pub struct ListenFlags {
    /// TCP port to listen on (0: any free port, printed)
    #[arg(long, default_value_t = 6379, value_parser = crate::bounds::int::<u16>(0..=65535))]
    pub port: u16,
    /// Address to listen on
    #[arg(long, default_value = "127.0.0.1")]
    pub bind: std::net::IpAddr,
}

impl ListenFlags {
    pub fn listener(&self) -> Result<std::net::TcpListener, String> {
        std::net::TcpListener::bind((self.bind, self.port))
            .map_err(|e| format!("cannot listen on {}:{}: {e}", self.bind, self.port))
    }
}

/// A `--fail` spec `WHAT:N@TIME` (like `host:3@1s`): N, and TIME after the start.
pub(crate) fn parse_fail_spec(spec: &str, what: &str) -> Result<(u32, onepipe_wire::Duration), String> {
    let bad = || format!("--fail `{spec}`: expected {what}:N@TIME, like {what}:1@1s");
    let (target, when) = spec.split_once('@').ok_or_else(bad)?;
    let n: u32 = target
        .strip_prefix(what)
        .and_then(|t| t.strip_prefix(':'))
        .ok_or_else(bad)?
        .parse()
        .map_err(|_| bad())?;
    let at = onepipe_sim::config::parse_time(when).map_err(|e| format!("--fail `{spec}`: {e}"))?;
    Ok((n, at))
}

/// Where barriers are aggregated (paper 6.2; docs/incarnations.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum IncarnationKind {
    /// A programmable chip: every switch stamps every packet it forwards
    Chip,
    /// Switch CPUs: switches only forward; a CPU agent per switch aggregates beacons
    Cpu,
    /// Host representatives (paper 6.2.3): switches that only route, a host per switch
    /// aggregating its beacons
    Host,
}

/// `--incarnation` and `--cpu-delay-us`.
#[derive(Args, Clone, Copy, Debug)]
pub struct IncarnationFlags {
    /// Where barriers are aggregated (paper 6.2)
    #[arg(long, value_enum, default_value = "chip")]
    pub incarnation: IncarnationKind,
    /// With --incarnation cpu: how long a switch CPU takes to handle a beacon punted to it (the
    /// paper gives no figure for a kernel path; 5 us is an assumption, docs/incarnations.md)
    #[arg(long, default_value_t = 5.0, value_parser = crate::bounds::float(0.0, crate::bounds::MICROS_MAX))]
    pub cpu_delay_us: f64,
}

impl IncarnationFlags {
    pub fn incarnation(&self) -> onepipe_proto::Incarnation {
        match self.incarnation {
            IncarnationKind::Chip => onepipe_proto::Incarnation::Chip,
            IncarnationKind::Cpu => onepipe_proto::Incarnation::SwitchCpu {
                delay: crate::demo::us(self.cpu_delay_us),
            },
            IncarnationKind::Host => onepipe_proto::Incarnation::Host,
        }
    }
}
