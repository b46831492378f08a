//! A whole store in this process for the Redis front: the server processes of a layout and a
//! front client in every other process of the topology, on the inproc runtime with a
//! controller (`onepipe::embed`).

use std::sync::Arc;

use onepipe::Topology;
use onepipe::embed::{EmbedError, EmbedOptions, Embedded};

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
}

type FrontProcess = StoreProcess<Server, Client, FrontSource>;

/// A running store. Dropping it stops the fabric.
pub struct Cluster {
    system: Embedded<FrontProcess>,
    layout: Layout,
    mailboxes: Vec<Arc<Mailbox>>,
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
        let mut mailboxes = Vec::new();
        let apps = (0..processes)
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
                    config.window = options.window.max(1);
                    StoreProcess::Client(ClientApp::new(Client::new(config), FrontSource::new(mailbox)))
                }
            })
            .collect();
        let system = Embedded::start(&embed, apps)?;
        Ok(Cluster {
            system,
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
    pub fn crash_server(&self, server: u32) -> bool {
        server < self.layout.servers() && self.system.crash_process(server)
    }
}
