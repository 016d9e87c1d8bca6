//! What the service is configured with: the configuration file, the settings merged from
//! flags, environment and file, the store URL, and the value types they are written in.

pub(crate) mod admin_token;
pub(crate) mod bounds;
pub(crate) mod byte_size;
pub(crate) mod declare;
pub(crate) mod leases;
pub(crate) mod policy_text;
pub(crate) mod serve_args;
pub(crate) mod server_section;
pub(crate) mod service_file;
pub(crate) mod setting_values;
pub(crate) mod settings;
#[cfg(test)]
mod settings_doc;
pub(crate) mod store_url;
pub(crate) mod values;
