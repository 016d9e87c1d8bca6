//! Whether Redis Sentinel knows the primary a store is configured for: a name no sentinel
//! monitors is a configuration that will never work, not an outage (issue 35.5).
//!
//! redis-rs answers "master name not found" both for a name no sentinel knows and for a
//! known primary that every sentinel flags as down (a failover under way), so that error
//! alone cannot tell a refusal from an outage; `SENTINEL GET-MASTER-ADDR-BY-NAME` can (it
//! names a known primary's address even while it is down).

use crate::refusal::Refused;
use std::time::Duration;

/// How long each sentinel may take to answer.
const ASK_TIMEOUT: Duration = Duration::from_secs(2);

/// Asks each of `sentinels` (`redis://host:port` URLs) for `primary_name`.
///
/// # Errors
///
/// Every sentinel that answered knows no such primary (and at least one answered). An
/// unreachable sentinel is no answer: sentinels that cannot be reached are an outage.
pub async fn verify_primary_name(sentinels: &[String], primary_name: &str) -> Result<(), Refused> {
    let mut unknown_to = Vec::new();
    for url in sentinels {
        match ask(url, primary_name).await {
            Some(true) => return Ok(()),
            Some(false) => unknown_to.push(crate::url::without_password(url)),
            None => {}
        }
    }
    if unknown_to.is_empty() {
        return Ok(());
    }
    Err(Refused::new(format!(
        "the sentinels {} know no primary named `{primary_name}`: correct the name after the last `/` of the \
         store URL to one their `sentinel monitor` lines name",
        unknown_to.join(",")
    )))
}

/// Whether the sentinel at `url` knows `primary_name`; `None` when it does not answer.
async fn ask(url: &str, primary_name: &str) -> Option<bool> {
    let asking = async {
        let client = redis::Client::open(url).ok()?;
        let mut connection = client.get_multiplexed_async_connection().await.ok()?;
        let mut command = redis::cmd("SENTINEL");
        command.arg("GET-MASTER-ADDR-BY-NAME").arg(primary_name);
        let address: Option<Vec<String>> = command.query_async(&mut connection).await.ok()?;
        Some(address.is_some())
    };
    tokio::time::timeout(ASK_TIMEOUT, asking).await.ok().flatten()
}
