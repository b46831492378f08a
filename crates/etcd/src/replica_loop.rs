//! The controller on etcd (`onepipe controller` with etcd): one of several controller
//! replicas (issue 6, docs/failures.md "Controller replicas"). A replica stands by, touching nothing but etcd, until it wins the
//! lease-based election; then it binds the controller's address, replays the log from etcd and
//! runs the controller exactly as the file-log one does. It stops acting the moment it may no
//! longer lead, and exits with an error, so that two replicas never act at once.

// Lease renewals, campaigns and the bind retry wait on real time: a lease expires in real time
// at etcd.
#![allow(clippy::disallowed_methods)]

use crate::{Client, Connect, ElectionConfig, EtcdStore, Leadership, Replica, group};
use onepipe::supervise::{Note, Res, Say, controller_prefix, serve};
use onepipe::udp::{UdpOptions, UdpSystemError};
use onepipe_fabric::Topology;
use onepipe_proto::controller::ControllerConfig;
use onepipe_proto::controller::store::StoreError;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Every call to etcd gives up after this long (a renewal must come back well within a TTL).
const CALL_TIMEOUT: Duration = Duration::from_millis(1_500);
/// How long a new leader waits for the old one's socket to be released (a killed process's
/// socket goes with it; a hung one keeps it).
const BIND_FOR: Duration = Duration::from_secs(3);
/// The longest a standby or the lease keeper sleeps between looks at the stop flag.
const NAP: Duration = Duration::from_millis(20);

pub const DEFAULT_LEASE_TTL_SECS: u64 = 2;
pub const LEASE_TTL_SECS_MAX: u64 = 3_600;

/// A client for `connect`, with errors that say what it is for.
pub fn client(connect: &Connect) -> Res<Client> {
    Client::new(connect, CALL_TIMEOUT).map_err(|e| format!("the controller's etcd: {e}").into())
}

/// Before `onepipe up` starts replicas on a fresh fabric: etcd answers, no replica of an
/// earlier run still leads, and that run's log is gone (its failures are not this fabric's).
pub fn prepare_group(connect: &Connect, topology: &Topology, say: Say) -> Res<()> {
    let client = client(connect)?;
    let url = &connect.endpoint;
    let prefix = controller_prefix(topology);
    let leader = group::leader(&client, &prefix)
        .map_err(|e| format!("cannot use etcd for the controller of `{}`: {e}", topology.name))?;
    if let Some(id) = leader {
        return Err(format!(
            "replica `{id}` of another run already leads the controller of `{}` (etcd at {url}, \
             under {prefix}): stop that run, or wait for its lease to lapse",
            topology.name
        )
        .into());
    }
    let deleted = group::delete_log(&client, &prefix).map_err(|e| e.to_string())?;
    if deleted > 0 {
        say(Note::Err(format!(
            "deleted the controller log of an earlier run ({deleted} records under {prefix})"
        )));
    }
    Ok(())
}

/// After `onepipe up` stopped every replica: their log goes with the fabric.
pub fn forget_group(connect: &Connect, topology: &Topology, say: Say) {
    let prefix = controller_prefix(topology);
    if let Err(e) = client(connect).and_then(|c| group::delete_log(&c, &prefix).map_err(Into::into)) {
        say(Note::Err(format!(
            "could not delete the controller's log under {prefix}: {e}"
        )));
    }
}

fn default_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let host = host.trim();
    format!(
        "{}-{}",
        if host.is_empty() { "replica" } else { host },
        std::process::id()
    )
}

/// Runs one replica until `stop`: stands by, leads once elected, and returns an error if it
/// stopped leading other than by being told to stop.
/// `name` is the replica's name in the election (default: HOSTNAME-PID).
pub fn run(
    name: Option<String>,
    lease_ttl_secs: u64,
    connect: &Connect,
    options: &UdpOptions,
    config: ControllerConfig,
    stop: &Arc<AtomicBool>,
    say: Say,
) -> Res<()> {
    if !(1..=LEASE_TTL_SECS_MAX).contains(&lease_ttl_secs) {
        return Err(format!("--lease-ttl-secs must be between 1 and {LEASE_TTL_SECS_MAX}").into());
    }
    let name = name.unwrap_or_else(default_name);
    if name.trim().is_empty() {
        return Err("--replica must name the replica".into());
    }
    let wiring = onepipe_fabric::Wiring::new(options.topology.clone(), options.processes_per_host)?;
    let plan = onepipe_runtime::udp::plan::AddressPlan::new(&wiring)?;
    let addr = plan.controller.ok_or(UdpSystemError::NoController)?;
    let prefix = controller_prefix(&options.topology);
    let client = client(connect)?;
    let election = ElectionConfig::with_ttl_secs(lease_ttl_secs);
    let mut replica = Replica::new(client, &prefix, &name, election);
    // The first calls fail fast: a wrong URL is an error, not a standby waiting forever.
    replica
        .step()
        .map_err(|e| format!("replica {name}: cannot join the election: {e}"))?;
    let standing_by = Instant::now();
    if !stand_by(&mut replica, stop, say) {
        let _ = replica.resign();
        say(Note::Out(format!("replica {name}: stopped while standing by")));
        return Ok(());
    }
    let term = replica.leadership().expect("stand_by returns once leading");
    say(Note::Out(format!(
        "replica {name}: leads (etcd term {}) after standing by {:.2} s; binding {addr}",
        term.revision,
        standing_by.elapsed().as_secs_f64()
    )));
    if let Err(e) = bind_when_free(addr, stop) {
        let _ = replica.resign();
        return Err(format!("replica {name}: {e}; resigned so that another replica may lead").into());
    }
    if replica.leadership() != Some(term) {
        let _ = replica.resign();
        return Err(format!("replica {name}: lost its lease while binding {addr}; not acting").into());
    }
    let store = EtcdStore::new(replica.client().clone(), &prefix, &name, term);
    // The lease is renewed on a thread of its own while the controller runs; when it may have
    // lapsed the controller is stopped before its next pass.
    let halt = Arc::new(AtomicBool::new(false));
    let lost = Arc::new(Mutex::new(None));
    let keeper = {
        let (stop, halt, lost) = (stop.clone(), halt.clone(), lost.clone());
        std::thread::spawn(move || keep_leading(replica, term, &stop, &halt, &lost, say))
    };
    let log = format!(
        "in etcd at {} under {prefix} (replica {name}, term {})",
        connect.endpoint, term.revision
    );
    let served = serve(options, config, store, &halt, &log, say);
    halt.store(true, Ordering::Relaxed);
    let mut replica = keeper.join().map_err(|_| "the lease keeper panicked")?;
    let lost = lost.lock().expect("the keeper has ended").take();
    // Resigning hands over at once instead of after the TTL; harmless if the lease is gone.
    let _ = replica.resign();
    match (lost, served) {
        (Some(why), _) => Err(format!("replica {name} stopped acting as the controller: {why}").into()),
        (None, Err(e)) => match e.downcast_ref::<UdpSystemError>() {
            Some(UdpSystemError::Store(StoreError::NotLeader { reason, .. })) => Err(format!(
                "replica {name} stopped acting as the controller: etcd refused its log append ({reason})"
            )
            .into()),
            _ => Err(format!("replica {name}: {e}").into()),
        },
        (None, Ok(())) => {
            say(Note::Out(format!("replica {name}: resigned")));
            Ok(())
        }
    }
}

/// Campaigns until this replica leads (true) or `stop` is set (false), saying who leads.
fn stand_by(replica: &mut Replica, stop: &AtomicBool, say: Say) -> bool {
    let mut said: Option<Option<String>> = None;
    let mut failing = false;
    loop {
        if replica.leadership().is_some() {
            return true;
        }
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        let leader = replica.known_leader();
        if said.as_ref() != Some(&leader) {
            let who = match &leader {
                None => "no replica leads yet".to_string(),
                // The key holds our name under another lease: an earlier run of this replica.
                Some(l) if l == replica.id() => format!("an earlier run of {l} leads until its lease lapses"),
                Some(l) => format!("{l} leads"),
            };
            say(Note::Out(format!(
                "replica {}: standing by ({who})",
                replica.id()
            )));
            said = Some(leader);
        }
        std::thread::sleep(replica.until_next_step().min(NAP));
        match replica.step() {
            Ok(()) => failing = false,
            Err(e) if !std::mem::replace(&mut failing, true) => {
                say(Note::Err(format!(
                    "replica {}: etcd call failed, retrying: {e}",
                    replica.id()
                )));
            }
            Err(_) => {}
        }
    }
}

/// Binds `addr` and lets it go at once, retrying while another process (a leader that just
/// died) still holds it: only one controller can listen there.
fn bind_when_free(addr: SocketAddr, stop: &AtomicBool) -> Result<(), String> {
    let started = Instant::now();
    loop {
        match UdpSocket::bind(addr) {
            Ok(_) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse && started.elapsed() < BIND_FOR => {}
            Err(e) => {
                return Err(format!(
                    "cannot bind the controller's address {addr} ({e}; is an old controller still \
                     running?)"
                ));
            }
        }
        if stop.load(Ordering::Relaxed) {
            return Err("stopped while waiting for the controller's address".into());
        }
        std::thread::sleep(NAP);
    }
}

/// Renews the lease while the controller runs. Sets `halt` (the controller's stop flag)
/// when told to stop, or, with the reason in `lost`, when the lease of `term` may have lapsed.
fn keep_leading(
    mut replica: Replica,
    term: Leadership,
    stop: &AtomicBool,
    halt: &AtomicBool,
    lost: &Mutex<Option<String>>,
    say: Say,
) -> Replica {
    let mut last_error = None;
    while !halt.load(Ordering::Relaxed) {
        if stop.load(Ordering::Relaxed) {
            halt.store(true, Ordering::Relaxed);
            break;
        }
        match replica.step() {
            Ok(()) => last_error = None,
            Err(e) => {
                if last_error.is_none() {
                    say(Note::Err(format!(
                        "replica {}: cannot renew its lease, retrying: {e}",
                        replica.id()
                    )));
                }
                last_error = Some(e);
            }
        }
        // A step that finds the lease gone grants another and may win again at once: a later
        // term, which the log's fencing refuses to this controller's appends. Any change ends it.
        let now = replica.leadership();
        if now != Some(term) {
            let why = match (&last_error, now) {
                (Some(e), _) => format!("its lease may have lapsed, renewals failing ({e})"),
                (None, Some(_)) => "etcd no longer had its lease (it leads again, in a new term)".to_string(),
                (None, None) => "etcd no longer has its lease".to_string(),
            };
            *lost.lock().expect("only this thread writes it") = Some(why);
            halt.store(true, Ordering::Relaxed);
            break;
        }
        std::thread::sleep(replica.until_next_step().min(NAP));
    }
    replica
}
