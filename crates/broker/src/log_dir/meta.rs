//! `meta.properties`: the identity of a log directory, in Kafka's format.
//!
//! Kafka (KRaft) writes this file into every log directory when the
//! directory is formatted and refuses to start on a directory whose file
//! names another cluster or node. Krabka writes the same file (version 1:
//! `version`, `cluster.id`, `node.id`, `directory.id`) so that a directory
//! moved to the wrong node, or a second node pointed at the same disk, is
//! refused with a message instead of silently mixing two nodes' data.
//!
//! The file is a Java properties file. Only what Kafka writes is needed
//! here: `key=value` lines (`:` also separates), `#`/`!` comments, and
//! backslash escapes in values.

use {krabka_ids::kafka_uuid, std::collections::BTreeMap, uuid::Uuid};

/// File name of the identity file inside a log directory (Kafka's name).
pub const META_PROPERTIES_FILE: &str = "meta.properties";

/// The identity recorded in a log directory's `meta.properties`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetaProperties {
    /// The cluster id (Kafka's base64 UUID text).
    pub cluster_id: String,
    /// The node that owns the directory.
    pub node_id: i32,
    /// The directory's own id (Kafka's `directory.id`, KIP-858).
    pub directory_id: Uuid,
}

impl MetaProperties {
    /// A new identity for a directory being formatted now.
    #[must_use]
    pub fn new(cluster_id: String, node_id: i32) -> Self {
        Self {
            cluster_id,
            node_id,
            directory_id: Uuid::new_v4(),
        }
    }

    /// The file's text, as Kafka's `MetaProperties` (version 1) writes it.
    #[must_use]
    pub fn to_text(&self) -> String {
        format!(
            "#\n#Written by krabka\nversion=1\ncluster.id={}\nnode.id={}\ndirectory.id={}\n",
            escape(&self.cluster_id),
            self.node_id,
            kafka_uuid(self.directory_id)
        )
    }

    /// Parses the file's text.
    ///
    /// # Errors
    ///
    /// A reason naming the missing or invalid property: version 1 needs
    /// `cluster.id` and `node.id`; a version 0 file (ZooKeeper era) is
    /// accepted with `broker.id` standing for `node.id`. A missing
    /// `directory.id` (written by Kafka before 3.7) reads as the nil id.
    pub fn parse(text: &str) -> Result<Self, String> {
        let props = parse_properties(text);
        let version = props.get("version").map_or("0", String::as_str);
        let node_key = match version {
            "0" => "broker.id",
            "1" => "node.id",
            other => return Err(format!("unsupported version {other:?}")),
        };
        let node_id = props
            .get(node_key)
            .ok_or_else(|| format!("{node_key} was not found"))?
            .trim()
            .parse::<i32>()
            .map_err(|_| format!("{node_key} is not a 32-bit integer"))?;
        let cluster_id = props
            .get("cluster.id")
            .filter(|c| !c.is_empty())
            .ok_or("cluster.id was not found")?
            .clone();
        let directory_id = match props.get("directory.id") {
            Some(text) => krabka_ids::decode_kafka_uuid(text.trim())
                .map_err(|e| format!("directory.id: {e}"))?,
            None => Uuid::nil(),
        };
        Ok(Self {
            cluster_id,
            node_id,
            directory_id,
        })
    }
}

/// Escapes what Java's `Properties.store` escapes in a value.
fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' | '=' | ':' | '#' | '!' => {
                out.push('\\');
                out.push(c);
            }
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c => out.push(c),
        }
    }
    out
}

/// The `key → value` pairs of a Java properties text (one logical line per
/// physical line; continuation lines are not written by Kafka).
fn parse_properties(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let line = line.trim_start();
        if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
            continue;
        }
        let (key, value) = split_pair(line);
        out.insert(unescape(key.trim_end()), unescape(value.trim_start()));
    }
    out
}

/// Splits at the first unescaped `=` or `:`.
fn split_pair(line: &str) -> (&str, &str) {
    let mut escaped = false;
    for (i, c) in line.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '=' | ':' => {
                return (
                    line.get(..i).unwrap_or_default(),
                    line.get(i + 1..).unwrap_or_default(),
                );
            }
            _ => {}
        }
    }
    (line, "")
}

fn unescape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\u{c}'),
            Some(other) => out.push(other),
            None => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check, proptest::prelude::*};

    #[test]
    fn round_trips_and_reads_what_kafka_writes() {
        let meta = MetaProperties::new("mYk9tLrGQiq1xF4TCnMSOA".into(), 7);
        check!(MetaProperties::parse(&meta.to_text()) == Ok(meta));
        // As Kafka 3.7+ writes it (its order is a hash table's).
        let kafka = "#\n#Tue Mar 12 10:41:07 UTC 2024\nnode.id=1\ndirectory.id=J8aAPcfLQt2bqs1JT_rMgQ\nversion=1\ncluster.id=4L6g3nShT-eMCtK--X86sw\n";
        let parsed = MetaProperties::parse(kafka).unwrap();
        check!(parsed.node_id == 1);
        check!(parsed.cluster_id == "4L6g3nShT-eMCtK--X86sw");
        check!(kafka_uuid(parsed.directory_id) == "J8aAPcfLQt2bqs1JT_rMgQ");
        // ZooKeeper-era version 0, with `:` separators and no directory id.
        let v0 = "version : 0\nbroker.id : 3\ncluster.id : abc\n";
        let parsed = MetaProperties::parse(v0).unwrap();
        check!((parsed.node_id, parsed.directory_id) == (3, Uuid::nil()));
    }

    #[test]
    fn missing_or_bad_properties_are_named() {
        check!(
            MetaProperties::parse("version=1\ncluster.id=x\n")
                .unwrap_err()
                .contains("node.id")
        );
        check!(
            MetaProperties::parse("version=1\nnode.id=1\n")
                .unwrap_err()
                .contains("cluster.id")
        );
        check!(
            MetaProperties::parse("version=1\nnode.id=x\ncluster.id=c\n")
                .unwrap_err()
                .contains("node.id")
        );
        check!(
            MetaProperties::parse("version=2\nnode.id=1\ncluster.id=c\n")
                .unwrap_err()
                .contains("version")
        );
        check!(
            MetaProperties::parse("version=1\nnode.id=1\ncluster.id=c\ndirectory.id=nope\n")
                .unwrap_err()
                .contains("directory.id")
        );
    }

    proptest! {
        #[test]
        fn any_cluster_id_survives_escaping(cluster in "[ -~]{1,40}", node in any::<i32>()) {
            let cluster = cluster.trim().to_owned();
            prop_assume!(!cluster.is_empty());
            let meta = MetaProperties::new(cluster, node);
            prop_assert_eq!(MetaProperties::parse(&meta.to_text()), Ok(meta));
        }
    }
}
