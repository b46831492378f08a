//! A whole store in this process for the Redis front: the server processes of a layout and a
//! front client in every other process of the topology, on the inproc runtime with a
//! controller (`onepipe::embed`).

use std::sync::Arc;

use onepipe::Topology;
use onepipe::embed::{EmbedError, EmbedOptions, Embedded};
use onepipe::udp::{JoinedApp, UdpOptions, UdpSystemError};

use super::source::{FrontSource, Mailbox};
use crate::client::{Client, ClientConfig};
use crate::layout::{Layout, LayoutError};
use crate::run::{ClientApp, ServerApp, StoreProcess};
use crate::server::{Ordering, Server, ServerConfig};

#[derive(Clone, Debug)]
pub struct ClusterOptions {
    pub topology: Topology,
    pub shards: u32,
    pub replicas: u32,
    /// Transactions outstanding per front client (connections share the front clients).
    pub window: usize,
    pub seed: u64,
}

impl Default for ClusterOptions {
    fn default() -> ClusterOptions {
        ClusterOptions {
            topology: Topology::paper_testbed(),
            shards: 4,
            replicas: 3,
            window: 64,
            seed: 1,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error(transparent)]
    Layout(#[from] LayoutError),
    #[error(transparent)]
    Embed(#[from] EmbedError),
    #[error("the topology has {processes} processes: {layout} and at least one front client need more")]
    TooFewProcesses { processes: u32, layout: Layout },
    #[error("process {process} could not join the udp fabric: {source} (is `onepipe up FILE` running?)")]
    Join { process: u32, source: UdpSystemError },
}

type FrontProcess = StoreProcess<Server, Client, FrontSource>;

/// Where the store's processes run.
enum Processes {
    /// The whole fabric in this process (inproc runtime).
    Embedded(Box<Embedded<FrontProcess>>),
    /// Every process of a udp fabric that runs elsewhere (`onepipe up FILE`), joined from
    /// this OS process: one thread and socket each. `None`: crashed.
    Joined(Vec<Option<JoinedApp>>),
}

/// A running store. Dropping it stops its processes (and an embedded fabric).
pub struct Cluster {
    processes: Processes,
    layout: Layout,
    mailboxes: Vec<Arc<Mailbox>>,
}

/// The processes of a store: servers first, then a front client with a mailbox each.
fn processes_of(layout: Layout, count: u32, window: usize) -> (Vec<FrontProcess>, Vec<Arc<Mailbox>>) {
    let mut mailboxes = Vec::new();
    let apps = (0..count)
        .map(|p| match layout.role_of(p) {
            Some((s, r)) => StoreProcess::Server(ServerApp::new(Server::new(ServerConfig::new(
                s as u16,
                r as u16,
                Ordering::OnePipe,
            )))),
            None => {
                let mailbox = Arc::new(Mailbox::default());
                mailboxes.push(mailbox.clone());
                let mut config = ClientConfig::new(p, layout);
                config.window = window.max(1);
                StoreProcess::Client(ClientApp::new(Client::new(config), FrontSource::new(mailbox)))
            }
        })
        .collect();
    (apps, mailboxes)
}

impl Cluster {
    pub fn start(options: &ClusterOptions) -> Result<Cluster, ClusterError> {
        let layout = Layout::new(options.shards, options.replicas)?;
        let embed = EmbedOptions {
            topology: options.topology.clone(),
            seed: options.seed,
            ..EmbedOptions::default()
        };
        let processes = onepipe::embed::process_count(&embed)?;
        if processes <= layout.servers() {
            return Err(ClusterError::TooFewProcesses { processes, layout });
        }
        let (apps, mailboxes) = processes_of(layout, processes, options.window);
        let system = Embedded::start(&embed, apps)?;
        Ok(Cluster {
            processes: Processes::Embedded(Box::new(system)),
            layout,
            mailboxes,
        })
    }

    /// Joins every process of the udp fabric `udp` describes (its switches run elsewhere:
    /// `onepipe up FILE`) as the store's processes, each on a thread of this OS process.
    pub fn join(
        udp: &UdpOptions,
        shards: u32,
        replicas: u32,
        window: usize,
    ) -> Result<Cluster, ClusterError> {
        let layout = Layout::new(shards, replicas)?;
        let embed = EmbedOptions {
            topology: udp.topology.clone(),
            processes_per_host: udp.processes_per_host,
            ..EmbedOptions::default()
        };
        let processes = onepipe::embed::process_count(&embed)?;
        if processes <= layout.servers() {
            return Err(ClusterError::TooFewProcesses { processes, layout });
        }
        let (apps, mailboxes) = processes_of(layout, processes, window);
        let joined = apps
            .into_iter()
            .zip(0..)
            .map(|(app, process)| {
                onepipe::udp::join_app(udp, process, app)
                    .map(Some)
                    .map_err(|source| ClusterError::Join { process, source })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Cluster {
            processes: Processes::Joined(joined),
            layout,
            mailboxes,
        })
    }

    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// One mailbox per front client process, for a [`super::TxStore`].
    pub fn mailboxes(&self) -> Vec<Arc<Mailbox>> {
        self.mailboxes.clone()
    }

    /// Crashes server `server` (its shard `server / replicas`): the controller announces it and
    /// clients leave it out.
    pub fn crash_server(&mut self, server: u32) -> bool {
        if server >= self.layout.servers() {
            return false;
        }
        match &mut self.processes {
            Processes::Embedded(system) => system.crash_process(server),
            // Its thread stops: the process falls silent, as a crashed one does.
            Processes::Joined(joined) => joined[server as usize].take().is_some(),
        }
    }
}
