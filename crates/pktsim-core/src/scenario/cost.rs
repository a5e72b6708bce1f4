//! `[cost]`: where per-packet costs come from (a cost profile, per-group cycles, the host's
//! times) and the packet-buffer model; resolving them into the node's [`CostProfile`], and
//! their checks. Profiles themselves are in [`crate::cost`].

use std::path::Path;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::host::HostSpec;
use crate::cost::{load_profile, CostProfile, CostProfileFile, Group, Groups, GROUP_NAMES};
use crate::error::{ConfigError, Result};
use crate::units::{Cycles, CyclesPerByte, Frequency};

/// Where per-packet costs come from: a profile (bundled name or file), optionally with
/// some groups overridden.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CostSpec {
    /// Bundled profile name (e.g. "raumer2015-64B") or a profile file, relative to the scenario.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// Cycles per packet per group (override the profile's, or give all without a profile).
    #[serde(default)]
    pub cycles: Groups<Cycles>,
    /// Cycles per byte per group.
    #[serde(default)]
    pub per_byte: Groups<CyclesPerByte>,
    /// Packet-buffer management: per-packet allocation and free, or recycling from a pool.
    #[serde(default)]
    pub buffers: BufferSpec,
}

/// How packet buffers are obtained (003 skb recycling, 004 Click packet pool).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BufferSpec {
    /// Take buffers from a per-core pool instead of allocating and freeing each one: the
    /// alloc and free groups are replaced by `recycle`.
    #[serde(default)]
    pub recycling: bool,
    /// Cycles per packet to take a buffer from the pool and give it back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recycle: Option<Cycles>,
    /// Cycles per packet added to alloc for each additional core sharing the allocator's
    /// lock (without recycling).
    #[serde(default)]
    pub shared_lock: Cycles,
    /// The driver's buffers come from a page_pool (`net/core/page_pool.c`): the alloc and
    /// free groups are replaced by the pool's cost per buffer, on its fast path or through
    /// its ring.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_pool: Option<PagePoolSpec>,
}

/// A page_pool's costs per buffer (allocation and release together).
///
/// A buffer released in the pool's own NAPI context on its core (a forwarded frame's tx
/// clean on that core, XDP_DROP, XDP_TX) goes straight back into the per-CPU cache
/// (`page_pool_recycle_in_cache`) and is taken from it again: `fast`. A buffer released
/// anywhere else (an application's read in process context, the tx clean of a queue that
/// another core cleans) goes through the pool's ptr_ring (`page_pool_recycle_in_ring`,
/// refilled into the cache in bulk): `ring`. `alloc` is the page allocator's cost when a
/// buffer is not given back (`__page_pool_alloc_pages_slow`, `alloc_pages_bulk`), charged
/// to the share `alloc_share` of buffers.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PagePoolSpec {
    #[serde(default)]
    pub fast: Cycles,
    #[serde(default)]
    pub ring: Cycles,
    #[serde(default)]
    pub alloc: Cycles,
    /// Share of buffers that come from the page allocator (0..1).
    #[serde(default)]
    pub alloc_share: f64,
}

impl CostSpec {
    /// Load the profile (bundled, or a file relative to `base_dir`) and overlay the given
    /// groups; without either, take the costs from the host's times. Then check the buffer
    /// model, and that a packet costs something.
    ///
    /// What this needs from the neighbouring sections is passed in: the CPU `frequency`
    /// (to turn `host.t_proc` and `host.t_clean` into cycles), the `host` (its times and
    /// batched I/O costs), `total_flows` over all traffic sources and `fib_routes`
    /// (`fib.routes`), the FIB that host times were measured with.
    pub(super) fn resolve(
        &self,
        origin: &str,
        base_dir: &Path,
        frequency: Frequency,
        host: &HostSpec,
        total_flows: u64,
        fib_routes: Option<u64>,
    ) -> Result<CostProfile> {
        // `host.t_proc` is a frame's whole time (with `t_proc_per_byte` its per-byte part):
        // cycles of the groups it stands for would be read by nothing. Only routing's
        // cycles still count with it: the FIB model's base for the extra a bigger FIB adds.
        if let (Some(a), None) = (host.stack.t_proc_per_byte, host.stack.t_proc) {
            let expected = "only with host.t_proc, whose per-byte part it is (x = a S + b + c); without host.t_proc, per-byte costs come from the cost profile or [cost.per_byte]";
            return Err(ConfigError::new(origin, "host.t_proc_per_byte", Some(format!("\"{a}\"")), expected).into());
        }
        if host.stack.t_proc.is_some() {
            let cycles = self.cycles.as_array().into_iter().map(|c| c.map(|c| c.to_string()));
            let per_byte = self.per_byte.as_array().into_iter().map(|c| c.map(|c| c.to_string()));
            let given = GROUP_NAMES
                .iter()
                .zip(cycles)
                .filter(|(g, _)| **g != "routing")
                .map(|(g, c)| (format!("cost.cycles.{g}"), c));
            let mut given =
                given.chain(GROUP_NAMES.iter().zip(per_byte).map(|(g, c)| (format!("cost.per_byte.{g}"), c)));
            if let Some((key, Some(v))) = given.find(|(_, c)| c.is_some()) {
                let expected = "no per-group cycles with host.t_proc, a frame's whole time (only cost.cycles.routing, the FIB model's base): give the time or the groups";
                return Err(ConfigError::new(origin, key, Some(format!("\"{v}\"")), expected).into());
            }
        }
        // Cost profile: bundled or file, then overrides.
        let profile = match &self.profile {
            Some(p) => load_profile(p, base_dir, origin, "cost.profile")?,
            None => CostProfile::from_file(CostProfileFile::default(), "inline"),
        };
        let mut cost = profile.with_overrides(&self.cycles, &self.per_byte);
        let groups_given = cost.fixed.get(Group::Alloc) + cost.fixed.get(Group::Free) > 0.0;
        if cost.fixed.total() == 0.0 && self.profile.is_none() {
            // No cycle costs given: take them from the host's times, so that the analytical
            // model and the simulator describe the same node (t_clean frees the transmitted
            // skbs: C_free; the rest of the path is in t_proc, reported under C_other).
            let f = frequency.hz;
            if let Some(t) = host.stack.t_proc {
                cost.fixed.set(Group::Other, t.as_secs() * f);
                cost.fixed.set(Group::Free, host.stack.t_clean.map_or(0.0, |c| c.as_secs() * f));
                cost.name = "host times".into();
                // Times measured on this node already include its own FIB.
                cost.reference_flows = total_flows;
                cost.reference_routes = fib_routes.unwrap_or(total_flows);
            }
        }
        let b = &self.buffers;
        if b.recycling && b.recycle.is_none() {
            return Err(ConfigError::new(
                origin,
                "cost.buffers.recycle",
                None,
                "the cycles per packet of taking and returning a pooled buffer, e.g. \"40cycles\"",
            )
            .into());
        }
        if !b.recycling && b.recycle.is_some() {
            return Err(ConfigError::new(
                origin,
                "cost.buffers.recycle",
                b.recycle.map(|c| format!("{:?}", c.to_string())),
                "no recycle cost unless cost.buffers.recycling = true",
            )
            .into());
        }
        if let Some(pp) = &b.page_pool {
            if b.recycling {
                return Err(ConfigError::new(
                    origin,
                    "cost.buffers.page_pool",
                    None,
                    "no page_pool with cost.buffers.recycling = true: one buffer model or the other",
                )
                .into());
            }
            if !(0.0..=1.0).contains(&pp.alloc_share) {
                return Err(ConfigError::new(
                    origin,
                    "cost.buffers.page_pool.alloc_share",
                    Some(pp.alloc_share.to_string()),
                    "a share from 0 to 1",
                )
                .into());
            }
        }
        if (b.recycling || b.page_pool.is_some() || b.shared_lock.cycles > 0.0)
            && (host.stack.t_proc.is_some() || !groups_given)
        {
            return Err(ConfigError::new(
                origin,
                "cost.buffers",
                None,
                "per-packet costs from a cost profile or [cost.cycles] (with alloc and free groups) for the buffer model to change; host.t_proc and host.t_clean are fixed times",
            )
            .into());
        }
        let batch_cost = host.io.batch().is_some_and(|b| b.t_call.ps > 0 || b.t_packet.ps > 0 || b.t_byte.is_some());
        // An XDP program that ends frames before the stack prices them itself.
        let xdp_cost = host.io.xdp().is_some_and(|x| {
            x.action != super::XdpAction::Pass
                && (x.t_prog.ps > 0 || x.t_driver.ps > 0 || x.t_xmit.ps > 0 || x.t_skb.is_some_and(|d| d.ps > 0))
        });
        if !(cost.fixed.total() > 0.0) && !batch_cost && !xdp_cost {
            return Err(ConfigError::new(
                origin,
                "cost",
                None,
                "a cost profile (cost.profile), cycles per group ([cost.cycles]), host.t_proc, batched I/O costs (host.batch) or an XDP path's costs (host.xdp), giving more than 0 cycles per packet",
            )
            .into());
        }
        Ok(cost)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::config_error;

    const GHZ_3: Frequency = Frequency { hz: 3e9 };

    fn resolve(spec: &CostSpec, host: &HostSpec) -> Result<CostProfile> {
        spec.resolve("t", Path::new("."), GHZ_3, host, 4, None)
    }

    fn profile(buffers: BufferSpec) -> CostSpec {
        CostSpec { profile: Some("raumer2015-64B".into()), buffers, ..CostSpec::default() }
    }

    #[test]
    fn page_pool_is_one_buffer_model_with_a_share_in_range() {
        let host = HostSpec::default();
        let pp = PagePoolSpec { fast: Cycles::new(20.0), ring: Cycles::new(70.0), ..PagePoolSpec::default() };
        assert!(resolve(&profile(BufferSpec { page_pool: Some(pp.clone()), ..BufferSpec::default() }), &host).is_ok());
        let both = BufferSpec {
            recycling: true,
            recycle: Some(Cycles::new(40.0)),
            page_pool: Some(pp.clone()),
            ..BufferSpec::default()
        };
        assert_eq!(config_error(resolve(&profile(both), &host)).path, "cost.buffers.page_pool");
        let share = BufferSpec { page_pool: Some(PagePoolSpec { alloc_share: 1.5, ..pp }), ..BufferSpec::default() };
        assert_eq!(config_error(resolve(&profile(share), &host)).path, "cost.buffers.page_pool.alloc_share");
    }

    #[test]
    fn recycling_needs_a_recycle_cost_and_only_recycling_has_one() {
        let host = HostSpec::default();
        let recycling = BufferSpec { recycling: true, recycle: Some(Cycles::new(40.0)), ..BufferSpec::default() };
        assert!(resolve(&profile(recycling.clone()), &host).is_ok());
        let e = config_error(resolve(&profile(BufferSpec { recycle: None, ..recycling.clone() }), &host));
        assert_eq!(
            e.to_string(),
            "t: cost.buffers.recycle: the cycles per packet of taking and returning a pooled buffer, e.g. \"40cycles\""
        );
        let e = config_error(resolve(&profile(BufferSpec { recycling: false, ..recycling }), &host));
        assert_eq!(
            e.to_string(),
            "t: cost.buffers.recycle = \"40cycles\": expected no recycle cost unless cost.buffers.recycling = true"
        );
    }

    #[test]
    fn the_buffer_model_needs_alloc_and_free_cycles() {
        let lock = BufferSpec { shared_lock: Cycles::new(10.0), ..BufferSpec::default() };
        let host = super::super::host::host("t_proc = \"100ns\"");
        assert_eq!(
            config_error(resolve(&CostSpec { buffers: lock.clone(), ..CostSpec::default() }, &host)).path,
            "cost.buffers"
        );
        assert!(resolve(&profile(lock), &HostSpec::default()).is_ok());
    }

    #[test]
    fn host_times_stand_in_for_a_profile() {
        let host = super::super::host::host("t_proc = \"100ns\"\nt_clean = \"20ns\"");
        let cost = resolve(&CostSpec::default(), &host).unwrap();
        assert_eq!(cost.name, "host times");
        assert!((cost.fixed.get(Group::Other) - 300.0).abs() < 1e-9);
        assert!((cost.fixed.get(Group::Free) - 60.0).abs() < 1e-9);
        assert_eq!((cost.reference_flows, cost.reference_routes), (4, 4));
    }

    #[test]
    fn a_packet_must_cost_something() {
        let e = config_error(resolve(&CostSpec::default(), &HostSpec::default()));
        assert_eq!(e.path, "cost");
        let busy_poll = super::super::host::host("io = \"busy-poll\"\n[batch]\nt_call = \"50ns\"");
        assert!(resolve(&CostSpec::default(), &busy_poll).is_ok());
    }
}
