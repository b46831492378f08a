//! Every numeric flag refuses a value past its bound, naming the range.

use crate::Cli;
use clap::{CommandFactory, Parser};
use std::any::TypeId;
use std::path::PathBuf;

/// Every flag of `cmd` and its subcommands that takes a value, as (command words, `--flag`,
/// whether its value is a number to bound).
fn flags(cmd: &clap::Command, words: &str, out: &mut Vec<(String, String, bool)>) {
    for arg in cmd.get_arguments() {
        let Some(long) = arg.get_long() else { continue };
        if !arg.get_action().takes_values() || long == "help" || long == "version" {
            continue;
        }
        let parser = arg.get_value_parser();
        let text = [
            TypeId::of::<String>(),
            TypeId::of::<PathBuf>(),
            TypeId::of::<bool>(),
        ];
        let numeric = !text.iter().any(|t| parser.type_id() == *t) && arg.get_possible_values().is_empty();
        out.push((words.to_string(), format!("--{long}"), numeric));
    }
    for sub in cmd.get_subcommands() {
        let words = format!("{words} {}", sub.get_name()).trim().to_string();
        flags(sub, &words, out);
    }
}

/// Flags whose every value is valid (a seed is any u64) or that are not numbers.
/// `--clock-step` is a spec like `--fail`; its step is bounded by the wire's limit when parsed
/// (`crates/sim/tests/clocks.rs`, `clock_steps_parse_and_print`).
/// `--bind` is an IP address, any of which is valid.
const UNBOUNDED: &[&str] = &[
    "--seed",
    "--first-seed",
    "--fail",
    "--clock-step",
    "--pattern",
    "--bind",
];

/// (command words, flag, the largest value accepted, the smallest refused): one row per
/// numeric flag of every command.
const BOUNDS: &[(&str, &str, &str, &str)] = &[
    ("cosy demo", "--k", "16", "17"),
    ("cosy demo", "--load", "1", "1.01"),
    ("cosy demo", "--message-bytes", "16777216", "16777217"),
    ("cosy demo", "--seconds", "86400", "86401"),
    ("cosy demo", "--link-mbps", "100000", "100001"),
    ("cosy demo", "--hold-us", "10000000", "10000001"),
    ("cosy demo", "--threads", "1024", "1025"),
    ("demo", "--processes-per-host", "1024", "1025"),
    ("demo", "--skew-us", "10000000", "10000001"),
    ("demo", "--cpu-delay-us", "10000000", "10000001"),
    ("demo", "--link-delay-us", "10000000", "10000001"),
    ("demo", "--rate", "1000000000", "1000000001"),
    ("netchain get", "--process", "1048576", "1048577"),
    ("netchain get", "--timeout-ms", "3600000", "3600001"),
    ("netchain put", "--process", "1048576", "1048577"),
    ("netchain put", "--timeout-ms", "3600000", "3600001"),
    ("netchain del", "--process", "1048576", "1048577"),
    ("netchain del", "--timeout-ms", "3600000", "3600001"),
    ("netchain cas", "--process", "1048576", "1048577"),
    ("netchain cas", "--timeout-ms", "3600000", "3600001"),
    ("netchain lock", "--process", "1048576", "1048577"),
    ("netchain lock", "--timeout-ms", "3600000", "3600001"),
    ("netchain unlock", "--process", "1048576", "1048577"),
    ("netchain unlock", "--timeout-ms", "3600000", "3600001"),
    ("netchain serve", "--port", "65535", "65536"),
    ("netchain serve", "--processes", "1048576", "1048577"),
    ("netchain bench", "--clients", "65536", "65537"),
    ("netchain bench", "--write-ratios", "1", "1.01"),
    ("netchain bench", "--seconds-per-point", "86400", "86401"),
    ("netchain serve", "--workers", "1024", "1025"),
    ("paxos demo", "--clients", "65536", "65537"),
    ("paxos demo", "--client-hosts", "64", "65"),
    ("paxos demo", "--write-ratio", "1", "1.01"),
    ("paxos demo", "--keys", "1000000", "1000001"),
    ("paxos demo", "--value-bytes", "160", "161"),
    ("paxos demo", "--seconds", "86400", "86401"),
    ("paxos demo", "--partitions", "64", "65"),
    ("paxos demo", "--loss", "1", "1.01"),
    ("paxos demo", "--workers", "1024", "1025"),
    ("paxos bench", "--clients", "65536", "65537"),
    ("paxos bench", "--partitions", "64", "65"),
    ("paxos bench", "--seconds-per-point", "86400", "86401"),
    ("netchain demo", "--clients", "65536", "65537"),
    ("netchain demo", "--write-ratio", "1", "1.01"),
    ("netchain demo", "--keys", "65536", "65537"),
    ("netchain demo", "--value-bytes", "128", "129"),
    ("netchain demo", "--seconds", "86400", "86401"),
    ("netchain demo", "--loss", "1", "1.01"),
    ("netchain demo", "--vnodes-per-switch", "4096", "4097"),
    ("netchain demo", "--workers", "1024", "1025"),
    ("demo", "--seconds", "86400", "86401"),
    ("demo", "--workers", "1024", "1025"),
    ("demo", "--link-capacity-bytes", "17179869184", "17179869185"),
    ("demo", "--edge-visit-interval-passes", "1000000", "1000001"),
    (
        "demo",
        "--start-before-wrap-ns",
        "281474976710656",
        "281474976710657",
    ),
    ("demo", "--loss", "1", "1.01"),
    ("demo", "--dup", "1", "1.01"),
    ("demo", "--reorder", "1", "1.01"),
    ("demo", "--jitter-us", "10000000", "10000001"),
    ("demo", "--link-gbps", "10000", "10001"),
    ("demo", "--ecn-threshold-bytes", "17179869184", "17179869185"),
    ("demo", "--message-bytes", "1048576", "1048577"),
    ("demo", "--beacon-interval-us", "10000000", "10000001"),
    ("demo", "--promise-lead-us", "10000000", "10000001"),
    ("demo", "--dead-after-intervals", "1000000", "1000001"),
    ("demo", "--datagram-bytes", "65507", "65508"),
    ("demo", "--udp-threads", "1024", "1025"),
    ("demo", "--udp-window-datagrams", "16777216", "16777217"),
    ("bench modes", "--seconds", "86400", "86401"),
    ("bench modes", "--pairs", "1000", "1001"),
    ("bench modes", "--loss-seconds", "86400", "86401"),
    ("bench modes", "--rate", "1000000000", "1000000001"),
    ("bench modes", "--losses", "0.5,1", "0.5,1.5"),
    ("bench modes", "--auth-pairs", "1000", "1001"),
    ("bench fig8", "--processes", "1048576", "1048577"),
    ("bench fig8", "--seconds", "86400", "86401"),
    ("bench fig8", "--window", "16777216", "16777217"),
    ("bench fig8", "--cpu-delay-us", "10000000", "10000001"),
    ("bench fig8", "--ratio-pairs", "1000", "1001"),
    ("bench fig8", "--auth-pairs", "1000", "1001"),
    ("bench fig8", "--limit-seconds", "86400", "86401"),
    ("bench fig8", "--datagram-bytes", "65507", "65508"),
    ("bench fig8", "--udp-threads", "1024", "1025"),
    ("bench fig8", "--udp-window-datagrams", "16777216", "16777217"),
    ("bench fig8", "--beacon-interval-us", "10000000", "10000001"),
    ("bench fig8", "--promise-lead-us", "10000000", "10000001"),
    ("bench soak", "--minutes", "1440", "1441"),
    ("bench soak", "--load", "1", "1.5"),
    ("bench soak", "--capacity-seconds", "86400", "86401"),
    ("bench soak", "--sample-seconds", "86400", "86401"),
    ("bench soak", "--flat-tolerance", "1000", "1001"),
    ("bench soak", "--processes-per-host", "1024", "1025"),
    ("bench soak", "--message-bytes", "1048576", "1048577"),
    ("bench soak", "--datagram-bytes", "65507", "65508"),
    ("bench soak", "--udp-threads", "1024", "1025"),
    ("bench soak", "--udp-window-datagrams", "16777216", "16777217"),
    ("bench soak", "--beacon-interval-us", "10000000", "10000001"),
    ("bench soak", "--promise-lead-us", "10000000", "10000001"),
    ("bench udp-limit", "--seconds", "86400", "86401"),
    ("bench udp-limit", "--datagram-bytes", "65507", "65508"),
    ("bench udp-limit", "--message-bytes", "1048576", "1048577"),
    ("bench recovery", "--hosts", "2,1048576", "2,1048577"),
    ("bench recovery", "--seeds", "1000", "1001"),
    ("bench recovery", "--inproc-hosts", "4,1048576", "4,1048577"),
    ("bench recovery", "--inproc-seconds", "86400", "86401"),
    ("sim", "--processes-per-host", "1024", "1025"),
    ("sim", "--beacon-interval", "3600s", "3601s"),
    ("sim", "--skew", "3600s", "3601s"),
    ("sim", "--drift-ppm", "1000", "1000.5"),
    ("sim", "--link-gbps", "10000", "10001"),
    ("sim", "--fabric-gbps", "10000", "10001"),
    ("sim", "--link-delay", "3600s", "3601s"),
    ("sim", "--switch-delay", "3600s", "3601s"),
    ("sim", "--host-nic-delay", "3600s", "3601s"),
    ("sim", "--host-frame-cost", "3600s", "3601s"),
    ("sim", "--representative-frame-cost", "3600s", "3601s"),
    ("sim", "--cpu-delay-us", "10000000", "10000001"),
    ("sim", "--queue-capacity-bytes", "17179869184", "17179869185"),
    ("sim", "--ecn-threshold-bytes", "17179869184", "17179869185"),
    ("sim", "--mtu-bytes", "65535", "65536"),
    ("sim", "--send-buffer-packets", "16777216", "16777217"),
    ("sim", "--loss", "1", "1.01"),
    ("sim", "--dup", "1", "1.01"),
    ("sim", "--reorder", "1", "1.01"),
    ("sim", "--faults-for", "3600s", "3601s"),
    ("sim", "--gap", "3600s", "3601s"),
    ("sim", "--message-bytes-max", "1048576", "1048577"),
    ("sim", "--rto-max", "3600s", "3601s"),
    ("sim", "--control-delay", "3600s", "3601s"),
    ("sim", "--controller-frame-cost", "3600s", "3601s"),
    ("sim", "--send", "3600s", "3601s"),
    ("sim", "--measure-after", "3600s", "3601s"),
    ("sim", "--drain", "3600s", "3601s"),
    ("sim", "--drain-max", "3600s", "3601s"),
    ("sim", "--settle", "3600s", "3601s"),
    ("sim", "--events-max", "17592186044416", "17592186044417"),
    ("sim", "--memory-mb-max", "1048576", "1048577"),
    ("sim", "--message-bytes", "1048576", "1048577"),
    ("sim", "--dead-after-intervals", "1000000", "1000001"),
    ("sim campaign", "--seeds", "1000000000", "1000000001"),
    ("sim campaign", "--threads", "1024", "1025"),
    ("sim fig8", "--points", "2,1048576", "2,1048577"),
    ("sim fig8", "--processes", "1048576", "1048577"),
    ("sim fig8", "--cpu-delay-us", "10000000", "10000001"),
    ("sim fig9a", "--cpu-delay-us", "10000000", "10000001"),
    ("sim fig9b", "--cpu-delay-us", "10000000", "10000001"),
    ("sim fig13", "--cpu-delay-us", "10000000", "10000001"),
    ("sim scale", "--cpu-delay-us", "10000000", "10000001"),
    ("sim fig9a", "--points", "2,1048576", "2,1048577"),
    ("sim fig9a", "--processes", "1048576", "1048577"),
    ("sim fig9b", "--points", "2,1048576", "2,1048577"),
    ("sim fig9b", "--processes", "1048576", "1048577"),
    ("sim fig10", "--points", "2,1048576", "2,1048577"),
    ("sim fig10", "--seeds", "1000", "1001"),
    ("sim fig11", "--points", "1,10000", "1,10001"),
    ("sim fig11", "--host-messages", "17179869184", "17179869185"),
    ("sim fig11", "--host-message-bytes", "1400", "1401"),
    ("sim large-message", "--bytes", "1048576", "1048577"),
    ("sim large-message", "--window", "3600s", "3601s"),
    ("sim fig13", "--points", "2,1048576", "2,1048577"),
    ("sim fig13", "--processes", "1048576", "1048577"),
    ("sim scale", "--points", "2,1048576", "2,1048577"),
    ("sim scale", "--processes", "1048576", "1048577"),
    ("sim netchain", "--clients", "65536", "65537"),
    ("sim netchain", "--open-loop-rate", "1000000000", "1000000001"),
    ("sim netchain", "--write-ratio", "1", "1.01"),
    ("sim netchain", "--keys", "65536", "65537"),
    ("sim netchain", "--value-bytes", "128", "129"),
    ("sim netchain", "--seconds", "3600", "3601"),
    ("sim netchain", "--detection", "3600s", "3601s"),
    ("sim netchain", "--loss", "1", "1.01"),
    ("sim netchain", "--reorder", "1", "1.01"),
    ("sim netchain", "--vnodes-per-switch", "4096", "4097"),
    ("sim netchain", "--agent-timeout", "3600s", "3601s"),
    ("sim netchain", "--switch-frame-cost", "3600s", "3601s"),
    ("sim netchain", "--host-frame-cost", "3600s", "3601s"),
    ("sim netchain", "--controller-frame-cost", "3600s", "3601s"),
    ("sim netchain", "--events-max", "17592186044416", "17592186044417"),
    ("sim netchain-fig9", "--seconds", "3600", "3601"),
    ("sim netchain-fig9", "--keys", "65536", "65537"),
    ("sim netchain-fig10", "--seconds", "3600", "3601"),
    ("sim netchain-fig10", "--keys", "65536", "65537"),
    ("sim paxos", "--clients", "65536", "65537"),
    ("sim paxos", "--client-hosts", "64", "65"),
    ("sim paxos", "--seconds", "3600", "3601"),
    ("sim paxos", "--partitions", "64", "65"),
    ("sim paxos", "--write-ratio", "1", "1.01"),
    ("sim paxos", "--keys", "1000000", "1000001"),
    ("sim paxos", "--loss", "1", "1.01"),
    ("sim paxos", "--duplicate", "1", "1.01"),
    ("sim paxos", "--reorder", "1", "1.01"),
    ("sim paxos", "--library-frame-cost", "3600s", "3601s"),
    ("sim paxos", "--role-frame-cost", "3600s", "3601s"),
    ("sim paxos", "--events-max", "17592186044416", "17592186044417"),
    ("sim paxos-campaign", "--runs", "1000000000", "1000000001"),
    ("sim paxos-throughput", "--seconds", "3600", "3601"),
    ("sim paxos-partitions", "--seconds", "3600", "3601"),
    ("sim cosy-detector", "--period-us", "100000", "100001"),
    ("sim cosy-detector", "--load", "1", "1.01"),
    ("sim cosy-detector", "--runs", "10000", "10001"),
    ("sim cosy-detector", "--misses", "100", "101"),
    ("sim cosy-detector", "--k", "16", "17"),
    ("sim cosy-storage", "--load", "1", "1.01"),
    ("sim cosy-storage", "--window-us", "10000000", "10000001"),
    ("sim cosy-storage", "--depth", "256", "257"),
    ("sim cosy-storage", "--service", "3600s", "3601s"),
    ("sim cosy-storage", "--issue-cost", "3600s", "3601s"),
    ("sim cosy-storage", "--wakeup-cost", "3600s", "3601s"),
    ("sim cosy-storage", "--slice", "3600s", "3601s"),
    ("sim cosy-storage", "--k", "16", "17"),
    ("sim kv-fig14", "--seconds", "3600", "3601"),
    ("sim kv-fig14", "--processes", "8,4096", "8,4097"),
    ("sim kv-fig14", "--processes-bc", "4096", "4097"),
    ("sim kv-fig14", "--write-percents", "0,100", "0,101"),
    ("sim kv-fig14", "--keys-per-txn", "1,64", "1,65"),
    ("sim kv-fig14", "--keys", "100000000", "100000001"),
    ("sim kv-fig14", "--zipf", "1", "1.01"),
    ("sim kv-fig14", "--window", "1024", "1025"),
    ("sim kv-fig14", "--latency-window", "1024", "1025"),
    ("sim kv-fig14", "--frame-cost", "3600s", "3601s"),
    ("sim kv-fig14", "--control-frame-cost", "3600s", "3601s"),
    ("sim cosy-tradeoff", "--ks", "1,16", "1,17"),
    ("sim cosy-tradeoff", "--slots-max", "16", "17"),
    ("sim cosy-tradeoff", "--message-bytes", "1048576", "1048577"),
    ("sim cosy-tradeoff", "--seconds", "3600", "3601"),
    ("sim cosy-tradeoff", "--seeds", "1000", "1001"),
    ("sim cosy-tradeoff", "--steps", "20", "21"),
    ("sim cosy-tradeoff", "--reject-fraction-max", "1", "1.01"),
    ("sim cosy-tradeoff", "--hold", "3600s", "3601s"),
    ("sim cosy-tradeoff", "--leaves", "4096", "4097"),
    ("sim cosy-tradeoff", "--spines", "4096", "4097"),
    ("sim cosy-tradeoff", "--hosts-per-leaf", "4096", "4097"),
    ("sim cosy-tradeoff", "--link-gbps", "10000", "10001"),
    ("sim cosy-theta", "--ks", "1,16", "1,17"),
    ("sim cosy-theta", "--slots-max", "16", "17"),
    ("sim cosy-theta", "--message-bytes", "1048576", "1048577"),
    ("sim cosy-theta", "--seconds", "3600", "3601"),
    ("sim cosy-theta", "--seeds", "1000", "1001"),
    ("sim cosy-theta", "--steps", "20", "21"),
    ("sim cosy-theta", "--reject-fraction-max", "1", "1.01"),
    ("sim cosy-theta", "--hold", "3600s", "3601s"),
    ("sim cosy-theta", "--leaves", "4096", "4097"),
    ("sim cosy-theta", "--spines", "4096", "4097"),
    ("sim cosy-theta", "--hosts-per-leaf", "4096", "4097"),
    ("sim cosy-theta", "--link-gbps", "10000", "10001"),
    ("sim cosy-slowdown", "--k", "16", "17"),
    ("sim cosy-slowdown", "--sizes", "1,1048576", "1,1048577"),
    ("sim cosy-slowdown", "--loads", "0.5,1", "0.5,1.01"),
    ("sim cosy-slowdown", "--seconds", "3600", "3601"),
    ("sim cosy-slowdown", "--leaves", "4096", "4097"),
    ("sim cosy-slowdown", "--spines", "4096", "4097"),
    ("sim cosy-slowdown", "--hosts-per-leaf", "4096", "4097"),
    ("sim cosy-slowdown", "--link-gbps", "10000", "10001"),
    ("sim netpaxos", "--reorder", "1", "1.01"),
    ("sim netpaxos", "--loss", "1", "1.01"),
    ("sim netpaxos", "--values", "100000", "100001"),
    ("switch", "--processes-per-host", "1024", "1025"),
    ("switch", "--beacon-interval-us", "10000000", "10000001"),
    ("switch", "--datagram-bytes", "65507", "65508"),
    ("switch", "--dead-after-intervals", "1000000", "1000001"),
    ("switch", "--clock-offset-us", "3600000000", "3600000001"),
    ("switch", "--clock-offset-us", "-3600000000", "-3600000001"),
    ("controller", "--lease-ttl-secs", "3600", "3601"),
    ("controller", "--settle-ms", "3600000", "3600001"),
    ("controller", "--answer-timeout-ms", "3600000", "3600001"),
    ("controller", "--processes-per-host", "1024", "1025"),
    ("controller", "--beacon-interval-us", "10000000", "10000001"),
    ("controller", "--datagram-bytes", "65507", "65508"),
    ("controller", "--dead-after-intervals", "1000000", "1000001"),
    ("up", "--processes-per-host", "1024", "1025"),
    ("up", "--beacon-interval-us", "10000000", "10000001"),
    ("up", "--datagram-bytes", "65507", "65508"),
    ("up", "--dead-after-intervals", "1000000", "1000001"),
    ("up", "--settle-ms", "3600000", "3600001"),
    ("up", "--answer-timeout-ms", "3600000", "3600001"),
    ("up", "--lease-ttl-secs", "3600", "3601"),
    ("up", "--switch-clock-offset", "s=3600000000", "s=3600000001"),
    ("up", "--switch-clock-offset", "s=-3600000000", "s=-3600000001"),
    ("inspect", "--stall-ms", "3600000", "3600001"),
    ("cut-link", "--processes-per-host", "1024", "1025"),
    ("demo", "--time-ahead-max-ms", "140737488.355328", "140737489"),
    ("sim", "--time-ahead-max-ms", "140737488.355328", "140737489"),
    ("switch", "--time-ahead-max-ms", "140737488.355328", "140737489"),
    ("kv serve", "--time-ahead-max-ms", "140737488.355328", "140737489"),
    (
        "controller",
        "--time-ahead-max-ms",
        "140737488.355328",
        "140737489",
    ),
    ("up", "--time-ahead-max-ms", "140737488.355328", "140737489"),
    ("sim campaign", "--faults-max", "8", "9"),
    ("switch", "--inject-loss", "1", "1.01"),
    ("switch", "--inject-corrupt", "1", "1.01"),
    ("paxos serve", "--port", "65535", "65536"),
    ("paxos serve", "--partitions", "64", "65"),
    ("paxos serve", "--workers", "1024", "1025"),
    ("paxos serve", "--processes", "1048576", "1048577"),
    ("kv demo", "--shards", "4096", "4097"),
    ("kv demo", "--replicas", "16", "17"),
    ("kv demo", "--window", "1024", "1025"),
    ("kv demo", "--seconds", "86400", "86401"),
    ("kv demo", "--zipf", "1", "1.01"),
    ("kv demo", "--keys", "100000000", "100000001"),
    ("kv demo", "--keys-per-txn", "64", "65"),
    ("kv demo", "--read-only", "1", "1.01"),
    ("kv demo", "--value-bytes-max", "65536", "65537"),
    ("kv serve", "--port", "65535", "65536"),
    ("kv serve", "--shards", "4096", "4097"),
    ("kv serve", "--replicas", "16", "17"),
    ("kv serve", "--connections-max", "65536", "65537"),
    ("kv serve", "--processes-per-host", "1024", "1025"),
    ("kv serve", "--beacon-interval-us", "10000000", "10000001"),
    ("kv serve", "--datagram-bytes", "65507", "65508"),
    ("kv serve", "--dead-after-intervals", "1000000", "1000001"),
    ("kv bench", "--requests", "100000000", "100000001"),
    ("kv bench", "--connections", "10000", "10001"),
    ("kv bench", "--pipelines", "1024", "1025"),
    ("paxos up", "--partitions", "64", "65"),
    ("paxos node", "--partitions", "64", "65"),
    ("paxos node", "--process", "1048576", "1048577"),
    ("paxos get", "--partitions", "64", "65"),
    ("paxos get", "--process", "1048576", "1048577"),
    ("paxos set", "--partitions", "64", "65"),
    ("paxos set", "--process", "1048576", "1048577"),
];

fn parse(words: &str, flag: &str, value: &str) -> Result<Cli, clap::Error> {
    let mut args: Vec<String> = vec!["onepipe".into()];
    args.extend(words.split(' ').map(String::from));
    args.push(format!("{flag}={value}"));
    Cli::try_parse_from(args)
}

/// Table-driven over every numeric flag: the bound itself is taken, one past it is refused
/// with an error naming the bound.
#[test]
fn each_bounded_flag_refuses_a_value_past_its_limit() {
    for &(words, flag, ok, bad) in BOUNDS {
        let refused = parse(words, flag, bad).err();
        let Some(e) = refused else {
            panic!("`onepipe {words} {flag}={bad}` was accepted");
        };
        assert_eq!(
            e.kind(),
            clap::error::ErrorKind::ValueValidation,
            "{words} {flag}: {e}"
        );
        let limit = ok.rsplit([',', '=']).next().unwrap().trim_end_matches('s');
        assert!(
            e.to_string().contains(limit),
            "{words} {flag}: `{e}` does not name {limit}"
        );
        if let Err(e) = parse(words, flag, ok) {
            assert_ne!(
                e.kind(),
                clap::error::ErrorKind::ValueValidation,
                "{words} {flag}={ok}: {e}"
            );
        }
    }
}

/// A numeric flag added without a bound (or without a row above) fails here.
#[test]
fn every_numeric_flag_is_bounded() {
    let mut all = Vec::new();
    flags(&Cli::command(), "", &mut all);
    let missing: Vec<String> = all
        .into_iter()
        .filter(|(_, flag, numeric)| *numeric && !UNBOUNDED.contains(&flag.as_str()))
        .filter(|(words, flag, _)| !BOUNDS.iter().any(|&(w, f, ..)| w == words && f == flag))
        .map(|(words, flag, _)| format!("onepipe {words} {flag}"))
        .collect();
    assert!(
        missing.is_empty(),
        "numeric flags with no row in BOUNDS: {missing:?}"
    );
}
