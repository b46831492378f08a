//! `onepipe`: run 1Pipe in software.

mod bench;
mod bench_fig8;
mod bench_recovery;
mod bench_soak;
mod bounds;
mod cosy;
mod cut;
mod demo;
mod fabric;
mod flags;
mod inspect;
mod kv;
mod netchain;
mod netchain_procs;
mod paxos;
mod paxos_procs;
mod progress;
mod sim;
mod sim_cosy;
mod sim_cosy_apps;
mod sim_figures;
mod sim_kv;
mod sim_netchain;
mod sim_paxos;
mod udp_limit;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "onepipe",
    version,
    about = "1Pipe total-order communication in software"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// All-to-all broadcast through a software fat-tree, verified, next to an unordered baseline.
    Demo(demo::DemoArgs),
    /// Benchmarks printing numbers (JSON with --json)
    #[command(subcommand)]
    Bench(bench::BenchCommand),
    /// The deterministic simulator: one seeded run, replayable exactly
    Sim(Box<sim::SimArgs>),
    /// Run one switch of a topology file over UDP (until Ctrl-C or SIGTERM)
    Switch(fabric::SwitchArgs),
    /// Run the controller of a topology file's [controller] over UDP: switches and processes
    /// report failures to it, and it runs the failure procedure (paper 5.2). With etcd, run
    /// one of its replicas: it stands by until elected, then acts as the controller
    Controller(fabric::ControllerArgs),
    /// Start every switch of a topology file (and its controller, or its controller replicas,
    /// if it names one) as its own process over UDP; Ctrl-C stops them
    Up(fabric::UpArgs),
    /// Stop what `onepipe up FILE` started
    Down(fabric::DownArgs),
    /// What the switches of `onepipe up FILE` report: per-link barrier lag and counters, and
    /// the link that holds delivery back
    Inspect(inspect::InspectArgs),
    /// Fault injection: cut the link between switch A and its neighbour B (a switch or a host)
    /// in a topology that `onepipe up FILE` runs; both ends drop it within 200 ms
    CutLink(cut::CutLinkArgs),
    /// NetChain (NSDI 2018): a strongly consistent key-value store chain-replicated in the
    /// switches
    #[command(subcommand)]
    Netchain(netchain::NetchainCommand),
    /// In-network Paxos (thesis 004): the coordinator and acceptors in the switches, a
    /// replicated key-value store on the learners, next to the same Paxos on hosts
    #[command(subcommand)]
    Paxos(paxos::PaxosCommand),
    /// A sharded, replicated, transactional key-value store on 1Pipe (paper 7.3.1), next to
    /// OCC and non-transactional stores on the same fabric
    #[command(subcommand)]
    Kv(kv::KvCommand),
    /// cosy (paper 003): messages completed within a bound known at submission, through
    /// reservations of K virtual links per link
    #[command(subcommand)]
    Cosy(cosy::CosyCommand),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Demo(args) => demo::run(args),
        Command::Bench(cmd) => bench::run(cmd),
        Command::Sim(args) => sim::run(*args),
        Command::Switch(args) => fabric::switch(args),
        Command::Controller(args) => fabric::controller(args),
        Command::Up(args) => fabric::up(args),
        Command::Down(args) => fabric::down(args),
        Command::Inspect(args) => inspect::run(args),
        Command::CutLink(args) => cut::run(args),
        Command::Netchain(cmd) => netchain::run(cmd),
        Command::Paxos(cmd) => paxos::run(cmd),
        Command::Kv(cmd) => kv::run(cmd),
        Command::Cosy(cmd) => cosy::run(cmd),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}
