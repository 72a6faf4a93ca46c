//! Kafka's JAAS configuration text (`sasl.jaas.config`):
//! `<LoginModule class> <flag> key="value" ...;`. The broker reads options
//! from it: the `user_<name>` passwords of `PlainLoginModule` and the
//! `unsecuredValidator*` options of `OAuthBearerLoginModule`.

use std::collections::BTreeMap;

/// One login module entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoginModule {
    /// The class name, e.g. `org.apache.kafka.common.security.plain.PlainLoginModule`.
    pub class: String,
    /// `required`, `requisite`, `sufficient` or `optional`.
    pub flag: String,
    /// The options, in order.
    pub options: BTreeMap<String, String>,
}

/// Kafka's PLAIN login module.
pub const PLAIN_MODULE: &str = "org.apache.kafka.common.security.plain.PlainLoginModule";
/// Kafka's SCRAM login module.
pub const SCRAM_MODULE: &str = "org.apache.kafka.common.security.scram.ScramLoginModule";
/// Kafka's OAUTHBEARER login module.
pub const OAUTHBEARER_MODULE: &str =
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule";

/// Parses JAAS text into its login modules.
///
/// # Errors
///
/// A reason (without any option value: they hold passwords) for text that
/// is not `class flag key=value...;` entries.
pub fn parse(text: &str) -> Result<Vec<LoginModule>, String> {
    let mut tokens = Tokens {
        chars: text.chars().peekable(),
    };
    let mut modules = Vec::new();
    while let Some(class) = tokens.word()? {
        let flag = tokens
            .word()?
            .ok_or_else(|| format!("login module {class} has no control flag"))?;
        if !["required", "requisite", "sufficient", "optional"].contains(&flag.as_str()) {
            return Err(format!(
                "login module {class}: invalid control flag {flag:?}"
            ));
        }
        let mut options = BTreeMap::new();
        loop {
            tokens.skip_space();
            if tokens.chars.peek() == Some(&';') {
                tokens.chars.next();
                break;
            }
            let key = tokens
                .word()?
                .ok_or_else(|| format!("login module {class}: missing ';' at the end"))?;
            tokens.skip_space();
            if tokens.chars.next() != Some('=') {
                return Err(format!("login module {class}: option {key} has no '='"));
            }
            let value = tokens
                .value()?
                .ok_or_else(|| format!("login module {class}: option {key} has no value"))?;
            options.insert(key, value);
        }
        modules.push(LoginModule {
            class,
            flag,
            options,
        });
    }
    if modules.is_empty() {
        return Err("no login module".into());
    }
    Ok(modules)
}

struct Tokens<'a> {
    chars: std::iter::Peekable<std::str::Chars<'a>>,
}

impl Tokens<'_> {
    fn skip_space(&mut self) {
        while self.chars.peek().is_some_and(|c| c.is_whitespace()) {
            self.chars.next();
        }
    }

    fn word(&mut self) -> Result<Option<String>, String> {
        self.skip_space();
        let mut word = String::new();
        while let Some(&c) = self.chars.peek() {
            if c.is_whitespace() || c == '=' || c == ';' || c == '"' {
                break;
            }
            word.push(c);
            self.chars.next();
        }
        if word.is_empty() {
            return match self.chars.peek() {
                None => Ok(None),
                Some(';' | '=') => Ok(None),
                Some(c) => Err(format!("unexpected {c:?}")),
            };
        }
        Ok(Some(word))
    }

    fn value(&mut self) -> Result<Option<String>, String> {
        self.skip_space();
        if self.chars.peek() != Some(&'"') {
            return self.word();
        }
        self.chars.next();
        let mut value = String::new();
        loop {
            match self.chars.next() {
                None => return Err("unterminated quoted value".into()),
                Some('"') => return Ok(Some(value)),
                Some('\\') => match self.chars.next() {
                    Some(c) => value.push(c),
                    None => return Err("unterminated quoted value".into()),
                },
                Some(c) => value.push(c),
            }
        }
    }
}

/// The `user_<name>` passwords of a PLAIN login module.
#[must_use]
pub fn plain_users(modules: &[LoginModule]) -> std::collections::HashMap<String, String> {
    modules
        .iter()
        .filter(|m| m.class == PLAIN_MODULE)
        .flat_map(|m| m.options.iter())
        .filter_map(|(k, v)| Some((k.strip_prefix("user_")?.to_owned(), v.clone())))
        .collect()
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check};

    #[test]
    fn parses_kafkas_examples() {
        let modules = parse(
            r#"org.apache.kafka.common.security.plain.PlainLoginModule required
                username="admin"
                password="admin-secret"
                user_admin="admin-secret"
                user_alice="al\"ice";"#,
        )
        .unwrap();
        check!(modules.len() == 1);
        check!(modules[0].class == PLAIN_MODULE);
        let users = plain_users(&modules);
        check!(users["alice"] == "al\"ice");
        check!(users["admin"] == "admin-secret");
        check!(users.len() == 2);
        let oauth = parse(
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub=admin;",
        )
        .unwrap();
        check!(oauth[0].options["unsecuredLoginStringClaim_sub"] == "admin");
        for bad in [
            "",
            "Module",
            "Module required user=\"x\"",
            "Module maybe;",
            "Module required user;",
            "Module required user=\"x;",
        ] {
            check!(parse(bad).is_err(), "{bad}");
        }
    }
}
