use super::*;

#[test]
fn both_constructors_share_the_defaults() {
    let from_config = ConnectPlan::from_config(&ValkeyConfig::default()).unwrap();
    let from_url = ConnectPlan::from_url("redis://localhost:6379/").unwrap();
    assert_eq!(from_config.endpoint, from_url.endpoint);
    assert_eq!(from_config.connect_timeout, defaults::CONNECT_TIMEOUT);
    assert_eq!(from_url.connect_timeout, defaults::CONNECT_TIMEOUT);
    assert_eq!(from_config.response_timeout, defaults::RESPONSE_TIMEOUT);
    assert_eq!(from_url.response_timeout, defaults::RESPONSE_TIMEOUT);
    // A URL's poller settings are the defaults, the lag limit from the
    // write options the handle gets (see `Valkey::from_connection`).
    assert_eq!(from_config.poll, Some(PollOptions::default()));
    assert_eq!(from_url.poll, None);
    let m = from_url.manager_config();
    assert_eq!(m.min_delay(), defaults::RECONNECT_MIN_DELAY);
    assert_eq!(m.max_delay(), Some(defaults::RECONNECT_MAX_DELAY));
    assert_eq!(m.number_of_retries(), defaults::RECONNECT_RETRIES);
    assert_eq!(m.connection_timeout(), Some(defaults::CONNECT_TIMEOUT));
    assert_eq!(m.response_timeout(), Some(defaults::RESPONSE_TIMEOUT));
    assert_eq!(format!("{:?}", from_config.manager_config()), format!("{m:?}"));
}

#[test]
fn endpoints_are_host_port() {
    assert_eq!(ConnectPlan::from_url("redis://:pw@h:7000/").unwrap().endpoint, "h:7000");
    #[cfg(any(feature = "tls-native-tls", feature = "tls-rustls"))]
    assert_eq!(ConnectPlan::from_url("rediss://[::1]:7000/").unwrap().endpoint, "[::1]:7000");
    let config =
        ValkeyConfig { connection_string: crate::config::Secret::new("h:1,password=pw"), ..Default::default() };
    assert_eq!(ConnectPlan::from_config(&config).unwrap().endpoint, "h:1");
    // Never the text before an `@`, should a host ever hold credentials.
    assert_eq!(endpoint_of(&ConnectionAddr::Tcp("u:pw@h".into(), 1)), "h:1");
    assert_eq!(endpoint_of(&ConnectionAddr::Tcp("::1".into(), 1)), "[::1]:1");
}

#[test]
fn a_bad_url_never_quotes_itself() {
    let Err(crate::Error::InvalidArgument(msg)) = ConnectPlan::from_url("redis://u:Pw-In-Url@h:notaport/") else {
        panic!("a bad URL is an invalid argument")
    };
    assert!(!msg.contains("Pw-In-Url"), "{msg}");
}

#[test]
fn server_errors_are_classified_by_code() {
    let auth = redis::RedisError::from((redis::ErrorKind::AuthenticationFailed, "auth"));
    assert!(is_auth(&auth));
    let io = redis::RedisError::from(std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "NOAUTH in text"));
    assert!(!is_auth(&io), "judged by kind and code, not text");
}

#[test]
fn every_client_turns_nagle_off() {
    assert!(tcp_settings().nodelay());
    // A URL's client and a configured one alike.
    let plan = ConnectPlan::from_url("redis://127.0.0.1:6379/").unwrap();
    let client = plan.client(None).unwrap();
    assert!(client.get_connection_info().tcp_settings().nodelay());
    let config = ValkeyConfig::default();
    let plan = ConnectPlan::from_config(&config).unwrap();
    assert!(plan.client(None).unwrap().get_connection_info().tcp_settings().nodelay());
}

/// A build without a TLS backend refuses a request for TLS by the
/// feature's name, before any network traffic, rather than at connect time
/// with the `redis` crate's words.
#[cfg(not(any(feature = "tls-native-tls", feature = "tls-rustls")))]
#[test]
fn tls_without_a_backend_is_refused_naming_the_feature() {
    let err = ConnectPlan::from_url("rediss://h:7000/").err().expect("TLS refused");
    assert!(matches!(&err, crate::Error::InvalidArgument(m) if m.contains("`tls-native-tls`")), "{err}");
    for s in ["h:1,ssl=true", "rediss://h:1/"] {
        let config = ValkeyConfig { connection_string: crate::config::Secret::new(s), ..Default::default() };
        let err = config.validate().expect_err("TLS refused");
        assert!(
            err.problems
                .iter()
                .any(|p| p.setting == "MicroDcs:Valkey:ConnectionString" && p.problem.contains("`tls-native-tls`")),
            "{err}"
        );
    }
    // A client certificate asks for TLS too.
    let config = ValkeyConfig {
        tls_cert_file: Some("client.crt".into()),
        tls_key_file: Some("client.key".into()),
        ..Default::default()
    };
    let err = config.validate().expect_err("TLS refused");
    assert!(
        err.problems.iter().any(|p| p.setting == "MicroDcs:Valkey:TlsCertFile" && p.problem.contains("`tls-rustls`")),
        "{err}"
    );
}

/// A build without the `sentinel` feature refuses a service name, naming
/// the feature, instead of treating the Sentinels as data nodes.
#[cfg(not(feature = "sentinel"))]
#[test]
fn a_service_name_without_the_sentinel_feature_is_refused_naming_it() {
    let config = ValkeyConfig {
        connection_string: crate::config::Secret::new("h:26379,serviceName=mymaster"),
        ..Default::default()
    };
    let err = config.validate().expect_err("service refused");
    assert!(
        err.problems
            .iter()
            .any(|p| p.setting == "MicroDcs:Valkey:ConnectionString" && p.problem.contains("`sentinel`")),
        "{err}"
    );
    assert!(ConnectPlan::from_config(&config).is_err());
}
