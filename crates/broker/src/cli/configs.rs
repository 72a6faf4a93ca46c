//! `krabka config describe|alter|reference`: what `kafka-configs.sh` does
//! for topics and brokers, and the generated reference of every setting.

use {
    super::{
        CliError, Common, Format, Table, print_json,
        topic::{DescribedConfig, config_ops},
    },
    clap::{ArgGroup, Args, Subcommand, ValueEnum},
    krabka_broker::config::reference,
    krabka_client::ConfigResource,
};

/// `krabka config ...`.
#[derive(Debug, Args)]
pub struct ConfigArgs {
    #[command(subcommand)]
    command: ConfigCommand,
}

/// Which resource a config command is about.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("resource").required(true).args(["topic", "broker", "broker_defaults"])))]
struct Resource {
    /// A topic.
    #[arg(long)]
    topic: Option<String>,
    /// A broker, by id.
    #[arg(long, value_name = "ID")]
    broker: Option<i32>,
    /// The cluster-wide broker defaults.
    #[arg(long)]
    broker_defaults: bool,
}

impl Resource {
    fn resource(&self) -> ConfigResource {
        match (&self.topic, self.broker) {
            (Some(t), _) => ConfigResource::topic(t),
            (None, Some(id)) => ConfigResource::broker(id.to_string()),
            (None, None) => ConfigResource::broker(""),
        }
    }
}

/// Output of `config reference`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ReferenceFormat {
    /// A table.
    Text,
    /// JSON.
    Json,
    /// The Markdown of docs/CONFIG.md.
    Markdown,
}

#[derive(Debug, Subcommand)]
enum ConfigCommand {
    /// Show a topic's or broker's configs with their sources.
    Describe {
        #[command(flatten)]
        common: Common,
        #[command(flatten)]
        resource: Resource,
        /// Show every config, not only those set on the resource or broker.
        #[arg(long)]
        all: bool,
    },
    /// Change a topic's or broker's configs.
    Alter {
        #[command(flatten)]
        common: Common,
        #[command(flatten)]
        resource: Resource,
        /// Set a config, name=value; repeatable.
        #[arg(long = "set", value_name = "NAME=VALUE")]
        set: Vec<String>,
        /// Remove an override; repeatable.
        #[arg(long = "delete", value_name = "NAME")]
        delete: Vec<String>,
        /// Append to a list config, name=value; repeatable.
        #[arg(long = "append", value_name = "NAME=VALUE")]
        append: Vec<String>,
        /// Remove from a list config, name=value; repeatable.
        #[arg(long = "subtract", value_name = "NAME=VALUE")]
        subtract: Vec<String>,
        /// Only validate the change.
        #[arg(long)]
        dry_run: bool,
    },
    /// Print every broker and topic setting Krabka accepts: type, default,
    /// valid values, whether it is dynamic (no cluster needed).
    Reference {
        /// Output format.
        #[arg(long, value_enum, default_value_t = ReferenceFormat::Text)]
        format: ReferenceFormat,
    },
}

/// Runs `krabka config ...`.
///
/// # Errors
///
/// [`CliError`] with the exit code of the failure.
pub async fn run(args: ConfigArgs) -> Result<(), CliError> {
    match args.command {
        ConfigCommand::Reference { format } => {
            match format {
                ReferenceFormat::Markdown => print!("{}", reference::markdown()),
                ReferenceFormat::Json => print_json(&reference::entries())?,
                ReferenceFormat::Text => {
                    let mut table = Table::new(&[
                        "NAME",
                        "SCOPE",
                        "TYPE",
                        "DEFAULT",
                        "VALID-VALUES",
                        "DYNAMIC",
                    ]);
                    for e in reference::entries() {
                        table.row(vec![
                            e.name,
                            e.scope.to_owned(),
                            e.kind.to_owned(),
                            e.default.unwrap_or_else(|| "null".into()),
                            e.valid_values,
                            (if e.dynamic { "yes" } else { "no" }).to_owned(),
                        ]);
                    }
                    table.print()?;
                }
            }
            Ok(())
        }
        ConfigCommand::Describe {
            common,
            resource,
            all,
        } => {
            let client = common.connect().await?;
            let target = resource.resource();
            let configs: Vec<DescribedConfig> = client
                .describe_configs(&target, &[])
                .await?
                .into_iter()
                .map(DescribedConfig::from)
                .collect();
            match common.format {
                Format::Json => print_json(&configs),
                Format::Text => {
                    let mut table = Table::new(&["CONFIG", "VALUE", "SOURCE"]);
                    for c in configs.iter().filter(|c| all || c.is_set()) {
                        table.row(c.row());
                    }
                    if table.is_empty() {
                        println!("All configs are defaults (--all to list them).");
                        Ok(())
                    } else {
                        table.print()
                    }
                }
            }
        }
        ConfigCommand::Alter {
            common,
            resource,
            set,
            delete,
            append,
            subtract,
            dry_run,
        } => {
            let ops = config_ops(&set, &delete, &append, &subtract)?;
            let client = common.connect().await?;
            let target = resource.resource();
            client
                .incremental_alter_configs(&target, &ops, dry_run)
                .await?;
            let what = match (&resource.topic, resource.broker) {
                (Some(t), _) => format!("topic {t}"),
                (None, Some(b)) => format!("broker {b}"),
                (None, None) => "the broker defaults".to_owned(),
            };
            match common.format {
                Format::Json => print_json(&serde_json::json!({
                    "resource": what,
                    "altered": ops.len(),
                    "dry_run": dry_run,
                })),
                Format::Text => {
                    println!(
                        "{} {} config(s) of {what}",
                        if dry_run { "Validated" } else { "Altered" },
                        ops.len()
                    );
                    Ok(())
                }
            }
        }
    }
}
