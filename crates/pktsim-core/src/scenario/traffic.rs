//! `[traffic]`: the offered traffic and its sources, frame sizes, and their checks: frame
//! sizes, flows, shares, and the offered rate against the link's line rate.

use schemars::JsonSchema;
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};

use std::path::Path;
use std::sync::Arc;

use super::link::{line_rate_pps, Link};
use super::stalls::Stalls;
use super::tagged::{self, Key, Keys, Tagged};
use crate::error::{join_path, ConfigError, Result, VALUE_SEP};
use crate::trace::{TraceSummary, Window};
use crate::units::{Bytes, Duration, OfferedRate, Percent, TimeSpan};

/// Smallest and largest Ethernet frame pktsim accepts (FCS included).
pub const MIN_FRAME_BYTES: u64 = 64;
pub const MAX_FRAME_BYTES: u64 = 9216;

/// Arrival process of a traffic source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Pattern {
    /// Constant bit rate: evenly spaced packets.
    #[default]
    Cbr,
    /// Poisson arrivals (exponential gaps).
    Poisson,
    /// Gaps of the source's mean and coefficient of variation `cv`: normally distributed
    /// up to cv 1/3, gamma distributed above (shape 1/cv^2: never negative, so the mean
    /// rate holds for any cv).
    Normal,
    /// Bursts of `burst` frames back to back at the line rate, burst starts spaced by
    /// gaps of coefficient of variation `cv` (drawn as for "normal"), at the source's mean rate (001 VI-A); a software
    /// generator sending `burst` frames per call is this.
    Burst,
    /// On-off: ON periods (exponential, mean `on`) at a constant peak rate, OFF periods
    /// (exponential, mean `off`) silent; the peak is the source's mean rate times
    /// (on + off) / on.
    OnOff,
    /// A two-state Markov-modulated Poisson process: Poisson arrivals at a high rate for
    /// exponential periods of mean `on` and at a rate `peak` times lower for periods of
    /// mean `off`, the two rates set so that the mean is the source's rate.
    Mmpp,
}

/// Frame sizes: one size, or a weighted mix (`[["64B", 7], ["576B", 4], ["1500B", 1]]`),
/// or `"imix"` (that 7:4:1 mix).
#[derive(Debug, Clone, PartialEq)]
pub enum PacketSize {
    Fixed(Bytes),
    Mix(Vec<(Bytes, f64)>),
}

impl Default for PacketSize {
    fn default() -> Self {
        PacketSize::Fixed(Bytes::new(64))
    }
}

impl PacketSize {
    pub fn imix() -> Self {
        PacketSize::Mix(vec![(Bytes::new(64), 7.0), (Bytes::new(576), 4.0), (Bytes::new(1500), 1.0)])
    }
    /// `(size, probability)` pairs. Weights whose sum overflows are scaled by the largest
    /// first, so that any finite weights have their shares (1e308 and 1e308 are half and
    /// half).
    pub fn distribution(&self) -> Vec<(u64, f64)> {
        match self {
            PacketSize::Fixed(b) => vec![(b.bytes, 1.0)],
            PacketSize::Mix(m) => {
                let total: f64 = m.iter().map(|(_, w)| w).sum();
                if total.is_finite() {
                    return m.iter().map(|(b, w)| (b.bytes, w / total)).collect();
                }
                let max = m.iter().map(|(_, w)| *w).fold(0.0, f64::max);
                let total: f64 = m.iter().map(|(_, w)| w / max).sum();
                m.iter().map(|(b, w)| (b.bytes, w / max / total)).collect()
            }
        }
    }
    pub fn mean_bytes(&self) -> f64 {
        self.distribution().iter().map(|(b, p)| *b as f64 * p).sum()
    }
}

impl Serialize for PacketSize {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            PacketSize::Fixed(b) => b.serialize(s),
            PacketSize::Mix(m) => {
                let v: Vec<(String, f64)> = m.iter().map(|(b, w)| (b.to_string(), *w)).collect();
                v.serialize(s)
            }
        }
    }
}

impl<'de> Deserialize<'de> for PacketSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        const EXPECTED: &str =
            "a frame size (\"64B\"), \"imix\", or a list of [size, weight] pairs ([[\"64B\", 7], [\"1500B\", 1]])";
        impl<'de> Visitor<'de> for V {
            type Value = PacketSize;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(EXPECTED)
            }
            fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<PacketSize, E> {
                if v.trim().eq_ignore_ascii_case("imix") {
                    return Ok(PacketSize::imix());
                }
                Bytes::parse(v).map(PacketSize::Fixed).map_err(|e| {
                    let negative = if e.expected.contains("negative") { " (must not be negative)" } else { "" };
                    E::custom(format!("{:?}{VALUE_SEP}{EXPECTED}{negative}", e.value))
                })
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> std::result::Result<PacketSize, E> {
                Err(E::custom(format!("{v}{VALUE_SEP}{EXPECTED}, with its unit (a bare number has no unit)")))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> std::result::Result<PacketSize, E> {
                self.visit_i64(v as i64)
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> std::result::Result<PacketSize, E> {
                Err(E::custom(format!("{v}{VALUE_SEP}{EXPECTED}, with its unit (a bare number has no unit)")))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<PacketSize, A::Error> {
                let mut out = Vec::new();
                while let Some((size, weight)) = seq.next_element::<(Bytes, f64)>()? {
                    if !(weight.is_finite() && weight > 0.0) {
                        return Err(de::Error::custom(format!(
                            "{weight}{VALUE_SEP}a positive, finite weight for {size}"
                        )));
                    }
                    out.push((size, weight));
                }
                if out.is_empty() {
                    return Err(de::Error::custom(format!("[]{VALUE_SEP}{EXPECTED} (the list is empty)")));
                }
                Ok(PacketSize::Mix(out))
            }
        }
        d.deserialize_any(V)
    }
}

impl JsonSchema for PacketSize {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "PacketSize".into()
    }
    fn json_schema(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let bytes = g.subschema_for::<Bytes>();
        schemars::json_schema!({
            "description": "Frame size (FCS included): one size, \"imix\", or [[size, weight], ...]",
            "anyOf": [
                bytes,
                {"const": "imix"},
                {"type": "array", "minItems": 1, "items": {"type": "array", "prefixItems": [bytes, {"type": "number", "exclusiveMinimum": 0}], "minItems": 2, "maxItems": 2}}
            ]
        })
    }
}

/// The offered traffic: synthetic sources or a trace to replay (the tagged section
/// `traffic.kind`, implied by `traffic.pcap`), at the offered rate `rate`.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Traffic {
    /// Total offered rate (default: the line rate); with a trace, the trace's mean rate,
    /// its gaps scaled keeping their shape (engine/trace.rs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<OfferedRate>,
    #[serde(flatten)]
    pub kind: TrafficKind,
}

impl Default for Traffic {
    fn default() -> Self {
        Traffic { rate: None, kind: TrafficKind::Synthetic(Synthetic::default()) }
    }
}

/// The key every kind of traffic reads (`[traffic]` beside `kind`).
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Offered {
    #[serde(default)]
    rate: Option<OfferedRate>,
}

impl<'de> Deserialize<'de> for Traffic {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let mut table = toml::Table::deserialize(d)?;
        let Offered { rate } =
            tagged::part(tagged::take(&mut table, &tagged::leaves::<Offered>())).map_err(de::Error::custom)?;
        let kind = tagged::read_tagged(table).map_err(de::Error::custom)?;
        Ok(Traffic { rate, kind })
    }
}

/// Where the frames come from (`traffic.kind`).
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "kebab-case")]
#[schemars(transform = tagged::schema_default::<TrafficKind>)]
#[schemars(transform = pcap_implies_its_kind)]
pub enum TrafficKind {
    /// Synthetic sources: an arrival pattern, frame sizes and flows, one source or several
    /// sharing the rate (the default).
    Synthetic(Synthetic),
    /// A packet trace replayed (implied by `pcap`).
    Pcap(PcapReplay),
}

impl Tagged for TrafficKind {
    const TAG: &'static str = "kind";
    const DEFAULT: &'static str = "synthetic";
    fn alternatives() -> Vec<(&'static str, Vec<Key>)> {
        vec![("synthetic", Synthetic::keys()), ("pcap", PcapReplay::keys())]
    }
    fn build(name: &str, rest: toml::Table) -> std::result::Result<Self, String> {
        Ok(match name {
            "pcap" => TrafficKind::Pcap(Keys::read(rest)?),
            _ => TrafficKind::Synthetic(Keys::read(rest)?),
        })
    }
    fn common() -> Vec<Key> {
        tagged::leaves::<Offered>()
    }
    fn implied(section: &toml::Table) -> Option<&'static str> {
        section.contains_key("pcap").then_some("pcap")
    }
}

/// The schema of `[traffic]` as files give it: with `pcap`, `kind` may be left out (and
/// the table is then not synthetic).
fn pcap_implies_its_kind(schema: &mut schemars::Schema) {
    let Some(alternatives) = schema.get_mut("oneOf").and_then(|v| v.as_array_mut()) else { return };
    for alt in alternatives {
        let kind = alt.pointer("/properties/kind/const").and_then(|c| c.as_str()).map(str::to_string);
        let Some(alt) = alt.as_object_mut() else { continue };
        match kind.as_deref() {
            Some("pcap") => {
                if let Some(required) = alt.get_mut("required").and_then(|r| r.as_array_mut()) {
                    required.retain(|k| k != "kind");
                }
            }
            _ => {
                alt.insert("not".into(), serde_json::json!({"required": ["pcap"]}));
            }
        }
    }
}

/// Synthetic sources (`traffic.kind = "synthetic"`, the default).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Synthetic {
    /// Arrival process (default for sources that do not say).
    #[serde(default)]
    pub pattern: Pattern,
    /// Frame size (FCS included).
    #[serde(default)]
    pub size: PacketSize,
    /// Distinct flows (5-tuples; each with its own destination).
    #[serde(default = "one_u64")]
    pub flows: u64,
    /// Several sources sharing the total rate; each inherits what it does not set.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<Source>,
    /// The offered rate over the run, as a share of `rate`: from each point's time (from
    /// the start of the run, warm-up included) the share it gives, stepped to or, with
    /// `ramp = true`, ramped linearly from the point before; before the first point, the
    /// first point's share (default: `rate` throughout).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub schedule: Vec<RatePoint>,
    /// The sender's stalls, by kind: frames due while it is away leave together when it
    /// is back.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stalls: Vec<Stalls>,
}

/// One point of `traffic.schedule`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RatePoint {
    /// When, from the start of the run.
    pub at: TimeSpan,
    /// The share of `traffic.rate` offered from then ("50%"; up to "1000%").
    pub rate: Percent,
    /// Ramp linearly from the point before (else: a step at `at`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub ramp: bool,
}

impl Default for Synthetic {
    fn default() -> Self {
        Synthetic {
            pattern: Pattern::default(),
            size: PacketSize::default(),
            flows: 1,
            sources: Vec::new(),
            schedule: Vec::new(),
            stalls: Vec::new(),
        }
    }
}

impl Synthetic {
    /// `schedule` in order of time, each share from 0% to 1000%, a ramp only after a point.
    fn check_schedule(&self, origin: &str) -> Result<()> {
        for (i, p) in self.schedule.iter().enumerate() {
            let path = format!("traffic.schedule[{i}]");
            let err = |key: &str, value: String, expected: &str| -> crate::error::Error {
                ConfigError::new(origin, join_path(&path, key), Some(value), expected).into()
            };
            if !(p.rate.fraction.is_finite() && (0.0..=10.0).contains(&p.rate.fraction)) {
                return Err(err(
                    "rate",
                    format!("{:?}", p.rate.to_string()),
                    "a share of traffic.rate from 0% to 1000%",
                ));
            }
            if i > 0 && p.at.ps <= self.schedule[i - 1].at.ps {
                return Err(err(
                    "at",
                    format!("{:?}", p.at.to_string()),
                    "a time after the point before's (the points in order of time)",
                ));
            }
            if i == 0 && p.ramp {
                return Err(err("ramp", "true".into(), "no ramp on the first point (there is nothing to ramp from)"));
            }
        }
        if !self.schedule.is_empty() && self.schedule.iter().all(|p| p.rate.fraction == 0.0) {
            return Err(ConfigError::new(origin, "traffic.schedule", None, "at least one point above 0%").into());
        }
        Ok(())
    }

    /// The schedule as the generator takes it: (time in ps, share, ramp) per point.
    pub fn schedule_points(&self) -> Vec<(f64, f64, bool)> {
        self.schedule.iter().map(|p| (p.at.ps as f64, p.rate.fraction, p.ramp)).collect()
    }
}

/// A packet trace replayed (`traffic.kind = "pcap"`, implied by `traffic.pcap`): arrival
/// times, frame sizes (original length + 4 B FCS) and flows (5-tuples, for RSS and
/// filters) come from it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PcapReplay {
    /// A pcap or pcapng file (path relative to the scenario file).
    pub pcap: String,
    /// Multiply the trace's rate by this (its gaps divided by it; not with `rate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_scale: Option<f64>,
    /// Replay the trace (or its window) again and again, one pass after another, for a run
    /// longer than the trace.
    #[serde(default, rename = "loop", skip_serializing_if = "is_false")]
    pub looped: bool,
    /// Replay the trace from this long after its first frame (default: from its first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcap_start: Option<TimeSpan>,
    /// Replay this much of the trace, from `pcap_start` (default: to its end).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcap_length: Option<TimeSpan>,
}

crate::plain_keys!(Synthetic, PcapReplay);

impl Traffic {
    /// Its synthetic sources' keys, if it has them.
    pub fn synthetic(&self) -> Option<&Synthetic> {
        match &self.kind {
            TrafficKind::Synthetic(s) => Some(s),
            TrafficKind::Pcap(_) => None,
        }
    }
    /// The trace it replays, if it replays one.
    pub fn pcap(&self) -> Option<&PcapReplay> {
        match &self.kind {
            TrafficKind::Pcap(p) => Some(p),
            TrafficKind::Synthetic(_) => None,
        }
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn one_u64() -> u64 {
    1
}

/// One traffic source, receiving `share` of `traffic.rate`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Source {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Share of the total offered rate (the shares of all sources add up to 100%).
    pub share: Percent,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<Pattern>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<PacketSize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flows: Option<u64>,
    /// Traffic class for per-class statistics (default: the source's name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
    /// IP TOS byte of its packets (DSCP << 2 | ECN).
    #[serde(default)]
    pub tos: u8,
    /// 802.1Q priority code point, if tagged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vlan_pcp: Option<u8>,
    #[serde(default)]
    pub proto: Proto,
    /// Destination port of its flows (source ports vary per flow).
    #[serde(default = "default_dst_port")]
    pub dst_port: u16,
    /// Coefficient of variation of the gaps (patterns "normal" and "burst"), 0 to 10.
    #[serde(default = "default_cv")]
    #[schemars(range(min = 0.0, max = 10.0))]
    pub cv: f64,
    /// Frames per burst (pattern "burst").
    #[serde(default = "default_burst")]
    pub burst: u32,
    /// Mean length of an ON (high-rate) period (patterns "on-off" and "mmpp"), at least 1 us.
    #[serde(default = "default_period")]
    pub on: Duration,
    /// Mean length of an OFF (silent or low-rate) period (patterns "on-off" and "mmpp"), at
    /// least 1 us.
    #[serde(default = "default_period")]
    pub off: Duration,
    /// Ratio of the high rate to the low rate (pattern "mmpp"), above 1.
    #[serde(default = "default_peak")]
    pub peak: f64,
}

fn default_period() -> Duration {
    Duration::from_ps(100_000_000)
}
fn default_peak() -> f64 {
    4.0
}

fn default_dst_port() -> u16 {
    5001
}
/// The largest `cv` a source takes.
pub const MAX_CV: f64 = 10.0;

fn default_cv() -> f64 {
    0.25
}
fn default_burst() -> u32 {
    32
}

/// Transport protocol of a source's packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Proto {
    #[default]
    Udp,
    Tcp,
}

/// One traffic source after inheritance: what the models use.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedSource {
    pub name: String,
    pub share: f64,
    pub pattern: Pattern,
    pub size: PacketSize,
    pub flows: u64,
    pub class: String,
    pub tos: u8,
    pub vlan_pcp: Option<u8>,
    pub proto: Proto,
    pub dst_port: u16,
    pub cv: f64,
    pub burst: u32,
    /// Mean ON and OFF periods, ps, and the high-to-low rate ratio (on-off, mmpp).
    pub on_ps: f64,
    pub off_ps: f64,
    pub peak: f64,
}

impl ResolvedSource {
    /// A single source with default packet attributes.
    pub fn simple(name: &str, share: f64, pattern: Pattern, size: PacketSize, flows: u64) -> Self {
        ResolvedSource {
            name: name.to_string(),
            share,
            pattern,
            size,
            flows,
            class: name.to_string(),
            tos: 0,
            vlan_pcp: None,
            proto: Proto::Udp,
            dst_port: default_dst_port(),
            cv: default_cv(),
            burst: default_burst(),
            on_ps: default_period().ps as f64,
            off_ps: default_period().ps as f64,
            peak: default_peak(),
        }
    }
}

impl Traffic {
    /// The sources the models use, and the trace replayed if one is: each kind checks its
    /// own keys; the offered rate must fit the link.
    pub(super) fn resolve(
        &self,
        origin: &str,
        base_dir: &Path,
        link: &Link,
    ) -> Result<(Option<Arc<TraceSummary>>, Vec<ResolvedSource>)> {
        let (trace, sources) = match &self.kind {
            TrafficKind::Pcap(p) => {
                let (t, source) = p.resolve(self.rate, origin, base_dir, link)?;
                (Some(t), vec![source])
            }
            TrafficKind::Synthetic(s) => {
                s.check_schedule(origin)?;
                Stalls::validate_all(&s.stalls, origin)?;
                (None, s.resolve_sources(origin)?)
            }
        };
        self.validate_rate(origin, &sources, link)?;
        Ok((trace, sources))
    }
}

impl Synthetic {
    /// Check frame sizes and flows, then the sources (sizes, flows, `cv`, `burst`, shares
    /// adding up to 100%), and resolve each source with what it inherits from `[traffic]`.
    /// Without sources, `[traffic]` itself is the one source.
    pub(super) fn resolve_sources(&self, origin: &str) -> Result<Vec<ResolvedSource>> {
        let check_size = |path: String, size: &PacketSize| -> Result<()> {
            for (b, _) in size.distribution() {
                if !(MIN_FRAME_BYTES..=MAX_FRAME_BYTES).contains(&b) {
                    return Err(ConfigError::new(
                        origin,
                        path,
                        Some(format!("\"{b}B\"")),
                        format!("an Ethernet frame size from {MIN_FRAME_BYTES}B to {MAX_FRAME_BYTES}B (FCS included)"),
                    )
                    .into());
                }
            }
            Ok(())
        };
        let check_flows = |path: String, flows: u64| -> Result<()> {
            if flows == 0 || flows > u32::MAX as u64 {
                return Err(ConfigError::new(
                    origin,
                    path,
                    Some(flows.to_string()),
                    format!("a number of flows from 1 to {}", u32::MAX),
                )
                .into());
            }
            Ok(())
        };
        check_size("traffic.size".into(), &self.size)?;
        check_flows("traffic.flows".into(), self.flows)?;
        if self.sources.is_empty() {
            return Ok(vec![ResolvedSource::simple("traffic", 1.0, self.pattern, self.size.clone(), self.flows)]);
        }
        let mut out = Vec::new();
        let mut total = 0.0;
        for (i, s) in self.sources.iter().enumerate() {
            let p = format!("traffic.sources[{i}]");
            total += s.share.fraction;
            let size = s.size.clone().unwrap_or_else(|| self.size.clone());
            check_size(join_path(&p, "size"), &size)?;
            let flows = s.flows.unwrap_or(self.flows);
            check_flows(join_path(&p, "flows"), flows)?;
            if !(s.cv.is_finite() && (0.0..=MAX_CV).contains(&s.cv)) {
                return Err(ConfigError::new(
                    origin,
                    join_path(&p, "cv"),
                    Some(s.cv.to_string()),
                    "a coefficient of variation from 0 to 10 (at 10 a million gaps give the mean within 1%)",
                )
                .into());
            }
            if s.burst == 0 {
                return Err(ConfigError::new(
                    origin,
                    join_path(&p, "burst"),
                    Some("0".into()),
                    "at least 1 frame per burst",
                )
                .into());
            }
            // The spread and the burst size of the patterns that have them, nowhere else.
            let pattern = s.pattern.unwrap_or(self.pattern);
            if s.cv != default_cv() && !matches!(pattern, Pattern::Normal | Pattern::Burst) {
                return Err(ConfigError::new(
                    origin,
                    join_path(&p, "cv"),
                    Some(s.cv.to_string()),
                    "no cv unless pattern = \"normal\" or \"burst\" (the spread of their gaps)",
                )
                .into());
            }
            if s.burst != default_burst() && pattern != Pattern::Burst {
                return Err(ConfigError::new(
                    origin,
                    join_path(&p, "burst"),
                    Some(s.burst.to_string()),
                    "no burst unless pattern = \"burst\"",
                )
                .into());
            }
            let modulated = matches!(pattern, Pattern::OnOff | Pattern::Mmpp);
            for (key, d) in [("on", s.on), ("off", s.off)] {
                if d != default_period() && !modulated {
                    return Err(ConfigError::new(
                        origin,
                        join_path(&p, key),
                        Some(format!("{:?}", d.to_string())),
                        format!("no {key} unless pattern = \"on-off\" or \"mmpp\" (the mean length of their periods)"),
                    )
                    .into());
                }
                if d.ps < 1_000_000 && modulated {
                    return Err(ConfigError::new(
                        origin,
                        join_path(&p, key),
                        Some(format!("{:?}", d.to_string())),
                        "a mean period of at least 1us",
                    )
                    .into());
                }
            }
            if s.peak != default_peak() && pattern != Pattern::Mmpp {
                return Err(ConfigError::new(
                    origin,
                    join_path(&p, "peak"),
                    Some(s.peak.to_string()),
                    "no peak unless pattern = \"mmpp\"",
                )
                .into());
            }
            if !(s.peak.is_finite() && s.peak > 1.0 && s.peak <= 1e6) {
                return Err(ConfigError::new(
                    origin,
                    join_path(&p, "peak"),
                    Some(s.peak.to_string()),
                    "a ratio of the high rate to the low rate above 1 and at most 1000000",
                )
                .into());
            }
            if let Some(pcp) = s.vlan_pcp.filter(|&d| d > 7) {
                return Err(ConfigError::new(
                    origin,
                    join_path(&p, "vlan_pcp"),
                    Some(pcp.to_string()),
                    "a priority code point from 0 to 7",
                )
                .into());
            }
            let name = s.name.clone().unwrap_or_else(|| format!("source{i}"));
            out.push(ResolvedSource {
                class: s.class.clone().unwrap_or_else(|| name.clone()),
                name,
                share: s.share.fraction,
                pattern,
                size,
                flows,
                tos: s.tos,
                vlan_pcp: s.vlan_pcp,
                proto: s.proto,
                dst_port: s.dst_port,
                cv: s.cv,
                burst: s.burst,
                on_ps: s.on.ps as f64,
                off_ps: s.off.ps as f64,
                peak: s.peak,
            });
        }
        if self.sources.iter().all(|s| s.share.fraction == 0.0) {
            return Err(
                ConfigError::new(origin, "traffic.sources", None, "at least one source with a share above 0%").into()
            );
        }
        if (total - 1.0).abs() > 1e-6 {
            return Err(ConfigError::new(
                origin,
                "traffic.sources",
                Some(format!("shares adding up to {}%", (total * 1e8).round() / 1e6)),
                "shares adding up to 100%".to_string(),
            )
            .into());
        }
        Ok(out)
    }
}

impl Traffic {
    /// The offered rate, if given, is above 0 and at most the line rate of `link` for the
    /// mean frame of the resolved `sources` (an offered load above line rate cannot reach
    /// the node).
    fn validate_rate(&self, origin: &str, sources: &[ResolvedSource], link: &Link) -> Result<()> {
        let mean_frame = mean_frame_bytes(sources);
        let line_rate_pps = line_rate_pps(link.rate.bps, mean_frame, link.overhead.bytes as f64);
        if let Some(rate) = self.rate {
            let offered = rate.to_pps(mean_frame, line_rate_pps);
            if !(offered > 0.0) {
                return Err(ConfigError::new(
                    origin,
                    "traffic.rate",
                    Some(format!("{:?}", rate.to_string())),
                    "an offered rate above 0",
                )
                .into());
            }
            if offered > line_rate_pps * (1.0 + 1e-9) {
                return Err(ConfigError::new(
                    origin,
                    "traffic.rate",
                    Some(format!("{:?}", rate.to_string())),
                    format!(
                        "at most the link's line rate of {:.6} Mpps ({} frames + {} framing on {}); an offered load above line rate cannot reach the node",
                        line_rate_pps / 1e6,
                        fmt_mean_frame(mean_frame),
                        link.overhead,
                        link.rate
                    ),
                )
                .into());
            }
        }
        Ok(())
    }
}

impl PcapReplay {
    /// The trace's window read once (cached), and the one source it stands for (named after
    /// the file; its sizes and flows the trace's); its rate (`rate`, or the trace's own
    /// scaled by `rate_scale`) must fit the link.
    fn resolve(
        &self,
        rate: Option<OfferedRate>,
        origin: &str,
        base_dir: &Path,
        link: &Link,
    ) -> Result<(Arc<TraceSummary>, ResolvedSource)> {
        let err = |key: &str, value: Option<String>, expected: String| -> crate::error::Error {
            ConfigError::new(origin, key, value, expected).into()
        };
        let pcap = &self.pcap;
        if let Some(scale) = self.rate_scale {
            if rate.is_some() {
                return Err(err(
                    "traffic.rate_scale",
                    Some(scale.to_string()),
                    "either traffic.rate or traffic.rate_scale, not both".into(),
                ));
            }
            if !(scale.is_finite() && scale > 0.0) {
                return Err(err(
                    "traffic.rate_scale",
                    Some(scale.to_string()),
                    "a factor above 0 (2.0 doubles the trace's rate)".into(),
                ));
            }
        }
        if self.pcap_length.is_some_and(|l| l.ps == 0) {
            return Err(err("traffic.pcap_length", Some("\"0s\"".into()), "a duration above 0".into()));
        }
        let path = base_dir.join(pcap);
        if let Some(why) = crate::input::why_not_regular(&path) {
            return Err(err("traffic.pcap", Some(format!("{pcap:?}")), format!("a pcap or pcapng file ({why})")));
        }
        let t = TraceSummary::cached(
            &path,
            Window::new(self.pcap_start.map(Into::into), self.pcap_length.map(Into::into)),
        )?;
        if t.packets < 2 || t.span_ps == 0 {
            return Err(err(
                "traffic.pcap",
                Some(format!("{pcap:?}")),
                format!("a trace with at least 2 frames at different times in the part replayed (this one has {} frames over {}s)", t.packets, t.span_ps as f64 / 1e12),
            ));
        }
        let sizes: Vec<(Bytes, f64)> = t.sizes.iter().map(|(&b, &n)| (Bytes::new(b as u64), n as f64)).collect();
        let name = t.class_name();
        let mut src = ResolvedSource::simple(
            &name,
            1.0,
            Pattern::Cbr,
            if sizes.len() == 1 { PacketSize::Fixed(sizes[0].0) } else { PacketSize::Mix(sizes) },
            t.flows.len() as u64,
        );
        src.class = name;
        if rate.is_none() {
            let mean = t.mean_frame_bytes();
            let line = line_rate_pps(link.rate.bps, mean, link.overhead.bytes as f64);
            let pps = t.rate_pps() * self.rate_scale.unwrap_or(1.0);
            if pps > line * (1.0 + 1e-9) {
                return Err(err(
                    if self.rate_scale.is_some() { "traffic.rate_scale" } else { "traffic.pcap" },
                    Some(match self.rate_scale {
                        Some(k) => format!("{k} (the trace at {:.6} Mpps)", pps / 1e6),
                        None => format!("{pcap:?} (a trace of {:.6} Mpps)", pps / 1e6),
                    }),
                    format!("at most the link's line rate of {:.6} Mpps ({} frames + {} framing on {}): lower traffic.rate_scale or raise link.rate", line / 1e6, fmt_mean_frame(mean), link.overhead, link.rate),
                ));
            }
        }
        Ok((t, src))
    }
}

fn fmt_mean_frame(mean: f64) -> String {
    if mean.fract() == 0.0 {
        format!("{mean}B")
    } else {
        format!("{mean:.1}B (mean)")
    }
}

/// Mean frame size over all sources, weighted by their packet-rate shares.
pub fn mean_frame_bytes(sources: &[ResolvedSource]) -> f64 {
    sources.iter().map(|s| s.share * s.size.mean_bytes()).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::config_error;
    use crate::units::{BitRate, PacketRate};

    /// A source with every default but its share.
    fn source(share: &str) -> Source {
        crate::loader::deserialize_toml(&format!("share = {share:?}"), "t").unwrap()
    }

    fn traffic(sources: Vec<Source>) -> Synthetic {
        Synthetic { sources, ..Synthetic::default() }
    }

    /// Weights whose sum overflows a float still give their shares: 1e308 and 1e308 are
    /// half and half (a mean of 782 B), and the imix keeps its 7 : 4 : 1.
    #[test]
    fn mix_weights_are_normalised_without_overflow() {
        let huge = PacketSize::Mix(vec![(Bytes::new(64), 1e308), (Bytes::new(1500), 1e308)]);
        assert_eq!(huge.distribution(), vec![(64, 0.5), (1500, 0.5)]);
        assert_eq!(huge.mean_bytes(), 782.0);
        let tiny = PacketSize::Mix(vec![(Bytes::new(64), 1e-308), (Bytes::new(1500), 3e-308)]);
        assert!((tiny.mean_bytes() - (64.0 + 3.0 * 1500.0) / 4.0).abs() < 1e-9);
        assert!((PacketSize::imix().mean_bytes() - (7.0 * 64.0 + 4.0 * 576.0 + 1500.0) / 12.0).abs() < 1e-9);
    }

    #[test]
    fn shares_add_up_to_100_percent() {
        assert_eq!(traffic(vec![source("30%"), source("70%")]).resolve_sources("t").unwrap().len(), 2);
        let e = config_error(traffic(vec![source("30%"), source("60%")]).resolve_sources("t"));
        assert_eq!(e.to_string(), "t: traffic.sources = shares adding up to 90%: expected shares adding up to 100%");
        let e = config_error(traffic(vec![source("0%"), source("0%")]).resolve_sources("t"));
        assert_eq!(e.to_string(), "t: traffic.sources: at least one source with a share above 0%");
    }

    #[test]
    fn sources_inherit_what_they_do_not_set() {
        let mut t =
            traffic(vec![Source { name: Some("voice".into()), flows: Some(4), ..source("25%") }, source("75%")]);
        t.size = PacketSize::imix();
        t.pattern = Pattern::Poisson;
        let r = t.resolve_sources("t").unwrap();
        assert_eq!((r[0].name.as_str(), r[0].class.as_str(), r[0].flows), ("voice", "voice", 4));
        assert_eq!((r[1].name.as_str(), r[1].flows, r[1].pattern), ("source1", 1, Pattern::Poisson));
        assert_eq!(r[1].size, PacketSize::imix());
    }

    #[test]
    fn frames_are_64_to_9216_bytes_and_sources_are_checked_by_index() {
        let mut t = traffic(vec![]);
        t.size = PacketSize::Fixed(Bytes::new(63));
        assert_eq!(
            config_error(t.resolve_sources("t")).to_string(),
            "t: traffic.size = \"63B\": expected an Ethernet frame size from 64B to 9216B (FCS included)"
        );
        let t =
            traffic(vec![source("50%"), Source { size: Some(PacketSize::Fixed(Bytes::new(9217))), ..source("50%") }]);
        assert_eq!(config_error(t.resolve_sources("t")).path, "traffic.sources[1].size");
        let t = traffic(vec![Source { burst: 0, ..source("100%") }]);
        assert_eq!(config_error(t.resolve_sources("t")).path, "traffic.sources[0].burst");
        let t = traffic(vec![Source { cv: -0.5, ..source("100%") }]);
        assert_eq!(config_error(t.resolve_sources("t")).path, "traffic.sources[0].cv");
        let t = Synthetic { flows: 0, ..traffic(vec![]) };
        assert_eq!(config_error(t.resolve_sources("t")).path, "traffic.flows");
        // Flows are 32-bit in the generator: more are refused, not cut down.
        let t = Synthetic { flows: u32::MAX as u64 + 1, ..traffic(vec![]) };
        assert_eq!(
            config_error(t.resolve_sources("t")).to_string(),
            "t: traffic.flows = 4294967296: expected a number of flows from 1 to 4294967295"
        );
        assert!(Synthetic { flows: u32::MAX as u64, ..traffic(vec![]) }.resolve_sources("t").is_ok());
        let t = traffic(vec![Source { vlan_pcp: Some(8), ..source("100%") }]);
        assert_eq!(config_error(t.resolve_sources("t")).path, "traffic.sources[0].vlan_pcp");
    }

    /// A spread or a burst size is refused where the source's pattern has none (they
    /// would change nothing), and taken where it has.
    #[test]
    fn cv_and_burst_only_with_the_patterns_that_read_them() {
        let with = |pattern, s: Source| traffic(vec![Source { pattern: Some(pattern), ..s }]).resolve_sources("t");
        assert_eq!(
            config_error(with(Pattern::Poisson, Source { cv: 3.0, ..source("100%") })).path,
            "traffic.sources[0].cv"
        );
        assert_eq!(
            config_error(with(Pattern::Cbr, Source { cv: 0.5, ..source("100%") })).path,
            "traffic.sources[0].cv"
        );
        assert_eq!(
            config_error(with(Pattern::Normal, Source { burst: 8, ..source("100%") })).path,
            "traffic.sources[0].burst"
        );
        assert!(with(Pattern::Normal, Source { cv: 0.5, ..source("100%") }).is_ok());
        assert!(with(Pattern::Burst, Source { cv: 0.5, burst: 8, ..source("100%") }).is_ok());
        // The modulated patterns' periods and peak, only with them; periods above 0, a
        // peak above 1.
        let d = |us: u64| Duration::from_ps(us * 1_000_000);
        assert_eq!(
            config_error(with(Pattern::Poisson, Source { on: d(5), ..source("100%") })).path,
            "traffic.sources[0].on"
        );
        assert_eq!(
            config_error(with(Pattern::OnOff, Source { peak: 2.0, ..source("100%") })).path,
            "traffic.sources[0].peak"
        );
        assert_eq!(
            config_error(with(Pattern::Mmpp, Source { off: d(0), ..source("100%") })).path,
            "traffic.sources[0].off"
        );
        assert_eq!(
            config_error(with(Pattern::Mmpp, Source { peak: 1.0, ..source("100%") })).path,
            "traffic.sources[0].peak"
        );
        assert!(with(Pattern::OnOff, Source { on: d(5), off: d(50), ..source("100%") }).is_ok());
        assert!(with(Pattern::Mmpp, Source { on: d(5), peak: 10.0, ..source("100%") }).is_ok());
        // The source's pattern may be the traffic's.
        let mut t = traffic(vec![Source { burst: 8, ..source("100%") }]);
        t.pattern = Pattern::Burst;
        assert!(t.resolve_sources("t").is_ok());
    }

    /// A schedule's points in order of time, shares from 0% to 1000% (one above 0), no
    /// ramp on the first.
    #[test]
    fn a_schedule_is_in_order_with_shares_in_range() {
        let with = |text: &str| {
            let s: Synthetic = crate::loader::deserialize_toml(text, "t").unwrap();
            s.check_schedule("t")
        };
        assert!(
            with("schedule = [{at = \"0s\", rate = \"100%\"}, {at = \"5ms\", rate = \"20%\", ramp = true}]").is_ok()
        );
        assert_eq!(
            config_error(with("schedule = [{at = \"5ms\", rate = \"10%\"}, {at = \"5ms\", rate = \"20%\"}]")).path,
            "traffic.schedule[1].at"
        );
        assert_eq!(
            config_error(with("schedule = [{at = \"0s\", rate = \"10%\", ramp = true}]")).path,
            "traffic.schedule[0].ramp"
        );
        assert_eq!(config_error(with("schedule = [{at = \"0s\", rate = \"1001%\"}]")).path, "traffic.schedule[0].rate");
        assert_eq!(config_error(with("schedule = [{at = \"0s\", rate = \"0%\"}]")).path, "traffic.schedule");
    }

    #[test]
    fn the_offered_rate_is_at_most_the_line_rate() {
        let link = Link { rate: BitRate::from_bps(10e9), overhead: Bytes::new(20) };
        let mut t = Traffic::default();
        let sources = traffic(vec![]).resolve_sources("t").unwrap();
        t.rate = Some(OfferedRate::Packets(PacketRate::from_pps(14.88e6)));
        assert!(t.validate_rate("t", &sources, &link).is_ok());
        t.rate = Some(OfferedRate::Packets(PacketRate::from_pps(14.89e6)));
        let e = config_error(t.validate_rate("t", &sources, &link));
        assert_eq!(e.path, "traffic.rate");
        assert!(
            e.expected
                .starts_with("at most the link's line rate of 14.880952 Mpps (64B frames + 20B framing on 10Gbit/s)"),
            "{e}"
        );
    }
}
