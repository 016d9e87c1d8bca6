//! The one parser of store URLs (`--store`, `SLUICE_STORE`, `server.store`, and
//! `sluice simulate --store`), and the connection to the store it names.

use sluice_core::StoreError;
use sluice_redis::{RedisSettings, RedisStore, check_redis_url, verify_primary_name, without_password};
use std::fmt;

/// Where the service keeps its states.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum StoreChoice {
    /// The embedded store.
    Memory,
    /// A standalone Redis.
    Redis(String),
    /// A Redis Cluster, through these node URLs.
    Cluster(Vec<String>),
    /// The primary Redis Sentinel names.
    Sentinel {
        /// The sentinels' URLs.
        sentinels: Vec<String>,
        /// The primary's name, as the sentinels know it.
        primary: String,
        /// How to reach the primary (user, password), as a URL whose host is ignored.
        redis: String,
    },
}

impl StoreChoice {
    /// `memory`, `redis://…` / `rediss://…`, `redis+cluster://HOST:PORT[,HOST:PORT…]`, or
    /// `redis+sentinel://[USER:PASSWORD@]HOST:PORT[,HOST:PORT…]/PRIMARY_NAME` (the user and
    /// password are the primary's).
    pub(crate) fn parse(text: &str) -> Result<StoreChoice, String> {
        let unknown = || {
            format!(
                "unknown store `{}`: use memory, redis://HOST:PORT, redis+cluster://HOST:PORT[,HOST:PORT…] \
                 or redis+sentinel://HOST:PORT[,HOST:PORT…]/PRIMARY_NAME",
                without_password(text)
            )
        };
        let choice = if text == "memory" {
            StoreChoice::Memory
        } else if let Some(rest) = text.strip_prefix("redis+sentinel://") {
            parse_sentinel(rest).map_err(|why| format!("{}: {why}", unknown()))?
        } else if let Some(nodes) = text.strip_prefix("redis+cluster://") {
            let nodes: Vec<&str> = nodes.split(',').collect();
            if nodes.iter().any(|node| node.trim().is_empty()) {
                return Err(format!("{}: a cluster node is empty", unknown()));
            }
            StoreChoice::Cluster(nodes.iter().map(|node| format!("redis://{}", node.trim())).collect())
        } else if text.starts_with("redis://") || text.starts_with("rediss://") {
            StoreChoice::Redis(text.to_owned())
        } else {
            return Err(unknown());
        };
        choice.urls().iter().try_for_each(|url| check_redis_url(url))?;
        Ok(choice)
    }

    /// Every Redis URL the choice connects with.
    fn urls(&self) -> Vec<&str> {
        match self {
            StoreChoice::Memory => Vec::new(),
            StoreChoice::Redis(url) => vec![url.as_str()],
            StoreChoice::Cluster(urls) => urls.iter().map(String::as_str).collect(),
            StoreChoice::Sentinel { sentinels, redis, .. } => {
                sentinels.iter().map(String::as_str).chain([redis.as_str()]).collect()
            }
        }
    }

    /// Opens the Redis store this choice names without waiting for an outage to end (a
    /// server starts during one, its checks following the failure mode), once Redis, if it
    /// answers, takes the configuration; `None` for the embedded store.
    ///
    /// # Errors
    ///
    /// The store cannot be opened (a TLS file), or Redis refuses the configuration (a wrong
    /// password, an ACL, a certificate): the cause and the fix, in one line.
    pub(crate) async fn open_redis(&self, settings: RedisSettings) -> Option<anyhow::Result<RedisStore>> {
        let opened = match self {
            StoreChoice::Memory => return None,
            StoreChoice::Redis(url) => RedisStore::open(url, settings).await,
            StoreChoice::Cluster(urls) => RedisStore::open_cluster(urls, settings).await,
            StoreChoice::Sentinel { sentinels, primary, redis } => {
                RedisStore::open_sentinel(sentinels, primary, redis, settings).await
            }
        };
        let store = match opened {
            Ok(store) => store,
            Err(error) => return Some(Err(anyhow::anyhow!("cannot open the store {self}: {}", explain(&error)))),
        };
        let verified = match self {
            StoreChoice::Sentinel { sentinels, primary, .. } => verify_primary_name(sentinels, primary).await,
            _ => Ok(()),
        };
        let verified = match verified {
            Ok(()) => store.verify_configuration().await,
            refused => refused,
        };
        Some(match verified {
            Ok(()) => Ok(store),
            Err(refused) => Err(anyhow::anyhow!("the store {self} refuses Sluice's configuration: {refused}")),
        })
    }

    /// Connects to the Redis store this choice names, waiting until it answers; `None` for
    /// the embedded store.
    pub(crate) async fn connect_redis(&self, settings: RedisSettings) -> Option<anyhow::Result<RedisStore>> {
        let connected = match self {
            StoreChoice::Memory => return None,
            StoreChoice::Redis(url) => RedisStore::connect(url, settings).await,
            StoreChoice::Cluster(urls) => RedisStore::connect_cluster(urls, settings).await,
            StoreChoice::Sentinel { sentinels, primary, redis } => {
                RedisStore::open_sentinel(sentinels, primary, redis, settings).await
            }
        };
        Some(connected.map_err(|error| anyhow::anyhow!("cannot connect to the store {self}: {}", with_causes(&error))))
    }
}

impl fmt::Display for StoreChoice {
    /// The store, with any password in its URLs hidden (this goes to logs and the console).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreChoice::Memory => f.write_str("memory"),
            StoreChoice::Redis(url) => f.write_str(&without_password(url)),
            StoreChoice::Cluster(urls) => {
                let shown: Vec<String> = urls.iter().map(|url| without_password(url)).collect();
                write!(f, "cluster {}", shown.join(","))
            }
            StoreChoice::Sentinel { sentinels, primary, .. } => {
                write!(f, "primary {primary} of sentinels {}", sentinels.join(","))
            }
        }
    }
}

/// The parts of `[USER:PASSWORD@]HOST:PORT[,HOST:PORT…]/PRIMARY_NAME`.
fn parse_sentinel(text: &str) -> Result<StoreChoice, &'static str> {
    let (credentials, rest) = match text.rsplit_once('@') {
        Some((credentials, rest)) => (Some(credentials), rest),
        None => (None, text),
    };
    let Some((nodes, primary)) = rest.split_once('/') else {
        return Err("the primary's name is missing (…/PRIMARY_NAME)");
    };
    if primary.is_empty() || primary.contains('/') {
        return Err("the primary's name is missing (…/PRIMARY_NAME)");
    }
    let nodes: Vec<&str> = nodes.split(',').map(str::trim).collect();
    if nodes.iter().any(|node| node.is_empty()) {
        return Err("a sentinel is empty");
    }
    let sentinels = nodes.iter().map(|node| format!("redis://{node}")).collect();
    let redis = credentials.map_or_else(|| "redis://primary/".to_owned(), |user| format!("redis://{user}@primary/"));
    Ok(StoreChoice::Sentinel { sentinels, primary: primary.to_owned(), redis })
}

/// What went wrong opening a store: a refusal's own words (`StoreError::Refused` says
/// "request refused by the store", which is about checks), else the error and its causes.
fn explain(error: &StoreError) -> String {
    match error {
        StoreError::Refused(why) => why.clone(),
        other => with_causes(other),
    }
}

/// `error` and each of its sources, joined by ": " (a store error's own text says only
/// what failed; its sources say why).
fn with_causes(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        // Some errors print their source in their own text already.
        let cause_text = cause.to_string();
        if !text.ends_with(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::StoreChoice;

    #[test]
    fn every_store_url_form_is_read() {
        assert_eq!(StoreChoice::parse("memory"), Ok(StoreChoice::Memory));
        assert_eq!(StoreChoice::parse("redis://h:1"), Ok(StoreChoice::Redis("redis://h:1".to_owned())));
        assert_eq!(StoreChoice::parse("rediss://h:1"), Ok(StoreChoice::Redis("rediss://h:1".to_owned())));
        let cluster = StoreChoice::parse("redis+cluster://a:1, b:2").map(|choice| choice.to_string());
        assert_eq!(cluster, Ok("cluster redis://a:1,redis://b:2".to_owned()));
        let sentinel = StoreChoice::parse("redis+sentinel://u:pw@a:1,b:2/main");
        let expected = StoreChoice::Sentinel {
            sentinels: vec!["redis://a:1".to_owned(), "redis://b:2".to_owned()],
            primary: "main".to_owned(),
            redis: "redis://u:pw@primary/".to_owned(),
        };
        assert_eq!(sentinel, Ok(expected));
        assert_eq!(
            StoreChoice::parse("redis+sentinel://a:1/main").map(|c| c.to_string()),
            Ok("primary main of sentinels redis://a:1".to_owned())
        );
        for bad in [
            "redis+sentinel://a:1",
            "redis+sentinel://a:1/",
            "redis+sentinel://a:1,,b:2/m",
            "redis+sentinel://:pw@a:1/m/x",
        ] {
            let error = StoreChoice::parse(bad).unwrap_err();
            assert!(error.contains("redis+sentinel://HOST:PORT"), "{bad}: {error}");
            assert!(!error.contains(":pw@"), "{bad}: the password is shown: {error}");
        }
        for bad in ["", "mem", "http://h:1", "redis+cluster://", "redis+cluster://a:1,,b:2"] {
            let error = StoreChoice::parse(bad).unwrap_err();
            assert!(error.contains("use memory, redis://HOST:PORT"), "{bad}: {error}");
        }
        // Issue 36.3: a URL `serve` could not connect with is refused here, in Sluice's words.
        for bad in ["redis://u:pw@h:port", "redis+cluster://a:1,b:x", "rediss://h:1/#trust"] {
            let error = StoreChoice::parse(bad).unwrap_err();
            assert!(!error.contains("InvalidClientConfig") && !error.contains(":pw@"), "{bad}: {error}");
        }
    }
}
