//! Redis URLs: read once, with what is wrong said in Sluice's words, and shown without
//! their password.

/// `url` with its password hidden, for logs and messages:
/// `redis://user:secret@host:6379` → `redis://user:***@host:6379`.
pub fn without_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_owned() };
    let Some((userinfo, host)) = rest.rsplit_once('@') else { return url.to_owned() };
    let user = userinfo.split_once(':').map_or("", |(user, _)| user);
    if userinfo.contains(':') { format!("{scheme}://{user}:***@{host}") } else { format!("{scheme}://***@{host}") }
}

/// Checks that `url` is a Redis URL a store can connect to.
///
/// # Errors
///
/// What is wrong with it, naming the URL (password hidden).
pub fn check_redis_url(url: &str) -> Result<(), String> {
    connection_info(url).map(drop)
}

/// The connection `url` describes.
pub(crate) fn connection_info(url: &str) -> Result<redis::ConnectionInfo, String> {
    redis::IntoConnectionInfo::into_connection_info(url).map_err(|error| {
        let text = error.to_string();
        let why = match text.split(" - ").next().unwrap_or_default() {
            "Redis URL did not parse" => {
                "is not a Redis URL (redis://[USER:PASSWORD@]HOST:PORT[/DB], rediss:// for TLS): \
                 check the port, and characters such as `@` or `/` in the password (percent-encode them)"
            }
            "Missing hostname" => "names no host (redis://HOST:PORT)",
            "Invalid database number" => "has a database (after the last `/`) that is not a number",
            "Invalid protocol version" => "has a `protocol=` that is neither resp2 nor resp3",
            "only #insecure is supported as URL fragment" => "ends in a fragment other than #insecure",
            "Cannot connect to a wildcard address (0.0.0.0 or ::)" => {
                "names a wildcard address (0.0.0.0 or ::), which cannot be connected to"
            }
            _ => return format!("`{}` cannot be used: {text}", without_password(url)),
        };
        format!("`{}` {why}", without_password(url))
    })
}

#[cfg(test)]
mod tests {
    use super::{check_redis_url, without_password};

    #[test]
    fn passwords_are_hidden() {
        assert_eq!(without_password("redis://127.0.0.1:6379"), "redis://127.0.0.1:6379");
        assert_eq!(without_password("redis://u:s3cret@h:1/0"), "redis://u:***@h:1/0");
        assert_eq!(without_password("rediss://:s3cret@h:1"), "rediss://:***@h:1");
        assert_eq!(without_password("redis://s3cret@h:1"), "redis://***@h:1");
    }

    #[test]
    fn a_bad_url_is_explained_without_its_password() {
        assert_eq!(check_redis_url("rediss://u:pw@h:6380/0#insecure"), Ok(()));
        for (url, why) in [
            ("redis://u:s3cret@h:port", "is not a Redis URL"),
            ("redis://h:1/zero", "database"),
            ("rediss://h:1/#trust-me", "fragment other than #insecure"),
            ("redis://h:1/?protocol=resp9", "resp2 nor resp3"),
        ] {
            let error = check_redis_url(url).unwrap_err();
            assert!(
                error.contains(why) && !error.contains("s3cret") && !error.contains("InvalidClientConfig"),
                "{url}: {error}"
            );
        }
    }
}
