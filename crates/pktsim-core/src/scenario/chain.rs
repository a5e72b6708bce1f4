//! Chain files: nodes in a row, the egress of node i feeding the ingress of node i + 1.
//!
//! ```toml
//! name = "router -> firewall"
//! seed = 1
//! [traffic]            # the chain's traffic: it enters the first node
//! rate = "1Mpps"
//! [measure]            # one measurement window for every node
//! duration = "100ms"
//!
//! [[nodes]]
//! file = "linux-router-64B.toml"   # a scenario file, relative to the chain file
//! [nodes.link]                      # the node's link: the next node is at its other end
//! rate = "10Gbit/s"                 # the node's link.rate (it transmits at it)
//! delay = "5us"                     # propagation delay to the next node
//!
//! [[nodes]]
//! name = "firewall"                 # or the scenario's tables inline
//! [nodes.host]
//! t_proc = "1.2us"
//! ```
//!
//! Each node is a scenario, validated as one: its file's tables, then the chain's (`seed`
//! plus the node's index; `traffic` and `measure` merged into its own), then the node's
//! inline tables on top (a node may name a file and change a few keys). Every node sees
//! the first node's traffic table so made (its classes and flows); only the first node's
//! traffic is generated, the others receive what the node before them transmits. The nodes share the
//! first node's measurement window.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::{ConfigError, Error, Result};
use crate::loader;
use crate::scenario::tagged;
use crate::units::Duration;
use crate::{ResolvedScenario, Scenario};

/// The keys a chain file's top level may hold.
const TOP_KEYS: [&str; 7] = ["name", "description", "seed", "traffic", "measure", "nodes", "sweep"];

/// A validated chain: its nodes as scenarios and the links between them.
#[derive(Debug, Clone)]
pub struct ResolvedChain {
    pub name: String,
    pub seed: u64,
    pub origin: String,
    pub nodes: Vec<ResolvedScenario>,
    /// Each node's name (its `name`, else its file's stem, else "node i").
    pub node_names: Vec<String>,
    /// The link out of node i (the last node's: its own link, to nowhere).
    pub links: Vec<ResolvedLink>,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ResolvedLink {
    pub rate_bps: f64,
    pub delay_ps: u64,
}

/// What `data()` shows of a chain: its name and seed, each node's normalised scenario and
/// the links.
#[derive(Debug, Clone, Serialize)]
pub struct ChainData<'a> {
    pub name: &'a str,
    pub seed: u64,
    pub nodes: Vec<&'a Scenario>,
    pub node_names: &'a [String],
    pub links: &'a [ResolvedLink],
}

impl ResolvedChain {
    pub fn data(&self) -> ChainData<'_> {
        ChainData {
            name: &self.name,
            seed: self.seed,
            nodes: self.nodes.iter().map(|n| &n.scenario).collect(),
            node_names: &self.node_names,
            links: &self.links,
        }
    }
}

/// Whether a parsed file is a chain (it has `nodes`) rather than a scenario.
pub fn is_chain(table: &toml::Table) -> bool {
    table.contains_key("nodes")
}

fn err(origin: &str, path: &str, value: Option<String>, expected: impl Into<String>) -> Error {
    ConfigError::new(origin, path, value, expected.into()).into()
}

/// Merge `over` into `base`, table by table (values of `over` win).
fn merge(base: &mut toml::Table, over: &toml::Table) {
    for (k, v) in over {
        match (base.get_mut(k), v) {
            (Some(toml::Value::Table(b)), toml::Value::Table(o)) => merge(b, o),
            _ => {
                base.insert(k.clone(), v.clone());
            }
        }
    }
}

/// A chain file's table with the `--set` overrides applied (`nodes.1.host.t_proc` sets a
/// node's key, which wins over its file), resolved. An override that switches a node's
/// `host.io` leaves out the node's keys the new mode does not read, with a note, as on a
/// single file ([`Scenario::load_table`]).
pub fn load_table(
    mut table: toml::Table,
    origin: &str,
    base_dir: &Path,
    sets: &[(String, String)],
) -> Result<ResolvedChain> {
    // Each node's own tags (host.io, nic.itr.mode) before the overrides (where the chain
    // gives them).
    let nodes = table.get("nodes").and_then(|n| n.as_array()).map_or(&[][..], Vec::as_slice);
    let empty = toml::Table::new();
    let tags: Vec<_> = nodes.iter().map(|n| tagged::tags(super::TAGGED, n.as_table().unwrap_or(&empty))).collect();
    let nodes = tags.len();
    loader::apply_sets(&mut table, sets)?;
    // The overrides of each node, as a table of their keys.
    let mut given = vec![toml::Table::new(); nodes];
    for (key, value) in sets {
        let dotted = loader::dotted(key.trim());
        let mut parts = dotted.splitn(3, '.');
        if let (Some("nodes"), Some(i), Some(rest)) =
            (parts.next(), parts.next().and_then(|i| i.parse::<usize>().ok()), parts.next())
        {
            // (Only which keys they give counts here: each was applied to the whole table.)
            if let Some(g) = given.get_mut(i) {
                let _ = loader::apply_sets(g, &[(rest.to_string(), value.clone())]);
            }
        }
    }
    resolve_over(&table, origin, base_dir, Some(Overrides { tags, given }))
}

/// Resolve a chain file's table (overrides already applied: `nodes.1.host.t_proc` sets a
/// node's inline key, which wins over its file). Node files are read from `base_dir`.
pub fn resolve(table: &toml::Table, origin: &str, base_dir: &Path) -> Result<ResolvedChain> {
    resolve_over(table, origin, base_dir, None)
}

/// Per node, what the `--set` overrides found and gave (see [`load_table`]).
struct Overrides {
    /// The node's own tags before them ([`tagged::tags`] of its keys).
    tags: Vec<Vec<Option<toml::Value>>>,
    /// The keys they give the node, as a table.
    given: Vec<toml::Table>,
}

/// [`resolve`], with the overrides' [`Overrides`].
fn resolve_over(
    table: &toml::Table,
    origin: &str,
    base_dir: &Path,
    overrides: Option<Overrides>,
) -> Result<ResolvedChain> {
    for k in table.keys() {
        if !TOP_KEYS.contains(&k.as_str()) {
            return Err(err(
                origin,
                k,
                None,
                "a chain file's top level holds name, description, seed, traffic, measure, sweep and [[nodes]] (a node's own tables go under its [[nodes]] entry)",
            ));
        }
    }
    let name = match table.get("name") {
        None => {
            Path::new(origin).file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "chain".into())
        }
        Some(toml::Value::String(s)) => s.clone(),
        Some(v) => return Err(err(origin, "name", Some(v.to_string()), "a string")),
    };
    let seed = match table.get("seed") {
        None => 1,
        Some(toml::Value::Integer(i)) if *i >= 0 => *i as u64,
        Some(v) => return Err(err(origin, "seed", Some(v.to_string()), "a whole number from 0")),
    };
    let sub = |key: &str| -> Result<Option<toml::Table>> {
        match table.get(key) {
            None => Ok(None),
            Some(toml::Value::Table(t)) => Ok(Some(t.clone())),
            Some(v) => Err(err(origin, key, Some(v.to_string()), format!("a table [{key}]"))),
        }
    };
    let (traffic, measure) = (sub("traffic")?, sub("measure")?);
    let nodes = match table.get("nodes") {
        Some(toml::Value::Array(a)) if !a.is_empty() => a,
        Some(toml::Value::Array(_)) => {
            return Err(err(origin, "nodes", Some("[]".into()), "at least one [[nodes]] entry"))
        }
        Some(v) => return Err(err(origin, "nodes", Some(v.to_string()), "a list of [[nodes]] tables")),
        None => return Err(err(origin, "nodes", None, "a list of [[nodes]] tables")),
    };
    if nodes.len() > 64 {
        return Err(err(origin, "nodes", Some(format!("{} nodes", nodes.len())), "at most 64 nodes"));
    }
    let mut tables = Vec::new();
    let mut links = Vec::new();
    let mut origins = Vec::new();
    let mut dirs = Vec::new();
    let mut names = Vec::new();
    // Per node: its file's own host.io where the chain's keys switch it, and those keys.
    let mut tag_notes = Vec::new();
    for (i, node) in nodes.iter().enumerate() {
        let path = format!("nodes.{i}");
        let toml::Value::Table(node) = node else {
            return Err(err(
                origin,
                &path,
                Some(node.to_string()),
                "a table: file = \"node.toml\" or the scenario's tables",
            ));
        };
        let mut inline = node.clone();
        // [nodes.link] is the node's link (its rate: the node transmits at it) with the
        // propagation delay to the next node.
        let delay = match inline.get_mut("link") {
            Some(toml::Value::Table(l)) => match l.remove("delay") {
                Some(v) => Some(loader::deserialize_value::<Duration, _>(v, &format!("{origin}: {path}.link.delay"))?),
                None => None,
            },
            _ => None,
        };
        let from_file = inline.contains_key("file");
        let (mut t, node_origin, dir, stem) = match inline.remove("file") {
            None => (toml::Table::new(), format!("{origin}: {path}"), base_dir.to_path_buf(), None),
            Some(toml::Value::String(f)) => {
                let p = base_dir.join(&f);
                let text = crate::input::read_text(&p).map_err(|e| {
                    let why = match e {
                        Error::Io { source, .. } => source.to_string(),
                        e => e.to_string(),
                    };
                    err(
                        origin,
                        &format!("{path}.file"),
                        Some(format!("{f:?}")),
                        format!("a readable scenario file ({why})"),
                    )
                })?;
                let file_origin = format!("{origin}: {path} ({})", p.display());
                let t = loader::parse_toml_table(&text, &file_origin)?;
                if is_chain(&t) {
                    return Err(err(
                        origin,
                        &format!("{path}.file"),
                        Some(format!("{f:?}")),
                        "a scenario file, not another chain",
                    ));
                }
                let dir = p.parent().map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("."));
                let stem = Path::new(&f).file_stem().map(|s| s.to_string_lossy().into_owned());
                (t, file_origin, dir, stem)
            }
            Some(v) => {
                return Err(err(
                    origin,
                    &format!("{path}.file"),
                    Some(v.to_string()),
                    "a path to a scenario file, relative to the chain file",
                ))
            }
        };
        // The chain's tables, then the node's own keys on top.
        t.insert("seed".into(), toml::Value::Integer((seed + i as u64) as i64));
        // The chain's traffic and measure keys over the node's own (a chain that gives only
        // a rate keeps the first node's pattern, sizes and flows).
        for (key, over) in [("traffic", &traffic), ("measure", &measure)] {
            if let Some(over) = over {
                let mut own = match t.remove(key) {
                    Some(toml::Value::Table(t0)) => t0,
                    _ => toml::Table::new(),
                };
                merge(&mut own, over);
                t.insert(key.into(), toml::Value::Table(own));
            }
        }
        inline.remove("seed").map(|v| t.insert("seed".into(), v));
        // A tagged section's tag switched: by the node's keys over its file's, then by the
        // overrides over the node's own (its keys', else its file's).
        let file_tags = tagged::tags(super::TAGGED, &t);
        merge(&mut t, &inline);
        let mut notes = if from_file { tagged::switch(super::TAGGED, &file_tags, &mut t, &inline) } else { Vec::new() };
        if let Some((own, g)) = overrides.as_ref().and_then(|o| Some((o.tags.get(i)?, o.given.get(i)?))) {
            let own: Vec<_> = own
                .iter()
                .zip(&file_tags)
                .map(|(own, file)| own.clone().or(if from_file { file.clone() } else { None }))
                .collect();
            notes.extend(tagged::switch(super::TAGGED, &own, &mut t, g));
        }
        tag_notes.push(notes);
        let node_name =
            t.get("name").and_then(|v| v.as_str()).map(str::to_string).or(stem).unwrap_or_else(|| format!("node {i}"));
        names.push(node_name);
        tables.push(t);
        links.push(delay);
        origins.push(node_origin);
        dirs.push(dir);
    }
    // Every node sees the first node's traffic (its classes and flows) and window.
    let first = tables[0].get("traffic").cloned();
    for t in tables.iter_mut().skip(1) {
        match &first {
            Some(v) => t.insert("traffic".into(), v.clone()),
            None => t.remove("traffic"),
        };
    }
    let first_measure = tables[0].get("measure").and_then(|m| m.as_table()).cloned().unwrap_or_default();
    for t in tables.iter_mut().skip(1) {
        let m = t.entry("measure").or_insert_with(|| toml::Value::Table(toml::Table::new()));
        if let toml::Value::Table(m) = m {
            for key in ["warmup", "duration"] {
                match first_measure.get(key) {
                    Some(v) => m.insert(key.into(), v.clone()),
                    None => m.remove(key),
                };
            }
        }
    }
    let mut resolved = Vec::new();
    for (((t, o), dir), notes) in tables.into_iter().zip(&origins).zip(&dirs).zip(tag_notes) {
        let s = Scenario::from_table(t, o)?;
        let mut r = s.resolve(o, dir)?;
        r.notes.extend(notes);
        resolved.push(r);
    }
    let links = links
        .iter()
        .zip(&resolved)
        .map(|(delay, n)| ResolvedLink { rate_bps: n.scenario.link.rate.bps, delay_ps: delay.map_or(0, |d| d.ps) })
        .collect();
    Ok(ResolvedChain { name, seed, origin: origin.to_string(), nodes: resolved, node_names: names, links })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain(text: &str) -> Result<ResolvedChain> {
        let t = loader::parse_toml_table(text, "c.toml")?;
        resolve(&t, "c.toml", Path::new("."))
    }

    const TWO: &str = r#"
        seed = 7
        [traffic]
        rate = "100kpps"
        [measure]
        duration = "5ms"
        [[nodes]]
        [nodes.cpu]
        frequency = "3GHz"
        [nodes.host]
        t_proc = "1us"
        [nodes.link]
        rate = "1Gbit/s"
        delay = "10us"
        [[nodes]]
        name = "fw"
        [nodes.cpu]
        frequency = "3GHz"
        [nodes.host]
        t_proc = "2us"
        [nodes.link]
        rate = "10Gbit/s"
        [nodes.measure]
        duration = "1s"
    "#;

    #[test]
    fn nodes_take_the_chains_seed_traffic_and_window() {
        let c = chain(TWO).unwrap();
        assert_eq!(c.nodes.len(), 2);
        assert_eq!(c.node_names, ["node 0", "fw"]);
        assert_eq!((c.nodes[0].scenario.seed, c.nodes[1].scenario.seed), (7, 8));
        assert_eq!(c.nodes[1].scenario.traffic, c.nodes[0].scenario.traffic);
        // One window: the second node's own duration gives way to the first node's.
        assert_eq!(c.nodes[1].scenario.measure.duration, c.nodes[0].scenario.measure.duration);
        assert_eq!(c.links[0], ResolvedLink { rate_bps: 1e9, delay_ps: 10_000_000 });
        assert_eq!(c.links[1].delay_ps, 0);
    }

    /// A node's keys that switch its file's `host.io` leave out the file's keys the new mode
    /// does not read, with a note, as `--set host.io` does on one file; a key the node gives
    /// itself, or a node without a file, is held to its mode.
    #[test]
    fn a_nodes_keys_that_switch_its_files_mode_leave_out_the_keys_it_does_not_read() {
        let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
        let of = |node: &str| {
            let text = format!("[[nodes]]\nfile = \"beifuss2015-napi.toml\"\n{node}");
            resolve(&loader::parse_toml_table(&text, "c.toml").unwrap(), "c.toml", &examples)
        };
        let c = of("[nodes.host]\nio = \"server\"\n").unwrap();
        assert_eq!(c.nodes[0].scenario.host.io.t_irq(), crate::units::Duration::default());
        assert_eq!(c.nodes[0].notes.len(), 1, "{:?}", c.nodes[0].notes);
        assert!(
            c.nodes[0].notes[0].contains("host.t_irq")
                && c.nodes[0].notes[0].contains("left out, as \"server\" does not read them"),
            "{:?}",
            c.nodes[0].notes
        );
        let file = of("").unwrap();
        assert!(
            file.nodes[0].notes.is_empty()
                && file.nodes[0].scenario.host.io.t_irq() > crate::units::Duration::default()
        );
        let e = of("[nodes.host]\nio = \"server\"\nt_irq = \"1us\"\n").unwrap_err().to_string();
        assert!(e.contains("host.t_irq") && e.contains("host.io = \"server\""), "{e}");
        let e = chain(&TWO.replace("t_proc = \"1us\"", "io = \"server\"\nt_irq = \"1us\"\nt_proc = \"1us\""))
            .unwrap_err()
            .to_string();
        assert!(e.contains("host.t_irq"), "{e}");
        // An override of a node's mode (`--set nodes.0.host.io=server`) leaves out the
        // chain's own keys for the node that the mode does not read; one the overrides give
        // is refused.
        let napi_node = TWO.replace("t_proc = \"1us\"", "t_irq = \"1us\"\nt_proc = \"1us\"");
        let load = |sets: &[(&str, &str)]| {
            let sets: Vec<(String, String)> = sets.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            load_table(loader::parse_toml_table(&napi_node, "c.toml").unwrap(), "c.toml", Path::new("."), &sets)
        };
        let c = load(&[("nodes.0.host.io", "server")]).unwrap();
        assert_eq!(c.nodes[0].scenario.host.io.t_irq(), crate::units::Duration::default());
        assert!(
            c.nodes[0].notes.iter().any(|n| n.contains("the file's host.t_irq left out")),
            "{:?}",
            c.nodes[0].notes
        );
        assert!(c.nodes[1].notes.is_empty());
        let e = load(&[("nodes[0].host.io", "server"), ("nodes[0].host.t_irq", "2us")]).unwrap_err().to_string();
        assert!(e.contains("host.t_irq = \"2us\""), "{e}");
        // Two overrides in one table of a node: the mode's switch is still seen.
        let two = load(&[("nodes.0.host.io", "server"), ("nodes.0.host.t_proc", "2us")]).unwrap();
        assert!(two.nodes[0].notes.iter().any(|n| n.contains("host.t_irq left out")), "{:?}", two.nodes[0].notes);
        // Not switched: the chain as it is.
        assert_eq!(
            load(&[("nodes.0.host.io", "napi")]).unwrap().nodes[0].scenario,
            chain(&napi_node).unwrap().nodes[0].scenario
        );
        // Overrides that replace the list with a longer one: its nodes load as given.
        let node = "{ cpu = { frequency = \"3GHz\" }, host = { t_proc = \"1us\" }, link = { rate = \"10Gbit/s\" } }";
        let three = load(&[("nodes", &format!("[{node}, {node}, {node}]"))]).unwrap();
        assert_eq!(three.nodes.len(), 3);
    }

    #[test]
    fn a_nodes_keys_or_overrides_that_switch_a_tag_leave_out_the_keys_it_does_not_read() {
        let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
        let load = |node: &str, sets: &[(&str, &str)]| {
            let text = format!("[[nodes]]\nfile = \"beifuss2015-napi.toml\"\n{node}");
            let sets: Vec<(String, String)> = sets.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            load_table(loader::parse_toml_table(&text, "c.toml").unwrap(), "c.toml", &examples, &sets)
        };
        let off = crate::scenario::ItrSpec::Off(Default::default());
        // The node's keys over its file's (bulk_rate = 8000 with "dynamic").
        let c = load("[nodes.nic.itr]\nmode = \"off\"\n", &[]).unwrap();
        assert_eq!(c.nodes[0].scenario.nic.itr, off);
        let note = "nic.itr.mode = \"off\" (set over the file's \"dynamic\"): the file's nic.itr.bulk_rate left out";
        assert!(c.nodes[0].notes.iter().any(|n| n.starts_with(note)), "{:?}", c.nodes[0].notes);
        // An override over the node's file, and over the node's own keys.
        let c = load("", &[("nodes.0.nic.itr.mode", "off")]).unwrap();
        assert_eq!(c.nodes[0].scenario.nic.itr, off);
        assert!(c.nodes[0].notes.iter().any(|n| n.starts_with(note)), "{:?}", c.nodes[0].notes);
        let dim = "[nodes.nic.itr]\nmode = \"dim\"\nprofile = \"ice\"\n";
        let c = load(dim, &[("nodes.0.nic.itr.mode", "off")]).unwrap();
        assert_eq!(c.nodes[0].scenario.nic.itr, off);
        assert!(c.nodes[0].notes.iter().any(|n| n.contains("nic.itr.profile left out")), "{:?}", c.nodes[0].notes);
        // Given by the override itself: refused.
        let e = load(dim, &[("nodes.0.nic.itr.mode", "off"), ("nodes.0.nic.itr.profile", "ice")]).unwrap_err();
        assert!(e.to_string().contains("no nic.itr.profile with nic.itr.mode = \"off\""), "{e}");
    }

    #[test]
    fn errors_name_the_node_and_the_key() {
        let e = chain(&TWO.replace("t_proc = \"2us\"", "t_proc = \"fast\"")).unwrap_err().to_string();
        assert!(e.contains("c.toml: nodes.1") && e.contains("host.t_proc"), "{e}");
        let e = chain("bogus = 1\n[[nodes]]\n").unwrap_err().to_string();
        assert!(e.contains("bogus") && e.contains("top level"), "{e}");
        let e = chain("[[nodes]]\nfile = \"/nonexistent/x.toml\"\n").unwrap_err().to_string();
        assert!(e.contains("nodes.0.file") && e.contains("readable"), "{e}");
        let e = chain(&TWO.replace("delay = \"10us\"", "delay = \"10us\"\nspeed = 3")).unwrap_err().to_string();
        assert!(e.contains("nodes.0") && e.contains("link.speed"), "{e}");
        let e = chain(&TWO.replace("delay = \"10us\"", "delay = \"soon\"")).unwrap_err().to_string();
        assert!(e.contains("nodes.0.link.delay") && e.contains("soon"), "{e}");
        assert!(chain("nodes = []").unwrap_err().to_string().contains("at least one"));
    }
}
