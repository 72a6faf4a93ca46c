//! SASL/PLAIN (RFC 4616) as Kafka's `PlainSaslServer`: the token is
//! `authzid NUL authcid NUL password`, checked against the `user_<name>`
//! entries of the listener's `PlainLoginModule` JAAS config.

use {
    super::{Failure, Step},
    crate::security::principal::KafkaPrincipal,
    std::collections::HashMap,
};

/// Checks one PLAIN token against `users` (name → password).
#[must_use]
pub fn authenticate(token: &[u8], users: &HashMap<String, String>) -> Step {
    let parts: Vec<&[u8]> = token.split(|b| *b == 0).collect();
    let [authzid, user, password] = parts.as_slice() else {
        return Step::Failed(Failure::generic(format!(
            "Invalid SASL/PLAIN response: expected 3 tokens, got {}",
            parts.len()
        )));
    };
    let (Ok(authzid), Ok(user), Ok(password)) = (
        std::str::from_utf8(authzid),
        std::str::from_utf8(user),
        std::str::from_utf8(password),
    ) else {
        return Step::Failed(Failure::generic("SASL/PLAIN response is not UTF-8"));
    };
    if user.is_empty() {
        return Step::Failed(Failure::told(
            "Authentication failed: username not specified",
        ));
    }
    if password.is_empty() {
        return Step::Failed(Failure::told(
            "Authentication failed: password not specified",
        ));
    }
    let known = users.get(user).is_some_and(|expected| {
        aws_lc_rs::constant_time::verify_slices_are_equal(expected.as_bytes(), password.as_bytes())
            .is_ok()
    });
    if !known {
        return Step::Failed(Failure {
            client_message: Some("Authentication failed: Invalid username or password".into()),
            reason: format!("invalid username or password for user {user:?}"),
        });
    }
    if !authzid.is_empty() && authzid != user {
        return Step::Failed(Failure::told(
            "Authentication failed: Client requested an authorization id that is different from username",
        ));
    }
    Step::Done {
        response: Vec::new(),
        principal: KafkaPrincipal::user(user),
        expires_at_ms: None,
    }
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check};

    #[test]
    fn checks_users_like_kafka() {
        let users = HashMap::from([("alice".to_owned(), "alice-secret".to_owned())]);
        let Step::Done { principal, .. } = authenticate(b"\0alice\0alice-secret", &users) else {
            panic!("refused");
        };
        check!(principal.to_string() == "User:alice");
        check!(matches!(
            authenticate(b"alice\0alice\0alice-secret", &users),
            Step::Done { .. }
        ));
        let message = |token: &[u8]| match authenticate(token, &users) {
            Step::Failed(f) => f.client_message,
            other => panic!("accepted {token:?}: {other:?}"),
        };
        check!(
            message(b"\0alice\0wrong")
                .unwrap()
                .contains("Invalid username or password")
        );
        check!(
            message(b"\0bob\0alice-secret")
                .unwrap()
                .contains("Invalid username or password")
        );
        check!(
            message(b"\0\0pw")
                .unwrap()
                .contains("username not specified")
        );
        check!(
            message(b"\0alice\0")
                .unwrap()
                .contains("password not specified")
        );
        check!(
            message(b"bob\0alice\0alice-secret")
                .unwrap()
                .contains("authorization id")
        );
        check!(message(b"garbage").is_none());
    }
}
