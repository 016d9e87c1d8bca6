//! The overhead benches' apps served over a real socket, one at a time, for an end-to-end
//! load test (`scripts/tower_loadtest.sh`): `GET /` answering `ok`, bare or behind a limiter
//! that never rejects, on a current-thread runtime (one core).
//!
//! ```text
//! cargo run --release -p sluice-tower --example overhead_server -- sluice_tower_no_fields
//! ```
//!
//! The variant is the first argument: `no_limiter`, `sluice_tower`, `sluice_tower_no_fields`,
//! `tower_governor`, `tower_governor_headers` or `pass_through`. `ADDR` sets the address
//! (127.0.0.1:3000).

#[allow(dead_code)] // the request builder is for the in-process benches
#[path = "../benches/support/apps.rs"]
mod apps;

use std::net::SocketAddr;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let variant = std::env::args().nth(1).unwrap_or_else(|| "sluice_tower".to_owned());
    let Some((_, app)) = apps::apps().into_iter().find(|(name, _)| *name == variant) else {
        let names: Vec<_> = apps::apps().iter().map(|(name, _)| *name).collect();
        return Err(format!("unknown variant {variant:?}; one of {}", names.join(", ")).into());
    };
    let addr = std::env::var("ADDR").unwrap_or_else(|_| "127.0.0.1:3000".to_owned());
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    println!("{variant} listening on http://{}", listener.local_addr()?);
    axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>()).await?;
    Ok(())
}
