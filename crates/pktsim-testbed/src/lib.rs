//! `pktsim-tb`: traffic generator (`gen`) and sink (`sink`) for pktsim's real-kernel
//! testbed, meant to run inside network namespaces (`ip netns exec NS pktsim-tb ...`).
//!
//! [`run`] is the whole command: the `pktsim-tb` binary (`main.rs`) calls it, and so does
//! the Python package's `pktsim-tb` entry point through the extension module, so that a
//! `pip install` of pktsim brings the generator and sink along.
//!
//! Modules:
//! - [`args`]: command line (subcommands, `--key value` flags, usage texts).
//! - [`frame`]: probe frame layout, building, parsing, IPv4 checksum.
//! - [`gen`]: the open-loop generator (AF_PACKET, sendmmsg, integer due times).
//! - [`sink`]: the receiver (AF_PACKET, recvmmsg, kernel timestamps, latency histograms).
//! - [`bpf`]: the testbed's eBPF programs (XDP, tracepoints), assembled here, loaded and
//!   attached with bpf(2).
//! - [`xdp`]: holds an XDP program on an interface for the length of a run.
//! - [`xsk`]: AF_XDP sockets: umem, rings, copy-mode binding, busy polling.
//! - [`xskfwd`]: a user-space forwarder between two AF_XDP sockets.
//! - [`probe`]: the gaps a spinning thread on one CPU sees (interference).
//! - [`wake`]: what waking a sleeping thread on one CPU costs (idle exit, refill, switch).
//! - [`udprecv`]: an application receiving the probes on a UDP socket, with a fixed CPU
//!   cost per datagram.
//! - [`softirq`]: the NET_RX softirq and IPI time of one CPU, counted by eBPF programs on
//!   tracepoints, and what each task ran there (`sched_switch`).
//! - [`spin`]: what everything else takes from one CPU, by what a SCHED_IDLE loop gets.
//! - [`sys`]: thin safe wrappers over the Linux calls used.
//!
//! Each run prints one JSON object on stdout. Exit status: 0 done (also when stopped by
//! SIGINT/SIGTERM), 1 a system call failed (one line on stderr), 2 usage error.
//! pktsim-tb is Linux-only; on other systems it builds but only reports that.

#![cfg_attr(not(target_os = "linux"), allow(dead_code))]

mod args;
#[cfg(target_os = "linux")]
mod bpf;
mod frame;
#[cfg(target_os = "linux")]
mod gen;
#[cfg(target_os = "linux")]
mod probe;
#[cfg(target_os = "linux")]
mod sink;
#[cfg(target_os = "linux")]
mod softirq;
#[cfg(target_os = "linux")]
mod spin;
#[cfg(target_os = "linux")]
mod sys;
#[cfg(target_os = "linux")]
mod udprecv;
#[cfg(target_os = "linux")]
mod wake;
#[cfg(target_os = "linux")]
mod xdp;
#[cfg(target_os = "linux")]
mod xsk;
#[cfg(target_os = "linux")]
mod xskfwd;

use std::ffi::OsString;
use std::io::Write;

use args::{Command, UsageError};

/// Exit status of a run: 0 done, 1 a system call failed, 2 a usage error.
pub type ExitCode = u8;

const EXIT_FAILURE: u8 = 1;
const EXIT_USAGE: u8 = 2;

/// Run `pktsim-tb` with `args` (without the program name); returns the exit status.
pub fn run(args: impl IntoIterator<Item = OsString>) -> ExitCode {
    let mut argv = Vec::new();
    for (i, a) in args.into_iter().enumerate() {
        match a.into_string() {
            Ok(s) => argv.push(s),
            Err(a) => {
                return usage_error(&UsageError {
                    subcommand: None,
                    message: format!("argument {} is not valid UTF-8: {a:?}", i + 1),
                })
            }
        }
    }
    let command = match args::parse(&argv) {
        Err(e) => return usage_error(&e),
        Ok(c) => c,
    };
    if matches!(
        command,
        Command::Gen(_)
            | Command::Sink(_)
            | Command::Xdp(_)
            | Command::XskFwd(_)
            | Command::Probe(_)
            | Command::Wake(_)
            | Command::UdpRecv(_)
            | Command::Spin(_)
            | Command::Softirq(_)
    ) {
        let parent = match args::parent_pid(std::env::var_os(args::PARENT_ENV).as_deref()) {
            Ok(p) => p,
            Err(e) => return usage_error(&e),
        };
        if let Some(pid) = parent {
            if let Err(code) = die_with_parent(pid) {
                return code;
            }
        }
    }
    match command {
        Command::Help(text) => print_stdout(text),
        Command::Version => print_stdout(&format!("pktsim-tb {}\n", env!("CARGO_PKG_VERSION"))),
        Command::Gen(a) => run_gen(&a),
        Command::Sink(a) => run_sink(&a),
        Command::Xdp(a) => run_xdp(&a),
        Command::XskFwd(a) => run_xskfwd(&a),
        Command::Probe(a) => run_probe(&a),
        Command::Wake(a) => run_wake(&a),
        Command::UdpRecv(a) => run_udprecv(&a),
        Command::Spin(a) => run_spin(&a),
        Command::Softirq(a) => run_softirq(&a),
    }
}

/// Dies with the parent `pid` (so a killed `pktsim testbed run` leaves no generator or
/// sink behind); an error if that parent is already gone.
#[cfg(target_os = "linux")]
fn die_with_parent(pid: u32) -> Result<(), ExitCode> {
    sys::die_with_parent(pid).map_err(|e| {
        let what = if sys::is_errno(&e, &[libc::ESRCH]) {
            format!("the parent process {pid} ({}) has exited", args::PARENT_ENV)
        } else {
            sys::SysError { call: "prctl(PR_SET_PDEATHSIG)".into(), err: e }.to_string()
        };
        failure("startup", &what)
    })
}

#[cfg(not(target_os = "linux"))]
fn die_with_parent(_: u32) -> Result<(), ExitCode> {
    Ok(())
}

/// Reports a usage error on stderr; exit status 2.
fn usage_error(e: &UsageError) -> ExitCode {
    let prefix = match e.subcommand {
        Some(sub) => format!("pktsim-tb {sub}"),
        None => "pktsim-tb".to_string(),
    };
    let help = match e.subcommand {
        Some(sub) if ["gen", "sink", "xdp", "xskfwd", "probe", "wake", "udprecv", "softirq", "spin"].contains(&sub) => {
            format!("pktsim-tb {sub} --help")
        }
        _ => "pktsim-tb --help".to_string(),
    };
    let _ = writeln!(std::io::stderr(), "{prefix}: {e}\n(run '{help}' for usage)");
    EXIT_USAGE
}

/// Reports a failure on stderr as `pktsim-tb SUB: message`; exit status 1.
fn failure(subcommand: &str, message: &dyn std::fmt::Display) -> ExitCode {
    let _ = writeln!(std::io::stderr(), "pktsim-tb {subcommand}: {message}");
    EXIT_FAILURE
}

/// Writes `text` to stdout; a closed stdout is a failure, not a panic.
fn print_stdout(text: &str) -> ExitCode {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => 0,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "pktsim-tb: writing to stdout: {e}");
            EXIT_FAILURE
        }
    }
}

/// Prints a run's JSON object as one line on stdout.
#[cfg(target_os = "linux")]
fn print_json(value: &serde_json::Value) -> ExitCode {
    print_stdout(&format!("{value}\n"))
}

#[cfg(target_os = "linux")]
fn run_gen(a: &args::GenArgs) -> ExitCode {
    match gen::run(a) {
        Ok(report) => print_json(&report.to_json()),
        Err(e) => failure("gen", &e),
    }
}

#[cfg(target_os = "linux")]
fn run_sink(a: &args::SinkArgs) -> ExitCode {
    match sink::run(a) {
        Ok(stats) => print_json(&stats.to_json()),
        Err(e) => failure("sink", &e),
    }
}

#[cfg(target_os = "linux")]
fn run_xdp(a: &args::XdpArgs) -> ExitCode {
    match xdp::run(a) {
        Ok(report) => print_json(&report),
        Err(e) => failure("xdp", &e),
    }
}

#[cfg(target_os = "linux")]
fn run_xskfwd(a: &args::XskFwdArgs) -> ExitCode {
    match xskfwd::run(a) {
        Ok(report) => print_json(&report),
        Err(e) => failure("xskfwd", &e),
    }
}

#[cfg(target_os = "linux")]
fn run_probe(a: &args::ProbeArgs) -> ExitCode {
    match probe::run(a) {
        Ok(report) => print_json(&report),
        Err(e) => failure("probe", &e),
    }
}

#[cfg(target_os = "linux")]
fn run_wake(a: &args::WakeArgs) -> ExitCode {
    match wake::run(a) {
        Ok(report) => print_json(&report),
        Err(e) => failure("wake", &e),
    }
}

#[cfg(target_os = "linux")]
fn run_spin(a: &args::SpinArgs) -> ExitCode {
    match spin::run(a) {
        Ok(v) => print_json(&v),
        Err(e) => failure("spin", &e),
    }
}

#[cfg(target_os = "linux")]
fn run_udprecv(a: &args::UdpRecvArgs) -> ExitCode {
    match udprecv::run(a) {
        Ok(stats) => print_json(&stats.to_json()),
        Err(e) => failure("udprecv", &e),
    }
}

#[cfg(target_os = "linux")]
fn run_softirq(a: &args::SoftirqArgs) -> ExitCode {
    match softirq::run(a) {
        Ok(report) => print_json(&report),
        Err(e) => failure("softirq", &e),
    }
}

#[cfg(not(target_os = "linux"))]
fn run_softirq(_: &args::SoftirqArgs) -> ExitCode {
    failure("softirq", &"needs Linux (eBPF on tracepoints)")
}

#[cfg(not(target_os = "linux"))]
fn run_spin(_: &args::SpinArgs) -> ExitCode {
    failure("spin", &"needs Linux")
}

#[cfg(not(target_os = "linux"))]
fn run_udprecv(_: &args::UdpRecvArgs) -> ExitCode {
    failure("udprecv", &"needs Linux")
}

#[cfg(not(target_os = "linux"))]
fn run_wake(_: &args::WakeArgs) -> ExitCode {
    failure("wake", &"needs Linux")
}

#[cfg(not(target_os = "linux"))]
fn run_probe(_: &args::ProbeArgs) -> ExitCode {
    failure("probe", &"needs Linux")
}

#[cfg(not(target_os = "linux"))]
fn run_xskfwd(_: &args::XskFwdArgs) -> ExitCode {
    failure("xskfwd", &"needs Linux (AF_XDP)")
}

#[cfg(not(target_os = "linux"))]
fn run_xdp(_: &args::XdpArgs) -> ExitCode {
    failure("xdp", &"needs Linux (XDP)")
}

#[cfg(not(target_os = "linux"))]
fn run_gen(_: &args::GenArgs) -> ExitCode {
    failure("gen", &"needs Linux (AF_PACKET sockets)")
}

#[cfg(not(target_os = "linux"))]
fn run_sink(_: &args::SinkArgs) -> ExitCode {
    failure("sink", &"needs Linux (AF_PACKET sockets)")
}
