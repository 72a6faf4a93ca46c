//! `krabka user list|set-password|delete`: SCRAM users over
//! DescribeUserScramCredentials and AlterUserScramCredentials (KIP-554).
//!
//! As KIP-554 has it, the client salts and hashes: `set-password` draws a
//! random salt, derives the salted password with PBKDF2 for the mechanism
//! and iteration count, and sends only that, so the password never crosses
//! the wire. The password comes from `--password`, from stdin when it is
//! piped, or from a prompt that does not echo on a terminal.

use {
    super::{CliError, Common, Format, Table, print_json},
    clap::{Args, Subcommand},
    kafka_protocol::{
        messages::{
            AlterUserScramCredentialsRequest, DescribeUserScramCredentialsRequest,
            alter_user_scram_credentials_request::{
                ScramCredentialDeletion, ScramCredentialUpsertion,
            },
            describe_user_scram_credentials_request::UserName,
        },
        protocol::StrBytes,
    },
    krabka_client::{
        Client, ClientError, ScramMechanism,
        scram::{MAX_ITERATIONS, MIN_ITERATIONS, random_bytes},
    },
    serde::Serialize,
    std::{
        io::{BufRead, IsTerminal, Write},
        num::NonZeroU32,
    },
};

/// `RESOURCE_NOT_FOUND`: the user has no credential (of that mechanism).
const RESOURCE_NOT_FOUND: i16 = 91;

/// `krabka user ...`.
#[derive(Debug, Args)]
pub struct UserArgs {
    #[command(flatten)]
    common: Common,
    #[command(subcommand)]
    command: UserCommand,
}

#[derive(Debug, Subcommand)]
enum UserCommand {
    /// List SCRAM users and their mechanisms (all users, or those named).
    List {
        /// Users to show; every user when none.
        users: Vec<String>,
    },
    /// Create a SCRAM user or change its password.
    SetPassword {
        /// The user name.
        user: String,
        /// The password; read from stdin (or a prompt on a terminal) when absent.
        #[arg(long)]
        password: Option<String>,
        /// The SCRAM mechanism.
        #[arg(long, default_value = "SCRAM-SHA-256", value_parser = ["SCRAM-SHA-256", "SCRAM-SHA-512"])]
        mechanism: String,
        /// PBKDF2 iterations (4096..=16384).
        #[arg(long, default_value_t = MIN_ITERATIONS)]
        iterations: u32,
    },
    /// Delete a SCRAM user's credentials (every mechanism it has, or the one named).
    Delete {
        /// The user name.
        user: String,
        /// Delete only this mechanism's credential.
        #[arg(long, value_parser = ["SCRAM-SHA-256", "SCRAM-SHA-512"])]
        mechanism: Option<String>,
    },
}

/// One user's credential as printed.
#[derive(Debug, Serialize)]
struct CredentialView {
    user: String,
    mechanism: String,
    iterations: i32,
}

/// Runs `krabka user ...`.
///
/// # Errors
///
/// [`CliError`] with the exit code of the failure; not-found for an
/// unknown user.
pub async fn run(args: UserArgs) -> Result<(), CliError> {
    let common = args.common;
    match args.command {
        UserCommand::List { users } => {
            let client = common.connect().await?;
            let credentials = describe(&client, &users).await?;
            match common.format {
                Format::Json => print_json(&credentials),
                Format::Text if credentials.is_empty() => {
                    println!("No SCRAM users.");
                    Ok(())
                }
                Format::Text => {
                    let mut table = Table::new(&["USER", "MECHANISM", "ITERATIONS"]);
                    for c in &credentials {
                        table.row(vec![
                            c.user.clone(),
                            c.mechanism.clone(),
                            c.iterations.to_string(),
                        ]);
                    }
                    table.print()
                }
            }
        }
        UserCommand::SetPassword {
            user,
            password,
            mechanism,
            iterations,
        } => {
            let mechanism = mechanism_of(&mechanism)?;
            let iterations = NonZeroU32::new(iterations)
                .filter(|i| (MIN_ITERATIONS..=MAX_ITERATIONS).contains(&i.get()))
                .ok_or_else(|| {
                    CliError::Usage(format!(
                        "--iterations {iterations} is outside {MIN_ITERATIONS}..={MAX_ITERATIONS}"
                    ))
                })?;
            let password = match password {
                Some(p) => p,
                None => read_password(&user)?,
            };
            if password.is_empty() {
                return Err(CliError::Usage("the password is empty".into()));
            }
            let salt = random_bytes(32)?;
            let salted = mechanism.salted_password(password.as_bytes(), &salt, iterations);
            let mut upsertion = ScramCredentialUpsertion::default();
            upsertion.name = StrBytes::from_string(user.clone());
            upsertion.mechanism = mechanism.code();
            upsertion.iterations = i32::try_from(iterations.get()).unwrap_or(i32::MAX);
            upsertion.salt = salt.into();
            upsertion.salted_password = salted.into();
            let mut request = AlterUserScramCredentialsRequest::default();
            request.upsertions.push(upsertion);
            let client = common.connect().await?;
            alter(&client, &request).await?;
            report(&common, "set", &user, &[mechanism])
        }
        UserCommand::Delete { user, mechanism } => {
            let client = common.connect().await?;
            let mechanisms = match mechanism {
                Some(m) => vec![mechanism_of(&m)?],
                None => describe(&client, std::slice::from_ref(&user))
                    .await?
                    .iter()
                    .filter_map(|c| ScramMechanism::parse(&c.mechanism))
                    .collect(),
            };
            let mut request = AlterUserScramCredentialsRequest::default();
            for m in &mechanisms {
                let mut deletion = ScramCredentialDeletion::default();
                deletion.name = StrBytes::from_string(user.clone());
                deletion.mechanism = m.code();
                request.deletions.push(deletion);
            }
            alter(&client, &request).await?;
            report(&common, "deleted", &user, &mechanisms)
        }
    }
}

fn mechanism_of(name: &str) -> Result<ScramMechanism, CliError> {
    ScramMechanism::parse(name)
        .ok_or_else(|| CliError::Usage(format!("unknown SCRAM mechanism {name}")))
}

fn report(
    common: &Common,
    what: &str,
    user: &str,
    mechanisms: &[ScramMechanism],
) -> Result<(), CliError> {
    let names: Vec<&str> = mechanisms.iter().map(|m| m.name()).collect();
    match common.format {
        Format::Json => print_json(&serde_json::json!({
            "user": user,
            "result": what,
            "mechanisms": names,
        })),
        Format::Text => {
            println!("{user}: {what} {}", names.join(", "));
            Ok(())
        }
    }
}

async fn describe(client: &Client, users: &[String]) -> Result<Vec<CredentialView>, CliError> {
    let mut request = DescribeUserScramCredentialsRequest::default();
    request.users = (!users.is_empty()).then(|| {
        users
            .iter()
            .map(|u| {
                let mut name = UserName::default();
                name.name = StrBytes::from_string(u.clone());
                name
            })
            .collect()
    });
    let response = client.send_any(&request).await?;
    ClientError::check(
        response.error_code,
        response.error_message.as_deref(),
        || "DescribeUserScramCredentials".into(),
    )?;
    let mut out = Vec::new();
    for result in response.results {
        ClientError::check(result.error_code, result.error_message.as_deref(), || {
            format!("user {}", result.user.as_str())
        })?;
        for info in result.credential_infos {
            out.push(CredentialView {
                user: result.user.to_string(),
                mechanism: ScramMechanism::from_code(info.mechanism).map_or_else(
                    || format!("code {}", info.mechanism),
                    |m| m.name().to_owned(),
                ),
                iterations: info.iterations,
            });
        }
    }
    out.sort_by(|a, b| (&a.user, &a.mechanism).cmp(&(&b.user, &b.mechanism)));
    Ok(out)
}

async fn alter(
    client: &Client,
    request: &AlterUserScramCredentialsRequest,
) -> Result<(), CliError> {
    let response = client.send_any(request).await?;
    for result in response.results {
        if result.error_code == RESOURCE_NOT_FOUND {
            return Err(CliError::NotFound(format!(
                "user {}: {}",
                result.user.as_str(),
                result
                    .error_message
                    .as_deref()
                    .unwrap_or("no such SCRAM credential")
            )));
        }
        ClientError::check(result.error_code, result.error_message.as_deref(), || {
            format!("AlterUserScramCredentials of {}", result.user.as_str())
        })?;
    }
    Ok(())
}

/// The password from stdin: one line when piped, a prompt without echo on a terminal.
fn read_password(user: &str) -> Result<String, CliError> {
    let stdin = std::io::stdin();
    let terminal = stdin.is_terminal();
    if terminal {
        eprint!("Password for {user}: ");
        let _ = std::io::stderr().flush();
    }
    let echo = terminal.then(EchoOff::new).flatten();
    let mut line = String::new();
    let read = stdin.lock().read_line(&mut line);
    drop(echo);
    if terminal {
        eprintln!();
    }
    read?;
    Ok(line.trim_end_matches(['\n', '\r']).to_owned())
}

/// Terminal echo turned off on stdin until dropped.
struct EchoOff(libc::termios);

impl EchoOff {
    fn new() -> Option<Self> {
        // SAFETY: tcgetattr/tcsetattr on fd 0 with a termios we own; a
        // failure (not a tty) leaves the terminal untouched.
        unsafe {
            let mut saved: libc::termios = std::mem::zeroed();
            if libc::tcgetattr(0, &raw mut saved) != 0 {
                return None;
            }
            let mut quiet = saved;
            quiet.c_lflag &= !libc::ECHO;
            (libc::tcsetattr(0, libc::TCSANOW, &raw const quiet) == 0).then_some(Self(saved))
        }
    }
}

impl Drop for EchoOff {
    fn drop(&mut self) {
        // SAFETY: restores the settings read in `new` on fd 0.
        unsafe {
            libc::tcsetattr(0, libc::TCSANOW, &raw const self.0);
        }
    }
}
