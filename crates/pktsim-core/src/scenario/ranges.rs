//! A count's range is declared once, on its field, where the schema shows it:
//!
//! ```text
//! #[schemars(range(min = 2, max = 65536), extend("x-quantity" = "a number of descriptors"))]
//! pub rx_ring: u32,
//! ```
//!
//! [`check`] holds every integer a scenario's table gives against its key's `minimum` and
//! `maximum` in the format's JSON Schema (`pktsim schema`), so the reader, the schema, the
//! reference (`docs/scenario-reference.md`) and the Python side (`schema_info.py`, `tune`)
//! read one declaration. A key's tagged section is followed into every alternative that has
//! it (the alternative itself is checked where the section is read). A range that depends
//! on another key (`nic.refill_batch` at most `nic.rx_ring`) is checked by the section that
//! owns both.

use std::sync::OnceLock;

use serde_json::Value as Json;

use crate::error::{join_path, ConfigError};

/// The format's schema, built once.
fn schema() -> &'static Json {
    static SCHEMA: OnceLock<Json> = OnceLock::new();
    SCHEMA.get_or_init(super::json_schema)
}

/// The first integer of `table` (a scenario's, overrides applied) outside its key's declared
/// range, as the error that refuses it.
pub(super) fn check(table: &toml::Table, origin: &str) -> Result<(), ConfigError> {
    let root = schema();
    match walk_table(root, &[root], table, "") {
        Some((path, value, expected)) => Err(ConfigError::new(origin, path, Some(value), expected)),
        None => Ok(()),
    }
}

/// `node` and the schemas it stands for: its `$ref`, and the branches of its `anyOf`,
/// `oneOf` and `allOf` (an optional value, a tagged section's alternatives, a flattened
/// part), each followed in turn.
fn branches<'a>(root: &'a Json, node: &'a Json, out: &mut Vec<&'a Json>) {
    if out.len() > 64 {
        return;
    }
    out.push(node);
    if let Some(r) = node.get("$ref").and_then(Json::as_str) {
        if let Some(target) = r.strip_prefix('#').and_then(|p| root.pointer(p)) {
            branches(root, target, out);
        }
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        for b in node.get(key).and_then(Json::as_array).into_iter().flatten() {
            branches(root, b, out);
        }
    }
}

fn walk(root: &Json, node: &Json, value: &toml::Value, path: &str) -> Option<(String, String, String)> {
    let mut nodes = Vec::new();
    branches(root, node, &mut nodes);
    match value {
        toml::Value::Integer(v) => {
            for n in &nodes {
                let lo = n.get("minimum").and_then(Json::as_i64);
                let hi = n.get("maximum").and_then(Json::as_i64);
                if lo.is_some_and(|lo| *v < lo) || hi.is_some_and(|hi| *v > hi) {
                    let what = n.get("x-quantity").and_then(Json::as_str).unwrap_or("an integer");
                    let range = match (lo, hi) {
                        (Some(lo), Some(hi)) => format!("from {lo} to {hi}"),
                        (Some(lo), None) => format!("of at least {lo}"),
                        (None, _) => format!("of at most {}", hi.unwrap_or_default()),
                    };
                    return Some((path.to_string(), v.to_string(), format!("{what} {range}")));
                }
            }
            None
        }
        toml::Value::Table(t) => walk_table(root, &nodes, t, path),
        toml::Value::Array(items) => items.iter().enumerate().find_map(|(i, v)| {
            let inner = format!("{path}[{i}]");
            nodes.iter().filter_map(|n| n.get("items")).find_map(|item| walk(root, item, v, &inner))
        }),
        _ => None,
    }
}

fn walk_table(root: &Json, nodes: &[&Json], table: &toml::Table, path: &str) -> Option<(String, String, String)> {
    let mut all = Vec::new();
    for n in nodes {
        branches(root, n, &mut all);
    }
    table.iter().find_map(|(k, v)| {
        let inner = join_path(path, k);
        all.iter()
            .filter_map(|n| n.get("properties").and_then(|p| p.get(k.as_str())))
            .find_map(|prop| walk(root, prop, v, &inner))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(text: &str) -> Option<String> {
        let table: toml::Table = toml::from_str(text).unwrap();
        check(&table, "t").err().map(|e| e.to_string())
    }

    /// A declared range refuses what lies outside it, in a tagged section's alternative, an
    /// optional key and a list's element too; what lies inside, and what has no range, pass.
    #[test]
    fn an_integer_outside_its_declared_range_is_refused_naming_the_range() {
        assert_eq!(
            refused("[nic]\nrx_ring = 1").as_deref(),
            Some("t: nic.rx_ring = 1: expected a number of descriptors from 2 to 65536")
        );
        assert!(refused("[nic]\nrx_ring = 65536").is_none());
        assert!(refused("[nic]\ntx_queues = 4097").is_some_and(|e| e.contains("nic.tx_queues = 4097")));
        assert!(refused("[host]\nio = \"busy-poll\"\n[host.batch]\nsize = 0")
            .is_some_and(|e| e.contains("host.batch.size")));
        assert!(refused("[host]\nhz = 99").is_some_and(|e| e.contains("a tick rate in Hz from 100 to 10000")));
        assert!(refused("[[host.core_strategies]]\nkind = \"quota\"\nquota = 0")
            .is_some_and(|e| e.contains("host.core_strategies[0].quota = 0")));
        assert!(refused("[nic.itr]\nbulk_rate = 955").is_some_and(|e| e.contains("nic.itr.bulk_rate")));
        assert!(refused("[app]\nbatch = 0")
            .is_some_and(|e| e.contains("app.batch = 0: expected a number of frames per call")));
        assert!(refused("[cpu]\ncores = 4\n[traffic]\nflows = 9").is_none());
    }
}
