//! Redis URLs as logs and messages show them.

/// `url` with its password hidden, for logs and messages:
/// `redis://user:secret@host:6379` → `redis://user:***@host:6379`.
pub fn without_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_owned() };
    let Some((userinfo, host)) = rest.rsplit_once('@') else { return url.to_owned() };
    let user = userinfo.split_once(':').map_or("", |(user, _)| user);
    if userinfo.contains(':') { format!("{scheme}://{user}:***@{host}") } else { format!("{scheme}://***@{host}") }
}

#[cfg(test)]
mod tests {
    use super::without_password;

    #[test]
    fn passwords_are_hidden() {
        assert_eq!(without_password("redis://127.0.0.1:6379"), "redis://127.0.0.1:6379");
        assert_eq!(without_password("redis://u:s3cret@h:1/0"), "redis://u:***@h:1/0");
        assert_eq!(without_password("rediss://:s3cret@h:1"), "rediss://:***@h:1");
        assert_eq!(without_password("redis://s3cret@h:1"), "redis://***@h:1");
    }
}
