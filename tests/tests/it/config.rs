//! Configuration: defaults, environment and serde loading of every option,
//! and each validation error (pure: no server).

use std::time::Duration;

use microdcs_valkey::{MicroDcsConfig, config::ValkeyConfig, config::defaults};

fn tmp_file(name: &str, content: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("microdcs-config-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, content).unwrap();
    p
}

#[test]
fn defaults_match_the_documented_table() {
    let c = MicroDcsConfig::default();
    let v = &c.valkey;
    assert_eq!(v.connection_string.expose(), "localhost:6379");
    assert_eq!(v.user, None);
    assert_eq!(v.password_file, None);
    assert_eq!(v.tls_ca_file, None);
    assert!(!v.require_tls);
    assert_eq!(v.key_prefix, "microdcs");
    assert_eq!(v.poll_interval, Duration::from_secs(1));
    assert_eq!(v.scope_refresh_interval, Duration::from_secs(5));
    assert_eq!(v.write_attempts, 4);
    assert_eq!(v.write_retry_delay, Duration::from_millis(100));
    assert_eq!(v.change_stream_max_length, 5000);
    assert_eq!(v.op_history_length, 8);
    assert_eq!(c.dedupe_lease, defaults::DEDUPE_LEASE);
    assert_eq!(c.dedupe_retention, defaults::DEDUPE_RETENTION);
    assert!(c.validate().is_ok());
    assert_eq!(MicroDcsConfig::from_vars(Vec::<(String, String)>::new()).unwrap(), c);
}

#[test]
fn every_option_from_the_environment() {
    let pw = tmp_file("pw", "secret\n");
    let ca = tmp_file("ca.pem", "-----BEGIN CERTIFICATE-----\n");
    let vars = [
        ("APP_MicroDcs__Valkey__ConnectionString", "cache:6380".to_owned()),
        ("APP_MicroDcs__Valkey__User", "app".into()),
        ("APP_MicroDcs__Valkey__PasswordFile", pw.display().to_string()),
        ("APP_MicroDcs__Valkey__TlsCaFile", ca.display().to_string()),
        ("APP_MicroDcs__Valkey__RequireTls", "true".into()),
        ("APP_MicroDcs__Valkey__KeyPrefix", "island-7".into()),
        ("APP_MicroDcs__Valkey__PollInterval", "250ms".into()),
        ("APP_MicroDcs__Valkey__ScopeRefreshInterval", "00:00:10".into()),
        ("APP_MicroDcs__Valkey__WriteAttempts", "6".into()),
        ("APP_MicroDcs__Valkey__WriteRetryDelay", "50ms".into()),
        ("APP_MicroDcs__Valkey__ChangeStreamMaxLength", "10000".into()),
        ("APP_MicroDcs__Valkey__OpHistoryLength", "3".into()),
        ("APP_MicroDcs__Valkey__TombstoneRetention", "2h".into()),
        ("app_microdcs__valkey__connecttimeout", "2s".into()),
        ("APP_MicroDcs__Valkey__ResponseTimeout", "1500ms".into()),
        ("APP_MicroDcs__DedupeLease", "45s".into()),
        ("APP_MicroDcs__DedupeRetention", "2h".into()),
        ("PATH", "/usr/bin".into()),
    ];
    let c = MicroDcsConfig::from_vars(vars).unwrap();
    let v = &c.valkey;
    assert_eq!(v.connection_string.expose(), "cache:6380");
    assert_eq!(v.user.as_deref(), Some("app"));
    assert_eq!(v.password_file.as_deref(), Some(pw.as_path()));
    assert_eq!(v.tls_ca_file.as_deref(), Some(ca.as_path()));
    assert!(v.require_tls);
    assert_eq!(v.key_prefix, "island-7");
    assert_eq!(v.poll_interval, Duration::from_millis(250));
    assert_eq!(v.scope_refresh_interval, Duration::from_secs(10));
    assert_eq!(v.write_attempts, 6);
    assert_eq!(v.write_retry_delay, Duration::from_millis(50));
    assert_eq!(v.change_stream_max_length, 10_000);
    assert_eq!(v.op_history_length, 3);
    assert_eq!(v.tombstone_retention, Duration::from_secs(7200));
    assert_eq!(v.connect_timeout, Duration::from_secs(2));
    assert_eq!(v.response_timeout, Duration::from_millis(1500));
    assert_eq!(c.dedupe_lease, Duration::from_secs(45));
    assert_eq!(c.dedupe_retention, Duration::from_secs(7200));
}

#[test]
fn every_option_from_serde() {
    let pw = tmp_file("pw2", "secret");
    let json = serde_json::json!({
        "Valkey": {
            "ConnectionString": "redis://cache:6380/1",
            "User": "app",
            "PasswordFile": pw,
            "RequireTls": false,
            "KeyPrefix": "island-7",
            "PollInterval": "2s",
            "ScopeRefreshInterval": "1m",
            "WriteAttempts": 3,
            "WriteRetryDelay": "20ms",
            "ChangeStreamMaxLength": 100,
            "OpHistoryLength": 64,
            "TombstoneRetention": "30s",
            "ConnectTimeout": "3s",
            "ResponseTimeout": "4s"
        },
        "DedupeLease": "10s",
        "DedupeRetention": "1d"
    });
    let c: MicroDcsConfig = serde_json::from_value(json).unwrap();
    c.validate().unwrap();
    let v = &c.valkey;
    assert_eq!(v.connection_string.expose(), "redis://cache:6380/1");
    assert_eq!(v.user.as_deref(), Some("app"));
    assert_eq!(v.poll_interval, Duration::from_secs(2));
    assert_eq!(v.scope_refresh_interval, Duration::from_secs(60));
    assert_eq!(v.write_attempts, 3);
    assert_eq!(v.write_retry_delay, Duration::from_millis(20));
    assert_eq!(v.change_stream_max_length, 100);
    assert_eq!(v.op_history_length, 64);
    assert_eq!(v.tombstone_retention, Duration::from_secs(30));
    assert_eq!(v.connect_timeout, Duration::from_secs(3));
    assert_eq!(v.response_timeout, Duration::from_secs(4));
    assert_eq!(c.dedupe_lease, Duration::from_secs(10));
    assert_eq!(c.dedupe_retention, Duration::from_secs(86_400));
    // Missing keys take the defaults; unknown keys and bad durations are errors naming the key.
    let c: ValkeyConfig = serde_json::from_value(serde_json::json!({"KeyPrefix": "x"})).unwrap();
    assert_eq!(c.write_attempts, defaults::WRITE_ATTEMPTS);
    let e = serde_json::from_value::<ValkeyConfig>(serde_json::json!({"KeyPrefx": "x"})).unwrap_err().to_string();
    assert!(e.contains("KeyPrefx"), "{e}");
    let e =
        serde_json::from_value::<ValkeyConfig>(serde_json::json!({"PollInterval": "soon"})).unwrap_err().to_string();
    assert!(e.contains("soon"), "{e}");
}

fn problems(vars: &[(&str, &str)]) -> Vec<(String, String)> {
    MicroDcsConfig::from_vars(vars.iter().map(|(k, v)| (format!("APP_MicroDcs__{k}"), (*v).to_owned())))
        .unwrap_err()
        .problems
        .into_iter()
        .map(|p| (p.setting, p.problem))
        .collect()
}

fn one(vars: &[(&str, &str)], setting: &str, contains: &str) {
    let ps = problems(vars);
    assert!(
        ps.iter().any(|(s, p)| s == setting && p.contains(contains)),
        "expected `{setting}` with `{contains}`, got {ps:?}"
    );
}

#[test]
fn each_validation_error_names_the_setting() {
    one(&[("Valkey__KeyPrefix", "a:")], "MicroDcs:Valkey:KeyPrefix", "ends with `:`");
    one(&[("Valkey__KeyPrefix", "a*b")], "MicroDcs:Valkey:KeyPrefix", "contains `*`");
    one(&[("Valkey__KeyPrefix", "")], "MicroDcs:Valkey:KeyPrefix", "empty");
    one(&[("Valkey__ConnectionString", "a:1,b:2,a:1")], "MicroDcs:Valkey:ConnectionString", "named twice");
    one(&[("Valkey__KeyPrefix", "{a}{b}")], "MicroDcs:Valkey:KeyPrefix", "one non-empty hash tag");
    one(&[("Valkey__ConnectionString", "h:notaport")], "MicroDcs:Valkey:ConnectionString", "port");
    one(&[("Valkey__ConnectionString", "h:1,frobnicate=1")], "MicroDcs:Valkey:ConnectionString", "unknown option");
    one(&[("Valkey__TlsCaFile", "/no/such/ca.pem")], "MicroDcs:Valkey:TlsCaFile", "does not exist");
    one(&[("Valkey__PasswordFile", "/no/such/pw")], "MicroDcs:Valkey:PasswordFile", "does not exist");
    one(&[("Valkey__RequireTls", "true")], "MicroDcs:Valkey:RequireTls", "TLS is off");
    one(&[("Valkey__RequireTls", "maybe")], "MicroDcs:Valkey:RequireTls", "not true or false");
    one(&[("Valkey__PollInterval", "5")], "MicroDcs:Valkey:PollInterval", "no unit");
    one(&[("Valkey__PollInterval", "0s")], "MicroDcs:Valkey:PollInterval", "longer than zero");
    one(&[("Valkey__ScopeRefreshInterval", "x")], "MicroDcs:Valkey:ScopeRefreshInterval", "not a duration");
    one(&[("Valkey__WriteAttempts", "0")], "MicroDcs:Valkey:WriteAttempts", "at least 1");
    one(&[("Valkey__WriteAttempts", "many")], "MicroDcs:Valkey:WriteAttempts", "whole number");
    one(&[("Valkey__WriteRetryDelay", "1 fortnight")], "MicroDcs:Valkey:WriteRetryDelay", "unknown unit");
    one(&[("Valkey__ChangeStreamMaxLength", "0")], "MicroDcs:Valkey:ChangeStreamMaxLength", "at least 1");
    one(&[("Valkey__OpHistoryLength", "0")], "MicroDcs:Valkey:OpHistoryLength", "between 1 and 64");
    one(&[("Valkey__OpHistoryLength", "65")], "MicroDcs:Valkey:OpHistoryLength", "between 1 and 64");
    one(&[("Valkey__OpHistoryLength", "eight")], "MicroDcs:Valkey:OpHistoryLength", "whole number");
    one(&[("Valkey__TombstoneRetention", "500ms")], "MicroDcs:Valkey:TombstoneRetention", "at least 1s");
    one(&[("Valkey__TombstoneRetention", "soon")], "MicroDcs:Valkey:TombstoneRetention", "");
    one(&[("DedupeLease", "0s")], "MicroDcs:DedupeLease", "at least 1ms");
    // Under a millisecond is what the server cannot hold: refused, not rounded.
    one(&[("DedupeRetention", "500us")], "MicroDcs:DedupeRetention", "at least 1ms");
    one(&[("Valkey__WriteReplicaTimeout", "0.5ms")], "MicroDcs:Valkey:WriteReplicaTimeout", "between 1ms and 60s");
    one(&[("DedupeRetention", "never")], "MicroDcs:DedupeRetention", "not a duration");
    one(&[("Valkey__Colour", "blue")], "MicroDcs:Valkey:Colour", "unknown setting");
    // PasswordFile together with a password in the connection string.
    let pw = tmp_file("pw3", "x");
    let pw = pw.display().to_string();
    one(
        &[("Valkey__ConnectionString", "h:1,password=hunter2"), ("Valkey__PasswordFile", &pw)],
        "MicroDcs:Valkey:PasswordFile",
        "together with a password",
    );
    one(
        &[("Valkey__ConnectionString", "redis://u:hunter2@h:1"), ("Valkey__PasswordFile", &pw)],
        "MicroDcs:Valkey:PasswordFile",
        "together with a password",
    );
    // Every problem is reported, not only the first.
    assert_eq!(
        problems(&[("Valkey__KeyPrefix", "a:"), ("Valkey__WriteAttempts", "0"), ("Valkey__PollInterval", "0s")]).len(),
        3
    );
    // TLS on by the connection string or a CA file satisfies RequireTls.
    let ca = tmp_file("ca2.pem", "-----BEGIN CERTIFICATE-----\n").display().to_string();
    assert!(
        MicroDcsConfig::from_vars([
            ("APP_MicroDcs__Valkey__RequireTls", "true"),
            ("APP_MicroDcs__Valkey__ConnectionString", "rediss://h:1")
        ])
        .is_ok()
    );
    assert!(
        MicroDcsConfig::from_vars([
            ("APP_MicroDcs__Valkey__RequireTls", "true"),
            ("APP_MicroDcs__Valkey__TlsCaFile", ca.as_str())
        ])
        .is_ok()
    );
    assert!(
        MicroDcsConfig::from_vars([
            ("APP_MicroDcs__Valkey__RequireTls", "true"),
            ("APP_MicroDcs__Valkey__ConnectionString", "h:1,ssl=true")
        ])
        .is_ok()
    );
}

#[test]
fn secrets_never_show() {
    for cs in ["redis://app:hunter2@h:1/0", "h:1,user=app,password=hunter2,ssl=false"] {
        let c = MicroDcsConfig::from_vars([("APP_MicroDcs__Valkey__ConnectionString", cs)]).unwrap();
        for text in [
            format!("{c:?}"),
            format!("{:?}", c.valkey),
            c.valkey.to_string(),
            format!("{:?}", c.valkey.endpoint().unwrap()),
        ] {
            assert!(!text.contains("hunter2"), "{text}");
            assert!(text.contains("***") || text.contains("h"), "{text}");
        }
    }
    let pw = tmp_file("pw4", "x").display().to_string();
    let e = MicroDcsConfig::from_vars([
        ("APP_MicroDcs__Valkey__ConnectionString", "h:1,password=hunter2"),
        ("APP_MicroDcs__Valkey__PasswordFile", pw.as_str()),
    ])
    .unwrap_err();
    assert!(!e.to_string().contains("hunter2") && !format!("{e:?}").contains("hunter2"));
}

#[test]
fn durations_too_long_are_config_errors_naming_the_setting() {
    let nines = format!("{}s", "9".repeat(400));
    for text in [
        "99999999999999999999d",
        nines.as_str(),
        "10000000000000000000s10000000000000000000s",
        "213503982334601.23:59:59",
        "36501d",
    ] {
        one(&[("Valkey__PollInterval", text)], "MicroDcs:Valkey:PollInterval", "too long");
        one(&[("DedupeRetention", text)], "MicroDcs:DedupeRetention", "too long");
        let mut c = MicroDcsConfig::default();
        let e = c.set("Valkey:ConnectTimeout", text).unwrap_err();
        assert!(e.contains("100 years"), "{e}");
        let e = serde_json::from_value::<MicroDcsConfig>(serde_json::json!({"Valkey": {"ResponseTimeout": text}}))
            .unwrap_err()
            .to_string();
        assert!(e.contains("too long"), "{e}");
    }
    // The bound itself is accepted and documented.
    assert_eq!(
        MicroDcsConfig::from_vars([("APP_MicroDcs__Valkey__PollInterval", "36500d")]).unwrap().valkey.poll_interval,
        defaults::MAX_DURATION
    );
    // A value set in code beyond the bound is refused by validate.
    let mut c = MicroDcsConfig::default();
    c.valkey.response_timeout = Duration::MAX;
    let e = c.validate().unwrap_err();
    assert_eq!(e.problems[0].setting, "MicroDcs:Valkey:ResponseTimeout");
    assert!(e.problems[0].problem.contains("too long"), "{e}");
}

#[test]
fn settings_that_would_break_at_run_time_are_refused() {
    for opt in ["connectTimeout", "syncTimeout", "asyncTimeout"] {
        one(
            &[("Valkey__ConnectionString", &format!("h:1,{opt}=0"))],
            "MicroDcs:Valkey:ConnectionString",
            "longer than zero",
        );
    }
    one(
        &[("Valkey__ChangeStreamMaxLength", "9223372036854775808")],
        "MicroDcs:Valkey:ChangeStreamMaxLength",
        "at most",
    );
    assert!(
        MicroDcsConfig::from_vars([("APP_MicroDcs__Valkey__ChangeStreamMaxLength", "9223372036854775807")]).is_ok()
    );
    // The dedupe stores take 1 ms..30 days.
    one(&[("DedupeLease", "31d")], "MicroDcs:DedupeLease", "at most 30 days");
    one(&[("DedupeRetention", "30d1s")], "MicroDcs:DedupeRetention", "at most 30 days");
    assert!(MicroDcsConfig::from_vars([("APP_MicroDcs__DedupeRetention", "30d")]).is_ok());
}

#[test]
fn serde_runs_the_same_validation_as_the_environment() {
    let err = |json: serde_json::Value| serde_json::from_value::<MicroDcsConfig>(json).unwrap_err().to_string();
    // Unknown fields, at the top and in the Valkey section.
    let e = err(serde_json::json!({"DedupeLeese": "1s"}));
    assert!(e.contains("DedupeLeese"), "{e}");
    let e = err(serde_json::json!({"Valkey": {"KeyPrefx": "x"}}));
    assert!(e.contains("KeyPrefx"), "{e}");
    // Every invalid setting, by name, in one error.
    let e = err(serde_json::json!({
        "Valkey": {
            "PollInterval": "0s",
            "ConnectTimeout": "0s",
            "WriteAttempts": 0,
            "KeyPrefix": "a:",
            "ChangeStreamMaxLength": 9_223_372_036_854_775_808_u64,
            "OpHistoryLength": 65,
            "ConnectionString": "h:1,syncTimeout=0",
            "ResponseTimeout": "soon"
        },
        "DedupeLease": "0s",
        "DedupeRetention": "0s"
    }));
    for setting in [
        "MicroDcs:Valkey:PollInterval",
        "MicroDcs:Valkey:ConnectTimeout",
        "MicroDcs:Valkey:WriteAttempts",
        "MicroDcs:Valkey:KeyPrefix",
        "MicroDcs:Valkey:ChangeStreamMaxLength",
        "MicroDcs:Valkey:OpHistoryLength",
        "MicroDcs:Valkey:ConnectionString",
        "MicroDcs:Valkey:ResponseTimeout",
        "MicroDcs:DedupeLease",
        "MicroDcs:DedupeRetention",
    ] {
        assert!(e.contains(&format!("{setting}: ")), "{setting} missing in: {e}");
    }
    // The section alone is checked the same way.
    let e =
        serde_json::from_value::<ValkeyConfig>(serde_json::json!({"ResponseTimeout": "0s"})).unwrap_err().to_string();
    assert!(e.contains("MicroDcs:Valkey:ResponseTimeout: must be longer than zero"), "{e}");
    // Values written as strings, as .NET configuration stores them.
    let c: MicroDcsConfig = serde_json::from_value(serde_json::json!({
        "Valkey": {"WriteAttempts": "6", "RequireTls": "false", "ChangeStreamMaxLength": "10"}
    }))
    .unwrap();
    assert_eq!((c.valkey.write_attempts, c.valkey.change_stream_max_length), (6, 10));
    // The password never shows in these errors.
    let e = err(serde_json::json!({"Valkey": {"ConnectionString": "h:1,password=Serde-Pw-3,bogus=1"}}));
    assert!(e.contains("MicroDcs:Valkey:ConnectionString") && !e.contains("Serde-Pw-3"), "{e}");
}

#[test]
fn an_unknown_setting_suggests_the_closest_known_name() {
    // A typo, a case slip with a typo, a setting outside its section, and
    // a typo in the outer section: each names the setting it probably meant.
    one(
        &[("Valkey__ConectionString", "h:1")],
        "MicroDcs:Valkey:ConectionString",
        "did you mean `Valkey:ConnectionString`?",
    );
    one(&[("valkey__keyprefx", "p")], "MicroDcs:valkey:keyprefx", "did you mean `Valkey:KeyPrefix`?");
    one(&[("PollInterval", "1s")], "MicroDcs:PollInterval", "did you mean `Valkey:PollInterval`?");
    one(&[("DedupeLeese", "1s")], "MicroDcs:DedupeLeese", "did you mean `DedupeLease`?");
    // Nothing close: no guess.
    let ps = problems(&[("Valkey__Colour", "blue")]);
    assert!(ps.iter().all(|(_, p)| !p.contains("did you mean")), "{ps:?}");
    // The same from serde, in either section.
    let e = serde_json::from_value::<ValkeyConfig>(serde_json::json!({"ConectionString": "h:1"})).unwrap_err();
    assert!(e.to_string().contains("did you mean `Valkey:ConnectionString`?"), "{e}");
    let e = serde_json::from_value::<MicroDcsConfig>(serde_json::json!({"Valkey": {"KeyPrefx": "p"}})).unwrap_err();
    assert!(e.to_string().contains("did you mean `Valkey:KeyPrefix`?"), "{e}");
    // Every name a suggestion can give is one `set` accepts.
    for name in MicroDcsConfig::SETTINGS {
        let err = MicroDcsConfig::default().set(name, "");
        assert!(err.as_ref().is_ok() || !err.as_ref().unwrap_err().contains("unknown setting"), "{name}: {err:?}");
    }
}

/// The poller's consumer settings: read from the environment and from
/// serde, defaults as documented, bounds refused by name.
#[test]
fn consumer_scopes_at_once_and_lag_limit_are_settings() {
    let d = MicroDcsConfig::default();
    assert_eq!(d.valkey.consumer_scopes_at_once, 8);
    assert_eq!(d.valkey.consumer_lag_limit, None, "unset: half of ChangeStreamMaxLength");
    let c = MicroDcsConfig::from_vars([
        ("APP_MicroDcs__Valkey__ConsumerScopesAtOnce", "2"),
        ("APP_MicroDcs__Valkey__ConsumerLagLimit", "300"),
    ])
    .unwrap();
    assert_eq!(c.valkey.consumer_scopes_at_once, 2);
    assert_eq!(c.valkey.consumer_lag_limit, Some(300));
    let c = MicroDcsConfig::from_vars([("APP_MicroDcs__Valkey__ConsumerLagLimit", "")]).unwrap();
    assert_eq!(c.valkey.consumer_lag_limit, None, "empty is unset");
    let c: MicroDcsConfig = serde_json::from_value(serde_json::json!({
        "Valkey": { "ConsumerScopesAtOnce": 1024, "ConsumerLagLimit": "5000" }
    }))
    .unwrap();
    assert_eq!(c.valkey.consumer_scopes_at_once, 1024);
    assert_eq!(c.valkey.consumer_lag_limit, Some(5000));
    let at_once = "MicroDcs:Valkey:ConsumerScopesAtOnce";
    one(&[("Valkey__ConsumerScopesAtOnce", "0")], at_once, "between 1 and 1024");
    one(&[("Valkey__ConsumerScopesAtOnce", "1025")], at_once, "between 1 and 1024");
    one(&[("Valkey__ConsumerScopesAtOnce", "many")], at_once, "whole number");
    let lag = "MicroDcs:Valkey:ConsumerLagLimit";
    one(&[("Valkey__ConsumerLagLimit", "0")], lag, "between 1 and ChangeStreamMaxLength (5000)");
    one(&[("Valkey__ConsumerLagLimit", "5001")], lag, "between 1 and ChangeStreamMaxLength (5000)");
    one(
        &[("Valkey__ChangeStreamMaxLength", "100"), ("Valkey__ConsumerLagLimit", "101")],
        lag,
        "between 1 and ChangeStreamMaxLength (100)",
    );
    one(&[("Valkey__ConsumerLagLimit", "-1")], lag, "whole number");
    let e =
        serde_json::from_value::<ValkeyConfig>(serde_json::json!({"ConsumerScopesAtOnce": 0})).unwrap_err().to_string();
    assert!(e.contains("MicroDcs:Valkey:ConsumerScopesAtOnce"), "{e}");
}

/// `WriteReplicas=all` asks every write to wait for every replica the
/// Sentinels know; a number asks for that many; anything else is refused
/// by the setting's name.
#[test]
fn write_replicas_all_is_every_replica() {
    let c = MicroDcsConfig::from_vars([("APP_MicroDcs__Valkey__WriteReplicas", "all")]).unwrap();
    let d = c.valkey.write_options().durability;
    assert!(d.every_replica, "{d:?}");
    let c: MicroDcsConfig =
        serde_json::from_value(serde_json::json!({ "Valkey": { "WriteReplicas": "ALL" } })).unwrap();
    assert!(c.valkey.write_options().durability.every_replica);
    let c = MicroDcsConfig::from_vars([("APP_MicroDcs__Valkey__WriteReplicas", "2")]).unwrap();
    let d = c.valkey.write_options().durability;
    assert!(!d.every_replica && d.replicas == 2, "{d:?}");
    assert!(!MicroDcsConfig::default().valkey.write_options().durability.every_replica);
    one(&[("Valkey__WriteReplicas", "most")], "MicroDcs:Valkey:WriteReplicas", "nor `all`");
}
