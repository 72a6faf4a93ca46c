//! Kafka's topic-name rules (`org.apache.kafka.common.internals.Topic`).

/// Kafka's maximum topic name length.
pub const MAX_NAME_LENGTH: usize = 249;

/// Kafka's internal topics (`Topic.INTERNAL_TOPICS`): flagged `is_internal`
/// in Metadata, so clients leave them out of their topic listings.
/// (`__remote_log_metadata` is an ordinary topic in Kafka.)
pub const INTERNAL_TOPICS: &[&str] = &["__consumer_offsets", "__transaction_state"];

/// Whether `name` is one of Kafka's internal topics.
#[must_use]
pub fn is_internal(name: &str) -> bool {
    INTERNAL_TOPICS.contains(&name)
}

/// The coordination client's state topic (`krabka-client-coordination`'s
/// `COORDINATION_TOPIC`; the broker does not depend on that crate).
pub const COORDINATION_STATE_TOPIC: &str = "__coordination_state";

/// The topics whose records are a coordinator's committed state: group
/// offsets, transactions, remote log metadata and coordination leases. A
/// client may not delete them, delete their records or change their
/// configs, and recovery never cuts a corrupt batch out of them silently:
/// such a partition is refused instead.
pub const STATE_TOPICS: &[&str] = &[
    "__consumer_offsets",
    "__transaction_state",
    krabka_remote_storage_topic::REMOTE_LOG_METADATA_TOPIC,
    COORDINATION_STATE_TOPIC,
];

/// Whether `name` is one of the [`STATE_TOPICS`].
#[must_use]
pub fn is_state_topic(name: &str) -> bool {
    STATE_TOPICS.contains(&name)
}

/// Kafka's `AdminUtils.ADMIN_CLIENT_ID`: the one client id Kafka lets
/// produce to its internal topics.
pub const ADMIN_CLIENT_ID: &str = "__admin_client";

/// Why a client (`client_id`) may not produce to `topic`, if it may not.
///
/// As Kafka's `ReplicaManager`: records of `__consumer_offsets` and
/// `__transaction_state` are written by the coordinators only, never through
/// Produce (except from `__admin_client`). `__remote_log_metadata` takes
/// only the remote log metadata managers' clients
/// (`__remote_log_metadata_client…`, Kafka's naming), which write it through
/// Produce, this broker's own among them. `__coordination_state` is written
/// by the coordination clients through Produce and stays open to them.
#[must_use]
pub fn produce_refusal(topic: &str, client_id: &str) -> Option<String> {
    let allowed = match topic {
        "__consumer_offsets" | "__transaction_state" => client_id == ADMIN_CLIENT_ID,
        krabka_remote_storage_topic::REMOTE_LOG_METADATA_TOPIC => {
            client_id.starts_with(krabka_remote_storage_topic::REMOTE_LOG_METADATA_CLIENT_PREFIX)
        }
        _ => true,
    };
    (!allowed).then(|| format!("Cannot append to internal topic {topic}"))
}

/// Checks a topic name the way Kafka does.
///
/// # Errors
///
/// Kafka's reason text when the name is empty, `.` or `..`, longer than 249
/// characters, or contains a character other than ASCII letters, digits,
/// `.`, `_` and `-`.
pub fn validate_topic_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("Topic name is illegal, it can't be empty".to_owned());
    }
    if name == "." || name == ".." {
        return Err("Topic name cannot be \".\" or \"..\"".to_owned());
    }
    if name.len() > MAX_NAME_LENGTH {
        return Err(format!(
            "Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters, topic name: {name}"
        ));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
    {
        return Err(format!(
            "Topic name {name} is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'"
        ));
    }
    Ok(())
}

/// Kafka refuses a topic whose name equals an existing one once `.` and `_`
/// are made the same (they collide in metric names).
#[must_use]
pub fn collides(a: &str, b: &str) -> bool {
    a != b && a.replace('.', "_") == b.replace('.', "_")
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check, proptest::prelude::*};

    #[test]
    fn kafka_rules() {
        check!(validate_topic_name("orders.v1_x-2").is_ok());
        check!(validate_topic_name("").is_err());
        check!(validate_topic_name(".").is_err());
        check!(validate_topic_name("..").is_err());
        check!(validate_topic_name("a b").is_err());
        check!(validate_topic_name("ä").is_err());
        check!(validate_topic_name(&"x".repeat(249)).is_ok());
        check!(validate_topic_name(&"x".repeat(250)).is_err());
        check!(collides("a.b", "a_b"));
        check!(!collides("a.b", "a.b"));
    }

    #[test]
    fn only_the_owners_of_internal_topics_produce_to_them() {
        check!(
            produce_refusal("__consumer_offsets", "rdkafka").as_deref()
                == Some("Cannot append to internal topic __consumer_offsets")
        );
        check!(produce_refusal("__transaction_state", "x").is_some());
        check!(produce_refusal("__consumer_offsets", ADMIN_CLIENT_ID).is_none());
        check!(produce_refusal("__remote_log_metadata", "krabka-client").is_some());
        check!(
            produce_refusal(
                "__remote_log_metadata",
                "__remote_log_metadata_client_1_producer"
            )
            .is_none()
        );
        check!(produce_refusal(COORDINATION_STATE_TOPIC, "krabka-client").is_none());
        check!(produce_refusal("orders", "").is_none());
        check!(is_state_topic("__remote_log_metadata") && !is_state_topic("orders"));
    }

    proptest! {
        #[test]
        fn accepted_names_are_safe_directory_names(name in ".{0,260}") {
            if validate_topic_name(&name).is_ok() {
                prop_assert!(!name.contains('/') && name != "." && name != "..");
            }
        }
    }
}
