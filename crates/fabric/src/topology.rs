//! Topologies: switches in layers, hosts under top-of-rack switches, links between adjacent
//! layers (paper section 3.1: multi-rooted trees, whose up/down routes form a DAG).
//!
//! Built from presets or from a TOML file; every way in goes through [`Topology::validate`], so
//! the rest of the code can rely on: unique names, hosts attached to layer-1 switches, links only
//! between adjacent layers, one connected fabric.

use crate::limits::{FILE_BYTES_MAX, limit, limit_counts, limit_delay, limit_name, mul};
use serde::Deserialize;
use std::collections::{HashMap, HashSet, VecDeque};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// Index into [`Topology::switches`].
pub type SwitchIndex = usize;
/// Index into [`Topology::hosts`].
pub type HostIndex = usize;

/// Default one-way delay of a link, in nanoseconds, when a file names none.
pub const LINK_DELAY_NS_DEFAULT: u64 = 0;
/// Ports of one switch are numbered in 16 bits on the wire.
pub const PORTS_PER_SWITCH_MAX: usize = u16::MAX as usize;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SwitchSpec {
    pub name: String,
    /// 1 for top-of-rack switches, one more per layer above.
    pub layer: u8,
    /// Where the switch listens in the udp runtime; `None` takes the default plan
    /// (`onepipe_runtime::udp::AddressPlan`).
    pub addr: Option<SocketAddr>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostSpec {
    pub name: String,
    /// The top-of-rack switch the host hangs under.
    pub tor: SwitchIndex,
    pub delay_ns: u64,
    /// Where the host's first process listens in the udp runtime; process `k` of the host
    /// takes the port `k` above it. `None` takes the default plan.
    pub addr: Option<SocketAddr>,
}

/// A full-duplex link between switches of adjacent layers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkSpec {
    pub lower: SwitchIndex,
    pub upper: SwitchIndex,
    pub delay_ns: u64,
}

/// The controller of the failure procedure (paper 5.2, 6.1) as a udp service
/// (`onepipe controller`): with one named, every switch and process of the udp runtime reports
/// to it over a management port of its own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControllerSpec {
    /// Where the controller listens; `None` takes the default plan
    /// (`onepipe_runtime::udp::AddressPlan`).
    pub addr: Option<SocketAddr>,
    /// The etcd endpoint (`http://HOST:PORT`, or `https://HOST:PORT` over TLS) that keeps the
    /// controller's log and elects the active replica; `None` keeps the log in a file or in
    /// memory.
    pub etcd: Option<String>,
    /// The files that let a replica into a secured etcd (`etcd_ca_file`, ...; relative to the
    /// topology file); only with `etcd`.
    pub etcd_files: EtcdFiles,
    /// How many controller replicas `onepipe up` starts: one is active, the others stand by
    /// (more than one needs `etcd`).
    pub replicas: u32,
}

/// The files a client of a secured etcd reads (docs/udp.md, "Securing etcd"): for TLS, the CA
/// that signed etcd's certificate and this client's certificate and key (PEM); for etcd's
/// authentication, a credentials file with a user name and password. All optional.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EtcdFiles {
    pub ca_file: Option<PathBuf>,
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
    pub user_file: Option<PathBuf>,
}

impl EtcdFiles {
    pub fn is_empty(&self) -> bool {
        *self == EtcdFiles::default()
    }

    /// Each path made relative to `dir` (an absolute one stays).
    fn relative_to(self, dir: &Path) -> EtcdFiles {
        let join = |p: Option<PathBuf>| p.map(|p| dir.join(p));
        EtcdFiles {
            ca_file: join(self.ca_file),
            cert_file: join(self.cert_file),
            key_file: join(self.key_file),
            user_file: join(self.user_file),
        }
    }
}

/// More replicas than this is a typo, not a deployment.
pub const CONTROLLER_REPLICAS_MAX: u32 = 9;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    pub name: String,
    pub switches: Vec<SwitchSpec>,
    pub hosts: Vec<HostSpec>,
    pub links: Vec<LinkSpec>,
    /// Files with a `[controller]` table; presets have none.
    pub controller: Option<ControllerSpec>,
    /// The fabric's key file (`key_file = "..."`, relative to the topology file): the keys
    /// that authenticate every udp datagram (docs/udp.md, "Authentication"). `None`: the
    /// environment's `ONEPIPE_KEY_FILE`, or a key made for the topology.
    pub key_file: Option<std::path::PathBuf>,
    /// `switch_cpu_delay_us = D`: the switches aggregate barriers on their CPUs, each beacon
    /// taken D us after it arrived (1Pipe's switch-CPU incarnation, docs/incarnations.md). In
    /// the file, so that every switch and process of a fabric agrees: processes must not take
    /// barriers from data packets that switch CPUs do not stamp. `None`: switching chips.
    pub switch_cpu_delay_ns: Option<u64>,
}

/// What is wrong with a topology; each names the offending element.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TopologyError {
    #[error("cannot read topology file {path}: {reason}")]
    Io { path: String, reason: String },
    #[error("invalid topology file: {0}")]
    Syntax(String),
    #[error("topology has no switches")]
    NoSwitches,
    #[error("topology has no hosts")]
    NoHosts,
    #[error("name `{0}` is used twice")]
    DuplicateName(String),
    #[error("{context} names unknown node `{name}`")]
    UnknownNode { context: String, name: String },
    #[error("link {a}-{b} connects a node to itself")]
    SelfLink { a: String, b: String },
    #[error("link {a}-{b} is listed twice")]
    DuplicateLink { a: String, b: String },
    #[error("link {a}-{b} must connect two switches (hosts attach with `switch = ...`)")]
    LinkToHost { a: String, b: String },
    #[error("switch `{0}` has no path to any host")]
    Disconnected(String),
    #[error(
        "link {a}-{b} joins layers {layer_a} and {layer_b}; up/down routing needs links between adjacent layers"
    )]
    LayerSkip {
        a: String,
        b: String,
        layer_a: u8,
        layer_b: u8,
    },
    #[error("switch `{name}` is declared layer {declared} but sits at layer {derived}")]
    LayerMismatch { name: String, declared: u8, derived: u8 },
    #[error("switch `{name}` has {ports} ports; at most {max} are supported")]
    TooManyPorts { name: String, ports: usize, max: usize },
    #[error("{what}: {count}, more than the limit of {max} (docs/topology.md)")]
    TooLarge { what: String, count: u64, max: u64 },
    #[error("preset `{0}`: {1}")]
    BadPreset(String, String),
    #[error("[controller]: {0}")]
    BadController(String),
    #[error("`{name}` has address `{addr}`, which is not IP:PORT ({reason})")]
    BadAddress {
        name: String,
        addr: String,
        reason: String,
    },
}

fn parse_addr(name: &str, addr: Option<&str>) -> Result<Option<SocketAddr>, TopologyError> {
    addr.map(|a| {
        a.parse()
            .map_err(|e: std::net::AddrParseError| TopologyError::BadAddress {
                name: name.to_string(),
                addr: a.to_string(),
                reason: e.to_string(),
            })
    })
    .transpose()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileTopology {
    name: Option<String>,
    link_delay_ns: Option<u64>,
    #[serde(default)]
    switch: Vec<FileSwitch>,
    #[serde(default)]
    host: Vec<FileHost>,
    #[serde(default)]
    link: Vec<FileLink>,
    controller: Option<FileController>,
    key_file: Option<String>,
    switch_cpu_delay_us: Option<f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileController {
    addr: Option<String>,
    etcd: Option<String>,
    replicas: Option<u32>,
    etcd_ca_file: Option<PathBuf>,
    etcd_cert_file: Option<PathBuf>,
    etcd_key_file: Option<PathBuf>,
    etcd_user_file: Option<PathBuf>,
}

impl FileTopology {
    /// Every limit a file can break, before anything is built from it: `hosts = N` of a
    /// switch would otherwise make N hosts before any check.
    fn check_limits(&self) -> Result<(), TopologyError> {
        let shorthand = self
            .switch
            .iter()
            .map(|s| s.hosts.unwrap_or(0) as u128)
            .fold(0u128, u128::saturating_add);
        let hosts = shorthand.saturating_add(self.host.len() as u128);
        limit_counts(self.switch.len() as u128, hosts, self.link.len() as u128)?;
        limit_delay("link_delay_ns", self.link_delay_ns)?;
        for s in &self.switch {
            limit_name(&s.name)?;
            let what = format!("hosts under switch `{}`", s.name);
            limit(&what, s.hosts.unwrap_or(0) as u128, PORTS_PER_SWITCH_MAX as u64)?;
        }
        for h in &self.host {
            limit_name(&h.name)?;
            limit_delay(&format!("delay_ns of host `{}`", h.name), h.delay_ns)?;
        }
        for l in &self.link {
            let [a, b] = &l.between;
            limit_delay(&format!("delay_ns of link {a}-{b}"), l.delay_ns)?;
        }
        Ok(())
    }
}

impl FileController {
    fn spec(self) -> Result<ControllerSpec, TopologyError> {
        let bad = |why: String| Err(TopologyError::BadController(why));
        let replicas = self.replicas.unwrap_or(1);
        if replicas == 0 || replicas > CONTROLLER_REPLICAS_MAX {
            return bad(format!(
                "replicas = {replicas}: expected 1 to {CONTROLLER_REPLICAS_MAX}"
            ));
        }
        if let Some(url) = &self.etcd
            && !["http://", "https://"]
                .iter()
                .any(|scheme| url.strip_prefix(scheme).is_some_and(|host| !host.is_empty()))
        {
            return bad(format!(
                "etcd = \"{url}\": expected http://HOST:PORT or https://HOST:PORT (etcd's v3 gateway)"
            ));
        }
        let etcd_files = EtcdFiles {
            ca_file: self.etcd_ca_file,
            cert_file: self.etcd_cert_file,
            key_file: self.etcd_key_file,
            user_file: self.etcd_user_file,
        };
        if self.etcd.is_none() && !etcd_files.is_empty() {
            return bad("etcd_ca_file, etcd_cert_file, etcd_key_file and etcd_user_file need etcd".into());
        }
        if replicas > 1 && self.etcd.is_none() {
            return bad(format!(
                "replicas = {replicas} needs etcd = \"http://HOST:PORT\": the replicas share their log \
                 and elect the active one through etcd"
            ));
        }
        Ok(ControllerSpec {
            addr: parse_addr("controller", self.addr.as_deref())?,
            etcd: self.etcd,
            etcd_files,
            replicas,
        })
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileSwitch {
    name: String,
    layer: Option<u8>,
    /// Shorthand: this many hosts named `<switch>-h<i>` under this switch.
    hosts: Option<usize>,
    addr: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileHost {
    name: String,
    switch: String,
    delay_ns: Option<u64>,
    addr: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileLink {
    between: [String; 2],
    delay_ns: Option<u64>,
}

impl Topology {
    /// One switch with `hosts` hosts.
    pub fn single_switch(hosts: usize) -> Result<Topology, TopologyError> {
        Topology::leaf_spine(1, 0, hosts).map(|mut t| {
            t.name = format!("single-switch:{hosts}");
            t
        })
    }

    /// Two layers: every leaf connects to every spine.
    pub fn leaf_spine(
        leaves: usize,
        spines: usize,
        hosts_per_leaf: usize,
    ) -> Result<Topology, TopologyError> {
        limit_counts(
            (leaves as u128).saturating_add(spines as u128),
            mul(leaves, hosts_per_leaf),
            mul(leaves, spines),
        )?;
        let mut b = Builder::new(format!("leaf-spine:{leaves},{spines},{hosts_per_leaf}"));
        let leaf: Vec<_> = (0..leaves).map(|i| b.switch(format!("leaf{i}"), 1)).collect();
        let spine: Vec<_> = (0..spines).map(|i| b.switch(format!("spine{i}"), 2)).collect();
        for &l in &leaf {
            b.hosts(l, hosts_per_leaf);
            for &s in &spine {
                b.link(l, s);
            }
        }
        b.finish()
    }

    /// Three layers: `pods` pods of `tors_per_pod` ToRs fully connected to `spines_per_pod`
    /// spines; every spine connects to every one of `cores` core switches.
    pub fn three_layer(
        pods: usize,
        tors_per_pod: usize,
        spines_per_pod: usize,
        cores: usize,
        hosts_per_tor: usize,
    ) -> Result<Topology, TopologyError> {
        let per_pod = (tors_per_pod as u128).saturating_add(spines_per_pod as u128);
        let links_per_pod = mul(tors_per_pod, spines_per_pod).saturating_add(mul(spines_per_pod, cores));
        limit_counts(
            (pods as u128)
                .saturating_mul(per_pod)
                .saturating_add(cores as u128),
            mul(pods, tors_per_pod).saturating_mul(hosts_per_tor as u128),
            (pods as u128).saturating_mul(links_per_pod),
        )?;
        let mut b = Builder::new(format!(
            "three-layer:{pods},{tors_per_pod},{spines_per_pod},{cores},{hosts_per_tor}"
        ));
        let core: Vec<_> = (0..cores).map(|i| b.switch(format!("core{i}"), 3)).collect();
        for p in 0..pods {
            let spines: Vec<_> = (0..spines_per_pod)
                .map(|i| b.switch(format!("spine{p}.{i}"), 2))
                .collect();
            for t in 0..tors_per_pod {
                let tor = b.switch(format!("tor{p}.{t}"), 1);
                b.hosts(tor, hosts_per_tor);
                for &s in &spines {
                    b.link(tor, s);
                }
            }
            for &s in &spines {
                for &c in &core {
                    b.link(s, c);
                }
            }
        }
        b.finish()
    }

    /// The paper's testbed (section 7.1): a 3-layer fat-tree of 4 ToRs, 4 spines and 2 cores
    /// with 32 hosts, 8 per rack.
    pub fn paper_testbed() -> Topology {
        let mut t = Topology::three_layer(2, 2, 2, 2, 8).expect("testbed preset is valid");
        t.name = "testbed".into();
        t
    }

    /// NetChain's testbed (paper 002, Fig. 8 and section 7): four switches S0-S3 and the four
    /// servers H0-H3, all under S0; S0 links to S1 and S3, which both link to S2. Chains of
    /// three switches ([S0, S1, S2] among others) and the paper's failure of S1, replaced by
    /// S3. A fifth host under S0, `s0-h4`, is for the controller.
    pub fn netchain_testbed() -> Topology {
        let mut b = Builder::new("netchain-testbed".into());
        let s0 = b.switch("s0".into(), 1);
        let s1 = b.switch("s1".into(), 2);
        let s2 = b.switch("s2".into(), 3);
        let s3 = b.switch("s3".into(), 2);
        b.hosts(s0, 5);
        b.link(s0, s1);
        b.link(s0, s3);
        b.link(s1, s2);
        b.link(s3, s2);
        b.finish().expect("netchain testbed preset is valid")
    }

    /// In-network Paxos's testbed (thesis Fig. 5.1, with the coordinator apart from the ToR so
    /// that it can fail alone): the ToR s0 with `hosts` hosts, and above it the coordinator
    /// switch s1 and the acceptor switches s2, s3, s4, each linked to s0 only.
    pub fn paxos_testbed(hosts: usize) -> Topology {
        let mut b = Builder::new(format!("paxos-testbed:{hosts}"));
        let tor = b.switch("s0".into(), 1);
        let coordinator = b.switch("s1".into(), 2);
        let acceptors: Vec<_> = (2..5).map(|i| b.switch(format!("s{i}"), 2)).collect();
        b.hosts(tor, hosts);
        b.link(tor, coordinator);
        for &a in &acceptors {
            b.link(tor, a);
        }
        b.finish().expect("paxos testbed preset is valid")
    }

    /// The classic k-ary fat-tree: k pods of k/2 ToRs and k/2 aggregation switches, (k/2)^2
    /// cores, k/2 hosts per ToR (k^3/4 hosts). Aggregation switch j of a pod connects to cores
    /// j*k/2 .. (j+1)*k/2.
    pub fn fat_tree(k: usize) -> Result<Topology, TopologyError> {
        if k < 2 || k % 2 != 0 {
            return Err(TopologyError::BadPreset(
                format!("fat-tree:{k}"),
                "k must be even and >= 2".into(),
            ));
        }
        let half = k / 2;
        limit_counts(
            mul(half, half).saturating_add(mul(k, k)),
            mul(k, half).saturating_mul(half as u128),
            mul(k, half).saturating_mul(k as u128),
        )?;
        let mut b = Builder::new(format!("fat-tree:{k}"));
        let core: Vec<_> = (0..half * half)
            .map(|i| b.switch(format!("core{i}"), 3))
            .collect();
        for p in 0..k {
            let aggs: Vec<_> = (0..half).map(|i| b.switch(format!("agg{p}.{i}"), 2)).collect();
            for t in 0..half {
                let tor = b.switch(format!("tor{p}.{t}"), 1);
                b.hosts(tor, half);
                for &a in &aggs {
                    b.link(tor, a);
                }
            }
            for (j, &a) in aggs.iter().enumerate() {
                for &c in &core[j * half..(j + 1) * half] {
                    b.link(a, c);
                }
            }
        }
        b.finish()
    }

    /// Parses a preset name: `single:N`, `leaf-spine:LEAVES,SPINES,HOSTS_PER_LEAF`, `testbed`,
    /// `netchain-testbed`,
    /// `three-layer:PODS,TORS,SPINES,CORES,HOSTS`, `fat-tree:K`.
    pub fn preset(spec: &str) -> Result<Topology, TopologyError> {
        let (kind, args) = spec.split_once(':').unwrap_or((spec, ""));
        let nums: Result<Vec<usize>, _> = args
            .split(',')
            .filter(|s| !s.is_empty())
            .map(|s| s.trim().parse::<usize>())
            .collect();
        let bad = |why: &str| TopologyError::BadPreset(spec.to_string(), why.to_string());
        let nums = nums.map_err(|_| bad("arguments must be non-negative integers"))?;
        match (kind, nums.as_slice()) {
            ("testbed", []) => Ok(Topology::paper_testbed()),
            ("netchain-testbed", []) => Ok(Topology::netchain_testbed()),
            ("paxos-testbed", [h]) if (1..=4096).contains(h) => Ok(Topology::paxos_testbed(*h)),
            ("single", [h]) => Topology::single_switch(*h),
            ("leaf-spine", [l, s, h]) => Topology::leaf_spine(*l, *s, *h),
            ("three-layer", [p, t, s, c, h]) => Topology::three_layer(*p, *t, *s, *c, *h),
            ("fat-tree", [k]) => Topology::fat_tree(*k),
            _ => Err(bad(
                "expected testbed | netchain-testbed | paxos-testbed:HOSTS | single:HOSTS | leaf-spine:LEAVES,SPINES,HOSTS_PER_LEAF | \
                 three-layer:PODS,TORS_PER_POD,SPINES_PER_POD,CORES,HOSTS_PER_TOR | fat-tree:K",
            )),
        }
    }

    pub fn from_file(path: &Path) -> Result<Topology, TopologyError> {
        let io = |e: std::io::Error| TopologyError::Io {
            path: path.display().to_string(),
            reason: e.to_string(),
        };
        let bytes = std::fs::metadata(path).map_err(io)?.len();
        limit("bytes in the topology file", u128::from(bytes), FILE_BYTES_MAX)?;
        let text = std::fs::read_to_string(path).map_err(io)?;
        let mut t = Topology::from_toml(&text)?;
        // A key file named in the topology is found from the topology file, wherever the
        // command runs.
        if let (Some(key), Some(dir)) = (&t.key_file, path.parent()) {
            t.key_file = Some(dir.join(key));
        }
        if let (Some(c), Some(dir)) = (&mut t.controller, path.parent()) {
            c.etcd_files = std::mem::take(&mut c.etcd_files).relative_to(dir);
        }
        Ok(t)
    }

    /// Parses and validates a TOML topology (format in docs/topology.md).
    pub fn from_toml(text: &str) -> Result<Topology, TopologyError> {
        let file: FileTopology = toml::from_str(text).map_err(|e| TopologyError::Syntax(e.to_string()))?;
        file.check_limits()?;
        let default_delay_ns = file.link_delay_ns.unwrap_or(LINK_DELAY_NS_DEFAULT);
        let mut names: HashMap<String, Named> = HashMap::new();
        let mut switches = Vec::new();
        let mut declared_layers = Vec::new();
        for s in &file.switch {
            claim(&mut names, &s.name, Named::Switch(switches.len()))?;
            switches.push(SwitchSpec {
                name: s.name.clone(),
                layer: 0,
                addr: parse_addr(&s.name, s.addr.as_deref())?,
            });
            declared_layers.push(s.layer);
        }
        let mut hosts = Vec::new();
        for (i, s) in file.switch.iter().enumerate() {
            // Checked before the hosts are made: a count from the file must not size an
            // allocation (or a loop) past what a switch can have.
            let count = s.hosts.unwrap_or(0);
            if count > PORTS_PER_SWITCH_MAX {
                return Err(TopologyError::TooManyPorts {
                    name: s.name.clone(),
                    ports: count,
                    max: PORTS_PER_SWITCH_MAX,
                });
            }
            for h in 0..count {
                let name = format!("{}-h{h}", s.name);
                claim(&mut names, &name, Named::Host)?;
                hosts.push(HostSpec {
                    name,
                    tor: i,
                    delay_ns: default_delay_ns,
                    addr: None,
                });
            }
        }
        for h in &file.host {
            let tor = match names.get(&h.switch) {
                Some(Named::Switch(i)) => *i,
                _ => {
                    return Err(TopologyError::UnknownNode {
                        context: format!("host `{}`", h.name),
                        name: h.switch.clone(),
                    });
                }
            };
            claim(&mut names, &h.name, Named::Host)?;
            hosts.push(HostSpec {
                name: h.name.clone(),
                tor,
                delay_ns: h.delay_ns.unwrap_or(default_delay_ns),
                addr: parse_addr(&h.name, h.addr.as_deref())?,
            });
        }
        let mut links = Vec::new();
        for l in &file.link {
            let [a, b] = &l.between;
            let end = |n: &String| match names.get(n) {
                Some(Named::Switch(i)) => Ok(*i),
                Some(Named::Host) => Err(TopologyError::LinkToHost {
                    a: a.clone(),
                    b: b.clone(),
                }),
                None => Err(TopologyError::UnknownNode {
                    context: format!("link {a}-{b}"),
                    name: n.clone(),
                }),
            };
            let (ia, ib) = (end(a)?, end(b)?);
            // Orientation is fixed in validate() once layers are known.
            links.push(LinkSpec {
                lower: ia,
                upper: ib,
                delay_ns: l.delay_ns.unwrap_or(default_delay_ns),
            });
        }
        let mut t = Topology {
            name: file.name.unwrap_or_else(|| "file".into()),
            switches,
            hosts,
            links,
            controller: file.controller.map(FileController::spec).transpose()?,
            key_file: file.key_file.map(Into::into),
            switch_cpu_delay_ns: cpu_delay_ns(file.switch_cpu_delay_us)?,
        };
        t.assign_layers()?;
        for (i, declared) in declared_layers.into_iter().enumerate() {
            if let Some(d) = declared
                && d != t.switches[i].layer
            {
                return Err(TopologyError::LayerMismatch {
                    name: t.switches[i].name.clone(),
                    declared: d,
                    derived: t.switches[i].layer,
                });
            }
        }
        t.validate()?;
        Ok(t)
    }

    /// Layer = 1 + hop distance to the nearest switch with hosts; links are then oriented so
    /// that `lower` is the switch of the lower layer.
    fn assign_layers(&mut self) -> Result<(), TopologyError> {
        let n = self.switches.len();
        let mut adj = vec![Vec::new(); n];
        for l in &self.links {
            adj[l.lower].push(l.upper);
            adj[l.upper].push(l.lower);
        }
        let mut layer = vec![0u8; n];
        let mut queue = VecDeque::new();
        for h in &self.hosts {
            if layer[h.tor] == 0 {
                layer[h.tor] = 1;
                queue.push_back(h.tor);
            }
        }
        while let Some(s) = queue.pop_front() {
            for &m in &adj[s] {
                if layer[m] == 0 {
                    layer[m] = layer[s].saturating_add(1);
                    queue.push_back(m);
                }
            }
        }
        for (s, spec) in self.switches.iter_mut().enumerate() {
            spec.layer = layer[s];
        }
        for l in &mut self.links {
            if layer[l.lower] > layer[l.upper] {
                std::mem::swap(&mut l.lower, &mut l.upper);
            }
        }
        Ok(())
    }

    /// Checks every structural rule; presets and files both pass through here.
    pub fn validate(&self) -> Result<(), TopologyError> {
        limit_counts(
            self.switches.len() as u128,
            self.hosts.len() as u128,
            self.links.len() as u128,
        )?;
        if self.switches.is_empty() {
            return Err(TopologyError::NoSwitches);
        }
        if self.hosts.is_empty() {
            return Err(TopologyError::NoHosts);
        }
        let mut seen = HashSet::new();
        for name in self
            .switches
            .iter()
            .map(|s| &s.name)
            .chain(self.hosts.iter().map(|h| &h.name))
        {
            if !seen.insert(name) {
                return Err(TopologyError::DuplicateName(name.clone()));
            }
        }
        let name = |s: SwitchIndex| self.switches[s].name.clone();
        let mut pairs = HashSet::new();
        for l in &self.links {
            if l.lower == l.upper {
                return Err(TopologyError::SelfLink {
                    a: name(l.lower),
                    b: name(l.upper),
                });
            }
            if !pairs.insert((l.lower.min(l.upper), l.lower.max(l.upper))) {
                return Err(TopologyError::DuplicateLink {
                    a: name(l.lower),
                    b: name(l.upper),
                });
            }
        }
        for (i, s) in self.switches.iter().enumerate() {
            if s.layer == 0 {
                return Err(TopologyError::Disconnected(name(i)));
            }
        }
        for h in &self.hosts {
            if self.switches[h.tor].layer != 1 {
                return Err(TopologyError::LayerMismatch {
                    name: name(h.tor),
                    declared: 1,
                    derived: 0,
                });
            }
        }
        for l in &self.links {
            let (la, lb) = (self.switches[l.lower].layer, self.switches[l.upper].layer);
            // Layers saturate at u8::MAX: a chain deeper than that is refused here, not added
            // past it.
            if la.checked_add(1) != Some(lb) {
                return Err(TopologyError::LayerSkip {
                    a: name(l.lower),
                    b: name(l.upper),
                    layer_a: la,
                    layer_b: lb,
                });
            }
        }
        let mut ports = vec![0usize; self.switches.len()];
        for h in &self.hosts {
            ports[h.tor] += 1;
        }
        for l in &self.links {
            ports[l.lower] += 1;
            ports[l.upper] += 1;
        }
        for (i, &p) in ports.iter().enumerate() {
            if p > PORTS_PER_SWITCH_MAX {
                return Err(TopologyError::TooManyPorts {
                    name: name(i),
                    ports: p,
                    max: PORTS_PER_SWITCH_MAX,
                });
            }
        }
        Ok(())
    }

    /// Number of hops on the longest up/down path (for summaries).
    pub fn layers(&self) -> u8 {
        self.switches.iter().map(|s| s.layer).max().unwrap_or(0)
    }

    /// The switches' names, for an error about a name that is not among them: the first few
    /// and how many there are (a fat-tree has hundreds).
    pub fn switch_names_hint(&self) -> String {
        const SHOWN: usize = 12;
        let mut names: Vec<&str> = self
            .switches
            .iter()
            .take(SHOWN)
            .map(|s| s.name.as_str())
            .collect();
        if self.switches.len() > SHOWN {
            names.push("...");
        }
        format!("switches: {} ({} in all)", names.join(", "), self.switches.len())
    }
}

enum Named {
    Switch(SwitchIndex),
    Host,
}

fn claim(names: &mut HashMap<String, Named>, name: &str, what: Named) -> Result<(), TopologyError> {
    if names.insert(name.to_string(), what).is_some() {
        return Err(TopologyError::DuplicateName(name.to_string()));
    }
    Ok(())
}

/// A switch CPU's delay per beacon from the file, in ns: at most a second.
fn cpu_delay_ns(us: Option<f64>) -> Result<Option<u64>, TopologyError> {
    match us {
        None => Ok(None),
        Some(us) if us.is_finite() && (0.0..=1e6).contains(&us) => Ok(Some((us * 1e3).round() as u64)),
        Some(us) => Err(TopologyError::Syntax(format!(
            "switch_cpu_delay_us = {us}: must be between 0 and 1000000 (a second)"
        ))),
    }
}

/// Small helper for presets.
struct Builder {
    t: Topology,
}

impl Builder {
    fn new(name: String) -> Builder {
        Builder {
            t: Topology {
                name,
                switches: Vec::new(),
                hosts: Vec::new(),
                links: Vec::new(),
                controller: None,
                key_file: None,
                switch_cpu_delay_ns: None,
            },
        }
    }
    fn switch(&mut self, name: String, layer: u8) -> SwitchIndex {
        self.t.switches.push(SwitchSpec {
            name,
            layer,
            addr: None,
        });
        self.t.switches.len() - 1
    }
    fn hosts(&mut self, tor: SwitchIndex, count: usize) {
        for i in 0..count {
            let name = format!("{}-h{i}", self.t.switches[tor].name);
            self.t.hosts.push(HostSpec {
                name,
                tor,
                delay_ns: LINK_DELAY_NS_DEFAULT,
                addr: None,
            });
        }
    }
    fn link(&mut self, lower: SwitchIndex, upper: SwitchIndex) {
        self.t.links.push(LinkSpec {
            lower,
            upper,
            delay_ns: LINK_DELAY_NS_DEFAULT,
        });
    }
    fn finish(self) -> Result<Topology, TopologyError> {
        self.t.validate()?;
        Ok(self.t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn testbed_matches_paper_section_7_1() {
        let t = Topology::paper_testbed();
        let count = |layer| t.switches.iter().filter(|s| s.layer == layer).count();
        assert_eq!((count(1), count(2), count(3)), (4, 4, 2));
        assert_eq!(t.hosts.len(), 32);
        // 4 ToRs x 2 spines + 4 spines x 2 cores.
        assert_eq!(t.links.len(), 16);
    }

    #[test]
    fn fat_tree_sizes() {
        let t = Topology::fat_tree(4).unwrap();
        assert_eq!(t.hosts.len(), 16);
        assert_eq!(t.switches.len(), 20);
        assert!(Topology::fat_tree(3).is_err());
    }

    #[test]
    fn presets_parse() {
        assert_eq!(Topology::preset("single:4").unwrap().hosts.len(), 4);
        assert_eq!(Topology::preset("leaf-spine:2,2,3").unwrap().hosts.len(), 6);
        assert_eq!(Topology::preset("testbed").unwrap().hosts.len(), 32);
        assert!(matches!(
            Topology::preset("ring:3"),
            Err(TopologyError::BadPreset(..))
        ));
        assert!(matches!(
            Topology::preset("single:x"),
            Err(TopologyError::BadPreset(..))
        ));
        assert!(matches!(
            Topology::preset("single:0"),
            Err(TopologyError::NoHosts)
        ));
    }

    const GOOD: &str = r#"
        name = "two-racks"
        link_delay_ns = 100
        [[switch]]
        name = "tor0"
        hosts = 2
        [[switch]]
        name = "tor1"
        layer = 1
        [[switch]]
        name = "spine"
        [[host]]
        name = "db"
        switch = "tor1"
        delay_ns = 7
        [[link]]
        between = ["spine", "tor0"]
        [[link]]
        between = ["tor1", "spine"]
        delay_ns = 50
    "#;

    #[test]
    fn a_controller_table_names_etcd_and_replicas_or_is_rejected_clearly() {
        let with = |table: &str| Topology::from_toml(&format!("{GOOD}\n[controller]\n{table}"));
        let plain = with("").unwrap().controller.unwrap();
        assert_eq!((plain.etcd, plain.replicas), (None, 1));
        let ha = with("etcd = \"http://127.0.0.1:2379\"\nreplicas = 2")
            .unwrap()
            .controller
            .unwrap();
        assert_eq!(ha.etcd.as_deref(), Some("http://127.0.0.1:2379"));
        assert_eq!(ha.replicas, 2);
        let message = |table: &str| with(table).unwrap_err().to_string();
        assert!(
            message("replicas = 2").contains("needs etcd"),
            "{}",
            message("replicas = 2")
        );
        assert!(message("replicas = 0").contains("expected 1 to 9"));
        assert!(message("etcd = \"127.0.0.1:2379\"").contains("expected http://HOST:PORT"));
        assert!(message("etcd = \"http://\"").contains("expected http://HOST:PORT"));
        assert!(message("etcd = \"https://\"").contains("expected http://HOST:PORT"));
        assert!(message("etcd_user_file = \"u\"").contains("need etcd"));
        let tls = with("etcd = \"https://127.0.0.1:2379\"\netcd_ca_file = \"ca.pem\"")
            .unwrap()
            .controller
            .unwrap();
        assert_eq!(tls.etcd_files.ca_file, Some("ca.pem".into()));
        assert!(message("replicas = -1").contains("invalid topology file"));
        assert!(message("etcd = 5").contains("invalid topology file"));
    }

    /// The switch-CPU incarnation is the file's, for every switch and process alike.
    #[test]
    fn switch_cpus_are_named_by_the_file_with_their_delay() {
        assert_eq!(Topology::from_toml(GOOD).unwrap().switch_cpu_delay_ns, None);
        let t = Topology::from_toml(&format!("switch_cpu_delay_us = 7.5\n{GOOD}")).unwrap();
        assert_eq!(t.switch_cpu_delay_ns, Some(7_500));
        for bad in ["-1", "2e6", "nan"] {
            let e = Topology::from_toml(&format!("switch_cpu_delay_us = {bad}\n{GOOD}"));
            assert!(e.is_err(), "{bad}: {e:?}");
        }
    }

    #[test]
    fn a_key_file_is_found_from_the_topology_file() {
        let dir = std::env::temp_dir().join(format!("onepipe-topology-key-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.toml");
        std::fs::write(&path, format!("key_file = \"keys/fabric.key\"\n{GOOD}")).unwrap();
        let t = Topology::from_file(&path).unwrap();
        assert_eq!(t.key_file, Some(dir.join("keys/fabric.key")));
        std::fs::write(&path, format!("key_file = \"/etc/onepipe.key\"\n{GOOD}")).unwrap();
        let t = Topology::from_file(&path).unwrap();
        assert_eq!(
            t.key_file,
            Some("/etc/onepipe.key".into()),
            "an absolute path stays"
        );
        assert_eq!(Topology::from_toml(GOOD).unwrap().key_file, None);
        let table = "[controller]\netcd = \"https://h:1\"\netcd_user_file = \"etcd/user\"\netcd_ca_file = \"/ca.pem\"\n";
        std::fs::write(&path, format!("{GOOD}\n{table}")).unwrap();
        let files = Topology::from_file(&path).unwrap().controller.unwrap().etcd_files;
        assert_eq!(files.user_file, Some(dir.join("etcd/user")));
        assert_eq!(files.ca_file, Some("/ca.pem".into()), "an absolute path stays");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn toml_file_loads_and_orients_links() {
        let t = Topology::from_toml(GOOD).unwrap();
        assert_eq!(t.name, "two-racks");
        assert_eq!(t.hosts.len(), 3);
        assert_eq!(t.hosts[2].delay_ns, 7);
        assert_eq!(t.switches[2].layer, 2);
        assert!(t.links.iter().all(|l| t.switches[l.lower].layer == 1));
        assert_eq!(t.links[0].delay_ns, 100);
        assert_eq!(t.links[1].delay_ns, 50);
    }

    fn err(text: &str) -> TopologyError {
        Topology::from_toml(text).unwrap_err()
    }

    #[test]
    fn toml_errors_name_the_problem() {
        assert!(matches!(err("[[switch]]\nname = 3"), TopologyError::Syntax(_)));
        assert!(matches!(
            err("[[switch]]\nname = \"a\"\ncolour = 1"),
            TopologyError::Syntax(_)
        ));
        assert_eq!(err(""), TopologyError::NoSwitches);
        assert_eq!(err("[[switch]]\nname = \"a\""), TopologyError::NoHosts);
        assert_eq!(
            err("[[switch]]\nname = \"a\"\nhosts = 1\n[[switch]]\nname = \"a\""),
            TopologyError::DuplicateName("a".into())
        );
        let unknown = err("[[switch]]\nname = \"a\"\nhosts = 1\n[[link]]\nbetween = [\"a\", \"b\"]");
        assert!(matches!(unknown, TopologyError::UnknownNode { ref name, .. } if name == "b"));
        assert!(unknown.to_string().contains("unknown node `b`"));
        let host_link = err("[[switch]]\nname = \"a\"\nhosts = 1\n[[link]]\nbetween = [\"a\", \"a-h0\"]");
        assert!(matches!(host_link, TopologyError::LinkToHost { .. }));
        let self_link = err("[[switch]]\nname = \"a\"\nhosts = 1\n[[link]]\nbetween = [\"a\", \"a\"]");
        assert!(matches!(self_link, TopologyError::SelfLink { .. }));
        let dup = err("[[switch]]\nname = \"a\"\nhosts = 1\n[[switch]]\nname = \"s\"\n\
             [[link]]\nbetween = [\"a\", \"s\"]\n[[link]]\nbetween = [\"s\", \"a\"]");
        assert!(matches!(dup, TopologyError::DuplicateLink { .. }));
        let lonely = err("[[switch]]\nname = \"a\"\nhosts = 1\n[[switch]]\nname = \"island\"");
        assert_eq!(lonely, TopologyError::Disconnected("island".into()));
        // Two ToRs linked directly: a same-layer link would make the barrier graph cyclic.
        let flat = err(
            "[[switch]]\nname = \"a\"\nhosts = 1\n[[switch]]\nname = \"b\"\nhosts = 1\n\
             [[link]]\nbetween = [\"a\", \"b\"]",
        );
        assert!(matches!(
            flat,
            TopologyError::LayerSkip {
                layer_a: 1,
                layer_b: 1,
                ..
            }
        ));
        let mismatch = err(
            "[[switch]]\nname = \"a\"\nhosts = 1\n[[switch]]\nname = \"s\"\nlayer = 3\n\
             [[link]]\nbetween = [\"a\", \"s\"]",
        );
        assert!(matches!(
            mismatch,
            TopologyError::LayerMismatch {
                declared: 3,
                derived: 2,
                ..
            }
        ));
    }

    /// Counts from a file are checked before they size anything: a host count past what a
    /// switch can have is refused at once (it used to make a host per count first, so a file
    /// of 40 bytes ran out of memory; found by the `topology` fuzz target), and a chain of
    /// switches deeper than the layer counter goes is refused, not wrapped.
    #[test]
    fn counts_from_a_file_are_bounded_before_they_size_anything() {
        let huge = err("[[switch]]\nname = \"tor0\"\nhosts = 4294967296");
        assert!(
            matches!(
                huge,
                TopologyError::TooLarge {
                    count: 4294967296,
                    ..
                }
            ),
            "{huge}"
        );
        let mut chain = String::from("[[switch]]\nname = \"s0\"\nhosts = 1\n");
        for i in 1..300 {
            chain += &format!(
                "[[switch]]\nname = \"s{i}\"\n[[link]]\nbetween = [\"s{}\", \"s{i}\"]\n",
                i - 1
            );
        }
        assert!(matches!(
            err(&chain),
            TopologyError::LayerSkip {
                layer_a: 255,
                layer_b: 255,
                ..
            }
        ));
    }
}
