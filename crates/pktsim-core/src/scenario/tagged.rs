//! Tagged sections: a table whose one key, its tag, picks which of its alternatives the
//! table is (`nic.itr.mode`: the moderation policy; `host.io`: the I/O mode); each
//! alternative is a type of its own, reading only its own keys.
//!
//! ```toml
//! [nic.itr]
//! mode = "static"     # the tag: which alternative (left out: the section's default)
//! interval = "50us"   # a key of that alternative
//! ```
//!
//! One rule serves every tagged section, registered in `scenario::TAGGED`
//! (`scenario/mod.rs`):
//!
//! - **Reading** ([`deserialize`]): a key that another alternative reads is refused, naming
//!   the alternatives that read it (`no nic.itr.profile with nic.itr.mode = "static" (only
//!   nic.itr.mode = "dim" reads it)`), in a sub-table too (`host.batch.t_empty`); a key no
//!   alternative reads is refused as unknown; the alternative itself is read with serde,
//!   its errors keeping their whole key path (`nic.itr.interval`). Keys of other sections
//!   that only some alternatives read ([`Elsewhere`]: `nic.itr` only where a NAPI takes
//!   interrupts) are refused where given with another ([`check_elsewhere`]).
//! - **Switching** ([`switch`]): where `--set` (or a chain's keys for its node) changes a
//!   tag, the file's keys that the new alternative does not read are left out, each named
//!   in a note; those the overrides give themselves stay, and are refused as above.
//!
//! What an alternative reads is a tree of [`Key`]s taken from its types: a plain struct's
//! keys from serde's own list of the names and aliases it accepts ([`leaves`]), a struct of
//! parts (its [`Keys`] written with [`crate::parts!`]) from its parts; so no list of keys is kept by
//! hand, and a parameter is declared once, in the part that holds it.

use serde::de::{DeserializeOwned, Deserializer, Error as _, Visitor};
use serde::Deserialize;

use crate::error::{join_path, nest, unnest, SECTION_MARK, VALUE_SEP};

/// A key an alternative reads: a value, or a table with keys of its own (`sub`).
#[derive(Debug, Clone, PartialEq)]
pub struct Key {
    pub name: &'static str,
    /// The keys of a table that is read key by key (a part's own table: `host.batch`).
    pub sub: Option<Vec<Key>>,
    /// Read only where this other key (a path from the scenario's top) is true
    /// (`host.thread` beside a device's NAPI: `nic.napi.threaded`).
    pub when: Option<&'static str>,
}

impl Key {
    pub const fn leaf(name: &'static str) -> Key {
        Key { name, sub: None, when: None }
    }
}

/// A type whose keys are read one by one: a plain serde struct ([`leaves`]), or a struct of
/// parts ([`crate::parts!`]).
pub trait Keys: Sized {
    /// The keys it reads.
    fn keys() -> Vec<Key>;
    /// Read it from a table of its keys (any other key refused); an error carries its key
    /// path inside the table (`nest`).
    fn read(table: toml::Table) -> Result<Self, String>;
}

/// A tagged section's type.
pub trait Tagged: Sized {
    /// The tag's key inside the section (`mode`).
    const TAG: &'static str;
    /// The alternative of a section that gives no tag.
    const DEFAULT: &'static str;
    /// Each alternative's tag value and the keys it reads.
    fn alternatives() -> Vec<(&'static str, Vec<Key>)>;
    /// The named alternative, read from the section's other keys.
    fn build(name: &str, rest: toml::Table) -> Result<Self, String>;
    /// Keys of other sections that only some alternatives read.
    fn elsewhere() -> Vec<Elsewhere> {
        Vec::new()
    }
    /// Keys of the section's table that every alternative reads, read beside the tag by
    /// the type that holds the section (`[host]`: the stack's `t_proc`, ...).
    fn common() -> Vec<Key> {
        Vec::new()
    }
    /// The alternative a section that gives no tag is, from the keys it has (`[traffic]`
    /// with `pcap` replays it); None: [`Tagged::DEFAULT`].
    fn implied(_section: &toml::Table) -> Option<&'static str> {
        None
    }
}

/// A key of another section that only some alternatives of a tagged section read
/// (`nic.itr`: only the modes whose NAPI takes interrupts).
pub struct Elsewhere {
    /// Its path from the scenario's top, and its other names.
    pub path: &'static str,
    pub aliases: &'static [&'static str],
    /// The alternatives that read it.
    pub readers: &'static [&'static str],
    /// Whether a value given for it is its default (then it changes nothing, and is taken).
    pub is_default: fn(&toml::Value) -> bool,
}

/// `is_default` of an [`Elsewhere`]: the value read as `T` is `T`'s default.
pub fn is_default<T: DeserializeOwned + Default + PartialEq>(v: &toml::Value) -> bool {
    v.clone().try_into::<T>().is_ok_and(|x| x == T::default())
}

/// A tagged section, as the format's tables hold it.
pub struct Section {
    /// Its key path (`nic.itr`).
    pub path: &'static str,
    pub tag: &'static str,
    pub default: &'static str,
    pub alternatives: fn() -> Vec<(&'static str, Vec<Key>)>,
    pub elsewhere: fn() -> Vec<Elsewhere>,
    pub common: fn() -> Vec<Key>,
    pub implied: fn(&toml::Table) -> Option<&'static str>,
}

impl Section {
    pub const fn of<T: Tagged>(path: &'static str) -> Section {
        Section {
            path,
            tag: T::TAG,
            default: T::DEFAULT,
            alternatives: T::alternatives,
            elsewhere: T::elsewhere,
            common: T::common,
            implied: T::implied,
        }
    }

    /// The tag `table` (the scenario's) gives this section, or the one its keys imply; None
    /// where it gives none and implies none (the default).
    fn tag_in(&self, table: &toml::Table) -> Option<toml::Value> {
        match lookup(table, &join_path(self.path, self.tag)) {
            Some(v) => Some(v.clone()),
            None => match lookup(table, self.path) {
                Some(toml::Value::Table(section)) => (self.implied)(section).map(|n| toml::Value::String(n.into())),
                _ => None,
            },
        }
    }
}

/// Read a tagged section from a deserializer (see the module's header).
pub fn deserialize<'de, T: Tagged, D: Deserializer<'de>>(d: D) -> Result<T, D::Error> {
    let table = toml::Table::deserialize(d)?;
    read_tagged::<T>(table).map_err(D::Error::custom)
}

/// Read a tagged section from its table: the tag (or the default), then the keys, each read
/// by the chosen alternative or refused.
pub fn read_tagged<T: Tagged>(mut table: toml::Table) -> Result<T, String> {
    let alternatives = T::alternatives();
    let names = || alternatives.iter().map(|(n, _)| format!("`{n}`")).collect::<Vec<_>>().join(", ");
    let name = match table.remove(T::TAG) {
        None => T::implied(&table).unwrap_or(T::DEFAULT).to_string(),
        Some(toml::Value::String(s)) if alternatives.iter().any(|(n, _)| *n == s) => s,
        Some(toml::Value::String(s)) => {
            return Err(nest(T::TAG, &format!("unknown variant `{s}`, expected one of {}", names())));
        }
        Some(v) => return Err(nest(T::TAG, &format!("{v}{VALUE_SEP}a string, one of {}", names()))),
    };
    let reads = alternatives.iter().find(|(n, _)| *n == name).map_or(&[][..], |(_, k)| k.as_slice());
    let common: Vec<&str> = T::common().iter().map(|k| k.name).collect();
    let tag_and_common: Vec<&str> = std::iter::once(T::TAG).chain(common).collect();
    let readers = |path: &str| readers(&alternatives, path);
    if let Some(message) = unread(&table, reads, "", &readers, &tag_and_common, &name) {
        return Err(message);
    }
    T::build(&name, table).map_err(|e| {
        // A key the alternative needs and has no default for.
        let (inner, message) = unnest(String::new(), &e);
        match message.strip_prefix("missing field `") {
            Some(rest) => {
                let key = rest.split('`').next().unwrap_or_default();
                let tag = format!("{SECTION_MARK}{}", T::TAG);
                nest(&join_path(&inner, key), &format!("a value with {tag} = \"{name}\", which has no default for it"))
            }
            None => e,
        }
    })
}

/// The first key of `table` (at `prefix` inside the section) the alternative `name` does
/// not read, as the message that refuses it.
fn unread(
    table: &toml::Table,
    reads: &[Key],
    prefix: &str,
    readers: &dyn Fn(&str) -> Vec<&'static str>,
    tag_and_common: &[&str],
    name: &str,
) -> Option<String> {
    let tag = tag_and_common[0];
    for (key, value) in table {
        let path = join_path(prefix, key);
        match (reads.iter().find(|k| k.name == key), value) {
            (Some(Key { sub: Some(sub), .. }), toml::Value::Table(inner)) => {
                if let Some(m) = unread(inner, sub, &path, readers, tag_and_common, name) {
                    return Some(m);
                }
            }
            (Some(_), _) => {}
            (None, _) => {
                let who = readers(&path);
                let message = if who.is_empty() {
                    let top: &[&str] = if prefix.is_empty() { tag_and_common } else { &[] };
                    let known: Vec<String> =
                        top.iter().copied().chain(reads.iter().map(|k| k.name)).map(|k| format!("`{k}`")).collect();
                    format!("unknown field `{key}`, expected one of {}", known.join(", "))
                } else {
                    let only: Vec<String> = who.iter().map(|n| format!("{SECTION_MARK}{tag} = \"{n}\"")).collect();
                    let what = format!(
                        "no {SECTION_MARK}{path} with {SECTION_MARK}{tag} = \"{name}\" (only {} read{} it)",
                        only.join(", "),
                        if who.len() == 1 { "s" } else { "" }
                    );
                    match value {
                        toml::Value::Table(_) => what,
                        v => format!("{v}{VALUE_SEP}{what}"),
                    }
                };
                return Some(nest(&path, &message));
            }
        }
    }
    None
}

/// The alternatives that read the key at `path` (dotted, inside the section).
fn readers(alternatives: &[(&'static str, Vec<Key>)], path: &str) -> Vec<&'static str> {
    alternatives.iter().filter(|(_, keys)| find(keys, path).is_some()).map(|(n, _)| *n).collect()
}

fn find<'a>(keys: &'a [Key], path: &str) -> Option<&'a Key> {
    let (head, rest) = path.split_once('.').map_or((path, None), |(h, r)| (h, Some(r)));
    let k = keys.iter().find(|k| k.name == head)?;
    match rest {
        None => Some(k),
        Some(r) => find(k.sub.as_deref()?, r),
    }
}

/// Read a plain serde struct from a table of its keys; an error carries the key path inside
/// the table.
pub fn part<T: DeserializeOwned>(table: toml::Table) -> Result<T, String> {
    serde_path_to_error::deserialize(toml::Value::Table(table)).map_err(|e| {
        let path = e.path().to_string();
        let message = e.inner().to_string();
        // (toml ends its messages with its own "in `key`"; the path says it.)
        let message = message.split("\nin `").next().unwrap_or_default().trim();
        nest(if path == "." { "" } else { &path }, message)
    })
}

/// The keys a plain struct reads (serde's list of the names and aliases its derived
/// `Deserialize` accepts), each a value.
pub fn leaves<T: DeserializeOwned>() -> Vec<Key> {
    keys_of::<T>().iter().map(|&k| Key::leaf(k)).collect()
}

/// serde's list of the names and aliases a derived struct's `Deserialize` accepts.
pub fn keys_of<T: DeserializeOwned>() -> &'static [&'static str] {
    struct Fields<'a>(&'a mut &'static [&'static str]);
    impl<'de> Deserializer<'de> for Fields<'_> {
        type Error = serde::de::value::Error;
        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
            Err(Self::Error::custom("a struct"))
        }
        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Self::Error> {
            *self.0 = fields;
            Err(Self::Error::custom("fields taken"))
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf option unit
            unit_struct newtype_struct seq tuple tuple_struct map enum identifier ignored_any
        }
    }
    let mut fields: &'static [&'static str] = &[];
    let _ = T::deserialize(Fields(&mut fields));
    fields
}

/// The keys of `table` that `keys` name, taken out of it into a table of their own.
pub fn take(table: &mut toml::Table, keys: &[Key]) -> toml::Table {
    let mut out = toml::Table::new();
    for k in keys {
        if let Some(v) = table.remove(k.name) {
            out.insert(k.name.to_string(), v);
        }
    }
    out
}

/// A struct of parts, each a group of keys of the same table ([`Keys`]) or a table of its
/// own under a key (read only where another key is true, with `where`): its [`Keys`] (the
/// parts' keys together; each key given to the part that reads it, any other refused). The struct itself is written out as usual, with
/// `#[serde(flatten)]` on its groups so that it writes (and its schema shows) one table.
///
/// ```text
/// parts!(DeviceNapi { groups: irq: Irq, poll: Poll; tables: thread: ThreadSpec where "nic.napi.threaded" });
/// ```
#[macro_export]
macro_rules! parts {
    ($name:ident { groups: $($g:ident: $gt:ty),* ; tables: $($t:ident: $tt:ty $(where $w:literal)?),* }) => {
        impl $crate::scenario::tagged::Keys for $name {
            fn keys() -> Vec<$crate::scenario::tagged::Key> {
                let mut keys = Vec::new();
                $(keys.extend(<$gt as $crate::scenario::tagged::Keys>::keys());)*
                $(keys.push($crate::scenario::tagged::Key {
                    name: stringify!($t),
                    sub: Some(<$tt as $crate::scenario::tagged::Keys>::keys()),
                    when: $crate::scenario::tagged::when(&[$($w)?]),
                });)*
                keys
            }
            #[allow(unused_mut)]
            fn read(mut table: toml::Table) -> Result<Self, String> {
                $(let $g = <$gt as $crate::scenario::tagged::Keys>::read(
                    $crate::scenario::tagged::take(&mut table, &<$gt as $crate::scenario::tagged::Keys>::keys()),
                )?;)*
                $(let $t = match table.remove(stringify!($t)) {
                    None => <$tt>::default(),
                    Some(toml::Value::Table(t)) => <$tt as $crate::scenario::tagged::Keys>::read(t)
                        .map_err(|e| $crate::scenario::tagged::nested(stringify!($t), e))?,
                    Some(v) => return Err($crate::scenario::tagged::nested(
                        stringify!($t),
                        format!("invalid type: {}, expected a table", v.type_str()),
                    )),
                };)*
                if let Some(key) = table.keys().next() {
                    let keys: Vec<String> = Self::keys().iter().map(|k| format!("`{}`", k.name)).collect();
                    return Err($crate::scenario::tagged::nested(
                        key,
                        format!("unknown field `{key}`, expected one of {}", keys.join(", ")),
                    ));
                }
                Ok($name { $($g,)* $($t,)* })
            }
        }
    };
}

/// A table part's `where` in [`crate::parts!`]: the one key it names, if any.
pub fn when(keys: &[&'static str]) -> Option<&'static str> {
    keys.first().copied()
}

/// A plain serde struct's [`Keys`]: its own keys, read with serde.
#[macro_export]
macro_rules! plain_keys {
    ($($name:ty),* $(,)?) => {$(
        impl $crate::scenario::tagged::Keys for $name {
            fn keys() -> Vec<$crate::scenario::tagged::Key> {
                $crate::scenario::tagged::leaves::<$name>()
            }
            fn read(table: toml::Table) -> Result<Self, String> {
                $crate::scenario::tagged::part(table)
            }
        }
    )*};
}

/// `message` (itself maybe nested) at `key` inside the table being read.
pub fn nested(key: &str, message: impl AsRef<str>) -> String {
    nest(key, message.as_ref())
}

/// Each of `sections`' tag as `table` gives it or its keys imply it (None: neither, the
/// default).
pub fn tags(sections: &[Section], table: &toml::Table) -> Vec<Option<toml::Value>> {
    sections.iter().map(|s| s.tag_in(table)).collect()
}

/// Where the overrides (`given`, a table of the keys they give) change a tagged section's
/// tag from the one the file gave or implied (`before`, its [`tags`]), by giving the tag
/// or a key that implies another alternative, the file's keys the new
/// alternative does not read left out of `table` (the file with the overrides applied),
/// keys of other sections ([`Elsewhere`]) and keys read only beside another (`when`)
/// included: a note for each section that lost some. Keys the overrides give themselves
/// stay, to be refused.
pub fn switch(
    sections: &[Section],
    before: &[Option<toml::Value>],
    table: &mut toml::Table,
    given: &toml::Table,
) -> Vec<String> {
    let mut notes = Vec::new();
    for (s, before) in sections.iter().zip(before) {
        let tag_path = join_path(s.path, s.tag);
        let name = |v: Option<&toml::Value>| v.map_or(Some(s.default.to_string()), |v| v.as_str().map(str::to_string));
        let (Some(from), Some(to)) = (name(before.as_ref()), name(s.tag_in(table).as_ref())) else { continue };
        let alternatives = (s.alternatives)();
        let Some((_, reads)) = alternatives.iter().find(|(n, _)| *n == to) else { continue };
        if from == to {
            continue;
        }
        let is_true = |path: &str| lookup(table, path).and_then(|v| v.as_bool()) == Some(true);
        let mut left = Vec::new();
        let reads: Vec<Key> = reads.iter().cloned().chain((s.common)()).collect();
        if let Some(toml::Value::Table(section)) = lookup(table, s.path) {
            unread_paths(section, &reads, "", &is_true, &mut left);
        }
        let mut left: Vec<String> = left
            .into_iter()
            .filter(|k| *k != s.tag)
            .map(|k| join_path(s.path, &k))
            .filter(|k| !crate::loader::gives(given, k))
            .collect();
        for e in (s.elsewhere)() {
            if e.readers.contains(&to.as_str()) {
                continue;
            }
            for path in std::iter::once(e.path).chain(e.aliases.iter().copied()) {
                if lookup(table, path).is_some_and(|v| !(e.is_default)(v)) && !crate::loader::gives(given, path) {
                    left.push(path.to_string());
                }
            }
        }
        for k in &left {
            remove(table, k);
        }
        if left.is_empty() {
            continue;
        }
        let how = if crate::loader::gives(given, &tag_path) { "set" } else { "implied by the keys set" };
        notes.push(format!(
            "{tag_path} = \"{to}\" ({how} over the file's \"{from}\"): the file's {} left out, as \"{to}\" does not read {}",
            left.join(", "),
            if left.len() == 1 { "it" } else { "them" }
        ));
    }
    notes
}

/// The paths of `table`'s keys (at `prefix` inside the section) that `reads` does not read.
fn unread_paths(
    table: &toml::Table,
    reads: &[Key],
    prefix: &str,
    is_true: &dyn Fn(&str) -> bool,
    out: &mut Vec<String>,
) {
    for (key, value) in table {
        let path = join_path(prefix, key);
        match (reads.iter().find(|k| k.name == key), value) {
            (Some(k), _) if k.when.is_some_and(|w| !is_true(w)) => out.push(path),
            (Some(Key { sub: Some(sub), .. }), toml::Value::Table(inner)) => {
                unread_paths(inner, sub, &path, is_true, out)
            }
            (Some(_), _) => {}
            (None, _) => out.push(path),
        }
    }
}

/// Refuse keys of other sections that the chosen alternative of a tagged section does not
/// read ([`Elsewhere`]), given (at other than their defaults) in `table`. (A key read only
/// beside another, `when`, is checked by the alternative itself, on its values.)
pub fn check_elsewhere(sections: &[Section], table: &toml::Table) -> Result<(), (String, String)> {
    for s in sections {
        let tag_path = join_path(s.path, s.tag);
        // (A tag of the wrong type is refused where the section is read.)
        let tag = s.tag_in(table);
        let name = match &tag {
            None => s.default,
            Some(v) => match v.as_str() {
                Some(n) => n,
                None => continue,
            },
        };
        let alternatives = (s.alternatives)();
        if !alternatives.iter().any(|(n, _)| *n == name) {
            continue;
        }
        for e in (s.elsewhere)() {
            if e.readers.contains(&name) {
                continue;
            }
            for path in std::iter::once(e.path).chain(e.aliases.iter().copied()) {
                let Some(v) = lookup(table, path).filter(|v| !(e.is_default)(v)) else { continue };
                let only: Vec<String> = e.readers.iter().map(|n| format!("\"{n}\"")).collect();
                let what = format!("no {path} with {tag_path} = \"{name}\": only {} read it", only.join(", "));
                let message = match v {
                    toml::Value::Table(_) => what,
                    v => format!("{v}{VALUE_SEP}{what}"),
                };
                return Err((path.to_string(), message));
            }
        }
    }
    Ok(())
}

fn lookup<'a>(t: &'a toml::Table, path: &str) -> Option<&'a toml::Value> {
    let (head, rest) = path.split_once('.').map_or((path, None), |(h, r)| (h, Some(r)));
    match (t.get(head)?, rest) {
        (v, None) => Some(v),
        (toml::Value::Table(inner), Some(r)) => lookup(inner, r),
        _ => None,
    }
}

fn remove(t: &mut toml::Table, path: &str) {
    match path.split_once('.') {
        None => {
            t.remove(path);
        }
        Some((head, rest)) => {
            if let Some(toml::Value::Table(inner)) = t.get_mut(head) {
                remove(inner, rest);
            }
        }
    }
}

/// A tagged section's JSON Schema (`#[schemars(transform = ...)]`): one alternative per
/// tag value, as schemars writes an internally tagged enum, with the tag of the default
/// alternative optional, as the reader has it, and its `default`.
pub fn schema_default<T: Tagged>(schema: &mut schemars::Schema) {
    let Some(alternatives) = schema.get_mut("oneOf").and_then(|v| v.as_array_mut()) else { return };
    for alt in alternatives {
        let tag = alt.pointer(&format!("/properties/{}", T::TAG));
        let is_default = tag.is_some_and(|t| {
            t.get("const").and_then(|c| c.as_str()) == Some(T::DEFAULT)
                || t.get("enum").is_some_and(|e| e.as_array().is_some_and(|e| e.len() == 1 && e[0] == T::DEFAULT))
        });
        if !is_default {
            continue;
        }
        if let Some(required) = alt.get_mut("required").and_then(|r| r.as_array_mut()) {
            required.retain(|k| k != T::TAG);
        }
        // (The default is marked as such: another alternative's tag may be implied too.)
        if let Some(tag) = alt.pointer_mut(&format!("/properties/{}", T::TAG)).and_then(|t| t.as_object_mut()) {
            tag.insert("default".into(), T::DEFAULT.into());
        }
    }
}
