-- Krabka cluster schema, version 4.
--
-- ACL bindings and SCRAM credentials, shared by every broker as Kafka
-- keeps them in its metadata log. A binding is stored as the broker's
-- canonical JSON text of it (the primary key makes a binding stored once);
-- a credential holds its salt, keys and iterations as JSON, never a
-- password. Every change bumps cluster.metadata_version in the same
-- transaction, so other brokers pick it up with the rest of the metadata.
CREATE TABLE acl_bindings (
    binding text PRIMARY KEY
);

CREATE TABLE scram_credentials (
    user_name  text NOT NULL,
    mechanism  text NOT NULL,
    credential text NOT NULL,
    PRIMARY KEY (user_name, mechanism)
);
