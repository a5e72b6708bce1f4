//! `pktsim-tb xdp`: attach one of the testbed's XDP programs ([`crate::bpf`]) to an
//! interface and hold it there until the run ends. The program is attached through a BPF
//! link owned by this process, so it is detached when the process exits for any reason,
//! including SIGKILL or the death of the parent run (PR_SET_PDEATHSIG).

use std::fs::File;

use serde_json::json;

use crate::args::{XdpArgs, XdpProg};
use crate::bpf;
use crate::sys::{self, failed, SysError};

/// Poll period of the wait for a stop (a stop is seen within this).
const TICK_NS: u64 = 10_000_000;

pub fn run(args: &XdpArgs) -> Result<serde_json::Value, SysError> {
    sys::install_stop_handlers().map_err(failed("sigaction(SIGINT/SIGTERM)"))?;
    let ifindex = sys::if_index(&args.iface).map_err(failed(format!("if_nametoindex({})", args.iface)))?;
    let (attached, to_ifindex, name) = match &args.prog {
        XdpProg::Pass => (
            bpf::attach_pass(ifindex).map_err(failed(format!("attach XDP_PASS to {} (native mode)", args.iface)))?,
            None,
            "pass",
        ),
        XdpProg::Redirect { to, loops } => {
            let to_ifindex = sys::if_index(to).map_err(failed(format!("if_nametoindex({to})")))?;
            let a = bpf::attach_redirect(ifindex, to_ifindex, *loops)
                .map_err(failed(format!("attach the devmap redirect {} -> {to} (native mode)", args.iface)))?;
            (a, Some(to_ifindex), "redirect")
        }
    };
    let t0 = sys::mono_ns();
    if let Some(path) = &args.ready_file {
        File::create(path).map_err(failed(format!("create ready file {}", path.display())))?;
    }
    let end = t0.saturating_add(args.duration_ns);
    while !sys::stop_requested() {
        let now = sys::mono_ns();
        if now >= end {
            break;
        }
        // EINTR (a stop signal) ends the sleep early; the loop then sees the flag.
        let _ = sys::sleep_until_mono_ns(now + TICK_NS.min(end - now));
    }
    let attached_ns = sys::mono_ns() - t0;
    drop(attached);
    Ok(json!({
        "iface": args.iface,
        "prog": name,
        "ifindex": ifindex,
        "to_ifindex": to_ifindex,
        "loops": match &args.prog { XdpProg::Redirect { loops, .. } => *loops, XdpProg::Pass => 0 },
        "attached_ns": attached_ns,
        "interrupted": sys::stop_requested(),
    }))
}
