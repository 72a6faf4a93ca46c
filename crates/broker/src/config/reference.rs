//! The configuration reference, generated from the table the broker
//! validates with ([`super::defs`]): every broker and topic setting with its
//! type, default, valid values and whether it can change at runtime.
//!
//! `krabka config reference` prints it (a table, JSON, or the Markdown of
//! `docs/CONFIG.md`); a test regenerates the Markdown and compares it with
//! the file, so the document cannot drift from what the broker accepts.

use {
    super::{
        BrokerConfig, RawSettings,
        defs::{BROKER_SETTINGS, ConfigKind, TOPIC_SETTINGS},
    },
    serde::Serialize,
    std::fmt::Write as _,
};

/// The command that regenerates `docs/CONFIG.md`.
pub const REGENERATE: &str = "cargo run --release -p krabka-broker --bin krabka -- config reference --format markdown > docs/CONFIG.md";

/// One setting in the reference.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReferenceEntry {
    /// Kafka's property name.
    pub name: String,
    /// `broker` or `topic`.
    pub scope: &'static str,
    /// Kafka's type name (`INT`, `LONG`, `STRING`, ...).
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// The default as text; `None` where Kafka's default is null.
    pub default: Option<String>,
    /// The valid values or range, empty when any value of the type goes.
    pub valid_values: String,
    /// Whether it can be changed on a running broker (IncrementalAlterConfigs).
    pub dynamic: bool,
    /// For a topic setting, the broker setting that supplies its default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub broker_synonym: Option<&'static str>,
    /// What it does.
    pub doc: &'static str,
}

fn type_name(kind: ConfigKind) -> &'static str {
    match kind {
        ConfigKind::Boolean => "BOOLEAN",
        ConfigKind::Text | ConfigKind::Choice(_) => "STRING",
        ConfigKind::Password => "PASSWORD",
        ConfigKind::Int { .. } => "INT",
        ConfigKind::Long { .. } => "LONG",
        ConfigKind::Double { .. } => "DOUBLE",
        ConfigKind::List { .. } => "LIST",
    }
}

fn valid_values(kind: ConfigKind) -> String {
    let bound = |max: i64| max == i64::MAX || max == i64::from(i32::MAX);
    match kind {
        ConfigKind::Boolean => "true, false".to_owned(),
        ConfigKind::Text | ConfigKind::Password => String::new(),
        ConfigKind::Choice(choices) => choices.join(", "),
        ConfigKind::List { choices: [] } => String::new(),
        ConfigKind::List { choices } => format!("any of {}", choices.join(", ")),
        ConfigKind::Int { min, max } | ConfigKind::Long { min, max } => {
            if bound(max) {
                format!("[{min},...]")
            } else {
                format!("[{min},...,{max}]")
            }
        }
        ConfigKind::Double { min, max } => format!("[{min},...,{max}]"),
    }
}

/// Every broker setting, then every topic setting, in table order.
#[must_use]
pub fn entries() -> Vec<ReferenceEntry> {
    // The effective defaults of the topic settings are what a broker with
    // no settings at all would give (Kafka's fallbacks resolved).
    let defaults = BrokerConfig::from_raw(&RawSettings::default()).ok();
    let mut out: Vec<ReferenceEntry> = BROKER_SETTINGS
        .iter()
        .map(|s| ReferenceEntry {
            name: s.name.to_owned(),
            scope: "broker",
            kind: type_name(s.kind),
            default: s.default.map(str::to_owned),
            valid_values: valid_values(s.kind),
            dynamic: s.dynamic,
            broker_synonym: None,
            doc: s.doc,
        })
        .collect();
    out.extend(TOPIC_SETTINGS.iter().map(|t| {
        ReferenceEntry {
            name: t.name.to_owned(),
            scope: "topic",
            kind: type_name(t.kind),
            default: defaults
                .as_ref()
                .and_then(|c| c.static_value(t.broker_synonym).0),
            valid_values: valid_values(t.kind),
            dynamic: true,
            broker_synonym: Some(t.broker_synonym),
            doc: t.doc,
        }
    }));
    out
}

fn cell(text: &str) -> String {
    text.replace('|', "\\|")
}

/// The Markdown of `docs/CONFIG.md`.
#[must_use]
pub fn markdown() -> String {
    let all = entries();
    let mut out = String::new();
    out.push_str("# Configuration reference\n\n");
    out.push_str(
        "Generated from the table the broker validates with \
         (`crates/broker/src/config/defs.rs`); do not edit by hand. Regenerate with\n\n",
    );
    let _ = writeln!(out, "```sh\n{REGENERATE}\n```\n");
    out.push_str(
        "Broker settings come from the properties file (`krabka serve --config FILE`), \
         `KRABKA_*` environment variables (`KRABKA_LOG_DIRS` for `log.dirs`) and \
         `--override name=value`, later sources winning. *Dynamic* broker settings can \
         also be changed on a running broker with IncrementalAlterConfigs \
         (`krabka config alter --broker ...`). Topic settings are set per topic at \
         creation or with `krabka topic alter-config`; a topic without one takes the \
         value of its broker synonym.\n\n",
    );
    for (scope, title) in [("broker", "Broker settings"), ("topic", "Topic settings")] {
        let _ = writeln!(out, "## {title}\n");
        if scope == "broker" {
            out.push_str("| Name | Type | Default | Valid values | Dynamic | Description |\n");
            out.push_str("| --- | --- | --- | --- | --- | --- |\n");
        } else {
            out.push_str(
                "| Name | Type | Default | Valid values | Broker synonym | Description |\n",
            );
            out.push_str("| --- | --- | --- | --- | --- | --- |\n");
        }
        for e in all.iter().filter(|e| e.scope == scope) {
            let default = e
                .default
                .as_deref()
                .map_or_else(|| "null".to_owned(), |d| format!("`{d}`"));
            let fifth = if scope == "broker" {
                (if e.dynamic { "yes" } else { "no" }).to_owned()
            } else {
                format!("`{}`", e.broker_synonym.unwrap_or_default())
            };
            let _ = writeln!(
                out,
                "| `{}` | {} | {} | {} | {} | {} |",
                e.name,
                e.kind,
                cell(&default),
                cell(&e.valid_values),
                fifth,
                cell(e.doc)
            );
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check};

    #[test]
    fn config_md_is_generated_from_the_table() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/CONFIG.md");
        let on_disk = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            on_disk == markdown(),
            "docs/CONFIG.md is stale (the settings table changed); regenerate it from the workspace root with:\n    {REGENERATE}"
        );
    }

    #[test]
    fn entries_carry_type_default_range_and_dynamism() {
        let all = entries();
        let by = |name: &str, scope: &str| {
            all.iter()
                .find(|e| e.name == name && e.scope == scope)
                .cloned()
                .unwrap()
        };
        let segment = by("log.segment.bytes", "broker");
        check!(segment.kind == "INT");
        check!(segment.default.as_deref() == Some("1073741824"));
        check!(segment.valid_values == "[14,...]");
        check!(segment.dynamic);
        check!(!by("node.id", "broker").dynamic);
        // Kafka's fallback from log.retention.hours resolved.
        check!(by("retention.ms", "topic").default.as_deref() == Some("604800000"));
        check!(by("cleanup.policy", "topic").valid_values == "any of delete, compact");
        check!(all.len() == BROKER_SETTINGS.len() + TOPIC_SETTINGS.len());
    }
}
