//! `[nic]`: the NIC's rings, descriptor refill, interrupt throttling, rx queues and
//! classification filters (ixgbe semantics); and their checks.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::check_range;
use super::tagged::{leaves, part, Key, Tagged};
use super::traffic::Proto;
use crate::error::{ConfigError, Result};
use crate::units::Duration;

/// Which vector completes transmitted descriptors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum TxVector {
    /// The egress port's own vector (a router forwarding from one port to another): tx
    /// completions raise their own IRQs and NAPI polls (002, 003).
    #[default]
    Separate,
    /// The same TxRx vector as the rx ring (forwarding out of the ingress port).
    Shared,
}

/// The profile table `net_dim` steps through (`nic.itr.mode = "dim"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub enum DimProfile {
    /// mlx5, EQE-based (`cq_period_mode` start-from-EQE): the timer runs from the last
    /// interrupt; rx (1, 8, 64, 128, 256) µs with 256 frames.
    #[default]
    #[serde(rename = "mlx5-eqe")]
    Mlx5Eqe,
    /// mlx5, CQE-based (private flag `rx_cqe_moder` on): the timer restarts at every
    /// completion; rx (2, 8, 16, 32, 64) µs with (256, 128, 64, 64, 64) frames.
    #[serde(rename = "mlx5-cqe")]
    Mlx5Cqe,
    /// ice: an interval only, rx (2, 8, 16, 62, 126) µs.
    #[serde(rename = "ice")]
    Ice,
}

/// Interrupt throttling (ITR) of the NIC's vectors: `mode` picks the moderation policy, and
/// the section's other keys are that policy's (a tagged section: `scenario/tagged.rs`).
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(tag = "mode", rename_all = "kebab-case")]
#[schemars(transform = super::tagged::schema_default::<ItrSpec>)]
pub enum ItrSpec {
    /// No throttling: every cause interrupts at once (`rx-usecs 0`).
    Off(ItrOff),
    /// A fixed interval (`rx-usecs N`, in 2.048 us steps).
    Static(ItrStatic),
    /// ixgbe's dynamic ITR: states lowest / low / bulk, smoothed by 002 Eq. 1 (the default).
    Dynamic(ItrDynamic),
    /// The kernel's generic dynamic interrupt moderation (`net_dim`) stepping through the
    /// five (µs, frames) entries of a device's profile table.
    Dim(ItrDim),
}

/// `nic.itr.mode = "off"`: no keys.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ItrOff {}

/// `nic.itr.mode = "static"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ItrStatic {
    /// Static interval (`ethtool -C rx-usecs`, also accepted as `rx_usecs`, with a unit:
    /// "50us"); the NIC rounds down to 2.048 us steps. At most 1022us (ixgbe's range).
    #[serde(alias = "rx_usecs")]
    #[schemars(extend("x-aliases" = ["rx_usecs"]))]
    #[schemars(extend("x-linux" = "rx-usecs"))]
    pub interval: Duration,
}

/// `nic.itr.mode = "dynamic"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ItrDynamic {
    /// Interrupt rate of the dynamic "bulk" state: 8000 (ixgbe 3.14, 002) or 12000 (Linux >= 4.4).
    #[serde(default = "default_bulk_rate")]
    #[schemars(range(min = 956, max = 488281), extend("x-quantity" = "an interrupt rate in interrupts per second (ixgbe's range)"))]
    pub bulk_rate: u32,
}

/// `nic.itr.mode = "dim"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ItrDim {
    /// The device's DIM profile table: "mlx5-eqe", "mlx5-cqe" or "ice".
    #[schemars(extend("x-linux" = "priv-flag rx_cqe_moder"))]
    pub profile: DimProfile,
}

fn default_bulk_rate() -> u32 {
    8000
}

impl Default for ItrDynamic {
    fn default() -> Self {
        ItrDynamic { bulk_rate: default_bulk_rate() }
    }
}

impl Default for ItrSpec {
    fn default() -> Self {
        ItrSpec::Dynamic(ItrDynamic::default())
    }
}

impl ItrSpec {
    /// The `mode` value, as the scenario format writes it.
    pub fn name(&self) -> &'static str {
        match self {
            ItrSpec::Off(_) => "off",
            ItrSpec::Static(_) => "static",
            ItrSpec::Dynamic(_) => "dynamic",
            ItrSpec::Dim(_) => "dim",
        }
    }

    /// Each policy's own keys in range.
    fn validate(&self, origin: &str) -> Result<()> {
        match self {
            ItrSpec::Static(s) if s.interval.ps > 1_022_000_000 => Err(ConfigError::new(
                origin,
                "nic.itr.interval",
                Some(format!("{:?}", s.interval.to_string())),
                "at most 1022us (ixgbe's rx-usecs range)",
            )
            .into()),
            _ => Ok(()),
        }
    }
}

impl Tagged for ItrSpec {
    const TAG: &'static str = "mode";
    const DEFAULT: &'static str = "dynamic";
    fn alternatives() -> Vec<(&'static str, Vec<Key>)> {
        vec![
            ("off", leaves::<ItrOff>()),
            ("static", leaves::<ItrStatic>()),
            ("dynamic", leaves::<ItrDynamic>()),
            ("dim", leaves::<ItrDim>()),
        ]
    }
    fn build(name: &str, rest: toml::Table) -> std::result::Result<Self, String> {
        Ok(match name {
            "off" => ItrSpec::Off(part(rest)?),
            "static" => ItrSpec::Static(part(rest)?),
            "dim" => ItrSpec::Dim(part(rest)?),
            _ => ItrSpec::Dynamic(part(rest)?),
        })
    }
}

impl<'de> Deserialize<'de> for ItrSpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        super::tagged::deserialize(d)
    }
}

/// Hard-IRQ deferral of the device's NAPIs (io = "napi"), as `napi_complete_done` applies
/// it: after a poll that did work, up to `defer_hard_irqs` consecutive empty polls are driven
/// by a timer every `gro_flush_timeout` instead of unmasking the interrupt.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NapiSpec {
    /// `napi_defer_hard_irqs` (sysfs; netlink `defer-hard-irqs`; also accepted as
    /// `napi_defer_hard_irqs`): empty polls the timer drives before the interrupt is
    /// unmasked again; 0 disables deferral.
    #[serde(default, alias = "napi_defer_hard_irqs")]
    #[schemars(extend("x-aliases" = ["napi_defer_hard_irqs"]))]
    #[schemars(range(min = 0, max = 2147483647), extend("x-quantity" = "a number of empty polls (the kernel's s32)"))]
    #[schemars(extend("x-linux" = "napi_defer_hard_irqs"))]
    pub defer_hard_irqs: u32,
    /// `gro_flush_timeout`: the deferral timer's period; 0 disables deferral.
    #[serde(default)]
    #[schemars(extend("x-linux" = "gro_flush_timeout"))]
    pub gro_flush_timeout: Duration,
    /// `/sys/class/net/DEV/threaded`: each NAPI is polled by its own kernel thread, which
    /// the hard IRQ wakes (`[host.thread]` gives its wake-up latency and cost) instead of
    /// the NET_RX softirq: no netdev_budget, no time limit.
    #[serde(default)]
    #[schemars(extend("x-linux" = "threaded"))]
    pub threaded: bool,
    /// `irq_suspend_timeout` (Linux 6.13, per NAPI through netlink): while epoll's
    /// preferred busy polling finds events, interrupts stay suspended for up to this long;
    /// when it finds none, the NAPI is scheduled and normal deferral takes over. Needs an
    /// epoll reader with `socket.prefer_busy_poll` and deferral; `socket.busy_poll` may be 0.
    #[serde(default)]
    #[schemars(extend("x-linux" = "irq-suspend-timeout"))]
    pub irq_suspend_timeout: Duration,
}

impl NapiSpec {
    /// Whether the NAPI defers its interrupt: `napi_defer_hard_irqs` and
    /// `gro_flush_timeout` both above 0 (`napi_complete_done` arms the timer only then).
    pub fn defers(&self) -> bool {
        self.defer_hard_irqs > 0 && self.gro_flush_timeout.ps > 0
    }
}

/// The NIC: rx and tx rings, refill and interrupt generation (ixgbe semantics).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NicSpec {
    /// Rx descriptors per ring, `ethtool -G rx` (one is always left empty, as in ixgbe).
    #[serde(default = "default_ring")]
    #[schemars(range(min = 2, max = 65536), extend("x-quantity" = "a number of descriptors"))]
    #[schemars(extend("x-linux" = "ethtool -G rx"))]
    pub rx_ring: u32,
    /// Tx descriptors per ring, `ethtool -G tx`.
    #[serde(default = "default_ring")]
    #[schemars(range(min = 2, max = 65536), extend("x-quantity" = "a number of descriptors"))]
    #[schemars(extend("x-linux" = "ethtool -G tx"))]
    pub tx_ring: u32,
    /// From the frame's last bit on the wire to its descriptor written back (DMA).
    #[serde(default)]
    pub dma_delay: Duration,
    /// From an interrupt's cause (once its moderation lets it fire) to its handler running:
    /// its delivery. The vector stays masked meanwhile, so frames that come then ride along.
    /// Default 0: an MSI-X message reaches a bare-metal core in well under a microsecond. On
    /// a KVM guest an interrupt between vCPUs (an RPS IPI) is injected by the hypervisor:
    /// about 25 us on the testbed's guest (`pktsim testbed validate --path share` takes it
    /// from its wake probe).
    #[serde(default)]
    pub irq_delay: Duration,
    #[serde(default)]
    pub tx_vector: TxVector,
    /// Rx descriptors are returned to the NIC in batches of at least this many
    /// (`IXGBE_RX_BUFFER_WRITE` = 16), at the top of each rx-clean iteration.
    #[serde(default = "default_refill_batch")]
    pub refill_batch: u32,
    /// Also return the remainder at the end of every rx clean (ixgbe 3.14; modern drivers
    /// leave it for the next poll).
    #[serde(default = "yes")]
    pub refill_at_poll_end: bool,
    /// Most completed tx packets one poll cleans (`IXGBE_DEFAULT_TX_WORK`).
    #[serde(default = "default_tx_work")]
    #[schemars(range(min = 1, max = 1048576), extend("x-quantity" = "a number of packets"))]
    pub tx_work_limit: u32,
    /// Packets the qdisc holds while the tx ring is full (`ip link ... txqueuelen`, also
    /// accepted as `txqueuelen`).
    #[serde(default = "default_qdisc", alias = "txqueuelen")]
    #[schemars(extend("x-aliases" = ["txqueuelen"]))]
    #[schemars(range(min = 0, max = 16777216), extend("x-quantity" = "a number of packets"))]
    pub qdisc_len: u32,
    #[serde(default)]
    pub itr: ItrSpec,
    /// Per-NAPI settings (`/sys/class/net/DEV/napi_defer_hard_irqs`, `gro_flush_timeout`).
    #[serde(default)]
    pub napi: NapiSpec,
    /// Rx queues per core, highest priority first (filters name them; one ring each).
    #[serde(default = "default_queues")]
    pub queues: Vec<String>,
    /// Queue for packets no filter matches (default: the last of `queues`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_queue: Option<String>,
    /// n-tuple / priority rules, first match wins (after RSS has chosen the core).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub filters: Vec<Filter>,
    /// Tx queues on the egress port (default: one per core). Cores share queue
    /// `core % tx_queues` and pay host.tx_lock per packet for its lock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 4096), extend("x-quantity" = "a number of tx queues"))]
    pub tx_queues: Option<u32>,
}

/// One classification rule; every given field must match.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Filter {
    /// Queue (a name in nic.queues) matching packets go to.
    pub queue: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tos: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dscp: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vlan_pcp: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proto: Option<Proto>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dst_port: Option<u16>,
    /// Source address prefix, e.g. "198.18.1.0/24".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub src: Option<String>,
    /// Destination address prefix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dst: Option<String>,
}

fn default_queues() -> Vec<String> {
    vec!["default".to_string()]
}

fn default_ring() -> u32 {
    512
}
fn default_refill_batch() -> u32 {
    16
}
fn default_tx_work() -> u32 {
    256
}
fn default_qdisc() -> u32 {
    1000
}
fn yes() -> bool {
    true
}

impl Default for NicSpec {
    fn default() -> Self {
        NicSpec {
            rx_ring: default_ring(),
            tx_ring: default_ring(),
            dma_delay: Duration::default(),
            irq_delay: Duration::default(),
            tx_vector: TxVector::default(),
            refill_batch: default_refill_batch(),
            refill_at_poll_end: true,
            tx_work_limit: default_tx_work(),
            qdisc_len: default_qdisc(),
            itr: ItrSpec::default(),
            napi: NapiSpec::default(),
            queues: default_queues(),
            default_queue: None,
            filters: Vec::new(),
            tx_queues: None,
        }
    }
}

impl NicSpec {
    /// Ring, refill, tx-work and qdisc sizes in range; the moderation policy's own keys
    /// ([`ItrSpec`]); queue names given once; filters naming known
    /// queues, with valid prefixes, DSCP and PCP; tx queues from 1 to 4096.
    pub(super) fn validate(&self, origin: &str) -> Result<()> {
        let range = |path: &str, v: u64, lo: u64, hi: u64, what: &str| check_range(origin, path, v, lo, hi, what);
        range(
            "nic.refill_batch",
            self.refill_batch as u64,
            1,
            self.rx_ring as u64,
            "a number of descriptors (at most nic.rx_ring)",
        )?;
        self.itr.validate(origin)?;
        if self.queues.is_empty() {
            return Err(ConfigError::new(origin, "nic.queues", Some("[]".into()), "at least one queue name").into());
        }
        for (i, q) in self.queues.iter().enumerate() {
            if self.queues[..i].contains(q) {
                return Err(ConfigError::new(
                    origin,
                    format!("nic.queues[{i}]"),
                    Some(format!("{q:?}")),
                    "a name not used twice",
                )
                .into());
            }
        }
        let known = |path: String, q: &str| -> Result<()> {
            if self.queues.iter().any(|x| x == q) {
                Ok(())
            } else {
                Err(ConfigError::new(
                    origin,
                    path,
                    Some(format!("{q:?}")),
                    format!("one of nic.queues ({})", self.queues.join(", ")),
                )
                .into())
            }
        };
        if let Some(d) = &self.default_queue {
            known("nic.default_queue".into(), d)?;
        }
        for (i, f) in self.filters.iter().enumerate() {
            known(format!("nic.filters[{i}].queue"), &f.queue)?;
            for (key, v) in [("src", &f.src), ("dst", &f.dst)] {
                if let Some(v) = v {
                    if parse_prefix(v).is_none() {
                        return Err(ConfigError::new(
                            origin,
                            format!("nic.filters[{i}].{key}"),
                            Some(format!("{v:?}")),
                            "an IPv4 prefix such as \"198.18.0.0/15\"",
                        )
                        .into());
                    }
                }
            }
            if f.dscp.is_some_and(|d| d > 63) {
                return Err(ConfigError::new(
                    origin,
                    format!("nic.filters[{i}].dscp"),
                    f.dscp.map(|d| d.to_string()),
                    "a DSCP from 0 to 63",
                )
                .into());
            }
            if f.vlan_pcp.is_some_and(|d| d > 7) {
                return Err(ConfigError::new(
                    origin,
                    format!("nic.filters[{i}].vlan_pcp"),
                    f.vlan_pcp.map(|d| d.to_string()),
                    "a priority code point from 0 to 7",
                )
                .into());
            }
        }
        Ok(())
    }
}

/// `"198.18.0.0/15"` -> (address, prefix length).
pub fn parse_prefix(text: &str) -> Option<(u32, u8)> {
    let (addr, len) = match text.split_once('/') {
        Some((a, l)) => (a, l.parse::<u8>().ok()?),
        None => (text, 32),
    };
    if len > 32 {
        return None;
    }
    let ip: std::net::Ipv4Addr = addr.trim().parse().ok()?;
    Some((u32::from(ip), len))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::config_error;

    /// `[nic]` from TOML text, read and checked as a scenario's.
    fn nic(text: &str) -> Result<NicSpec> {
        #[derive(Deserialize)]
        struct File {
            nic: NicSpec,
        }
        let f: File = crate::loader::deserialize_toml(text, "t")?;
        super::super::ranges::check(&toml::from_str(text).expect("TOML"), "t")?;
        f.nic.validate("t")?;
        Ok(f.nic)
    }

    #[test]
    fn the_mode_picks_the_policy_and_its_keys() {
        let us = |n: u64| Duration::from_ps(n * 1_000_000);
        let itr = |text: &str| nic(&format!("[nic.itr]\n{text}")).map(|n| n.itr);
        assert_eq!(itr("").unwrap(), ItrSpec::Dynamic(ItrDynamic { bulk_rate: 8000 }));
        assert_eq!(itr("bulk_rate = 12000").unwrap(), ItrSpec::Dynamic(ItrDynamic { bulk_rate: 12000 }));
        assert_eq!(itr("mode = \"off\"").unwrap(), ItrSpec::Off(ItrOff {}));
        assert_eq!(
            itr("mode = \"static\"\ninterval = \"50us\"").unwrap(),
            ItrSpec::Static(ItrStatic { interval: us(50) })
        );
        assert_eq!(
            itr("mode = \"static\"\nrx_usecs = \"20us\"").unwrap(),
            ItrSpec::Static(ItrStatic { interval: us(20) })
        );
        assert_eq!(
            itr("mode = \"dim\"\nprofile = \"ice\"").unwrap(),
            ItrSpec::Dim(ItrDim { profile: DimProfile::Ice })
        );
        // Written out as read, the tag first.
        let text = toml::to_string(&ItrSpec::Static(ItrStatic { interval: us(50) })).unwrap();
        assert_eq!(text, "mode = \"static\"\ninterval = \"50us\"\n");
    }

    #[test]
    fn the_alternatives_are_the_formats_own() {
        // The tag values the reader knows are those serde writes.
        let written: Vec<String> = [
            ItrSpec::Off(ItrOff {}),
            ItrSpec::Static(ItrStatic { interval: Duration::from_ps(1) }),
            ItrSpec::Dynamic(ItrDynamic::default()),
            ItrSpec::Dim(ItrDim { profile: DimProfile::Ice }),
        ]
        .iter()
        .map(|i| {
            assert_eq!(serde_json::to_value(i).unwrap()["mode"], i.name());
            i.name().to_string()
        })
        .collect();
        let known: Vec<&str> = ItrSpec::alternatives().iter().map(|(n, _)| *n).collect();
        assert_eq!(written, known);
        let keys: Vec<Vec<&str>> =
            ItrSpec::alternatives().iter().map(|(_, k)| k.iter().map(|k| k.name).collect()).collect();
        assert_eq!(keys, [vec![], vec!["interval", "rx_usecs"], vec!["bulk_rate"], vec!["profile"]]);
    }

    #[test]
    fn static_itr_needs_an_interval() {
        let e = nic("[nic.itr]\nmode = \"static\"").unwrap_err().to_string();
        assert_eq!(e, "t: nic.itr.interval: a value with nic.itr.mode = \"static\", which has no default for it");
        let e = nic("[nic.itr]\nmode = \"static\"\ninterval = \"1023us\"").unwrap_err().to_string();
        assert_eq!(e, "t: nic.itr.interval = \"1023us\": expected at most 1022us (ixgbe's rx-usecs range)");
        let e = nic("[nic.itr]\nmode = \"static\"\ninterval = 50").unwrap_err();
        assert_eq!(config_error::<()>(Err(e)).path, "nic.itr.interval");
    }

    #[test]
    fn a_key_of_another_policy_is_refused_naming_the_policies_that_read_it() {
        let e = nic("[nic.itr]\nmode = \"dynamic\"\ninterval = \"50us\"").unwrap_err().to_string();
        assert_eq!(e, "t: nic.itr.interval = \"50us\": expected no nic.itr.interval with nic.itr.mode = \"dynamic\" (only nic.itr.mode = \"static\" reads it)");
        let e = nic("[nic.itr]\nmode = \"off\"\nrx_usecs = \"50us\"").unwrap_err().to_string();
        assert_eq!(e, "t: nic.itr.rx_usecs = \"50us\": expected no nic.itr.rx_usecs with nic.itr.mode = \"off\" (only nic.itr.mode = \"static\" reads it)");
        let e = nic("[nic.itr]\nprofile = \"mlx5-cqe\"").unwrap_err().to_string();
        assert_eq!(e, "t: nic.itr.profile = \"mlx5-cqe\": expected no nic.itr.profile with nic.itr.mode = \"dynamic\" (only nic.itr.mode = \"dim\" reads it)");
        assert_eq!(
            nic("[nic.itr]\nmode = \"dim\"").unwrap_err().to_string(),
            "t: nic.itr.profile: a value with nic.itr.mode = \"dim\", which has no default for it"
        );
        let e = nic("[nic.itr]\nmode = \"dim\"\nprofile = \"mlx6\"").unwrap_err().to_string();
        assert!(e.starts_with("t: nic.itr.profile = \"mlx6\": expected one of"), "{e}");
    }

    #[test]
    fn an_unknown_mode_or_key_is_refused_with_a_hint() {
        let e = nic("[nic.itr]\nmode = \"statc\"").unwrap_err().to_string();
        assert_eq!(
            e,
            "t: nic.itr.mode = \"statc\": expected one of `off`, `static`, `dynamic`, `dim` (did you mean `static`?)"
        );
        let e = nic("[nic.itr]\nmode = 5").unwrap_err().to_string();
        assert_eq!(e, "t: nic.itr.mode = 5: expected a string, one of `off`, `static`, `dynamic`, `dim`");
        let e = nic("[nic.itr]\nmode = \"static\"\nintervl = \"5us\"").unwrap_err().to_string();
        assert_eq!(e, "t: nic.itr.intervl: no such key here: did you mean `interval`? (known keys: `mode`, `interval`, `rx_usecs`)");
        let e = nic("[nic.itr]\nbulk_rate = 100").unwrap_err().to_string();
        assert_eq!(e, "t: nic.itr.bulk_rate = 100: expected an interrupt rate in interrupts per second (ixgbe's range) from 956 to 488281");
    }

    #[test]
    fn the_refill_batch_fits_the_ring() {
        let nic = NicSpec { rx_ring: 64, refill_batch: 64, ..NicSpec::default() };
        assert!(nic.validate("t").is_ok());
        let nic = NicSpec { rx_ring: 64, refill_batch: 65, ..NicSpec::default() };
        assert_eq!(
            config_error(nic.validate("t")).to_string(),
            "t: nic.refill_batch = 65: expected a number of descriptors (at most nic.rx_ring) from 1 to 64"
        );
    }

    #[test]
    fn queue_names_are_unique_and_filters_name_them() {
        let queues = vec!["hi".to_string(), "lo".to_string()];
        let nic = NicSpec { queues: vec!["hi".into(), "hi".into()], ..NicSpec::default() };
        assert_eq!(config_error(nic.validate("t")).path, "nic.queues[1]");
        let filter = Filter {
            queue: "hi".into(),
            tos: None,
            dscp: Some(46),
            vlan_pcp: None,
            proto: None,
            dst_port: None,
            src: Some("10.0.0.0/8".into()),
            dst: None,
        };
        let nic = NicSpec { queues: queues.clone(), filters: vec![filter.clone()], ..NicSpec::default() };
        assert!(nic.validate("t").is_ok());
        let nic = NicSpec {
            queues: queues.clone(),
            filters: vec![Filter { queue: "mid".into(), ..filter.clone() }],
            ..NicSpec::default()
        };
        assert_eq!(
            config_error(nic.validate("t")).to_string(),
            "t: nic.filters[0].queue = \"mid\": expected one of nic.queues (hi, lo)"
        );
        let nic = NicSpec {
            queues: queues.clone(),
            filters: vec![Filter { dst: Some("10.0.0.0/33".into()), ..filter.clone() }],
            ..NicSpec::default()
        };
        assert_eq!(config_error(nic.validate("t")).path, "nic.filters[0].dst");
        let nic = NicSpec {
            queues: queues.clone(),
            filters: vec![Filter { dscp: Some(64), ..filter.clone() }],
            ..NicSpec::default()
        };
        assert_eq!(config_error(nic.validate("t")).path, "nic.filters[0].dscp");
        let nic = NicSpec {
            queues: queues.clone(),
            filters: vec![Filter { vlan_pcp: Some(8), ..filter }],
            ..NicSpec::default()
        };
        assert_eq!(config_error(nic.validate("t")).path, "nic.filters[0].vlan_pcp");
        let nic = NicSpec { queues, default_queue: Some("mid".into()), ..NicSpec::default() };
        assert_eq!(config_error(nic.validate("t")).path, "nic.default_queue");
    }

    #[test]
    fn prefixes_are_ipv4_with_at_most_32_bits() {
        assert_eq!(parse_prefix("198.18.0.0/15"), Some((0xC612_0000, 15)));
        assert_eq!(parse_prefix("10.1.2.3"), Some((0x0A01_0203, 32)));
        assert_eq!(parse_prefix("10.0.0.0/33"), None);
        assert_eq!(parse_prefix("10.0.0/8"), None);
    }
}
