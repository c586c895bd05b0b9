//! The option names of the `host:port,name=value` connection string form:
//! those parsing takes or ignores, which are also the names that end a
//! password when masking one. A leaf, so that parsing
//! (`connection_string`) and masking (`secret`) both import it and not
//! each other.

/// The options of the `host:port,name=value` form this parser takes (in
/// lower case; [`IGNORED_OPTIONS`] besides): the names that can end a
/// password when masking it.
pub(super) const OPTIONS: &[&str] =
    &["user", "password", "ssl", "defaultdatabase", "connecttimeout", "synctimeout", "asynctimeout", "servicename"];

/// Whether `name` (any case) is an option of the `name=value` form, taken
/// or ignored.
pub(super) fn is_option(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    OPTIONS.contains(&name.as_str()) || IGNORED_OPTIONS.contains(&name.as_str())
}

/// StackExchange.Redis options that change nothing here (accepted, ignored).
pub(super) const IGNORED_OPTIONS: &[&str] = &[
    "abortconnect",
    "allowadmin",
    "connectretry",
    "keepalive",
    "resolvedns",
    "tiebreaker",
    "version",
    "checkcertificaterevocation",
    "configcheckseconds",
    "name",
];
